//! `camstream check`: a minimal RTSP client that proves a server streams,
//! by receiving one whole frame over RTP/TCP and decoding it: a JPEG (RFC
//! 2435) or an H.264 IDR picture (RFC 6184), whichever the stream's SDP
//! offers. The firmware's health check runs it against the local daemon
//! after an update (docs/UPDATE.md); anyone can run it against any such
//! server. A 4xx answer (no such stream, a refused password) ends it at
//! once: trying again would get the same.
//!
//! A server that asks for a password gets a Digest answer: from the URL's
//! `user:password@`, or, on the device itself, from the stored digests of a
//! user in the config (Digest needs only those, not the password).

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use camstream_rtp::depacketize::Depacketizer;
use camstream_rtp::rtp::IncomingPacket;
use camstream_rtsp::auth::{self, User};
use camstream_rtsp::sdp::{self, Codec, VideoTrack};
use rtsp_types::{Message, ParseError, Response};

/// What a successful check saw.
pub struct Seen {
    /// "JPEG" or "H.264".
    pub codec: &'static str,
    pub width: u16,
    pub height: u16,
    pub bytes: usize,
    pub elapsed: Duration,
}

/// An answer trying again would not change: the check ends with it.
#[derive(Debug)]
struct Final(String);

impl std::fmt::Display for Final {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Final {}

/// A status trying again would not change: a 4xx, but for 408 (the server
/// gave up waiting) and 453 Not Enough Bandwidth (max_clients reached:
/// clients leave, and an update's health check must not fail for them).
fn is_final(code: u16) -> bool {
    (400..500).contains(&code) && code != 408 && code != 453
}

fn final_answer(why: String) -> anyhow::Error {
    anyhow::Error::new(Final(why))
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
            Ok((codec, width, height, bytes)) => {
                return Ok(Seen {
                    codec,
                    width,
                    height,
                    bytes,
                    elapsed: start.elapsed(),
                });
            }
            Err(e) if e.downcast_ref::<Final>().is_some() => {
                return Err(e.context(format!("{url}: not tried again")));
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
                    return Err(final_answer(format!(
                        "{method} answered 401: the server wants a password (rtsp://USER:PASSWORD@...)"
                    )));
                }
                let refused =
                    || final_answer(format!("{method} answered 401: the password was refused"));
                // Asked again after an answer: wrong password, unless the
                // nonce had only gone stale.
                if self.challenge.is_some() && !challenge.contains("stale=true") {
                    return Err(refused());
                }
                self.challenge = Some(challenge);
                self.request_once(method, url, extra)?
                    .map_err(|_| refused())
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
                            let code = u16::from(resp.status());
                            let said = format!("{method} answered {code} {}", resp.reason_phrase());
                            if is_final(code) {
                                return Err(final_answer(said));
                            }
                            bail!(said);
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
) -> Result<(&'static str, u16, u16, usize)> {
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
    // An SDP without a stream this check reads will not grow one.
    let track = sdp::video_track(describe.body(), content_base.map(|v| v.as_str()), url)
        .map_err(|e| final_answer(e.to_string()))?;
    let mut frames = Frames::new(&track);

    let setup = c.request(
        "SETUP",
        &track.control,
        "Transport: RTP/AVP/TCP;unicast;interleaved=0-1\r\n",
    )?;
    let session = setup
        .header(&rtsp_types::headers::SESSION)
        .map(|v| v.as_str().split(';').next().unwrap_or("").trim().to_owned())
        .ok_or_else(|| anyhow!("SETUP answered without a Session"))?;
    let base = &track.base;
    c.request(
        "PLAY",
        base,
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
                    "{packets} RTP packets but no whole {} in the {:.1} s after PLAY",
                    frames.what(),
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
        if let Some((width, height, bytes)) = frames.push(&packet)? {
            let _ = c.request("TEARDOWN", base, &format!("Session: {session}\r\n"));
            return Ok((frames.codec(), width, height, bytes));
        }
    }
}

/// Frames out of a track's RTP packets, each checked by decoding it.
enum Frames {
    Jpeg(Depacketizer),
    H264 {
        payload_type: u8,
        depacketizer: camstream_h264::depacketize::Depacketizer,
        /// The SDP's SPS and PPS, for an IDR picture that comes without.
        parameter_sets: Vec<Vec<u8>>,
    },
}

impl Frames {
    fn new(track: &VideoTrack) -> Frames {
        match track.codec {
            Codec::Jpeg => {
                let mut depacketizer = Depacketizer::new();
                if let Some((w, h)) = track.x_dimensions {
                    depacketizer.set_x_dimensions(w, h);
                }
                Frames::Jpeg(depacketizer)
            }
            Codec::H264 { payload_type } => Frames::H264 {
                payload_type,
                depacketizer: camstream_h264::depacketize::Depacketizer::new(),
                parameter_sets: track.parameter_sets.clone(),
            },
        }
    }

    fn codec(&self) -> &'static str {
        match self {
            Frames::Jpeg(_) => "JPEG",
            Frames::H264 { .. } => "H.264",
        }
    }

    fn what(&self) -> &'static str {
        match self {
            Frames::Jpeg(_) => "frame",
            Frames::H264 { .. } => "IDR picture",
        }
    }

    /// A packet; the size of the frame it completed, and its bytes, once
    /// one decodes.
    fn push(&mut self, packet: &[u8]) -> Result<Option<(u16, u16, usize)>> {
        match self {
            Frames::Jpeg(depacketizer) => {
                let Some(frame) = depacketizer
                    .push(packet)
                    .map_err(|e| anyhow!("bad RTP/JPEG packet: {e}"))?
                else {
                    return Ok(None);
                };
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
                Ok(Some(seen))
            }
            Frames::H264 {
                payload_type,
                depacketizer,
                parameter_sets,
            } => {
                let p =
                    IncomingPacket::parse(packet).map_err(|e| anyhow!("bad RTP packet: {e:?}"))?;
                if p.header.payload_type != *payload_type {
                    bail!(
                        "RTP payload type {}, the SDP said {payload_type}",
                        p.header.payload_type
                    );
                }
                // A lost piece drops its access unit; the next IDR picture
                // is as good.
                let Ok(Some(au)) = depacketizer.push(&p) else {
                    return Ok(None);
                };
                let idr = camstream_h264::annexb::nal_units(au).any(|n| {
                    n.first()
                        .is_some_and(|&h| camstream_h264::nal::unit_type(h) == 5)
                });
                if !idr {
                    return Ok(None);
                }
                let (w, h) = decode_h264(parameter_sets, au)?;
                Ok(Some((w, h, au.len())))
            }
        }
    }
}

/// The size of the picture an IDR access unit decodes to (OpenH264), the
/// SDP's parameter sets before it.
#[cfg(feature = "h264")]
fn decode_h264(parameter_sets: &[Vec<u8>], au: &[u8]) -> Result<(u16, u16)> {
    use openh264::formats::YUVSource;
    let mut stream = Vec::with_capacity(au.len() + 64);
    for set in parameter_sets {
        stream.extend_from_slice(&[0, 0, 0, 1]);
        stream.extend_from_slice(set);
    }
    stream.extend_from_slice(au);
    let mut decoder = openh264::decoder::Decoder::new()?;
    let picture = decoder
        .decode(&stream)
        .map_err(|e| anyhow!("the IDR picture does not decode: {e}"))?
        .ok_or_else(|| anyhow!("the IDR picture decodes to no picture"))?;
    let (w, h) = picture.dimensions();
    Ok((
        u16::try_from(w).unwrap_or(u16::MAX),
        u16::try_from(h).unwrap_or(u16::MAX),
    ))
}

#[cfg(not(feature = "h264"))]
fn decode_h264(_: &[Vec<u8>], _: &[u8]) -> Result<(u16, u16)> {
    Err(final_answer(
        "an H.264 stream: this build has no H.264 decoder (feature h264)".to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_camera_is_tried_again_a_wrong_path_is_not() {
        assert!(is_final(404) && is_final(401) && is_final(461) && is_final(400));
        assert!(!is_final(453) && !is_final(408) && !is_final(503) && !is_final(500));
    }
}
