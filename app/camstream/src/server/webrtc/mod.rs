//! WebRTC egress, asked for with WHEP (the WebRTC-HTTP egress protocol): a
//! browser or player POSTs an SDP offer to /whep/h264 on the HTTP port
//! (through the same gate as every page), gets the answer and a resource
//! to DELETE, and receives the H.264 stream the RTSP clients get, from the
//! same encoder, over one UDP socket shared by every session; and the
//! sound where the offer asks for it and the camera's is in a codec
//! browsers take (Opus, G.711 µ-law: `[audio] codec`).
//!
//! The stack is str0m (sans-IO: it never touches a socket or a clock, so
//! it runs inside this event loop), with DTLS over OpenSSL. The camera is
//! ICE-lite: it offers host candidates (its own addresses, and the ones set
//! in `webrtc_candidates` for a NAT or port forwarding), answers the
//! browser's checks and contacts no STUN or TURN server. Datagrams go to a
//! session's peer only once its ICE check authenticated (the offer's
//! credentials) and, for media, once DTLS finished.

mod answerer;
mod offer;
pub mod session;
mod socket;
mod tcp;

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use str0m::change::SdpOffer;
use str0m::config::DtlsCert;
use str0m::net::{Protocol, Receive, TcpType, Transmit};
use str0m::format::Codec;
use str0m::media::{Frequency, Mid, Pt};
use str0m::{Candidate, Input, Rtc};

use super::conn::ConnId;
use crate::clock::Mono;
use crate::config::Config;
use crate::fanout::{Fanout, Label, Subscription};
use crate::random::random_fill;
use crate::table::TOKEN_SLOTS;
pub use offer::{Network, keep_local_candidates};
pub use session::of_token;
pub use tcp::of_token as tcp_of_token;
use session::{AudioTrack, HANDSHAKE, Owner, Session, SessionId, Sessions, Shared, Unwrap};

/// Sessions of one address still in ICE or DTLS: a client cannot hold
/// many handshakes open.
const HANDSHAKES_PER_ADDRESS: usize = 4;
/// A browser checks consent every few seconds (RFC 7675: 5 on average);
/// past this, a TCP connection is silent for good.
const CONSENT: Duration = Duration::from_secs(30);
/// Datagrams read per turn of the loop, so that a flood cannot keep it
/// from everything else; the rest are read in the next turn.
const READS_PER_TURN: usize = 64;
/// Packets' times kept between two reads of them (a turn's UDP and TCP
/// reads, with room).
const INPUT_TIMES_KEPT: usize = 4 * READS_PER_TURN;
/// Packets each session keeps to answer NACKs, which also hold a frame's
/// packets until they are sent: a second of the H.264 stream at its bit
/// rate (str0m's packets are up to 1150 bytes with headers; a key frame is
/// well under a second's bits), within these bounds. Memory grows with it,
/// not with the rate: at 2 Mbit/s, 227 packets, some 250 KiB a session.
const SEND_BUFFER: (usize, usize) = (128, 1024);
/// Largest datagram read: ICE, DTLS and RTCP from the browser are small.
const MAX_DATAGRAM: usize = 2048;

/// Ended sessions whose DELETE is still answered 200.
const ENDED_KEPT: usize = 64;

/// What a WHEP POST asks.
pub struct OfferRequest {
    /// The stream's path (the H.264 stream's, "h264").
    pub path: String,
    pub sdp: Vec<u8>,
    pub peer: SocketAddr,
    /// The address the client reached the camera's page on.
    pub local: SocketAddr,
    pub user: Option<String>,
}

/// What the POST is answered.
pub enum Answer {
    /// 201: the answer, and the resource to DELETE.
    Created { sdp: String, resource: String },
    /// A refusal: status and why.
    Refused(u16, String),
}

/// An offer on the answerer's thread: what its session will be.
struct Pending {
    stream: crate::fanout::StreamId,
    path: String,
    peer: SocketAddr,
    user: Option<String>,
}

/// Since the start, for /metrics.
#[derive(Default, Clone, Copy)]
pub struct Counts {
    pub sessions_started: u64,
    pub sessions_connected: u64,
    pub key_frame_requests: u64,
    /// Datagrams no session took (not a session's ICE credentials, or
    /// from an address that did not complete ICE).
    pub datagrams_unmatched: u64,
}

pub struct WebRtc {
    socket: socket::Socket,
    /// ICE-TCP's passive candidates: the same port number as UDP's.
    listener: mio::net::TcpListener,
    tcp: tcp::TcpConns,
    /// Most TCP connections at once.
    max_tcp: usize,
    extra: Vec<SocketAddr>,
    cert: DtlsCert,
    /// Answers offers off the loop.
    answerer: answerer::Answerer,
    /// Offers being answered, by the request waiting.
    pending: std::collections::HashMap<ConnId, Pending>,
    /// Packets each session keeps (SEND_BUFFER).
    send_buffer: usize,
    sessions: Sessions,
    /// Sessions that ended lately (the browser closed its side first, or
    /// consent expired): a DELETE of one is answered as done.
    ended: std::collections::VecDeque<Owner>,
    label: Label,
    shared: Shared,
    /// The socket may hold datagrams not read yet (READS_PER_TURN).
    unread: bool,
    /// TCP connections that may hold input not read yet.
    tcp_unread: Vec<tcp::TcpId>,
    /// Each packet's time on the loop, until the server takes them.
    input_times: Vec<Duration>,
    gso: socket::Gso,
    counts: Counts,
    buf: Vec<u8>,
}

/// The UDP socket and the TCP listener on one port. With port 0 the
/// system picks the UDP port, whose TCP twin may be another program's:
/// then another pick, a few times.
fn bind_pair(ip: IpAddr, port: u16) -> Result<(socket::Socket, mio::net::TcpListener)> {
    let mut tries = 0;
    loop {
        let socket = socket::Socket::bind(SocketAddr::new(ip, port))
            .with_context(|| format!("WebRTC: UDP port {port}"))?;
        let at = socket.addr.port();
        match mio::net::TcpListener::bind(SocketAddr::new(ip, at)) {
            Ok(listener) => return Ok((socket, listener)),
            Err(e) if port == 0 && e.kind() == io::ErrorKind::AddrInUse && tries < 16 => {
                tries += 1;
            }
            Err(e) => return Err(e).with_context(|| format!("WebRTC: TCP port {at}")),
        }
    }
}

impl WebRtc {
    /// The shared UDP socket and the DTLS certificate every session
    /// presents (made once: a key pair per session would cost each offer
    /// milliseconds of the loop). None when WebRTC is off.
    pub fn bind(
        cfg: &Config,
        fanout: &mut Fanout,
        wake: std::sync::Arc<mio::Waker>,
    ) -> Result<Option<WebRtc>> {
        if !cfg.webrtc || cfg.http_port == 0 {
            return Ok(None);
        }
        let cert = certificate()?;
        let (socket, listener) = bind_pair(cfg.listen, cfg.webrtc_port)?;
        Ok(Some(WebRtc {
            socket,
            listener,
            tcp: tcp::TcpConns::with_capacity(TOKEN_SLOTS / 8),
            max_tcp: cfg.max_clients * 2 + 8,
            extra: cfg.webrtc_candidates.clone(),
            cert,
            answerer: answerer::Answerer::start(wake)?,
            pending: std::collections::HashMap::new(),
            send_buffer: send_buffer(cfg.h264.as_ref().map_or(0, |h| h.bitrate)),
            sessions: Sessions::new(),
            ended: std::collections::VecDeque::with_capacity(ENDED_KEPT),
            label: fanout.label("webrtc"),
            shared: Shared::default(),
            unread: false,
            tcp_unread: Vec::new(),
            input_times: Vec::with_capacity(INPUT_TIMES_KEPT),
            gso: socket::Gso::default(),
            counts: Counts::default(),
            buf: vec![0; MAX_DATAGRAM],
        }))
    }

    pub fn register(
        &mut self,
        r: &mio::Registry,
        udp: mio::Token,
        tcp: mio::Token,
    ) -> io::Result<()> {
        r.register(&mut self.socket.udp, udp, mio::Interest::READABLE)?;
        r.register(&mut self.listener, tcp, mio::Interest::READABLE)
    }

    pub fn port(&self) -> u16 {
        self.socket.addr.port()
    }

    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    pub fn counts(&self) -> Counts {
        let live: u64 = self.sessions.iter().map(|(_, s)| s.key_requests).sum();
        Counts {
            key_frame_requests: self.counts.key_frame_requests + live,
            ..self.counts
        }
    }

    /// A WHEP offer from the request `ci`: refused at once (Some), or
    /// handed to the answerer's thread (None: the request waits for
    /// [`WebRtc::answered`]).
    pub fn offer(
        &mut self,
        ci: ConnId,
        o: OfferRequest,
        fanout: &mut Fanout,
        cfg: &Config,
    ) -> Option<Answer> {
        let refuse = |status, why: &str| Some(Answer::Refused(status, why.to_string()));
        let Some(stream) = fanout.find(&o.path).filter(|&s| fanout.stream(s).codec() == "h264")
        else {
            return refuse(404, "no H.264 stream by that name: try /whep/h264");
        };
        if fanout.clients() + self.pending.len() >= cfg.max_clients {
            return refuse(503, "max_clients streaming clients reached");
        }
        let handshaking = self
            .sessions
            .iter()
            .filter(|(_, s)| !s.connected && s.owner.peer == o.peer.ip())
            .count()
            + self.pending.values().filter(|p| p.peer.ip() == o.peer.ip()).count();
        if handshaking >= HANDSHAKES_PER_ADDRESS {
            return refuse(503, "too many WebRTC sessions of this address still connecting");
        }
        if self.sessions.len() + self.pending.len() >= TOKEN_SLOTS / 16 {
            return refuse(503, "no room for another WebRTC session");
        }
        let Ok(sdp) = String::from_utf8(o.sdp.clone()) else {
            return refuse(400, "the offer is not UTF-8 text");
        };
        // Behind a NAT (extra candidates set) the browser's candidates are
        // anywhere; else only those on the camera's networks are taken.
        let interfaces = super::ifaces::ipv4();
        let networks: Vec<Network> = if self.extra.is_empty() {
            interfaces
                .iter()
                .map(|i| Network {
                    addr: IpAddr::V4(i.addr),
                    prefix: i.prefix,
                })
                .collect()
        } else {
            Vec::new()
        };
        let (sdp, dropped) = offer::keep_local_candidates(&sdp, &networks);
        if dropped > 0 {
            log::debug!("{}: WHEP: {dropped} candidates outside the camera's networks ignored", o.peer);
        }
        let ips: Vec<IpAddr> = interfaces.iter().map(|i| IpAddr::V4(i.addr)).collect();
        let candidates =
            offer::local_candidates(o.local.ip(), self.socket.addr.ip(), &ips, self.port(), &self.extra);
        let job = answerer::Job {
            ci,
            sdp,
            cert: self.cert.clone(),
            send_buffer: self.send_buffer,
            candidates,
            sound: sound(fanout).map(|(_, codec, _)| codec),
        };
        if self.answerer.ask(job).is_err() {
            return refuse(503, "other WebRTC offers are being answered: try again");
        }
        self.pending.insert(
            ci,
            Pending {
                stream,
                path: o.path,
                peer: o.peer,
                user: o.user,
            },
        );
        None
    }

    /// The offers the answerer's thread answered: each request's answer,
    /// its session made; those whose request is gone (`asked` says no)
    /// are dropped.
    pub fn answered(
        &mut self,
        fanout: &mut Fanout,
        asked: impl Fn(ConnId) -> bool,
    ) -> Vec<(ConnId, Answer)> {
        let mut out = Vec::new();
        while let Some((ci, made)) = self.answerer.done() {
            let Some(p) = self.pending.remove(&ci) else {
                continue;
            };
            if !asked(ci) {
                continue;
            }
            let answer = match made {
                Ok(pc) => self.start(pc, p, fanout),
                Err((status, why)) => Answer::Refused(status, why),
            };
            out.push((ci, answer));
        }
        out
    }

    /// A session for an answered offer: subscribed to its stream (a
    /// client from now on) and to the sound where its answer took it,
    /// active once connected.
    fn start(&mut self, pc: PeerConnection, p: Pending, fanout: &mut Fanout) -> Answer {
        let Some(si) = self.sessions.next_id() else {
            return Answer::Refused(503, "no room for another WebRTC session".into());
        };
        let subscription = fanout.subscribe(Subscription {
            stream: p.stream,
            wake: session::token(si),
            label: self.label,
            every: None,
            queue: None,
            client: true,
            active: false,
        });
        // The sound as the offer was answered: the camera's codec then.
        let audio = pc.audio.zip(sound(fanout)).map(|((mid, pt), (stream, _, rate))| AudioTrack {
            mid,
            pt,
            stream,
            subscription: fanout.subscribe(Subscription {
                stream,
                wake: session::token(si),
                label: self.label,
                every: None,
                queue: Some(crate::media::audio::QUEUE),
                // One client: the session, counted once.
                client: false,
                active: false,
            }),
            rate,
            time: Unwrap::default(),
        });
        let mut resource = [0u8; 16];
        random_fill(&mut resource);
        let with_sound = if audio.is_some() { " with sound" } else { "" };
        let s = Session {
            rtc: pc.rtc,
            owner: Owner {
                resource: resource.iter().map(|b| format!("{b:02x}")).collect(),
                peer: p.peer.ip(),
                user: p.user,
            },
            stream: p.stream,
            subscription,
            video: pc.video,
            audio,
            started: Mono::now(),
            connected: false,
            due: Instant::now(),
            key_requests: 0,
        };
        let resource = s.owner.resource.clone();
        log::info!(
            "{}: WebRTC session {} for /{}{with_sound} (port {})",
            p.peer,
            s.owner.short(),
            p.path,
            self.port()
        );
        self.sessions.insert(s);
        self.counts.sessions_started += 1;
        Answer::Created {
            sdp: pc.answer,
            resource,
        }
    }

    /// A WHEP DELETE of `resource`: only its own client (the same user,
    /// or the same address where no user signs in) ends it.
    pub fn delete(
        &mut self,
        resource: &str,
        user: Option<&str>,
        peer: IpAddr,
        fanout: &mut Fanout,
    ) -> bool {
        let found = self
            .sessions
            .iter()
            .find(|(_, s)| s.owner.is(resource, user, peer))
            .map(|(si, _)| si);
        if let Some(si) = found {
            self.end(si, "ended by its client (WHEP DELETE)", fanout);
            return true;
        }
        self.ended.iter().any(|o| o.is(resource, user, peer))
    }

    /// The socket is readable: each datagram to the session it is for.
    pub fn readable(&mut self, fanout: &mut Fanout) {
        self.unread = false;
        let mut buf = std::mem::take(&mut self.buf);
        let mut read = 0;
        while read < READS_PER_TURN {
            let (n, source, destination) = match self.socket.recv(&mut buf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::debug!("WebRTC: recv: {e}");
                    break;
                }
            };
            read += 1;
            let packet = buf.get(..n).unwrap_or_default();
            if !self.received(Protocol::Udp, source, destination, packet, fanout) {
                self.counts.datagrams_unmatched += 1;
            }
        }
        self.buf = buf;
        // More may wait: edge-triggered readiness will not say so again.
        self.unread = read == READS_PER_TURN;
    }

    /// A packet to the session that takes it (its ICE credentials, then its
    /// peer's address); false if none does.
    fn received(
        &mut self,
        proto: Protocol,
        source: SocketAddr,
        destination: SocketAddr,
        packet: &[u8],
        fanout: &mut Fanout,
    ) -> bool {
        let start = Instant::now();
        let Ok(contents) = packet.try_into() else {
            return false;
        };
        let input = Input::Receive(
            Instant::now(),
            Receive {
                proto,
                source,
                destination,
                contents,
            },
        );
        let Some((si, _)) = self.sessions.iter().find(|(_, s)| s.rtc.accepts(&input)) else {
            return false;
        };
        let Some(s) = self.sessions.get_mut(si) else {
            return false;
        };
        let was_connected = s.connected;
        let (socket, tcp) = (&self.socket, &mut self.tcp);
        let result = match s.rtc.handle_input(input) {
            Ok(()) => s.drain(&mut |t: &Transmit| transmit(socket, tcp, t), fanout),
            Err(e) => Err(format!("WebRTC: {e}")),
        };
        if s.connected && !was_connected {
            self.counts.sessions_connected += 1;
            log::info!(
                "WebRTC session {} connected ({source} over {proto:?})",
                s.owner.short()
            );
        }
        if let Err(why) = result {
            self.end(si, &why, fanout);
        }
        if self.input_times.len() < INPUT_TIMES_KEPT {
            self.input_times.push(start.elapsed());
        }
        true
    }

    /// How long each packet a session took held the event loop, since the
    /// last call (/metrics' camstream_input_stall_seconds, kind webrtc).
    pub fn take_input_times(&mut self) -> std::vec::Drain<'_, Duration> {
        self.input_times.drain(..)
    }

    /// A browser connects to the TCP candidate: taken within the limits
    /// (in all, and per address), else closed at once.
    pub fn tcp_acceptable(&mut self, r: &mio::Registry) {
        loop {
            let (mut stream, peer) = match self.listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::debug!("WebRTC: accept: {e}");
                    return;
                }
            };
            let from_peer = self.tcp.iter().filter(|(_, c)| c.peer.ip() == peer.ip()).count();
            if self.tcp.len() >= self.max_tcp || from_peer >= tcp::PER_ADDRESS {
                log::debug!("WebRTC: TCP from {peer} refused: too many connections");
                continue;
            }
            let Ok(local) = stream.local_addr() else {
                continue;
            };
            let Some(id) = self.tcp.next_id() else {
                continue;
            };
            let interest = mio::Interest::READABLE | mio::Interest::WRITABLE;
            if r.register(&mut stream, tcp::token(id), interest).is_ok() {
                self.tcp.insert(tcp::TcpConn::new(stream, peer, local));
            }
        }
    }

    /// A TCP connection's readiness: what it sent to its session, what
    /// waits to be written out.
    pub fn tcp_ready(&mut self, id: tcp::TcpId, fanout: &mut Fanout) {
        let Some(c) = self.tcp.get_mut(id) else {
            return;
        };
        let (peer, local) = (c.peer, c.local);
        let read = c.read();
        let flushed = c.flush();
        let packets = match (read, flushed) {
            (Ok((p, more)), Ok(())) => {
                if more && !self.tcp_unread.contains(&id) {
                    self.tcp_unread.push(id);
                }
                p
            }
            (Err(why), _) => return self.tcp_close(id, &why),
            (_, Err(e)) => return self.tcp_close(id, &format!("write: {e}")),
        };
        for p in packets {
            if self.received(Protocol::Tcp, peer, local, &p, fanout) {
                if let Some(c) = self.tcp.get_mut(id) {
                    c.matched = true;
                }
            } else {
                self.counts.datagrams_unmatched += 1;
            }
        }
    }

    fn tcp_close(&mut self, id: tcp::TcpId, why: &str) {
        if let Some(c) = self.tcp.remove(id) {
            log::debug!("WebRTC: TCP from {} closed: {why}", c.peer);
        }
    }

    /// Whether datagrams or TCP input were left for the next turn.
    pub fn unread(&self) -> bool {
        self.unread || !self.tcp_unread.is_empty()
    }

    /// Reads what was left for this turn.
    pub fn read_left(&mut self, fanout: &mut Fanout) {
        if self.unread {
            self.readable(fanout);
        }
        for id in std::mem::take(&mut self.tcp_unread) {
            self.tcp_ready(id, fanout);
        }
    }

    /// The fan-out queued frames for session `si`.
    pub fn woken(&mut self, si: SessionId, fanout: &mut Fanout) {
        let Some(s) = self.sessions.get_mut(si) else {
            return;
        };
        // A frame's packets to one address: sent together (socket::Gso).
        let (socket, gso, tcp) = (&self.socket, &mut self.gso, &mut self.tcp);
        let sent = s.send_frames(
            &mut self.shared,
            &mut |t: &Transmit| match t.proto {
                Protocol::Udp => socket.send(gso, t.destination, &t.contents),
                _ => transmit(socket, tcp, t),
            },
            fanout,
        );
        self.socket.flush(&mut self.gso);
        if let Err(why) = sent {
            self.end(si, &why, fanout);
        }
    }

    /// How long until a session wants the time (its retransmissions,
    /// RTCP reports, consent).
    pub fn next_due(&self) -> Option<Duration> {
        let now = Instant::now();
        self.sessions
            .iter()
            .map(|(_, s)| s.due.saturating_duration_since(now))
            .min()
    }

    /// Gives the time to the sessions that wanted it.
    pub fn timeouts(&mut self, fanout: &mut Fanout) {
        let now = Instant::now();
        let due: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.due <= now)
            .map(|(si, _)| si)
            .collect();
        for si in due {
            let Some(s) = self.sessions.get_mut(si) else {
                continue;
            };
            let result = match s.rtc.handle_input(Input::Timeout(now)) {
                Ok(()) => s.drain(&mut |t: &Transmit| transmit(&self.socket, &mut self.tcp, t), fanout),
                Err(e) => Err(format!("WebRTC: {e}")),
            };
            if let Err(why) = result {
                self.end(si, &why, fanout);
            }
        }
    }

    /// Sessions that did not finish ICE and DTLS in time end.
    pub fn housekeeping(&mut self, now: Mono, fanout: &mut Fanout) {
        let late: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| !s.connected && now.saturating_sub(s.started) >= HANDSHAKE)
            .map(|(si, _)| si)
            .collect();
        for si in late {
            self.end(si, "ICE and DTLS did not finish within 10 s", fanout);
        }
        // A TCP connection no session took within the handshake's time, or
        // silent past consent's (a browser checks every few seconds).
        let stale: Vec<tcp::TcpId> = self
            .tcp
            .iter()
            .filter(|(_, c)| {
                (!c.matched && now.saturating_sub(c.opened) >= HANDSHAKE)
                    || now.saturating_sub(c.last_input) >= CONSENT
            })
            .map(|(id, _)| id)
            .collect();
        for id in stale {
            self.tcp_close(id, "no session's ICE check, or silent");
        }
    }

    fn end(&mut self, si: SessionId, why: &str, fanout: &mut Fanout) {
        let Some(mut s) = self.sessions.remove(si) else {
            return;
        };
        s.rtc.disconnect();
        self.counts.key_frame_requests += s.key_requests;
        let (sent, dropped) = fanout
            .unsubscribe(s.subscription)
            .map_or((0, 0), |sub| (sub.frames_sent, sub.frames_dropped));
        if let Some(a) = &s.audio {
            fanout.unsubscribe(a.subscription);
        }
        log::info!(
            "WebRTC session {} from {} ended ({why}): {sent} frames sent, {dropped} dropped for a slow client, {} key frames asked for",
            s.owner.short(),
            s.owner.peer,
            s.key_requests
        );
        if self.ended.len() == ENDED_KEPT {
            self.ended.pop_front();
        }
        self.ended.push_back(s.owner);
    }

    /// At a stop: every session ends (the browser learns it from DTLS's
    /// close alert).
    pub fn shutdown(&mut self, fanout: &mut Fanout) {
        let all: Vec<SessionId> = self.sessions.iter().map(|(si, _)| si).collect();
        for si in all {
            if let Some(s) = self.sessions.get_mut(si) {
                s.rtc.disconnect();
                let _ = s.drain(&mut |t: &Transmit| transmit(&self.socket, &mut self.tcp, t), fanout);
            }
            self.end(si, "camstream stopped", fanout);
        }
    }

    /// Whether its sessions agree with the fan-out (the fuzz target's
    /// audit).
    pub fn audit(&self, fanout: &Fanout) -> Result<(), String> {
        for (_, s) in self.sessions.iter() {
            if fanout.subscriber(s.subscription).is_none() {
                return Err(format!("WebRTC session {} without its subscription", s.owner.resource));
            }
            if s.connected != fanout.is_active(s.subscription) {
                return Err(format!("WebRTC session {} active out of step", s.owner.resource));
            }
            if let Some(a) = &s.audio {
                if fanout.subscriber(a.subscription).is_none() || s.connected != fanout.is_active(a.subscription) {
                    return Err(format!("WebRTC session {}: its sound out of step", s.owner.resource));
                }
            }
        }
        Ok(())
    }
}

/// Packets a second of a stream at `bitrate` (bits/s) takes, within
/// SEND_BUFFER's bounds.
fn send_buffer(bitrate: u32) -> usize {
    let packets = bitrate as usize / 8 / 1100;
    packets.clamp(SEND_BUFFER.0, SEND_BUFFER.1)
}

/// The camera's sound as WebRTC carries it: the fan-out's stream of it in
/// the configured encoding where browsers take it (Opus, G.711), else in
/// Opus, else in G.711; its codec and RTP clock rate. None without sound
/// in either.
fn sound(fanout: &Fanout) -> Option<(crate::fanout::StreamId, Codec, Frequency)> {
    let playable = |s: &crate::fanout::StreamId| ["opus", "pcmu"].contains(&fanout.stream(*s).codec());
    let stream = fanout
        .audio()
        .filter(playable)
        .or_else(|| fanout.sound("opus"))
        .or_else(|| fanout.sound("pcmu"))?;
    let crate::codec::Packetizer::Audio(p) = &fanout.stream(stream).packetizer else {
        return None;
    };
    let codec = session::webrtc_codec(p.format())?;
    Some((stream, codec, Frequency::new(p.format().clock_rate())?))
}

/// A peer connection made for an offer: its answer, its video track (H.264's
/// payload type on it) and its sound's, where the offer asked for sound and
/// the camera has it.
pub struct PeerConnection {
    pub rtc: Rtc,
    pub answer: String,
    pub video: (Mid, Pt),
    pub audio: Option<(Mid, Pt)>,
}

/// A peer connection, or the status and why the offer is refused.
pub type Made = Result<PeerConnection, (u16, String)>;

/// A peer connection answering `sdp` as every session's does: ICE-lite,
/// H.264 and `sound` (the camera's audio codec, if browsers take it),
/// `cert`, `send_buffer` packets kept for NACK, a UDP and a passive TCP
/// host candidate on each of `candidates`. Or the status and why the offer
/// is refused: one without a video track that takes H.264 is. An audio
/// track the camera cannot fill is answered as str0m answers a codec it
/// lacks, not refused. (Public for the `whep_offer` fuzz target.)
pub fn peer_connection(
    sdp: &str,
    cert: &DtlsCert,
    send_buffer: usize,
    candidates: &[SocketAddr],
    sound: Option<Codec>,
    now: Instant,
) -> Made {
    let offer = SdpOffer::from_sdp_string(sdp)
        .map_err(|e| (400, format!("the offer is not SDP this camera reads: {e}")))?;
    let mut builder = Rtc::builder()
        .set_ice_lite(true)
        .set_dtls_cert(cert.clone())
        .clear_codecs()
        .enable_h264(true)
        .set_send_buffer_video(send_buffer);
    builder = match sound {
        Some(Codec::Opus) => builder.enable_opus(true, false),
        Some(Codec::PCMU) => builder.enable_pcmu(true, false),
        _ => builder,
    };
    let mut rtc = builder.build(now);
    for &a in candidates {
        if let Ok(c) = Candidate::host(a, "udp") {
            rtc.add_local_candidate(c);
        }
        if let Ok(c) = Candidate::builder().tcp().host(a).tcptype(TcpType::Passive).build() {
            rtc.add_local_candidate(c);
        }
    }
    let answer = rtc
        .sdp_api()
        .accept_offer(offer)
        .map_err(|e| (400, format!("the offer cannot be answered: {e}")))?
        .to_sdp_string();
    // The answer's tracks (str0m tells of them only once media can flow)
    // and their codecs' payload types.
    let video = offer::accepted_mid(&answer, "video")
        .map(Mid::from)
        .and_then(|mid| Some((mid, session::h264_payload_type(&mut rtc, mid)?)))
        .ok_or_else(|| {
            (
                406,
                "the offer has no video track that takes H.264 (Constrained Baseline, packetization-mode 1)"
                    .to_string(),
            )
        })?;
    let audio = sound.and_then(|codec| {
        let mid = Mid::from(offer::accepted_mid(&answer, "audio")?);
        Some((mid, session::audio_payload_type(&mut rtc, mid, codec)?))
    });
    Ok(PeerConnection {
        rtc,
        answer,
        video,
        audio,
    })
}

/// The DTLS certificate every session presents, made once.
pub fn certificate() -> Result<DtlsCert> {
    str0m::crypto::from_feature_flags().install_process_default();
    str0m::crypto::from_feature_flags()
        .dtls_provider
        .generate_certificate()
        .context("WebRTC: cannot make a DTLS certificate")
}

/// Sends one packet of a session's: on the shared UDP socket, or on the
/// TCP connection from its peer. A full socket buffer loses it, as the
/// network would (NACK and PLI recover).
fn transmit(socket: &socket::Socket, tcp: &mut tcp::TcpConns, t: &Transmit) {
    if t.proto == Protocol::Udp {
        return socket.send_one(t.destination, &t.contents);
    }
    if let Some((_, c)) = tcp.iter_mut().find(|(_, c)| c.peer == t.destination && c.local == t.source) {
        if let Err(e) = c.send(&t.contents) {
            socket::note_send_error(t.destination, &e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chromium 156's offer for a receive-only picture and sound.
    const WITH_SOUND: &str = include_str!("../../../../../tests/testdata/webrtc/chromium-156-offer-with-sound.sdp");
    const PICTURE_ONLY: &str = include_str!("../../../../../tests/testdata/webrtc/chromium-156-offer.sdp");

    fn answer(offer: &str, sound: Option<Codec>) -> PeerConnection {
        let cands: [SocketAddr; 1] = ["192.168.1.7:8555".parse().unwrap()];
        peer_connection(offer, &certificate().unwrap(), 227, &cands, sound, Instant::now())
            .unwrap_or_else(|e| panic!("{e:?}"))
    }

    /// The m= line of `kind` in an answer and the lines after it.
    fn section<'a>(answer: &'a str, kind: &str) -> &'a str {
        let at = answer.find(&format!("m={kind} ")).unwrap_or_else(|| panic!("no {kind}: {answer}"));
        let rest = &answer[at..];
        &rest[..rest[2..].find("m=").map_or(rest.len(), |e| e + 2)]
    }

    #[test]
    fn the_sound_in_the_cameras_codec_beside_the_picture() {
        let pc = answer(WITH_SOUND, Some(Codec::Opus));
        let (mid, pt) = pc.audio.expect("a sound track");
        let audio = section(&pc.answer, "audio");
        assert!(audio.contains(&format!("a=mid:{mid}")) && audio.contains("a=sendonly"), "{audio}");
        assert!(audio.contains(&format!("a=rtpmap:{pt} opus/48000/2")), "{audio}");
        assert!(!audio.contains("PCMU"), "{audio}");
        assert_ne!(mid, pc.video.0);

        let pc = answer(WITH_SOUND, Some(Codec::PCMU));
        let (_, pt) = pc.audio.expect("a sound track");
        assert_eq!(*pt, 0);
        assert!(section(&pc.answer, "audio").contains("a=rtpmap:0 PCMU/8000"), "{}", pc.answer);
    }

    #[test]
    fn no_sound_track_without_sound_and_the_picture_still_plays() {
        // The camera has no sound (or AAC's): the offer's sound track is
        // turned down, the picture answered.
        let pc = answer(WITH_SOUND, None);
        assert!(pc.audio.is_none());
        assert!(section(&pc.answer, "audio").starts_with("m=audio 0 "), "{}", pc.answer);
        assert!(pc.answer.contains(&format!("a=mid:{}", pc.video.0)));
        // The camera has sound, the offer asks for none.
        let pc = answer(PICTURE_ONLY, Some(Codec::Opus));
        assert!(pc.audio.is_none() && !pc.answer.contains("m=audio"), "{}", pc.answer);
    }

    #[test]
    fn a_second_of_packets_within_bounds() {
        assert_eq!(send_buffer(2_000_000), 227);
        assert_eq!(send_buffer(0), SEND_BUFFER.0);
        assert_eq!(send_buffer(100_000_000), SEND_BUFFER.1);
    }
}

#[cfg(test)]
mod cost {
    use super::*;

    /// What answering an offer costs (the loop is held for it):
    /// `cargo test --release -p camstream -- --ignored --nocapture offer_cost`.
    #[test]
    #[ignore]
    fn offer_cost() {
        let offer = include_str!("../../../../../tests/testdata/webrtc/chromium-156-offer.sdp");
        let cert = certificate().unwrap();
        let cands: [SocketAddr; 1] = ["192.168.1.7:8555".parse().unwrap()];
        let t = Instant::now();
        for _ in 0..100 {
            let _ = SdpOffer::from_sdp_string(offer).unwrap();
        }
        let parse = t.elapsed() / 100;
        let t = Instant::now();
        for _ in 0..100 {
            let _ = Rtc::builder().set_ice_lite(true).set_dtls_cert(cert.clone()).clear_codecs().enable_h264(true).build(Instant::now());
        }
        let build = t.elapsed() / 100;
        let t = Instant::now();
        for _ in 0..100 {
            peer_connection(offer, &cert, 227, &cands, None, Instant::now()).unwrap();
        }
        let all = t.elapsed() / 100;
        println!(
            "parse {parse:?} (str0m reads the offer), build {build:?} (a peer connection), \
             whole {all:?} (peer_connection: both and the answer)"
        );
    }
}
const _: fn() = || {
    fn send<T: Send>() {}
    send::<Rtc>();
};
