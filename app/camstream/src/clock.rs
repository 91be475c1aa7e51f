//! Time. Frames carry CLOCK_MONOTONIC capture times (the clock V4L2 buffer
//! timestamps use), so RTP timestamps follow when a frame was captured and
//! never jump when the wall clock is set; RTCP maps them to wall-clock time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use camstream_rtp::rtcp::ntp_from_unix;
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

/// Maps capture times to the stream's RTP clock (its codec's rate: 90 kHz
/// for video), which starts at a random offset (RFC 3550 5.1).
#[derive(Debug, Clone, Copy)]
pub struct RtpClock {
    origin: Mono,
    offset: u32,
    rate: u32,
}

impl RtpClock {
    pub fn new(origin: Mono, offset: u32, rate: u32) -> RtpClock {
        RtpClock {
            origin: origin.whole_ms(),
            offset,
            rate,
        }
    }

    /// The timestamp at its origin: where a count of ticks (audio's
    /// samples) starts.
    pub fn offset(&self) -> u32 {
        self.offset
    }

    pub fn timestamp(&self, t: Mono) -> u32 {
        let ns = t.0.wrapping_sub(self.origin.0) as i64 as i128;
        // Rounded to the nearest tick, so frames on an exact 1/fps grid are
        // exactly 90000/fps apart (floor would make some 2999 at 30 fps).
        let ticks = (ns * i128::from(self.rate) + 500_000_000).div_euclid(1_000_000_000);
        self.offset.wrapping_add(ticks as i64 as u32)
    }
}

/// Wall-clock time now in nanoseconds since the Unix epoch (negative before
/// it), and the monotonic instant it was read at.
pub fn wall_now() -> (i128, Mono) {
    let mono = Mono::now();
    let wall = match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    };
    (wall, mono)
}

/// Wall-clock time now as NTP, and the monotonic instant it was read at.
pub fn ntp_now() -> (u64, Mono) {
    let (wall, mono) = wall_now();
    // A clock before 1970 (a board without a battery-backed clock) as 1970.
    let wall = wall.max(0);
    let ntp = ntp_from_unix((wall / 1_000_000_000) as u64, (wall % 1_000_000_000) as u32);
    (ntp, mono)
}

/// Notices the wall clock being set (ntpd stepping it, `date -s`, or a
/// resume from suspend, which CLOCK_MONOTONIC does not count): the offset
/// between wall and monotonic time changing faster than slewing can.
#[derive(Debug, Default)]
pub struct WallClockWatch {
    /// Wall minus monotonic nanoseconds at the last observation, and when.
    last: Option<(i128, Mono)>,
}

impl WallClockWatch {
    /// Below reference ntpd's smallest step (128 ms; BusyBox ntpd steps only over 1 s).
    const STEP_NS: i128 = 100_000_000;
    /// Slewing changes the offset at most 1% of the time elapsed: BusyBox
    /// ntpd slews up to 0.5 s through the kernel PLL, which corrects 1/64 of
    /// it a second (8 ms/s), plus at most 500 ppm of frequency.
    const SLEW_PER_NS: i128 = 100;

    /// Takes what [`wall_now`] read. Returns how far the wall clock was set
    /// since the last observation, in nanoseconds (negative: back), if it was.
    pub fn observe(&mut self, wall_ns: i128, mono: Mono) -> Option<i64> {
        let offset = wall_ns - i128::from(mono.0);
        let (last_offset, last_mono) = self.last.replace((offset, mono))?;
        let step = offset - last_offset;
        let elapsed = i128::from(mono.0.saturating_sub(last_mono.0));
        (step.abs() >= Self::STEP_NS + elapsed / Self::SLEW_PER_NS)
            .then(|| step.clamp(i64::MIN.into(), i64::MAX.into()) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use camstream_rtp::rtp::JPEG_CLOCK_RATE;

    const S: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;
    /// 2025-01-01T00:00:00Z in nanoseconds since the Unix epoch.
    const WALL: i128 = 1_735_689_600 * S as i128;

    #[test]
    fn wall_clock_steady_or_slewing_is_no_step() {
        let mut w = WallClockWatch::default();
        // Observations 250 ms apart (the housekeeping tick), clocks together.
        for k in 0..100u64 {
            let t = k * 250 * MS;
            assert_eq!(w.observe(WALL + i128::from(t), Mono(5 * S + t)), None);
        }
        // The fastest kernel PLL slew (1/64 of a 0.5 s offset a second) plus
        // 500 ppm of frequency, either way, a tick or a second apart.
        for sign in [1i128, -1] {
            let mut w = WallClockWatch::default();
            let (mut wall, mut mono) = (WALL, 5 * S);
            for gap in [250 * MS, S, 250 * MS, S] {
                assert_eq!(w.observe(wall, Mono(mono)), None);
                mono += gap;
                let slew = i128::from(gap) * (7_813 + 500) / 1_000_000;
                wall += i128::from(gap) + sign * slew;
            }
            assert_eq!(w.observe(wall, Mono(mono)), None);
        }
        // 500 ppm over long gaps (a loop that stalled, a test stepping time).
        let mut w = WallClockWatch::default();
        let (mut wall, mut mono) = (WALL, 5 * S);
        for gap in [60 * S, 3600 * S, 86_400 * S] {
            assert_eq!(w.observe(wall, Mono(mono)), None);
            mono += gap;
            wall += i128::from(gap) - i128::from(gap) / 2_000;
        }
        assert_eq!(w.observe(wall, Mono(mono)), None);
    }

    #[test]
    fn wall_clock_steps_found_with_sign_and_size() {
        let mut w = WallClockWatch::default();
        // The first observation has nothing to compare with, even the 1970
        // of a board without a battery-backed clock.
        assert_eq!(w.observe(3 * i128::from(S), Mono(3 * S)), None);
        // ntpd at boot sets 2025, 250 ms later.
        let mono = 3 * S + 250 * MS;
        let step = w.observe(WALL + 4_000_000, Mono(mono));
        assert_eq!(step, Some((WALL + 4_000_000 - i128::from(mono)) as i64));
        // Steady again: no step.
        let next = |k: u64| {
            (
                WALL + 4_000_000 + i128::from(k * 250 * MS),
                Mono(mono + k * 250 * MS),
            )
        };
        let (wall, m) = next(1);
        assert_eq!(w.observe(wall, m), None);
        // Forward an hour and 4 ms (`date -s`), then back 2 s.
        let (wall, m) = next(2);
        assert_eq!(
            w.observe(wall + 3_600_004 * i128::from(MS), m),
            Some(3_600_004_000_000)
        );
        let (wall, m) = next(3);
        assert_eq!(
            w.observe(wall + 3_598_004 * i128::from(MS), m),
            Some(-2_000_000_000)
        );
        // Reference ntpd's smallest step, back, a tick later; then a step
        // found across a 10 s gap.
        let (wall, m) = next(4);
        assert_eq!(
            w.observe(wall + 3_597_876 * i128::from(MS), m),
            Some(-128_000_000)
        );
        let (wall, m) = next(44);
        assert_eq!(
            w.observe(wall + 3_598_876 * i128::from(MS), m),
            Some(1_000_000_000)
        );
    }

    #[test]
    fn rtp_clock_ticks_at_90khz_and_wraps() {
        let c = RtpClock::new(Mono(1_000_000_000), u32::MAX - 10, JPEG_CLOCK_RATE);
        assert_eq!(c.timestamp(Mono(1_000_000_000)), u32::MAX - 10);
        assert_eq!(c.timestamp(Mono(2_000_000_000)), 90_000 - 11);
        // A frame captured a little before the origin (V4L2 buffers queued earlier).
        assert_eq!(c.timestamp(Mono(999_000_000)), u32::MAX - 10 - 90);
        // Frames due every 1/30 s (whole nanoseconds, rounded down) from a
        // whole millisecond are 3000 ticks apart, whenever the clock started.
        for origin in [0u64, 1, 5_555, 16_666_667, 33_333_332] {
            let c = RtpClock::new(Mono(origin), 0, JPEG_CLOCK_RATE);
            let base = Mono(1_234_567_891).whole_ms();
            let due = |k: u64| Mono(base.0 + k * 1_000_000_000 / 30);
            for k in 0..1000 {
                let step = c.timestamp(due(k + 1)).wrapping_sub(c.timestamp(due(k)));
                assert_eq!(step, 3000, "origin {origin}, frame {k}");
            }
        }
    }
}
