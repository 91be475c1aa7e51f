//! HTTP/1.1 on http_port: the snapshot (/snapshot.jpg), the MJPEG stream
//! (/stream.mjpg), Prometheus metrics (/metrics), the status page (/), ONVIF's
//! services, and the start of RTSP over HTTP. Requests are cut by
//! `camstream_http` under the same limits as RTSP's and pass the same gate;
//! a snapshot or MJPEG part is the fan-out's JPEG file, written from the
//! shared frame, never copied per client. What HTTP does not answer itself
//! it hands over ([`Handoff`]): a tunnel's GET or POST to RTSP, /metrics and
//! ONVIF's requests to the event loop, which has their figures and state.

mod auth;
pub mod metrics;
mod mjpeg;
mod picture;
mod snapshot;
mod soap;
mod status;
mod whep;
pub use picture::Picture;
pub use whep::{Whep, WhepAnswer};

use std::io::{self, IoSlice};
use std::rc::Rc;

use camstream_http::mjpeg::MAX_PART_HEADER;
use camstream_http::request::{self, Framed, Head, Limits};
use camstream_http::response::{write_head, write_text};

use super::conn::{CTRL_HIGH_WATER, Conn, ConnId, Conns};
use super::ctx::Ctx;
use crate::fanout::{Fanout, Label, SharedFrame, SubscriberId};
use super::onvif;
use auth::{Gated, write_challenge};
use crate::table::Secondary;
use crate::clock::Mono;

#[derive(Default)]
enum State {
    /// Reading requests (keep-alive).
    #[default]
    Requests,
    /// A snapshot waiting for a frame since then.
    Snapshot {
        since: Mono,
        head_only: bool,
        subscription: SubscriberId,
    },
    /// multipart MJPEG until the client leaves.
    Mjpeg(mjpeg::Mjpeg),
    /// A request waiting for its `len`-byte body: ONVIF's SOAP, or a WHEP
    /// offer.
    Body {
        req: Box<Request>,
        len: usize,
        then: BodyFor,
    },
    /// A WHEP offer, or picture settings, being answered off the loop
    /// (server::webrtc's answerer, server::picture's thread): nothing
    /// more is read until its answer is written.
    Answering,
    /// An ONVIF PullMessages waiting for an event or its Timeout (parked
    /// by the event service), or an Imaging request for the picture
    /// thread: nothing more is read until it is answered, and the
    /// connection is not idle meanwhile.
    Pulling,
    /// A request waiting for its user's password to be checked against
    /// the user's password hash (off the loop: server::verifier).
    Verifying {
        req: Box<Request>,
        head_only: bool,
        close: bool,
    },
}

/// Whose a request's body is once it is all there.
enum BodyFor {
    Onvif,
    /// A WHEP offer, from the user the gate passed.
    Whep { user: Option<String> },
    /// Picture settings to change (POST /picture), from that user.
    Picture { user: Option<String> },
}

/// A JPEG being written: an MJPEG part (its header, the file, CRLF) or a
/// snapshot's body (the file alone).
struct Body {
    frame: Rc<SharedFrame>,
    part_header: [u8; MAX_PART_HEADER],
    part_header_len: usize,
    trailer: &'static [u8],
    written: usize,
}

impl Body {
    fn len(&self) -> usize {
        self.part_header_len + self.frame.jpeg().len() + self.trailer.len()
    }
}

#[derive(Default)]
struct HttpConn {
    state: State,
    body: Option<Body>,
    /// Close once everything queued is out (Connection: close, HTTP/1.0).
    close_after: bool,
}

/// What HTTP hands over instead of answering: the request's connection
/// is the receiver's to answer (then HTTP's again, for the next request),
/// or, for a tunnel, RTSP's from now on.
pub enum Handoff {
    /// A tunnel's GET or POST, with the user its credentials named.
    TunnelGet {
        cookie: String,
        user: Option<String>,
    },
    TunnelPost {
        cookie: String,
        user: Option<String>,
    },
    /// GET or HEAD /metrics: the figures in Prometheus' text format.
    Metrics { head_only: bool, close: bool },
    /// A whole request to an ONVIF service.
    Onvif(onvif::Request),
    /// A WHEP offer (POST /whep/STREAM) or the end of its session (DELETE
    /// /whep/STREAM/RESOURCE), past the gate.
    Whep(whep::Whep),
    /// GET or POST /picture, past the gate.
    Picture(picture::Picture),
}

/// A request with what the server keeps of it (the head borrows the input,
/// which is drained before the request is handled).
struct Request {
    method: String,
    target: String,
    path: String,
    fps: Option<String>,
    authorization: Option<String>,
    close: bool,
    has_body: bool,
    content_length: Option<u64>,
    chunked: bool,
    host: Option<String>,
    tunnelled: bool,
    content_type: Option<String>,
    session_cookie: Option<String>,
}

impl Request {
    fn from_head(h: &Head<'_>) -> Request {
        Request {
            method: h.method.to_string(),
            target: h.target.to_string(),
            path: h.path.to_string(),
            fps: h.query_param("fps").map(str::to_string),
            authorization: h.authorization.map(str::to_string),
            close: h.close,
            has_body: h.has_body(),
            content_length: h.content_length,
            chunked: h.chunked,
            host: h.host.map(str::to_string),
            tunnelled: h
                .content_type
                .is_some_and(|t| t.eq_ignore_ascii_case("application/x-rtsp-tunnelled")),
            content_type: h.content_type.map(str::to_string),
            session_cookie: h.session_cookie.map(str::to_string),
        }
    }
}

/// Since the start, for /metrics.
#[derive(Default, Clone, Copy)]
pub struct Counts {
    pub requests: u64,
    pub snapshots: u64,
    pub mjpeg_streams: usize,
    pub connections: usize,
}

pub struct Http {
    conns: Secondary<Conn, HttpConn>,
    label: Label,
    counts: Counts,
    onvif: bool,
}

impl Http {
    pub fn new(fanout: &mut Fanout, onvif: bool) -> Http {
        Http {
            conns: Secondary::new(),
            label: fanout.label("http"),
            counts: Counts::default(),
            onvif,
        }
    }

    /// A connection of the HTTP port.
    pub fn opened(&mut self, ci: ConnId) {
        self.conns.insert(ci, HttpConn::default());
    }

    pub fn counts(&self) -> Counts {
        Counts {
            mjpeg_streams: self
                .conns
                .iter()
                .filter(|(_, h)| matches!(h.state, State::Mjpeg(_)))
                .count(),
            connections: self.conns.len(),
            ..self.counts
        }
    }

    /// Whether it carries a stream (then it is not idle).
    pub fn streaming(&self, ci: ConnId) -> bool {
        self.conns
            .get(ci)
            .is_some_and(|h| {
                matches!(
                    h.state,
                    State::Mjpeg(_) | State::Snapshot { .. } | State::Pulling
                )
            })
    }

    /// Handles what an HTTP connection sent: every complete request, one
    /// response at a time, until one is handed over.
    pub fn input(&mut self, ci: ConnId, ctx: &mut Ctx<'_>) -> Option<Handoff> {
        loop {
            // A body is taken when it is all there, an empty one at once:
            // before the check for input, which an empty body leaves none.
            if let Some((req, body, then)) = self.body(ci, ctx.conns) {
                return Some(match then {
                    BodyFor::Onvif => self.onvif_handoff(ci, req, body, ctx),
                    BodyFor::Whep { user } => self.whep_offer(ci, req, body, user, ctx),
                    BodyFor::Picture { user } => Handoff::Picture(Picture {
                        body: Some(body),
                        user,
                        peer: ctx.conns.get(ci).map_or_else(
                            || std::net::SocketAddr::from(([0, 0, 0, 0], 0)),
                            |c| c.peer,
                        ),
                        head_only: false,
                    }),
                });
            }
            let conn = Conn::with_input(ctx.conns, ci)?;
            let h = self.conns.get_mut(ci)?;
            match &h.state {
                // Nothing more is read from a stream's client; a snapshot
                // is answered before the next request is looked at.
                State::Mjpeg(_) => {
                    conn.inbuf.clear();
                    return None;
                }
                State::Snapshot { .. }
                | State::Body { .. }
                | State::Verifying { .. }
                | State::Answering
                | State::Pulling => {
                    return None;
                }
                State::Requests => {}
            }
            // After `Connection: close` (or a body not read), nothing more
            // is taken from this connection.
            if h.close_after {
                conn.inbuf.clear();
                conn.request_started = None;
                return None;
            }
            // One response at a time: a pipelined request waits for the
            // body before it.
            if h.body.is_some() || conn.ctrl_pending() > CTRL_HIGH_WATER {
                return None;
            }
            let limits = Limits {
                max_size: ctx.cfg.max_request_size,
            };
            let req = match request::next(&conn.inbuf, &limits) {
                Framed::Head(head, used) => {
                    let req = Request::from_head(&head);
                    conn.inbuf.drain(..used);
                    conn.request_started = None;
                    req
                }
                Framed::Incomplete => {
                    conn.request_started.get_or_insert(conn.last_input);
                    return None;
                }
                Framed::Refused(fault) => {
                    log::info!("{}: HTTP: {}; closing", conn.peer, fault.describe());
                    write_text(
                        &mut conn.ctrl,
                        fault.status(),
                        fault.describe(),
                        false,
                        true,
                    );
                    conn.inbuf.clear();
                    conn.closing = Some(Mono::now());
                    self.flush(ci, ctx);
                    return None;
                }
            };
            self.counts.requests += 1;
            let handoff = self.request(ci, req, ctx);
            if handoff.is_some() {
                // Answered where it goes, which flushes: a flush now would
                // close a `Connection: close` request's connection before
                // its answer (BusyBox's wget and Python's urllib send it).
                return handoff;
            }
            self.flush(ci, ctx);
        }
    }

    /// Has the request `ci` wait for its body, up to `max` bytes (with a
    /// Content-Length, not chunked), before it goes to `then`; else a 413
    /// or 411 naming `what`, and the connection closes.
    fn await_body(
        &mut self,
        ci: ConnId,
        req: Request,
        max: usize,
        what: &str,
        then: BodyFor,
        ctx: &mut Ctx<'_>,
    ) {
        let Some(conn) = ctx.conns.get_mut(ci) else {
            return;
        };
        let refusal = match (req.content_length, req.chunked) {
            (Some(n), false) if n as usize <= max => None,
            (Some(_), false) => Some((413, format!("{what} over {} KiB", max >> 10))),
            _ => Some((411, format!("{what} needs Content-Length"))),
        };
        if let Some((status, why)) = refusal {
            write_text(&mut conn.ctrl, status, &why, false, true);
            conn.closing = Some(Mono::now());
            return;
        }
        let len = req.content_length.unwrap_or(0) as usize;
        // The body is part of the request: request_timeout runs until it
        // is all there.
        conn.request_started = (len > 0).then(Mono::now);
        conn.body_wanted = Some(len);
        // Handed over once it is all there (input's next turn: at once
        // for an empty body).
        if let Some(h) = self.conns.get_mut(ci) {
            h.state = State::Body {
                req: Box::new(req),
                len,
                then,
            };
        }
    }

    /// The request of `ci` that waits for its body, the body and whose it
    /// is, once all of it is there.
    fn body(&mut self, ci: ConnId, conns: &mut Conns) -> Option<(Request, Vec<u8>, BodyFor)> {
        let conn = conns.get_mut(ci)?;
        let h = self.conns.get_mut(ci)?;
        let State::Body { len, .. } = h.state else {
            return None;
        };
        if conn.closing.is_some() || conn.inbuf.len() < len {
            return None;
        }
        let State::Body { req, then, .. } = std::mem::take(&mut h.state) else {
            unreachable!("matched above");
        };
        let body: Vec<u8> = conn.inbuf.drain(..len).collect();
        conn.request_started = None;
        conn.body_wanted = None;
        Some((*req, body, then))
    }

    fn request(&mut self, ci: ConnId, req: Request, ctx: &mut Ctx<'_>) -> Option<Handoff> {
        let head_only = req.method == "HEAD";
        let onvif = self.onvif && onvif::is_service(&req.path);
        let offer = req.method == "POST" && (whep::is_whep(&req.path) || req.path == picture::PATH);
        // A body this server has no use for cannot be skipped reliably
        // (chunked, or a length a client may not honour): answer and close.
        let close = req.close || (req.has_body && !req.tunnelled && !onvif && !offer);
        let h = self.conns.get_mut(ci)?;
        h.close_after |= close;
        let peer = ctx.conns.get(ci)?.peer;
        if let Some(cookie) = req.session_cookie.clone() {
            let post = match req.method.as_str() {
                "GET" => false,
                "POST" if req.tunnelled => true,
                _ => return self.route(ci, req, head_only, close, onvif, ctx),
            };
            // Credentials on the GET or POST (FFmpeg sends them) must be
            // right; without, each request inside is checked.
            let user = match req.authorization {
                None => None,
                Some(_) => match self.gate(ci, &req, false, true, false, ctx) {
                    Gated::Pass(user) => user,
                    Gated::Refused | Gated::Verify { .. } => {
                        if let Some(c) = ctx.conns.get_mut(ci) {
                            c.closing = Some(Mono::now());
                        }
                        return None;
                    }
                },
            };
            self.conns.remove(ci);
            return Some(if post {
                Handoff::TunnelPost { cookie, user }
            } else {
                Handoff::TunnelGet { cookie, user }
            });
        }
        log::debug!("{peer}: HTTP {} {}", req.method, req.target);
        self.route(ci, req, head_only, close, onvif, ctx)
    }

    fn route(
        &mut self,
        ci: ConnId,
        req: Request,
        head_only: bool,
        close: bool,
        onvif: bool,
        ctx: &mut Ctx<'_>,
    ) -> Option<Handoff> {
        if onvif {
            return self.onvif_start(ci, req, close, ctx);
        }
        let conn = ctx.conns.get_mut(ci)?;
        let whep = whep::is_whep(&req.path);
        let pic = req.path == picture::PATH;
        let known = whep
            || pic
            || matches!(
                req.path.as_str(),
                "/" | "/index.html"
                    | "/snapshot.jpg"
                    | "/stream.mjpg"
                    | "/audio.wav"
                    | "/audio.aac"
                    | "/metrics"
            );
        if !known {
            write_text(
                &mut conn.ctrl,
                404,
                "try /, /snapshot.jpg, /stream.mjpg, /metrics, /picture or /whep/h264",
                head_only,
                close,
            );
            return None;
        }
        // A refused offer's body is not read: the connection closes.
        let close = close || ((whep || pic) && req.has_body);
        if !whep && !pic && req.method != "GET" && !head_only {
            write_405(&mut conn.ctrl, "GET, HEAD", true);
            conn.closing = Some(Mono::now());
            return None;
        }
        let user = match self.gate(ci, &req, head_only, close, true, ctx) {
            Gated::Pass(user) => user,
            Gated::Refused => {
                self.conns.get_mut(ci)?.close_after |= close;
                return None;
            }
            Gated::Verify { name, password } => {
                let peer = ctx.conns.get(ci)?.peer.ip();
                ctx.after.verify.push(crate::server::verifier::Job {
                    ci,
                    peer,
                    name,
                    password,
                });
                self.conns.get_mut(ci)?.state = State::Verifying {
                    req: Box::new(req),
                    head_only,
                    close,
                };
                return None;
            }
        };
        if whep {
            return self.whep_start(ci, req, user, close, ctx);
        }
        if pic {
            return self.picture_start(ci, req, user, head_only, ctx);
        }
        match req.path.as_str() {
            "/snapshot.jpg" => self.snapshot(ci, head_only, ctx),
            "/stream.mjpg" => self.start_mjpeg(ci, req.fps.as_deref(), head_only, ctx),
            "/audio.wav" | "/audio.aac" => self.start_sound(ci, &req.path.clone(), head_only, ctx),
            "/metrics" => return Some(Handoff::Metrics { head_only, close }),
            _ => status::page(&mut conn_mut(ctx, ci)?.ctrl, head_only, close),
        }
        None
    }

    /// The password of the request `ci` waits with was checked against
    /// its user's hash: the request goes on (the user is known now), or is
    /// refused. Its connection's next requests are taken after it.
    pub fn verified(
        &mut self,
        ci: ConnId,
        outcome: crate::server::verifier::Outcome,
        ctx: &mut Ctx<'_>,
    ) -> Option<Handoff> {
        use crate::server::verifier::Outcome;
        let h = self.conns.get_mut(ci)?;
        if !matches!(h.state, State::Verifying { .. }) {
            return None;
        }
        let State::Verifying {
            req,
            head_only,
            close,
        } = std::mem::take(&mut h.state)
        else {
            unreachable!("matched above");
        };
        ctx.after.resume.push(ci);
        if outcome != Outcome::Matched {
            h.close_after |= close;
        }
        let handoff = match outcome {
            Outcome::Matched => self.route(ci, *req, head_only, close, false, ctx),
            Outcome::Wrong => {
                let challenges = ctx.gate.sign_in_challenges(false);
                let conn = conn_mut(ctx, ci)?;
                log::info!("{}: HTTP: a wrong password", conn.peer);
                write_challenge(
                    &mut conn.ctrl,
                    &challenges,
                    head_only,
                    close,
                );
                None
            }
            Outcome::Busy => {
                let conn = conn_mut(ctx, ci)?;
                write_text(
                    &mut conn.ctrl,
                    503,
                    "other sign-ins are being checked: try again in a few seconds",
                    head_only,
                    close,
                );
                None
            }
        };
        self.flush(ci, ctx);
        handoff
    }

    /// Writes /metrics' answer, `text` from the event loop.
    pub fn metrics(
        &mut self,
        ci: ConnId,
        text: &str,
        head_only: bool,
        close: bool,
        ctx: &mut Ctx<'_>,
    ) {
        if let Some(conn) = ctx.conns.get_mut(ci) {
            write_head(
                &mut conn.ctrl,
                200,
                &[
                    ("Content-Type", metrics::CONTENT_TYPE),
                    ("Cache-Control", "no-store"),
                ],
                Some(text.len()),
                close,
            );
            if !head_only {
                conn.ctrl.extend_from_slice(text.as_bytes());
            }
        }
        self.flush(ci, ctx);
    }

    /// Writes an HTTP connection's pending bytes until the socket is full:
    /// the response head, the body being written, then the next MJPEG part
    /// or the snapshot a frame came for.
    pub fn flush(&mut self, ci: ConnId, ctx: &mut Ctx<'_>) {
        loop {
            let Some(conn) = ctx.conns.get_mut(ci) else {
                return;
            };
            let Some(h) = self.conns.get_mut(ci) else {
                return;
            };
            if conn.ctrl_pending() > 0 {
                match conn.write_ctrl() {
                    Ok(true) => continue,
                    Ok(false) => return,
                    Err(e) => return ctx.close(ci, &format!("write: {e}")),
                }
            }
            if let Some(b) = &mut h.body {
                match write_body(&mut conn.socket, b) {
                    Ok(true) => {
                        let bytes = b.len();
                        match &h.state {
                            State::Mjpeg(m) => {
                                ctx.fanout.delivered(m.subscription, &b.frame, bytes)
                            }
                            _ => {
                                ctx.fanout.count_bytes(self.label, bytes);
                                // A snapshot is out: the next request may go.
                                ctx.resume(ci);
                            }
                        }
                        h.body = None;
                    }
                    Ok(false) => return,
                    Err(e) => return ctx.close(ci, &format!("write: {e}")),
                }
                continue;
            }
            if conn.closing.is_some() {
                return ctx.close(ci, "closed after an error");
            }
            match &h.state {
                State::Mjpeg(m) => {
                    let Some(frame) = ctx.fanout.next(m.subscription) else {
                        return;
                    };
                    h.body = Some(mjpeg::part(frame, m.raw));
                }
                State::Snapshot {
                    subscription,
                    head_only,
                    ..
                } => {
                    let (subscription, head_only) = (*subscription, *head_only);
                    let Some(frame) = ctx.fanout.next(subscription) else {
                        return;
                    };
                    ctx.fanout.unsubscribe(subscription);
                    self.send_snapshot(ci, frame, head_only, ctx);
                }
                State::Requests if h.close_after => {
                    return ctx.close(ci, "Connection: close");
                }
                _ => return,
            }
        }
    }

    /// An HTTP connection closed: what it was subscribed to ends.
    pub fn closed(&mut self, ci: ConnId, peer: std::net::SocketAddr, fanout: &mut Fanout) {
        let Some(h) = self.conns.remove(ci) else {
            return;
        };
        match h.state {
            State::Mjpeg(m) => {
                let (sent, dropped) = fanout
                    .unsubscribe(m.subscription)
                    .map_or((0, 0), |s| (s.frames_sent, s.frames_dropped));
                log::info!(
                    "{} stream to {peer} ended: {sent} frames sent, {dropped} dropped for a slow client",
                    if m.raw { "sound" } else { "MJPEG" },
                );
            }
            State::Snapshot { subscription, .. } => {
                fanout.unsubscribe(subscription);
            }
            _ => {}
        }
    }

    pub fn housekeeping(&mut self, now: Mono, ctx: &mut Ctx<'_>) {
        self.answer_waiting_snapshots(
            now,
            snapshot::WAIT,
            "no frame from the camera within 1 s",
            ctx,
        );
    }

    /// Snapshots still waiting for a frame when the camera goes: 503.
    pub fn camera_lost(&mut self, ctx: &mut Ctx<'_>) {
        self.answer_waiting_snapshots(
            Mono::now(),
            std::time::Duration::ZERO,
            "the camera is absent (unplugged, or not found)",
            ctx,
        );
    }

    /// 408 for a request that did not arrive within request_timeout.
    pub fn timed_out(conn: &mut Conn) {
        write_text(
            &mut conn.ctrl,
            408,
            "the request did not arrive in time",
            false,
            true,
        );
    }

    /// What it keeps of the connections, against the table.
    pub fn audit(&self, conns: &Conns) -> Result<(), String> {
        match self.conns.iter().find(|&(ci, _)| conns.get(ci).is_none()) {
            Some((ci, _)) => Err(format!("HTTP state of a gone connection {ci:?}")),
            None => Ok(()),
        }
    }
}

/// 405 Method Not Allowed, with the methods that are.
fn write_405(out: &mut Vec<u8>, allow: &str, close: bool) {
    write_head(out, 405, &[("Allow", allow), ("Content-Length", "0")], None, close);
}

fn conn_mut<'a>(ctx: &'a mut Ctx<'_>, ci: ConnId) -> Option<&'a mut Conn> {
    ctx.conns.get_mut(ci)
}

/// `bytes` from `from` on (none when `from` is past its end).
fn part(bytes: &[u8], from: usize) -> &[u8] {
    bytes.get(from..).unwrap_or_default()
}

/// Writes what is left of a body; true once all of it is out.
fn write_body(stream: &mut impl std::io::Write, b: &mut Body) -> io::Result<bool> {
    loop {
        let total = b.len();
        if b.written == total {
            return Ok(true);
        }
        let jpeg = b.frame.jpeg();
        let head_end = b.part_header_len;
        let jpeg_end = head_end + jpeg.len();
        let w = b.written;
        let slices = [
            IoSlice::new(part(b.part_header.get(..head_end).unwrap_or_default(), w)),
            IoSlice::new(part(jpeg, w.saturating_sub(head_end))),
            IoSlice::new(part(b.trailer, w.saturating_sub(jpeg_end))),
        ];
        match stream.write_vectored(&slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => b.written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
