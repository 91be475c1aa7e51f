//! An RTSP session: one client's stream, set up by SETUP, started by PLAY,
//! ended by TEARDOWN, its connection closing, RTCP BYE or silence. Its
//! frames come from its subscription to the fan-out.

use std::net::SocketAddr;
use std::rc::Rc;

use rustix::net::SocketAddrAny;

use super::super::conn::ConnId;
use crate::fanout::{SharedFrame, StreamId, SubscriberId};
use crate::table::{Id, Table};
use crate::clock::Mono;

pub type SessionId = Id<Session>;
pub type Sessions = Table<Session>;

pub enum Transport {
    Udp {
        rtp: SocketAddrAny,
        rtcp: SocketAddr,
    },
    Interleaved {
        rtp: u8,
        rtcp: u8,
    },
}

impl Transport {
    /// Whether `self` and `other` send to, or hear RTCP from, the same UDP
    /// address and port.
    pub fn shares_ports(&self, other: &Transport) -> bool {
        let (
            Transport::Udp { rtp, rtcp },
            Transport::Udp {
                rtp: other_rtp,
                rtcp: other_rtcp,
            },
        ) = (self, other)
        else {
            return false;
        };
        let (rtcp_any, other_rtcp_any) =
            (SocketAddrAny::from(*rtcp), SocketAddrAny::from(*other_rtcp));
        rtcp == other_rtcp || rtp == other_rtp || *rtp == other_rtcp_any || *other_rtp == rtcp_any
    }
}

pub struct Session {
    pub id: String,
    pub stream: StreamId,
    /// Its frames.
    pub subscription: SubscriberId,
    /// The connection that set it up (a tunnel's GET side).
    pub conn: ConnId,
    /// The user who set it up, when users are set: requests from that user
    /// on another connection may control it too.
    pub user: Option<String>,
    pub peer: SocketAddr,
    pub transport: Transport,
    /// UDP: the frame being sent and how many of its packets went.
    pub sending: Option<(Rc<SharedFrame>, usize)>,
    pub in_udp_backlog: bool,
    pub last_seen: Mono,
    pub next_report: Mono,
    /// RTCP sender counts (wrap as RFC 3550 says).
    pub packets: u32,
    pub octets: u32,
    pub warned_send_error: bool,
}
