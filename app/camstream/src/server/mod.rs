//! The server: one event loop over the listening sockets (RTSP, HTTP), the
//! client connections, the shared UDP sockets, the frame source and
//! signals. It keeps the loop, the connection table and the tokens, and
//! hands each event to the part it is for:
//!
//! - [`crate::fanout`]: frames in, each built once, queued to its
//!   subscribers;
//! - [`rtsp`] and [`http`] (with [`onvif`] as one of its routes): the
//!   protocols, subscribers of the fan-out, each with its own state of its
//!   connections;
//! - [`crate::media`]: the producers of streams made of the main one
//!   (H.264, the sub-stream), given its pictures and publishers of their
//!   own;
//! - [`connections`]: accepting, reading (each input handed to its
//!   protocol, timed), writing and closing client connections;
//! - [`admission`] (who gets a connection) and [`gate`] (who may watch).
//!
//! A frame's path: the source is readable → [`Fanout::captured`] (intake,
//! build, queue) → the tokens of the subscribers it queued to → each
//! one's connection flushed by its protocol → the socket.

mod admission;
mod conn;
mod ctx;
mod gate;
mod host;
mod ifaces;
mod http;
mod listen;
mod onvif;
mod picture;
mod report;
mod rtsp;
mod signals;
mod transport;
pub mod verifier;
// Public for the whep_offer fuzz target (webrtc::peer_connection).
#[cfg(feature = "webrtc")]
pub mod webrtc;

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Result;
use mio::{Events, Poll, Token};

use crate::clock::Mono;
use crate::config::Config;
use crate::latency::Stalls;
use crate::source::{FrameSource, StreamInfo};
use admission::Admission;
use conn::After;
use conn::{Conns, Kind, Port};
use crate::fanout::{Fanout, Stream};
use crate::media::{MainPicture, Producers};
use gate::Gate;
use http::Http;
use listen::Listeners;
use onvif::Onvif;
use crate::random::random_fill;
use report::Reports;
use rtsp::Rtsp;
use signals::Signals;

const LISTENER: Token = Token(0);
const RTP: Token = Token(1);
const RTCP: Token = Token(2);
const SOURCE: Token = Token(3);
const SIGNAL: Token = Token(4);
const REPORT_SIGNAL: Token = Token(5);
const HTTP_LISTENER: Token = Token(6);
const DISCOVERY: Token = Token(7);
const ADDRESS_CHANGES: Token = Token(8);
/// The worker threads': one of the producers' (media::Producers) finished
/// a frame, the password hash checker (verifier) a check, or WebRTC's
/// answerer an offer. One waker for all of them, as mio allows one per
/// poll.
const WORKERS: Token = Token(9);
/// WebRTC's UDP socket, shared by its sessions, and its TCP listener
/// (ICE-TCP's passive candidates).
const WEBRTC: Token = Token(10);
const WEBRTC_TCP: Token = Token(11);

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

/// The H.264 stream's path: rtsp://CAMERA/h264, and WHEP's /whep/h264.
pub use crate::media::H264_PATH;

/// Whether the event loop goes on after a turn.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Turn {
    Go,
    Stop,
}

/// What a part is lent for one call: disjoint fields of the server.
macro_rules! ctx {
    ($s:ident) => {
        crate::server::ctx::Ctx {
            conns: &mut $s.conns,
            fanout: &mut $s.fanout,
            gate: &$s.gate,
            admission: &mut $s.admission,
            cfg: &$s.cfg,
            after: &mut $s.after,
        }
    };
}

// After the macro, which it uses.
mod connections;

pub struct Server {
    cfg: Config,
    poll: Poll,
    listeners: Listeners,
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
    /// What is made of the main stream's frames (media::Producers).
    producers: Producers,
    /// Checks passwords against hashes, when users are set from one.
    verifier: Option<verifier::Verifier>,
    /// WebRTC's sessions (WHEP), when it is on.
    #[cfg(feature = "webrtc")]
    webrtc: Option<webrtc::WebRtc>,
    /// WS-Discovery, when ONVIF is on.
    discovery: Option<onvif::discovery::Discovery>,
    /// `[mqtt]`: motion published to a broker (its own thread).
    mqtt: Option<crate::mqtt::Mqtt>,
    source: Option<Box<dyn FrameSource>>,
    /// The picture settings set from the page or ONVIF, and where they
    /// are kept.
    picture: picture::Picture,
    /// E.g. "MJPG 1280x720 at 30 fps from /dev/video0 (UVC Camera)".
    camera_mode: String,
    signals: Signals,
    reports: Reports,
    stalls: Stalls,
}

impl Server {
    /// Binds every socket; a port in use is a start-up error.
    pub fn bind(cfg: Config, info: StreamInfo) -> Result<Server> {
        let listeners = Listeners::bind(&cfg)?;
        let udp = rtsp::Udp::bind(cfg.listen, cfg.rtp_port, cfg.mtu)?;
        let main = Stream::camera(&cfg.path, info, cfg.mtu, cfg.client_queue + 2)?;
        let mut fanout = Fanout::new(cfg.source.quality, cfg.client_queue, main)?;
        let mut key = [0u8; 32];
        random_fill(&mut key);
        let gate = Gate::new(&cfg, key);
        let rtsp = Rtsp::new(udp, &mut fanout, format!("camstream@{}", host::hostname()));
        let http = Http::new(&mut fanout, cfg.onvif);
        let poll = Poll::new()?;
        let mut server = Server {
            poll,
            listeners,
            conns: conn::conns(),
            after: After::default(),
            ready: Vec::new(),
            fanout,
            gate,
            admission: Admission::new(
                cfg.max_clients * 2 + 16,
                cfg.max_connections_per_ip,
                cfg.max_connections_per_user,
            ),
            rtsp,
            http,
            onvif: Onvif::default(),
            producers: Producers::default(),
            verifier: None,
            #[cfg(feature = "webrtc")]
            webrtc: None,
            discovery: None,
            mqtt: None,
            source: None,
            picture: picture::Picture::new(&cfg),
            camera_mode: String::new(),
            signals: Signals::new()?,
            reports: Reports::new(),
            stalls: Stalls::default(),
            cfg,
        };
        let r = server.poll.registry();
        let done = std::sync::Arc::new(mio::Waker::new(r, WORKERS)?);
        #[cfg(feature = "webrtc")]
        {
            server.webrtc = webrtc::WebRtc::bind(&server.cfg, &mut server.fanout, done.clone())?;
        }
        server.producers = Producers::start(&server.cfg, &mut server.fanout, &done);
        server.picture.wake_with(done.clone());
        server.verifier = verifier::Verifier::start(&server.cfg, done);
        server.discovery = onvif::discovery::start(&server.cfg, r, DISCOVERY, ADDRESS_CHANGES);
        server.mqtt = server.cfg.mqtt.as_ref().and_then(|m| {
            crate::mqtt::Mqtt::start(m, &host::hostname())
                .map_err(|e| log::warn!("no MQTT: {e:#}"))
                .ok()
        });
        let r = server.poll.registry();
        server.listeners.register(r, LISTENER, HTTP_LISTENER)?;
        server.rtsp.register(r, RTP, RTCP)?;
        server.signals.register(r, SIGNAL, REPORT_SIGNAL)?;
        #[cfg(feature = "webrtc")]
        if let Some(w) = &mut server.webrtc {
            w.register(r, WEBRTC, WEBRTC_TCP)?;
        }
        Ok(server)
    }

    pub fn rtsp_addr(&self) -> io::Result<SocketAddr> {
        self.listeners.rtsp_addr()
    }

    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.listeners.http_addr()
    }

    /// WebRTC's UDP port, when WebRTC is on.
    pub fn webrtc_port(&self) -> Option<u16> {
        self.webrtc_figures().map(|w| w.port)
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
            let timeout = if self.after.resume.is_empty() && !self.webrtc_unread() {
                let tick = next_tick.saturating_sub(Mono::now());
                self.webrtc_due().map_or(tick, |d| d.min(tick))
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
                // Each takes what its worker finished, if anything.
                WORKERS => {
                    self.producers.done(&mut self.fanout);
                    self.motion_looked();
                    self.passwords_checked();
                    self.offers_answered();
                    self.pictures_done();
                }
                SOURCE => self.source_readable()?,
                WEBRTC => self.webrtc_readable(),
                WEBRTC_TCP => self.webrtc_tcp_acceptable(),
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
                    self.reports.send_latency(&mut self.fanout);
                }
                token => {
                    // A closed connection's events name its generation,
                    // and find nothing: not the next one in its slot.
                    let Some(ci) = conn::of_token(token) else {
                        // Or one of WebRTC's TCP connections.
                        self.webrtc_tcp_ready(token);
                        self.wake_subscribers();
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
        self.webrtc_turn();
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
        let Some(mut source) = self.source.take() else {
            return Ok(());
        };
        self.producers.follow_watchers(&mut self.fanout);
        source.want_raw(self.producers.wants_raw());
        let (fanout, producers) = (&mut self.fanout, &mut self.producers);
        let r = source.ready(&mut |f| {
            // Published on the main stream, then to the producers as its
            // clients have it, the raw picture beside it.
            if let Some(frame) = fanout.captured(&f) {
                let pic = MainPicture {
                    frame: &frame,
                    raw: f.raw,
                };
                producers.picture(&pic, fanout);
            }
        });
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

    /// Frames the fan-out queued: each subscriber's connection is flushed;
    /// then what that closed is finished.
    fn wake_subscribers(&mut self) {
        loop {
            self.fanout.take_ready(&mut self.ready);
            if self.ready.is_empty() {
                break;
            }
            let ready = std::mem::take(&mut self.ready);
            for &t in &ready {
                if let Some(ci) = conn::of_token(t) {
                    self.flush(ci);
                } else if let Some(si) = rtsp::session_of_token(t) {
                    self.rtsp.session_woken(si, &mut self.fanout);
                } else {
                    self.webrtc_woken(t);
                }
            }
            self.ready = ready;
        }
        self.settle();
    }

    /// A worker finished (the motion worker a picture, or another a
    /// frame): only a start or stop of motion goes on, to the event
    /// service's subscriptions (answering the pulls waiting for it) and to
    /// MQTT, so an encoded frame costs a comparison.
    fn motion_looked(&mut self) {
        let Some(m) = &self.producers.motion else {
            return;
        };
        if !self.onvif.events.motion(m.moving) {
            return;
        }
        if let Some(q) = &mut self.mqtt {
            q.motion(m.moving, m.started_picture.as_deref());
        }
        self.pulls_due(Mono::now());
    }

    fn housekeeping(&mut self, now: Mono) {
        self.rtsp.housekeeping(now, &mut ctx!(self));
        self.pulls_due(now);
        if let Some(source) = self.source.take() {
            self.note_camera(&*source);
            self.source = Some(source);
        }
        self.http.housekeeping(now, &mut ctx!(self));
        #[cfg(feature = "webrtc")]
        if let Some(w) = &mut self.webrtc {
            w.housekeeping(now, &mut self.fanout);
        }
        let deadlines = [
            CLOSE_GRACE,
            Duration::from_secs(u64::from(self.cfg.request_timeout)),
            Duration::from_secs(u64::from(self.cfg.idle_timeout)),
        ];
        let conn::Overdue { stuck, slow, idle } =
            conn::overdue(&self.conns, now, deadlines, |ci, c| {
                connections::streaming(&self.rtsp, &self.http, ci, c)
            });
        for ci in stuck {
            self.close(ci, "did not read the error response");
        }
        for ci in slow {
            let Some(conn) = self.conns.get_mut(ci) else {
                continue;
            };
            conn.timed_out(now, self.cfg.request_timeout);
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
        let clients = (self.rtsp.sessions(), self.http.counts().mjpeg_streams);
        self.reports
            .minute(now, &self.fanout, clients, self.conns.len());
    }

    fn shutdown(&mut self) {
        self.reports.stopping(&mut self.fanout);
        self.rtsp.shutdown(&mut ctx!(self));
        #[cfg(feature = "webrtc")]
        if let Some(w) = &mut self.webrtc {
            w.shutdown(&mut self.fanout);
        }
        for ci in self.conns.ids() {
            // Best effort: whatever fits in the socket buffer now.
            self.flush(ci);
        }
    }

    /// Whether every part's tables agree with each other and with the
    /// connections (the fuzz target checks it after each step): Ok, or
    /// what does not hold.
    pub fn audit(&self) -> Result<(), String> {
        self.rtsp.audit(&self.conns, &self.fanout)?;
        self.http.audit(&self.conns)?;
        #[cfg(feature = "webrtc")]
        if let Some(w) = &self.webrtc {
            w.audit(&self.fanout)?;
        }
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

/// The loop's side of WebRTC: its socket, its sessions' timers and frames,
/// and WHEP's requests. Without the feature there are no sessions, and an
/// offer is answered that WebRTC is not built in.
impl Server {
    #[cfg(feature = "webrtc")]
    fn webrtc_readable(&mut self) {
        if let Some(w) = &mut self.webrtc {
            w.readable(&mut self.fanout);
        }
        self.webrtc_input_times();
    }

    /// What each packet a session took held the loop.
    #[cfg(feature = "webrtc")]
    fn webrtc_input_times(&mut self) {
        if let Some(w) = &mut self.webrtc {
            for d in w.take_input_times() {
                self.stalls.record(crate::latency::InputKind::WebRtc, d);
            }
        }
    }

    #[cfg(feature = "webrtc")]
    fn webrtc_tcp_acceptable(&mut self) {
        if let Some(w) = &mut self.webrtc {
            w.tcp_acceptable(self.poll.registry());
        }
    }

    #[cfg(feature = "webrtc")]
    fn webrtc_tcp_ready(&mut self, t: Token) {
        if let (Some(w), Some(id)) = (&mut self.webrtc, webrtc::tcp_of_token(t)) {
            w.tcp_ready(id, &mut self.fanout);
        }
        self.webrtc_input_times();
    }

    /// Datagrams left for this turn, and the sessions' timers that are due.
    #[cfg(feature = "webrtc")]
    fn webrtc_turn(&mut self) {
        if let Some(w) = &mut self.webrtc {
            w.read_left(&mut self.fanout);
            w.timeouts(&mut self.fanout);
        }
        self.webrtc_input_times();
        self.wake_subscribers();
    }

    #[cfg(feature = "webrtc")]
    fn webrtc_unread(&self) -> bool {
        self.webrtc.as_ref().is_some_and(|w| w.unread())
    }

    #[cfg(feature = "webrtc")]
    fn webrtc_due(&self) -> Option<Duration> {
        self.webrtc.as_ref().and_then(|w| w.next_due())
    }

    #[cfg(feature = "webrtc")]
    fn webrtc_woken(&mut self, t: Token) {
        if let (Some(w), Some(si)) = (&mut self.webrtc, webrtc::of_token(t)) {
            w.woken(si, &mut self.fanout);
        }
    }

    /// A WHEP request's answer; None: the offer is being answered off the
    /// loop, and its request waits (Self::offers_answered).
    #[cfg(feature = "webrtc")]
    fn whep(&mut self, ci: conn::ConnId, w: http::Whep) -> Option<http::WhepAnswer> {
        use http::{Whep, WhepAnswer};
        let Some(rtc) = &mut self.webrtc else {
            return Some(WhepAnswer::Refused(404, "WebRTC is off (webrtc = false)".into()));
        };
        match w {
            Whep::Offer {
                stream,
                sdp,
                user,
                peer,
                local,
            } => {
                let o = webrtc::OfferRequest {
                    path: stream.clone(),
                    sdp,
                    peer,
                    local,
                    user,
                };
                rtc.offer(ci, o, &mut self.fanout, &self.cfg)
                    .map(|a| whep_answer(a, &stream))
            }
            Whep::Delete {
                resource,
                user,
                peer,
            } => {
                Some(
                    if rtc.delete(&resource, user.as_deref(), peer.ip(), &mut self.fanout) {
                        WhepAnswer::Deleted
                    } else {
                        WhepAnswer::Refused(404, "no such WebRTC session of yours".into())
                    },
                )
            }
        }
    }

    /// Its port and counts, for /metrics.
    #[cfg(feature = "webrtc")]
    fn webrtc_figures(&self) -> Option<http::metrics::WebRtcFigures> {
        let w = self.webrtc.as_ref()?;
        let c = w.counts();
        Some(http::metrics::WebRtcFigures {
            port: w.port(),
            sessions: w.sessions(),
            started: c.sessions_started,
            connected: c.sessions_connected,
            key_frame_requests: c.key_frame_requests,
            datagrams_unmatched: c.datagrams_unmatched,
        })
    }

    #[cfg(not(feature = "webrtc"))]
    fn webrtc_figures(&self) -> Option<http::metrics::WebRtcFigures> {
        None
    }

    #[cfg(not(feature = "webrtc"))]
    fn webrtc_readable(&mut self) {}

    #[cfg(not(feature = "webrtc"))]
    fn webrtc_tcp_acceptable(&mut self) {}

    #[cfg(not(feature = "webrtc"))]
    fn webrtc_tcp_ready(&mut self, _: Token) {}

    #[cfg(not(feature = "webrtc"))]
    fn webrtc_turn(&mut self) {}

    #[cfg(not(feature = "webrtc"))]
    fn webrtc_unread(&self) -> bool {
        false
    }

    #[cfg(not(feature = "webrtc"))]
    fn webrtc_due(&self) -> Option<Duration> {
        None
    }

    #[cfg(not(feature = "webrtc"))]
    fn webrtc_woken(&mut self, _: Token) {}

    /// Offers the answerer answered: each waiting request gets its answer
    /// and goes on with its connection's next.
    #[cfg(feature = "webrtc")]
    fn offers_answered(&mut self) {
        let Some(w) = &mut self.webrtc else {
            return;
        };
        let conns = &self.conns;
        let done = w.answered(&mut self.fanout, |ci| conns.get(ci).is_some());
        for (ci, answer) in done {
            // Its stream's path: the H.264 stream's, the one WHEP serves.
            let answer = whep_answer(answer, H264_PATH);
            self.whep_answered(ci, answer);
        }
    }

    #[cfg(not(feature = "webrtc"))]
    fn whep(&mut self, _: conn::ConnId, _: http::Whep) -> Option<http::WhepAnswer> {
        Some(http::WhepAnswer::Refused(404, "this camstream is built without WebRTC".into()))
    }

    #[cfg(not(feature = "webrtc"))]
    fn offers_answered(&mut self) {}
}

/// The WebRTC part's answer as HTTP writes it.
#[cfg(feature = "webrtc")]
fn whep_answer(a: webrtc::Answer, stream: &str) -> http::WhepAnswer {
    match a {
        webrtc::Answer::Created { sdp, resource } => http::WhepAnswer::Created {
            sdp,
            stream: stream.to_string(),
            resource,
        },
        webrtc::Answer::Refused(status, why) => http::WhepAnswer::Refused(status, why),
    }
}
