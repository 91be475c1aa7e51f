//! `camstream check`: a minimal RTSP client that proves a server streams,
//! by receiving one whole JPEG frame over RTP/TCP and decoding it. The
//! firmware's health check runs it against the local daemon after an update
//! (docs/UPDATE.md); anyone can run it against any RFC 2435 server.
//!
//! A server that asks for a password gets a Digest answer: from the URL's
//! `user:password@`, or, on the device itself, from the stored digests of a
//! user in the config (Digest needs only those, not the password).

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use camstream_rtp::depacketize::Depacketizer;
use camstream_rtsp::auth::{self, User};
use camstream_rtsp::sdp;
use rtsp_types::{Message, ParseError, Response};

/// What a successful check saw.
pub struct Seen {
    pub width: u16,
    pub height: u16,
    pub bytes: usize,
    pub elapsed: Duration,
}

/// A connection that stays silent this long is given up and a new one
/// made: a frame comes every few hundred milliseconds at the slowest.
const SILENCE: Duration = Duration::from_secs(10);

/// Tries until `timeout` has passed: the server may still be starting.
/// Attempts that failed after connecting are told on stderr.
pub fn run(url: &str, user: Option<&User>, timeout: Duration) -> Result<Seen> {
    let start = Instant::now();
    let deadline = start + timeout;
    let mut last = anyhow!("no attempt made");
    while Instant::now() < deadline {
        let mut connected = false;
        match attempt(url, user, deadline, &mut connected) {
            Ok((width, height, bytes)) => {
                return Ok(Seen {
                    width,
                    height,
                    bytes,
                    elapsed: start.elapsed(),
                });
            }
            Err(e) => {
                if connected && Instant::now() < deadline {
                    eprintln!(
                        "camstream check: {e:#} ({:.1} s in); trying again",
                        start.elapsed().as_secs_f32()
                    );
                }
                last = e;
            }
        }
        std::thread::sleep(
            Duration::from_millis(500).min(deadline.saturating_duration_since(Instant::now())),
        );
    }
    Err(last.context(format!(
        "no frame from {url} within {} s",
        timeout.as_secs()
    )))
}

struct Conn<'a> {
    stream: TcpStream,
    buf: Vec<u8>,
    cseq: u32,
    deadline: Instant,
    /// What the next read waits for ("...: "), for the message when nothing comes.
    waiting_for: String,
    /// When the last bytes came (or the connection was made).
    heard: Instant,
    user: Option<&'a User>,
    /// The server's WWW-Authenticate, once it asked.
    challenge: Option<String>,
}

impl Conn<'_> {
    fn fill(&mut self) -> Result<()> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let silent = || {
            anyhow!(
                "{}the server sent nothing for {:.1} s",
                self.waiting_for,
                self.heard.elapsed().as_secs_f32()
            )
        };
        if left.is_zero() || self.heard.elapsed() >= SILENCE {
            return Err(silent());
        }
        let wait = left.min(SILENCE.saturating_sub(self.heard.elapsed()));
        self.stream.set_read_timeout(Some(wait))?;
        let mut chunk = [0u8; 16384];
        let n = match self.stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(silent());
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("{}reading from the server", self.waiting_for));
            }
        };
        if n == 0 {
            bail!("{}the server closed the connection", self.waiting_for);
        }
        self.heard = Instant::now();
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// Sends a request and returns its response, skipping interleaved data.
    fn request(&mut self, method: &str, url: &str, extra: &str) -> Result<Response<Vec<u8>>> {
        match self.request_once(method, url, extra)? {
            Ok(resp) => Ok(resp),
            Err(challenge) => {
                if self.user.is_none() {
                    bail!(
                        "{method} answered 401: the server wants a password (rtsp://USER:PASSWORD@...)"
                    );
                }
                // Asked again after an answer: wrong password, unless the
                // nonce had only gone stale.
                if self.challenge.is_some() && !challenge.contains("stale=true") {
                    bail!("{method} answered 401: the password was refused");
                }
                self.challenge = Some(challenge);
                self.request_once(method, url, extra)?
                    .map_err(|_| anyhow!("{method} answered 401: the password was refused"))
            }
        }
    }

    /// A response, or a 401's WWW-Authenticate.
    fn request_once(
        &mut self,
        method: &str,
        url: &str,
        extra: &str,
    ) -> Result<std::result::Result<Response<Vec<u8>>, String>> {
        self.cseq += 1;
        let mut authorization = String::new();
        if let (Some(user), Some(challenge)) = (self.user, &self.challenge) {
            let cnonce = format!("{:08x}", std::process::id() ^ self.cseq);
            let a = auth::answer(&[challenge], user, method, url, &cnonce).ok_or_else(|| {
                anyhow!("the server asks for no Digest this check can answer: {challenge}")
            })?;
            authorization = format!("Authorization: {a}\r\n");
        }
        let req = format!(
            "{method} {url} RTSP/1.0\r\nCSeq: {}\r\nUser-Agent: camstream-check\r\n{authorization}{extra}\r\n",
            self.cseq
        );
        self.stream
            .write_all(req.as_bytes())
            .with_context(|| format!("sending {method}"))?;
        self.waiting_for = format!("waiting for the answer to {method}: ");
        loop {
            match Message::<Vec<u8>>::parse(&self.buf) {
                Ok((msg, used)) => {
                    self.buf.drain(..used);
                    if let Message::Response(resp) = msg {
                        if resp.status() == rtsp_types::StatusCode::Unauthorized {
                            let challenge = resp
                                .header(&rtsp_types::headers::WWW_AUTHENTICATE)
                                .map(|v| v.as_str().to_owned())
                                .unwrap_or_default();
                            return Ok(Err(challenge));
                        }
                        if resp.status() != rtsp_types::StatusCode::Ok {
                            bail!("{method} answered {}", u16::from(resp.status()));
                        }
                        return Ok(Ok(resp));
                    }
                }
                Err(ParseError::Incomplete(_)) => self.fill()?,
                Err(ParseError::Error) => bail!("unparseable answer to {method}"),
            }
        }
    }
}

fn attempt(
    url: &str,
    user: Option<&User>,
    deadline: Instant,
    connected: &mut bool,
) -> Result<(u16, u16, usize)> {
    let target = camstream_rtsp::url::parse(url)?;
    let addr = (target.host.as_str(), target.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow!("{} has no address", target.host))?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let stream =
        TcpStream::connect_timeout(&addr, left).with_context(|| format!("connecting to {addr}"))?;
    *connected = true;
    stream.set_write_timeout(Some(left.min(SILENCE)))?;
    let mut c = Conn {
        stream,
        buf: Vec::new(),
        cseq: 0,
        deadline,
        waiting_for: String::new(),
        heard: Instant::now(),
        user,
        challenge: None,
    };

    let describe = c.request("DESCRIBE", url, "Accept: application/sdp\r\n")?;
    let content_base = describe.header(&rtsp_types::headers::CONTENT_BASE);
    let track = sdp::jpeg_track(describe.body(), content_base.map(|v| v.as_str()), url)?;
    let (base, track, x_dimensions) = (track.base, track.control, track.x_dimensions);
    let mut depack = Depacketizer::new();
    if let Some((w, h)) = x_dimensions {
        depack.set_x_dimensions(w, h);
    }

    let setup = c.request(
        "SETUP",
        &track,
        "Transport: RTP/AVP/TCP;unicast;interleaved=0-1\r\n",
    )?;
    let session = setup
        .header(&rtsp_types::headers::SESSION)
        .map(|v| v.as_str().split(';').next().unwrap_or("").trim().to_owned())
        .ok_or_else(|| anyhow!("SETUP answered without a Session"))?;
    c.request(
        "PLAY",
        &base,
        &format!("Session: {session}\r\nRange: npt=0.000-\r\n"),
    )?;

    // Interleaved records: '$', channel, 16-bit length, RTP or RTCP.
    let playing = Instant::now();
    c.waiting_for.clear(); // said by the context below
    let mut packets = 0u32;
    loop {
        while c.buf.len() < 4
            || c.buf.len() < 4 + usize::from(u16::from_be_bytes([c.buf[2], c.buf[3]]))
        {
            c.fill().with_context(|| {
                format!(
                    "{packets} RTP packets but no whole frame in the {:.1} s after PLAY",
                    playing.elapsed().as_secs_f32()
                )
            })?;
        }
        if c.buf[0] != b'$' {
            bail!("the server sent something other than interleaved RTP after PLAY");
        }
        let len = usize::from(u16::from_be_bytes([c.buf[2], c.buf[3]]));
        let channel = c.buf[1];
        let packet: Vec<u8> = c.buf.drain(..4 + len).skip(4).collect();
        if channel != 0 {
            continue;
        }
        packets += 1;
        if let Some(frame) = depack
            .push(&packet)
            .map_err(|e| anyhow!("bad RTP/JPEG packet: {e}"))?
        {
            let image = turbojpeg::decompress(frame.jpeg, turbojpeg::PixelFormat::GRAY)
                .map_err(|e| anyhow!("the frame does not decode: {e}"))?;
            let seen = (frame.width, frame.height, frame.jpeg.len());
            if usize::from(seen.0) != image.width || usize::from(seen.1) != image.height {
                bail!(
                    "the frame decodes to {}x{}, its RTP header says {}x{}",
                    image.width,
                    image.height,
                    seen.0,
                    seen.1
                );
            }
            let _ = c.request("TEARDOWN", &base, &format!("Session: {session}\r\n"));
            return Ok(seen);
        }
    }
}
