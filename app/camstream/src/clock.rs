//! Time. Frames carry CLOCK_MONOTONIC capture times (the clock V4L2 buffer
//! timestamps use), so RTP timestamps follow when a frame was captured and
//! never jump when the wall clock is set; RTCP maps them to wall-clock time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use camstream_rtp::rtcp::ntp_from_unix;
use camstream_rtp::rtp::JPEG_CLOCK_RATE;
use rustix::time::{ClockId, clock_gettime};

/// A CLOCK_MONOTONIC instant in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mono(pub u64);

impl Mono {
    pub fn now() -> Mono {
        let t = clock_gettime(ClockId::Monotonic);
        Mono(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64)
    }

    pub fn saturating_sub(self, earlier: Mono) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    pub fn add(self, d: Duration) -> Mono {
        Mono(self.0 + d.as_nanos() as u64)
    }
}

/// Maps capture times to the stream's 90 kHz RTP clock, which starts at a
/// random offset (RFC 3550 5.1).
#[derive(Debug, Clone, Copy)]
pub struct RtpClock {
    origin: Mono,
    offset: u32,
}

impl RtpClock {
    pub fn new(origin: Mono, offset: u32) -> RtpClock {
        RtpClock { origin, offset }
    }

    pub fn timestamp(&self, t: Mono) -> u32 {
        let ns = t.0.wrapping_sub(self.origin.0) as i64 as i128;
        let ticks = ns * i128::from(JPEG_CLOCK_RATE) / 1_000_000_000;
        self.offset.wrapping_add(ticks as i64 as u32)
    }
}

/// Wall-clock time now as NTP, and the monotonic instant it was read at.
pub fn ntp_now() -> (u64, Mono) {
    let mono = Mono::now();
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (ntp_from_unix(wall.as_secs(), wall.subsec_nanos()), mono)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtp_clock_ticks_at_90khz_and_wraps() {
        let c = RtpClock::new(Mono(1_000_000_000), u32::MAX - 10);
        assert_eq!(c.timestamp(Mono(1_000_000_000)), u32::MAX - 10);
        assert_eq!(c.timestamp(Mono(2_000_000_000)), 90_000 - 11);
        // A frame captured a little before the origin (V4L2 buffers queued earlier).
        assert_eq!(c.timestamp(Mono(999_000_000)), u32::MAX - 10 - 90);
    }
}
