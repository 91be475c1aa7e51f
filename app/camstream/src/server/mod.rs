//! The server: one event loop over the listening sockets (RTSP, HTTP), the
//! client connections, the shared UDP sockets, the frame source and signals.
//! A reader finds here the loop and what every connection shares (accepting,
//! reading, limits and timeouts, closing); [`fanout`] the frames and how each
//! reaches its clients; [`rtsp`] and [`http`] the two protocols, each a
//! client of the one fan-out.

mod admission;
mod audit;
mod conn;
mod fanout;
pub mod frame;
mod http;
mod net;
mod onvif;
mod rtsp;
mod sub;
mod table;

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use camstream_rtp::Packetizer;
use camstream_rtsp::auth::Auth;
use mio::net::{TcpListener, UdpSocket};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::clock::{Mono, RtpClock, WallClockWatch, wall_now};
use crate::config::{self, Config};
use crate::intake::Intake;
use crate::latency::SendLatency;
use crate::source::{FrameSource, StreamInfo};
use admission::{Admission, Refusal};
use conn::{Conn, ConnId, Conns, Port, Proto};
use fanout::{Stream, Totals};
use frame::Pool;
use rtsp::{SessionId, Sessions};
use table::Id;

const LISTENER: Token = Token(0);
const RTP: Token = Token(1);
const RTCP: Token = Token(2);
const SOURCE: Token = Token(3);
const SIGNAL: Token = Token(4);
const REPORT_SIGNAL: Token = Token(5);
const HTTP_LISTENER: Token = Token(6);
const DISCOVERY: Token = Token(7);
const ADDRESS_CHANGES: Token = Token(8);
const SUB_READY: Token = Token(9);
const FIRST_CONNECTION: usize = 16;

/// Whether the event loop goes on after a turn.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Turn {
    Go,
    Stop,
}

/// How long a connection closing after an error may take to drain.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
const TICK: Duration = Duration::from_millis(250);
/// Reads of 4 KiB one connection gets per turn, so that a client sending
/// without pause cannot keep the loop from the others.
const READS_PER_TURN: usize = 16;
/// Kernel send buffer of a client connection (Linux doubles it). Without a
/// limit, autotuning lets a client that stops reading park megabytes of
/// stale frames in the kernel; with it, the bounded per-client queue is what
/// decides, and a slow client gets fresh whole frames.
const TCP_SEND_BUFFER: usize = 256 << 10;
const STATS_EVERY: Duration = Duration::from_secs(60);
/// What the camera is doing, as the source last said.
struct Camera {
    present: bool,
    /// E.g. "MJPG 1280x720 at 30 fps from /dev/video0 (UVC Camera)".
    mode: String,
}

pub struct Server {
    cfg: Config,
    poll: Poll,
    listener: TcpListener,
    /// None when http_port = 0.
    http_listener: Option<TcpListener>,
    conns: Conns,
    /// Connections with input to handle or read, after the others' turn.
    resume_reading: Vec<ConnId>,
    /// Reused lists of ids, so sending a frame allocates nothing.
    scratch_conns: Vec<ConnId>,
    scratch_sessions: Vec<SessionId>,

    // RTSP: sessions and the UDP sockets they share.
    rtp_socket: UdpSocket,
    /// The GSO segment size set on `rtp_socket` (the MTU), if the kernel
    /// took it; turned off if a route refuses GSO sends.
    udp_gso: Option<usize>,
    rtcp_socket: UdpSocket,
    rtp_port: u16,
    sessions: Sessions,
    session_ids: HashMap<String, SessionId>,
    session_by_rtcp: HashMap<SocketAddr, SessionId>,
    udp_backlog: VecDeque<SessionId>,
    udp_blocked: bool,
    cname: String,
    /// RTSP over HTTP: the GET connection of each x-sessioncookie.
    tunnels: HashMap<String, ConnId>,

    // Frames.
    source: Option<Box<dyn FrameSource>>,
    camera: Camera,
    intake: Intake,
    stream: Stream,
    totals: Totals,
    started: Mono,
    /// Unix time of the start, for process_start_time_seconds.
    started_unix: f64,
    last_log: Option<Mono>,
    frames_at_last_log: u64,

    signals: UnixStream,
    /// The handlers that write to `signals` and `report_signal`, removed
    /// with the server (a server made and dropped again, as the fuzz
    /// target does, leaves no handler and no descriptor behind).
    signal_ids: Vec<signal_hook::SigId>,
    /// SIGUSR1: log the send latency and start a new measurement.
    report_signal: UnixStream,
    send_latency: SendLatency,
    latency_since: Mono,
    /// Who may stream, if the config names users.
    auth: Option<Auth>,
    /// Who gets a connection, and the count of those refused.
    admission: Admission,
    /// Notices the wall clock being set, once per housekeeping pass.
    wall_clock: WallClockWatch,
    onvif: onvif::Onvif,
    /// WS-Discovery, when ONVIF is on.
    discovery: Option<onvif::discovery::Discovery>,
    /// The detection sub-stream, unless [streams.sub] turns it off.
    sub: Option<sub::Sub>,
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    random_fill(&mut b);
    u64::from_ne_bytes(b)
}

/// Fills `buf` from the kernel's random number generator with getrandom(2),
/// which waits until the generator is seeded and, while it waits, has the
/// kernel gather entropy itself (about a second). The getrandom crate in a
/// static binary cannot find the libc function and instead polls
/// /dev/random, which only waits: on the emulated Pi, whose hardware RNG
/// seeds nothing, the first DESCRIBE after boot held the event loop for
/// over 45 s that way.
fn random_fill(buf: &mut [u8]) {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: the pointer and length describe `rest`, which the kernel
        // only writes into.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            assert!(
                e.kind() == std::io::ErrorKind::Interrupted,
                "getrandom: {e}"
            );
            continue;
        }
        done += n as usize;
    }
}

/// Binds the RTP/RTCP port pair: `port` and `port + 1`, or a free even/odd
/// pair when `port` is 0.
fn bind_udp_pair(ip: IpAddr, port: u16) -> Result<(UdpSocket, UdpSocket, u16)> {
    if port != 0 {
        let rtp = UdpSocket::bind(SocketAddr::new(ip, port))
            .with_context(|| format!("cannot bind UDP port {port} (rtp_port) on {ip}"))?;
        let rtcp = UdpSocket::bind(SocketAddr::new(ip, port + 1))
            .with_context(|| format!("cannot bind UDP port {} (rtp_port + 1) on {ip}", port + 1))?;
        return Ok((rtp, rtcp, port));
    }
    for _ in 0..64 {
        let rtp = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        let p = rtp.local_addr()?.port();
        if p % 2 != 0 || p == u16::MAX {
            continue;
        }
        if let Ok(rtcp) = UdpSocket::bind(SocketAddr::new(ip, p + 1)) {
            return Ok((rtp, rtcp, p));
        }
    }
    bail!("cannot find a free pair of UDP ports for RTP and RTCP on {ip}")
}

impl Server {
    /// Binds every socket; a port in use is a start-up error.
    pub fn bind(cfg: Config, info: StreamInfo) -> Result<Server> {
        let addr = SocketAddr::new(cfg.listen, cfg.rtsp_port);
        let listener = TcpListener::bind(addr)
            .with_context(|| format!("cannot listen on {addr} (rtsp_port)"))?;
        let http_listener = match cfg.http_port {
            0 => None,
            port => {
                let addr = SocketAddr::new(cfg.listen, port);
                Some(
                    TcpListener::bind(addr)
                        .with_context(|| format!("cannot listen on {addr} (http_port)"))?,
                )
            }
        };
        let (rtp_socket, rtcp_socket, rtp_port) = bind_udp_pair(cfg.listen, cfg.rtp_port)?;
        // Room for a few 1080p frames; a full buffer only delays UDP sends.
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&rtp_socket, 1 << 20);
        let udp_gso = match net::set_gso(&rtp_socket, cfg.mtu) {
            Ok(()) => Some(cfg.mtu),
            Err(e) => {
                log::info!("UDP segmentation offload not available ({e}): one datagram per send");
                None
            }
        };

        let poll = Poll::new()?;
        let (signals, signal_writer) = UnixStream::pair()?;
        signals.set_nonblocking(true)?;
        let mut signal_ids = Vec::new();
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_ids.push(signal_hook::low_level::pipe::register(
                sig,
                signal_writer.try_clone()?,
            )?);
        }
        let (report_signal, report_writer) = UnixStream::pair()?;
        report_signal.set_nonblocking(true)?;
        signal_ids.push(signal_hook::low_level::pipe::register(
            signal_hook::consts::SIGUSR1,
            report_writer,
        )?);
        let (wall, _) = wall_now();
        let mut server = Server {
            poll,
            listener,
            http_listener,
            conns: Conns::new(),
            resume_reading: Vec::new(),
            scratch_conns: Vec::new(),
            scratch_sessions: Vec::new(),
            rtp_socket,
            udp_gso,
            rtcp_socket,
            rtp_port,
            sessions: Sessions::new(),
            session_ids: HashMap::new(),
            session_by_rtcp: HashMap::new(),
            udp_backlog: VecDeque::new(),
            udp_blocked: false,
            cname: format!("camstream@{}", hostname()),
            tunnels: HashMap::new(),
            source: None,
            camera: Camera {
                present: true,
                mode: String::new(),
            },
            // Room for a camera that changes its size (clients keep the
            // first), none for a header claiming gigapixels; at most the
            // largest size the config takes.
            intake: Intake::new(
                cfg.quality,
                (4 * info.width as usize * info.height as usize).min(8192 * 8192),
            )?,
            stream: Stream {
                info,
                packetizer: Packetizer::new(random_u64() as u32, random_u64() as u16, cfg.mtu)?,
                clock: RtpClock::new(Mono::now(), random_u64() as u32),
                pool: Pool::new(cfg.client_queue + 2),
                last: None,
                sdp_session_id: random_u64() >> 1,
                warned_size_change: false,
            },
            totals: Totals::default(),
            started: Mono::now(),
            started_unix: wall as f64 / 1e9,
            last_log: None,
            frames_at_last_log: 0,
            auth: (!cfg.users.is_empty()).then(|| {
                let mut key = [0u8; 32];
                random_fill(&mut key);
                Auth::new(
                    config::REALM,
                    cfg.users.clone(),
                    cfg.basic_auth,
                    key,
                    u64::from(cfg.nonce_lifetime),
                )
            }),
            signals,
            signal_ids,
            report_signal,
            send_latency: SendLatency::default(),
            latency_since: Mono::now(),
            admission: Admission::new(cfg.max_clients * 2 + 16, cfg.max_connections_per_ip),
            wall_clock: WallClockWatch::default(),
            onvif: onvif::Onvif::default(),
            discovery: None,
            sub: None,
            cfg,
        };
        if let Some(sc) = server.cfg.sub {
            match sub::Sub::start(
                sc,
                &server.stream.info,
                server.cfg.mtu,
                server.poll.registry(),
                SUB_READY,
            ) {
                Ok(s) => server.sub = Some(s),
                // The main stream is what matters; say why there is no other.
                Err(e) => log::warn!("no sub-stream: {e:#}"),
            }
        }
        // Announced only where NVRs can reach it: not when it listens on
        // loopback alone (as the tests' cameras do).
        if server.cfg.onvif && server.cfg.http_port != 0 && !server.cfg.listen.is_loopback() {
            let endpoint = onvif::endpoint();
            match onvif::discovery::Discovery::open(
                endpoint,
                server.cfg.http_port,
                server.poll.registry(),
                DISCOVERY,
                ADDRESS_CHANGES,
                random_fill,
            ) {
                Ok(d) => server.discovery = Some(d),
                // The camera still streams; NVRs can be given its address.
                Err(e) => log::warn!("WS-Discovery off: {e}"),
            }
        }
        let r = server.poll.registry();
        r.register(&mut server.listener, LISTENER, Interest::READABLE)?;
        if let Some(l) = &mut server.http_listener {
            r.register(l, HTTP_LISTENER, Interest::READABLE)?;
        }
        r.register(
            &mut server.rtp_socket,
            RTP,
            Interest::READABLE | Interest::WRITABLE,
        )?;
        r.register(&mut server.rtcp_socket, RTCP, Interest::READABLE)?;
        r.register(
            &mut SourceFd(&server.signals.as_raw_fd()),
            SIGNAL,
            Interest::READABLE,
        )?;
        r.register(
            &mut SourceFd(&server.report_signal.as_raw_fd()),
            REPORT_SIGNAL,
            Interest::READABLE,
        )?;
        Ok(server)
    }

    pub fn rtsp_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_listener.as_ref()?.local_addr().ok()
    }

    /// Serves until SIGINT or SIGTERM, or until the source fails.
    pub fn run(mut self, mut source: Box<dyn FrameSource>) -> Result<()> {
        source.register(self.poll.registry(), SOURCE)?;
        self.camera = Camera {
            present: source.present(),
            mode: source.mode(),
        };
        self.source = Some(source);
        let mut events = Events::with_capacity(256);
        let mut next_tick = Mono::now();
        loop {
            let timeout = if self.resume_reading.is_empty() {
                next_tick.saturating_sub(Mono::now())
            } else {
                Duration::ZERO
            };
            if self.turn(&mut events, timeout)? == Turn::Stop {
                return Ok(());
            }
            let now = Mono::now();
            if now >= next_tick {
                self.housekeeping(now);
                next_tick = now.add(TICK);
            }
        }
    }

    /// One turn of the event loop: waits up to `timeout` for events and
    /// handles them, then the connections that were left input to handle.
    pub fn turn(&mut self, events: &mut Events, timeout: Duration) -> Result<Turn> {
        if let Err(e) = self.poll.poll(events, Some(timeout)) {
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(Turn::Go);
            }
            return Err(e.into());
        }
        // Handlers are named for their event: `<source>_readable` or
        // `_writable` for readiness, `<item>_<what happened>` for one
        // item (frame_captured, rtcp_received).
        for ev in events.iter() {
            match ev.token() {
                LISTENER => self.accept(Port::Rtsp),
                HTTP_LISTENER => self.accept(Port::Http),
                RTP => {
                    if ev.is_readable() {
                        self.rtp_readable();
                    }
                    if ev.is_writable() {
                        self.rtp_writable();
                    }
                }
                RTCP => self.rtcp_readable(),
                DISCOVERY => {
                    if let Some(d) = &mut self.discovery {
                        d.udp_readable();
                    }
                }
                SUB_READY => self.sub_readable(),
                ADDRESS_CHANGES => {
                    if let Some(d) = &mut self.discovery {
                        d.netlink_readable();
                    }
                }
                SOURCE => self.source_readable()?,
                SIGNAL => {
                    log::info!("stopping");
                    if let Some(d) = &mut self.discovery {
                        d.bye();
                    }
                    self.shutdown();
                    return Ok(Turn::Stop);
                }
                REPORT_SIGNAL => {
                    let mut buf = [0u8; 16];
                    while matches!((&self.report_signal).read(&mut buf), Ok(n) if n > 0) {}
                    self.log_send_latency();
                }
                token => {
                    // A closed connection's events name its generation,
                    // and find nothing: not the next one in its slot.
                    let Some(ci) = Id::from_token(token, FIRST_CONNECTION) else {
                        continue;
                    };
                    if ev.is_writable() {
                        self.flush_conn(ci);
                    }
                    if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                        self.conn_readable(ci);
                    }
                }
            }
        }
        for ci in std::mem::take(&mut self.resume_reading) {
            // What is already in its buffer first: a complete request is
            // answered without waiting for another byte.
            self.process_input(ci);
            self.conn_readable(ci);
        }
        Ok(Turn::Go)
    }

    fn source_readable(&mut self) -> Result<()> {
        let mut source = self.source.take().expect("set in run");
        let r = source.ready(&mut |f| self.frame_captured(f));
        self.note_camera(&*source);
        self.source = Some(source);
        r
    }

    fn note_camera(&mut self, source: &dyn FrameSource) {
        let present = source.present();
        if present != self.camera.present {
            self.camera.present = present;
            self.camera.mode = source.mode();
            if !present {
                self.camera_lost();
            }
        }
    }

    fn accept(&mut self, port: Port) {
        loop {
            let listener = match port {
                Port::Http => self
                    .http_listener
                    .as_ref()
                    .expect("registered only if bound"),
                Port::Rtsp => &self.listener,
            };
            match listener.accept() {
                Ok((stream, peer)) => self.connected(stream, peer, port),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log::warn!("accept: {e}");
                    return;
                }
            }
        }
    }

    /// A new connection: admitted (maybe in place of one that has not
    /// authenticated), or answered 503 and closed.
    fn connected(&mut self, mut stream: mio::net::TcpStream, peer: SocketAddr, port: Port) {
        let open: Vec<_> = self
            .conns
            .iter()
            .map(|(id, c)| admission::Holder {
                id,
                port: c.port,
                peer: c.peer,
                opened: c.opened,
                admitted: c.admitted,
            })
            .collect();
        let refusal = match self.admission.decide(&open, port, peer.ip()) {
            admission::Decision::Admit => None,
            admission::Decision::PushOut(old) => {
                if let Some(c) = self.conns.get_mut(old) {
                    let _ = c.stream.write(busy_answer(c.port));
                    let old_peer = c.peer;
                    self.admission.refused(
                        old_peer,
                        "connection pushed out: 503",
                        Refusal::PushedOut,
                    );
                }
                self.close_conn(
                    old,
                    "pushed out by a newer connection before it authenticated",
                );
                None
            }
            admission::Decision::Refuse(why) => Some(why),
        };
        let id = match (refusal, self.conns.next_id()) {
            (None, Some(id)) => id,
            (why, _) => {
                // One write into an empty socket buffer does not block;
                // then the socket is dropped (closed).
                let _ = stream.write(busy_answer(port));
                let why = why.unwrap_or(Refusal::TooManyConnections);
                self.admission.refused(peer, "connection refused: 503", why);
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&stream, TCP_SEND_BUFFER);
        let local = stream
            .local_addr()
            .unwrap_or(SocketAddr::new(self.cfg.listen, 0));
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            id.token(FIRST_CONNECTION),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            log::warn!("{peer}: {e}");
            return;
        }
        log::debug!("{peer}: connected ({port:?})");
        let proto = match port {
            Port::Http => Proto::Http(http::HttpConn::default()),
            Port::Rtsp => Proto::Rtsp(rtsp::RtspConn::default()),
        };
        let inserted = self
            .conns
            .insert(Conn::new(stream, peer, local, port, proto));
        debug_assert_eq!(inserted, id);
        self.admission.opened(peer.ip());
    }

    /// Counts a refusal; logs it at most every so often.
    fn refused(&mut self, peer: SocketAddr, what: &str, why: Refusal) {
        self.admission.refused(peer, what, why);
    }

    /// A request on `ci` passed the gate: the connection (and its tunnel's
    /// other half) can no longer be pushed out by newcomers.
    fn admit(&mut self, ci: ConnId) {
        let Some(conn) = self.conns.get_mut(ci) else {
            return;
        };
        conn.admitted = true;
        let post = conn
            .rtsp()
            .and_then(|r| r.tunnel.as_ref())
            .and_then(|t| t.post);
        if let Some(p) = post.and_then(|p| self.conns.get_mut(p)) {
            p.admitted = true;
        }
    }

    /// Whether a client at `peer` may be served without a password: with no
    /// users set, only this machine's clients, unless `anonymous` (a fresh
    /// camera is not an open one).
    fn open_to(&self, peer: SocketAddr) -> bool {
        self.auth.is_some() || self.cfg.anonymous || peer.ip().to_canonical().is_loopback()
    }

    /// Streaming clients now: RTSP sessions and MJPEG streams (max_clients).
    fn clients(&self) -> usize {
        self.sessions.len() + self.mjpeg_clients()
    }

    // ---- connections --------------------------------------------------

    fn conn_readable(&mut self, ci: ConnId) {
        let mut buf = [0u8; 4096];
        for _ in 0..READS_PER_TURN {
            let Some(conn) = self.conns.get_mut(ci) else {
                return;
            };
            if conn.read_paused {
                return;
            }
            let cap = conn.input_cap(self.cfg.max_request_size);
            if conn.inbuf.len() >= cap {
                return self.process_input(ci);
            }
            let room = (cap - conn.inbuf.len()).min(buf.len());
            match conn.stream.read(&mut buf[..room]) {
                Ok(0) => {
                    self.process_input(ci);
                    return self.close_conn(ci, "closed by peer");
                }
                Ok(n) => {
                    conn.last_input = Mono::now();
                    // A tunnel's GET side carries nothing in: its requests
                    // come through the POST side.
                    if conn.rtsp().is_none_or(|r| r.tunnel.is_none()) {
                        conn.inbuf.extend_from_slice(&buf[..n]);
                    }
                    self.process_input(ci);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.close_conn(ci, &format!("read: {e}")),
            }
        }
        // More may be waiting, but others get their turn first; readiness is
        // edge-triggered, so remember to come back.
        self.resume_reading.push(ci);
    }

    fn process_input(&mut self, ci: ConnId) {
        match self.conns.get(ci).map(|c| &c.proto) {
            Some(Proto::Rtsp(_)) => self.rtsp_input(ci),
            Some(Proto::Http(_)) => self.http_input(ci),
            None => {}
        }
    }

    /// Writes a connection's pending bytes until the socket is full.
    fn flush_conn(&mut self, ci: ConnId) {
        match self.conns.get(ci).map(|c| &c.proto) {
            Some(Proto::Rtsp(_)) => self.rtsp_flush(ci),
            Some(Proto::Http(_)) => self.http_flush(ci),
            None => {}
        }
    }

    /// Writes a connection's pending control bytes (responses, headers):
    /// true when all are out and its flush may go on, false when the socket
    /// is full or the connection was closed.
    fn write_ctrl(&mut self, ci: ConnId) -> bool {
        let Some(conn) = self.conns.get_mut(ci) else {
            return false;
        };
        match conn.write_ctrl() {
            Ok(true) => {
                self.ctrl_drained(ci);
                true
            }
            Ok(false) => false,
            Err(e) => {
                self.close_conn(ci, &format!("write: {e}"));
                false
            }
        }
    }

    /// After a connection's control bytes are all out: reading resumes if
    /// it was paused for them.
    fn ctrl_drained(&mut self, ci: ConnId) {
        let Some(conn) = self.conns.get_mut(ci) else {
            return;
        };
        if conn.read_paused {
            conn.read_paused = false;
            self.resume_reading.push(ci);
            // A tunnel's POST side was paused with its GET side.
            if let Some(post) = conn
                .rtsp()
                .and_then(|r| r.tunnel.as_ref())
                .and_then(|t| t.post)
            {
                if let Some(p) = self.conns.get_mut(post) {
                    p.read_paused = false;
                }
                self.resume_reading.push(post);
            }
        }
    }

    fn close_conn(&mut self, ci: ConnId, why: &str) {
        let Some(mut conn) = self.conns.remove(ci) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut conn.stream);
        self.admission.closed(conn.peer.ip());
        log::debug!("{}: {why}", conn.peer);
        match conn.proto {
            Proto::Rtsp(r) => self.rtsp_closed(ci, r, why),
            Proto::Http(h) => self.http_closed(h, conn.peer),
        }
    }

    fn housekeeping(&mut self, now: Mono) {
        self.rtsp_housekeeping(now);
        if let Some(source) = self.source.take() {
            self.note_camera(&*source);
            self.source = Some(source);
        }
        self.http_housekeeping(now);
        let stuck: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.closing
                    .is_some_and(|t| now.saturating_sub(t) > CLOSE_GRACE)
            })
            .map(|(k, _)| k)
            .collect();
        for ci in stuck {
            self.close_conn(ci, "did not read the error response");
        }
        let request_timeout = Duration::from_secs(u64::from(self.cfg.request_timeout));
        let idle_timeout = Duration::from_secs(u64::from(self.cfg.idle_timeout));
        let (mut slow, mut idle) = (Vec::new(), Vec::new());
        for (ci, c) in self.conns.iter() {
            if c.closing.is_some() {
                continue;
            }
            if c.request_started
                .is_some_and(|t| now.saturating_sub(t) > request_timeout)
            {
                slow.push(ci);
            } else if !c.streaming()
                && c.ctrl_pending() == 0
                && now.saturating_sub(c.last_input) > idle_timeout
            {
                idle.push(ci);
            }
        }
        for ci in slow {
            let Some(conn) = self.conns.get_mut(ci) else {
                continue;
            };
            log::info!(
                "{}: request not complete after {} s (request_timeout); closing",
                conn.peer,
                self.cfg.request_timeout
            );
            conn.inbuf.clear();
            conn.request_started = None;
            conn.closing = Some(now);
            match conn.proto {
                Proto::Rtsp(_) => rtsp::timed_out(conn),
                Proto::Http(_) => http::timed_out(conn),
            }
            self.flush_conn(ci);
        }
        for ci in idle {
            let Some(conn) = self.conns.get(ci) else {
                continue;
            };
            log::info!(
                "{}: idle without a session or stream for {} s (idle_timeout); closing",
                conn.peer,
                self.cfg.idle_timeout
            );
            self.close_conn(ci, "idle without a session or stream");
        }
        self.log_stats(now);
    }

    fn log_stats(&mut self, now: Mono) {
        let Some(last) = self.last_log else {
            self.last_log = Some(now);
            return;
        };
        let elapsed = now.saturating_sub(last);
        if elapsed < STATS_EVERY {
            return;
        }
        let c = &self.intake.counts;
        let streamed = c.frames_taken - self.frames_at_last_log;
        let refused: u64 = c.refused.iter().sum();
        let repaired: u64 = c.repaired.iter().sum();
        log::info!(
            "{:.1} frames/s, {} sessions, {} MJPEG streams, {} connections; of {} frames since start {repaired} repaired, {refused} refused",
            streamed as f64 / elapsed.as_secs_f64(),
            self.sessions.len(),
            self.mjpeg_clients(),
            self.conns.len(),
            c.frames_in
        );
        self.last_log = Some(now);
        self.frames_at_last_log = c.frames_taken;
    }

    /// The send latency since the last report, then a new measurement.
    fn log_send_latency(&mut self) {
        let now = Mono::now();
        log::info!(
            "send latency (frame in to its last byte written, per client) over {:.1} s: {}",
            now.saturating_sub(self.latency_since).as_secs_f64(),
            self.send_latency.window
        );
        self.send_latency.window.reset();
        self.latency_since = now;
    }

    fn shutdown(&mut self) {
        self.log_send_latency();
        let c = &self.intake.counts;
        log::info!(
            "{} frames in, {} streamed; repaired: {}; refused: {}",
            c.frames_in,
            c.frames_taken,
            Intake::summary(&c.repaired),
            Intake::summary(&c.refused)
        );
        let ids = self.sessions.ids();
        for si in ids {
            self.end_session(si, "server stopping", true);
        }
        let conns = self.conns.ids();
        for ci in conns {
            // Best effort: whatever fits in the socket buffer now.
            self.flush_conn(ci);
        }
    }
}

/// What a connection turned away is told before it is closed.
fn busy_answer(port: Port) -> &'static [u8] {
    match port {
        Port::Http => {
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        }
        Port::Rtsp => b"RTSP/1.0 503 Service Unavailable\r\nConnection: close\r\n\r\n",
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        for id in self.signal_ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}
