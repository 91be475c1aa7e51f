//! WHEP (the WebRTC-HTTP egress protocol) as a route of the HTTP side:
//! POST /whep/STREAM with an SDP offer (read whole, past the gate), the
//! answer in a 201 with the session's resource in Location; DELETE on that
//! resource ends it. The session itself is the event loop's WebRTC part's.

use camstream_http::response::{write_head, write_text};

use super::super::conn::ConnId;
use super::super::ctx::Ctx;
use super::{BodyFor, Handoff, Http, Request, State, write_405};
use crate::clock::Mono;

pub const PREFIX: &str = "/whep/";
/// Largest offer read: a browser's offer for one video track is 3-6 KB.
const MAX_OFFER: usize = 32 << 10;
const SDP_TYPE: &str = "application/sdp";

pub fn is_whep(path: &str) -> bool {
    path.starts_with(PREFIX)
}

/// What HTTP hands the loop for its WebRTC part.
#[cfg_attr(not(feature = "webrtc"), allow(dead_code))]
pub enum Whep {
    Offer {
        /// The stream's path ("h264").
        stream: String,
        sdp: Vec<u8>,
        user: Option<String>,
        peer: std::net::SocketAddr,
        /// The camera's address the client reached.
        local: std::net::SocketAddr,
    },
    Delete {
        resource: String,
        user: Option<String>,
        peer: std::net::SocketAddr,
    },
}

/// The WebRTC part's answer, for HTTP to write.
#[cfg_attr(not(feature = "webrtc"), allow(dead_code))]
pub enum WhepAnswer {
    /// 201 Created: the SDP answer; Location is PREFIX/STREAM/RESOURCE.
    Created {
        sdp: String,
        stream: String,
        resource: String,
    },
    /// 200: the session ended.
    Deleted,
    Refused(u16, String),
}

impl Http {
    /// A request under /whep/ that passed the gate: an offer's body is read
    /// first; a DELETE is handed over at once.
    pub(super) fn whep_start(
        &mut self,
        ci: ConnId,
        req: Request,
        user: Option<String>,
        close: bool,
        ctx: &mut Ctx<'_>,
    ) -> Option<Handoff> {
        let rest = req.path.strip_prefix(PREFIX).unwrap_or_default();
        let conn = ctx.conns.get_mut(ci)?;
        let named = |s: &str| !s.is_empty() && !s.contains('/');
        match (req.method.as_str(), rest.split_once('/')) {
            ("POST", None) if named(rest) => {}
            ("DELETE", Some((_, resource))) if named(resource) => {
                return Some(Handoff::Whep(Whep::Delete {
                    resource: resource.to_string(),
                    user,
                    peer: conn.peer,
                }));
            }
            // ICE-lite with every candidate in the answer: nothing to
            // trickle (RFC 9725 answers 405 then, as WHEP does).
            (_, Some(_)) => {
                write_405(&mut conn.ctrl, "DELETE", close);
                return None;
            }
            _ => {
                write_405(&mut conn.ctrl, "POST", close);
                return None;
            }
        }
        let sdp_type = req
            .content_type
            .as_deref()
            .and_then(|t| t.split(';').next())
            .is_some_and(|t| t.trim().eq_ignore_ascii_case(SDP_TYPE));
        if !sdp_type {
            write_text(&mut conn.ctrl, 415, "a WHEP offer is application/sdp", false, true);
            conn.closing = Some(Mono::now());
            return None;
        }
        self.conns.get_mut(ci)?.close_after = req.close;
        self.await_body(ci, req, MAX_OFFER, "a WHEP offer", BodyFor::Whep { user }, ctx);
        None
    }

    /// An offer whose body is all there, for the loop's WebRTC part.
    pub(super) fn whep_offer(
        &mut self,
        ci: ConnId,
        req: Request,
        sdp: Vec<u8>,
        user: Option<String>,
        ctx: &mut Ctx<'_>,
    ) -> Handoff {
        let (peer, local) = ctx.conns.get(ci).map_or_else(
            || {
                let none = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
                (none, none)
            },
            |c| (c.peer, c.local),
        );
        Handoff::Whep(Whep::Offer {
            stream: req.path.strip_prefix(PREFIX).unwrap_or_default().to_string(),
            sdp,
            user,
            peer,
            local,
        })
    }

    /// The offer `ci` handed over is being answered off the loop.
    pub fn whep_parked(&mut self, ci: ConnId) {
        if let Some(h) = self.conns.get_mut(ci) {
            h.state = State::Answering;
        }
    }

    /// Writes the WebRTC part's answer to the request `ci` handed over.
    pub fn whep_answer(&mut self, ci: ConnId, answer: WhepAnswer, ctx: &mut Ctx<'_>) {
        let Some(h) = self.conns.get_mut(ci) else {
            return;
        };
        if matches!(h.state, State::Answering) {
            h.state = State::Requests;
        }
        let close = h.close_after;
        let Some(conn) = ctx.conns.get_mut(ci) else {
            return;
        };
        match answer {
            WhepAnswer::Created {
                sdp,
                stream,
                resource,
            } => {
                let location = format!("{PREFIX}{stream}/{resource}");
                write_head(
                    &mut conn.ctrl,
                    201,
                    &[
                        ("Content-Type", SDP_TYPE),
                        ("Location", &location),
                        ("Cache-Control", "no-store"),
                    ],
                    Some(sdp.len()),
                    close,
                );
                conn.ctrl.extend_from_slice(sdp.as_bytes());
            }
            WhepAnswer::Deleted => {
                write_head(&mut conn.ctrl, 200, &[("Content-Length", "0")], None, close);
            }
            WhepAnswer::Refused(status, why) => {
                log::info!("{}: WHEP: {status} {why}", conn.peer);
                write_text(&mut conn.ctrl, status, &why, false, close);
            }
        }
        self.flush(ci, ctx);
    }
}
