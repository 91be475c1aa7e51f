//! From the capture's rate down to G.711's 8 kHz: a low-pass FIR filter
//! (a Hamming-windowed sinc, cut at 3.6 kHz: G.711's band is 300-3400 Hz)
//! that keeps every M-th output, for the rates sound cards give that are
//! a whole multiple of 8 kHz. The filters are computed at compile time.

use core::f64::consts::PI;

/// The rate decimation ends at.
pub const OUTPUT_RATE: u32 = 8_000;
/// Taps per unit of the factor: 32 a factor gives a transition band of
/// about 0.8 kHz at every rate, and a stop band 53 dB down (Hamming's).
const TAPS_PER_FACTOR: usize = 32;
/// The largest factor: 48 kHz to 8.
const MAX_FACTOR: usize = 6;
const MAX_TAPS: usize = TAPS_PER_FACTOR * MAX_FACTOR + 1;

/// sin(x) by its series, after bringing x within ±π; in a const fn, since
/// core's f64 has no sin.
const fn sin(x: f64) -> f64 {
    let turns = (x / (2.0 * PI)) as i64 as f64;
    let mut x = x - turns * 2.0 * PI;
    if x > PI {
        x -= 2.0 * PI;
    } else if x < -PI {
        x += 2.0 * PI;
    }
    // Terms to x^27/27!: below 1e-15 over ±π.
    let mut term = x;
    let mut sum = x;
    let mut n = 1;
    while n < 14 {
        term = -term * x * x / ((2 * n) as f64 * (2 * n + 1) as f64);
        sum += term;
        n += 1;
    }
    sum
}

const fn cos(x: f64) -> f64 {
    sin(x + PI / 2.0)
}

/// The filter for `factor`: TAPS = 32·factor + 1 coefficients whose sum is 1.
const fn design<const TAPS: usize>(factor: usize) -> [f32; TAPS] {
    // The cut-off, in cycles per input sample: 3.6 kHz of 8·factor kHz.
    let fc = 0.45 / factor as f64;
    let middle = (TAPS - 1) as f64 / 2.0;
    let mut h = [0f64; TAPS];
    let mut sum = 0.0;
    let mut i = 0;
    while i < TAPS {
        let n = i as f64 - middle;
        let sinc = if n == 0.0 {
            2.0 * fc
        } else {
            sin(2.0 * PI * fc * n) / (PI * n)
        };
        let window = 0.54 - 0.46 * cos(2.0 * PI * i as f64 / (TAPS - 1) as f64);
        h[i] = sinc * window;
        sum += h[i];
        i += 1;
    }
    let mut out = [0f32; TAPS];
    let mut i = 0;
    while i < TAPS {
        out[i] = (h[i] / sum) as f32;
        i += 1;
    }
    out
}

const FILTER_2: [f32; 2 * TAPS_PER_FACTOR + 1] = design(2);
const FILTER_3: [f32; 3 * TAPS_PER_FACTOR + 1] = design(3);
const FILTER_4: [f32; 4 * TAPS_PER_FACTOR + 1] = design(4);
const FILTER_6: [f32; 6 * TAPS_PER_FACTOR + 1] = design(6);

/// A rate decimation cannot bring to 8 kHz.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateError(pub u32);

impl core::fmt::Display for RateError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} Hz is not 8, 16, 24, 32 or 48 kHz: G.711 needs a rate it can divide",
            self.0
        )
    }
}

impl core::error::Error for RateError {}

/// One channel's decimation to 8 kHz, its history kept between calls.
#[derive(Debug, Clone)]
pub struct Decimator {
    factor: usize,
    taps: &'static [f32],
    /// The last `taps.len()` inputs, written twice (at `at` and
    /// `at + taps.len()`) so the window is always one slice.
    history: [f32; 2 * MAX_TAPS],
    at: usize,
    /// Inputs since the last output.
    phase: usize,
}

impl Decimator {
    /// For input at `rate`.
    pub fn new(rate: u32) -> Result<Decimator, RateError> {
        let taps: &'static [f32] = match rate {
            8_000 => &[1.0],
            16_000 => &FILTER_2,
            24_000 => &FILTER_3,
            32_000 => &FILTER_4,
            48_000 => &FILTER_6,
            _ => return Err(RateError(rate)),
        };
        Ok(Decimator {
            factor: (rate / OUTPUT_RATE) as usize,
            taps,
            history: [0.0; 2 * MAX_TAPS],
            at: 0,
            phase: 0,
        })
    }

    /// How late the output is, in input samples: half the filter (2 ms).
    pub fn delay(&self) -> usize {
        self.taps.len() / 2
    }

    /// Filters `input`, handing each 8 kHz sample to `out` (one for every
    /// `factor` inputs, counted across calls).
    pub fn push(&mut self, input: &[i16], mut out: impl FnMut(i16)) {
        let n = self.taps.len();
        for &x in input {
            let x = f32::from(x);
            self.history[self.at] = x;
            self.history[self.at + n] = x;
            self.at = if self.at + 1 == n { 0 } else { self.at + 1 };
            self.phase += 1;
            if self.phase == self.factor {
                self.phase = 0;
                // The filter is symmetric: oldest to newest or the other
                // way round is the same sum.
                let window = &self.history[self.at..self.at + n];
                let y: f32 = window.iter().zip(self.taps).map(|(a, b)| a * b).sum();
                // Half away from zero (core's f32 has no round); `as`
                // saturates what the filter's ripple took past i16.
                out((if y < 0.0 { y - 0.5 } else { y + 0.5 }) as i16);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn const_sin_and_cos_are_accurate() {
        extern crate std;
        for i in -400..400 {
            let x = f64::from(i) * 0.137;
            assert!((sin(x) - x.sin()).abs() < 1e-12, "sin {x}");
            assert!((cos(x) - x.cos()).abs() < 1e-12, "cos {x}");
        }
    }

    #[test]
    fn filters_add_up_to_one_and_are_symmetric() {
        for taps in [&FILTER_2[..], &FILTER_3, &FILTER_4, &FILTER_6] {
            let sum: f32 = taps.iter().sum();
            assert!((sum - 1.0).abs() < 1e-5);
            assert!(taps.iter().eq(taps.iter().rev()));
        }
    }

    #[test]
    fn rates_it_cannot_divide() {
        assert_eq!(Decimator::new(44_100).err(), Some(RateError(44_100)));
        assert!(Decimator::new(48_000).is_ok());
    }
}
