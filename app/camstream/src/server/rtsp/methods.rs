//! RTSP 1.0 (RFC 2326) methods. Each request gets one response; PLAY also
//! names the session to start once its response is on the way.

use std::net::SocketAddr;

use camstream_rtsp::auth::Verdict;
use camstream_rtsp::transport::{self, Choice};
use rtsp_types::headers::{self, Transports};
use rtsp_types::{Method, Request, Response, ResponseBuilder, StatusCode, Url, Version};

use super::super::fanout::StreamId;
use super::super::{Refusal, Server, random_u64};
use super::sdp::{self, TRACK};
use super::{Session, SessionId, Transport};
use crate::clock::Mono;
use crate::server::conn::ConnId;

const SERVER: &str = concat!("camstream/", env!("CARGO_PKG_VERSION"));
const PUBLIC: &str =
    "OPTIONS, DESCRIBE, SETUP, PLAY, PAUSE, TEARDOWN, GET_PARAMETER, SET_PARAMETER";

/// A response with the headers every response carries.
pub(in crate::server) fn response(status: StatusCode, cseq: Option<&str>) -> ResponseBuilder {
    let mut b = Response::builder(Version::V1_0, status).header(headers::SERVER, SERVER);
    if let Some(c) = cseq {
        b = b.header(headers::CSEQ, c);
    }
    b
}

/// What a request URI names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// `*` (OPTIONS only).
    Server,
    /// rtsp://host/PATH: the presentation.
    Aggregate,
    /// rtsp://host/PATH/trackID=0: the video stream.
    Track,
    Unknown,
}

fn target(uri: Option<&Url>, path: &str) -> Target {
    let Some(uri) = uri else {
        return Target::Server;
    };
    let p = uri.path().trim_matches('/');
    match p.strip_prefix(path) {
        Some("") => Target::Aggregate,
        Some(rest) if rest.strip_prefix('/') == Some(TRACK) => Target::Track,
        _ => Target::Unknown,
    }
}

/// The stream a request names, and what of it: the main stream's path,
/// else the sub-stream's (when it is on).
fn target_stream(uri: Option<&Url>, main: &str, sub: Option<&str>) -> (Target, StreamId) {
    match (target(uri, main), sub) {
        (Target::Unknown, Some(sub)) => (target(uri, sub), StreamId::Sub),
        (t, _) => (t, StreamId::Main),
    }
}

/// The presentation URL as the client addresses it, with a trailing slash
/// (the Content-Base that relative control URLs resolve against).
fn base_url(uri: &Url, path: &str) -> String {
    let mut u = uri.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.set_fragment(None);
    u.set_path(&format!("/{path}/"));
    u.to_string()
}

/// What a request comes to: its response and, for PLAY, the session to
/// start streaming once the response is queued.
pub(super) struct Outcome {
    pub response: Response<Vec<u8>>,
    pub start: Option<SessionId>,
}

impl Outcome {
    fn respond(response: Response<Vec<u8>>) -> Outcome {
        Outcome {
            response,
            start: None,
        }
    }

    /// A response with a status and nothing else.
    fn status(status: StatusCode, cseq: &str) -> Outcome {
        Outcome::respond(response(status, Some(cseq)).build(Vec::new()))
    }
}

/// What any request must be before anything else: with a CSeq (returned),
/// RTSP/1.0, requiring no extension; else the response that says which.
fn check(req: &Request<Vec<u8>>) -> Result<String, Response<Vec<u8>>> {
    let Some(cseq) = req.header(&headers::CSEQ).map(|v| v.as_str().to_owned()) else {
        return Err(response(StatusCode::BadRequest, None).build(Vec::new()));
    };
    if req.version() != Version::V1_0 {
        return Err(response(StatusCode::RTSPVersionNotSupported, Some(&cseq)).build(Vec::new()));
    }
    if let Some(required) = req.header(&headers::REQUIRE) {
        // We implement no extension a client could require.
        return Err(response(StatusCode::OptionNotSupported, Some(&cseq))
            .header(headers::UNSUPPORTED, required.as_str())
            .build(Vec::new()));
    }
    Ok(cseq)
}

/// `Session: ID;timeout=SECONDS` (RFC 2326 12.37).
fn session_header(s: &Session, timeout: u32) -> String {
    format!("{};timeout={timeout}", s.id)
}

impl Server {
    /// The WWW-Authenticate values of a 401 on connection `ci`.
    pub(in crate::server) fn challenges(&self, ci: ConnId) -> Vec<String> {
        let Some(auth) = &self.auth else {
            return Vec::new();
        };
        let stale = self.conns.get(ci).is_some_and(|c| c.stale_nonce);
        auth.challenges(Mono::now().0 / 1_000_000_000, stale)
    }

    /// Handles a request on connection `ci`: checks it, lets it through the
    /// auth gate or not, finds the session it names, answers its method.
    pub(super) fn handle_request(&mut self, ci: ConnId, req: &Request<Vec<u8>>) -> Outcome {
        let cseq = match check(req) {
            Ok(cseq) => cseq,
            Err(response) => return Outcome::respond(response),
        };
        let (target, stream) = target_stream(
            req.request_uri(),
            &self.cfg.path,
            self.sub.as_ref().map(|_| super::super::sub::PATH),
        );
        let named = req
            .header(&headers::SESSION)
            .map(|v| v.as_str().split(';').next().unwrap_or("").trim());
        let named_session = named.and_then(|id| self.session_ids.get(id).copied());
        let user = match self.authorize(ci, req, target, stream, named_session) {
            Ok(user) => user,
            Err(status) => return Outcome::status(status, &cseq),
        };
        match self.session_for(ci, named, named_session, user.as_deref()) {
            Ok(session) => self.answer(ci, req, &cseq, (target, stream), session, user),
            Err(status) => Outcome::status(status, &cseq),
        }
    }

    /// The session a request names (`named`, found as `named_session`), if
    /// its sender may use it: only its owner may (another client is told it
    /// does not exist). Naming a session keeps it alive.
    fn session_for(
        &mut self,
        ci: ConnId,
        named: Option<&str>,
        named_session: Option<SessionId>,
        user: Option<&str>,
    ) -> Result<Option<SessionId>, StatusCode> {
        match (named, named_session) {
            (None, _) => Ok(None),
            (Some(_), Some(si)) if self.owns(ci, user, si) => {
                self.sessions[si].last_seen = Mono::now();
                Ok(Some(si))
            }
            (Some(id), _) => {
                log::debug!(
                    "{}: session {id:?} is not this connection's or user's",
                    self.conns[ci].peer
                );
                Err(StatusCode::SessionNotFound)
            }
        }
    }

    /// Answers a request that passed the checks, by its method.
    fn answer(
        &mut self,
        ci: ConnId,
        req: &Request<Vec<u8>>,
        cseq: &str,
        (target, stream): (Target, StreamId),
        session: Option<SessionId>,
        user: Option<String>,
    ) -> Outcome {
        let reply = |status| Outcome::status(status, cseq);
        let timeout = self.cfg.session_timeout;
        let with_session = |b: ResponseBuilder, s: &Session| {
            b.header(headers::SESSION, session_header(s, timeout))
        };

        match req.method() {
            Method::Options => {
                if target == Target::Unknown {
                    return reply(StatusCode::NotFound);
                }
                let mut b = response(StatusCode::Ok, Some(cseq)).header(headers::PUBLIC, PUBLIC);
                if let Some(si) = session {
                    b = with_session(b, &self.sessions[si]);
                }
                Outcome::respond(b.build(Vec::new()))
            }
            Method::Describe => {
                if !matches!(target, Target::Aggregate | Target::Track) {
                    return reply(StatusCode::NotFound);
                }
                let uri = req.request_uri().expect("not Target::Server");
                let conn = &self.conns[ci];
                let s = self.stream_of(stream);
                let body = sdp::describe(&s.info, conn.local.ip(), s.sdp_session_id);
                let r = response(StatusCode::Ok, Some(cseq))
                    .header(headers::CONTENT_TYPE, "application/sdp")
                    .header(
                        headers::CONTENT_BASE,
                        base_url(uri, self.stream_path(stream)),
                    )
                    .build(body);
                Outcome::respond(r)
            }
            Method::Setup => match target {
                Target::Track => self.setup(ci, req, cseq, stream, session, user),
                // One stream only: SETUP names it, not the presentation.
                Target::Aggregate => reply(StatusCode::AggregateOperationNotAllowed),
                _ => reply(StatusCode::NotFound),
            },
            Method::Play | Method::Pause | Method::Teardown => {
                if !matches!(target, Target::Aggregate | Target::Track) {
                    return reply(StatusCode::NotFound);
                }
                let Some(si) = session else {
                    return reply(StatusCode::SessionNotFound);
                };
                match req.method() {
                    Method::Play => self.play(req, cseq, si),
                    Method::Pause => {
                        let s = &mut self.sessions[si];
                        s.playing = false;
                        // Keep a partly sent UDP frame; drop the rest.
                        s.queue.truncate(usize::from(s.udp_sent > 0));
                        Outcome::respond(
                            with_session(response(StatusCode::Ok, Some(cseq)), s).build(Vec::new()),
                        )
                    }
                    _ => {
                        self.end_session(si, "TEARDOWN", true);
                        reply(StatusCode::Ok)
                    }
                }
            }
            Method::GetParameter | Method::SetParameter => {
                if target == Target::Unknown {
                    return reply(StatusCode::NotFound);
                }
                // Empty bodies are keep-alives; we have no parameters.
                let status = if req.body().is_empty() {
                    StatusCode::Ok
                } else {
                    StatusCode::ParameterNotUnderstood
                };
                let mut b = response(status, Some(cseq));
                if let Some(si) = session {
                    b = with_session(b, &self.sessions[si]);
                }
                Outcome::respond(b.build(Vec::new()))
            }
            Method::Announce | Method::Record | Method::Redirect => {
                let r = response(StatusCode::MethodNotAllowed, Some(cseq))
                    .header(headers::ALLOW, PUBLIC)
                    .build(Vec::new());
                Outcome::respond(r)
            }
            _ => reply(StatusCode::NotImplemented),
        }
    }

    /// The auth gate: who sent the request (None: no users are set), or
    /// the status that refuses it. A keep-alive or TEARDOWN of a session its
    /// sender owns goes through on an expired nonce: clients send those
    /// without reading the answer, and a refused keep-alive would end the
    /// stream when the session times out.
    fn authorize(
        &mut self,
        ci: ConnId,
        req: &Request<Vec<u8>>,
        target: Target,
        stream: StreamId,
        named_session: Option<SessionId>,
    ) -> Result<Option<String>, StatusCode> {
        let peer = self.conns[ci].peer;
        if !self.open_to(peer) {
            self.refused(peer, "request refused: 403", Refusal::NoUserSet);
            return Err(StatusCode::Forbidden);
        }
        let Some(auth) = &self.auth else {
            self.admit(ci);
            return Ok(None);
        };
        let header = req.header(&headers::AUTHORIZATION).map(|v| v.as_str());
        let method: &str = req.method().into();
        let now = Mono::now().0 / 1_000_000_000;
        // Digest may name the presentation a request belongs to.
        let presentation =
            matches!(target, Target::Aggregate | Target::Track).then_some(self.stream_path(stream));
        let verdict = auth.check(method, req.request_uri(), presentation, header, now);
        let conn = &mut self.conns[ci];
        match verdict {
            Verdict::User(u) => {
                conn.stale_nonce = false;
                let u = u.to_string();
                self.tunnel_user(ci, &u)?;
                self.admit(ci);
                Ok(Some(u))
            }
            Verdict::Expired(u) => {
                let u = u.to_string();
                if named_session.is_some_and(|si| self.owns(ci, Some(&u), si)) {
                    self.tunnel_user(ci, &u)?;
                    Ok(Some(u))
                } else {
                    self.conns[ci].stale_nonce = true;
                    Err(StatusCode::Unauthorized)
                }
            }
            Verdict::Challenge => {
                conn.stale_nonce = false;
                Err(StatusCode::Unauthorized)
            }
            Verdict::Malformed(why) => {
                log::info!("{}: {why}", conn.peer);
                Err(StatusCode::BadRequest)
            }
        }
    }

    /// A tunnel carries one user's requests: the user its GET or POST, or
    /// else its first request, came with. Another user's get 403.
    fn tunnel_user(&mut self, ci: ConnId, user: &str) -> Result<(), StatusCode> {
        let conn = &mut self.conns[ci];
        let peer = conn.peer;
        let Some(t) = conn.rtsp_mut().and_then(|r| r.tunnel.as_mut()) else {
            return Ok(());
        };
        match &t.user {
            Some(u) if u != user => {
                log::info!("{peer}: a request as {user} through a tunnel of {u}: refused");
                Err(StatusCode::Forbidden)
            }
            Some(_) => Ok(()),
            None => {
                t.user = Some(user.to_owned());
                Ok(())
            }
        }
    }

    /// Whether a request on connection `ci` from `user` may control session
    /// `si`: the connection that set it up may (an HTTP tunnel's requests
    /// arrive on its GET side's connection), and so may the same user on
    /// another connection. Knowing a session's id is not enough.
    fn owns(&self, ci: ConnId, user: Option<&str>, si: SessionId) -> bool {
        let s = &self.sessions[si];
        s.conn == ci || (user.is_some() && s.user.as_deref() == user)
    }

    /// SETUP of the stream's one track (`answer` turned away the rest).
    fn setup(
        &mut self,
        ci: ConnId,
        req: &Request<Vec<u8>>,
        cseq: &str,
        stream: StreamId,
        session: Option<SessionId>,
        user: Option<String>,
    ) -> Outcome {
        let reply = |status| Outcome::status(status, cseq);
        if let Some(si) = session {
            if self.sessions[si].stream != stream {
                // One stream per session.
                return reply(StatusCode::AggregateOperationNotAllowed);
            }
            if self.sessions[si].playing {
                // Changing transport while playing is not supported (RFC 2326 10.4).
                return reply(StatusCode::MethodNotValidInThisState);
            }
            if self.sessions[si].conn != ci {
                return reply(StatusCode::MethodNotValidInThisState);
            }
        } else if self.clients() >= self.cfg.max_clients {
            let peer = self.conns[ci].peer;
            self.refused(peer, "SETUP refused: 453", Refusal::MaxClients);
            return reply(StatusCode::NotEnoughBandwidth);
        }
        let transports = match req.typed_header::<Transports>() {
            Ok(Some(t)) => t,
            Ok(None) => return reply(StatusCode::BadRequest),
            Err(_) => return reply(StatusCode::UnsupportedTransport),
        };
        let Some((transport, spec)) = self.choose_transport(ci, &transports, session, stream)
        else {
            return reply(StatusCode::UnsupportedTransport);
        };
        if let Some(other) = self.udp_ports_taken(&transport, session) {
            // Its packets and RTCP would mix with another client's: RTCP
            // from those ports must name one session only.
            log::info!(
                "{}: SETUP with the UDP ports of session {}: 461",
                self.conns[ci].peer,
                self.sessions[other].id
            );
            return reply(StatusCode::UnsupportedTransport);
        }

        let now = Mono::now();
        let si = match session {
            Some(si) => {
                // Re-SETUP of a session that is not playing: new transport.
                let old = std::mem::replace(&mut self.sessions[si].transport, transport);
                if let Transport::Udp { rtcp, .. } = old {
                    self.session_by_rtcp.remove(&rtcp);
                }
                si
            }
            None => {
                let id = format!("{:016X}", random_u64());
                let peer = self.conns[ci].peer;
                let si = self.sessions.insert(Session {
                    id: id.clone(),
                    stream,
                    conn: ci,
                    user,
                    peer,
                    transport,
                    playing: false,
                    queue: std::collections::VecDeque::with_capacity(self.cfg.client_queue),
                    udp_sent: 0,
                    in_udp_backlog: false,
                    last_seen: now,
                    next_report: now,
                    packets: 0,
                    octets: 0,
                    frames_sent: 0,
                    frames_dropped: 0,
                    warned_send_error: false,
                });
                self.session_ids.insert(id.clone(), si);
                if let Some(r) = self.conns[ci].rtsp_mut() {
                    r.sessions.push(si);
                }
                log::info!("session {id} from {peer}: {spec}");
                si
            }
        };
        let s = &self.sessions[si];
        if let Transport::Udp { rtcp, .. } = s.transport {
            self.session_by_rtcp.insert(rtcp, si);
        }
        let r = response(StatusCode::Ok, Some(cseq))
            .header(headers::TRANSPORT, spec)
            .header(
                headers::SESSION,
                session_header(s, self.cfg.session_timeout),
            )
            .build(Vec::new());
        Outcome::respond(r)
    }

    /// The first transport offered that we support, and its Transport
    /// header for the reply. UDP goes only to the client's own address.
    fn choose_transport(
        &self,
        ci: ConnId,
        offered: &Transports,
        session: Option<SessionId>,
        stream: StreamId,
    ) -> Option<(Transport, String)> {
        let conn = &self.conns[ci];
        let own: &[SessionId] = conn.rtsp().map_or(&[], |r| &r.sessions);
        let taken = |channel: u8| {
            own.iter().filter(|&&si| Some(si) != session).any(|&si| {
                match self.sessions[si].transport {
                    Transport::Interleaved { rtp, rtcp } => channel == rtp || channel == rtcp,
                    Transport::Udp { .. } => false,
                }
            })
        };
        let choice = transport::choose(offered, taken)?;
        let spec = transport::Reply {
            choice,
            server_port: self.rtp_port,
            ssrc: self.stream_of(stream).packetizer.ssrc(),
        }
        .to_string();
        let ip = conn.peer.ip();
        let t = match choice {
            Choice::Interleaved { rtp, rtcp } => Transport::Interleaved { rtp, rtcp },
            Choice::Udp { rtp, rtcp } => Transport::Udp {
                rtp: SocketAddr::new(ip, rtp).into(),
                rtcp: SocketAddr::new(ip, rtcp),
            },
        };
        Some((t, spec))
    }

    /// Another session that sends to the same UDP address and port as
    /// `transport` would, or gets RTCP from it.
    fn udp_ports_taken(
        &self,
        transport: &Transport,
        session: Option<SessionId>,
    ) -> Option<SessionId> {
        let Transport::Udp { rtp, rtcp } = transport else {
            return None;
        };
        let rtp = rtp.clone();
        self.sessions
            .iter()
            .filter(|&(si, _)| Some(si) != session)
            .find(|(_, s)| match &s.transport {
                Transport::Udp {
                    rtp: other_rtp,
                    rtcp: other_rtcp,
                } => {
                    let other_rtp = other_rtp.clone();
                    other_rtcp == rtcp
                        || other_rtp == rtp
                        || other_rtp == rustix::net::SocketAddrAny::from(*rtcp)
                        || rtp == rustix::net::SocketAddrAny::from(*other_rtcp)
                }
                Transport::Interleaved { .. } => false,
            })
            .map(|(si, _)| si)
    }

    fn play(&mut self, req: &Request<Vec<u8>>, cseq: &str, si: SessionId) -> Outcome {
        let uri = req.request_uri().expect("checked by the caller");
        let now = Mono::now();
        // The client gets the newest frame at once if it is fresh (see
        // start_playing), else the next one: RTP-Info names its first packet.
        let stream = self.stream_of(self.sessions[si].stream);
        let (seq, rtptime) = match &stream.last {
            Some(f) if now.saturating_sub(f.captured) < std::time::Duration::from_secs(1) => {
                (f.first_sequence, f.timestamp)
            }
            _ => (
                stream.packetizer.next_sequence(),
                stream.clock.timestamp(now),
            ),
        };
        let s = &self.sessions[si];
        let r = response(StatusCode::Ok, Some(cseq))
            .header(
                headers::SESSION,
                session_header(s, self.cfg.session_timeout),
            )
            .header(headers::RANGE, "npt=now-")
            .header(
                headers::RTP_INFO,
                format!(
                    "url={}{TRACK};seq={seq};rtptime={rtptime}",
                    base_url(uri, self.stream_path(s.stream))
                ),
            )
            .build(Vec::new());
        Outcome {
            response: r,
            start: (!s.playing).then_some(si),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(target(None, "stream"), Target::Server);
        for (url, path, want) in [
            ("rtsp://h:8554/stream", "stream", Target::Aggregate),
            ("rtsp://h/stream/", "stream", Target::Aggregate),
            ("rtsp://h/stream?x=1", "stream", Target::Aggregate),
            ("rtsp://h/stream/trackID=0", "stream", Target::Track),
            ("rtsp://h/streams", "stream", Target::Unknown),
            ("rtsp://h/other", "stream", Target::Unknown),
            ("rtsp://h/cam/1/trackID=0", "cam/1", Target::Track),
        ] {
            assert_eq!(target(Some(&Url::parse(url).unwrap()), path), want, "{url}");
        }
    }

    #[test]
    fn base_url_drops_credentials_and_query() {
        let u = Url::parse("rtsp://user:pw@192.0.2.1:8554/stream?token=1").unwrap();
        assert_eq!(base_url(&u, "stream"), "rtsp://192.0.2.1:8554/stream/");
    }
}
