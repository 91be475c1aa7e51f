//! RTSP 1.0 (RFC 2326) methods. Each request gets one response; PLAY also
//! names the session to start once its response is on the way.

use std::net::SocketAddr;

use camstream_rtsp::auth::Verdict;
use camstream_rtsp::transport::{self, Choice};
use rtsp_types::headers::{self, Transports};
use rtsp_types::{Method, Request, Response, ResponseBuilder, StatusCode, Url, Version};

use super::super::admission::Refusal;
use super::super::conn::{self, ConnId};
use super::super::ctx::Ctx;
use crate::codec::MediaKind;
use crate::fanout::{Fanout, StreamId, Subscription};
use crate::random::random_u64;
use super::Rtsp;
use super::sdp::{self, TRACK};
use super::session::{Session, SessionId, Transport};
use crate::clock::Mono;

const SERVER: &str = concat!("camstream/", env!("CARGO_PKG_VERSION"));
const PUBLIC: &str =
    "OPTIONS, DESCRIBE, SETUP, PLAY, PAUSE, TEARDOWN, GET_PARAMETER, SET_PARAMETER";

/// A response with the headers every response carries.
pub(super) fn response(status: StatusCode, cseq: Option<&str>) -> ResponseBuilder {
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
    /// rtsp://host/PATH: a stream's presentation.
    Aggregate(StreamId),
    /// rtsp://host/PATH/trackID=N: one of its tracks (0 its picture, 1 the
    /// sound), the stream that carries it.
    Track {
        presentation: StreamId,
        stream: StreamId,
        n: u8,
    },
    Unknown,
}

impl Target {
    /// The presentation it names (what Digest's realm of paths and a
    /// session are of).
    fn stream(self) -> Option<StreamId> {
        match self {
            Target::Aggregate(s) | Target::Track { presentation: s, .. } => Some(s),
            Target::Server | Target::Unknown => None,
        }
    }
}

/// A presentation's tracks by number: its own stream, then the sound in
/// each encoding where `[audio]` makes it, the configured one first (not
/// for the sound's own presentation). A client is offered one of them
/// ([`described`]) and may set up any.
fn tracks(fanout: &Fanout, presentation: StreamId) -> Vec<StreamId> {
    let mut t = vec![presentation];
    if !fanout.sounds().contains(&presentation) {
        t.extend_from_slice(fanout.sounds());
    }
    t
}

/// The tracks DESCRIBE offers, with their numbers: the picture, and the
/// sound in the encoding the URI's `audio` asks for (`?audio=opus`; go2rtc
/// and others choose so), the configured one without, none with
/// `audio=none`. Err: why an encoding asked for is not made.
fn described(fanout: &Fanout, presentation: StreamId, uri: &Url) -> Result<Vec<(u8, StreamId)>, String> {
    let all = tracks(fanout, presentation);
    let asked = uri.query_pairs().find(|(k, _)| k == "audio").map(|(_, v)| v);
    let sound = match asked.as_deref() {
        _ if all.len() == 1 => None,
        None => Some(1),
        Some("none") => None,
        Some(name) => match all.iter().skip(1).position(|&s| fanout.stream(s).codec() == name) {
            Some(i) => Some(i + 1),
            None => {
                // Not the client's word back (decoded, it may hold
                // anything): the request line in the log has it, encoded.
                let made: Vec<_> = all.iter().skip(1).map(|&s| fanout.stream(s).codec()).collect();
                return Err(format!(
                    "the sound is not made in the encoding audio= asks for: audio={} (or audio=none)",
                    made.join(", audio=")
                ));
            }
        },
    };
    let mut out = vec![(0, presentation)];
    if let Some((n, &s)) = sound.and_then(|n| Some((n, all.get(n)?))) {
        out.push((n as u8, s));
    }
    Ok(out)
}

/// The path in a request URI and what of it: the presentation (PATH) or
/// one of its tracks (PATH/trackID=N); None for `*`.
fn path_of(uri: Option<&Url>) -> Option<(&str, Option<u8>)> {
    let p = uri?.path().trim_matches('/');
    let track = p.rsplit_once('/').and_then(|(rest, last)| {
        let n = last.strip_prefix(TRACK)?;
        let digits = !n.is_empty() && n.len() <= 2 && n.bytes().all(|b| b.is_ascii_digit());
        digits.then(|| (rest.trim_end_matches('/'), n.parse().ok()))
    });
    Some(match track {
        Some((rest, Some(n))) => (rest, Some(n)),
        _ => (p, None),
    })
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

/// A request that passed the checks, as its method's answer sees it.
struct Call<'r> {
    ci: ConnId,
    req: &'r Request<Vec<u8>>,
    cseq: &'r str,
    /// The session it names, its sender's.
    session: Option<SessionId>,
    /// Who sent it (None: no users are set).
    user: Option<String>,
}

/// `Session: ID;timeout=SECONDS` (RFC 2326 12.37).
fn session_header(s: &Session, timeout: u32) -> String {
    format!("{};timeout={timeout}", s.id)
}

impl Rtsp {
    /// Handles a request on connection `ci`: checks it, lets it through the
    /// auth gate or not, finds the session it names, answers its method.
    pub(super) fn handle_request(
        &mut self,
        ci: ConnId,
        req: &Request<Vec<u8>>,
        ctx: &mut Ctx<'_>,
    ) -> Outcome {
        let cseq = match check(req) {
            Ok(cseq) => cseq,
            Err(response) => return Outcome::respond(response),
        };
        let target = match path_of(req.request_uri()) {
            None => Target::Server,
            Some((path, track)) => match (ctx.fanout.find(path), track) {
                (Some(p), None) => Target::Aggregate(p),
                (Some(p), Some(n)) => match tracks(ctx.fanout, p).get(usize::from(n)) {
                    Some(&stream) => Target::Track {
                        presentation: p,
                        stream,
                        n,
                    },
                    None => Target::Unknown,
                },
                (None, _) => Target::Unknown,
            },
        };
        let named = req
            .header(&headers::SESSION)
            .map(|v| v.as_str().split(';').next().unwrap_or("").trim());
        let named_session = named.and_then(|id| self.session_ids.get(id).copied());
        let user = match self.authorize(ci, req, target, named_session, ctx) {
            Ok(user) => user,
            Err(status) => return Outcome::status(status, &cseq),
        };
        match self.session_for(ci, named, named_session, user.as_deref(), ctx) {
            Ok(session) => {
                let call = Call {
                    ci,
                    req,
                    cseq: &cseq,
                    session,
                    user,
                };
                self.answer(call, target, ctx)
            }
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
        ctx: &Ctx<'_>,
    ) -> Result<Option<SessionId>, StatusCode> {
        match (named, named_session) {
            (None, _) => Ok(None),
            (Some(_), Some(si)) if self.owns(ci, user, si) => {
                let now = Mono::now();
                for t in self.group(si) {
                    if let Some(s) = self.sessions.get_mut(t) {
                        s.last_seen = now;
                    }
                }
                Ok(Some(si))
            }
            (Some(id), _) => {
                if let Some(c) = ctx.conns.get(ci) {
                    log::debug!(
                        "{}: session {id:?} is not this connection's or user's",
                        c.peer
                    );
                }
                Err(StatusCode::SessionNotFound)
            }
        }
    }

    /// Answers a request that passed the checks, by its method.
    fn answer(&mut self, call: Call<'_>, target: Target, ctx: &mut Ctx<'_>) -> Outcome {
        let Call {
            ci,
            req,
            cseq,
            session,
            ..
        } = call;
        let reply = |status| Outcome::status(status, cseq);
        let timeout = ctx.cfg.session_timeout;
        let with_session = |b: ResponseBuilder, s: &Session| {
            b.header(headers::SESSION, session_header(s, timeout))
        };

        match req.method() {
            Method::Options => {
                if target == Target::Unknown {
                    return reply(StatusCode::NotFound);
                }
                let mut b = response(StatusCode::Ok, Some(cseq)).header(headers::PUBLIC, PUBLIC);
                if let Some(s) = session.and_then(|si| self.sessions.get(si)) {
                    b = with_session(b, s);
                }
                Outcome::respond(b.build(Vec::new()))
            }
            Method::Describe => {
                let Some(stream) = target.stream() else {
                    return reply(StatusCode::NotFound);
                };
                let (Some(uri), Some(conn)) = (req.request_uri(), ctx.conns.get(ci)) else {
                    return reply(StatusCode::NotFound);
                };
                let s = ctx.fanout.stream(stream);
                let offered = match described(ctx.fanout, stream, uri) {
                    Ok(t) => t,
                    Err(why) => {
                        log::info!("{}: DESCRIBE {uri}: {why}", conn.peer);
                        let r = response(StatusCode::NotFound, Some(cseq))
                            .header(headers::CONTENT_TYPE, "text/plain")
                            .build(why.into_bytes());
                        return Outcome::respond(r);
                    }
                };
                let described: Vec<_> = offered
                    .into_iter()
                    .map(|(n, t)| {
                        let t = ctx.fanout.stream(t);
                        (n, &t.info, &t.packetizer)
                    })
                    .collect();
                let body = sdp::describe(&described, conn.local.ip(), s.sdp_session_id);
                let r = response(StatusCode::Ok, Some(cseq))
                    .header(headers::CONTENT_TYPE, "application/sdp")
                    .header(headers::CONTENT_BASE, base_url(uri, &s.name))
                    .build(body);
                Outcome::respond(r)
            }
            Method::Setup => match target {
                Target::Track {
                    presentation,
                    stream,
                    n,
                } => self.setup(call, (presentation, stream, n), ctx),
                // SETUP names a track, not the presentation.
                Target::Aggregate(_) => reply(StatusCode::AggregateOperationNotAllowed),
                _ => reply(StatusCode::NotFound),
            },
            Method::Play | Method::Pause | Method::Teardown => {
                if target.stream().is_none() {
                    return reply(StatusCode::NotFound);
                }
                let Some(si) = session else {
                    return reply(StatusCode::SessionNotFound);
                };
                match req.method() {
                    Method::Play => self.play(req, cseq, si, ctx),
                    Method::Pause => {
                        // Each track: what is queued is dropped; a UDP
                        // frame being sent is finished.
                        for t in self.group(si) {
                            if let Some(s) = self.sessions.get_mut(t) {
                                s.stop(ctx.fanout, false);
                            }
                        }
                        let Some(s) = self.sessions.get(si) else {
                            return reply(StatusCode::SessionNotFound);
                        };
                        Outcome::respond(
                            with_session(response(StatusCode::Ok, Some(cseq)), s).build(Vec::new()),
                        )
                    }
                    _ => {
                        self.end_session(si, "TEARDOWN", true, ctx);
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
                if let Some(s) = session.and_then(|si| self.sessions.get(si)) {
                    b = with_session(b, s);
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
        named_session: Option<SessionId>,
        ctx: &mut Ctx<'_>,
    ) -> Result<Option<String>, StatusCode> {
        let Some(peer) = ctx.conns.get(ci).map(|c| c.peer) else {
            return Err(StatusCode::BadRequest);
        };
        if !ctx.gate.open_to(peer) {
            ctx.admission
                .refused(peer, "request refused: 403", Refusal::NoUserSet);
            return Err(StatusCode::Forbidden);
        }
        let header = req.header(&headers::AUTHORIZATION).map(|v| v.as_str());
        let method: &str = req.method().into();
        // Digest may name the presentation a request belongs to.
        let presentation = target.stream().map(|s| ctx.fanout.stream(s).name.as_str());
        let Some(verdict) = ctx
            .gate
            .check(method, req.request_uri(), presentation, header)
        else {
            self.admit(ci, None, ctx);
            return Ok(None);
        };
        let (user, stale) = match verdict {
            Verdict::User(u) => (Some(u.to_string()), false),
            Verdict::Expired(u) => {
                let u = u.to_string();
                if named_session.is_some_and(|si| self.owns(ci, Some(&u), si)) {
                    (Some(u), false)
                } else {
                    (None, true)
                }
            }
            Verdict::Challenge => (None, false),
            // Its hash is checked where a person signs in (the HTTP page),
            // not here: the digests are learnt there.
            Verdict::Verify { name, .. } => {
                log::info!(
                    "{peer}: user {name:?} has a password hash only until it signs in once on the camera's page (HTTP)"
                );
                (None, false)
            }
            Verdict::Malformed(why) => {
                log::info!("{peer}: {why}");
                return Err(StatusCode::BadRequest);
            }
        };
        if let Some(c) = ctx.conns.get_mut(ci) {
            c.stale_nonce = stale;
        }
        let Some(user) = user else {
            return Err(StatusCode::Unauthorized);
        };
        if !self.tunnel_user(ci, &user, peer) {
            return Err(StatusCode::Forbidden);
        }
        self.admit(ci, Some(&user), ctx);
        Ok(Some(user))
    }

    /// Whether a request on connection `ci` from `user` may control session
    /// `si`: the connection that set it up may (an HTTP tunnel's requests
    /// arrive on its GET side's connection), and so may the same user on
    /// another connection. Knowing a session's id is not enough.
    fn owns(&self, ci: ConnId, user: Option<&str>, si: SessionId) -> bool {
        self.sessions
            .get(si)
            .is_some_and(|s| s.conn == ci || (user.is_some() && s.user.as_deref() == user))
    }

    /// SETUP of a track: a new session, the next track of the session it
    /// names (the same presentation's), or a new transport for a track the
    /// session has and does not play.
    fn setup(&mut self, call: Call<'_>, (presentation, stream, n): (StreamId, StreamId, u8), ctx: &mut Ctx<'_>) -> Outcome {
        let Call {
            ci,
            req,
            cseq,
            session,
            user,
        } = call;
        let reply = |status| Outcome::status(status, cseq);
        let Some(peer) = ctx.conns.get(ci).map(|c| c.peer) else {
            return reply(StatusCode::BadRequest);
        };
        // The entry this SETUP changes (None: a new one), and the session
        // a new entry joins.
        let (entry, lead) = match session {
            Some(lead) => {
                let Some(l) = self.sessions.get(lead) else {
                    return reply(StatusCode::SessionNotFound);
                };
                if l.presentation != presentation {
                    // One presentation per session.
                    return reply(StatusCode::AggregateOperationNotAllowed);
                }
                // Changing transport while playing is not supported (RFC
                // 2326 10.4), nor adding a track, nor from another
                // connection.
                if l.playing() || l.conn != ci {
                    return reply(StatusCode::MethodNotValidInThisState);
                }
                let entry = self
                    .group(lead)
                    .into_iter()
                    .find(|&t| self.sessions.get(t).is_some_and(|s| s.stream == stream));
                (entry, Some(lead))
            }
            None if ctx.fanout.clients() >= ctx.cfg.max_clients => {
                ctx.admission
                    .refused(peer, "SETUP refused: 453", Refusal::MaxClients);
                return reply(StatusCode::NotEnoughBandwidth);
            }
            None => (None, None),
        };
        let transports = match req.typed_header::<Transports>() {
            Ok(Some(t)) => t,
            Ok(None) => return reply(StatusCode::BadRequest),
            Err(_) => return reply(StatusCode::UnsupportedTransport),
        };
        let Some((transport, spec)) =
            self.choose_transport(ci, peer, &transports, entry, stream, ctx)
        else {
            return reply(StatusCode::UnsupportedTransport);
        };
        let taken = self
            .sessions
            .iter()
            .find(|&(si, s)| Some(si) != entry && s.transport.shares_ports(&transport));
        if let Some((_, other)) = taken {
            // Its packets and RTCP would mix with another stream's: RTCP
            // from those ports must name one session's track only.
            log::info!(
                "{peer}: SETUP with the UDP ports of session {}: 461",
                other.id
            );
            return reply(StatusCode::UnsupportedTransport);
        }

        let now = Mono::now();
        let si = match entry {
            Some(si) => {
                // Re-SETUP of a track that is not playing: new transport.
                let Some(s) = self.sessions.get_mut(si) else {
                    return reply(StatusCode::SessionNotFound);
                };
                let old = std::mem::replace(&mut s.transport, transport);
                if let Transport::Udp { rtcp, .. } = old {
                    self.session_by_rtcp.remove(&rtcp);
                }
                si
            }
            None => {
                let id = match lead.and_then(|l| self.sessions.get(l)) {
                    Some(l) => l.id.clone(),
                    None => format!("{:016X}", random_u64()),
                };
                let audio = ctx.fanout.stream(stream).packetizer.kind() == MediaKind::Audio;
                let subscription = ctx.fanout.subscribe(Subscription {
                    stream,
                    wake: conn::token(ci),
                    label: self.label,
                    every: None,
                    queue: audio.then_some(crate::media::audio::QUEUE),
                    // A client counts once (max_clients), by its session.
                    client: lead.is_none(),
                    active: false,
                });
                let mut new = Session::new(
                    id.clone(),
                    (presentation, stream, n),
                    subscription,
                    ci,
                    user,
                    peer,
                    transport,
                    now,
                );
                new.lead = lead;
                let si = self.sessions.insert(new);
                match lead.and_then(|l| self.sessions.get_mut(l)) {
                    Some(l) => l.tracks.push(si),
                    None => {
                        self.session_ids.insert(id.clone(), si);
                    }
                }
                if let Some(r) = self.conns.get_mut(ci) {
                    r.sessions.push(si);
                }
                log::info!("session {id} from {peer}, track {n}: {spec}");
                si
            }
        };
        let Some(s) = self.sessions.get(si) else {
            return reply(StatusCode::SessionNotFound);
        };
        if let Transport::Udp { rtcp, .. } = s.transport {
            self.session_by_rtcp.insert(rtcp, si);
        }
        ctx.fanout.set_wake(s.subscription, s.wake(si));
        let r = response(StatusCode::Ok, Some(cseq))
            .header(headers::TRANSPORT, spec)
            .header(headers::SESSION, session_header(s, ctx.cfg.session_timeout))
            .build(Vec::new());
        Outcome::respond(r)
    }

    /// The first transport offered that we support, and its Transport
    /// header for the reply. UDP goes only to the client's own address.
    fn choose_transport(
        &self,
        ci: ConnId,
        peer: SocketAddr,
        offered: &Transports,
        session: Option<SessionId>,
        stream: StreamId,
        ctx: &Ctx<'_>,
    ) -> Option<(Transport, String)> {
        let own: &[SessionId] = self.conns.get(ci).map_or(&[], |r| &r.sessions);
        let taken = |channel: u8| {
            own.iter()
                .filter(|&&si| Some(si) != session)
                .filter_map(|&si| self.sessions.get(si))
                .any(|s| match s.transport {
                    Transport::Interleaved { rtp, rtcp } => channel == rtp || channel == rtcp,
                    Transport::Udp { .. } => false,
                })
        };
        let choice = transport::choose(offered, taken)?;
        let spec = transport::Reply {
            choice,
            server_port: self.udp.port,
            ssrc: ctx.fanout.stream(stream).packetizer.ssrc(),
        }
        .to_string();
        let ip = peer.ip();
        let t = match choice {
            Choice::Interleaved { rtp, rtcp } => Transport::Interleaved { rtp, rtcp },
            Choice::Udp { rtp, rtcp } => Transport::Udp {
                rtp: SocketAddr::new(ip, rtp).into(),
                rtcp: SocketAddr::new(ip, rtcp),
            },
        };
        Some((t, spec))
    }

    fn play(
        &mut self,
        req: &Request<Vec<u8>>,
        cseq: &str,
        si: SessionId,
        ctx: &mut Ctx<'_>,
    ) -> Outcome {
        let (Some(uri), Some(s)) = (req.request_uri(), self.sessions.get(si)) else {
            return Outcome::status(StatusCode::SessionNotFound, cseq);
        };
        let now = Mono::now();
        // Each track's client gets the newest frame at once if it is fresh
        // (see start_playing), else the next one: RTP-Info names each
        // track's first packet.
        let base = base_url(uri, &ctx.fanout.stream(s.presentation).name);
        let info: Vec<String> = self
            .group(si)
            .into_iter()
            .filter_map(|t| self.sessions.get(t))
            .map(|t| {
                let stream = ctx.fanout.stream(t.stream);
                let (seq, rtptime) = match stream.latest(now) {
                    Some(f) => (f.first_sequence, f.timestamp),
                    None => (stream.packetizer.next_sequence(), stream.rtp_at(now)),
                };
                format!("url={base}{TRACK}{};seq={seq};rtptime={rtptime}", t.track)
            })
            .collect();
        let r = response(StatusCode::Ok, Some(cseq))
            .header(headers::SESSION, session_header(s, ctx.cfg.session_timeout))
            .header(headers::RANGE, "npt=now-")
            .header(headers::RTP_INFO, info.join(","))
            .build(Vec::new());
        Outcome {
            response: r,
            start: (!s.playing()).then_some(si),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DESCRIBE offers the sound in the encoding the URI asks for, numbered
    /// as SETUP finds it; `audio` is the configured encoding.
    #[test]
    fn a_client_chooses_the_sounds_encoding() {
        use crate::codec::Codec;
        use crate::fanout::Stream;
        use crate::source::StreamInfo;
        use camstream_audio::packetize::Format;
        let info = StreamInfo {
            width: 640,
            height: 360,
            fps: 25,
        };
        let main = Stream::new("stream", Codec::Jpeg, info, 1400, 4, [1, 2, 3, 4]).unwrap();
        let mut f = Fanout::new(80, 3, main).unwrap();
        for (name, format) in [("audio/pcmu", Format::Pcmu), ("audio/opus", Format::Opus)] {
            let sound = Stream::new(name, Codec::Audio(format), info, 1400, 4, [5, 6, 7, 8]).unwrap();
            let id = f.add_stream(sound);
            f.add_audio(id);
        }
        let url = |q: &str| Url::parse(&format!("rtsp://cam/stream{q}")).unwrap();
        let main = StreamId::MAIN;
        let (pcmu, opus) = (f.sounds()[0], f.sounds()[1]);
        assert_eq!(tracks(&f, main), vec![main, pcmu, opus]);
        assert_eq!(described(&f, main, &url("")), Ok(vec![(0, main), (1, pcmu)]));
        assert_eq!(described(&f, main, &url("?audio=opus")), Ok(vec![(0, main), (2, opus)]));
        assert_eq!(described(&f, main, &url("?x=1&audio=pcmu")), Ok(vec![(0, main), (1, pcmu)]));
        assert_eq!(described(&f, main, &url("?audio=none")), Ok(vec![(0, main)]));
        let refused = described(&f, main, &url("?audio=aac")).unwrap_err();
        let made = "audio=pcmu, audio=opus (or audio=none)";
        assert_eq!(refused, format!("the sound is not made in the encoding audio= asks for: {made}"));
        let refused = described(&f, main, &url("?audio=%0Awarn:%20x")).unwrap_err();
        assert!(!refused.contains('\n') && refused.ends_with(made), "{refused}");
        // The sound alone has no second track, whatever is asked.
        assert_eq!(described(&f, opus, &url("?audio=pcmu")), Ok(vec![(0, opus)]));
        assert_eq!(tracks(&f, opus), vec![opus]);
        assert_eq!((f.find("audio"), f.find("audio/opus")), (Some(pcmu), Some(opus)));
    }

    #[test]
    fn paths() {
        assert_eq!(path_of(None), None);
        for (url, want) in [
            ("rtsp://h:8554/stream", ("stream", None)),
            ("rtsp://h/stream/", ("stream", None)),
            ("rtsp://h/stream?x=1", ("stream", None)),
            ("rtsp://h/stream/trackID=0", ("stream", Some(0))),
            ("rtsp://h/stream/trackID=1/", ("stream", Some(1))),
            ("rtsp://h/stream/trackID=", ("stream/trackID=", None)),
            ("rtsp://h/stream/trackID=+1", ("stream/trackID=+1", None)),
            ("rtsp://h/stream/trackID=999", ("stream/trackID=999", None)),
            ("rtsp://h/streams", ("streams", None)),
            ("rtsp://h/cam/1/trackID=0", ("cam/1", Some(0))),
            ("rtsp://h/trackID=0", ("trackID=0", None)),
        ] {
            assert_eq!(
                path_of(Some(&Url::parse(url).unwrap())),
                Some(want),
                "{url}"
            );
        }
    }

    #[test]
    fn base_url_drops_credentials_and_query() {
        let u = Url::parse("rtsp://user:pw@192.0.2.1:8554/stream?token=1").unwrap();
        assert_eq!(base_url(&u, "stream"), "rtsp://192.0.2.1:8554/stream/");
    }
}
