//! Send latency: how long from a frame entering the server to its last packet
//! written to a client, one sample per client and frame. A fixed log-linear
//! histogram (eight buckets per power of two: values within 12.5 %), so
//! recording allocates nothing and costs a few instructions; the exact
//! maximum is kept beside it.

use std::fmt;
use std::time::Duration;

/// Buckets below which a value is its own bucket (microseconds).
const SUB: u64 = 8;
const SUB_BITS: u32 = 3;
/// Up to 2^36 µs (19 hours): anything longer lands in the last bucket.
const BUCKETS: usize = ((36 - SUB_BITS + 1) * SUB as u32) as usize;

pub struct Histogram {
    counts: [u64; BUCKETS],
    samples: u64,
    max_us: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: [0; BUCKETS],
            samples: 0,
            max_us: 0,
        }
    }
}

fn bucket_of(us: u64) -> usize {
    if us < SUB {
        return us as usize;
    }
    let e = 63 - us.leading_zeros();
    let i = (e - SUB_BITS + 1) as usize * SUB as usize + ((us >> (e - SUB_BITS)) - SUB) as usize;
    i.min(BUCKETS - 1)
}

/// The largest value (µs) that falls in bucket `i`.
fn upper_of(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let e = i / SUB + u64::from(SUB_BITS) - 1;
    let lower = (SUB + i % SUB) << (e - u64::from(SUB_BITS));
    lower + (1 << (e - u64::from(SUB_BITS))) - 1
}

impl Histogram {
    pub fn record(&mut self, d: Duration) {
        let us = d.as_micros().min(u128::from(u64::MAX)) as u64;
        self.counts[bucket_of(us)] += 1;
        self.samples += 1;
        self.max_us = self.max_us.max(us);
    }

    /// The value (µs, a bucket's upper bound, never above the maximum) below
    /// or at which `q` (0..=1) of the samples lie.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.samples == 0 {
            return 0;
        }
        let rank = ((q * self.samples as f64).ceil() as u64).clamp(1, self.samples);
        let mut seen = 0;
        for (i, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return upper_of(i).min(self.max_us);
            }
        }
        self.max_us
    }

    pub fn reset(&mut self) {
        *self = Histogram::default();
    }
}

impl fmt::Display for Histogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |us: u64| us as f64 / 1000.0;
        write!(
            f,
            "{} samples, p50 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms, p99.99 {:.3} ms, max {:.3} ms",
            self.samples,
            ms(self.quantile(0.5)),
            ms(self.quantile(0.99)),
            ms(self.quantile(0.999)),
            ms(self.quantile(0.9999)),
            ms(self.max_us)
        )
    }
}

/// Upper bounds of the buckets /metrics shows, in microseconds (Prometheus'
/// own defaults start at 5 ms; a frame over loopback takes well under one).
pub const METRIC_BOUNDS_US: [u64; 14] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000,
];

/// Since the start, never reset: what a Prometheus histogram is.
#[derive(Default)]
pub struct Cumulative {
    /// Samples per bucket of [`METRIC_BOUNDS_US`] (not cumulative); those
    /// above the last bound are in `count` only.
    pub buckets: [u64; METRIC_BOUNDS_US.len()],
    pub count: u64,
    pub sum_us: u64,
}

impl Cumulative {
    pub fn record(&mut self, d: Duration) {
        let us = d.as_micros().min(u128::from(u64::MAX)) as u64;
        if let Some(i) = METRIC_BOUNDS_US.iter().position(|&b| us <= b) {
            self.buckets[i] += 1;
        }
        self.count += 1;
        self.sum_us = self.sum_us.saturating_add(us);
    }
}

/// What the event loop did with a connection's input: the `kind` label of
/// camstream_input_stall_seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    Rtsp,
    /// RTSP over HTTP: the POST side's requests.
    Tunnel,
    Http,
    Onvif,
    Metrics,
    /// A WHEP offer: its SDP read and answered, a WebRTC session made.
    Whep,
    /// A datagram or TCP packet a WebRTC session took: an ICE check, a
    /// DTLS handshake's flight (its key exchange and signature), RTCP.
    WebRtc,
}

impl InputKind {
    pub const ALL: [InputKind; 7] = [
        InputKind::Rtsp,
        InputKind::Tunnel,
        InputKind::Http,
        InputKind::Onvif,
        InputKind::Metrics,
        InputKind::Whep,
        InputKind::WebRtc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            InputKind::Rtsp => "rtsp",
            InputKind::Tunnel => "tunnel",
            InputKind::Http => "http",
            InputKind::Onvif => "onvif",
            InputKind::Metrics => "metrics",
            InputKind::Whep => "whep",
            InputKind::WebRtc => "webrtc",
        }
    }
}

/// How long the event loop spent on each input handed to a protocol (every
/// other client waits that long): docs/SECURITY.md's bound on one request.
#[derive(Default)]
pub struct Stalls {
    pub by_kind: [Cumulative; InputKind::ALL.len()],
}

impl Stalls {
    pub fn record(&mut self, kind: InputKind, d: Duration) {
        self.by_kind[kind as usize].record(d);
    }
}

/// The send latency (frame in to its last byte written, per client): since
/// the last SIGUSR1 report for the log, and since the start for /metrics.
#[derive(Default)]
pub struct SendLatency {
    pub window: Histogram,
    pub total: Cumulative,
}

impl SendLatency {
    pub fn record(&mut self, d: Duration) {
        self.window.record(d);
        self.total.record(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order_within_an_eighth() {
        let mut last = 0;
        for us in (0..100_000u64).chain([1 << 20, (1 << 30) + 12345, 1 << 35]) {
            let i = bucket_of(us);
            assert!(i >= last, "{us}");
            last = i;
            let up = upper_of(i);
            assert!(up >= us, "{us} above its bucket's bound {up}");
            assert!(up - us <= us / 8, "{us}: bound {up} too coarse");
            if i > 0 {
                assert!(upper_of(i - 1) < us, "{us} also fits bucket {}", i - 1);
            }
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile(0.5), 0);
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        h.record(Duration::from_millis(50));
        let p50 = h.quantile(0.5);
        assert!((500..=563).contains(&p50), "{p50}");
        let p99 = h.quantile(0.99);
        assert!((991..=1023).contains(&p99), "{p99}");
        assert_eq!(h.quantile(1.0), 50_000);
        assert_eq!(h.samples, 1001);
        assert!(h.to_string().contains("max 50.000 ms"), "{h}");
        h.reset();
        assert_eq!(h.samples, 0);
    }
}
