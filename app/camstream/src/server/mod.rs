//! The RTSP server: one event loop over the listening socket, the client
//! connections, the shared UDP sockets, the frame source and signals.
//!
//! Each frame is packetized once ([`frame::Frame`]) and its reference is
//! queued to every playing session. A session's queue is bounded: a client
//! that cannot keep up loses whole frames, never part of one, and never holds
//! back the others. Over TCP the frame being written belongs to the
//! connection, so it is always finished (the interleaved byte stream stays
//! intact) even if its session ends meanwhile.

pub mod frame;
mod net;
mod rtsp;
mod sdp;

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::rc::Rc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use camstream_rtp::jpeg::Remedy;
use camstream_rtp::{JpegError, Packetizer, jpeg, rtcp};
use camstream_rtsp::auth::Auth;
use camstream_rtsp::framing::{self, Framed, Limits, Rejected};
use mio::net::{TcpListener, TcpStream, UdpSocket};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use rustix::net::SocketAddrAny;
use slab::Slab;

use crate::clock::{Mono, RtpClock, WallClockWatch, ntp_now, wall_now};
use crate::config::{self, Config};
use crate::latency::Histogram;
use crate::normalize::{Fix, Normalizer};
use crate::source::{self, FrameSource, StreamInfo};
use frame::{Frame, Pool};

const LISTENER: Token = Token(0);
const RTP: Token = Token(1);
const RTCP: Token = Token(2);
const SOURCE: Token = Token(3);
const SIGNAL: Token = Token(4);
const REPORT_SIGNAL: Token = Token(5);
const FIRST_CONNECTION: usize = 16;

/// Unsent response and RTCP bytes after which a connection's requests are
/// no longer read (a client pipelining requests without reading replies).
const CTRL_HIGH_WATER: usize = 64 << 10;
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
/// Header lines one request may have (clients send about ten).
const MAX_HEADERS: usize = 64;
/// Refused connections are logged at most this often (a flood would fill
/// the log), with their count.
const REFUSALS_LOGGED_EVERY: Duration = Duration::from_secs(10);

enum Transport {
    Udp {
        rtp: SocketAddrAny,
        rtcp: SocketAddr,
    },
    Interleaved {
        rtp: u8,
        rtcp: u8,
    },
}

struct Session {
    id: String,
    conn: usize,
    peer: SocketAddr,
    transport: Transport,
    playing: bool,
    /// Frames not started yet (UDP: the front one may be partly sent).
    queue: VecDeque<Rc<Frame>>,
    /// UDP: packets of the front frame already sent.
    udp_sent: usize,
    in_udp_backlog: bool,
    last_seen: Mono,
    next_report: Mono,
    /// RTCP sender counts (wrap as RFC 3550 says).
    packets: u32,
    octets: u32,
    frames_sent: u64,
    frames_dropped: u64,
    warned_send_error: bool,
}

struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    inbuf: Vec<u8>,
    /// Responses and interleaved RTCP, written between frames.
    ctrl: Vec<u8>,
    ctrl_sent: usize,
    /// The interleaved frame being written: frame, RTP channel, bytes done.
    current: Option<(Rc<Frame>, u8, usize)>,
    sessions: Vec<usize>,
    round_robin: usize,
    /// Set after an unrecoverable protocol error: close once `ctrl` is out.
    closing: Option<Mono>,
    read_paused: bool,
    /// The last request came with the right password and an expired nonce:
    /// the 401 says `stale=true`.
    stale_nonce: bool,
    /// When the unfinished message in `inbuf` began (request_timeout).
    request_started: Option<Mono>,
    /// The last bytes read (idle_timeout, for connections without sessions).
    last_input: Mono,
}

impl Conn {
    fn ctrl_pending(&self) -> usize {
        self.ctrl.len() - self.ctrl_sent
    }
}

#[derive(Default)]
struct Stats {
    frames_in: u64,
    /// Frames packetized and offered to the sessions.
    frames_streamed: u64,
    rejected: [u64; JpegError::ALL.len()],
    rejected_logged_at: [Option<Mono>; JpegError::ALL.len()],
    /// Frames made sendable, per reason; the last slot counts crops of
    /// frames whose size is not a multiple of 8.
    repaired: [u64; JpegError::ALL.len() + 1],
    repaired_logged_at: [Option<Mono>; JpegError::ALL.len() + 1],
    last_log: Option<Mono>,
    frames_at_last_log: u64,
}

struct Stream {
    info: StreamInfo,
    packetizer: Packetizer,
    clock: RtpClock,
    pool: Rc<Pool>,
    last: Option<Rc<Frame>>,
    sdp_session_id: u64,
    warned_size_change: bool,
}

pub struct Server {
    cfg: Config,
    poll: Poll,
    listener: TcpListener,
    rtp_socket: UdpSocket,
    /// The GSO segment size set on `rtp_socket` (the MTU), if the kernel
    /// took it; turned off if a route refuses GSO sends.
    udp_gso: Option<usize>,
    rtcp_socket: UdpSocket,
    rtp_port: u16,
    conns: Slab<Conn>,
    sessions: Slab<Session>,
    session_ids: HashMap<String, usize>,
    session_by_rtcp: HashMap<SocketAddr, usize>,
    udp_backlog: VecDeque<usize>,
    udp_blocked: bool,
    resume_reading: Vec<usize>,
    /// Reused list of keys, so sending a frame allocates nothing.
    scratch: Vec<usize>,
    stream: Stream,
    stats: Stats,
    normalizer: Normalizer,
    cname: String,
    signals: UnixStream,
    /// SIGUSR1: log the send latency and start a new measurement.
    report_signal: UnixStream,
    send_latency: Histogram,
    latency_since: Mono,
    /// Who may stream, if the config names users.
    auth: Option<Auth>,
    /// Connections open per client address (max_connections_per_ip).
    per_ip: HashMap<IpAddr, usize>,
    /// Connections refused since the last log line about it, and when that was.
    refused: (u64, Option<Mono>),
    /// Notices the wall clock being set, once per housekeeping pass.
    wall_clock: WallClockWatch,
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
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::low_level::pipe::register(sig, signal_writer.try_clone()?)?;
        }
        let (report_signal, report_writer) = UnixStream::pair()?;
        report_signal.set_nonblocking(true)?;
        signal_hook::low_level::pipe::register(signal_hook::consts::SIGUSR1, report_writer)?;
        let mut server = Server {
            poll,
            listener,
            rtp_socket,
            udp_gso,
            rtcp_socket,
            rtp_port,
            conns: Slab::new(),
            sessions: Slab::new(),
            session_ids: HashMap::new(),
            session_by_rtcp: HashMap::new(),
            udp_backlog: VecDeque::new(),
            udp_blocked: false,
            resume_reading: Vec::new(),
            scratch: Vec::new(),
            stream: Stream {
                info,
                packetizer: Packetizer::new(random_u64() as u32, random_u64() as u16, cfg.mtu)?,
                clock: RtpClock::new(Mono::now(), random_u64() as u32),
                pool: Pool::new(cfg.client_queue + 2),
                last: None,
                sdp_session_id: random_u64() >> 1,
                warned_size_change: false,
            },
            stats: Stats::default(),
            // Room for a camera that changes its size (clients keep the
            // first), none for a header claiming gigapixels; at most the
            // largest size the config takes.
            normalizer: Normalizer::new(
                cfg.quality,
                (4 * info.width as usize * info.height as usize).min(8192 * 8192),
            )?,
            cname: format!("camstream@{}", hostname()),
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
            report_signal,
            send_latency: Histogram::default(),
            latency_since: Mono::now(),
            per_ip: HashMap::new(),
            refused: (0, None),
            wall_clock: WallClockWatch::default(),
            cfg,
        };
        let r = server.poll.registry();
        r.register(&mut server.listener, LISTENER, Interest::READABLE)?;
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

    /// Serves until SIGINT or SIGTERM, or until the source fails.
    pub fn run(mut self, mut source: Box<dyn FrameSource>) -> Result<()> {
        source.register(self.poll.registry(), SOURCE)?;
        let mut events = Events::with_capacity(256);
        let mut next_tick = Mono::now();
        loop {
            let timeout = if self.resume_reading.is_empty() {
                next_tick.saturating_sub(Mono::now())
            } else {
                Duration::ZERO
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e.into());
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(),
                    RTP => {
                        if ev.is_readable() {
                            self.drain_rtp_socket();
                        }
                        if ev.is_writable() {
                            self.udp_writable();
                        }
                    }
                    RTCP => self.read_rtcp_socket(),
                    SOURCE => source.ready(&mut |f| self.on_frame(f))?,
                    SIGNAL => {
                        log::info!("stopping");
                        self.shutdown();
                        return Ok(());
                    }
                    REPORT_SIGNAL => {
                        let mut buf = [0u8; 16];
                        while matches!((&self.report_signal).read(&mut buf), Ok(n) if n > 0) {}
                        self.log_send_latency();
                    }
                    Token(t) => {
                        let ci = t - FIRST_CONNECTION;
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
                self.conn_readable(ci);
            }
            let now = Mono::now();
            if now >= next_tick {
                self.housekeeping(now);
                next_tick = now.add(TICK);
            }
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, peer)) => {
                    let from_peer = self.per_ip.get(&peer.ip()).copied().unwrap_or(0);
                    // Beyond 2 x max_clients + 16, connections could not hold a session anyway.
                    let why = if self.conns.len() >= self.cfg.max_clients * 2 + 16 {
                        Some("too many connections")
                    } else if from_peer >= self.cfg.max_connections_per_ip {
                        Some("max_connections_per_ip reached")
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        // One write into an empty socket buffer does not
                        // block; then the socket is dropped (closed).
                        let _ = stream.write(
                            b"RTSP/1.0 503 Service Unavailable\r\nConnection: close\r\n\r\n",
                        );
                        self.refused(peer, "connection refused: 503", why);
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let _ =
                        rustix::net::sockopt::set_socket_send_buffer_size(&stream, TCP_SEND_BUFFER);
                    let local = stream
                        .local_addr()
                        .unwrap_or(SocketAddr::new(self.cfg.listen, 0));
                    let entry = self.conns.vacant_entry();
                    let token = Token(FIRST_CONNECTION + entry.key());
                    if let Err(e) = self.poll.registry().register(
                        &mut stream,
                        token,
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        log::warn!("{peer}: {e}");
                        continue;
                    }
                    log::debug!("{peer}: connected");
                    entry.insert(Conn {
                        stream,
                        peer,
                        local,
                        inbuf: Vec::new(),
                        ctrl: Vec::new(),
                        ctrl_sent: 0,
                        current: None,
                        sessions: Vec::new(),
                        round_robin: 0,
                        closing: None,
                        read_paused: false,
                        stale_nonce: false,
                        request_started: None,
                        last_input: Mono::now(),
                    });
                    *self.per_ip.entry(peer.ip()).or_insert(0) += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log::warn!("accept: {e}");
                    return;
                }
            }
        }
    }

    fn refused(&mut self, peer: SocketAddr, what: &str, why: &str) {
        let now = Mono::now();
        self.refused.0 += 1;
        if self
            .refused
            .1
            .is_none_or(|t| now.saturating_sub(t) >= REFUSALS_LOGGED_EVERY)
        {
            log::warn!(
                "{peer}: {what}, {why}; {} refused since the last such line",
                self.refused.0
            );
            self.refused = (0, Some(now));
        }
    }

    // ---- frames -------------------------------------------------------

    fn on_frame(&mut self, f: source::CapturedFrame<'_>) {
        let entered = Mono::now();
        self.stats.frames_in += 1;
        // Frames RTP/JPEG cannot carry as they are go through the
        // normalizer; conformant ones are parsed once and not touched (the
        // pool's copy is the only one).
        let fault = match jpeg::parse(f.jpeg) {
            Ok(j) if j.width % 8 == 0 && j.height % 8 == 0 => Ok(j),
            Ok(_) => Err(None),
            Err(e) if e.remedy() == Remedy::None => return self.reject(e, None),
            Err(e) => Err(Some(e)),
        };
        let jpeg = match fault {
            Ok(j) => j,
            Err(fault) => match self.normalizer.normalize(f.jpeg, fault) {
                Ok((j, fix)) => {
                    count_repair(&mut self.stats, fault, fix);
                    j
                }
                Err(why) => {
                    let e = fault.unwrap_or(JpegError::Malformed);
                    return self.reject(e, Some(&format!("{why:#}")));
                }
            },
        };
        let s = &mut self.stream;
        if (jpeg.width, jpeg.height) != (s.info.width, s.info.height) && !s.warned_size_change {
            log::warn!(
                "frame size changed from {}x{} to {}x{}; clients keep the size they were told",
                s.info.width,
                s.info.height,
                jpeg.width,
                jpeg.height
            );
            s.warned_size_change = true;
        }
        let ts = s.clock.timestamp(f.captured);
        let frame = Frame::build(&s.pool, &mut s.packetizer, &jpeg, ts, f.captured, entered);
        s.last = Some(frame.clone());
        self.stats.frames_streamed += 1;

        let limit = self.cfg.client_queue;
        for (_, s) in self.sessions.iter_mut().filter(|(_, s)| s.playing) {
            enqueue(s, &frame, limit);
        }
        self.flush_all();
    }

    fn reject(&mut self, e: JpegError, repair_failed: Option<&str>) {
        let i = e.index();
        self.stats.rejected[i] += 1;
        let now = Mono::now();
        // The first of each kind at once, then at most one line a minute.
        let due =
            self.stats.rejected_logged_at[i].is_none_or(|t| now.saturating_sub(t) >= STATS_EVERY);
        if due {
            let why = match repair_failed {
                Some(r) => format!("could not be repaired: {r}"),
                None => "RTP/JPEG carries baseline 4:2:2/4:2:0 with standard Huffman tables".into(),
            };
            log::warn!(
                "frame not sent: {e} ({} so far; {why})",
                self.stats.rejected[i]
            );
            self.stats.rejected_logged_at[i] = Some(now);
        }
    }

    /// Sends what is queued: UDP sessions first (cheap), then TCP connections.
    fn flush_all(&mut self) {
        let mut keys = std::mem::take(&mut self.scratch);
        keys.clear();
        keys.extend(
            self.sessions
                .iter()
                .filter(|(_, s)| {
                    matches!(s.transport, Transport::Udp { .. }) && !s.queue.is_empty()
                })
                .map(|(k, _)| k),
        );
        for &si in &keys {
            self.flush_udp_or_backlog(si);
        }
        keys.clear();
        keys.extend(
            self.conns
                .iter()
                .filter(|(_, c)| !c.sessions.is_empty())
                .map(|(k, _)| k),
        );
        for &ci in &keys {
            self.flush_conn(ci);
        }
        self.scratch = keys;
    }

    fn flush_udp_or_backlog(&mut self, si: usize) {
        if self.udp_blocked || !self.flush_udp(si) {
            self.udp_blocked = true;
            let s = &mut self.sessions[si];
            if !s.in_udp_backlog {
                s.in_udp_backlog = true;
                self.udp_backlog.push_back(si);
            }
        }
    }

    /// Sends a UDP session's queue; false if the socket buffer is full.
    fn flush_udp(&mut self, si: usize) -> bool {
        let Some(s) = self.sessions.get_mut(si) else {
            return true;
        };
        let Transport::Udp { rtp, .. } = &s.transport else {
            return true;
        };
        while let Some(f) = s.queue.front() {
            match net::send_udp(&self.rtp_socket, rtp, f, s.udp_sent, self.udp_gso) {
                Ok(n) if n == f.packets() => {
                    self.send_latency
                        .record(Mono::now().saturating_sub(f.entered));
                    s.packets = s.packets.wrapping_add(n as u32);
                    s.octets = s.octets.wrapping_add(f.payload_octets);
                    s.frames_sent += 1;
                    s.udp_sent = 0;
                    s.queue.pop_front();
                }
                Ok(n) => {
                    s.udp_sent = n;
                    return false;
                }
                Err(e) if self.udp_gso.is_some() && net::gso_refused(&e) => {
                    log::warn!(
                        "sending to {} with UDP segmentation offload: {e}; sending one datagram per packet from now on",
                        s.peer
                    );
                    self.udp_gso = None;
                    if let Err(e) = net::set_gso(&self.rtp_socket, 0) {
                        log::error!("cannot turn UDP segmentation offload off: {e}");
                    }
                }
                Err(e) => {
                    if !s.warned_send_error {
                        log::warn!("session {}: sending to {}: {e}", s.id, s.peer);
                        s.warned_send_error = true;
                    }
                    s.frames_dropped += 1;
                    s.udp_sent = 0;
                    s.queue.pop_front();
                }
            }
        }
        true
    }

    fn udp_writable(&mut self) {
        self.udp_blocked = false;
        while let Some(si) = self.udp_backlog.pop_front() {
            if let Some(s) = self.sessions.get_mut(si) {
                s.in_udp_backlog = false;
            }
            if !self.flush_udp(si) {
                self.udp_blocked = true;
                if let Some(s) = self.sessions.get_mut(si) {
                    s.in_udp_backlog = true;
                    self.udp_backlog.push_front(si);
                }
                return;
            }
        }
    }

    /// Writes a connection's pending bytes until the socket is full.
    fn flush_conn(&mut self, ci: usize) {
        loop {
            let Some(conn) = self.conns.get_mut(ci) else {
                return;
            };
            if let Some((frame, channel, pos)) = &mut conn.current {
                match net::write_interleaved(&mut conn.stream, frame, *channel, *pos) {
                    Ok(p) if p == frame.wire().len() => {
                        self.send_latency
                            .record(Mono::now().saturating_sub(frame.entered));
                        conn.current = None;
                    }
                    Ok(p) => {
                        *pos = p;
                        return;
                    }
                    Err(e) => return self.close_conn(ci, &format!("write: {e}")),
                }
            }
            if conn.ctrl_pending() > 0 {
                match conn.stream.write(&conn.ctrl[conn.ctrl_sent..]) {
                    Ok(n) => conn.ctrl_sent += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return self.close_conn(ci, &format!("write: {e}")),
                }
                if conn.ctrl_pending() == 0 {
                    conn.ctrl.clear();
                    conn.ctrl_sent = 0;
                    if conn.ctrl.capacity() > CTRL_HIGH_WATER {
                        conn.ctrl.shrink_to(4096);
                    }
                    if conn.read_paused {
                        conn.read_paused = false;
                        self.resume_reading.push(ci);
                    }
                }
                continue;
            }
            if conn.closing.is_some() {
                return self.close_conn(ci, "closed after a protocol error");
            }
            // The next queued frame, taking the connection's sessions in turn.
            let n = conn.sessions.len();
            let mut next = None;
            for k in 0..n {
                let si = conn.sessions[(conn.round_robin + k) % n];
                let Some(s) = self.sessions.get_mut(si) else {
                    continue;
                };
                let Transport::Interleaved { rtp, .. } = s.transport else {
                    continue;
                };
                if let Some(f) = s.queue.pop_front() {
                    s.packets = s.packets.wrapping_add(f.packets() as u32);
                    s.octets = s.octets.wrapping_add(f.payload_octets);
                    s.frames_sent += 1;
                    conn.round_robin = (conn.round_robin + k + 1) % n;
                    next = Some((f, rtp, 0));
                    break;
                }
            }
            match next {
                Some(c) => conn.current = Some(c),
                None => return,
            }
        }
    }

    // ---- requests -----------------------------------------------------

    fn conn_readable(&mut self, ci: usize) {
        let mut buf = [0u8; 4096];
        for _ in 0..READS_PER_TURN {
            let Some(conn) = self.conns.get_mut(ci) else {
                return;
            };
            if conn.read_paused {
                return;
            }
            if conn.inbuf.len() >= self.cfg.max_request_size {
                return self.process_input(ci);
            }
            let room = (self.cfg.max_request_size - conn.inbuf.len()).min(buf.len());
            match conn.stream.read(&mut buf[..room]) {
                Ok(0) => {
                    self.process_input(ci);
                    return self.close_conn(ci, "closed by peer");
                }
                Ok(n) => {
                    conn.last_input = Mono::now();
                    conn.inbuf.extend_from_slice(&buf[..n]);
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

    /// Handles every complete message in the connection's input.
    fn process_input(&mut self, ci: usize) {
        loop {
            let Some(conn) = self.conns.get_mut(ci) else {
                return;
            };
            if conn.closing.is_some() {
                conn.inbuf.clear();
                return;
            }
            if conn.inbuf.is_empty() {
                conn.request_started = None;
                if conn.inbuf.capacity() > 4096 {
                    conn.inbuf = Vec::new();
                }
                return;
            }
            if conn.ctrl_pending() > CTRL_HIGH_WATER {
                conn.read_paused = true;
                return;
            }
            let limits = Limits {
                max_size: self.cfg.max_request_size,
                max_headers: MAX_HEADERS,
            };
            match framing::next(&conn.inbuf, &limits) {
                Framed::Message(msg, used) => {
                    conn.inbuf.drain(..used);
                    conn.request_started = None;
                    self.handle_message(ci, msg);
                }
                Framed::Incomplete => {
                    conn.request_started.get_or_insert(conn.last_input);
                    return;
                }
                Framed::Rejected(r) => self.refuse_input(ci, r),
            }
        }
    }

    fn handle_message(&mut self, ci: usize, msg: rtsp_types::Message<Vec<u8>>) {
        match msg {
            rtsp_types::Message::Request(req) => {
                let (response, start) = self.handle_request(ci, &req);
                let challenges = if response.status() == rtsp_types::StatusCode::Unauthorized {
                    self.challenges(ci)
                } else {
                    Vec::new()
                };
                let Some(conn) = self.conns.get_mut(ci) else {
                    return;
                };
                log::debug!(
                    "{}: {:?} {} -> {}",
                    conn.peer,
                    req.method(),
                    uri_str(&req),
                    u16::from(response.status())
                );
                let _ = response.write(&mut conn.ctrl);
                if !challenges.is_empty() {
                    // One WWW-Authenticate line per challenge (rtsp-types
                    // keeps one value per header; clients read one challenge
                    // per line). A 401 has no body: the response ends with
                    // the blank line.
                    debug_assert!(conn.ctrl.ends_with(b"\r\n\r\n"));
                    conn.ctrl.truncate(conn.ctrl.len() - 2);
                    for c in &challenges {
                        conn.ctrl
                            .extend_from_slice(format!("WWW-Authenticate: {c}\r\n").as_bytes());
                    }
                    conn.ctrl.extend_from_slice(b"\r\n");
                }
                self.flush_conn(ci);
                if let Some(si) = start {
                    self.start_playing(si);
                }
            }
            rtsp_types::Message::Data(data) => {
                let channel = data.channel_id();
                let Some(conn) = self.conns.get(ci) else {
                    return;
                };
                let si = conn.sessions.iter().copied().find(|&si| {
                    matches!(self.sessions.get(si).map(|s| &s.transport),
                        Some(Transport::Interleaved { rtcp, .. }) if *rtcp == channel)
                });
                if let Some(si) = si {
                    self.on_rtcp(si, data.as_slice());
                }
            }
            rtsp_types::Message::Response(_) => {} // we send no requests
        }
    }

    /// Input that is not a message: 400, then skip it and go on, or close
    /// once the answer is out.
    fn refuse_input(&mut self, ci: usize, r: Rejected) {
        let Some(conn) = self.conns.get_mut(ci) else {
            return;
        };
        let close = r.skip.is_none();
        log::info!(
            "{}: {}{}",
            conn.peer,
            r.fault.describe(),
            if close { "; closing" } else { "" }
        );
        let mut resp = rtsp::response(rtsp_types::StatusCode::BadRequest, r.cseq.as_deref());
        if close {
            resp = resp.header(rtsp_types::headers::CONNECTION, "close");
        }
        let _ = resp.build(Vec::new()).write(&mut conn.ctrl);
        match r.skip {
            Some(n) => {
                conn.inbuf.drain(..n);
            }
            None => {
                conn.inbuf.clear();
                conn.closing = Some(Mono::now());
            }
        }
        self.flush_conn(ci);
    }

    /// A request that did not arrive within request_timeout: 408, close.
    fn request_timed_out(&mut self, ci: usize) {
        let Some(conn) = self.conns.get_mut(ci) else {
            return;
        };
        log::info!(
            "{}: request not complete after {} s (request_timeout); closing",
            conn.peer,
            self.cfg.request_timeout
        );
        let _ = rtsp::response(rtsp_types::StatusCode::RequestTimeout, None)
            .header(rtsp_types::headers::CONNECTION, "close")
            .build(Vec::new())
            .write(&mut conn.ctrl);
        conn.inbuf.clear();
        conn.request_started = None;
        conn.closing = Some(Mono::now());
        self.flush_conn(ci);
    }

    fn start_playing(&mut self, si: usize) {
        let Some(s) = self.sessions.get_mut(si) else {
            return;
        };
        let now = Mono::now();
        s.playing = true;
        s.next_report = now.add(Duration::from_secs(1));
        // The newest frame at once, so the picture appears without waiting.
        if let Some(f) = &self.stream.last {
            if now.saturating_sub(f.captured) < Duration::from_secs(1) {
                enqueue(s, f, self.cfg.client_queue);
            }
        }
        match s.transport {
            Transport::Udp { .. } => self.flush_udp_or_backlog(si),
            Transport::Interleaved { .. } => {
                let ci = s.conn;
                self.flush_conn(ci);
            }
        }
    }

    // ---- RTCP ---------------------------------------------------------

    fn drain_rtp_socket(&mut self) {
        // Clients may send NAT-opening packets to the RTP port; nothing to do.
        let mut buf = [0u8; 2048];
        while self.rtp_socket.recv_from(&mut buf).is_ok() {}
    }

    fn read_rtcp_socket(&mut self) {
        let mut buf = [0u8; 2048];
        loop {
            let (n, from) = match self.rtcp_socket.recv_from(&mut buf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            if let Some(&si) = self.session_by_rtcp.get(&from) {
                self.on_rtcp(si, &buf[..n]);
            }
        }
    }

    /// RTCP from a client: proof of life; BYE stops the stream to it.
    fn on_rtcp(&mut self, si: usize, data: &[u8]) {
        let Some(s) = self.sessions.get_mut(si) else {
            return;
        };
        s.last_seen = Mono::now();
        let mut bye = false;
        for p in rtcp::parse_compound(data) {
            match p {
                Ok(rtcp::Packet::ReceiverReport { blocks, .. }) => {
                    for b in blocks {
                        log::trace!(
                            "session {}: RR lost {} jitter {} highest seq {}",
                            s.id,
                            b.cumulative_lost,
                            b.jitter,
                            b.highest_sequence
                        );
                    }
                }
                Ok(rtcp::Packet::Bye { .. }) => bye = true,
                Ok(_) => {}
                Err(e) => {
                    log::debug!("session {}: bad RTCP: {e}", s.id);
                    break;
                }
            }
        }
        if bye && s.playing {
            // The client left the RTP session; the RTSP session stays until
            // TEARDOWN or timeout, so a TEARDOWN after the BYE still succeeds.
            log::info!(
                "session {}: RTCP BYE from {}, stopped sending",
                s.id,
                s.peer
            );
            s.playing = false;
            s.queue.clear();
            s.udp_sent = 0;
        }
    }

    /// Sends an RTCP sender report (and BYE) to a session.
    fn send_report(&mut self, si: usize, bye: bool) {
        let Some(s) = self.sessions.get(si) else {
            return;
        };
        let (ntp_time, mono) = ntp_now();
        let sr = rtcp::SenderReport {
            ssrc: self.stream.packetizer.ssrc(),
            ntp_time,
            rtp_time: self.stream.clock.timestamp(mono),
            packet_count: s.packets,
            octet_count: s.octets,
        };
        let mut buf = [0u8; 4 + rtcp::MAX_COMPOUND_LEN];
        let n = rtcp::write_report(&sr, self.cname.as_bytes(), bye, &mut buf[4..]);
        match s.transport {
            Transport::Udp { rtcp, .. } => {
                let _ = self.rtcp_socket.send_to(&buf[4..4 + n], rtcp);
            }
            Transport::Interleaved { rtcp, .. } => {
                let ci = s.conn;
                let Some(conn) = self.conns.get_mut(ci) else {
                    return;
                };
                if conn.ctrl_pending() < CTRL_HIGH_WATER {
                    buf[..4].copy_from_slice(&[b'$', rtcp, (n >> 8) as u8, n as u8]);
                    conn.ctrl.extend_from_slice(&buf[..4 + n]);
                    self.flush_conn(ci);
                }
            }
        }
    }

    // ---- lifetimes ----------------------------------------------------

    fn end_session(&mut self, si: usize, why: &str, send_bye: bool) {
        if send_bye {
            self.send_report(si, true);
        }
        if !self.sessions.contains(si) {
            return;
        }
        let s = self.sessions.remove(si);
        self.session_ids.remove(&s.id);
        if let Transport::Udp { rtcp, .. } = s.transport {
            self.session_by_rtcp.remove(&rtcp);
        }
        if s.in_udp_backlog {
            self.udp_backlog.retain(|&k| k != si);
        }
        if let Some(conn) = self.conns.get_mut(s.conn) {
            conn.sessions.retain(|&k| k != si);
        }
        log::info!(
            "session {} from {} ended ({why}): {} frames sent, {} dropped for a slow client",
            s.id,
            s.peer,
            s.frames_sent,
            s.frames_dropped
        );
    }

    fn close_conn(&mut self, ci: usize, why: &str) {
        let Some(conn) = self.conns.try_remove(ci) else {
            return;
        };
        let mut conn = conn;
        let _ = self.poll.registry().deregister(&mut conn.stream);
        if let Some(n) = self.per_ip.get_mut(&conn.peer.ip()) {
            *n -= 1;
            if *n == 0 {
                self.per_ip.remove(&conn.peer.ip());
            }
        }
        log::debug!("{}: {why}", conn.peer);
        // Sessions end with the connection that set them up: a client that
        // closed its control connection is gone.
        for si in conn.sessions {
            let udp = self
                .sessions
                .get(si)
                .is_some_and(|s| matches!(s.transport, Transport::Udp { .. }));
            self.end_session(si, why, udp);
        }
    }

    fn housekeeping(&mut self, now: Mono) {
        let timeout = Duration::from_secs(u64::from(self.cfg.session_timeout));
        let expired: Vec<usize> = self
            .sessions
            .iter()
            .filter(|(_, s)| now.saturating_sub(s.last_seen) > timeout)
            .map(|(k, _)| k)
            .collect();
        for si in expired {
            let (ci, tcp) = {
                let s = &self.sessions[si];
                (s.conn, matches!(s.transport, Transport::Interleaved { .. }))
            };
            self.end_session(si, "timed out", true);
            // An interleaved session's connection has nothing left to carry.
            if tcp && self.conns.get(ci).is_some_and(|c| c.sessions.is_empty()) {
                self.close_conn(ci, "session timed out");
            }
        }
        // RTP time goes on from the monotonic clock; receivers map it to wall
        // time by the latest sender report, so after a step they get one now
        // rather than up to rtcp_interval later.
        let (wall, mono) = wall_now();
        if let Some(step) = self.wall_clock.observe(wall, mono) {
            log::info!(
                "wall clock stepped by {:+.3} s (NTP or set by hand): RTCP sender reports follow it, RTP timestamps go on unchanged",
                step as f64 / 1e9
            );
            for (_, s) in self.sessions.iter_mut().filter(|(_, s)| s.playing) {
                s.next_report = now;
            }
        }
        let due: Vec<usize> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.playing && s.next_report <= now)
            .map(|(k, _)| k)
            .collect();
        let interval = Duration::from_secs(u64::from(self.cfg.rtcp_interval));
        for si in due {
            self.sessions[si].next_report = now.add(interval);
            self.send_report(si, false);
        }
        let stuck: Vec<usize> = self
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
        for (ci, c) in &self.conns {
            if c.closing.is_some() {
                continue;
            }
            if c.request_started
                .is_some_and(|t| now.saturating_sub(t) > request_timeout)
            {
                slow.push(ci);
            } else if c.sessions.is_empty()
                && c.ctrl_pending() == 0
                && now.saturating_sub(c.last_input) > idle_timeout
            {
                idle.push(ci);
            }
        }
        for ci in slow {
            self.request_timed_out(ci);
        }
        for ci in idle {
            log::info!(
                "{}: idle without a session for {} s (idle_timeout); closing",
                self.conns[ci].peer,
                self.cfg.idle_timeout
            );
            self.close_conn(ci, "idle without a session");
        }
        self.log_stats(now);
    }

    fn log_stats(&mut self, now: Mono) {
        let st = &mut self.stats;
        let Some(last) = st.last_log else {
            st.last_log = Some(now);
            return;
        };
        let elapsed = now.saturating_sub(last);
        if elapsed < STATS_EVERY {
            return;
        }
        let streamed = st.frames_streamed - st.frames_at_last_log;
        let refused: u64 = st.rejected.iter().sum();
        let repaired: u64 = st.repaired.iter().sum();
        log::info!(
            "{:.1} frames/s, {} sessions, {} connections; of {} frames since start {repaired} repaired, {refused} refused",
            streamed as f64 / elapsed.as_secs_f64(),
            self.sessions.len(),
            self.conns.len(),
            st.frames_in
        );
        st.last_log = Some(now);
        st.frames_at_last_log = st.frames_streamed;
    }

    /// The send latency since the last report, then a new measurement.
    fn log_send_latency(&mut self) {
        let now = Mono::now();
        log::info!(
            "send latency (frame in to its last packet written, per client) over {:.1} s: {}",
            now.saturating_sub(self.latency_since).as_secs_f64(),
            self.send_latency
        );
        self.send_latency.reset();
        self.latency_since = now;
    }

    fn shutdown(&mut self) {
        self.log_send_latency();
        let st = &self.stats;
        let per_reason = |counts: &[u64]| {
            let parts: Vec<String> = counts
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| {
                    let name = JpegError::ALL
                        .get(i)
                        .map_or("size-not-multiple-of-8", |e| e.name());
                    format!("{name} {n}")
                })
                .collect();
            if parts.is_empty() {
                "none".to_string()
            } else {
                parts.join(", ")
            }
        };
        log::info!(
            "{} frames in, {} streamed; repaired: {}; refused: {}",
            st.frames_in,
            st.frames_streamed,
            per_reason(&st.repaired),
            per_reason(&st.rejected)
        );
        let ids: Vec<usize> = self.sessions.iter().map(|(k, _)| k).collect();
        for si in ids {
            self.end_session(si, "server stopping", true);
        }
        let conns: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for ci in conns {
            // Best effort: whatever fits in the socket buffer now.
            self.flush_conn(ci);
        }
    }
}

/// Counts a repaired frame; says so for the first of each kind at once,
/// then at most once a minute.
fn count_repair(st: &mut Stats, fault: Option<JpegError>, fix: Fix) {
    let i = fault.map_or(JpegError::ALL.len(), JpegError::index);
    st.repaired[i] += 1;
    let now = Mono::now();
    if st.repaired_logged_at[i].is_none_or(|t| now.saturating_sub(t) >= STATS_EVERY) {
        let what = fault.map_or_else(
            || "a size that is not a multiple of 8".to_string(),
            |e| e.to_string(),
        );
        log::info!(
            "frames with {what}: {} ({} so far)",
            fix.describe(),
            st.repaired[i]
        );
        st.repaired_logged_at[i] = Some(now);
    }
}

/// Queues a frame for a session, dropping its oldest unstarted frame when
/// the queue is full.
fn enqueue(s: &mut Session, frame: &Rc<Frame>, limit: usize) {
    if s.queue.len() >= limit {
        // A UDP frame partly sent must be finished; drop the one after it.
        let i = usize::from(s.udp_sent > 0);
        if s.queue.remove(i).is_some() {
            s.frames_dropped += 1;
        }
    }
    s.queue.push_back(frame.clone());
}

fn uri_str(req: &rtsp_types::Request<Vec<u8>>) -> String {
    req.request_uri()
        .map_or_else(|| "*".into(), |u| u.to_string())
}

fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}
