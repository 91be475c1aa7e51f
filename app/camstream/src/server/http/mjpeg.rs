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
}

/// The next part of a stream: its header, the frame, CRLF.
pub fn part(frame: Rc<SharedFrame>) -> Body {
    let mut part_header = [0u8; MAX_PART_HEADER];
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
        let subscription = ctx.fanout.subscribe(Subscription {
            stream: StreamId::MAIN,
            wake: conn::token(ci),
            label: self.label,
            every,
            queue: None,
            client: true,
            active: true,
        });
        if let Some(h) = self.conns.get_mut(ci) {
            h.state = State::Mjpeg(Mjpeg { subscription });
            h.close_after = true;
        }
    }
}
