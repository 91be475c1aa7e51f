//! GET /stream.mjpg: multipart MJPEG, each part the fan-out's JPEG file,
//! `?fps=N` thinning it, until the client leaves.

use std::rc::Rc;
use std::time::Duration;

use camstream_http::mjpeg::{self, MAX_PART_HEADER};
use camstream_http::response::{write_head, write_text};

use super::super::admission::Refusal;
use super::super::conn::{self, ConnId};
use super::super::ctx::Ctx;
use crate::fanout::{SharedFrame, StreamId, SubscriberId, Subscription};
use super::{Body, Http, State};

pub struct Mjpeg {
    pub subscription: SubscriberId,
    /// The frames' files one after the other, without part headers (the
    /// sound's stream, /audio.wav or /audio.aac).
    pub raw: bool,
}

/// The next part of a stream: its header, the frame, CRLF (or the frame
/// alone, `raw`).
pub fn part(frame: Rc<SharedFrame>, raw: bool) -> Body {
    let mut part_header = [0u8; MAX_PART_HEADER];
    if raw {
        return Body {
            frame,
            part_header,
            part_header_len: 0,
            trailer: b"",
            written: 0,
        };
    }
    let part_header_len = mjpeg::part_header(
        &mut part_header,
        frame.jpeg().len(),
        frame.captured.0 / 1000,
    );
    Body {
        frame,
        part_header,
        part_header_len,
        trailer: b"\r\n",
        written: 0,
    }
}

impl Http {
    pub(super) fn start_mjpeg(
        &mut self,
        ci: ConnId,
        fps: Option<&str>,
        head_only: bool,
        ctx: &mut Ctx<'_>,
    ) {
        let close = self.conns.get(ci).is_some_and(|h| h.close_after);
        let Some(conn) = ctx.conns.get_mut(ci) else {
            return;
        };
        let every = match fps.map(str::parse::<f64>) {
            None => None,
            Some(Ok(f)) if f > 0.0 && f <= 120.0 => Some(Duration::from_secs_f64(1.0 / f)),
            Some(_) => {
                return write_text(
                    &mut conn.ctrl,
                    400,
                    "fps must be a number above 0 and at most 120",
                    head_only,
                    close,
                );
            }
        };
        if head_only {
            return write_head(
                &mut conn.ctrl,
                200,
                &[
                    ("Content-Type", mjpeg::CONTENT_TYPE),
                    ("Cache-Control", "no-store"),
                ],
                None,
                close,
            );
        }
        if ctx.fanout.clients() >= ctx.cfg.max_clients {
            let peer = conn.peer;
            write_text(
                &mut conn.ctrl,
                503,
                "max_clients streaming clients reached",
                false,
                close,
            );
            ctx.admission
                .refused(peer, "MJPEG stream refused: 503", Refusal::MaxClients);
            return;
        }
        // The stream ends when the client leaves: no length, then close.
        write_head(
            &mut conn.ctrl,
            200,
            &[
                ("Content-Type", mjpeg::CONTENT_TYPE),
                ("Cache-Control", "no-store"),
                ("Pragma", "no-cache"),
            ],
            None,
            true,
        );
        log::info!(
            "MJPEG stream to {}{}",
            conn.peer,
            match every {
                Some(d) => format!(" at most {:.2} frames/s", 1.0 / d.as_secs_f64()),
                None => String::new(),
            }
        );
        // The newest frame at once (the fan-out starts with it), so the
        // picture appears without waiting.
        self.follow(ci, ctx, StreamId::MAIN, every, None, false);
    }

    /// Connection `ci` takes `stream`'s frames from now until it leaves:
    /// MJPEG parts, or (`raw`) the frames' files one after the other.
    fn follow(
        &mut self,
        ci: ConnId,
        ctx: &mut Ctx<'_>,
        stream: StreamId,
        every: Option<Duration>,
        queue: Option<usize>,
        raw: bool,
    ) {
        let subscription = ctx.fanout.subscribe(Subscription {
            stream,
            wake: conn::token(ci),
            label: self.label,
            every,
            queue,
            client: true,
            active: true,
        });
        if let Some(h) = self.conns.get_mut(ci) {
            h.state = State::Mjpeg(Mjpeg { subscription, raw });
            h.close_after = true;
        }
    }

    /// GET /audio.wav (PCMU's sound as 16-bit PCM) or /audio.aac (AAC's,
    /// ADTS frames): the sound for a page's audio element, from its next
    /// frame on, until the client leaves. 404 when the camera's sound is
    /// not in that form.
    pub(super) fn start_sound(&mut self, ci: ConnId, path: &str, head_only: bool, ctx: &mut Ctx<'_>) {
        use camstream_audio::packetize::Format;
        let close = self.conns.get(ci).is_some_and(|h| h.close_after);
        let Some(conn) = ctx.conns.get_mut(ci) else {
            return;
        };
        let sound = match path {
            "/audio.wav" => ctx.fanout.sound("pcmu").map(|s| (s, "audio/wav")),
            _ => ctx.fanout.sound("aac").map(|s| (s, "audio/aac")),
        };
        let (stream, content_type) = match sound {
            Some(s) => s,
            None => {
                return write_text(
                    &mut conn.ctrl,
                    404,
                    "the camera does not make its sound in that form: /metrics names its encodings (pcmu: /audio.wav, aac: /audio.aac)",
                    head_only,
                    close,
                );
            }
        };
        let headers = [("Content-Type", content_type), ("Cache-Control", "no-store")];
        if head_only {
            return write_head(&mut conn.ctrl, 200, &headers, None, close);
        }
        if ctx.fanout.clients() >= ctx.cfg.max_clients {
            let peer = conn.peer;
            write_text(&mut conn.ctrl, 503, "max_clients streaming clients reached", false, close);
            ctx.admission
                .refused(peer, "sound stream refused: 503", Refusal::MaxClients);
            return;
        }
        write_head(&mut conn.ctrl, 200, &headers, None, true);
        if content_type == "audio/wav" {
            conn.ctrl.extend_from_slice(&wav_header(Format::Pcmu.clock_rate()));
        }
        log::info!("sound stream ({content_type}) to {}", conn.peer);
        self.follow(ci, ctx, stream, None, Some(crate::media::audio::QUEUE), true);
    }
}

/// A WAV header for a stream of 16-bit mono PCM at `rate` without end:
/// its sizes the largest there are, which players take as "until the
/// connection closes".
fn wav_header(rate: u32) -> [u8; 44] {
    let fields: [&[u8]; 13] = [
        b"RIFF",
        &u32::MAX.to_le_bytes(),
        b"WAVEfmt ",
        &16u32.to_le_bytes(),
        &1u16.to_le_bytes(), // PCM
        &1u16.to_le_bytes(), // mono
        &rate.to_le_bytes(),
        &(rate * 2).to_le_bytes(),
        &2u16.to_le_bytes(),
        &16u16.to_le_bytes(),
        b"data",
        &(u32::MAX - 36).to_le_bytes(),
        b"",
    ];
    let mut h = [0u8; 44];
    for (d, s) in h.iter_mut().zip(fields.iter().flat_map(|f| f.iter())) {
        *d = *s;
    }
    h
}
