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
mod http;
mod listen;
mod onvif;
mod report;
mod rtsp;
mod signals;
mod transport;
pub mod verifier;

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
/// a frame, or the password hash checker (verifier) a check. One waker for
/// all of them, as mio allows one per poll.
const WORKERS: Token = Token(9);

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
    /// WS-Discovery, when ONVIF is on.
    discovery: Option<onvif::discovery::Discovery>,
    source: Option<Box<dyn FrameSource>>,
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
            discovery: None,
            source: None,
            camera_mode: String::new(),
            signals: Signals::new()?,
            reports: Reports::new(),
            stalls: Stalls::default(),
            cfg,
        };
        let r = server.poll.registry();
        let done = std::sync::Arc::new(mio::Waker::new(r, WORKERS)?);
        server.producers = Producers::start(&server.cfg, &mut server.fanout, &done);
        server.verifier = verifier::Verifier::start(&server.cfg, done);
        server.discovery = onvif::discovery::start(&server.cfg, r, DISCOVERY, ADDRESS_CHANGES);
        let r = server.poll.registry();
        server.listeners.register(r, LISTENER, HTTP_LISTENER)?;
        server.rtsp.register(r, RTP, RTCP)?;
        server.signals.register(r, SIGNAL, REPORT_SIGNAL)?;
        Ok(server)
    }

    pub fn rtsp_addr(&self) -> io::Result<SocketAddr> {
        self.listeners.rtsp_addr()
    }

    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.listeners.http_addr()
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
                // Each takes what its worker finished, if anything.
                WORKERS => {
                    self.producers.done(&mut self.fanout);
                    self.passwords_checked();
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
                    self.reports.send_latency(&mut self.fanout);
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
                }
            }
            self.ready = ready;
        }
        self.settle();
    }

    fn housekeeping(&mut self, now: Mono) {
        self.rtsp.housekeeping(now, &mut ctx!(self));
        if let Some(source) = self.source.take() {
            self.note_camera(&*source);
            self.source = Some(source);
        }
        self.http.housekeeping(now, &mut ctx!(self));
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
