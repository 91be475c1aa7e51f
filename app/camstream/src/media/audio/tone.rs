//! The test sound (`[audio] device = "test"`): a 1 kHz tone for the first
//! 100 ms of each second of UTC, silence between, captured in real time
//! on the monotonic clock as a sound card would be. The test pattern's
//! clock strip says the UTC millisecond each picture was captured at, so a
//! recording's tone onsets against its pictures are the lip sync a client
//! gets, measured.

use std::time::Duration;

use crate::clock::{Mono, wall_now};

/// Its rate, a sound card's usual one.
pub const RATE: u32 = 48_000;
const TONE_HZ: f64 = 1_000.0;
/// Half of full scale: -6 dBFS.
const AMPLITUDE: f64 = 16_384.0;
const BEEP_NS: i128 = 100_000_000;

pub struct Tone {
    /// The monotonic instant of sample 0.
    start: Mono,
    /// Wall minus monotonic nanoseconds, read at the start.
    wall_offset: i128,
    /// The next sample's index.
    next: u64,
}

impl Tone {
    pub fn new() -> Tone {
        let (wall, mono) = wall_now();
        Tone {
            start: mono,
            wall_offset: wall - i128::from(mono.0),
            next: 0,
        }
    }

    /// The monotonic instant sample `k` is captured at.
    pub fn instant(&self, k: u64) -> Mono {
        Mono(self.start.0 + (u128::from(k) * 1_000_000_000 / u128::from(RATE)) as u64)
    }

    /// Fills `pcm` with the next samples, once the last of them is
    /// captured (sleeping until then); the index of the first.
    pub fn read(&mut self, pcm: &mut [i16]) -> u64 {
        let first = self.next;
        let end = self.instant(first + pcm.len() as u64);
        let now = Mono::now();
        if end > now {
            std::thread::sleep(end.saturating_sub(now));
        } else if now.saturating_sub(end) > Duration::from_secs(1) {
            // Far behind (suspended, or overloaded): samples lost, as an
            // overrun loses them, and the count moves on.
            let behind = now.saturating_sub(self.start).as_nanos() * u128::from(RATE) / 1_000_000_000;
            self.next = behind as u64;
            return self.read(pcm);
        }
        for (i, s) in pcm.iter_mut().enumerate() {
            let k = first + i as u64;
            let utc = self.wall_offset + i128::from(self.instant(k).0);
            *s = if utc.rem_euclid(1_000_000_000) < BEEP_NS {
                let t = k as f64 / f64::from(RATE);
                (AMPLITUDE * (2.0 * std::f64::consts::PI * TONE_HZ * t).sin()) as i16
            } else {
                0
            };
        }
        self.next = first + pcm.len() as u64;
        first
    }
}
