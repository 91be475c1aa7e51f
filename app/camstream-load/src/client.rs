//! One RTSP session: the request sequence (answering a 401 with Digest when
//! the URL carries `user:password@`), then the RTP packets it receives.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use camstream_rtsp::auth::{self, User};
use mio::event::Event;
use mio::net::{TcpStream, UdpSocket};
use mio::{Interest, Registry, Token};
use rtsp_types::{Message, ParseError, StatusCode};

use crate::Transport;
use crate::frames::{FrameCheck, check_packet};
use crate::stats::Tally;

/// Keep-alive period (servers end sessions after 60 s without requests).
const KEEPALIVE: Duration = Duration::from_secs(20);
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
