//! RTSP over HTTP (Apple's QuickTime scheme, which ONVIF Profile S names and
//! live555/VLC, FFmpeg and GStreamer's rtsph:// speak): the client opens a
//! GET and a POST with the same x-sessioncookie. The GET's connection
//! becomes an RTSP connection whose replies and interleaved frames go out
//! on it; the POST carries the requests, base64-encoded, and gets no reply.
//! A session set up through the tunnel belongs to the GET's connection, so
//! requests from any POST of that tunnel (clients may open a new one per
//! request) control it, as the connection that made it.

use camstream_http::tunnel::Decoder;

use super::super::conn::Proto;
use super::super::rtsp::RtspConn;
use super::{HttpConn, Server, State, write_head, write_text};
use crate::clock::Mono;

/// Longest x-sessioncookie taken (clients send 22-32 characters).
const MAX_COOKIE: usize = 128;

impl Server {
    /// The GET side: answer 200 with the tunnel's content type and from now
    /// on treat the connection as RTSP.
    pub(super) fn tunnel_get(&mut self, ci: usize, cookie: String) {
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
        conn.proto = Proto::Rtsp(RtspConn::tunnel(cookie.clone()));
        self.tunnels.insert(cookie, ci);
    }

    /// The POST side: its body, from now on, is base64 RTSP for the GET
    /// side's connection. It must come from the GET side's address.
    pub(super) fn tunnel_post(&mut self, ci: usize, cookie: String) {
        let peer = self.conns[ci].peer;
        let target = self
            .tunnels
            .get(&cookie)
            .copied()
            .filter(|&t| self.conns.get(t).is_some_and(|c| c.peer.ip() == peer.ip()));
        let conn = &mut self.conns[ci];
        let Some(target) = target else {
            log::info!("{peer}: RTSP-over-HTTP POST for no tunnel of this address");
            write_text(
                &mut conn.ctrl,
                404,
                "no RTSP-over-HTTP GET from this address with this x-sessioncookie",
                false,
                true,
            );
            conn.closing = Some(Mono::now());
            return;
        };
        conn.request_started = None;
        if let Proto::Http(h) = &mut conn.proto {
            h.state = State::TunnelIn {
                target,
                decoder: Decoder::default(),
            };
        }
        if let Some(r) = self.conns[target].rtsp_mut() {
            r.tunnel_post = Some(ci);
        }
    }

    /// Base64 on a POST side: decoded into the GET side's input, which is
    /// then handled as any RTSP connection's.
    pub(super) fn tunnel_input(&mut self, ci: usize) {
        let Some(Proto::Http(HttpConn {
            state: State::TunnelIn { target, .. },
            ..
        })) = self.conns.get(ci).map(|c| &c.proto)
        else {
            return;
        };
        let target = *target;
        let Some(get) = self.conns.get(target) else {
            return self.close_conn(ci, "the tunnel's GET side is gone");
        };
        // The GET side is not reading (its client does not read replies):
        // neither is this side, until it does.
        let get_paused = get.read_paused;
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
        if let Err(e) = result {
            log::info!("{}: RTSP over HTTP: {e}; closing the POST side", conn.peer);
            write_text(&mut conn.ctrl, 400, &e.to_string(), false, true);
            conn.closing = Some(Mono::now());
            self.flush_conn(ci);
            // What came before the bad byte is still the client's.
        }
        let get = &mut self.conns[target];
        get.inbuf.extend_from_slice(&decoded);
        get.last_input = last_input;
        self.rtsp_input(target);
    }
}
