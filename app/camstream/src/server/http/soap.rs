//! ONVIF's services as a route of the HTTP side: a POST to a service's path
//! has its body read whole, is handed to ONVIF with what HTTP's gate says
//! of its credentials, and the answer is written back.

use camstream_http::response::{write_head, write_text};

use super::super::admission::Refusal;
use super::super::conn::ConnId;
use super::super::ctx::Ctx;
use super::super::onvif::{self, Answer, HttpAuth};
use super::auth::{digest, write_challenge};
use super::{BodyFor, Handoff, Http, Request, State, write_405};
use camstream_rtsp::auth::Verdict;

/// Largest SOAP request read (Profile S's largest is about 3 KB).
const MAX_BODY: usize = 64 << 10;
const SOAP_TYPE: &str = "application/soap+xml; charset=utf-8";

impl Http {
    /// A request for an ONVIF service's path: a POST whose body is read
    /// before it is handed over.
    pub(super) fn onvif_start(
        &mut self,
        ci: ConnId,
        req: Request,
        close: bool,
        ctx: &mut Ctx<'_>,
    ) -> Option<Handoff> {
        let conn = ctx.conns.get_mut(ci)?;
        if req.method != "POST" {
            write_405(&mut conn.ctrl, "POST", close);
            return None;
        }
        self.await_body(ci, req, MAX_BODY, "a SOAP request", BodyFor::Onvif, ctx);
        None
    }

    /// A whole request for ONVIF, with HTTP's verdict on its credentials.
    pub(super) fn onvif_handoff(
        &mut self,
        ci: ConnId,
        req: Request,
        body: Vec<u8>,
        ctx: &mut Ctx<'_>,
    ) -> Handoff {
        let peer = ctx
            .conns
            .get(ci)
            .map_or_else(|| std::net::SocketAddr::from(([0, 0, 0, 0], 0)), |c| c.peer);
        if let Some(h) = self.conns.get_mut(ci) {
            h.close_after |= req.close;
        }
        let mut http_user = None;
        let http = if !ctx.gate.open_to(peer) {
            HttpAuth::Closed
        } else {
            match digest(ctx, &req) {
                None => HttpAuth::Open,
                Some(Verdict::User(u)) => {
                    http_user = Some(u.to_string());
                    HttpAuth::User
                }
                Some(Verdict::Expired(_)) => HttpAuth::Missing { stale: true },
                // A password hash is checked off the loop for the page's
                // routes; ONVIF's request asks again (then as UsernameToken
                // or Digest, once the user's digests are learnt).
                Some(Verdict::Challenge | Verdict::Verify { .. }) => {
                    HttpAuth::Missing { stale: false }
                }
                Some(Verdict::Malformed(why)) => HttpAuth::Malformed(why),
            }
        };
        Handoff::Onvif(onvif::Request {
            peer,
            path: req.path,
            body,
            host: req.host,
            http,
            http_user,
        })
    }

    /// A PullMessages the event service holds until it has something:
    /// nothing more is read from its connection meanwhile.
    pub fn onvif_parked(&mut self, ci: ConnId) {
        if let Some(h) = self.conns.get_mut(ci) {
            h.state = State::Pulling;
        }
    }

    /// Writes ONVIF's answer to the request `ci` handed over (or parked).
    pub fn onvif_answer(&mut self, ci: ConnId, answer: Answer, ctx: &mut Ctx<'_>) {
        if let Some(h) = self.conns.get_mut(ci) {
            if matches!(h.state, State::Pulling) {
                h.state = State::Requests;
            }
        }
        let close = self.conns.get(ci).is_some_and(|h| h.close_after);
        let Some(conn) = ctx.conns.get_mut(ci) else {
            return;
        };
        match answer {
            Answer::Soap {
                status,
                xml,
                admitted,
                signed_in,
            } => {
                if signed_in.is_some() {
                    if conn.passed(signed_in.as_deref()) {
                        ctx.after.authenticated.push(ci);
                    }
                } else {
                    conn.admitted |= admitted;
                }
                write_head(
                    &mut conn.ctrl,
                    status,
                    &[("Content-Type", SOAP_TYPE)],
                    Some(xml.len()),
                    close,
                );
                conn.ctrl.extend_from_slice(xml.as_bytes());
            }
            Answer::Challenge { stale } => {
                conn.stale_nonce = stale;
                write_challenge(&mut conn.ctrl, &ctx.gate.challenges(stale), false, close);
            }
            Answer::Forbidden => {
                let peer = conn.peer;
                write_text(
                    &mut conn.ctrl,
                    403,
                    "no user is set, so only this machine's clients are served (see `camstream passwd`)",
                    false,
                    close,
                );
                ctx.admission
                    .refused(peer, "HTTP request refused: 403", Refusal::NoUserSet);
            }
            Answer::BadRequest(why) => {
                log::info!("{}: HTTP: {why}", conn.peer);
                write_text(&mut conn.ctrl, 400, why, false, close);
            }
            // Parked by the loop before it gets here.
            Answer::Wait { .. } | Answer::Picture { .. } => {
                write_text(&mut conn.ctrl, 500, "a request was not parked", false, true);
            }
        }
        self.flush(ci, ctx);
    }
}
