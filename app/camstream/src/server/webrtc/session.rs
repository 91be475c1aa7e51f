//! One WebRTC viewer: its peer connection (str0m's `Rtc`: ICE-lite,
//! DTLS-SRTP, RTCP with NACK and PLI), the fan-out subscriptions its
//! frames come from (the picture's, and the sound's where the offer asked
//! for it), and the resource a WHEP client names to end it.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use camstream_audio::packetize::Format;
use camstream_rtp::rtp::HEADER_LEN;
use str0m::format::Codec;
use str0m::media::{Frequency, MediaTime, Mid, Pt};
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
    /// The sound, where the offer asked for it and the camera has it in a
    /// codec browsers take.
    pub audio: Option<AudioTrack>,
    pub started: Mono,
    /// ICE and DTLS done: media flows.
    pub connected: bool,
    /// When str0m next wants the time.
    pub due: Instant,
    /// Key frames the browser asked for (PLI, FIR).
    pub key_requests: u64,
}

/// A session's sound: its track, the payload type its codec has on it,
/// and its subscription to the fan-out's audio stream.
pub struct AudioTrack {
    pub mid: Mid,
    pub pt: Pt,
    pub stream: StreamId,
    pub subscription: SubscriberId,
    pub rate: Frequency,
    /// The frames' RTP timestamps, 32 bits, as the 64-bit time str0m takes.
    pub time: Unwrap,
}

/// 32-bit RTP timestamps as a 64-bit count that does not wrap (every 25
/// hours at 48 kHz), for str0m's media time.
#[derive(Default, Clone, Copy)]
pub struct Unwrap {
    last: Option<(u32, u64)>,
}

impl Unwrap {
    /// The count for `ts`: as far from the last one's as `ts` is from the
    /// last timestamp (forward or back by less than 2^31), from 2^32 on so
    /// a step back from the first is no underflow.
    pub fn next(&mut self, ts: u32) -> u64 {
        let at = match self.last {
            None => (1 << 32) + u64::from(ts),
            Some((last, at)) => at.wrapping_add_signed(i64::from(ts.wrapping_sub(last) as i32)),
        };
        self.last = Some((ts, at));
        at
    }
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
                // The sound's capture starts with its first listener.
                if let Some(a) = &self.audio {
                    fanout.set_active(a.subscription, true);
                }
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

    /// Hands the frames its subscriptions queued to its packetizer (each
    /// frame's payload shared by every session through `shared`), then
    /// takes the packets.
    pub fn send_frames(
        &mut self,
        shared: &mut Shared,
        send: &mut impl FnMut(&Transmit),
        fanout: &mut Fanout,
    ) -> Result<(), Ended> {
        let (mid, pt) = self.video;
        while let Some(frame) = fanout.next(self.subscription) {
            let Some(writer) = self.rtc.writer(mid) else {
                break;
            };
            let data = shared.video.of(self.stream, &frame, frame.annex_b());
            let bytes = data.len();
            let (time, wallclock) = times(&frame);
            if let Err(e) = writer.write(pt, wallclock, time, data) {
                return Err(format!("WebRTC: {e}"));
            }
            fanout.delivered(self.subscription, &frame, bytes);
            self.drain(send, fanout)?;
        }
        let Some(a) = &self.audio else {
            return Ok(());
        };
        let (mid, pt, stream, subscription, rate, mut clock) = (a.mid, a.pt, a.stream, a.subscription, a.rate, a.time);
        while let Some(frame) = fanout.next(subscription) {
            let Some(writer) = self.rtc.writer(mid) else {
                break;
            };
            // Opus and PCMU frames are one RTP packet each: its payload is
            // the frame as str0m packetizes it again.
            let data = shared.audio.of(stream, &frame, frame.packet(0).get(HEADER_LEN..).unwrap_or_default());
            let bytes = data.len();
            let time = MediaTime::new(clock.next(frame.timestamp), rate);
            if let Err(e) = writer.write(pt, captured_at(&frame), time, data) {
                return Err(format!("WebRTC: {e}"));
            }
            fanout.delivered(subscription, &frame, bytes);
            self.drain(send, fanout)?;
        }
        if let Some(a) = &mut self.audio {
            a.time = clock;
        }
        Ok(())
    }
}

/// The codec a session's sound goes in, where browsers take the camera's:
/// Opus and G.711 µ-law, not AAC.
pub fn webrtc_codec(format: Format) -> Option<Codec> {
    match format {
        Format::Opus => Some(Codec::Opus),
        Format::Pcmu => Some(Codec::PCMU),
        Format::Aac(_) => None,
    }
}

/// `codec`'s payload type among those the answer gave the track.
pub fn audio_payload_type(rtc: &mut Rtc, mid: Mid, codec: Codec) -> Option<Pt> {
    let writer = rtc.writer(mid)?;
    writer.payload_params().find(|p| p.spec().codec == codec).map(|p| p.pt())
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
    (MediaTime::from_90khz(ticks as u64), captured_at(frame))
}

/// The instant `frame` was captured, on str0m's clock.
fn captured_at(frame: &SharedFrame) -> Instant {
    let age = Mono::now().saturating_sub(frame.captured);
    let now = Instant::now();
    now.checked_sub(age).unwrap_or(now)
}

/// The newest frame of each kind as every session's packetizer takes it:
/// copied once per frame, not once per viewer.
#[derive(Default)]
pub struct Shared {
    video: SharedFrameData,
    audio: SharedFrameData,
}

#[derive(Default)]
struct SharedFrameData {
    of: Option<(StreamId, u16, u32)>,
    data: Option<Arc<[u8]>>,
}

impl SharedFrameData {
    /// `bytes` (of `frame`, from `stream`) shared, copied if this is
    /// another frame than the last one's.
    fn of(&mut self, stream: StreamId, frame: &SharedFrame, bytes: &[u8]) -> Arc<[u8]> {
        let key = Some((stream, frame.first_sequence, frame.timestamp));
        match &self.data {
            Some(d) if self.of == key => d.clone(),
            _ => {
                let d: Arc<[u8]> = Arc::from(bytes);
                self.of = key;
                self.data = Some(d.clone());
                d
            }
        }
    }
}

/// How long a session may take to finish ICE and DTLS.
pub const HANDSHAKE: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtp_timestamps_unwrap_across_the_wrap_and_steps_back() {
        let mut u = Unwrap::default();
        let first = u.next(u32::MAX - 959);
        assert_eq!(u.next(0), first + 960);
        assert_eq!(u.next(960), first + 1920);
        // A step back (a restarted capture) stays one, not a jump forward
        // of a day.
        assert_eq!(u.next(0), first + 960);
        let mut fresh = Unwrap::default();
        assert_eq!(fresh.next(0), 1 << 32);
        assert_eq!(fresh.next(u32::MAX), (1 << 32) - 1);
    }
}
