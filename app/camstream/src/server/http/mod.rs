//! HTTP/1.1 on http_port: the snapshot (/snapshot.jpg), the MJPEG stream
//! (/stream.mjpg), Prometheus metrics (/metrics), the status page (/) and
//! RTSP over HTTP ([`tunnel`]). Requests are cut by `camstream_http` under
//! the same limits as RTSP's and pass the same users, Digest (Basic only
//! when enabled); a snapshot or MJPEG part is the fan-out's JPEG file,
//! written from the shared frame, never copied per client.

mod metrics;
mod status;
mod tunnel;

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use std::rc::Rc;
use std::time::Duration;

use camstream_http::mjpeg::{self, MAX_PART_HEADER};
use camstream_http::request::{self, Framed, Head, Limits};
use camstream_rtsp::auth::Verdict;

use super::conn::{CTRL_HIGH_WATER, Conn, ConnId, Proto};
use super::fanout::enqueue;
use super::frame::SharedFrame;
use super::{Refusal, Server};
use crate::clock::Mono;

const SERVER: &str = concat!("camstream/", env!("CARGO_PKG_VERSION"));
/// How long a snapshot waits for a first frame.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(1);
/// A newest frame older than this is not the camera's picture now.
const FRESH: Duration = Duration::from_secs(1);

#[derive(Default)]
pub enum State {
    /// Reading requests (keep-alive).
    #[default]
    Requests,
    /// A snapshot waiting for a first frame since then.
    Snapshot { since: Mono, head_only: bool },
    /// multipart MJPEG until the client leaves.
    Mjpeg(Mjpeg),
    /// A tunnel's POST side: base64-encoded RTSP for its GET side.
    TunnelIn {
        get: ConnId,
        decoder: camstream_http::tunnel::Decoder,
    },
    /// A SOAP request to an ONVIF service, waiting for its `len`-byte body.
    Soap { req: Box<Request>, len: usize },
}

pub struct Mjpeg {
    queue: VecDeque<Rc<SharedFrame>>,
    /// `?fps=N`: at least this long between frames sent.
    every: Option<Duration>,
    next_due: Mono,
    frames_sent: u64,
    frames_dropped: u64,
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
pub struct HttpConn {
    pub state: State,
    body: Option<Body>,
    /// Close once everything queued is out (Connection: close, HTTP/1.0).
    close_after: bool,
}

impl HttpConn {
    /// The length of the body a request waits for.
    pub fn body_wanted(&self) -> Option<usize> {
        match self.state {
            State::Soap { len, .. } => Some(len),
            _ => None,
        }
    }

    pub fn streaming(&self) -> bool {
        matches!(
            self.state,
            State::Mjpeg(_) | State::TunnelIn { .. } | State::Snapshot { .. }
        )
    }
}

/// A request with what the server keeps of it (the head borrows the input,
/// which is drained before the request is handled).
pub struct Request {
    pub(super) method: String,
    pub(super) target: String,
    pub(super) path: String,
    fps: Option<String>,
    pub(super) authorization: Option<String>,
    pub(super) close: bool,
    has_body: bool,
    pub(super) content_length: Option<u64>,
    pub(super) chunked: bool,
    pub(super) host: Option<String>,
    tunnelled: bool,
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
            session_cookie: h.session_cookie.map(str::to_string),
        }
    }
}

/// Writes a response head: status line, Server, the given headers,
/// Content-Length if known, Connection: close if closing.
pub(super) fn write_head(
    out: &mut Vec<u8>,
    status: u16,
    headers: &[(&str, &str)],
    length: Option<usize>,
    close: bool,
) {
    let _ = write!(
        out,
        "HTTP/1.1 {status} {}\r\nServer: {SERVER}\r\n",
        reason(status)
    );
    for (k, v) in headers {
        let _ = write!(out, "{k}: {v}\r\n");
    }
    if let Some(n) = length {
        let _ = write!(out, "Content-Length: {n}\r\n");
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// A short plain-text answer (errors): the reason, for a person reading it.
pub(super) fn write_text(out: &mut Vec<u8>, status: u16, text: &str, head_only: bool, close: bool) {
    let body = format!("{status} {}: {text}\n", reason(status));
    write_head(
        out,
        status,
        &[
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Cache-Control", "no-store"),
        ],
        Some(body.len()),
        close,
    );
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
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

impl Server {
    /// MJPEG streams now (max_clients counts them with RTSP sessions).
    pub(super) fn mjpeg_clients(&self) -> usize {
        self.conns
            .iter()
            .filter(
                |(_, c)| matches!(&c.proto, Proto::Http(h) if matches!(h.state, State::Mjpeg(_))),
            )
            .count()
    }

    /// Handles what an HTTP connection sent: every complete request, one
    /// response at a time.
    pub(super) fn http_input(&mut self, ci: ConnId) {
        loop {
            // A body is taken when it is all there, an empty one at once:
            // before the check for input, which an empty body leaves none.
            if self.soap_body_complete(ci) {
                continue;
            }
            let Some(conn) = Conn::with_input(&mut self.conns, ci) else {
                return;
            };
            let Proto::Http(h) = &mut conn.proto else {
                return;
            };
            match &mut h.state {
                State::TunnelIn { .. } => return self.tunnel_input(ci),
                // Nothing more is read from a stream's client; a snapshot
                // is answered before the next request is looked at.
                State::Mjpeg(_) => {
                    conn.inbuf.clear();
                    return;
                }
                State::Snapshot { .. } | State::Soap { .. } => return,
                State::Requests => {}
            }
            // After `Connection: close` (or a body not read), nothing more
            // is taken from this connection.
            if h.close_after {
                conn.inbuf.clear();
                conn.request_started = None;
                return;
            }
            // One response at a time: a pipelined request waits for the
            // body before it.
            if h.body.is_some() || conn.ctrl_pending() > CTRL_HIGH_WATER {
                return;
            }
            let limits = Limits {
                max_size: self.cfg.max_request_size,
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
                    return;
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
                    return self.flush_conn(ci);
                }
            };
            self.totals.http_requests += 1;
            self.http_request(ci, req);
            self.flush_conn(ci);
        }
    }

    /// If `ci` waits for a SOAP body and has all of it: answers the
    /// request (true).
    fn soap_body_complete(&mut self, ci: ConnId) -> bool {
        let Some(conn) = self.conns.get_mut(ci) else {
            return false;
        };
        if conn.closing.is_some() {
            return false;
        }
        let Proto::Http(h) = &mut conn.proto else {
            return false;
        };
        let State::Soap { len, .. } = h.state else {
            return false;
        };
        if conn.inbuf.len() < len {
            return false;
        }
        let State::Soap { req, .. } = std::mem::take(&mut h.state) else {
            unreachable!("matched above");
        };
        let body: Vec<u8> = conn.inbuf.drain(..len).collect();
        conn.request_started = None;
        self.onvif_request(ci, *req, &body);
        self.flush_conn(ci);
        true
    }

    fn http_request(&mut self, ci: ConnId, req: Request) {
        let conn = &mut self.conns[ci];
        let head_only = req.method == "HEAD";
        let onvif = self.cfg.onvif && super::onvif::is_service(&req.path);
        // A body this server has no use for cannot be skipped reliably
        // (chunked, or a length a client may not honour): answer and close.
        let close = req.close || (req.has_body && !req.tunnelled && !onvif);
        if close {
            if let Some(h) = conn.http_mut() {
                h.close_after = true;
            }
        }
        let conn = &mut self.conns[ci];
        let peer = conn.peer;
        if let Some(cookie) = req.session_cookie.clone() {
            match req.method.as_str() {
                "GET" => return self.tunnel_get(ci, &req, cookie),
                "POST" if req.tunnelled => return self.tunnel_post(ci, &req, cookie),
                _ => {}
            }
        }
        if onvif {
            return self.onvif_start(ci, req, close);
        }
        let known = matches!(
            req.path.as_str(),
            "/" | "/index.html" | "/snapshot.jpg" | "/stream.mjpg" | "/metrics"
        );
        if !known {
            log::debug!("{peer}: HTTP {} {} -> 404", req.method, req.target);
            return write_text(
                &mut conn.ctrl,
                404,
                "try /, /snapshot.jpg, /stream.mjpg or /metrics",
                head_only,
                close,
            );
        }
        if req.method != "GET" && !head_only {
            log::debug!("{peer}: HTTP {} {} -> 405", req.method, req.target);
            write_head(
                &mut conn.ctrl,
                405,
                &[("Allow", "GET, HEAD"), ("Content-Length", "0")],
                None,
                true,
            );
            conn.closing = Some(Mono::now());
            return;
        }
        if !self.http_authorized(ci, &req, head_only, close) {
            return;
        }
        let conn = &mut self.conns[ci];
        log::debug!("{peer}: HTTP {} {}", req.method, req.target);
        match req.path.as_str() {
            "/snapshot.jpg" => self.snapshot(ci, head_only),
            "/stream.mjpg" => self.start_mjpeg(ci, req.fps.as_deref(), head_only),
            "/metrics" => {
                let text = self.metrics_text();
                let conn = &mut self.conns[ci];
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
            _ => {
                write_head(
                    &mut conn.ctrl,
                    200,
                    &[
                        ("Content-Type", "text/html; charset=utf-8"),
                        ("Cache-Control", "no-cache"),
                        // Served from the binary with inline script and
                        // style; nothing from elsewhere.
                        (
                            "Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data:; script-src 'unsafe-inline'; style-src 'unsafe-inline'",
                        ),
                    ],
                    Some(status::PAGE.len()),
                    close,
                );
                if !head_only {
                    conn.ctrl.extend_from_slice(status::PAGE.as_bytes());
                }
            }
        }
    }

    /// The same gate as RTSP's: without users only this machine's clients
    /// (or anyone, if anonymous); with users, Digest (Basic if enabled).
    /// Writes the refusal and returns false when the request may not go on.
    pub(super) fn http_authorized(
        &mut self,
        ci: ConnId,
        req: &Request,
        head_only: bool,
        close: bool,
    ) -> bool {
        self.http_gate(ci, req, head_only, close).is_some()
    }

    /// [`Server::http_authorized`], and who passed: `Some(None)` when no
    /// users are set, `Some(Some(user))` with users.
    pub(super) fn http_gate(
        &mut self,
        ci: ConnId,
        req: &Request,
        head_only: bool,
        close: bool,
    ) -> Option<Option<String>> {
        let peer = self.conns[ci].peer;
        if !self.open_to(peer) {
            self.refused(peer, "HTTP request refused: 403", Refusal::NoUserSet);
            write_text(
                &mut self.conns[ci].ctrl,
                403,
                "no user is set, so only this machine's clients are served (see `camstream passwd`)",
                head_only,
                close,
            );
            return None;
        }
        let Some(auth) = &self.auth else {
            self.admit(ci);
            return Some(None);
        };
        // Digest's uri is the request target, path and query (RFC 7616
        // §3.4); in origin form the host is the camera's.
        let url = if req.target.starts_with('/') {
            rtsp_types::Url::parse(&format!("http://camera{}", req.target))
        } else {
            rtsp_types::Url::parse(&req.target)
        };
        let now = Mono::now().0 / 1_000_000_000;
        let verdict = auth.check(
            &req.method,
            url.ok().as_ref(),
            None,
            req.authorization.as_deref(),
            now,
        );
        let conn = &mut self.conns[ci];
        let stale = match verdict {
            Verdict::User(u) => {
                conn.stale_nonce = false;
                let u = u.to_string();
                self.admit(ci);
                return Some(Some(u));
            }
            Verdict::Expired(_) => true,
            Verdict::Challenge => false,
            Verdict::Malformed(why) => {
                log::info!("{}: HTTP: {why}", conn.peer);
                write_text(&mut conn.ctrl, 400, why, head_only, close);
                return None;
            }
        };
        conn.stale_nonce = stale;
        let challenges = auth.challenges(now, stale);
        let body = "401 Unauthorized: this camera asks for a user and password\n";
        let mut headers: Vec<(&str, &str)> = challenges
            .iter()
            .map(|c| ("WWW-Authenticate", c.as_str()))
            .collect();
        headers.push(("Content-Type", "text/plain; charset=utf-8"));
        write_head(&mut conn.ctrl, 401, &headers, Some(body.len()), close);
        if !head_only {
            conn.ctrl.extend_from_slice(body.as_bytes());
        }
        None
    }

    // ---- snapshot -----------------------------------------------------

    fn snapshot(&mut self, ci: ConnId, head_only: bool) {
        if !self.camera.present {
            let conn = &mut self.conns[ci];
            let close = conn.http_mut().is_some_and(|h| h.close_after);
            return write_text(
                &mut conn.ctrl,
                503,
                "the camera is absent (unplugged, or not found)",
                head_only,
                close,
            );
        }
        let now = Mono::now();
        match &self.stream.last {
            Some(f) if now.saturating_sub(f.captured) < FRESH => {
                let f = f.clone();
                self.send_snapshot(ci, f, head_only);
            }
            _ => {
                if let Some(h) = self.conns[ci].http_mut() {
                    h.state = State::Snapshot {
                        since: now,
                        head_only,
                    };
                }
            }
        }
    }

    fn send_snapshot(&mut self, ci: ConnId, frame: Rc<SharedFrame>, head_only: bool) {
        let conn = &mut self.conns[ci];
        let Proto::Http(h) = &mut conn.proto else {
            return;
        };
        h.state = State::Requests;
        self.totals.snapshots += 1;
        write_head(
            &mut conn.ctrl,
            200,
            &[
                ("Content-Type", "image/jpeg"),
                ("Cache-Control", "no-store"),
            ],
            Some(frame.jpeg().len()),
            h.close_after,
        );
        if !head_only {
            h.body = Some(Body {
                frame,
                part_header: [0; MAX_PART_HEADER],
                part_header_len: 0,
                trailer: b"",
                written: 0,
            });
        }
    }

    /// Snapshots still waiting for a frame when the camera goes: 503.
    pub(super) fn http_camera_lost(&mut self) {
        self.answer_waiting_snapshots(
            Mono::now(),
            Duration::ZERO,
            "the camera is absent (unplugged, or not found)",
        );
    }

    fn answer_waiting_snapshots(&mut self, now: Mono, after: Duration, why: &str) {
        let waiting: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| matches!(&c.proto, Proto::Http(h) if matches!(h.state, State::Snapshot { since, .. } if now.saturating_sub(since) >= after)))
            .map(|(k, _)| k)
            .collect();
        for ci in waiting {
            let conn = &mut self.conns[ci];
            let Proto::Http(h) = &mut conn.proto else {
                continue;
            };
            let State::Snapshot { head_only, .. } = h.state else {
                continue;
            };
            h.state = State::Requests;
            let close = h.close_after;
            write_text(&mut conn.ctrl, 503, why, head_only, close);
            self.flush_conn(ci);
            // Requests that came after it.
            self.resume_reading.push(ci);
        }
    }

    pub(super) fn http_housekeeping(&mut self, now: Mono) {
        self.answer_waiting_snapshots(now, SNAPSHOT_WAIT, "no frame from the camera within 1 s");
    }

    // ---- MJPEG --------------------------------------------------------

    fn start_mjpeg(&mut self, ci: ConnId, fps: Option<&str>, head_only: bool) {
        let close = self.conns[ci].http_mut().is_some_and(|h| h.close_after);
        let every = match fps.map(str::parse::<f64>) {
            None => None,
            Some(Ok(f)) if f > 0.0 && f <= 120.0 => Some(Duration::from_secs_f64(1.0 / f)),
            Some(_) => {
                return write_text(
                    &mut self.conns[ci].ctrl,
                    400,
                    "fps must be a number above 0 and at most 120",
                    head_only,
                    close,
                );
            }
        };
        if head_only {
            return write_head(
                &mut self.conns[ci].ctrl,
                200,
                &[
                    ("Content-Type", mjpeg::CONTENT_TYPE),
                    ("Cache-Control", "no-store"),
                ],
                None,
                close,
            );
        }
        if self.clients() >= self.cfg.max_clients {
            let peer = self.conns[ci].peer;
            self.refused(peer, "MJPEG stream refused: 503", Refusal::MaxClients);
            return write_text(
                &mut self.conns[ci].ctrl,
                503,
                "max_clients streaming clients reached",
                false,
                close,
            );
        }
        let now = Mono::now();
        let mut m = Mjpeg {
            queue: VecDeque::with_capacity(self.cfg.client_queue),
            every,
            next_due: now,
            frames_sent: 0,
            frames_dropped: 0,
        };
        // The newest frame at once, so the picture appears without waiting.
        if let Some(f) = &self.stream.last {
            if now.saturating_sub(f.captured) < FRESH {
                m.queue.push_back(f.clone());
                m.next_due = f.captured;
                advance(&mut m, f.captured);
            }
        }
        let conn = &mut self.conns[ci];
        // The stream ends when the client leaves: no length, then close.
        write_head(
            &mut conn.ctrl,
            200,
            &[
                ("Content-Type", mjpeg::CONTENT_TYPE),
                ("Cache-Control", "no-store"),
                ("Pragma", "no-cache"),
            ],
            None,
            true,
        );
        log::info!(
            "MJPEG stream to {}{}",
            conn.peer,
            match every {
                Some(d) => format!(" at most {:.2} frames/s", 1.0 / d.as_secs_f64()),
                None => String::new(),
            }
        );
        if let Proto::Http(h) = &mut conn.proto {
            h.state = State::Mjpeg(m);
            h.close_after = true;
        }
    }

    /// Queues a new frame to every MJPEG stream and answers waiting
    /// snapshots.
    pub(super) fn http_offer(&mut self, frame: &Rc<SharedFrame>) {
        let limit = self.cfg.client_queue;
        let mut snapshots = Vec::new();
        for (ci, conn) in self.conns.iter_mut() {
            let Proto::Http(h) = &mut conn.proto else {
                continue;
            };
            match &mut h.state {
                State::Mjpeg(m) => {
                    if m.every.is_some() && frame.captured < m.next_due {
                        continue;
                    }
                    advance(m, frame.captured);
                    if enqueue(&mut m.queue, frame, limit, false) {
                        m.frames_dropped += 1;
                        self.totals.http.frames_dropped += 1;
                    }
                }
                State::Snapshot { head_only, .. } => snapshots.push((ci, *head_only)),
                _ => {}
            }
        }
        for (ci, head_only) in snapshots {
            self.send_snapshot(ci, frame.clone(), head_only);
            self.flush_conn(ci);
            self.resume_reading.push(ci);
        }
    }

    /// Writes an HTTP connection's pending bytes until the socket is full:
    /// the response head, the body being written, then the next MJPEG part.
    pub(super) fn http_flush(&mut self, ci: ConnId) {
        loop {
            let Some(conn) = self.conns.get_mut(ci) else {
                return;
            };
            if conn.ctrl_pending() > 0 {
                if !self.write_ctrl(ci) {
                    return;
                }
                continue;
            }
            let Proto::Http(h) = &mut conn.proto else {
                return;
            };
            if let Some(b) = &mut h.body {
                match write_body(&mut conn.stream, b) {
                    Ok(true) => {
                        self.send_latency
                            .record(Mono::now().saturating_sub(b.frame.entered));
                        self.totals.http.bytes_sent += b.len() as u64;
                        if let State::Mjpeg(m) = &mut h.state {
                            m.frames_sent += 1;
                            self.totals.http.frames_sent += 1;
                        } else {
                            // A snapshot is out: the next request may go.
                            self.resume_reading.push(ci);
                        }
                        h.body = None;
                    }
                    Ok(false) => return,
                    Err(e) => return self.close_conn(ci, &format!("write: {e}")),
                }
                continue;
            }
            if conn.closing.is_some() {
                return self.close_conn(ci, "closed after an error");
            }
            let next = match &mut h.state {
                State::Mjpeg(m) => m.queue.pop_front(),
                State::Requests if h.close_after => {
                    return self.close_conn(ci, "Connection: close");
                }
                _ => None,
            };
            let Some(frame) = next else {
                return;
            };
            let mut part_header = [0u8; MAX_PART_HEADER];
            let part_header_len = mjpeg::part_header(
                &mut part_header,
                frame.jpeg().len(),
                frame.captured.0 / 1000,
            );
            h.body = Some(Body {
                frame,
                part_header,
                part_header_len,
                trailer: b"\r\n",
                written: 0,
            });
        }
    }

    pub(super) fn http_closed(&mut self, h: HttpConn, peer: std::net::SocketAddr) {
        match h.state {
            State::Mjpeg(m) => {
                log::info!(
                    "MJPEG stream to {peer} ended: {} frames sent, {} dropped for a slow client",
                    m.frames_sent,
                    m.frames_dropped
                );
            }
            // A tunnel is its two halves: the GET side goes with the POST.
            State::TunnelIn { get, .. } => {
                self.close_conn(get, "the tunnel's POST side closed");
            }
            _ => {}
        }
    }
}

/// After taking a frame captured at `captured`: when the next may go.
fn advance(m: &mut Mjpeg, captured: Mono) {
    if let Some(every) = m.every {
        m.next_due = m.next_due.add(every);
        // After a pause, from now on rather than a burst to catch up.
        if m.next_due <= captured {
            m.next_due = captured.add(every);
        }
        // Frames come a little early or late: take one within a tenth.
        m.next_due = Mono(m.next_due.0.saturating_sub((every / 10).as_nanos() as u64));
    }
}

/// Writes what is left of a body; true once all of it is out.
fn write_body(stream: &mut mio::net::TcpStream, b: &mut Body) -> io::Result<bool> {
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
            IoSlice::new(&b.part_header[w.min(head_end)..head_end]),
            IoSlice::new(&jpeg[w.clamp(head_end, jpeg_end) - head_end..]),
            IoSlice::new(&b.trailer[w.max(jpeg_end) - jpeg_end..]),
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    /// The server's source files (src/server/**/*.rs), read where they are
    /// (a file added later is looked at too), up to their tests.
    fn sources() -> Vec<(PathBuf, String)> {
        fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let mut text = std::fs::read_to_string(&p).unwrap();
                    text.truncate(text.find("mod tests {").unwrap_or(text.len()));
                    out.push((p, text));
                }
            }
        }
        let mut out = Vec::new();
        walk(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/server"),
            &mut out,
        );
        assert!(out.len() > 5, "{out:?}");
        out
    }

    /// The second argument of each call to `f` in `text`, as written.
    fn second_arguments<'a>(text: &'a str, f: &str) -> Vec<&'a str> {
        let mut out = Vec::new();
        for (at, call) in text.match_indices(&format!("{f}(")) {
            if text[..at].ends_with("fn ") {
                continue;
            }
            let args = &text[at + call.len()..];
            let (mut depth, mut start) = (0, None);
            for (i, c) in args.char_indices() {
                match c {
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' | '}' if depth == 0 => break,
                    ')' | ']' | '}' => depth -= 1,
                    ',' if depth == 0 => match start {
                        None => start = Some(i + 1),
                        Some(s) => {
                            out.push(args[s..i].trim());
                            break;
                        }
                    },
                    _ => {}
                }
            }
        }
        out
    }

    /// Every HTTP status the daemon writes (the status argument of each
    /// call that writes a response, the values of the expressions used
    /// there) has a reason phrase; so has every status line written out
    /// literally, HTTP or RTSP.
    #[test]
    fn every_http_status_written_has_a_reason_phrase() {
        use camstream_http::request::Fault;
        use camstream_onvif::soap::{Code, Fault as SoapFault};
        // Every variant, by a match that stops compiling when one is added.
        let faults = [
            Fault::Malformed,
            Fault::TooLarge,
            Fault::TooManyHeaders,
            Fault::Version,
        ]
        .map(|f| match f {
            Fault::Malformed | Fault::TooLarge | Fault::TooManyHeaders | Fault::Version => {
                f.status()
            }
        });
        let soap_faults = [Code::VersionMismatch, Code::Sender, Code::Receiver].map(|code| {
            let f = SoapFault {
                code,
                subcodes: &[],
                reason: String::new(),
            };
            match code {
                Code::VersionMismatch | Code::Sender | Code::Receiver => f.http_status(),
            }
        });
        let mut used = BTreeSet::new();
        for (path, text) in sources() {
            // A variable: the (status, ...) pairs the same file matches into it.
            let pairs: Vec<u16> = text
                .match_indices('(')
                .filter_map(|(i, _)| {
                    let (n, rest) = text[i + 1..].trim_start().split_at_checked(3)?;
                    let n = rest.starts_with(',').then(|| n.parse().ok()).flatten()?;
                    (100..600).contains(&n).then_some(n)
                })
                .collect();
            for f in ["write_head", "write_text", "soap_reply"] {
                for arg in second_arguments(&text, f) {
                    match arg {
                        "fault.status()" => used.extend(faults),
                        "fault.http_status()" => used.extend(soap_faults),
                        "status" => used.extend(&pairs),
                        n => used.extend(n.parse::<u16>().map_err(|_| {
                            panic!(
                                "{}: {f} writes the status `{n}`: teach this test its values",
                                path.display()
                            )
                        })),
                    }
                }
            }
            for proto in ["\"HTTP/1.1 ", "\"RTSP/1.0 "] {
                for (i, _) in text.match_indices(proto) {
                    let line = &text[i + proto.len()..];
                    let line = &line[..line.find('\\').unwrap_or(line.len())];
                    let (status, phrase) = line.split_once(' ').unwrap_or((line, ""));
                    // Not a format string (write_head's, which takes reason()).
                    if status.len() != 3 || status.parse::<u16>().is_err() {
                        continue;
                    }
                    assert!(
                        !phrase.trim().is_empty(),
                        "{}: a status line without a reason phrase: {line:?}",
                        path.display()
                    );
                }
            }
        }
        for s in [200, 400, 401, 404, 411, 500] {
            assert!(used.contains(&s), "{s} not found among {used:?}");
        }
        let missing: Vec<u16> = used
            .into_iter()
            .filter(|&s| super::reason(s).is_empty())
            .collect();
        assert!(missing.is_empty(), "no reason phrase for {missing:?}");
    }

    /// Every RTSP status the daemon names (rtsp_types' StatusCode, which
    /// writes its reason phrase) is one rtsp_types has a phrase for.
    #[test]
    fn every_rtsp_status_written_has_a_reason_phrase() {
        use rtsp_types::StatusCode;
        let phrases: std::collections::BTreeMap<String, String> = (100..600)
            .map(StatusCode::from)
            .filter(|s| !matches!(s, StatusCode::Extension(_)))
            .map(|s| (format!("{s:?}"), s.to_string()))
            .collect();
        let mut used = BTreeSet::new();
        for (_, text) in sources() {
            for (i, _) in text.match_indices("StatusCode::") {
                let name: String = text[i + "StatusCode::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                if !name.is_empty() {
                    used.insert(name);
                }
            }
        }
        assert!(used.contains("SessionNotFound"), "{used:?}");
        for name in used {
            let phrase = phrases.get(&name).map_or("", String::as_str);
            assert!(!phrase.is_empty(), "StatusCode::{name}: no reason phrase");
        }
    }
}
