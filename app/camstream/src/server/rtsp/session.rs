//! An RTSP session: one client's stream, set up by SETUP, started by PLAY,
//! ended by TEARDOWN, its connection closing, RTCP BYE or silence. Its
//! frames come from its subscription to the fan-out.
//!
//! A presentation's second track (the sound) set up in the same session is
//! an entry of its own here (its stream, subscription and transport, so
//! sending and RTCP stay one stream's business) that follows its lead, the
//! entry the first SETUP made: the client's session id names the lead,
//! and PLAY, PAUSE, TEARDOWN and silence act on the lead and its tracks
//! together.

use std::net::SocketAddr;
use std::rc::Rc;

use rustix::net::SocketAddrAny;

use super::super::conn::{self, ConnId, SESSION_TOKENS};
use crate::fanout::{Fanout, SharedFrame, StreamId, SubscriberId};
use crate::table::{Id, TOKEN_SLOTS, Table};
use crate::clock::Mono;

pub type SessionId = Id<Session>;
pub type Sessions = Table<Session>;

/// The poll token the fan-out wakes a UDP session by: its frames go out on
/// the shared RTP socket, whatever its connection is doing. (Sessions are
/// at most max_clients, far fewer than the range holds.)
pub fn token(si: SessionId) -> mio::Token {
    si.token(SESSION_TOKENS)
}

/// The UDP session a token names, if it names one.
pub fn of_token(t: mio::Token) -> Option<SessionId> {
    Id::from_token(t, SESSION_TOKENS..TOKEN_SLOTS / 4 * 3)
}

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

/// Where a session is in RFC 2326's state machine (Init is not kept: a
/// session exists from SETUP on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Set up, or paused (PAUSE, RTCP BYE): no frames.
    Ready,
    /// Between PLAY and PAUSE: its subscription takes frames.
    Playing,
}

pub struct Session {
    pub id: String,
    /// Moved only by [`Session::play`] and [`Session::stop`], which move
    /// its subscription with it.
    state: State,
    pub stream: StreamId,
    /// The presentation it is a track of (its picture's stream), and its
    /// track in the presentation's SDP (trackID=N).
    pub presentation: StreamId,
    pub track: u8,
    /// A second track's lead entry (None: it is the lead).
    pub lead: Option<SessionId>,
    /// A lead's second tracks.
    pub tracks: Vec<SessionId>,
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
    pub last_seen: Mono,
    pub next_report: Mono,
    /// Played, its first frame not yet sent: a sender report for that
    /// frame's instant goes before it.
    pub report_first: bool,
    pub warned_send_error: bool,
}

impl Session {
    /// A session SETUP made, Ready.
    #[expect(clippy::too_many_arguments, reason = "each is what SETUP gives it")]
    pub fn new(
        id: String,
        (presentation, stream, track): (StreamId, StreamId, u8),
        subscription: SubscriberId,
        conn: ConnId,
        user: Option<String>,
        peer: SocketAddr,
        transport: Transport,
        now: Mono,
    ) -> Session {
        Session {
            id,
            state: State::Ready,
            stream,
            presentation,
            track,
            lead: None,
            tracks: Vec::new(),
            subscription,
            conn,
            user,
            peer,
            transport,
            sending: None,
            last_seen: now,
            next_report: now,
            report_first: false,
            warned_send_error: false,
        }
    }

    /// The token its frames wake: a UDP session's own (the shared RTP
    /// socket sends them), an interleaved one's connection's.
    pub fn wake(&self, si: SessionId) -> mio::Token {
        match self.transport {
            Transport::Udp { .. } => token(si),
            Transport::Interleaved { .. } => conn::token(self.conn),
        }
    }

    pub fn playing(&self) -> bool {
        self.state == State::Playing
    }

    /// PLAY: frames from the newest on (`at_once`; else from the next),
    /// a sender report before the first and another within a second.
    pub fn play(&mut self, fanout: &mut Fanout, now: Mono, at_once: bool) {
        self.state = State::Playing;
        self.next_report = now.add(std::time::Duration::from_secs(1));
        self.report_first = true;
        if at_once {
            fanout.set_active(self.subscription, true);
        } else {
            fanout.start_from_next(self.subscription);
        }
    }

    /// PAUSE or RTCP BYE: what is queued is dropped, a UDP frame being
    /// sent is finished unless `drop_sending`.
    pub fn stop(&mut self, fanout: &mut Fanout, drop_sending: bool) {
        self.state = State::Ready;
        fanout.set_active(self.subscription, false);
        if drop_sending {
            self.sending = None;
        }
    }
}
