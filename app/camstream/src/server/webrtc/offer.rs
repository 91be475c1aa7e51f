//! What camstream takes of a WHEP offer before the WebRTC stack reads it:
//! the browser's ICE candidates on the camera's own networks (or all of
//! them when the camera is reached through a NAT, where its extra
//! candidates are set), and the addresses the camera offers back. Pure:
//! no I/O.

use std::net::{IpAddr, SocketAddr};

/// A network of the camera's: an address and its prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Network {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Network {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let bits = u32::from(self.prefix.min(32));
                let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let bits = u32::from(self.prefix.min(128));
                let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

/// The connection address of an SDP `a=candidate:` line
/// (foundation, component, transport, priority, address, port, ...), or
/// None if it is not one; an address that is not an IP (a browser's
/// mDNS name) is Some(None).
fn candidate_address(line: &str) -> Option<Option<IpAddr>> {
    let rest = line.strip_prefix("a=candidate:")?;
    let addr = rest.split_ascii_whitespace().nth(4)?;
    Some(addr.parse().ok())
}

/// `sdp` with the candidates that name an address outside `networks`
/// left out, and how many were; with `networks` empty, all are kept.
/// Loopback is the camera's own. A name (an mDNS candidate, which the
/// camera does not resolve) is left out: ICE-lite learns the browser's
/// address from its checks anyway.
pub fn keep_local_candidates(sdp: &str, networks: &[Network]) -> (String, usize) {
    let mut out = String::with_capacity(sdp.len());
    let mut dropped = 0;
    for line in sdp.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\r', '\n']);
        let keep = match candidate_address(bare) {
            None => true,
            Some(_) if networks.is_empty() => true,
            Some(None) => false,
            Some(Some(ip)) => ip.is_loopback() || networks.iter().any(|n| n.contains(ip)),
        };
        if keep {
            out.push_str(line);
        } else {
            dropped += 1;
        }
    }
    (out, dropped)
}

/// The mid of the first `kind` ("video", "audio") section an answer
/// accepted (port not 0), or None: the offer had none the camera can send.
pub fn accepted_mid<'a>(answer: &'a str, kind: &str) -> Option<&'a str> {
    let mut in_kind = false;
    for line in answer.lines() {
        if let Some(m) = line.strip_prefix("m=") {
            let mut f = m.split_ascii_whitespace();
            in_kind = f.next() == Some(kind) && f.next().is_some_and(|p| p != "0");
        } else if let (true, Some(mid)) = (in_kind, line.strip_prefix("a=mid:")) {
            return Some(mid.trim());
        }
    }
    None
}

/// The host candidates the camera offers on `port`: the address the
/// browser reached the page on first (it can reach that one), then the
/// camera's other addresses when it listens on all of them, then the
/// configured extra ones (the address a NAT or port forwarding shows),
/// each once.
pub fn local_candidates(
    reached: IpAddr,
    listen: IpAddr,
    interfaces: &[IpAddr],
    port: u16,
    extra: &[SocketAddr],
) -> Vec<SocketAddr> {
    let mut out: Vec<SocketAddr> = Vec::new();
    let mut push = |a: SocketAddr| {
        if !out.contains(&a) {
            out.push(a);
        }
    };
    let first = if listen.is_unspecified() { reached } else { listen };
    push(SocketAddr::new(first, port));
    if listen.is_unspecified() {
        for &ip in interfaces {
            if ip.is_ipv4() == reached.is_ipv4() {
                push(SocketAddr::new(ip, port));
            }
        }
    }
    for &a in extra {
        push(a);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Candidate lines as browsers write them (RFC 8839): a host candidate,
    // an mDNS one (Chromium hides its addresses so), a server-reflexive
    // one, a loopback one.
    const OFFER: &str = "v=0\r\n\
        m=video 9 UDP/TLS/RTP/SAVPF 96\r\n\
        a=candidate:1 1 udp 2122260223 192.168.1.20 50000 typ host generation 0\r\n\
        a=candidate:2 1 udp 2122260223 5c2e1c9b-8d2a-4c39-a3c1-bb45d4c1f0e2.local 50001 typ host\r\n\
        a=candidate:3 1 udp 1686052607 203.0.113.9 50000 typ srflx raddr 192.168.1.20 rport 50000\r\n\
        a=candidate:4 1 udp 2122260223 127.0.0.1 50002 typ host\r\n\
        a=mid:0\r\n";

    fn lan() -> Vec<Network> {
        vec![Network {
            addr: "192.168.1.7".parse().unwrap(),
            prefix: 24,
        }]
    }

    #[test]
    fn candidates_outside_the_cameras_networks_are_left_out() {
        let (kept, dropped) = keep_local_candidates(OFFER, &lan());
        assert_eq!(dropped, 2);
        assert!(kept.contains("192.168.1.20 50000 typ host"));
        assert!(kept.contains("127.0.0.1 50002"));
        assert!(!kept.contains("203.0.113.9"));
        assert!(!kept.contains(".local"));
        assert!(kept.starts_with("v=0\r\nm=video") && kept.ends_with("a=mid:0\r\n"));
    }

    #[test]
    fn behind_a_nat_every_candidate_is_kept() {
        let (kept, dropped) = keep_local_candidates(OFFER, &[]);
        assert_eq!((kept.as_str(), dropped), (OFFER, 0));
    }

    #[test]
    fn the_answers_accepted_mids() {
        let answer = "v=0\r\nm=audio 0 UDP/TLS/RTP/SAVPF 0\r\na=mid:a\r\n\
            m=video 9 UDP/TLS/RTP/SAVPF 102\r\na=sendonly\r\na=mid:1\r\n\
            m=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=sendonly\r\na=mid:2\r\n";
        assert_eq!(accepted_mid(answer, "video"), Some("1"));
        assert_eq!(accepted_mid(answer, "audio"), Some("2"));
        let rejected = "v=0\r\nm=video 0 UDP/TLS/RTP/SAVPF 0\r\na=mid:0\r\n";
        assert_eq!(accepted_mid(rejected, "video"), None);
        assert_eq!(accepted_mid("v=0\r\n", "audio"), None);
    }

    #[test]
    fn prefixes() {
        let n = |a: &str, p| Network {
            addr: a.parse().unwrap(),
            prefix: p,
        };
        assert!(n("10.0.2.15", 24).contains("10.0.2.2".parse().unwrap()));
        assert!(!n("10.0.2.15", 24).contains("10.0.3.2".parse().unwrap()));
        assert!(n("10.0.2.15", 0).contains("8.8.8.8".parse().unwrap()));
        assert!(n("10.0.2.15", 32).contains("10.0.2.15".parse().unwrap()));
        assert!(!n("10.0.2.15", 32).contains("10.0.2.16".parse().unwrap()));
        assert!(n("fd00::1", 64).contains("fd00::99".parse().unwrap()));
        assert!(!n("fd00::1", 64).contains("10.0.2.15".parse().unwrap()));
    }

    #[test]
    fn the_reached_address_first_then_the_others_then_the_extra_ones() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let any = ip("0.0.0.0");
        let got = local_candidates(
            ip("192.168.1.7"),
            any,
            &[ip("10.0.0.3"), ip("192.168.1.7")],
            8555,
            &["203.0.113.7:18555".parse().unwrap()],
        );
        let want: Vec<SocketAddr> = ["192.168.1.7:8555", "10.0.0.3:8555", "203.0.113.7:18555"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(got, want);
        // Listening on one address: that one alone (and the extra ones).
        let got = local_candidates(ip("127.0.0.1"), ip("127.0.0.1"), &[ip("10.0.0.3")], 9, &[]);
        assert_eq!(got, vec!["127.0.0.1:9".parse::<SocketAddr>().unwrap()]);
    }
}
