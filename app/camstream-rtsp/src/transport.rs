//! Choosing a transport from a SETUP's Transport header (RFC 2326 §12.39).

use std::fmt;

use rtsp_types::headers::transport::{RtpLowerTransport, RtpProfile};
use rtsp_types::headers::{Transport, Transports};

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Choice {
    /// RTP and RTCP interleaved on the RTSP connection, on these channels.
    Interleaved { rtp: u8, rtcp: u8 },
    /// RTP and RTCP over UDP to these ports of the client's own address.
    Udp { rtp: u16, rtcp: u16 },
}

/// The first unicast RTP/AVP transport offered that can be served.
/// `taken(channel)` says whether another session on the same connection
/// already uses an interleaved channel; a pair asked for but taken is
/// replaced by the lowest free pair. A `destination` parameter is never
/// taken up, so nobody can aim a stream at a third party.
pub fn choose(offered: &Transports, taken: impl Fn(u8) -> bool) -> Option<Choice> {
    let free = |a: u8, b: u8| !taken(a) && !taken(b);
    for t in offered.iter() {
        let Transport::Rtp(rtp) = t else { continue };
        if rtp.profile != RtpProfile::Avp || rtp.params.multicast {
            continue;
        }
        match rtp.lower_transport {
            Some(RtpLowerTransport::Tcp) => {
                let lowest_free = || {
                    (0..=127u8)
                        .map(|k| (2 * k, 2 * k + 1))
                        .find(|&(a, b)| free(a, b))
                };
                let (a, b) = match rtp.params.interleaved {
                    // RTCP's channel is RTP's plus one (RFC 2326 §12.39:
                    // n-(n+1)); any other pair is not a transport.
                    Some((a, b)) if a.checked_add(1).is_none_or(|n| b.unwrap_or(n) != n) => {
                        continue;
                    }
                    Some((a, _)) if free(a, a + 1) => (a, a + 1),
                    _ => lowest_free()?,
                };
                return Some(Choice::Interleaved { rtp: a, rtcp: b });
            }
            None | Some(RtpLowerTransport::Udp) => {
                let Some((p, q)) = rtp.params.client_port else {
                    continue;
                };
                let q = q.unwrap_or(p.wrapping_add(1));
                if p == 0 || q == 0 || p == q {
                    continue;
                }
                return Some(Choice::Udp { rtp: p, rtcp: q });
            }
            _ => continue,
        }
    }
    None
}

/// The reply's Transport header for a choice.
pub struct Reply {
    pub choice: Choice,
    /// Our RTP port (UDP); RTCP is the next one.
    pub server_port: u16,
    pub ssrc: u32,
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ssrc = self.ssrc;
        match self.choice {
            Choice::Interleaved { rtp, rtcp } => {
                write!(
                    f,
                    "RTP/AVP/TCP;unicast;interleaved={rtp}-{rtcp};ssrc={ssrc:08X}"
                )
            }
            Choice::Udp { rtp, rtcp } => write!(
                f,
                "RTP/AVP;unicast;client_port={rtp}-{rtcp};server_port={}-{};ssrc={ssrc:08X}",
                self.server_port,
                self.server_port.wrapping_add(1)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtsp_types::{Message, Request};

    fn offer(header: &str) -> Transports {
        let raw = format!(
            "SETUP rtsp://h/stream/trackID=0 RTSP/1.0\r\nCSeq: 1\r\nTransport: {header}\r\n\r\n"
        );
        let (Message::Request(req), _) = Message::<Vec<u8>>::parse(raw.as_bytes()).unwrap() else {
            panic!()
        };
        let req: Request<Vec<u8>> = req;
        req.typed_header::<Transports>().unwrap().unwrap()
    }

    /// Every Transport header the real clients sent (tests/testdata/rtsp:
    /// FFmpeg, GStreamer and live555, recorded): the stream goes where each
    /// asks.
    #[test]
    fn what_real_clients_offer() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/testdata/rtsp");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for header in text.lines().filter_map(|l| l.strip_prefix("Transport: ")) {
                let pair = |name: &str| -> Option<(u16, u16)> {
                    let v = header.split(';').find_map(|p| p.strip_prefix(name))?;
                    let (a, b) = v.split_once('-').unwrap();
                    Some((a.parse().unwrap(), b.parse().unwrap()))
                };
                let channel = |c: u16| u8::try_from(c).unwrap();
                let expected = match (pair("interleaved="), pair("client_port=")) {
                    (Some((rtp, rtcp)), None) => Choice::Interleaved {
                        rtp: channel(rtp),
                        rtcp: channel(rtcp),
                    },
                    (None, Some((rtp, rtcp))) => Choice::Udp { rtp, rtcp },
                    _ => panic!("{header}"),
                };
                assert_eq!(
                    choose(&offer(header), |_| false),
                    Some(expected),
                    "{header}"
                );
                seen += 1;
            }
        }
        assert!(seen >= 11, "{seen} Transport headers in the transcripts");
    }

    #[test]
    fn what_is_taken_and_what_not() {
        let none = |_| false;
        // A destination is ignored, not refused: the stream goes to the client.
        assert_eq!(
            choose(
                &offer("RTP/AVP;unicast;destination=192.0.2.1;client_port=7000"),
                none
            ),
            Some(Choice::Udp {
                rtp: 7000,
                rtcp: 7001
            })
        );
        assert_eq!(
            choose(&offer("RTP/AVP;unicast;client_port=0-1"), none),
            None
        );
        assert_eq!(
            choose(&offer("RTP/SAVP;unicast;client_port=5000-5001"), none),
            None
        );
    }

    #[test]
    fn taken_channels_are_replaced() {
        let taken = |c| c < 4;
        assert_eq!(
            choose(&offer("RTP/AVP/TCP;unicast;interleaved=0-1"), taken),
            Some(Choice::Interleaved { rtp: 4, rtcp: 5 })
        );
        assert_eq!(choose(&offer("RTP/AVP/TCP;unicast"), |_| true), None);
    }

    /// RTCP's channel is RTP's plus one: other pairs are refused, not
    /// echoed back (a later offer in the header may still be taken).
    #[test]
    fn an_interleaved_pair_is_n_and_n_plus_one() {
        let none = |_| false;
        for pair in ["7-6", "3-3", "0-2", "255", "255-0"] {
            let header = format!("RTP/AVP/TCP;unicast;interleaved={pair}");
            assert_eq!(choose(&offer(&header), none), None, "{pair}");
        }
        assert_eq!(
            choose(&offer("RTP/AVP/TCP;unicast;interleaved=7"), none),
            Some(Choice::Interleaved { rtp: 7, rtcp: 8 })
        );
        assert_eq!(
            choose(
                &offer("RTP/AVP/TCP;unicast;interleaved=7-6,RTP/AVP/TCP;unicast;interleaved=2-3"),
                none
            ),
            Some(Choice::Interleaved { rtp: 2, rtcp: 3 })
        );
    }

    #[test]
    fn reply() {
        let r = Reply {
            choice: Choice::Udp {
                rtp: 5000,
                rtcp: 5001,
            },
            server_port: 6970,
            ssrc: 0xAB,
        };
        assert_eq!(
            r.to_string(),
            "RTP/AVP;unicast;client_port=5000-5001;server_port=6970-6971;ssrc=000000AB"
        );
    }
}
