//! What the server's tables say of each other, checked: every reference
//! from a connection or session to another names a live one that says the
//! same back. The `connections` fuzz target checks it after every step.

use std::collections::HashMap;
use std::net::IpAddr;

use super::Server;
use super::conn::Proto;
use super::http::State;
use super::rtsp::Transport;

impl Server {
    /// Ok, or what does not hold.
    pub fn audit(&self) -> Result<(), String> {
        for (si, s) in self.sessions.iter() {
            let Some(conn) = self.conns.get(s.conn) else {
                return Err(format!(
                    "session {si:?} names a gone connection {:?}",
                    s.conn
                ));
            };
            if !conn.rtsp().is_some_and(|r| r.sessions.contains(&si)) {
                return Err(format!("session {si:?} is not listed by its connection"));
            }
            if self.session_ids.get(&s.id) != Some(&si) {
                return Err(format!("session {si:?} is not found by its id"));
            }
            if s.peer.ip() != conn.peer.ip() {
                return Err(format!(
                    "session {si:?} is of another address than its connection"
                ));
            }
        }
        for (id, &si) in &self.session_ids {
            if self.sessions.get(si).is_none_or(|s| &s.id != id) {
                return Err(format!("session id {id} names {si:?}, gone or another"));
            }
        }
        for (addr, &si) in &self.session_by_rtcp {
            match self.sessions.get(si).map(|s| &s.transport) {
                Some(Transport::Udp { rtcp, .. }) if rtcp == addr => {}
                _ => return Err(format!("RTCP from {addr} names {si:?}, gone or another")),
            }
        }
        if let Some(si) = self
            .udp_backlog
            .iter()
            .find(|&&si| self.sessions.get(si).is_none())
        {
            return Err(format!("the UDP backlog holds a gone session {si:?}"));
        }
        let mut per_ip: HashMap<IpAddr, usize> = HashMap::new();
        for (ci, c) in self.conns.iter() {
            *per_ip.entry(c.peer.ip()).or_insert(0) += 1;
            match &c.proto {
                Proto::Rtsp(r) => {
                    for &si in &r.sessions {
                        if self.sessions.get(si).is_none_or(|s| s.conn != ci) {
                            return Err(format!(
                                "connection {ci:?} lists {si:?}, gone or another's"
                            ));
                        }
                    }
                    let Some(t) = &r.tunnel else { continue };
                    if self.tunnels.get(&t.cookie) != Some(&ci) {
                        return Err(format!("tunnel GET {ci:?} is not found by its cookie"));
                    }
                    let Some(post) = t.post else { continue };
                    let Some(p) = self.conns.get(post) else {
                        return Err(format!("tunnel GET {ci:?} names a gone POST {post:?}"));
                    };
                    if !matches!(&p.proto, Proto::Http(h) if matches!(h.state, State::TunnelIn { get, .. } if get == ci))
                    {
                        return Err(format!("tunnel GET {ci:?}'s POST {post:?} is not its own"));
                    }
                    if p.peer.ip() != c.peer.ip() {
                        return Err(format!(
                            "tunnel GET {ci:?}'s POST comes from another address"
                        ));
                    }
                }
                Proto::Http(h) => {
                    if let State::TunnelIn { get, .. } = h.state {
                        let post = self
                            .conns
                            .get(get)
                            .and_then(|g| g.rtsp())
                            .and_then(|r| r.tunnel.as_ref())
                            .and_then(|t| t.post);
                        if post != Some(ci) {
                            return Err(format!("tunnel POST {ci:?} is not its GET {get:?}'s"));
                        }
                    }
                }
            }
        }
        for (cookie, &get) in &self.tunnels {
            if self
                .conns
                .get(get)
                .and_then(|c| c.rtsp())
                .and_then(|r| r.tunnel.as_ref())
                .is_none_or(|t| &t.cookie != cookie)
            {
                return Err(format!("tunnel {cookie} names {get:?}, gone or another"));
            }
        }
        if !self.admission.counts_match(&per_ip) {
            return Err("admission's count of connections per address is off".into());
        }
        Ok(())
    }
}
