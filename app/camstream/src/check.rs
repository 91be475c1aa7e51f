//! `camstream check`: a minimal RTSP client that proves a server streams,
//! by receiving one whole JPEG frame over RTP/TCP and decoding it. The
//! firmware's health check runs it against the local daemon after an update
//! (docs/UPDATE.md); anyone can run it against any RFC 2435 server.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use camstream_rtp::depacketize::Depacketizer;
use rtsp_types::{Message, ParseError, Response};

/// What a successful check saw.
pub struct Seen {
    pub width: u16,
    pub height: u16,
    pub bytes: usize,
    pub elapsed: Duration,
}

/// Tries until `timeout` has passed: the server may still be starting.
pub fn run(url: &str, timeout: Duration) -> Result<Seen> {
    let start = Instant::now();
    let deadline = start + timeout;
    let mut last = anyhow!("no attempt made");
    while Instant::now() < deadline {
        match attempt(url, deadline) {
            Ok((width, height, bytes)) => {
                return Ok(Seen {
                    width,
                    height,
                    bytes,
                    elapsed: start.elapsed(),
                });
            }
            Err(e) => last = e,
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

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    cseq: u32,
    deadline: Instant,
}

impl Conn {
    fn fill(&mut self) -> Result<()> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!("timed out");
        }
        self.stream.set_read_timeout(Some(left))?;
        let mut chunk = [0u8; 16384];
        let n = self
            .stream
            .read(&mut chunk)
            .context("reading from the server")?;
        if n == 0 {
            bail!("the server closed the connection");
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// Sends a request and returns its response, skipping interleaved data.
    fn request(&mut self, method: &str, url: &str, extra: &str) -> Result<Response<Vec<u8>>> {
        self.cseq += 1;
        let req = format!(
            "{method} {url} RTSP/1.0\r\nCSeq: {}\r\nUser-Agent: camstream-check\r\n{extra}\r\n",
            self.cseq
        );
        self.stream.write_all(req.as_bytes())?;
        loop {
            match Message::<Vec<u8>>::parse(&self.buf) {
                Ok((msg, used)) => {
                    self.buf.drain(..used);
                    if let Message::Response(resp) = msg {
                        if resp.status() != rtsp_types::StatusCode::Ok {
                            bail!("{method} answered {}", u16::from(resp.status()));
                        }
                        return Ok(resp);
                    }
                }
                Err(ParseError::Incomplete(_)) => self.fill()?,
                Err(ParseError::Error) => bail!("unparseable answer to {method}"),
            }
        }
    }
}

fn attempt(url: &str, deadline: Instant) -> Result<(u16, u16, usize)> {
    let parsed = rtsp_types::Url::parse(url).with_context(|| format!("bad URL {url}"))?;
    if parsed.scheme() != "rtsp" {
        bail!("{url} is not an rtsp:// URL");
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| anyhow!("no host in {url}"))?;
    let addr = (host, parsed.port().unwrap_or(554))
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow!("{host} has no address"))?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let stream =
        TcpStream::connect_timeout(&addr, left).with_context(|| format!("connecting to {addr}"))?;
    stream.set_write_timeout(Some(left))?;
    let mut c = Conn {
        stream,
        buf: Vec::new(),
        cseq: 0,
        deadline,
    };

    let describe = c.request("DESCRIBE", url, "Accept: application/sdp\r\n")?;
    let sdp = sdp_types::Session::parse(describe.body()).map_err(|e| anyhow!("bad SDP: {e}"))?;
    let media = sdp
        .medias
        .iter()
        .find(|m| m.media == "video" && m.fmt.split(' ').any(|f| f == "26"))
        .ok_or_else(|| anyhow!("the SDP offers no RTP/JPEG (payload type 26) video"))?;
    let base = describe
        .header(&rtsp_types::headers::CONTENT_BASE)
        .map(|v| v.as_str().to_owned())
        .unwrap_or_else(|| url.to_owned());
    let control = media
        .get_first_attribute_value("control")
        .flatten()
        .unwrap_or("*");
    let track = if control.starts_with("rtsp://") {
        control.to_owned()
    } else if control == "*" {
        base.clone()
    } else {
        format!("{}/{control}", base.trim_end_matches('/'))
    };
    let mut depack = Depacketizer::new();
    if let Some(Some(dims)) = media.get_first_attribute_value("x-dimensions") {
        if let Some((w, h)) = dims.split_once(',') {
            if let (Ok(w), Ok(h)) = (w.trim().parse(), h.trim().parse()) {
                depack.set_x_dimensions(w, h);
            }
        }
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
    loop {
        while c.buf.len() < 4
            || c.buf.len() < 4 + usize::from(u16::from_be_bytes([c.buf[2], c.buf[3]]))
        {
            c.fill()?;
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
