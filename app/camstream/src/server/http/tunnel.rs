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

use camstream_http::tunnel::Decoder;

use super::super::conn::{ConnId, Proto};
use super::super::rtsp::RtspConn;
use super::{HttpConn, Request, Server, State, write_head, write_text};
use crate::clock::Mono;

/// Longest x-sessioncookie taken (clients send 22-32 characters).
const MAX_COOKIE: usize = 128;

impl Server {
    /// Credentials a tunnel's GET or POST came with: `Some(None)` when it
    /// has none (each request inside is checked), `Some(Some(user))` when
    /// they are right, None when they are not (the answer is written).
    fn tunnel_credentials(&mut self, ci: ConnId, req: &Request) -> Option<Option<String>> {
        if req.authorization.is_none() {
            return Some(None);
        }
        self.http_gate(ci, req, false, true)
    }

    /// The GET side: answer 200 with the tunnel's content type and from now
    /// on treat the connection as RTSP.
    pub(super) fn tunnel_get(&mut self, ci: ConnId, req: &Request, cookie: String) {
        let Some(user) = self.tunnel_credentials(ci, req) else {
            self.conns[ci].closing = Some(Mono::now());
            return;
        };
        let conn = &mut self.conns[ci];
        if cookie.is_empty() || cookie.len() > MAX_COOKIE || self.tunnels.contains_key(&cookie) {
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
            return;
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
        conn.proto = Proto::Rtsp(RtspConn::tunnel(cookie.clone(), user));
        self.tunnels.insert(cookie, ci);
    }

    /// The POST side: its body, from now on, is base64 RTSP for the GET
    /// side's connection. It must come from the GET side's address, to a
    /// GET without a POST, with no other user's credentials.
    pub(super) fn tunnel_post(&mut self, ci: ConnId, req: &Request, cookie: String) {
        let Some(user) = self.tunnel_credentials(ci, req) else {
            self.conns[ci].closing = Some(Mono::now());
            return;
        };
        let peer = self.conns[ci].peer;
        let get = self
            .tunnels
            .get(&cookie)
            .copied()
            .filter(|&g| self.conns.get(g).is_some_and(|c| c.peer.ip() == peer.ip()));
        let tunnel = get.and_then(|g| {
            let c = self.conns.get(g)?;
            let t = c.rtsp()?.tunnel.as_ref()?;
            let other_user = user.is_some() && t.user.is_some() && t.user != user;
            Some((c.admitted, t.post.is_some(), other_user))
        });
        let refusal = match tunnel {
            None => Some((
                404,
                "no RTSP-over-HTTP GET from this address with this x-sessioncookie",
            )),
            Some((_, true, _)) => Some((409, "this tunnel already has its POST")),
            Some((_, _, true)) => Some((403, "this tunnel belongs to another user")),
            Some(_) => None,
        };
        let conn = &mut self.conns[ci];
        if let Some((status, why)) = refusal {
            log::info!("{peer}: RTSP-over-HTTP POST refused: {why}");
            write_text(&mut conn.ctrl, status, why, false, true);
            conn.closing = Some(Mono::now());
            return;
        }
        let get = get.expect("a tunnel was found");
        let get_admitted = tunnel.is_some_and(|(admitted, ..)| admitted);
        conn.request_started = None;
        conn.admitted |= get_admitted;
        if let Proto::Http(h) = &mut conn.proto {
            h.state = State::TunnelIn {
                get,
                decoder: Decoder::default(),
            };
        }
        let admitted = conn.admitted;
        let get_conn = &mut self.conns[get];
        get_conn.admitted |= admitted;
        if let Some(t) = get_conn.rtsp_mut().and_then(|r| r.tunnel.as_mut()) {
            t.post = Some(ci);
            if t.user.is_none() {
                t.user = user;
            }
        }
    }

    /// Base64 on a POST side: decoded into the GET side's input, which is
    /// then handled as any RTSP connection's.
    pub(super) fn tunnel_input(&mut self, ci: ConnId) {
        let Some(Proto::Http(HttpConn {
            state: State::TunnelIn { get, .. },
            ..
        })) = self.conns.get(ci).map(|c| &c.proto)
        else {
            return;
        };
        let get = *get;
        let Some(get_conn) = self.conns.get(get) else {
            return self.close_conn(ci, "the tunnel's GET side is gone");
        };
        // The GET side is not reading (its client does not read replies):
        // neither is this side, until it does.
        let get_paused = get_conn.read_paused;
        let conn = &mut self.conns[ci];
        if get_paused {
            conn.read_paused = true;
            return;
        }
        let Proto::Http(HttpConn {
            state: State::TunnelIn { decoder, .. },
            ..
        }) = &mut conn.proto
        else {
            return;
        };
        if conn.inbuf.is_empty() {
            return;
        }
        let mut decoded = Vec::with_capacity(conn.inbuf.len() / 4 * 3);
        let result = decoder.decode(&conn.inbuf, &mut decoded);
        conn.inbuf.clear();
        let last_input = conn.last_input;
        let get_conn = &mut self.conns[get];
        get_conn.inbuf.extend_from_slice(&decoded);
        get_conn.last_input = last_input;
        // What came before a bad byte is still the client's: handled
        // first, then the tunnel closes.
        self.rtsp_input(get);
        if let Err(e) = result {
            let Some(conn) = self.conns.get_mut(ci) else {
                return;
            };
            log::info!("{}: RTSP over HTTP: {e}; closing the tunnel", conn.peer);
            write_text(&mut conn.ctrl, 400, &e.to_string(), false, true);
            conn.closing = Some(Mono::now());
            self.flush_conn(ci);
        }
    }
}
