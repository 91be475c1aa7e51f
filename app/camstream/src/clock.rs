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

    /// This instant rounded down to a whole millisecond, which is a whole
    /// number (90) of RTP/JPEG clock ticks. Sources start their frame grids
    /// there and the RTP clock its origin, so frames due every 1/fps second
    /// get timestamps exactly 90000/fps apart.
    pub fn whole_ms(self) -> Mono {
        Mono(self.0 - self.0 % 1_000_000)
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
        RtpClock {
            origin: origin.whole_ms(),
            offset,
        }
    }

    pub fn timestamp(&self, t: Mono) -> u32 {
        let ns = t.0.wrapping_sub(self.origin.0) as i64 as i128;
        // Rounded to the nearest tick, so frames on an exact 1/fps grid are
        // exactly 90000/fps apart (floor would make some 2999 at 30 fps).
        let ticks = (ns * i128::from(JPEG_CLOCK_RATE) + 500_000_000).div_euclid(1_000_000_000);
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
        // Frames due every 1/30 s (whole nanoseconds, rounded down) from a
        // whole millisecond are 3000 ticks apart, whenever the clock started.
        for origin in [0u64, 1, 5_555, 16_666_667, 33_333_332] {
            let c = RtpClock::new(Mono(origin), 0);
            let base = Mono(1_234_567_891).whole_ms();
            let due = |k: u64| Mono(base.0 + k * 1_000_000_000 / 30);
            for k in 0..1000 {
                let step = c.timestamp(due(k + 1)).wrapping_sub(c.timestamp(due(k)));
                assert_eq!(step, 3000, "origin {origin}, frame {k}");
            }
        }
    }
}
