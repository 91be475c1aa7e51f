//! A client's TCP connection, RTSP or HTTP: what it has sent and not yet
//! been handled, the control bytes (responses, interleaved RTCP) waiting to
//! go out, and the timers every connection keeps (request_timeout,
//! idle_timeout, a bounded wait for a client to read an error).

use std::io::{self, Write};
use std::net::SocketAddr;

use mio::net::TcpStream;

use super::http::HttpConn;
use super::rtsp::RtspConn;
use super::table::{Id, Table};
use crate::clock::Mono;

pub type ConnId = Id<Conn>;
pub type Conns = Table<Conn>;

/// Unsent control bytes after which a connection's requests are no longer
/// read (a client pipelining requests without reading replies).
pub const CTRL_HIGH_WATER: usize = 64 << 10;

pub enum Proto {
    Rtsp(RtspConn),
    Http(HttpConn),
}

/// The port a connection came in on: each has its own limits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Port {
    Rtsp,
    Http,
}

pub struct Conn {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub port: Port,
    pub opened: Mono,
    /// A request on it passed the gate (a user's credentials, or a client
    /// that needs none): it is no longer one a newcomer may push out.
    pub admitted: bool,
    pub inbuf: Vec<u8>,
    /// Responses and interleaved RTCP (RTSP), response heads (HTTP).
    pub ctrl: Vec<u8>,
    pub ctrl_sent: usize,
    /// Set after an unrecoverable protocol error: close once `ctrl` is out.
    pub closing: Option<Mono>,
    pub read_paused: bool,
    /// The last request came with the right password and an expired nonce:
    /// the 401 says `stale=true`.
    pub stale_nonce: bool,
    /// When the unfinished message in `inbuf` began (request_timeout).
    pub request_started: Option<Mono>,
    /// The last bytes read (idle_timeout).
    pub last_input: Mono,
    pub proto: Proto,
}

impl Conn {
    pub fn new(
        stream: TcpStream,
        peer: SocketAddr,
        local: SocketAddr,
        port: Port,
        proto: Proto,
    ) -> Conn {
        let now = Mono::now();
        Conn {
            stream,
            peer,
            local,
            port,
            opened: now,
            admitted: false,
            inbuf: Vec::new(),
            ctrl: Vec::new(),
            ctrl_sent: 0,
            closing: None,
            read_paused: false,
            stale_nonce: false,
            request_started: None,
            last_input: now,
            proto,
        }
    }

    /// The connection at `ci` while it has input left to handle: where each
    /// protocol's input loop starts a turn.
    pub fn with_input(conns: &mut Conns, ci: ConnId) -> Option<&mut Conn> {
        let conn = conns.get_mut(ci)?;
        (!conn.input_done()).then_some(conn)
    }

    /// Whether there is no input to handle: the connection is closing (what
    /// came is dropped) or all of it is handled (a buffer a large request
    /// grew is let go).
    pub fn input_done(&mut self) -> bool {
        if self.closing.is_some() {
            self.inbuf.clear();
            return true;
        }
        if self.inbuf.is_empty() {
            // A request whose body has not begun is still under way.
            if self.body_wanted().is_none() {
                self.request_started = None;
            }
            if self.inbuf.capacity() > 4096 {
                self.inbuf = Vec::new();
            }
            return true;
        }
        false
    }

    pub fn ctrl_pending(&self) -> usize {
        self.ctrl.len() - self.ctrl_sent
    }

    /// Writes control bytes until none are left (true) or the socket is
    /// full (false).
    pub fn write_ctrl(&mut self) -> io::Result<bool> {
        while self.ctrl_pending() > 0 {
            match self.stream.write(&self.ctrl[self.ctrl_sent..]) {
                Ok(n) => self.ctrl_sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.ctrl.clear();
        self.ctrl_sent = 0;
        if self.ctrl.capacity() > CTRL_HIGH_WATER {
            self.ctrl.shrink_to(4096);
        }
        Ok(true)
    }

    pub fn rtsp(&self) -> Option<&RtspConn> {
        match &self.proto {
            Proto::Rtsp(r) => Some(r),
            Proto::Http(_) => None,
        }
    }

    pub fn rtsp_mut(&mut self) -> Option<&mut RtspConn> {
        match &mut self.proto {
            Proto::Rtsp(r) => Some(r),
            Proto::Http(_) => None,
        }
    }

    /// The length of the body a request on it waits for.
    pub fn body_wanted(&self) -> Option<usize> {
        match &self.proto {
            Proto::Http(h) => h.body_wanted(),
            Proto::Rtsp(_) => None,
        }
    }

    /// Most bytes of unhandled input held: a request head's limit, or the
    /// body an HTTP request waits for if that is larger.
    pub fn input_cap(&self, max_request_size: usize) -> usize {
        self.body_wanted().unwrap_or(0).max(max_request_size)
    }

    pub fn http_mut(&mut self) -> Option<&mut HttpConn> {
        match &mut self.proto {
            Proto::Http(h) => Some(h),
            Proto::Rtsp(_) => None,
        }
    }

    /// Whether the connection carries a stream (an RTSP session, an MJPEG
    /// stream, a tunnel's POST): such connections are not idle.
    pub fn streaming(&self) -> bool {
        match &self.proto {
            Proto::Rtsp(r) => !r.sessions.is_empty(),
            Proto::Http(h) => h.streaming(),
        }
    }
}
