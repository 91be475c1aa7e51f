//! A sound card's sample count against the monotonic clock. Audio's RTP
//! timestamps count samples (so they run without gaps), and the card's
//! crystal is not the system's: a USB microphone drifts up to ~100 ppm,
//! a third of a second an hour. The sender reports must still map both
//! tracks to one wall clock, so the audio's says which sample was being
//! captured at the report's instant: a least-squares line through the
//! last ten seconds of (sample, instant) points, as the capture sees them.

/// Points the fit keeps, one a quarter second: ten seconds.
const POINTS: usize = 40;
const SPACING_NS: u64 = 250_000_000;
/// A line through less than a second says little of the rate: until then,
/// the nominal rate through the points' middle.
const MIN_SPAN_NS: f64 = 1e9;
/// Rates further than this from the nominal are not believed (a stall the
/// capture did not count as lost samples): the nominal rate's ±1000 ppm.
const MAX_DRIFT: f64 = 1e-3;

/// Sample index against monotonic nanoseconds.
#[derive(Debug, Clone)]
pub struct SampleClock {
    nominal: u32,
    /// Ring of (sample, instant) points, `len` of them, the next at `next`.
    points: [(u64, u64); POINTS],
    len: usize,
    next: usize,
    /// The fit: `sample` at instant `at`, `rate` samples a second.
    fit: Option<Fit>,
}

#[derive(Debug, Clone, Copy)]
struct Fit {
    at: u64,
    sample: f64,
    rate: f64,
}

impl SampleClock {
    /// For a card running at `nominal` Hz.
    pub fn new(nominal: u32) -> SampleClock {
        SampleClock {
            nominal,
            points: [(0, 0); POINTS],
            len: 0,
            next: 0,
            fit: None,
        }
    }

    /// Forgets every point (the device was opened again).
    pub fn reset(&mut self) {
        self.len = 0;
        self.next = 0;
        self.fit = None;
    }

    /// Sample `sample` was captured at monotonic `at_ns`. Points closer
    /// than a quarter second to the last kept are left (the fit would
    /// weigh a busy stretch more); a count or instant going back begins
    /// again.
    pub fn observe(&mut self, sample: u64, at_ns: u64) {
        if self.len > 0 {
            let (s, t) = self.points[(self.next + POINTS - 1) % POINTS];
            if sample < s || at_ns < t {
                self.reset();
            } else if at_ns - t < SPACING_NS {
                return;
            }
        }
        self.points[self.next] = (sample, at_ns);
        self.next = (self.next + 1) % POINTS;
        self.len = (self.len + 1).min(POINTS);
        self.fit = Some(self.line());
    }

    /// The least-squares line through the points, in offsets from the
    /// oldest (f64 keeps nanoseconds exact over days that way).
    fn line(&self) -> Fit {
        let oldest = (self.next + POINTS - self.len) % POINTS;
        let (s0, t0) = self.points[oldest];
        let kept = || (0..self.len).map(|i| self.points[(oldest + i) % POINTS]);
        let n = self.len as f64;
        let (mut mt, mut ms) = (0.0, 0.0);
        for (s, t) in kept() {
            mt += (t - t0) as f64 / n;
            ms += (s - s0) as f64 / n;
        }
        let (mut stt, mut sts) = (0.0, 0.0);
        for (s, t) in kept() {
            let dt = (t - t0) as f64 - mt;
            stt += dt * dt;
            sts += dt * ((s - s0) as f64 - ms);
        }
        let nominal = f64::from(self.nominal);
        let span = (self.points[(self.next + POINTS - 1) % POINTS].1 - t0) as f64;
        let rate = if span < MIN_SPAN_NS {
            nominal
        } else {
            (sts / stt * 1e9).clamp(nominal * (1.0 - MAX_DRIFT), nominal * (1.0 + MAX_DRIFT))
        };
        Fit {
            at: t0 + mt as u64,
            sample: s0 as f64 + ms,
            rate,
        }
    }

    /// The sample being captured at monotonic `at_ns` (fractional; before
    /// the first point it is negative), once a point came.
    pub fn sample_at(&self, at_ns: u64) -> Option<f64> {
        let f = self.fit?;
        let dt = if at_ns >= f.at {
            (at_ns - f.at) as f64
        } else {
            -((f.at - at_ns) as f64)
        };
        Some(f.sample + f.rate * dt / 1e9)
    }

    /// The monotonic instant sample `sample` was (or will be) captured at,
    /// once a point came; None before the clock's zero.
    pub fn instant_of(&self, sample: f64) -> Option<u64> {
        let f = self.fit?;
        let ns = f.at as f64 + (sample - f.sample) / f.rate * 1e9;
        (ns >= 0.0).then_some(ns as u64)
    }

    /// The RTP timestamp of monotonic `at_ns`, for timestamps that are
    /// `base` plus the sample index (what a sender report carries).
    pub fn rtp_at(&self, at_ns: u64, base: u32) -> Option<u32> {
        let s = self.sample_at(at_ns)?;
        // Half away from zero (core's f64 has no round); i64 holds the
        // count for three million years at 96 kHz.
        let s = (if s < 0.0 { s - 0.5 } else { s + 0.5 }) as i64;
        Some(base.wrapping_add(s as u32))
    }

    /// The card's rate against the monotonic clock, in parts per million
    /// off its nominal (what /metrics shows).
    pub fn drift_ppm(&self) -> Option<f64> {
        let f = self.fit?;
        Some((f.rate / f64::from(self.nominal) - 1.0) * 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_point_gives_the_nominal_rate_through_it() {
        let mut c = SampleClock::new(48_000);
        assert_eq!(c.sample_at(5), None);
        c.observe(480, 1_000_000_000);
        assert_eq!(c.sample_at(1_000_000_000), Some(480.0));
        assert_eq!(c.sample_at(1_010_000_000), Some(960.0));
        assert_eq!(c.sample_at(990_000_000), Some(0.0));
        assert_eq!(c.rtp_at(980_000_000, 7), Some(7u32.wrapping_sub(480)));
        assert_eq!(c.drift_ppm(), Some(0.0));
        assert_eq!(c.instant_of(960.0), Some(1_010_000_000));
        assert_eq!(c.instant_of(-48_000_000.0), None);
    }

    #[test]
    fn a_count_going_back_begins_again() {
        let mut c = SampleClock::new(8_000);
        for i in 0..20u64 {
            c.observe(i * 8_000, i * 1_001_000_000);
        }
        assert!(c.drift_ppm().unwrap() < -900.0);
        c.observe(0, 30_000_000_000);
        assert_eq!(c.sample_at(30_000_000_000), Some(0.0));
        assert_eq!(c.drift_ppm(), Some(0.0));
    }
}
