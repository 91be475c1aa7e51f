//! One RTSP session: the request sequence (answering a 401 with Digest when
//! the URL carries `user:password@`), then the RTP packets it receives.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use camstream_rtp::rtp;
use camstream_rtsp::auth::{self, User};
use camstream_rtsp::sdp::Codec;
use mio::event::Event;
use mio::net::{TcpStream, UdpSocket};
use mio::{Interest, Registry, Token};
use rtsp_types::{Message, ParseError, StatusCode};

use crate::Transport;
use crate::stats::{Tally, Verdict};

/// Keep-alive period (servers end sessions after 60 s without requests).
const KEEPALIVE: Duration = Duration::from_secs(20);
const RTP_JPEG: u8 = 26;
const UDP_RECV_BUFFER: usize = 4 << 20;
/// Room for one whole interleaved record ('$', channel, length, 64 KiB).
const RECORD_MAX: usize = 4 + 65535;

pub struct Target {
    pub url: String,
    pub addr: SocketAddr,
    /// An http:// URL: MJPEG over HTTP, not RTSP.
    pub http: bool,
    /// For HTTP's request line and Host header.
    pub path: String,
    pub host: String,
    /// The URL's `user:password@` (RTSP only).
    pub credentials: Option<(String, String)>,
}

impl Target {
    pub fn parse(url: &str) -> Result<Target> {
        if url.starts_with("http://") {
            let u = rtsp_types::Url::parse(url).map_err(|e| anyhow!("bad URL {url}: {e}"))?;
            if !u.username().is_empty() || u.password().is_some() {
                bail!("a user and password are for rtsp:// URLs; {url} is MJPEG over HTTP");
            }
            let host = u.host_str().ok_or_else(|| anyhow!("no host in {url}"))?;
            let port = u.port().unwrap_or(80);
            let addr = resolve(host.trim_matches(['[', ']']), port)?;
            let path = match u.query() {
                Some(q) => format!("{}?{q}", u.path()),
                None => u.path().to_owned(),
            };
            return Ok(Target {
                url: url.to_owned(),
                addr,
                http: true,
                path,
                host: match u.port() {
                    Some(p) => format!("{host}:{p}"),
                    None => host.to_owned(),
                },
                credentials: None,
            });
        }
        let target = camstream_rtsp::url::parse(url)?;
        let addr = resolve(&target.host, target.port)?;
        Ok(Target {
            url: target.url,
            addr,
            http: false,
            path: String::new(),
            host: target.host,
            credentials: target.credentials,
        })
    }
}

/// Writes what `out` holds until it is empty or the socket is full.
pub fn write_pending(sock: &mut TcpStream, out: &mut Vec<u8>) -> io::Result<()> {
    while !out.is_empty() {
        match sock.write(out) {
            Ok(n) => {
                out.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow!("{host} has no address"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Connecting,
    Describe,
    Setup,
    Play,
    Playing,
}

/// Where the current frame's packets have got to.
struct FrameCheck {
    /// What the track carries (the SDP says).
    codec: Codec,
    /// H.264: a marker bit came since the session joined or lost a packet,
    /// so the next packet starts an access unit.
    synced: bool,
    /// The RTP timestamp and the offset the next packet must have.
    current: Option<(u32, usize)>,
    next_seq: Option<u16>,
    /// RTP timestamps of the first and the latest whole frame: which of the
    /// server's frames the session spans, for a harness that knows them all
    /// (scripts/soak).
    span: Option<(u32, u32)>,
}

impl Default for FrameCheck {
    fn default() -> FrameCheck {
        FrameCheck {
            codec: Codec::Jpeg,
            synced: false,
            current: None,
            next_seq: None,
            span: None,
        }
    }
}

/// Digest for a URL with `user:password@` (boxed: most runs have none).
struct Auth {
    name: String,
    password: String,
    /// The user's digests for the server's realm and its challenges, once a
    /// 401 asked for them.
    digest: Option<(User, Vec<String>)>,
    sent: Option<Sent>,
}

/// The request last sent, to send again with credentials after a 401.
struct Sent {
    method: &'static str,
    url: String,
    extra: String,
    /// Sent with an Authorization already.
    answered: bool,
}

pub struct Client {
    pub id: usize,
    ctrl: TcpStream,
    transport: Transport,
    udp: Option<(UdpSocket, UdpSocket)>,
    step: Step,
    pub error: Option<String>,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    cseq: u32,
    session: Option<String>,
    control_url: String,
    last_request: Instant,
    check: FrameCheck,
    pub tally: Tally,
    auth: Option<Box<Auth>>,
}

impl Client {
    pub fn connect(
        id: usize,
        target: &Target,
        transport: Transport,
        registry: &Registry,
    ) -> Result<Client> {
        let mut ctrl = TcpStream::connect(target.addr)?;
        registry.register(
            &mut ctrl,
            Token(2 * id),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        Ok(Client {
            id,
            ctrl,
            transport,
            udp: None,
            step: Step::Connecting,
            error: None,
            inbuf: Vec::with_capacity(RECORD_MAX),
            out: Vec::new(),
            cseq: 0,
            session: None,
            control_url: target.url.clone(),
            last_request: Instant::now(),
            check: FrameCheck::default(),
            tally: Tally::default(),
            auth: target.credentials.clone().map(|(name, password)| {
                Box::new(Auth {
                    name,
                    password,
                    digest: None,
                    sent: None,
                })
            }),
        })
    }

    /// RTP timestamps of the first and the latest whole frame received.
    pub fn frame_span(&self) -> Option<(u32, u32)> {
        self.check.span
    }

    pub fn playing(&self) -> bool {
        self.step == Step::Playing && self.error.is_none()
    }

    pub fn failed(&self) -> bool {
        self.error.is_some()
    }

    pub fn give_up_setup(&mut self, after: Duration) {
        if self.error.is_none() && self.step != Step::Playing {
            self.error = Some(format!(
                "{:?} not done {:.1} s after the start",
                self.step,
                after.as_secs_f64()
            ));
        }
    }

    fn fail(&mut self, why: String) {
        if self.error.is_none() {
            self.error = Some(why);
        }
    }

    fn request(&mut self, method: &'static str, url: &str, extra: &str) {
        self.cseq += 1;
        let mut authorization = String::new();
        if let Some(Auth {
            digest: Some((user, challenges)),
            ..
        }) = self.auth.as_deref()
        {
            let challenges: Vec<&str> = challenges.iter().map(String::as_str).collect();
            let cnonce = format!("{:08x}{:08x}", self.id, self.cseq);
            if let Some(a) = auth::answer(&challenges, user, method, url, &cnonce) {
                authorization = format!("Authorization: {a}\r\n");
            }
        }
        let _ = write!(
            self.out,
            "{method} {url} RTSP/1.0\r\nCSeq: {}\r\nUser-Agent: camstream-load\r\n{authorization}{extra}{}\r\n",
            self.cseq,
            self.session
                .as_ref()
                .map(|s| format!("Session: {s}\r\n"))
                .unwrap_or_default()
        );
        if let Some(a) = self.auth.as_deref_mut() {
            a.sent = Some(Sent {
                method,
                url: url.to_owned(),
                extra: extra.to_owned(),
                answered: !authorization.is_empty(),
            });
        }
        self.last_request = Instant::now();
        self.flush();
    }

    /// A 401: the same request again with Digest credentials, if the URL
    /// has them and this one went without (or with a nonce gone stale).
    fn answer_challenge(&mut self, resp: &rtsp_types::Response<Vec<u8>>) -> Result<()> {
        let step = self.step;
        let Some(a) = self.auth.as_deref_mut() else {
            bail!("{step:?} answered 401: the server wants a password (rtsp://USER:PASSWORD@...)");
        };
        let challenges: Vec<String> = resp
            .header(&rtsp_types::headers::WWW_AUTHENTICATE)
            .map(|v| vec![v.as_str().to_owned()])
            .unwrap_or_default();
        let refs: Vec<&str> = challenges.iter().map(String::as_str).collect();
        let sent = a
            .sent
            .take()
            .ok_or_else(|| anyhow!("a 401 to no request"))?;
        if sent.answered && !refs.iter().any(|c| c.contains("stale=true")) {
            bail!("{} answered 401: the password was refused", sent.method);
        }
        let realm = auth::digest_realm(&refs)
            .ok_or_else(|| anyhow!("{} answered 401 without a Digest challenge", sent.method))?;
        a.digest = Some((
            User::from_password(&a.name, &realm, &a.password),
            challenges,
        ));
        self.request(sent.method, &sent.url, &sent.extra);
        Ok(())
    }

    fn flush(&mut self) {
        if let Err(e) = write_pending(&mut self.ctrl, &mut self.out) {
            self.fail(format!("write: {e}"));
        }
    }

    pub fn on_control(
        &mut self,
        ev: &Event,
        target: &Target,
        buf: &mut [u8],
        now: Instant,
        registry: &Registry,
    ) {
        if self.error.is_some() {
            return;
        }
        if self.step == Step::Connecting && ev.is_writable() {
            if let Err(e) = self.ctrl.peer_addr() {
                return self.fail(format!("connect: {e}"));
            }
            self.step = Step::Describe;
            self.request(
                "DESCRIBE",
                &target.url.clone(),
                "Accept: application/sdp\r\n",
            );
        }
        if ev.is_writable() {
            self.flush();
        }
        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
            loop {
                let room = RECORD_MAX.saturating_sub(self.inbuf.len()).min(buf.len());
                match self.ctrl.read(&mut buf[..room]) {
                    Ok(0) => return self.fail("the server closed the connection".into()),
                    Ok(n) => {
                        self.inbuf.extend_from_slice(&buf[..n]);
                        self.process(target, now, registry);
                        if self.error.is_some() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return self.fail(format!("read: {e}")),
                }
            }
        }
    }

    /// Interleaved records and responses in the input.
    fn process(&mut self, target: &Target, now: Instant, registry: &Registry) {
        let mut used = 0;
        while used < self.inbuf.len() {
            let rest = &self.inbuf[used..];
            if rest[0] == b'$' {
                if rest.len() < 4 {
                    break;
                }
                let len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
                if rest.len() < 4 + len {
                    break;
                }
                if rest[1] == 0 {
                    let packet = &self.inbuf[used + 4..used + 4 + len];
                    let (verdict, gap) = check_packet(&mut self.check, packet);
                    self.tally.count(verdict, gap, packet.len(), now);
                }
                used += 4 + len;
                continue;
            }
            match Message::<Vec<u8>>::parse(rest) {
                Ok((Message::Response(resp), n)) => {
                    used += n;
                    if let Err(e) = self.on_response(&resp, target, registry) {
                        self.inbuf.clear();
                        return self.fail(format!("{e:#}"));
                    }
                }
                Ok((_, n)) => used += n,
                Err(ParseError::Incomplete(_)) => break,
                Err(ParseError::Error) => {
                    self.inbuf.clear();
                    return self.fail("unparseable data from the server".into());
                }
            }
        }
        self.inbuf.drain(..used);
    }

    fn on_response(
        &mut self,
        resp: &rtsp_types::Response<Vec<u8>>,
        target: &Target,
        registry: &Registry,
    ) -> Result<()> {
        if resp.status() == StatusCode::Unauthorized {
            return self.answer_challenge(resp);
        }
        if resp.status() != StatusCode::Ok {
            bail!("{:?} answered {}", self.step, u16::from(resp.status()));
        }
        match self.step {
            Step::Describe => {
                let track = camstream_rtsp::sdp::video_track(
                    resp.body(),
                    resp.header(&rtsp_types::headers::CONTENT_BASE)
                        .map(|v| v.as_str()),
                    &target.url,
                )?;
                self.control_url = track.base;
                self.check.codec = track.codec;
                let track = track.control;
                let transport = match self.transport {
                    Transport::Tcp => "RTP/AVP/TCP;unicast;interleaved=0-1".to_owned(),
                    Transport::Udp => {
                        let port = self.bind_udp(target, registry)?;
                        format!("RTP/AVP;unicast;client_port={port}-{}", port + 1)
                    }
                };
                self.step = Step::Setup;
                self.request("SETUP", &track, &format!("Transport: {transport}\r\n"));
            }
            Step::Setup => {
                let session = resp
                    .header(&rtsp_types::headers::SESSION)
                    .map(|v| v.as_str().split(';').next().unwrap_or("").trim().to_owned())
                    .ok_or_else(|| anyhow!("SETUP answered without a Session"))?;
                self.session = Some(session);
                self.step = Step::Play;
                let url = self.control_url.clone();
                self.request("PLAY", &url, "Range: npt=0.000-\r\n");
            }
            Step::Play => {
                self.step = Step::Playing;
            }
            // Keep-alive answers.
            Step::Playing | Step::Connecting => {}
        }
        Ok(())
    }

    /// An even/odd UDP port pair for RTP and RTCP.
    fn bind_udp(&mut self, target: &Target, registry: &Registry) -> Result<u16> {
        let ip = match target.addr {
            SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        };
        for _ in 0..64 {
            let mut rtp = UdpSocket::bind(SocketAddr::new(ip, 0))?;
            let port = rtp.local_addr()?.port();
            if port % 2 != 0 {
                continue;
            }
            if let Ok(rtcp) = UdpSocket::bind(SocketAddr::new(ip, port + 1)) {
                // A frame arrives as a burst of a few hundred packets: the
                // default receive buffer (208 KiB) would drop its end.
                // As root the system's limit (net.core.rmem_max, 208 KiB
                // by default) does not apply.
                if rustix::net::sockopt::set_socket_recv_buffer_size_force(&rtp, UDP_RECV_BUFFER)
                    .is_err()
                {
                    let _ =
                        rustix::net::sockopt::set_socket_recv_buffer_size(&rtp, UDP_RECV_BUFFER);
                }
                registry.register(&mut rtp, Token(2 * self.id + 1), Interest::READABLE)?;
                self.udp = Some((rtp, rtcp));
                return Ok(port);
            }
        }
        bail!("no free UDP port pair")
    }

    pub fn on_udp(&mut self, buf: &mut [u8], now: Instant) {
        loop {
            let Some((rtp, _)) = &self.udp else { return };
            match rtp.recv(buf) {
                Ok(n) => {
                    let (verdict, gap) = check_packet(&mut self.check, &buf[..n]);
                    self.tally.count(verdict, gap, n, now);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(format!("UDP receive: {e}")),
            }
        }
    }

    pub fn keepalive(&mut self, now: Instant, _target: &Target) {
        if self.step == Step::Playing
            && self.error.is_none()
            && now.duration_since(self.last_request) >= KEEPALIVE
        {
            let url = self.control_url.clone();
            self.request("GET_PARAMETER", &url, "");
        }
    }

    pub fn teardown(&mut self, _target: &Target) {
        if self.session.is_some() && self.error.is_none() {
            let url = self.control_url.clone();
            self.request("TEARDOWN", &url, "");
        }
    }
}

/// A packet of the track: its verdict, and how many packets were skipped
/// before it (whole frames a server dropped show only there). Sequence
/// numbers count up by one.
fn check_packet(state: &mut FrameCheck, packet: &[u8]) -> (Verdict, u16) {
    let Ok(p) = rtp::IncomingPacket::parse(packet) else {
        return (Verdict::NotJpeg, 0);
    };
    match state.codec {
        Codec::Jpeg => check_jpeg(state, p),
        Codec::H264 { payload_type } => check_h264(state, p, payload_type),
    }
}

/// RFC 6184: an access unit's packets share a timestamp, the last has the
/// marker bit. One that lost a packet is broken; counting starts again
/// after the next marker bit.
fn check_h264(state: &mut FrameCheck, p: rtp::IncomingPacket<'_>, pt: u8) -> (Verdict, u16) {
    if p.header.payload_type != pt || p.payload.is_empty() {
        return (Verdict::NotJpeg, 0);
    }
    let gap = match state.next_seq {
        Some(expected) => p.header.sequence.wrapping_sub(expected),
        None => 0,
    };
    state.next_seq = Some(p.header.sequence.wrapping_add(1));
    let ts = p.header.timestamp;
    // A fragment (FU-A, type 28) without its start bit continues a unit.
    let continues = p.payload[0] & 0x1f == 28 && p.payload.get(1).is_some_and(|b| b & 0x80 == 0);
    let broken = match state.current {
        Some((t, _)) => gap != 0 || t != ts,
        // Packets lost between units are whole units the server dropped
        // (counted as lost), unless this one is the rest of a unit.
        None => gap != 0 && state.synced && continues,
    };
    if broken {
        state.synced = false;
        state.current = None;
        return (Verdict::Broken, gap);
    }
    if !p.header.marker {
        if state.synced {
            state.current = Some((ts, 0));
        }
        return (Verdict::Part, gap);
    }
    state.current = None;
    if !state.synced {
        // The end of the unit the session joined in: not counted.
        state.synced = true;
        return (Verdict::Part, gap);
    }
    state.span = Some((state.span.map_or(ts, |(first, _)| first), ts));
    (Verdict::Frame, gap)
}

/// RFC 2435: a frame's packets share a timestamp, their fragment offsets
/// join up from 0, the last has the marker bit.
fn check_jpeg(state: &mut FrameCheck, p: rtp::IncomingPacket<'_>) -> (Verdict, u16) {
    if p.header.payload_type != RTP_JPEG || p.payload.len() < 8 {
        return (Verdict::NotJpeg, 0);
    }
    let seq = p.header.sequence;
    let first_packet = state.next_seq.is_none();
    let gap = match state.next_seq {
        Some(expected) => seq.wrapping_sub(expected),
        None => 0,
    };
    state.next_seq = Some(seq.wrapping_add(1));
    let payload = p.payload;
    let offset =
        usize::from(payload[1]) << 16 | usize::from(payload[2]) << 8 | usize::from(payload[3]);
    let data_len = payload.len() - header_len(payload);
    let ts = p.header.timestamp;
    let verdict = match state.current {
        // A new frame; one still open lost its end.
        _ if offset == 0 => {
            let lost_end = state.current.is_some();
            state.current = Some((ts, data_len));
            if lost_end {
                return (Verdict::Broken, gap);
            }
            Verdict::Part
        }
        Some((t, expected)) if t == ts && expected == offset && gap == 0 => {
            state.current = Some((ts, expected + data_len));
            Verdict::Part
        }
        // The middle of the first frame after joining: not counted.
        None if first_packet => return (Verdict::Part, gap),
        // A frame whose first packet (or an earlier one) never came.
        _ => {
            state.current = None;
            return (Verdict::Broken, gap);
        }
    };
    if p.header.marker {
        state.current = None;
        state.span = Some((state.span.map_or(ts, |(first, _)| first), ts));
        return (Verdict::Frame, gap);
    }
    (verdict, gap)
}

/// RTP/JPEG main header, restart header (types 64-127), quantization table
/// header (Q >= 128, first packet only).
fn header_len(payload: &[u8]) -> usize {
    let mut n = 8;
    if payload[4] >= 64 && payload.len() >= n + 4 {
        n += 4;
    }
    let offset_zero = payload[1] == 0 && payload[2] == 0 && payload[3] == 0;
    if payload[5] >= 128 && offset_zero && payload.len() >= n + 4 {
        n += 4 + usize::from(u16::from_be_bytes([payload[n + 2], payload[n + 3]]));
    }
    n.min(payload.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use camstream_rtp::packetize::Packetizer;

    fn packets_of(jpeg: &[u8]) -> Vec<Vec<u8>> {
        let parsed = camstream_rtp::jpeg::parse(jpeg).unwrap();
        // A small MTU, so the frame takes several packets.
        let mut p = Packetizer::new(0x1234, 1, camstream_rtp::packetize::MIN_MTU).unwrap();
        p.packetize(&parsed, 9000)
            .map(|pkt| {
                let mut v = vec![0; pkt.len()];
                pkt.write_to(&mut v);
                v
            })
            .collect()
    }

    #[test]
    fn whole_frames_and_lost_packets() {
        let jpeg = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../camstream-rtp/testdata/ffmpeg-5.1-mjpeg-yuvj420p-huffman-default-160x120.jpg"
        ))
        .unwrap();
        let pkts = packets_of(&jpeg);
        let mut st = FrameCheck::default();
        let verdicts: Vec<_> = pkts.iter().map(|p| check_packet(&mut st, p).0).collect();
        assert_eq!(verdicts.last(), Some(&Verdict::Frame));
        assert_eq!(st.span, Some((9000, 9000)));
        assert!(
            verdicts[..verdicts.len() - 1]
                .iter()
                .all(|v| *v == Verdict::Part)
        );
        // The same frame with its second packet missing.
        assert!(pkts.len() > 2);
        {
            let mut st = FrameCheck::default();
            let got: Vec<_> = pkts
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != 1)
                .map(|(_, p)| check_packet(&mut st, p))
                .collect();
            assert!(got.contains(&(Verdict::Broken, 1)), "{got:?}");
            assert!(!got.iter().any(|(v, _)| *v == Verdict::Frame));
        }
    }

    #[test]
    fn h264_access_units_whole_and_broken() {
        use camstream_h264::{AccessUnit, Packetizer};
        // An IDR picture of 3000 bytes (FU-A at this MTU) with its
        // parameter sets, then P pictures.
        let mut idr = vec![
            0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x1e, 0, 0, 0, 1, 0x68, 0xce, 0x3c, 0x80,
        ];
        idr.extend_from_slice(&[0, 0, 0, 1, 0x65]);
        idr.extend((0..3000).map(|i| (i % 251) as u8 | 1));
        // P pictures of two packets each.
        let p_pic: Vec<u8> = [0, 0, 0, 1, 0x41].into_iter().chain([7u8; 2000]).collect();
        let mut pk = Packetizer::new(0x99, 10, 1200).unwrap();
        let mut units = Vec::new();
        for (i, au) in [&idr, &p_pic, &p_pic, &p_pic, &p_pic]
            .into_iter()
            .enumerate()
        {
            let au = AccessUnit::parse(au).unwrap();
            let pkts: Vec<Vec<u8>> = pk
                .packetize(&au, 3000 * i as u32)
                .map(|pkt| {
                    let mut v = vec![0; pkt.len()];
                    pkt.write_to(&mut v);
                    v
                })
                .collect();
            units.push(pkts);
        }
        assert!(units[0].len() > 2);
        assert_eq!(units[1].len(), 2);
        let check = |skip: &[(usize, usize)]| {
            let mut st = FrameCheck {
                codec: Codec::H264 { payload_type: 96 },
                ..FrameCheck::default()
            };
            let mut v = Vec::new();
            for (u, pkts) in units.iter().enumerate() {
                for (i, p) in pkts.iter().enumerate() {
                    if !skip.contains(&(u, i)) {
                        v.push(check_packet(&mut st, p));
                    }
                }
            }
            let frames = v.iter().filter(|v| v.0 == Verdict::Frame).count();
            let broken = v.iter().filter(|v| v.0 == Verdict::Broken).count();
            (frames, broken)
        };
        // Joined at the first packet: the first unit completes the sync,
        // the four after it count.
        assert_eq!(check(&[]), (4, 0));
        // A whole unit dropped: the others count.
        assert_eq!(check(&[(2, 0), (2, 1)]), (3, 0));
        // A unit's second packet lost: broken when the next unit comes;
        // that one syncs again, the last counts.
        assert_eq!(check(&[(2, 1)]), (2, 1));
        // A unit's first packet lost: its rest is broken.
        assert_eq!(check(&[(2, 0)]), (2, 1));
    }
}
