//! A client's TCP connection, whatever it speaks: what it has sent and not
//! yet been handled, the control bytes (responses, interleaved RTCP)
//! waiting to go out, and the timers every connection keeps
//! (request_timeout, idle_timeout, a bounded wait for a client to read an
//! error). What a protocol keeps of a connection, it keeps itself, by the
//! connection's id.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::time::Duration;


use super::transport::Transport;
use crate::table::{Id, TOKEN_SLOTS, Table};
use crate::clock::Mono;

pub type ConnId = Id<Conn>;
pub type Conns = Table<Conn>;

/// Poll tokens below this are the event loop's own (listeners, sockets,
/// signals); from it on, connections'.
pub const FIRST_TOKEN: usize = 16;

/// From here on, the tokens of RTSP sessions sent over UDP (the fan-out's
/// news of frames for them), which are not their connection's business.
pub const SESSION_TOKENS: usize = TOKEN_SLOTS / 2;

pub fn conns() -> Conns {
    Table::with_capacity(SESSION_TOKENS - FIRST_TOKEN)
}

/// The poll token of a connection: what its readiness events, and the
/// fan-out's news of frames for it, carry.
pub fn token(ci: ConnId) -> mio::Token {
    ci.token(FIRST_TOKEN)
}

/// The connection a token names, if it names one.
pub fn of_token(t: mio::Token) -> Option<ConnId> {
    Id::from_token(t, FIRST_TOKEN..SESSION_TOKENS)
}

/// Unsent control bytes after which a connection's requests are no longer
/// read (a client pipelining requests without reading replies).
pub const CTRL_HIGH_WATER: usize = 64 << 10;

/// The port a connection came in on: each has its own limits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Port {
    Rtsp,
    Http,
}

/// Which part handles it now (an HTTP connection becomes an RTSP one as a
/// tunnel's GET, or a tunnel's POST).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Rtsp,
    Http,
    TunnelPost,
}

pub struct Conn {
    /// Its byte stream (plain TCP today).
    pub socket: Transport,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub port: Port,
    pub kind: Kind,
    pub opened: Mono,
    /// A request on it passed the gate (a user's credentials, or a client
    /// that needs none): it is no longer pending (admission pushes out
    /// pending connections first).
    pub admitted: bool,
    /// The user its first authenticated request named (max_connections_per_user).
    pub user: Option<String>,
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
    /// The length of the body the request being handled waits for.
    pub body_wanted: Option<usize>,
}

impl Conn {
    pub fn new(socket: Transport, peer: SocketAddr, local: SocketAddr, port: Port) -> Conn {
        let now = Mono::now();
        Conn {
            socket,
            peer,
            local,
            port,
            kind: match port {
                Port::Rtsp => Kind::Rtsp,
                Port::Http => Kind::Http,
            },
            opened: now,
            admitted: false,
            user: None,
            inbuf: Vec::new(),
            ctrl: Vec::new(),
            ctrl_sent: 0,
            closing: None,
            read_paused: false,
            stale_nonce: false,
            request_started: None,
            last_input: now,
            body_wanted: None,
        }
    }

    /// A request on it passed the gate, as `user` when users are set.
    /// Whether it named a user for the first time on this connection: then
    /// admission checks that user's count (max_connections_per_user).
    pub fn passed(&mut self, user: Option<&str>) -> bool {
        self.admitted = true;
        match (&self.user, user) {
            (None, Some(u)) => {
                self.user = Some(u.to_owned());
                true
            }
            _ => false,
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
            if self.body_wanted.is_none() {
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
            match self
                .socket
                .write(self.ctrl.get(self.ctrl_sent..).unwrap_or_default())
            {
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

    /// Its request did not arrive within request_timeout (`secs`): what
    /// came is dropped and it closes once the answer is out.
    pub fn timed_out(&mut self, now: Mono, secs: u32) {
        log::info!(
            "{}: request not complete after {secs} s (request_timeout); closing",
            self.peer
        );
        self.inbuf.clear();
        self.request_started = None;
        self.closing = Some(now);
    }

    /// Most bytes of unhandled input held: a request head's limit, or the
    /// body a request waits for if that is larger.
    pub fn input_cap(&self, max_request_size: usize) -> usize {
        self.body_wanted.unwrap_or(0).max(max_request_size)
    }
}

/// What the event loop does once a part's call returns: connections to
/// handle again and connections closed.
#[derive(Default)]
pub struct After {
    /// Connections with input left to handle, after the others' turn.
    pub resume: Vec<ConnId>,
    /// Connections taken out of the table: the loop deregisters them and
    /// tells the part that held them.
    pub closed: Vec<Closed>,
    /// Connections that named a user for the first time: the loop checks
    /// the user's count (max_connections_per_user).
    pub authenticated: Vec<ConnId>,
    /// Sign-ins whose password must be checked against a hash first.
    pub verify: Vec<super::verifier::Job>,
}

pub struct Closed {
    pub id: ConnId,
    pub conn: Conn,
    pub why: String,
}

impl Closed {
    pub fn kind(&self) -> Kind {
        self.conn.kind
    }

    pub fn peer(&self) -> SocketAddr {
        self.conn.peer
    }
}

/// Takes `ci` out of the table (nothing reaches it after this) for the
/// loop to finish closing.
pub fn close(conns: &mut Conns, after: &mut After, ci: ConnId, why: &str) {
    if let Some(conn) = conns.remove(ci) {
        after.closed.push(Closed {
            id: ci,
            conn,
            why: why.to_owned(),
        });
    }
}

/// Connections past a deadline at a housekeeping pass.
#[derive(Default)]
pub struct Overdue {
    /// Closing after an error for longer than the grace time.
    pub stuck: Vec<ConnId>,
    /// A request begun longer ago than request_timeout.
    pub slow: Vec<ConnId>,
    /// Nothing read for idle_timeout, carrying no stream.
    pub idle: Vec<ConnId>,
}

/// Which connections are past a deadline at `now`; `streaming` tells
/// whether one carries a stream (then it is never idle).
pub fn overdue(
    conns: &Conns,
    now: Mono,
    [grace, request, idle]: [Duration; 3],
    streaming: impl Fn(ConnId, &Conn) -> bool,
) -> Overdue {
    let mut o = Overdue::default();
    for (ci, c) in conns.iter() {
        if let Some(t) = c.closing {
            if now.saturating_sub(t) > grace {
                o.stuck.push(ci);
            }
        } else if c
            .request_started
            .is_some_and(|t| now.saturating_sub(t) > request)
        {
            o.slow.push(ci);
        } else if !streaming(ci, c)
            && c.ctrl_pending() == 0
            && now.saturating_sub(c.last_input) > idle
        {
            o.idle.push(ci);
        }
    }
    o
}
