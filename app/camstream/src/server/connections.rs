//! The event loop's side of client connections: accepting them (through
//! admission), reading what they send and handing it to their protocol
//! (timed: the loop's stall per input), what HTTP hands over (a tunnel's
//! half, /metrics, ONVIF), writing, and finishing what the parts closed.

use std::io::{self, Read};
use std::net::SocketAddr;

use camstream_onvif::soap::Fault;
use mio::Interest;

use super::admission::{self, Refusal};
use super::conn::{self, Conn, ConnId, Kind, Port};
use super::http::{Handoff, Http};
use super::rtsp::Rtsp;
use super::verifier::Outcome;
use super::{READS_PER_TURN, Server, TCP_SEND_BUFFER, onvif, picture, report, transport};
use crate::clock::Mono;
use crate::latency::InputKind;

/// Why a picture request is refused when the picture thread has as many
/// queued as it takes.
const BUSY: &str = "the camera is busy with other picture settings; try again";

impl Server {
    pub(super) fn accept(&mut self, port: Port) {
        while let Some((stream, peer)) = self.listeners.accept(port) {
            self.connected(stream, peer, port);
        }
    }

    /// A new connection: admitted (maybe in place of one that has not
    /// authenticated), or answered 503 and closed.
    fn connected(&mut self, mut stream: mio::net::TcpStream, peer: SocketAddr, port: Port) {
        let (rtsp, http) = (&self.rtsp, &self.http);
        let admitted =
            self.admission
                .admit(&mut self.conns, &mut self.after, port, peer, |ci, c| {
                    streaming(rtsp, http, ci, c)
                });
        self.settle();
        let id = match (admitted, self.conns.next_id()) {
            (Ok(()), Some(id)) => id,
            (why, _) => {
                // Then the socket is dropped (closed).
                admission::turn_away(&mut stream, port);
                let why = why.err().unwrap_or(Refusal::TooManyConnections);
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
        let mut stream = transport::Transport::Tcp(stream);
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

    pub(super) fn conn_readable(&mut self, ci: ConnId) {
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
            let (into, _) = buf.split_at_mut(room);
            match conn.socket.read(into) {
                Ok(0) => {
                    self.input(ci);
                    return self.close(ci, "closed by peer");
                }
                Ok(n) => {
                    conn.last_input = Mono::now();
                    // A tunnel's GET side carries nothing in: its requests
                    // come through the POST side.
                    if !self.rtsp.is_tunnel_get(ci) {
                        conn.inbuf
                            .extend_from_slice(into.get(..n).unwrap_or_default());
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

    /// Hands a connection's input to its part, timing what that holds up.
    pub(super) fn input(&mut self, ci: ConnId) {
        let start = std::time::Instant::now();
        let kind = match self.conns.get(ci).map(|c| c.kind) {
            Some(Kind::Rtsp) => {
                self.rtsp.input(ci, &mut ctx!(self));
                InputKind::Rtsp
            }
            Some(Kind::TunnelPost) => {
                self.rtsp.tunnel_input(ci, &mut ctx!(self));
                InputKind::Tunnel
            }
            Some(Kind::Http) => {
                // Named after the costliest part a handoff went to.
                let mut kind = InputKind::Http;
                let mut handoff = self.http.input(ci, &mut ctx!(self));
                while let Some(h) = handoff {
                    match h {
                        Handoff::Onvif(_) => kind = InputKind::Onvif,
                        Handoff::Metrics { .. } if kind == InputKind::Http => {
                            kind = InputKind::Metrics
                        }
                        Handoff::TunnelGet { .. } | Handoff::TunnelPost { .. } => {
                            kind = InputKind::Tunnel
                        }
                        Handoff::Metrics { .. } => {}
                        Handoff::Whep(_) => kind = InputKind::Whep,
                        Handoff::Picture(_) => {}
                    }
                    handoff = self.handoff(ci, h);
                }
                self.check_passwords();
                kind
            }
            None => return self.settle(),
        };
        self.settle();
        self.stalls.record(kind, start.elapsed());
    }

    /// Sign-ins the HTTP side parked for a password hash: to the checker,
    /// or answered at once when it is busy.
    fn check_passwords(&mut self) {
        for job in std::mem::take(&mut self.after.verify) {
            let refused = match &mut self.verifier {
                Some(v) => v.ask(job).err(),
                None => Some(job),
            };
            if let Some(job) = refused {
                self.answer_parked(job.ci, Outcome::Busy);
            }
        }
    }

    /// Checks the checker finished: each user that matched is learnt,
    /// then each request that waited goes on or is refused.
    pub(super) fn passwords_checked(&mut self) {
        let Some(v) = &mut self.verifier else {
            return;
        };
        for (user, waiting) in v.done() {
            let outcome = match user {
                Some(u) => {
                    self.gate.learn(u);
                    Outcome::Matched
                }
                None => Outcome::Wrong,
            };
            for ci in waiting {
                self.answer_parked(ci, outcome);
            }
        }
    }

    /// An offer answered off the loop: its request's answer, then the
    /// connection's next requests.
    #[cfg_attr(not(feature = "webrtc"), allow(dead_code))]
    pub(super) fn whep_answered(&mut self, ci: ConnId, answer: super::http::WhepAnswer) {
        let ctx = &mut ctx!(self);
        self.http.whep_answer(ci, answer, ctx);
        ctx.resume(ci);
    }

    fn answer_parked(&mut self, ci: ConnId, outcome: Outcome) {
        let mut handoff = self.http.verified(ci, outcome, &mut ctx!(self));
        while let Some(h) = handoff {
            handoff = self.handoff(ci, h);
        }
        self.check_passwords();
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
                let text = self.reports.metrics(&report::Parts {
                    stalls: &self.stalls,
                    cfg: &self.cfg,
                    fanout: &self.fanout,
                    admission: &self.admission,
                    rtsp: self.rtsp.counts(&self.conns),
                    http: self.http.counts(),
                    sub_path: self.producers.sub_path(),
                    camera_mode: &self.camera_mode,
                    rtsp_port: self.rtsp_addr().map_or(self.cfg.rtsp_port, |a| a.port()),
                    http_port: self.http_addr().map_or(self.cfg.http_port, |a| a.port()),
                    discovery: self.discovery.is_some(),
                    webrtc: self.webrtc_figures(),
                    motion: self.producers.motion.as_ref().map(|m| super::http::metrics::MotionFigures {
                        moving: m.moving,
                        level: m.level,
                        started: m.started,
                        stopped: m.stopped,
                        pictures: m.pictures,
                        cpu_seconds: m.cpu.as_secs_f64(),
                        onvif_subscriptions: self.onvif.events.subscriptions(),
                        mqtt_connected: self.mqtt.as_ref().map(crate::mqtt::Mqtt::connected),
                    }),
                    audio: self.producers.audio.as_ref().map(crate::media::audio::Audio::counted),
                });
                let ctx = &mut ctx!(self);
                self.http.metrics(ci, &text, head_only, close, ctx);
                self.http.input(ci, ctx)
            }
            Handoff::Whep(w) => match self.whep(ci, w) {
                Some(answer) => {
                    let ctx = &mut ctx!(self);
                    self.http.whep_answer(ci, answer, ctx);
                    self.http.input(ci, ctx)
                }
                None => {
                    self.http.whep_parked(ci);
                    None
                }
            },
            Handoff::Picture(p) => {
                let head_only = p.head_only;
                let (status, json) = match self.picture_request(ci, p) {
                    Some(answer) => answer,
                    None => {
                        self.http.picture_parked(ci);
                        return None;
                    }
                };
                let ctx = &mut ctx!(self);
                self.http.picture_answer(ci, status, &json, head_only, ctx);
                self.http.input(ci, ctx)
            }
            Handoff::Onvif(req) => {
                let answer = self.onvif.handle(
                    &req,
                    onvif::Context {
                        cfg: &self.cfg,
                        fanout: &mut self.fanout,
                        producers: &mut self.producers,
                        source: self.source.as_deref(),
                    },
                );
                let answer = match answer {
                    onvif::Answer::Wait {
                        reply,
                        admitted,
                        signed_in,
                    } => {
                        self.onvif.events.park(ci, reply, admitted, signed_in);
                        self.http.onvif_parked(ci);
                        return None;
                    }
                    onvif::Answer::Picture {
                        controls,
                        ask,
                        admitted,
                        signed_in,
                    } => {
                        let reply = picture::Reply::Onvif {
                            peer: req.peer,
                            admitted,
                            signed_in: signed_in.clone(),
                        };
                        if self.picture.ask(controls, picture::Job { ci, ask, reply }).is_ok() {
                            self.http.onvif_parked(ci);
                            return None;
                        }
                        onvif::Answer::soap(Err(Fault::receiver(&[], BUSY)), admitted, signed_in)
                    }
                    answer => answer,
                };
                let ctx = &mut ctx!(self);
                self.http.onvif_answer(ci, answer, ctx);
                self.http.input(ci, ctx)
            }
        }
    }

    /// GET /picture: the settings (none for a source without them); POST:
    /// a change, all or none, by an operator or administrator. The status
    /// and JSON to answer with now, or None: the request waits for the
    /// picture thread (Self::pictures_done answers it).
    fn picture_request(&mut self, ci: ConnId, p: super::http::Picture) -> Option<(u16, String)> {
        use crate::source::picture as settings;
        let error = |status: u16, why: &str| (status, serde_json::json!({ "error": why }).to_string());
        let ask = match &p.body {
            None => picture::Ask::Read,
            Some(body) => {
                if let Err(why) = picture::Picture::allowed(&self.cfg, p.user.as_deref()) {
                    log::info!("{}: picture: {why}", p.peer);
                    return Some(error(403, &why));
                }
                match settings::parse_json(body) {
                    Ok(c) => picture::Ask::Set(c),
                    Err(why) => return Some(error(400, &why)),
                }
            }
        };
        let controls = match self.source.as_deref().map(|s| s.picture()) {
            Some(Ok(c)) => c,
            // A source without settings has none to list: the page shows
            // none.
            _ if matches!(ask, picture::Ask::Read) => return Some((200, settings::json(&[]))),
            Some(Err(why)) => return Some(error(400, &why)),
            None => return Some(error(400, "no camera yet")),
        };
        let reply = picture::Reply::Http {
            peer: p.peer,
            user: p.user,
            head_only: p.head_only,
        };
        match self.picture.ask(controls, picture::Job { ci, ask, reply }) {
            Ok(()) => None,
            Err(_) => Some(error(503, BUSY)),
        }
    }

    /// Requests whose job the picture thread has done: each gets its
    /// answer and goes on with its connection's next. A change made is
    /// the source's to set again when the camera comes back, whether or
    /// not its client is still there.
    pub(super) fn pictures_done(&mut self) {
        use crate::source::picture as settings;
        for done in self.picture.done() {
            if let (picture::Ask::Set(changes), Ok(_)) = (&done.ask, &done.result) {
                if let Some(s) = self.source.as_deref_mut() {
                    s.keep_picture(changes);
                }
            }
            match done.reply {
                picture::Reply::Http {
                    peer,
                    user,
                    head_only,
                } => {
                    let (status, json) = match (&done.ask, done.result) {
                        (picture::Ask::Set(changes), Ok(now)) => {
                            let said: Vec<String> =
                                changes.iter().map(|c| format!("{} = {}", c.name, c.value)).collect();
                            log::info!(
                                "{peer}: picture: {} (user {:?})",
                                said.join(", "),
                                user.as_deref().unwrap_or("")
                            );
                            (200, settings::json(&now))
                        }
                        (picture::Ask::Read, Ok(now)) => (200, settings::json(&now)),
                        (_, Err(why)) => {
                            log::info!("{peer}: picture: refused: {why}");
                            (400, serde_json::json!({ "error": why }).to_string())
                        }
                    };
                    let ctx = &mut ctx!(self);
                    self.http.picture_answer(done.ci, status, &json, head_only, ctx);
                    ctx.resume(done.ci);
                }
                picture::Reply::Onvif {
                    peer,
                    admitted,
                    signed_in,
                } => {
                    let result = onvif::imaging::finish(&done.ask, done.result, peer);
                    let answer = onvif::Answer::soap(result, admitted, signed_in);
                    let ctx = &mut ctx!(self);
                    self.http.onvif_answer(done.ci, answer, ctx);
                    ctx.resume(done.ci);
                }
            }
        }
    }

    /// The event service's parked pulls that can be answered now: each
    /// gets its answer and goes on with its connection's next request.
    pub(super) fn pulls_due(&mut self, now: Mono) {
        let conns = &self.conns;
        let due = self.onvif.events.due(now, |ci| conns.get(ci).is_some());
        for (ci, answer) in due {
            let ctx = &mut ctx!(self);
            self.http.onvif_answer(ci, answer, ctx);
            ctx.resume(ci);
        }
        // A pull's user signed in: admission counts it now.
        self.settle();
    }

    /// Writes a connection's pending bytes until the socket is full.
    pub(super) fn flush(&mut self, ci: ConnId) {
        match self.conns.get(ci).map(|c| c.kind) {
            Some(Kind::Rtsp | Kind::TunnelPost) => self.rtsp.flush(ci, &mut ctx!(self)),
            Some(Kind::Http) => self.http.flush(ci, &mut ctx!(self)),
            None => {}
        }
    }

    pub(super) fn close(&mut self, ci: ConnId, why: &str) {
        conn::close(&mut self.conns, &mut self.after, ci, why);
        self.settle();
    }

    /// Finishes closing what the parts took out of the table: the socket
    /// leaves the poll, its address's count goes down, its part lets go of
    /// it (which may close others: a tunnel's other half).
    pub(super) fn settle(&mut self) {
        while let Some(ci) = self.after.authenticated.pop() {
            let (rtsp, http) = (&self.rtsp, &self.http);
            self.admission
                .authenticated(&mut self.conns, &mut self.after, ci, |ci, c| {
                    streaming(rtsp, http, ci, c)
                });
        }
        while let Some(mut c) = self.after.closed.pop() {
            let _ = self.poll.registry().deregister(&mut c.conn.socket);
            self.admission.closed(c.peer().ip());
            log::debug!("{}: {}", c.peer(), c.why);
            match c.kind() {
                Kind::Rtsp | Kind::TunnelPost => self.rtsp.closed(c.id, &c.why, &mut ctx!(self)),
                Kind::Http => self.http.closed(c.id, c.peer(), &mut self.fanout),
            }
        }
    }
}

/// Whether a connection carries a stream (then it is not idle, and never
/// pushed out).
pub(super) fn streaming(rtsp: &Rtsp, http: &Http, ci: ConnId, c: &Conn) -> bool {
    match c.kind {
        Kind::Rtsp | Kind::TunnelPost => rtsp.streaming(ci),
        Kind::Http => http.streaming(ci),
    }
}
