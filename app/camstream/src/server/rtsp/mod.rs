//! RTSP: connections and their messages, sessions, and how a session's
//! frames leave: over UDP from the shared RTP socket, or interleaved on the
//! connection (RTSP's own, or an HTTP tunnel's GET side). Methods are in
//! [`methods`], the SDP in [`sdp`].
//!
//! Over TCP the frame being written belongs to the connection, so it is
//! always finished (the interleaved byte stream stays intact) even if its
//! session ends meanwhile.

mod methods;
mod sdp;

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use camstream_rtp::rtcp;
use camstream_rtsp::framing::{self, Framed, Limits, Refused};
use rustix::net::SocketAddrAny;

use super::conn::{CTRL_HIGH_WATER, Conn, ConnId, Proto};
use super::fanout::{StreamId, enqueue};
use super::frame::SharedFrame;
use super::table::{Id, Table};
use super::{Server, net};
use crate::clock::{Mono, ntp_now, wall_now};

/// Header lines one request may have (clients send about ten).
const MAX_HEADERS: usize = 64;

pub enum Transport {
    Udp {
        rtp: SocketAddrAny,
        rtcp: SocketAddr,
    },
    Interleaved {
        rtp: u8,
        rtcp: u8,
    },
}

pub type SessionId = Id<Session>;
pub type Sessions = Table<Session>;

pub struct Session {
    pub id: String,
    /// The stream it plays (its path: the main one's, or "sub").
    pub stream: StreamId,
    /// The connection that set it up (a tunnel's GET side).
    pub conn: ConnId,
    /// The user who set it up, when users are set: requests from that user
    /// on another connection may control it too.
    pub user: Option<String>,
    pub peer: SocketAddr,
    pub transport: Transport,
    pub playing: bool,
    /// Frames not started yet (UDP: the front one may be partly sent).
    pub queue: VecDeque<Rc<SharedFrame>>,
    /// UDP: packets of the front frame already sent.
    pub udp_sent: usize,
    pub in_udp_backlog: bool,
    pub last_seen: Mono,
    pub next_report: Mono,
    /// RTCP sender counts (wrap as RFC 3550 says).
    pub packets: u32,
    pub octets: u32,
    pub frames_sent: u64,
    pub frames_dropped: u64,
    pub warned_send_error: bool,
}

/// An RTSP connection's own state.
#[derive(Default)]
pub struct RtspConn {
    pub sessions: Vec<SessionId>,
    round_robin: usize,
    /// The interleaved frame being written: frame, RTP channel, bytes done.
    current: Option<(Rc<SharedFrame>, u8, usize)>,
    /// RTSP over HTTP: this is a tunnel's GET side; requests arrive
    /// through its POST side's connection.
    pub tunnel: Option<Tunnel>,
}

/// An RTSP-over-HTTP tunnel, as its GET side keeps it.
pub struct Tunnel {
    pub cookie: String,
    /// Its one POST side, once it came.
    pub post: Option<ConnId>,
    /// The user the tunnel's GET or POST, or its first authenticated
    /// request, came with: every request through it must be that user's.
    pub user: Option<String>,
}

impl RtspConn {
    /// The GET side of an RTSP-over-HTTP tunnel with this cookie.
    pub fn tunnel(cookie: String, user: Option<String>) -> RtspConn {
        RtspConn {
            tunnel: Some(Tunnel {
                cookie,
                post: None,
                user,
            }),
            ..RtspConn::default()
        }
    }
}

/// 408 for a request that did not arrive within request_timeout.
pub fn timed_out(conn: &mut Conn) {
    let _ = methods::response(rtsp_types::StatusCode::RequestTimeout, None)
        .header(rtsp_types::headers::CONNECTION, "close")
        .build(Vec::new())
        .write(&mut conn.ctrl);
}

impl Server {
    /// Handles every complete message in an RTSP connection's input.
    pub(super) fn rtsp_input(&mut self, ci: ConnId) {
        loop {
            let Some(conn) = Conn::with_input(&mut self.conns, ci) else {
                return;
            };
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
                Framed::Refused(r) => self.refuse_input(ci, r),
            }
        }
    }

    fn handle_message(&mut self, ci: ConnId, msg: rtsp_types::Message<Vec<u8>>) {
        match msg {
            rtsp_types::Message::Request(req) => {
                let methods::Outcome { response, start } = self.handle_request(ci, &req);
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
                let Some(r) = self.conns.get(ci).and_then(Conn::rtsp) else {
                    return;
                };
                let si = r.sessions.iter().copied().find(|&si| {
                    matches!(self.sessions.get(si).map(|s| &s.transport),
                        Some(Transport::Interleaved { rtcp, .. }) if *rtcp == channel)
                });
                if let Some(si) = si {
                    self.rtcp_received(si, data.as_slice());
                }
            }
            rtsp_types::Message::Response(_) => {} // we send no requests
        }
    }

    /// Input that is not a message: 400, then skip it and go on, or close
    /// once the answer is out.
    fn refuse_input(&mut self, ci: ConnId, r: Refused) {
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
        let mut resp = methods::response(rtsp_types::StatusCode::BadRequest, r.cseq.as_deref());
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

    fn start_playing(&mut self, si: SessionId) {
        let Some(s) = self.sessions.get_mut(si) else {
            return;
        };
        let now = Mono::now();
        s.playing = true;
        s.next_report = now.add(Duration::from_secs(1));
        // The newest frame at once, so the picture appears without waiting.
        let stream = match s.stream {
            StreamId::Sub => self.sub.as_ref().map_or(&self.stream, |sub| &sub.stream),
            StreamId::Main => &self.stream,
        };
        if let Some(f) = &stream.last {
            if now.saturating_sub(f.captured) < Duration::from_secs(1)
                && enqueue(&mut s.queue, f, self.cfg.client_queue, s.udp_sent > 0)
            {
                s.frames_dropped += 1;
                self.totals.rtsp.frames_dropped += 1;
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

    // ---- frames -------------------------------------------------------

    /// Queues a new frame to every playing session.
    pub(super) fn rtsp_offer(&mut self, frame: &Rc<SharedFrame>, stream: StreamId) {
        let limit = self.cfg.client_queue;
        for (_, s) in self
            .sessions
            .iter_mut()
            .filter(|(_, s)| s.playing && s.stream == stream)
        {
            if enqueue(&mut s.queue, frame, limit, s.udp_sent > 0) {
                s.frames_dropped += 1;
                self.totals.rtsp.frames_dropped += 1;
            }
        }
    }

    /// Sends every UDP session's queue.
    pub(super) fn rtsp_flush_udp_all(&mut self) {
        let mut keys = std::mem::take(&mut self.scratch_sessions);
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
        self.scratch_sessions = keys;
    }

    fn flush_udp_or_backlog(&mut self, si: SessionId) {
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
    fn flush_udp(&mut self, si: SessionId) -> bool {
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
                    self.totals.rtsp.frames_sent += 1;
                    self.totals.rtsp.bytes_sent += (f.wire().len() - 4 * n) as u64;
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
                    self.totals.rtsp.frames_dropped += 1;
                    s.udp_sent = 0;
                    s.queue.pop_front();
                }
            }
        }
        true
    }

    pub(super) fn rtp_writable(&mut self) {
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

    /// Writes an RTSP connection's pending bytes until the socket is full:
    /// the interleaved frame being written, then control bytes, then the
    /// next queued frame, taking the connection's sessions in turn.
    pub(super) fn rtsp_flush(&mut self, ci: ConnId) {
        loop {
            let Some(conn) = self.conns.get_mut(ci) else {
                return;
            };
            let Proto::Rtsp(r) = &mut conn.proto else {
                return;
            };
            if let Some((frame, channel, pos)) = &mut r.current {
                match net::write_interleaved(&mut conn.stream, frame, *channel, *pos) {
                    Ok(p) if p == frame.wire().len() => {
                        self.send_latency
                            .record(Mono::now().saturating_sub(frame.entered));
                        self.totals.rtsp.bytes_sent += p as u64;
                        r.current = None;
                    }
                    Ok(p) => {
                        *pos = p;
                        return;
                    }
                    Err(e) => return self.close_conn(ci, &format!("write: {e}")),
                }
            }
            if conn.ctrl_pending() > 0 {
                if !self.write_ctrl(ci) {
                    return;
                }
                continue;
            }
            if conn.closing.is_some() {
                return self.close_conn(ci, "closed after a protocol error");
            }
            let Proto::Rtsp(r) = &mut conn.proto else {
                return;
            };
            let n = r.sessions.len();
            let mut next = None;
            for k in 0..n {
                let si = r.sessions[(r.round_robin + k) % n];
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
                    self.totals.rtsp.frames_sent += 1;
                    r.round_robin = (r.round_robin + k + 1) % n;
                    next = Some((f, rtp, 0));
                    break;
                }
            }
            match next {
                Some(c) => r.current = Some(c),
                None => return,
            }
        }
    }

    // ---- RTCP ---------------------------------------------------------

    pub(super) fn rtp_readable(&mut self) {
        // Clients may send NAT-opening packets to the RTP port; nothing to do.
        let mut buf = [0u8; 2048];
        while self.rtp_socket.recv_from(&mut buf).is_ok() {}
    }

    pub(super) fn rtcp_readable(&mut self) {
        let mut buf = [0u8; 2048];
        loop {
            let (n, from) = match self.rtcp_socket.recv_from(&mut buf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            if let Some(&si) = self.session_by_rtcp.get(&from) {
                self.rtcp_received(si, &buf[..n]);
            }
        }
    }

    /// RTCP from a client: proof of life; BYE stops the stream to it.
    fn rtcp_received(&mut self, si: SessionId, data: &[u8]) {
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
    fn send_report(&mut self, si: SessionId, bye: bool) {
        let Some(s) = self.sessions.get(si) else {
            return;
        };
        let (ntp_time, mono) = ntp_now();
        let stream = self.stream_of(s.stream);
        let sr = rtcp::SenderReport {
            ssrc: stream.packetizer.ssrc(),
            ntp_time,
            rtp_time: stream.clock.timestamp(mono),
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

    pub(super) fn end_session(&mut self, si: SessionId, why: &str, send_bye: bool) {
        if send_bye {
            self.send_report(si, true);
        }
        let Some(s) = self.sessions.remove(si) else {
            return;
        };
        self.session_ids.remove(&s.id);
        if let Transport::Udp { rtcp, .. } = s.transport {
            self.session_by_rtcp.remove(&rtcp);
        }
        if s.in_udp_backlog {
            self.udp_backlog.retain(|&k| k != si);
        }
        if let Some(r) = self.conns.get_mut(s.conn).and_then(Conn::rtsp_mut) {
            r.sessions.retain(|&k| k != si);
        }
        log::info!(
            "session {} from {} ended ({why}): {} frames sent, {} dropped for a slow client",
            s.id,
            s.peer,
            s.frames_sent,
            s.frames_dropped
        );
    }

    /// An RTSP connection closed: its sessions end with it (a client that
    /// closed its control connection is gone), and a tunnel's POST side too.
    pub(super) fn rtsp_closed(&mut self, ci: ConnId, r: RtspConn, why: &str) {
        for si in r.sessions {
            let udp = self
                .sessions
                .get(si)
                .is_some_and(|s| matches!(s.transport, Transport::Udp { .. }));
            self.end_session(si, why, udp);
        }
        if let Some(t) = r.tunnel {
            if self.tunnels.get(&t.cookie) == Some(&ci) {
                self.tunnels.remove(&t.cookie);
            }
            if let Some(post) = t.post {
                self.close_conn(post, "the tunnel's GET side closed");
            }
        }
    }

    pub(super) fn rtsp_housekeeping(&mut self, now: Mono) {
        let timeout = Duration::from_secs(u64::from(self.cfg.session_timeout));
        let expired: Vec<SessionId> = self
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
            if tcp
                && self
                    .conns
                    .get(ci)
                    .and_then(Conn::rtsp)
                    .is_some_and(|r| r.sessions.is_empty())
            {
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
        let due: Vec<SessionId> = self
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
    }
}

fn uri_str(req: &rtsp_types::Request<Vec<u8>>) -> String {
    req.request_uri()
        .map_or_else(|| "*".into(), |u| u.to_string())
}
