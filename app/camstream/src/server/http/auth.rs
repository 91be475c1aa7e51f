//! HTTP's side of the gate: the same rule as RTSP's (without users only
//! this machine's clients, or anyone if anonymous; with users, Digest, Basic
//! only with basic_auth), and its refusals written as HTTP answers.

use camstream_http::response::{write_head, write_text};
use camstream_rtsp::auth::Verdict;

use super::super::admission::Refusal;
use super::super::conn::ConnId;
use super::super::ctx::Ctx;
use super::{Http, Request, conn_mut};

/// The gate's answer to a request.
pub(super) enum Gated {
    /// It may go on: `None` without users, else the user it named.
    Pass(Option<String>),
    /// Refused, the refusal written.
    Refused,
    /// Basic credentials of a user known by a password hash only: to be
    /// checked off the loop before the request goes on.
    Verify { name: String, password: String },
}

impl Http {
    /// The same gate as RTSP's. Writes the refusal (403, 401 with the
    /// challenges, 400) when the request may not go on. `may_verify`:
    /// whether the request can wait for a password hash to be checked
    /// (else that is refused as wrong credentials are).
    pub(super) fn gate(
        &mut self,
        ci: ConnId,
        req: &Request,
        head_only: bool,
        close: bool,
        may_verify: bool,
        ctx: &mut Ctx<'_>,
    ) -> Gated {
        let Some(peer) = ctx.conns.get(ci).map(|c| c.peer) else {
            return Gated::Refused;
        };
        if !ctx.gate.open_to(peer) {
            ctx.admission
                .refused(peer, "HTTP request refused: 403", Refusal::NoUserSet);
            if let Some(conn) = conn_mut(ctx, ci) {
                write_text(
                    &mut conn.ctrl,
                    403,
                    "no user is set, so only this machine's clients are served (see `camstream passwd`)",
                    head_only,
                    close,
                );
            }
            return Gated::Refused;
        }
        let verdict = digest(ctx, req).map(|v| match v {
            Verdict::User(u) => Ok(u.to_string()),
            Verdict::Expired(_) => Err(Ok(true)),
            Verdict::Challenge => Err(Ok(false)),
            Verdict::Verify { name, password } => Err(Err(Ok((name.to_string(), password)))),
            Verdict::Malformed(why) => Err(Err(Err(why))),
        });
        let Some(conn) = ctx.conns.get_mut(ci) else {
            return Gated::Refused;
        };
        let stale = match verdict {
            None => {
                conn.passed(None);
                return Gated::Pass(None);
            }
            Some(Ok(user)) => {
                conn.stale_nonce = false;
                if conn.passed(Some(&user)) {
                    ctx.after.authenticated.push(ci);
                }
                return Gated::Pass(Some(user));
            }
            Some(Err(Ok(stale))) => stale,
            Some(Err(Err(Ok((name, password))))) if may_verify => {
                return Gated::Verify { name, password };
            }
            Some(Err(Err(Ok(_)))) => false,
            Some(Err(Err(Err(why)))) => {
                log::info!("{}: HTTP: {why}", conn.peer);
                write_text(&mut conn.ctrl, 400, why, head_only, close);
                return Gated::Refused;
            }
        };
        conn.stale_nonce = stale;
        write_challenge(
            &mut conn.ctrl,
            &ctx.gate.sign_in_challenges(stale),
            head_only,
            close,
        );
        Gated::Refused
    }
}

/// The gate's verdict on a request's Authorization (None: no users).
pub(super) fn digest<'a>(ctx: &'a Ctx<'_>, req: &Request) -> Option<Verdict<'a>> {
    // Digest's uri is the request target, path and query (RFC 7616
    // §3.4); in origin form the host is the camera's.
    let url = if req.target.starts_with('/') {
        rtsp_types::Url::parse(&format!("http://camera{}", req.target))
    } else {
        rtsp_types::Url::parse(&req.target)
    };
    ctx.gate.check(
        &req.method,
        url.ok().as_ref(),
        None,
        req.authorization.as_deref(),
    )
}

/// 401 with the gate's challenges.
pub(super) fn write_challenge(
    out: &mut Vec<u8>,
    challenges: &[String],
    head_only: bool,
    close: bool,
) {
    let body = "401 Unauthorized: this camera asks for a user and password\n";
    let mut headers: Vec<(&str, &str)> = challenges
        .iter()
        .map(|c| ("WWW-Authenticate", c.as_str()))
        .collect();
    headers.push(("Content-Type", "text/plain; charset=utf-8"));
    write_head(out, 401, &headers, Some(body.len()), close);
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
}
