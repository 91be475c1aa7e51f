//! RTSP over HTTP (Apple's QuickTime scheme, which ONVIF Profile S names and
//! live555/VLC, FFmpeg and GStreamer's rtsph:// speak): the client opens a
//! GET and a POST with the same x-sessioncookie. The GET's connection
//! becomes an RTSP connection whose replies and interleaved frames go out
//! on it; the POST carries the requests, base64-encoded, and gets no reply.
//!
//! A tunnel is its two halves and nothing else: one POST, from the GET's
//! address, joins a GET; a second is refused; when either half closes, so
//! does the other, so neither outlives the tunnel. What the POST carries,
//! interleaved RTCP included, is the GET's connection's input and acts only
//! on that connection's sessions. The GET or POST may carry credentials
//! (FFmpeg sends them on both); then, as after the first authenticated
//! request through it, the tunnel is that user's.

use std::collections::HashMap;

use camstream_http::response::{write_head, write_text};
use camstream_http::tunnel::Decoder;

use super::super::conn::{Conn, ConnId, Conns};
use super::super::ctx::Ctx;
use crate::table::Secondary;
use super::{Rtsp, RtspConn};
use crate::clock::Mono;

/// Longest x-sessioncookie taken (clients send 22-32 characters).
const MAX_COOKIE: usize = 128;

/// A tunnel, as its GET side keeps it.
pub struct Tunnel {
    pub cookie: String,
    /// Its one POST side, once it came.
    pub post: Option<ConnId>,
    /// The user the tunnel's GET or POST, or its first authenticated
    /// request, came with: every request through it must be that user's.
    pub user: Option<String>,
}

/// A POST side: the GET it joined (None: refused, closing once told so).
struct Post {
    get: Option<ConnId>,
    decoder: Decoder,
}

#[derive(Default)]
pub struct Tunnels {
    /// The GET side of each x-sessioncookie.
    by_cookie: HashMap<String, ConnId>,
    posts: Secondary<Conn, Post>,
}

impl Tunnels {
    pub fn is_post(&self, ci: ConnId) -> bool {
        self.posts.get(ci).is_some()
    }

    pub fn posts(&self) -> usize {
        self.posts.len()
    }

    /// A POST side closed: the GET it joined, to close too.
    pub fn post_closed(&mut self, ci: ConnId) -> Option<ConnId> {
        self.posts.remove(ci)?.get
    }

    /// A GET side closed: its POST, to close too.
    pub fn get_closed(&mut self, ci: ConnId, t: &Tunnel) -> Option<ConnId> {
        if self.by_cookie.get(&t.cookie) == Some(&ci) {
            self.by_cookie.remove(&t.cookie);
        }
        t.post
    }

    pub fn audit(&self, conns: &Conns, rtsp: &Secondary<Conn, RtspConn>) -> Result<(), String> {
        for (cookie, &get) in &self.by_cookie {
            let t = rtsp.get(get).and_then(|r| r.tunnel.as_ref());
            if conns.get(get).is_none() || t.is_none_or(|t| &t.cookie != cookie) {
                return Err(format!("tunnel {cookie} names {get:?}, gone or another"));
            }
        }
        for (ci, r) in rtsp.iter() {
            let Some(t) = &r.tunnel else { continue };
            if self.by_cookie.get(&t.cookie) != Some(&ci) {
                return Err(format!("tunnel GET {ci:?} is not found by its cookie"));
            }
            let Some(post) = t.post else { continue };
            if self.posts.get(post).is_none_or(|p| p.get != Some(ci)) {
                return Err(format!("tunnel GET {ci:?}'s POST {post:?} is not its own"));
            }
            let same_address = conns
                .get(post)
                .zip(conns.get(ci))
                .is_some_and(|(p, g)| p.peer.ip() == g.peer.ip());
            if !same_address {
                return Err(format!(
                    "tunnel GET {ci:?}'s POST is gone or of another address"
                ));
            }
        }
        for (ci, p) in self.posts.iter() {
            if conns.get(ci).is_none() {
                return Err(format!("tunnel POST state of a gone connection {ci:?}"));
            }
            let Some(get) = p.get else { continue };
            let post = rtsp
                .get(get)
                .and_then(|r| r.tunnel.as_ref())
                .and_then(|t| t.post);
            if post != Some(ci) {
                return Err(format!("tunnel POST {ci:?} is not its GET {get:?}'s"));
            }
        }
        Ok(())
    }
}

impl Rtsp {
    /// The GET side, handed over by HTTP with the user its credentials
    /// named: answered 200 with the tunnel's content type, and from now on
    /// an RTSP connection.
    pub fn tunnel_get(
        &mut self,
        ci: ConnId,
        cookie: String,
        user: Option<String>,
        ctx: &mut Ctx<'_>,
    ) {
        let taken = self
            .tunnels
            .by_cookie
            .get(&cookie)
            .is_some_and(|&g| ctx.conns.get(g).is_some());
        let Some(conn) = ctx.conns.get_mut(ci) else {
            return;
        };
        if cookie.is_empty() || cookie.len() > MAX_COOKIE || taken {
            log::info!(
                "{}: RTSP-over-HTTP GET with an unusable or taken x-sessioncookie",
                conn.peer
            );
            write_text(
                &mut conn.ctrl,
                400,
                "x-sessioncookie is empty, too long or already in use",
                false,
                true,
            );
            conn.closing = Some(Mono::now());
            self.conns.insert(ci, RtspConn::default());
            return self.flush(ci, ctx);
        }
        // RTSP-over-HTTP clients take HTTP/1.0 framing: no length, the
        // response lasts as long as the connection.
        write_head(
            &mut conn.ctrl,
            200,
            &[
                ("Content-Type", "application/x-rtsp-tunnelled"),
                ("Cache-Control", "no-store"),
                ("Pragma", "no-cache"),
            ],
            None,
            false,
        );
        conn.inbuf.clear();
        conn.request_started = None;
        log::info!("{}: RTSP over HTTP: tunnel opened", conn.peer);
        self.conns.insert(
            ci,
            RtspConn {
                tunnel: Some(Tunnel {
                    cookie: cookie.clone(),
                    post: None,
                    user,
                }),
                ..RtspConn::default()
            },
        );
        self.tunnels.by_cookie.insert(cookie, ci);
        self.flush(ci, ctx);
    }

    /// The POST side, handed over by HTTP: its body, from now on, is
    /// base64 RTSP for the GET side's connection. It must come from the GET
    /// side's address, to a GET without a POST, with no other user's
    /// credentials.
    pub fn tunnel_post(
        &mut self,
        ci: ConnId,
        cookie: String,
        user: Option<String>,
        ctx: &mut Ctx<'_>,
    ) {
        let Some(peer) = ctx.conns.get(ci).map(|c| c.peer) else {
            return;
        };
        let get = self
            .tunnels
            .by_cookie
            .get(&cookie)
            .copied()
            .filter(|&g| ctx.conns.get(g).is_some_and(|c| c.peer.ip() == peer.ip()));
        // The GET this POST joins: one with no POST yet, this user's or
        // nobody's.
        let tunnel = get.and_then(|g| Some((g, self.conns.get(g)?.tunnel.as_ref()?)));
        let found = match tunnel {
            None => Err((
                404,
                "no RTSP-over-HTTP GET from this address with this x-sessioncookie",
            )),
            Some((_, t)) if t.post.is_some() => Err((409, "this tunnel already has its POST")),
            Some((_, t)) if user.is_some() && t.user.is_some() && t.user != user => {
                Err((403, "this tunnel belongs to another user"))
            }
            Some((g, _)) => Ok(g),
        };
        let Some(conn) = ctx.conns.get_mut(ci) else {
            return;
        };
        conn.request_started = None;
        let get = match found {
            Ok(get) => get,
            Err((status, why)) => {
                log::info!("{peer}: RTSP-over-HTTP POST refused: {why}");
                write_text(&mut conn.ctrl, status, why, false, true);
                conn.closing = Some(Mono::now());
                self.tunnels.posts.insert(
                    ci,
                    Post {
                        get: None,
                        decoder: Decoder::default(),
                    },
                );
                return self.post_flush(ci, ctx);
            }
        };
        self.tunnels.posts.insert(
            ci,
            Post {
                get: Some(get),
                decoder: Decoder::default(),
            },
        );
        let Some(t) = self.conns.get_mut(get).and_then(|r| r.tunnel.as_mut()) else {
            return ctx.close(ci, "the tunnel's GET side is gone");
        };
        t.post = Some(ci);
        if t.user.is_none() {
            t.user = user;
        }
        // A pair: admitted as one.
        let admitted = ctx.conns.get(get).is_some_and(|c| c.admitted) || conn_admitted(ctx, ci);
        for side in [ci, get] {
            if let Some(c) = ctx.conns.get_mut(side) {
                c.admitted |= admitted;
            }
        }
        // What came after the POST's head is the tunnel's already.
        self.tunnel_input(ci, ctx);
    }

    /// Base64 on a POST side: decoded into the GET side's input, which is
    /// then handled as any RTSP connection's.
    pub fn tunnel_input(&mut self, ci: ConnId, ctx: &mut Ctx<'_>) {
        let Some(post) = self.tunnels.posts.get_mut(ci) else {
            return;
        };
        let Some(get) = post.get else {
            // Refused: what it sends is dropped until it is closed.
            if let Some(c) = ctx.conns.get_mut(ci) {
                c.inbuf.clear();
            }
            return;
        };
        let Some(get_conn) = ctx.conns.get(get) else {
            return ctx.close(ci, "the tunnel's GET side is gone");
        };
        // The GET side is not reading (its client does not read replies):
        // neither is this side, until it does.
        let get_paused = get_conn.read_paused;
        let Some(conn) = ctx.conns.get_mut(ci) else {
            return;
        };
        if get_paused {
            conn.read_paused = true;
            return;
        }
        if conn.inbuf.is_empty() || conn.closing.is_some() {
            return;
        }
        let mut decoded = Vec::with_capacity(conn.inbuf.len() / 4 * 3);
        let result = post.decoder.decode(&conn.inbuf, &mut decoded);
        conn.inbuf.clear();
        let last_input = conn.last_input;
        let Some(get_conn) = ctx.conns.get_mut(get) else {
            return ctx.close(ci, "the tunnel's GET side is gone");
        };
        get_conn.inbuf.extend_from_slice(&decoded);
        get_conn.last_input = last_input;
        // What came before a bad byte is still the client's: handled
        // first, then the tunnel closes.
        self.input(get, ctx);
        if let Err(e) = result {
            let Some(conn) = ctx.conns.get_mut(ci) else {
                return;
            };
            log::info!("{}: RTSP over HTTP: {e}; closing the tunnel", conn.peer);
            write_text(&mut conn.ctrl, 400, &e.to_string(), false, true);
            conn.closing = Some(Mono::now());
            self.post_flush(ci, ctx);
        }
    }

    /// A POST side gets no replies but an error before it closes.
    pub(super) fn post_flush(&mut self, ci: ConnId, ctx: &mut Ctx<'_>) {
        let Some(conn) = ctx.conns.get_mut(ci) else {
            return;
        };
        match conn.write_ctrl() {
            Ok(true) if conn.closing.is_some() => ctx.close(ci, "closed after an error"),
            Ok(_) => {}
            Err(e) => ctx.close(ci, &format!("write: {e}")),
        }
    }

    /// A request through the tunnel of `ci` (if it is a GET side) is
    /// `user`'s: the tunnel's user, or another's (403).
    pub(super) fn tunnel_user(
        &mut self,
        ci: ConnId,
        user: &str,
        peer: std::net::SocketAddr,
    ) -> bool {
        let Some(t) = self.conns.get_mut(ci).and_then(|r| r.tunnel.as_mut()) else {
            return true;
        };
        match &t.user {
            Some(u) if u != user => {
                log::info!("{peer}: a request as {user} through a tunnel of {u}: refused");
                false
            }
            Some(_) => true,
            None => {
                t.user = Some(user.to_owned());
                true
            }
        }
    }

    /// A request on `ci` passed the gate, as `user` when users are set: the
    /// connection, and its tunnel's other half, are no longer pending.
    pub(super) fn admit(&self, ci: ConnId, user: Option<&str>, ctx: &mut Ctx<'_>) {
        let conns = &mut *ctx.conns;
        if conns.get_mut(ci).is_some_and(|c| c.passed(user)) {
            ctx.after.authenticated.push(ci);
        }
        let post = self
            .conns
            .get(ci)
            .and_then(|r| r.tunnel.as_ref())
            .and_then(|t| t.post);
        if let Some(c) = post.and_then(|p| conns.get_mut(p)) {
            c.admitted = true;
        }
    }
}

fn conn_admitted(ctx: &Ctx<'_>, ci: ConnId) -> bool {
    ctx.conns.get(ci).is_some_and(|c| c.admitted)
}
