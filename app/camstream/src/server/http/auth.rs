//! HTTP's side of the gate: the same rule as RTSP's (without users only
//! this machine's clients, or anyone if anonymous; with users, Digest, Basic
//! only with basic_auth), and its refusals written as HTTP answers.

use camstream_http::response::{write_head, write_text};
use camstream_rtsp::auth::Verdict;

use super::super::admission::Refusal;
use super::super::conn::ConnId;
use super::super::ctx::Ctx;
use super::{Http, Request, conn_mut};

impl Http {
    /// The same gate as RTSP's. Writes the refusal (403, 401 with the
    /// challenges, 400) and returns None when the request may not go on;
    /// else who passed: `Some(None)` without users, `Some(Some(user))`.
    pub(super) fn gate(
        &mut self,
        ci: ConnId,
        req: &Request,
        head_only: bool,
        close: bool,
        ctx: &mut Ctx<'_>,
    ) -> Option<Option<String>> {
        let peer = ctx.conns.get(ci)?.peer;
        if !ctx.gate.open_to(peer) {
            ctx.admission
                .refused(peer, "HTTP request refused: 403", Refusal::NoUserSet);
            write_text(
                &mut conn_mut(ctx, ci)?.ctrl,
                403,
                "no user is set, so only this machine's clients are served (see `camstream passwd`)",
                head_only,
                close,
            );
            return None;
        }
        let verdict = digest(ctx, req).map(|v| match v {
            Verdict::User(u) => Ok(u.to_string()),
            Verdict::Expired(_) => Err(Ok(true)),
            Verdict::Challenge => Err(Ok(false)),
            Verdict::Malformed(why) => Err(Err(why)),
        });
        let conn = ctx.conns.get_mut(ci)?;
        let stale = match verdict {
            None => {
                conn.passed(None);
                return Some(None);
            }
            Some(Ok(user)) => {
                conn.stale_nonce = false;
                if conn.passed(Some(&user)) {
                    ctx.after.authenticated.push(ci);
                }
                return Some(Some(user));
            }
            Some(Err(Ok(stale))) => stale,
            Some(Err(Err(why))) => {
                log::info!("{}: HTTP: {why}", conn.peer);
                write_text(&mut conn.ctrl, 400, why, head_only, close);
                return None;
            }
        };
        conn.stale_nonce = stale;
        write_challenge(
            &mut conn.ctrl,
            &ctx.gate.challenges(stale),
            head_only,
            close,
        );
        None
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
