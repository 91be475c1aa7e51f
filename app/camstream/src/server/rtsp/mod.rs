//! RTSP: its connections (the RTSP port's, and HTTP tunnels'), their
//! messages, sessions and how a session's frames leave: over UDP from the
//! shared RTP socket ([`udp`]), or interleaved on the connection. Methods
//! are in [`methods`], RTCP in [`rtcp`], RTSP over HTTP in [`tunnel`], the
//! SDP in [`sdp`].
//!
//! Over TCP the frame being written belongs to the connection, so it is
//! always finished (the interleaved byte stream stays intact) even if its
//! session ends meanwhile.

mod methods;
mod rtcp;
mod sdp;
mod send;
mod session;
mod tunnel;
mod udp;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use camstream_rtsp::framing::{self, Framed, Limits, Refused};
use mio::{Interest, Registry, Token};

use super::conn::{CTRL_HIGH_WATER, Conn, ConnId, Conns};
use super::ctx::Ctx;
use crate::fanout::{Fanout, Label, SharedFrame, SubscriberId};
use crate::table::Secondary;
use crate::clock::{Mono, WallClockWatch, wall_now};

use session::{SessionId, Sessions, Transport};
use tunnel::Tunnels;
pub use session::of_token as session_of_token;
pub use udp::Udp;

/// Header lines one request may have (clients send about ten).
const MAX_HEADERS: usize = 64;

/// An RTSP connection's own state.
#[derive(Default)]
pub struct RtspConn {
    sessions: Vec<SessionId>,
    round_robin: usize,
    /// The interleaved frame being written.
    writing: Option<Writing>,
    /// RTSP over HTTP: this is a tunnel's GET side; requests arrive
    /// through its POST side's connection.
    tunnel: Option<tunnel::Tunnel>,
}

struct Writing {
    frame: Rc<SharedFrame>,
    channel: u8,
    pos: usize,
    subscription: SubscriberId,
}

/// Since the start, for /metrics and the log.
#[derive(Default, Clone, Copy)]
pub struct Counts {
    pub sessions_udp: usize,
    pub sessions_tcp: usize,
    pub sessions_tunnelled: usize,
    /// Connections: the RTSP port's, tunnels' GET and POST sides.
    pub connections: usize,
}

pub struct Rtsp {
    conns: Secondary<Conn, RtspConn>,
    sessions: Sessions,
    session_ids: HashMap<String, SessionId>,
    session_by_rtcp: HashMap<SocketAddr, SessionId>,
    udp: Udp,
    tunnels: Tunnels,
    /// RTCP's CNAME: camstream@HOST.
    cname: String,
    label: Label,
    /// Reused list of ids, so sending a frame allocates nothing.
    /// Notices the wall clock being set, once per housekeeping pass.
    wall_clock: WallClockWatch,
}

impl Rtsp {
    pub fn new(udp: Udp, fanout: &mut Fanout, cname: String) -> Rtsp {
        Rtsp {
            conns: Secondary::new(),
            sessions: Sessions::new(),
            session_ids: HashMap::new(),
            session_by_rtcp: HashMap::new(),
            udp,
            tunnels: Tunnels::default(),
            cname,
            label: fanout.label("rtsp"),
            wall_clock: WallClockWatch::default(),
        }
    }

    /// The UDP sockets' readiness, on these tokens.
    pub fn register(&mut self, r: &Registry, rtp: Token, rtcp: Token) -> std::io::Result<()> {
        r.register(
            &mut self.udp.rtp_socket,
            rtp,
            Interest::READABLE | Interest::WRITABLE,
        )?;
        r.register(&mut self.udp.rtcp_socket, rtcp, Interest::READABLE)
    }

    /// A connection of the RTSP port.
    pub fn opened(&mut self, ci: ConnId) {
        self.conns.insert(ci, RtspConn::default());
    }

    pub fn counts(&self, conns: &Conns) -> Counts {
        let mut c = Counts {
            connections: self.conns.len() + self.tunnels.posts(),
            ..Counts::default()
        };
        for (_, s) in self.sessions.iter() {
            let tunnelled = self.conns.get(s.conn).is_some_and(|r| r.tunnel.is_some());
            match s.transport {
                Transport::Udp { .. } => c.sessions_udp += 1,
                Transport::Interleaved { .. } if tunnelled => c.sessions_tunnelled += 1,
                Transport::Interleaved { .. } => c.sessions_tcp += 1,
            }
        }
        debug_assert!(c.connections <= conns.len());
        c
    }

    /// Sessions (a session's second track is not another).
    pub fn sessions(&self) -> usize {
        self.sessions.iter().filter(|(_, s)| s.lead.is_none()).count()
    }

    /// A session's entries: its lead (`si`) and the lead's second tracks.
    fn group(&self, si: SessionId) -> Vec<SessionId> {
        let mut g = vec![si];
        if let Some(s) = self.sessions.get(si) {
            g.extend_from_slice(&s.tracks);
        }
        g
    }

    /// Whether it is a tunnel's GET side (whose input is its POST's).
    pub fn is_tunnel_get(&self, ci: ConnId) -> bool {
        self.conns.get(ci).is_some_and(|r| r.tunnel.is_some())
    }

    /// Whether it carries a stream (then it is not idle).
    pub fn streaming(&self, ci: ConnId) -> bool {
        self.conns.get(ci).is_some_and(|r| !r.sessions.is_empty()) || self.tunnels.is_post(ci)
    }

    /// Handles every complete message in an RTSP connection's input.
    pub fn input(&mut self, ci: ConnId, ctx: &mut Ctx<'_>) {
        loop {
            let Some(conn) = Conn::with_input(ctx.conns, ci) else {
                return;
            };
            if conn.ctrl_pending() > CTRL_HIGH_WATER {
                conn.read_paused = true;
                return;
            }
            let limits = Limits {
                max_size: ctx.cfg.max_request_size,
                max_headers: MAX_HEADERS,
            };
            match framing::next(&conn.inbuf, &limits) {
                Framed::Message(msg, used) => {
                    conn.inbuf.drain(..used);
                    conn.request_started = None;
                    self.handle_message(ci, msg, ctx);
                }
                Framed::Incomplete => {
                    conn.request_started.get_or_insert(conn.last_input);
                    return;
                }
                Framed::Refused(r) => self.refuse_input(ci, r, ctx),
            }
        }
    }

    fn handle_message(&mut self, ci: ConnId, msg: rtsp_types::Message<Vec<u8>>, ctx: &mut Ctx<'_>) {
        match msg {
            rtsp_types::Message::Request(req) => {
                let methods::Outcome { response, start } = self.handle_request(ci, &req, ctx);
                let challenges = if response.status() == rtsp_types::StatusCode::Unauthorized {
                    let stale = ctx.conns.get(ci).is_some_and(|c| c.stale_nonce);
                    ctx.gate.challenges(stale)
                } else {
                    Vec::new()
                };
                let Some(conn) = ctx.conns.get_mut(ci) else {
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
                self.flush(ci, ctx);
                if let Some(si) = start {
                    self.start_playing(si, ctx);
                }
            }
            rtsp_types::Message::Data(data) => {
                // Interleaved RTCP acts on this connection's sessions only.
                let channel = data.channel_id();
                let Some(r) = self.conns.get(ci) else {
                    return;
                };
                let si = r.sessions.iter().copied().find(|&si| {
                    matches!(self.sessions.get(si).map(|s| &s.transport),
                        Some(Transport::Interleaved { rtcp, .. }) if *rtcp == channel)
                });
                if let Some(si) = si {
                    self.rtcp_received(si, data.as_slice(), ctx.fanout);
                }
            }
            rtsp_types::Message::Response(_) => {} // we send no requests
        }
    }

    /// Input that is not a message: 400, then skip it and go on, or close
    /// once the answer is out.
    fn refuse_input(&mut self, ci: ConnId, r: Refused, ctx: &mut Ctx<'_>) {
        let Some(conn) = ctx.conns.get_mut(ci) else {
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
        self.flush(ci, ctx);
    }

    /// PLAY, each track of the session: a picture alone starts with the
    /// newest frame at once, so it appears without waiting; a picture with
    /// its sound from the next frame on, as the sound does (what a client
    /// lines tracks up by should be as fresh for both). Before each
    /// track's first packet goes a sender report for that packet's
    /// instant, so a client maps the tracks to one clock from their first
    /// packets (FFmpeg lines streams up only by their reports, live555
    /// syncs only after one).
    fn start_playing(&mut self, si: SessionId, ctx: &mut Ctx<'_>) {
        let group = self.group(si);
        let alone = group.len() == 1;
        for t in group {
            if let Some(s) = self.sessions.get_mut(t) {
                s.play(ctx.fanout, Mono::now(), alone);
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

    // ---- frames -------------------------------------------------------

    /// Writes an RTSP connection's pending bytes until the socket is full:
    /// the interleaved frame being written, control bytes, and the next
    /// queued frame, taking the connection's sessions in turn. (UDP
    /// sessions' frames are not its business: [`Rtsp::session_woken`].)
    pub fn flush(&mut self, ci: ConnId, ctx: &mut Ctx<'_>) {
        if self.tunnels.is_post(ci) {
            return self.post_flush(ci, ctx);
        }
        loop {
            let Some(conn) = ctx.conns.get_mut(ci) else {
                return;
            };
            let Some(r) = self.conns.get_mut(ci) else {
                return;
            };
            if let Some(w) = &mut r.writing {
                match send::write_interleaved(&mut conn.socket, &w.frame, w.channel, w.pos) {
                    Ok(p) if p == w.frame.wire().len() => {
                        ctx.fanout.delivered(w.subscription, &w.frame, p);
                        r.writing = None;
                    }
                    Ok(p) => {
                        w.pos = p;
                        return;
                    }
                    Err(e) => return ctx.close(ci, &format!("write: {e}")),
                }
            }
            if conn.ctrl_pending() > 0 {
                match conn.write_ctrl() {
                    Ok(true) => self.ctrl_drained(ci, ctx),
                    Ok(false) => return,
                    Err(e) => return ctx.close(ci, &format!("write: {e}")),
                }
                continue;
            }
            if conn.closing.is_some() {
                return ctx.close(ci, "closed after a protocol error");
            }
            let n = r.sessions.len();
            let mut next = None;
            let mut report_queued = false;
            for k in 0..n {
                let Some(&si) = r.sessions.get((r.round_robin + k) % n) else {
                    continue;
                };
                let Some(s) = self.sessions.get_mut(si) else {
                    continue;
                };
                let Transport::Interleaved { rtp, rtcp } = s.transport else {
                    continue;
                };
                if s.report_first {
                    if let Some(f) = ctx.fanout.peek(s.subscription) {
                        // Its report first: into the control bytes, which
                        // go before the next frame is taken.
                        s.report_first = false;
                        rtcp::interleaved_report(s, Some(f), false, ctx.fanout, &self.cname, rtcp, &mut conn.ctrl);
                        report_queued = true;
                        break;
                    }
                }
                if let Some(f) = ctx.fanout.next(s.subscription) {
                    r.round_robin = (r.round_robin + k + 1) % n;
                    next = Some(Writing {
                        frame: f,
                        channel: rtp,
                        pos: 0,
                        subscription: s.subscription,
                    });
                    break;
                }
            }
            match next {
                Some(w) => r.writing = Some(w),
                None if report_queued => continue,
                None => return,
            }
        }
    }

    /// After a connection's control bytes are all out: reading resumes if
    /// it was paused for them, on a tunnel's POST side too.
    fn ctrl_drained(&mut self, ci: ConnId, ctx: &mut Ctx<'_>) {
        let Some(conn) = ctx.conns.get_mut(ci) else {
            return;
        };
        if !conn.read_paused {
            return;
        }
        conn.read_paused = false;
        ctx.resume(ci);
        let post = self
            .conns
            .get(ci)
            .and_then(|r| r.tunnel.as_ref())
            .and_then(|t| t.post);
        if let Some(post) = post {
            if let Some(p) = ctx.conns.get_mut(post) {
                p.read_paused = false;
            }
            ctx.resume(post);
        }
    }

    /// Sends the UDP sessions' frames of connection `ci`.
    /// The fan-out queued frames for a UDP session: they go out on the
    /// RTP socket, or the session waits for it.
    pub fn session_woken(&mut self, si: SessionId, fanout: &mut Fanout) {
        self.udp.flush_or_backlog(&mut self.sessions, si, fanout, &self.cname);
    }

    pub fn rtp_writable(&mut self, fanout: &mut Fanout) {
        self.udp.writable(&mut self.sessions, fanout, &self.cname);
    }

    pub fn rtp_readable(&mut self) {
        self.udp.rtp_readable();
    }

    pub fn rtcp_readable(&mut self, fanout: &mut Fanout) {
        let mut buf = [0u8; 2048];
        while let Some((n, from)) = self.udp.recv_rtcp(&mut buf) {
            // Only from the ports the session's client gave.
            if let Some(&si) = self.session_by_rtcp.get(&from) {
                self.rtcp_received(si, buf.get(..n).unwrap_or_default(), fanout);
            }
        }
    }

    // ---- lifetimes ----------------------------------------------------

    pub fn end_session(&mut self, si: SessionId, why: &str, send_bye: bool, ctx: &mut Ctx<'_>) {
        if send_bye {
            self.send_report(si, true, ctx);
        }
        let Some(s) = self.sessions.remove(si) else {
            return;
        };
        match s.lead {
            // A second track ends alone (its connection closing lists it).
            Some(lead) => {
                if let Some(l) = self.sessions.get_mut(lead) {
                    l.tracks.retain(|&t| t != si);
                }
            }
            // The lead ends the session: its tracks with it.
            None => {
                self.session_ids.remove(&s.id);
                for &t in &s.tracks {
                    self.end_session(t, why, send_bye, ctx);
                }
            }
        }
        if let Transport::Udp { rtcp, .. } = s.transport {
            self.session_by_rtcp.remove(&rtcp);
        }
        self.udp.forget(si);
        if let Some(r) = self.conns.get_mut(s.conn) {
            r.sessions.retain(|&k| k != si);
        }
        let (sent, dropped) = ctx
            .fanout
            .unsubscribe(s.subscription)
            .map_or((0, 0), |sub| (sub.frames_sent, sub.frames_dropped));
        log::info!(
            "session {} from {} ended ({why}): {sent} frames sent, {dropped} dropped for a slow client",
            s.id,
            s.peer,
        );
    }

    /// An RTSP connection (or a tunnel's POST) closed: its sessions end with
    /// it (a client that closed its control connection is gone), and so
    /// does its tunnel's other half.
    pub fn closed(&mut self, ci: ConnId, why: &str, ctx: &mut Ctx<'_>) {
        if let Some(get) = self.tunnels.post_closed(ci) {
            return ctx.close(get, "the tunnel's POST side closed");
        }
        let Some(r) = self.conns.remove(ci) else {
            return;
        };
        for si in r.sessions {
            let udp = self
                .sessions
                .get(si)
                .is_some_and(|s| matches!(s.transport, Transport::Udp { .. }));
            self.end_session(si, why, udp, ctx);
        }
        if let Some(t) = r.tunnel {
            if let Some(post) = self.tunnels.get_closed(ci, &t) {
                ctx.close(post, "the tunnel's GET side closed");
            }
        }
    }

    pub fn housekeeping(&mut self, now: Mono, ctx: &mut Ctx<'_>) {
        let timeout = Duration::from_secs(u64::from(ctx.cfg.session_timeout));
        // A session is alive while any of its tracks is (its RTCP).
        let expired: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.lead.is_none())
            .filter(|&(si, _)| {
                self.group(si)
                    .into_iter()
                    .filter_map(|t| self.sessions.get(t))
                    .all(|t| now.saturating_sub(t.last_seen) > timeout)
            })
            .map(|(k, _)| k)
            .collect();
        for si in expired {
            let Some((ci, tcp)) = self
                .sessions
                .get(si)
                .map(|s| (s.conn, matches!(s.transport, Transport::Interleaved { .. })))
            else {
                continue;
            };
            self.end_session(si, "timed out", true, ctx);
            // An interleaved session's connection has nothing left to carry.
            if tcp && self.conns.get(ci).is_some_and(|r| r.sessions.is_empty()) {
                ctx.close(ci, "session timed out");
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
            for (_, s) in self.sessions.iter_mut() {
                s.next_report = now;
            }
        }
        let due: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.playing() && s.next_report <= now)
            .map(|(k, _)| k)
            .collect();
        let interval = Duration::from_secs(u64::from(ctx.cfg.rtcp_interval));
        for si in due {
            if let Some(s) = self.sessions.get_mut(si) {
                s.next_report = now.add(interval);
                self.send_report(si, false, ctx);
            }
        }
    }

    /// At a stop: every session ends with a BYE.
    pub fn shutdown(&mut self, ctx: &mut Ctx<'_>) {
        for si in self.sessions.ids() {
            self.end_session(si, "server stopping", true, ctx);
        }
    }

    /// What its tables say of each other and of the connections.
    pub fn audit(&self, conns: &Conns, fanout: &Fanout) -> Result<(), String> {
        for (si, s) in self.sessions.iter() {
            if s.playing() != fanout.is_active(s.subscription) {
                return Err(format!(
                    "session {si:?} is {} but its subscription {}",
                    if s.playing() { "playing" } else { "not playing" },
                    if s.playing() { "takes no frames" } else { "takes frames" }
                ));
            }
            if fanout.subscriber(s.subscription).map(|sub| sub.wake()) != Some(s.wake(si)) {
                return Err(format!(
                    "session {si:?}'s frames wake another than its transport's sender"
                ));
            }
            let Some(conn) = conns.get(s.conn) else {
                return Err(format!(
                    "session {si:?} names a gone connection {:?}",
                    s.conn
                ));
            };
            if !self
                .conns
                .get(s.conn)
                .is_some_and(|r| r.sessions.contains(&si))
            {
                return Err(format!("session {si:?} is not listed by its connection"));
            }
            match s.lead {
                None if self.session_ids.get(&s.id) != Some(&si) => {
                    return Err(format!("session {si:?} is not found by its id"));
                }
                Some(lead)
                    if !self
                        .sessions
                        .get(lead)
                        .is_some_and(|l| l.id == s.id && l.lead.is_none() && l.tracks.contains(&si)) =>
                {
                    return Err(format!("session {si:?}'s lead {lead:?} does not list it"));
                }
                _ => {}
            }
            for &t in &s.tracks {
                if self.sessions.get(t).is_none_or(|t| t.lead != Some(si)) {
                    return Err(format!("session {si:?} lists a track {t:?}, gone or another's"));
                }
            }
            if s.peer.ip() != conn.peer.ip() {
                return Err(format!(
                    "session {si:?} is of another address than its connection"
                ));
            }
        }
        for (id, &si) in &self.session_ids {
            if self.sessions.get(si).is_none_or(|s| &s.id != id) {
                return Err(format!("session id {id} names {si:?}, gone or another"));
            }
        }
        for (addr, &si) in &self.session_by_rtcp {
            match self.sessions.get(si).map(|s| &s.transport) {
                Some(Transport::Udp { rtcp, .. }) if rtcp == addr => {}
                _ => return Err(format!("RTCP from {addr} names {si:?}, gone or another")),
            }
        }
        self.udp.audit(&self.sessions)?;
        for (ci, r) in self.conns.iter() {
            if conns.get(ci).is_none() {
                return Err(format!("RTSP state of a gone connection {ci:?}"));
            }
            for &si in &r.sessions {
                if self.sessions.get(si).is_none_or(|s| s.conn != ci) {
                    return Err(format!("connection {ci:?} lists {si:?}, gone or another's"));
                }
            }
        }
        self.tunnels.audit(conns, &self.conns)
    }
}

fn uri_str(req: &rtsp_types::Request<Vec<u8>>) -> String {
    req.request_uri()
        .map_or_else(|| "*".into(), |u| u.to_string())
}
