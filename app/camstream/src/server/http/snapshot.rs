//! GET /snapshot.jpg: the newest frame if it is fresh, else the next one
//! (waiting up to a second), as a JPEG file.

use std::rc::Rc;
use std::time::Duration;

use camstream_http::mjpeg::MAX_PART_HEADER;
use camstream_http::response::{write_head, write_text};

use super::super::conn::{self, ConnId};
use super::super::ctx::Ctx;
use crate::fanout::{SharedFrame, StreamId, Subscription};
use super::{Body, Http, State};
use crate::clock::Mono;

/// How long a snapshot waits for a frame.
pub const WAIT: Duration = Duration::from_secs(1);

impl Http {
    pub(super) fn snapshot(&mut self, ci: ConnId, head_only: bool, ctx: &mut Ctx<'_>) {
        let close = self.conns.get(ci).is_some_and(|h| h.close_after);
        if !ctx.fanout.camera_present() {
            if let Some(conn) = ctx.conns.get_mut(ci) {
                write_text(
                    &mut conn.ctrl,
                    503,
                    "the camera is absent (unplugged, or not found)",
                    head_only,
                    close,
                );
            }
            return;
        }
        let now = Mono::now();
        if let Some(f) = ctx.fanout.stream(StreamId::MAIN).latest(now) {
            let f = f.clone();
            return self.send_snapshot(ci, f, head_only, ctx);
        }
        let subscription = ctx.fanout.subscribe(Subscription {
            stream: StreamId::MAIN,
            wake: conn::token(ci),
            label: self.label,
            every: None,
            queue: Some(1),
            client: false,
            active: true,
        });
        if let Some(h) = self.conns.get_mut(ci) {
            h.state = State::Snapshot {
                since: now,
                head_only,
                subscription,
            };
        }
    }

    pub(super) fn send_snapshot(
        &mut self,
        ci: ConnId,
        frame: Rc<SharedFrame>,
        head_only: bool,
        ctx: &mut Ctx<'_>,
    ) {
        let (Some(conn), Some(h)) = (ctx.conns.get_mut(ci), self.conns.get_mut(ci)) else {
            return;
        };
        h.state = State::Requests;
        self.counts.snapshots += 1;
        write_head(
            &mut conn.ctrl,
            200,
            &[
                ("Content-Type", "image/jpeg"),
                ("Cache-Control", "no-store"),
            ],
            Some(frame.jpeg().len()),
            h.close_after,
        );
        if head_only {
            // The next request may go.
            ctx.resume(ci);
        } else {
            h.body = Some(Body {
                frame,
                part_header: [0; MAX_PART_HEADER],
                part_header_len: 0,
                trailer: b"",
                written: 0,
            });
        }
    }

    /// Snapshots waiting for a frame for `after` or longer: 503 with `why`.
    pub(super) fn answer_waiting_snapshots(
        &mut self,
        now: Mono,
        after: Duration,
        why: &str,
        ctx: &mut Ctx<'_>,
    ) {
        let waiting: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, h)| {
                matches!(h.state, State::Snapshot { since, .. } if now.saturating_sub(since) >= after)
            })
            .map(|(k, _)| k)
            .collect();
        for ci in waiting {
            let Some(h) = self.conns.get_mut(ci) else {
                continue;
            };
            let State::Snapshot {
                head_only,
                subscription,
                ..
            } = std::mem::take(&mut h.state)
            else {
                continue;
            };
            ctx.fanout.unsubscribe(subscription);
            if let Some(conn) = ctx.conns.get_mut(ci) {
                write_text(&mut conn.ctrl, 503, why, head_only, h.close_after);
            }
            self.flush(ci, ctx);
            // Requests that came after it.
            ctx.resume(ci);
        }
    }
}
