//! The picture settings as a route of the HTTP side: GET /picture, the
//! camera's settings in JSON (for any user who may watch); POST /picture,
//! a JSON object of settings to change (for operators and
//! administrators). JSON only: a page of another site cannot send it
//! without the camera's leave (CORS), so a viewer's browser cannot be
//! made to change the picture. The camera is asked off the loop
//! (server::picture); HTTP reads the body and writes the answer.

use camstream_http::response::{write_head, write_text};

use super::super::conn::ConnId;
use super::super::ctx::Ctx;
use super::{BodyFor, Handoff, Http, Request, State, write_405};
use crate::clock::Mono;

pub const PATH: &str = "/picture";
/// Largest body read: every offered setting at once is under 400 bytes.
const MAX_BODY: usize = 4096;
const JSON_TYPE: &str = "application/json";

/// What HTTP hands the loop.
pub struct Picture {
    /// POST's body; None for GET or HEAD.
    pub body: Option<Vec<u8>>,
    pub user: Option<String>,
    pub peer: std::net::SocketAddr,
    pub head_only: bool,
}

impl Http {
    /// GET, HEAD or POST /picture past the gate: a POST's body is read
    /// first.
    pub(super) fn picture_start(
        &mut self,
        ci: ConnId,
        req: Request,
        user: Option<String>,
        head_only: bool,
        ctx: &mut Ctx<'_>,
    ) -> Option<Handoff> {
        let conn = ctx.conns.get_mut(ci)?;
        let peer = conn.peer;
        match req.method.as_str() {
            "GET" | "HEAD" => Some(Handoff::Picture(Picture {
                body: None,
                user,
                peer,
                head_only,
            })),
            "POST" => {
                let json = req
                    .content_type
                    .as_deref()
                    .and_then(|t| t.split(';').next())
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case(JSON_TYPE));
                if !json {
                    write_text(&mut conn.ctrl, 415, "picture settings are application/json", false, true);
                    conn.closing = Some(Mono::now());
                    return None;
                }
                self.conns.get_mut(ci)?.close_after = req.close;
                self.await_body(ci, req, MAX_BODY, "picture settings", BodyFor::Picture { user }, ctx);
                None
            }
            _ => {
                write_405(&mut conn.ctrl, "GET, HEAD, POST", true);
                conn.closing = Some(Mono::now());
                None
            }
        }
    }

    /// The request waits for the picture thread: nothing more is read.
    pub fn picture_parked(&mut self, ci: ConnId) {
        if let Some(h) = self.conns.get_mut(ci) {
            h.state = State::Answering;
        }
    }

    /// Writes the loop's answer: 200 with the settings as they are now, or
    /// an error in JSON.
    pub fn picture_answer(
        &mut self,
        ci: ConnId,
        status: u16,
        json: &str,
        head_only: bool,
        ctx: &mut Ctx<'_>,
    ) {
        if let Some(h) = self.conns.get_mut(ci) {
            if matches!(h.state, State::Answering) {
                h.state = State::Requests;
            }
        }
        let close = self.conns.get(ci).is_some_and(|h| h.close_after);
        if let Some(conn) = ctx.conns.get_mut(ci) {
            write_head(
                &mut conn.ctrl,
                status,
                &[("Content-Type", JSON_TYPE), ("Cache-Control", "no-store")],
                Some(json.len()),
                close,
            );
            if !head_only {
                conn.ctrl.extend_from_slice(json.as_bytes());
            }
        }
        self.flush(ci, ctx);
    }
}
