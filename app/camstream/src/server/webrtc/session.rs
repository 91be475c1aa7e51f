//! One WebRTC viewer: its peer connection (str0m's `Rtc`: ICE-lite,
//! DTLS-SRTP, RTCP with NACK and PLI), the fan-out subscription its frames
//! come from, and the resource a WHEP client names to end it.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use str0m::format::Codec;
use str0m::media::{MediaTime, Mid, Pt};
use str0m::net::Transmit;
use str0m::{Event, IceConnectionState, Output, Rtc};

use super::super::conn::FIRST_TOKEN;
use crate::clock::Mono;
use crate::fanout::{Fanout, SharedFrame, StreamId, SubscriberId};
use crate::table::{Id, TOKEN_SLOTS, Table};

pub type SessionId = Id<Session>;
pub type Sessions = Table<Session>;

/// From here on, the tokens the fan-out wakes WebRTC sessions by (RTSP's
/// UDP sessions have the range below it).
pub const TOKENS: usize = TOKEN_SLOTS / 4 * 3;
const _: () = assert!(TOKENS > FIRST_TOKEN);

pub fn token(si: SessionId) -> mio::Token {
    si.token(TOKENS)
}

pub fn of_token(t: mio::Token) -> Option<SessionId> {
    Id::from_token(t, TOKENS..super::tcp::TOKENS)
}

/// A session's resource and who may end it.
pub struct Owner {
    /// The id in its WHEP resource's URL (random: only its client knows
    /// it).
    pub resource: String,
    /// Who asked for it: the offer's user and address.
    pub user: Option<String>,
    pub peer: IpAddr,
}

impl Owner {
    /// Whether the same user asks (or, where no user signs in, the same
    /// address).
    /// Its id's first characters, for the log.
    pub fn short(&self) -> &str {
        self.resource.get(..8).unwrap_or_default()
    }

    pub fn is(&self, resource: &str, user: Option<&str>, peer: IpAddr) -> bool {
        self.resource == resource
            && match (&self.user, user) {
                (Some(a), Some(b)) => a == b,
                (None, None) => self.peer == peer,
                _ => false,
            }
    }
}

pub struct Session {
    pub rtc: Rtc,
    pub owner: Owner,
    pub stream: StreamId,
    pub subscription: SubscriberId,
    /// The video track and the payload type H.264 has on it.
    pub video: (Mid, Pt),
    pub started: Mono,
    /// ICE and DTLS done: media flows.
    pub connected: bool,
    /// When str0m next wants the time.
    pub due: Instant,
    /// Key frames the browser asked for (PLI, FIR).
    pub key_requests: u64,
}

/// Why a session ends.
pub type Ended = String;

impl Session {
    /// Takes its output: datagrams to `send`, events acted on, until str0m
    /// says when it next wants the time. Err: it is over.
    pub fn drain(
        &mut self,
        send: &mut impl FnMut(&Transmit),
        fanout: &mut Fanout,
    ) -> Result<(), Ended> {
        loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(t)) => {
                    self.due = t;
                    break;
                }
                Ok(Output::Transmit(t)) => send(&t),
                Ok(Output::Event(e)) => self.event(e, fanout)?,
                Err(e) => return Err(format!("WebRTC: {e}")),
            }
        }
        if !self.rtc.is_alive() {
            return Err("the peer connection closed".into());
        }
        Ok(())
    }

    fn event(&mut self, e: Event, fanout: &mut Fanout) -> Result<(), Ended> {
        match e {
            Event::Connected => {
                self.connected = true;
                // The newest key frame at once, else the encoder is asked.
                fanout.set_active(self.subscription, true);
            }
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) => {
                return Err("no ICE check from the browser for 15 s (consent expired)".into());
            }
            // The encoder's limit applies: at most one forced a second.
            Event::KeyframeRequest(_) => {
                self.key_requests += 1;
                fanout.want_key(self.stream);
            }
            _ => {}
        }
        Ok(())
    }

    /// Hands the frames its subscription queued to its packetizer (the
    /// access unit shared by every session through `shared`), then takes
    /// the packets.
    pub fn send_frames(
        &mut self,
        shared: &mut SharedAu,
        send: &mut impl FnMut(&Transmit),
        fanout: &mut Fanout,
    ) -> Result<(), Ended> {
        let (mid, pt) = self.video;
        while let Some(frame) = fanout.next(self.subscription) {
            let Some(writer) = self.rtc.writer(mid) else {
                break;
            };
            let data = shared.of(self.stream, &frame);
            let bytes = data.len();
            let (time, wallclock) = times(&frame);
            if let Err(e) = writer.write(pt, wallclock, time, data) {
                return Err(format!("WebRTC: {e}"));
            }
            fanout.delivered(self.subscription, &frame, bytes);
            self.drain(send, fanout)?;
        }
        Ok(())
    }
}

/// H.264 in packetization mode 1, Baseline or Constrained Baseline (what
/// camstream's encoders make), among the payload types the answer gave
/// the track.
pub fn h264_payload_type(rtc: &mut Rtc, mid: Mid) -> Option<Pt> {
    let writer = rtc.writer(mid)?;
    writer
        .payload_params()
        .find(|p| {
            let spec = p.spec();
            // profile_idc 66 (0x42): Baseline, whatever the constraint
            // flags (Constrained Baseline sets one), which decoders of
            // either take.
            let profile_idc = spec.format.profile_level_id.map(|id| id >> 16);
            spec.codec == Codec::H264
                && spec.format.packetization_mode == Some(1)
                && matches!(profile_idc, Some(0x42) | None)
        })
        .map(|p| p.pt())
}

/// A frame's RTP time (90 kHz from its capture on the monotonic clock,
/// which never wraps) and the instant it was captured (RTCP's sender
/// reports map one to the other).
fn times(frame: &SharedFrame) -> (MediaTime, Instant) {
    let ticks = u128::from(frame.captured.0) * 90_000 / 1_000_000_000;
    let age = Mono::now().saturating_sub(frame.captured);
    let now = Instant::now();
    (
        MediaTime::from_90khz(ticks as u64),
        now.checked_sub(age).unwrap_or(now),
    )
}

/// The newest access unit as every session's packetizer takes it: copied
/// once per frame, not once per viewer.
#[derive(Default)]
pub struct SharedAu {
    of: Option<(StreamId, u16, u32)>,
    data: Option<Arc<[u8]>>,
}

impl SharedAu {
    fn of(&mut self, stream: StreamId, frame: &SharedFrame) -> Arc<[u8]> {
        let key = Some((stream, frame.first_sequence, frame.timestamp));
        match &self.data {
            Some(d) if self.of == key => d.clone(),
            _ => {
                let d: Arc<[u8]> = Arc::from(frame.annex_b());
                self.of = key;
                self.data = Some(d.clone());
                d
            }
        }
    }
}

/// How long a session may take to finish ICE and DTLS.
pub const HANDSHAKE: Duration = Duration::from_secs(10);
