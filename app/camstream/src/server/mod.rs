//! The server: one event loop over the listening sockets (RTSP, HTTP), the
//! client connections, the shared UDP sockets, the frame source and
//! signals. It keeps the loop, the connection table and the tokens, and
//! hands each event to the part it is for:
//!
//! - [`fanout`]: frames in, each built once, queued to its subscribers;
//! - [`rtsp`] and [`http`] (with [`onvif`] as one of its routes): the
//!   protocols, subscribers of the fan-out, each with its own state of its
//!   connections;
//! - [`substream`]: the detection sub-stream, a subscriber of the main
//!   stream and a stream of its own;
//! - [`admission`] (who gets a connection) and [`gate`] (who may watch).
//!
//! A frame's path: the source is readable → [`Fanout::captured`] (intake,
//! build, queue) → the tokens of the subscribers it queued to → each
//! one's connection flushed by its protocol → the socket.

mod admission;
mod conn;
mod ctx;
mod fanout;
mod gate;
mod host;
mod http;
mod onvif;
mod random;
mod rtsp;
mod signals;
mod substream;
mod table;

use std::io::{self, Read};
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};

use crate::clock::{Mono, WallClockWatch, wall_now};
use crate::config::Config;
use crate::intake::Intake;
use crate::source::{FrameSource, StreamInfo};
use admission::{Admission, Holder, Refusal};
use conn::{Conn, ConnId, Conns, Kind, Port};
use ctx::{After, Ctx};
use fanout::{Fanout, Stream, StreamId};
use gate::Gate;
use http::{Handoff, Http};
use onvif::Onvif;
use random::{random_fill, random_u64};
use rtsp::Rtsp;
use signals::Signals;
use substream::SubStream;

const LISTENER: Token = Token(0);
const RTP: Token = Token(1);
const RTCP: Token = Token(2);
const SOURCE: Token = Token(3);
const SIGNAL: Token = Token(4);
const REPORT_SIGNAL: Token = Token(5);
const HTTP_LISTENER: Token = Token(6);
const DISCOVERY: Token = Token(7);
const ADDRESS_CHANGES: Token = Token(8);
/// The sub-stream's worker finished a frame.
const SUB_DONE: Token = Token(9);
/// The fan-out queued a main-stream frame for the sub-stream.
const SUB_FRAME: Token = Token(10);

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

/// Whether the event loop goes on after a turn.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Turn {
    Go,
    Stop,
}

/// What a part is lent for one call: disjoint fields of the server.
macro_rules! ctx {
    ($s:ident) => {
        Ctx {
            conns: &mut $s.conns,
            fanout: &mut $s.fanout,
            gate: &$s.gate,
            admission: &mut $s.admission,
            cfg: &$s.cfg,
            after: &mut $s.after,
        }
    };
}

pub struct Server {
    cfg: Config,
    poll: Poll,
    listener: TcpListener,
    /// None when http_port = 0.
    http_listener: Option<TcpListener>,
    conns: Conns,
    /// What the parts left the loop to finish after a call.
    after: After,
    /// Reused list of the fan-out's woken subscribers, so sending a frame
    /// allocates nothing.
    ready: Vec<Token>,
    fanout: Fanout,
    gate: Gate,
    admission: Admission,
    rtsp: Rtsp,
    http: Http,
    onvif: Onvif,
    /// The detection sub-stream, unless [streams.sub] turns it off.
    sub: Option<SubStream>,
    /// WS-Discovery, when ONVIF is on.
    discovery: Option<onvif::discovery::Discovery>,
    source: Option<Box<dyn FrameSource>>,
    /// E.g. "MJPG 1280x720 at 30 fps from /dev/video0 (UVC Camera)".
    camera_mode: String,
    signals: Signals,
    /// Notices the wall clock being set, once per housekeeping pass.
    wall_clock: WallClockWatch,
    started: Mono,
    /// Unix time of the start, for process_start_time_seconds.
    started_unix: f64,
    last_log: Option<Mono>,
    frames_at_last_log: u64,
    latency_since: Mono,
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
        let udp = rtsp::Udp::bind(cfg.listen, cfg.rtp_port, cfg.mtu)?;
        // Room for a camera that changes its size (clients keep the first),
        // none for a header claiming gigapixels; at most the largest size
        // the config takes.
        let intake = Intake::new(
            cfg.quality,
            (4 * info.width as usize * info.height as usize).min(8192 * 8192),
        )?;
        let ids = [random_u64(), random_u64(), random_u64(), random_u64()];
        let main = Stream::new(
            &cfg.path,
            info,
            cfg.mtu,
            Fanout::pool_size(cfg.client_queue),
            ids,
        )?;
        let mut fanout = Fanout::new(intake, cfg.client_queue, main);
        let mut key = [0u8; 32];
        random_fill(&mut key);
        let gate = Gate::new(&cfg, key);
        let rtsp = Rtsp::new(udp, &mut fanout, format!("camstream@{}", host::hostname()));
        let http = Http::new(&mut fanout, cfg.onvif);
        let (wall, _) = wall_now();
        let poll = Poll::new()?;
        let mut server = Server {
            poll,
            listener,
            http_listener,
            conns: Conns::new(),
            after: After::default(),
            ready: Vec::new(),
            fanout,
            gate,
            admission: Admission::new(cfg.max_clients * 2 + 16, cfg.max_connections_per_ip),
            rtsp,
            http,
            onvif: Onvif::default(),
            sub: None,
            discovery: None,
            source: None,
            camera_mode: String::new(),
            signals: Signals::new()?,
            wall_clock: WallClockWatch::default(),
            started: Mono::now(),
            started_unix: wall as f64 / 1e9,
            last_log: None,
            frames_at_last_log: 0,
            latency_since: Mono::now(),
            cfg,
        };
        if let Some(sc) = server.cfg.sub {
            let r = server.poll.registry();
            match SubStream::start(
                sc,
                server.cfg.mtu,
                &mut server.fanout,
                r,
                SUB_DONE,
                SUB_FRAME,
            ) {
                Ok(s) => server.sub = Some(s),
                // The main stream is what matters; say why there is no other.
                Err(e) => log::warn!("no sub-stream: {e:#}"),
            }
        }
        // Announced only where NVRs can reach it: not when it listens on
        // loopback alone (as the tests' cameras do).
        if server.cfg.onvif && server.cfg.http_port != 0 && !server.cfg.listen.is_loopback() {
            match onvif::discovery::Discovery::open(
                onvif::endpoint(),
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
        server.rtsp.register(r, RTP, RTCP)?;
        server.signals.register(r, SIGNAL, REPORT_SIGNAL)?;
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
        self.camera_mode = source.mode();
        self.fanout.set_camera_present(source.present());
        self.source = Some(source);
        let mut events = Events::with_capacity(256);
        let mut next_tick = Mono::now();
        loop {
            let timeout = if self.after.resume.is_empty() {
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
    /// hands each to its part, then handles the connections left input.
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
                        self.rtsp.rtp_readable();
                    }
                    if ev.is_writable() {
                        self.rtsp.rtp_writable(&mut self.fanout);
                    }
                }
                RTCP => self.rtsp.rtcp_readable(&mut self.fanout),
                DISCOVERY => {
                    if let Some(d) = &mut self.discovery {
                        d.udp_readable();
                    }
                }
                ADDRESS_CHANGES => {
                    if let Some(d) = &mut self.discovery {
                        d.netlink_readable();
                    }
                }
                SUB_DONE => {
                    if let Some(s) = &mut self.sub {
                        s.done(&mut self.fanout);
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
                    self.signals.take_report();
                    self.log_send_latency();
                }
                token => {
                    // A closed connection's events name its generation,
                    // and find nothing: not the next one in its slot.
                    let Some(ci) = conn::of_token(token) else {
                        continue;
                    };
                    if ev.is_writable() {
                        self.flush(ci);
                    }
                    if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                        self.conn_readable(ci);
                    }
                }
            }
            self.wake_subscribers();
        }
        for ci in std::mem::take(&mut self.after.resume) {
            // What is already in its buffer first: a complete request is
            // answered without waiting for another byte.
            self.input(ci);
            self.conn_readable(ci);
            self.wake_subscribers();
        }
        Ok(Turn::Go)
    }

    /// The source has frames (or news of the camera): into the fan-out.
    fn source_readable(&mut self) -> Result<()> {
        let mut source = self.source.take().expect("set in run");
        if let Some(s) = &mut self.sub {
            s.follow_watchers(&mut self.fanout);
        }
        let fanout = &mut self.fanout;
        let r = source.ready(&mut |f| fanout.captured(f));
        self.note_camera(&*source);
        self.source = Some(source);
        r
    }

    fn note_camera(&mut self, source: &dyn FrameSource) {
        let present = source.present();
        if present != self.fanout.camera_present() {
            self.camera_mode = source.mode();
            self.fanout.set_camera_present(present);
            if !present {
                self.http.camera_lost(&mut ctx!(self));
            }
        }
    }

    /// Frames the fan-out queued: each subscriber's connection is flushed
    /// (the sub-stream's encoder takes its own); then what that closed is
    /// finished.
    fn wake_subscribers(&mut self) {
        loop {
            self.fanout.take_ready(&mut self.ready);
            if self.ready.is_empty() {
                break;
            }
            let ready = std::mem::take(&mut self.ready);
            for &t in &ready {
                match (t, conn::of_token(t)) {
                    (SUB_FRAME, _) => {
                        if let Some(s) = &mut self.sub {
                            s.frame_ready(&mut self.fanout);
                        }
                    }
                    (_, Some(ci)) => self.flush(ci),
                    _ => {}
                }
            }
            self.ready = ready;
        }
        self.settle();
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
        use std::io::Write;
        let open: Vec<_> = self
            .conns
            .iter()
            .map(|(id, c)| Holder {
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
                let why = "pushed out by a newer connection before it authenticated";
                ctx::close(&mut self.conns, &mut self.after, old, why);
                self.settle();
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
        let token = conn::token(id);
        let r = self.poll.registry();
        if let Err(e) = r.register(&mut stream, token, Interest::READABLE | Interest::WRITABLE) {
            log::warn!("{peer}: {e}");
            return;
        }
        log::debug!("{peer}: connected ({port:?})");
        let inserted = self.conns.insert(Conn::new(stream, peer, local, port));
        debug_assert_eq!(inserted, id);
        match port {
            Port::Rtsp => self.rtsp.opened(id),
            Port::Http => self.http.opened(id),
        }
        self.admission.opened(peer.ip());
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
                return self.input(ci);
            }
            let room = (cap - conn.inbuf.len()).min(buf.len());
            match conn.stream.read(&mut buf[..room]) {
                Ok(0) => {
                    self.input(ci);
                    return self.close(ci, "closed by peer");
                }
                Ok(n) => {
                    conn.last_input = Mono::now();
                    // A tunnel's GET side carries nothing in: its requests
                    // come through the POST side.
                    if !self.rtsp.is_tunnel_get(ci) {
                        conn.inbuf.extend_from_slice(&buf[..n]);
                    }
                    self.input(ci);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.close(ci, &format!("read: {e}")),
            }
        }
        // More may be waiting, but others get their turn first; readiness is
        // edge-triggered, so remember to come back.
        self.after.resume.push(ci);
    }

    /// Hands a connection's input to its part.
    fn input(&mut self, ci: ConnId) {
        match self.conns.get(ci).map(|c| c.kind) {
            Some(Kind::Rtsp) => self.rtsp.input(ci, &mut ctx!(self)),
            Some(Kind::TunnelPost) => self.rtsp.tunnel_input(ci, &mut ctx!(self)),
            Some(Kind::Http) => {
                let mut handoff = self.http.input(ci, &mut ctx!(self));
                while let Some(h) = handoff {
                    handoff = self.handoff(ci, h);
                }
            }
            None => {}
        }
        self.settle();
    }

    /// What HTTP handed over: a tunnel's half to RTSP; /metrics and ONVIF
    /// answered here, then HTTP's next request.
    fn handoff(&mut self, ci: ConnId, h: Handoff) -> Option<Handoff> {
        match h {
            Handoff::TunnelGet { cookie, user } => {
                self.conns.get_mut(ci)?.kind = Kind::Rtsp;
                self.rtsp.tunnel_get(ci, cookie, user, &mut ctx!(self));
                None
            }
            Handoff::TunnelPost { cookie, user } => {
                self.conns.get_mut(ci)?.kind = Kind::TunnelPost;
                self.rtsp.tunnel_post(ci, cookie, user, &mut ctx!(self));
                None
            }
            Handoff::Metrics { head_only, close } => {
                let text = self.metrics_text();
                let ctx = &mut ctx!(self);
                self.http.metrics(ci, &text, head_only, close, ctx);
                self.http.input(ci, ctx)
            }
            Handoff::Onvif(req) => {
                let answer = self.onvif.handle(
                    &req,
                    onvif::Context {
                        cfg: &self.cfg,
                        fanout: &mut self.fanout,
                        sub: self.sub.as_mut(),
                    },
                );
                let ctx = &mut ctx!(self);
                self.http.onvif_answer(ci, answer, ctx);
                self.http.input(ci, ctx)
            }
        }
    }

    /// Writes a connection's pending bytes until the socket is full.
    fn flush(&mut self, ci: ConnId) {
        match self.conns.get(ci).map(|c| c.kind) {
            Some(Kind::Rtsp | Kind::TunnelPost) => self.rtsp.flush(ci, &mut ctx!(self)),
            Some(Kind::Http) => self.http.flush(ci, &mut ctx!(self)),
            None => {}
        }
    }

    fn close(&mut self, ci: ConnId, why: &str) {
        ctx::close(&mut self.conns, &mut self.after, ci, why);
        self.settle();
    }

    /// Finishes closing what the parts took out of the table: the socket
    /// leaves the poll, its address's count goes down, its part lets go of
    /// it (which may close others: a tunnel's other half).
    fn settle(&mut self) {
        while let Some(mut c) = self.after.closed.pop() {
            let _ = self.poll.registry().deregister(&mut c.conn.stream);
            self.admission.closed(c.peer().ip());
            log::debug!("{}: {}", c.peer(), c.why);
            match c.kind() {
                Kind::Rtsp | Kind::TunnelPost => self.rtsp.closed(c.id, &c.why, &mut ctx!(self)),
                Kind::Http => self.http.closed(c.id, c.peer(), &mut self.fanout),
            }
        }
    }

    fn housekeeping(&mut self, now: Mono) {
        let (wall, mono) = wall_now();
        let stepped = self.wall_clock.observe(wall, mono);
        if let Some(step) = stepped {
            log::info!(
                "wall clock stepped by {:+.3} s (NTP or set by hand): RTCP sender reports follow it, RTP timestamps go on unchanged",
                step as f64 / 1e9
            );
        }
        self.rtsp
            .housekeeping(now, stepped.is_some(), &mut ctx!(self));
        if let Some(source) = self.source.take() {
            self.note_camera(&*source);
            self.source = Some(source);
        }
        self.http.housekeeping(now, &mut ctx!(self));
        let request_timeout = Duration::from_secs(u64::from(self.cfg.request_timeout));
        let idle_timeout = Duration::from_secs(u64::from(self.cfg.idle_timeout));
        let (mut stuck, mut slow, mut idle) = (Vec::new(), Vec::new(), Vec::new());
        for (ci, c) in self.conns.iter() {
            if let Some(t) = c.closing {
                if now.saturating_sub(t) > CLOSE_GRACE {
                    stuck.push(ci);
                }
            } else if c
                .request_started
                .is_some_and(|t| now.saturating_sub(t) > request_timeout)
            {
                slow.push(ci);
            } else if !self.streaming(ci, c)
                && c.ctrl_pending() == 0
                && now.saturating_sub(c.last_input) > idle_timeout
            {
                idle.push(ci);
            }
        }
        for ci in stuck {
            self.close(ci, "did not read the error response");
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
            match conn.kind {
                Kind::Rtsp => Rtsp::timed_out(conn),
                Kind::Http => Http::timed_out(conn),
                Kind::TunnelPost => {}
            }
            self.flush(ci);
        }
        for ci in idle {
            if let Some(conn) = self.conns.get(ci) {
                log::info!(
                    "{}: idle without a session or stream for {} s (idle_timeout); closing",
                    conn.peer,
                    self.cfg.idle_timeout
                );
            }
            self.close(ci, "idle without a session or stream");
        }
        self.wake_subscribers();
        self.log_stats(now);
    }

    /// Whether a connection carries a stream (then it is not idle).
    fn streaming(&self, ci: ConnId, c: &Conn) -> bool {
        match c.kind {
            Kind::Rtsp | Kind::TunnelPost => self.rtsp.streaming(ci),
            Kind::Http => self.http.streaming(ci),
        }
    }

    /// What every part counts, for /metrics.
    fn metrics_text(&self) -> String {
        let rtsp = self.rtsp.counts(&self.conns);
        let http = self.http.counts();
        let delivery = |label: &str| {
            let d = self
                .fanout
                .deliveries()
                .iter()
                .find(|(n, _)| *n == label)
                .map(|(_, d)| *d)
                .unwrap_or_default();
            http::metrics::Delivery {
                frames_sent: d.frames_sent,
                frames_dropped: d.frames_dropped,
                bytes_sent: d.bytes_sent,
            }
        };
        let main = self.fanout.stream(StreamId::MAIN);
        let rtsp_port = self.rtsp_addr().map_or(self.cfg.rtsp_port, |a| a.port());
        let http_port = self.http_addr().map_or(self.cfg.http_port, |a| a.port());
        http::metrics::text(&http::metrics::Figures {
            path: &self.cfg.path,
            sub_path: self.sub.as_ref().map_or("", |_| substream::PATH),
            onvif: self.cfg.onvif,
            rtsp_port,
            http_port,
            width: main.info.width,
            height: main.info.height,
            fps: main.info.fps,
            camera_present: self.fanout.camera_present(),
            source: self.cfg.source.to_string(),
            mode: &self.camera_mode,
            intake: self.fanout.intake_counts(),
            rtsp: delivery("rtsp"),
            http: delivery("http"),
            sessions_udp: rtsp.sessions_udp,
            sessions_tcp: rtsp.sessions_tcp,
            sessions_tunnelled: rtsp.sessions_tunnelled,
            mjpeg_streams: http.mjpeg_streams,
            rtsp_connections: rtsp.connections,
            http_connections: http.connections,
            refusals: Refusal::ALL
                .iter()
                .map(|r| (r.name(), self.admission.refusals[*r as usize]))
                .collect(),
            http_requests: http.requests,
            snapshots: http.snapshots,
            uptime_seconds: Mono::now().saturating_sub(self.started).as_secs_f64(),
            start_time_seconds: self.started_unix,
            latency: &self.fanout.latency.total,
        })
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
        let c = self.fanout.intake_counts();
        let streamed = c.frames_taken - self.frames_at_last_log;
        let refused: u64 = c.refused.iter().sum();
        let repaired: u64 = c.repaired.iter().sum();
        log::info!(
            "{:.1} frames/s, {} sessions, {} MJPEG streams, {} connections; of {} frames since start {repaired} repaired, {refused} refused",
            streamed as f64 / elapsed.as_secs_f64(),
            self.rtsp.sessions(),
            self.http.counts().mjpeg_streams,
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
            self.fanout.latency.window
        );
        self.fanout.latency.window.reset();
        self.latency_since = now;
    }

    fn shutdown(&mut self) {
        self.log_send_latency();
        let c = self.fanout.intake_counts();
        log::info!(
            "{} frames in, {} streamed; repaired: {}; refused: {}",
            c.frames_in,
            c.frames_taken,
            Intake::summary(&c.repaired),
            Intake::summary(&c.refused)
        );
        self.rtsp.shutdown(&mut ctx!(self));
        for ci in self.conns.ids() {
            // Best effort: whatever fits in the socket buffer now.
            self.flush(ci);
        }
    }

    /// Whether every part's tables agree with each other and with the
    /// connections (the fuzz target checks it after each step): Ok, or
    /// what does not hold.
    pub fn audit(&self) -> Result<(), String> {
        self.rtsp.audit(&self.conns)?;
        self.http.audit(&self.conns)?;
        let mut per_ip = std::collections::HashMap::new();
        for (_, c) in self.conns.iter() {
            *per_ip.entry(c.peer.ip()).or_insert(0) += 1;
        }
        if !self.admission.counts_match(&per_ip) {
            return Err("admission's count of connections per address is off".into());
        }
        Ok(())
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
