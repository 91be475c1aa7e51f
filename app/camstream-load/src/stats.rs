//! What each client receives, and what they all received inside the
//! measuring window, summed up.

use std::fmt::Write;
use std::time::{Duration, Instant};

use crate::Session;
use crate::watch::Usage;

#[derive(Default)]
pub struct Counts {
    /// RTP packets, or MJPEG parts.
    pub packets: u64,
    pub bytes: u64,
    pub frames: u64,
    /// Frames with a packet missing or out of order.
    pub broken: u64,
    /// Packets missing, by sequence number (whole frames included).
    pub lost: u64,
    pub not_jpeg: u64,
}

/// What one packet or part was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A packet of a frame still coming.
    Part,
    /// The last packet of a frame whose packets all came in order, or a
    /// whole JPEG part.
    Frame,
    /// A frame lost a packet, or a packet came out of order.
    Broken,
    /// Not RTP/JPEG, or a part that is not a JPEG file.
    NotJpeg,
}

/// One client's counts: everything since it began playing, and what fell
/// inside the measuring window.
#[derive(Default)]
pub struct Tally {
    pub total: Counts,
    pub window: Counts,
    window_span: Option<(Instant, Instant)>,
    /// Arrival times of whole frames inside the window.
    pub arrivals: Vec<Instant>,
}

impl Tally {
    pub fn measure_from(&mut self, begin: Instant, end: Instant) {
        self.window_span = Some((begin, end));
    }

    fn inside(&self, now: Instant) -> bool {
        self.window_span
            .is_some_and(|(begin, end)| now >= begin && now < end)
    }

    pub fn count(&mut self, verdict: Verdict, gap: u16, len: usize, now: Instant) {
        let inside = self.inside(now);
        let targets: &mut [&mut Counts] = if inside {
            &mut [&mut self.total, &mut self.window]
        } else {
            &mut [&mut self.total]
        };
        for c in targets.iter_mut() {
            c.packets += 1;
            c.bytes += len as u64;
            c.lost += u64::from(gap);
            match verdict {
                Verdict::Part => {}
                Verdict::Frame => c.frames += 1,
                Verdict::Broken => c.broken += 1,
                Verdict::NotJpeg => c.not_jpeg += 1,
            }
        }
        if inside && verdict == Verdict::Frame {
            self.arrivals.push(now);
        }
    }

    /// Bytes that are not a packet or part of their own (an MJPEG stream's
    /// boundaries and part headers), in the byte count only.
    pub fn overhead(&mut self, len: usize, now: Instant) {
        let inside = self.inside(now);
        self.total.bytes += len as u64;
        if inside {
            self.window.bytes += len as u64;
        }
    }
}

/// One client over its whole run (not only the window): what a harness
/// that knows the server's frames compares with them (scripts/soak).
struct SessionReport {
    frames: u64,
    broken: u64,
    lost: u64,
    span: Option<(u32, u32)>,
    error: Option<String>,
}

pub struct Report {
    /// "tcp", "udp" (RTSP) or "mjpeg".
    transport: &'static str,
    clients: usize,
    playing: usize,
    first_error: Option<String>,
    setup_seconds: f64,
    window_seconds: f64,
    /// Frames per second each playing client got, sorted.
    fps: Vec<f64>,
    nominal_fps: f64,
    /// Whole frames received in the window, all clients.
    frames: u64,
    bytes: u64,
    packets: u64,
    broken: u64,
    lost: u64,
    not_jpeg: u64,
    /// Milliseconds between whole frames at a client, all clients pooled, sorted.
    intervals_ms: Vec<f64>,
    /// Processes watched over the window (--watch), by name.
    watched: Vec<(String, Usage)>,
    sessions: Vec<SessionReport>,
}

impl Report {
    pub fn new(
        clients: &[Session],
        transport: &'static str,
        window: Duration,
        nominal_fps: f64,
        setup: Duration,
        watched: Vec<(String, Usage)>,
    ) -> Report {
        let secs = window.as_secs_f64();
        let playing: Vec<&Tally> = clients
            .iter()
            .filter(|c| c.playing())
            .map(|c| c.tally())
            .collect();
        let mut fps: Vec<f64> = playing
            .iter()
            .map(|c| c.window.frames as f64 / secs)
            .collect();
        fps.sort_by(f64::total_cmp);
        let mut intervals_ms: Vec<f64> = playing
            .iter()
            .flat_map(|c| {
                c.arrivals
                    .windows(2)
                    .map(|w| w[1].duration_since(w[0]).as_secs_f64() * 1000.0)
            })
            .collect();
        intervals_ms.sort_by(f64::total_cmp);
        let sum = |f: fn(&Tally) -> u64| playing.iter().map(|c| f(c)).sum::<u64>();
        Report {
            transport,
            clients: clients.len(),
            playing: playing.len(),
            first_error: clients
                .iter()
                .enumerate()
                .find_map(|(id, c)| c.error().map(|e| format!("client {id}: {e}"))),
            setup_seconds: setup.as_secs_f64(),
            window_seconds: secs,
            fps,
            nominal_fps,
            frames: sum(|c| c.window.frames),
            bytes: sum(|c| c.window.bytes),
            packets: sum(|c| c.window.packets),
            broken: sum(|c| c.window.broken),
            lost: sum(|c| c.window.lost),
            not_jpeg: sum(|c| c.window.not_jpeg),
            intervals_ms,
            watched,
            sessions: clients
                .iter()
                .map(|c| SessionReport {
                    frames: c.tally().total.frames,
                    broken: c.tally().total.broken,
                    lost: c.tally().total.lost,
                    span: c.frame_span(),
                    error: c.error().map(str::to_owned),
                })
                .collect(),
        }
    }

    fn quantile(sorted: &[f64], q: f64) -> f64 {
        if sorted.is_empty() {
            return f64::NAN;
        }
        let i = ((sorted.len() - 1) as f64 * q).round() as usize;
        sorted[i]
    }

    /// Every client that asked got every frame the server sent in the
    /// window (none lost, none broken, the nominal rate within 2%).
    fn every_frame(&self) -> bool {
        self.playing == self.clients
            && self.broken == 0
            && self.lost == 0
            && self.not_jpeg == 0
            && self
                .fps
                .first()
                .is_some_and(|&f| f >= self.nominal_fps * 0.98)
    }

    fn gbit_s(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.window_seconds / 1e9
    }

    pub fn text(&self) -> String {
        let q = |x| Self::quantile(&self.fps, x);
        let i = |x| Self::quantile(&self.intervals_ms, x);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} of {} clients playing over {} (set up in {:.1} s); {:.1} s measured",
            self.playing, self.clients, self.transport, self.setup_seconds, self.window_seconds
        );
        let _ = writeln!(
            s,
            "frames/s per client: min {:.2}, median {:.2}, max {:.2} (server sends {})",
            q(0.0),
            q(0.5),
            q(1.0),
            self.nominal_fps
        );
        let _ = writeln!(
            s,
            "received {} frames in {} packets or parts, {:.1} MB, {:.3} Gbit/s; frames broken {}, packets lost {}, not JPEG {}",
            self.frames,
            self.packets,
            self.bytes as f64 / 1e6,
            self.gbit_s(),
            self.broken,
            self.lost,
            self.not_jpeg
        );
        let _ = writeln!(
            s,
            "ms between frames at a client: p50 {:.1}, p99 {:.1}, p99.9 {:.1}, p99.99 {:.1}, max {:.1}",
            i(0.5),
            i(0.99),
            i(0.999),
            i(0.9999),
            i(1.0)
        );
        let _ = writeln!(
            s,
            "every client got every frame: {}",
            if self.every_frame() { "yes" } else { "no" }
        );
        for (name, u) in &self.watched {
            let _ = writeln!(
                s,
                "{name}: CPU {:.2} s ({:.1} %), RSS {} KiB (peak {} KiB; camera buffers {} KiB)",
                u.cpu_s, u.cpu_pct, u.rss_kib, u.hwm_kib, u.camera_kib
            );
        }
        if let Some(e) = &self.first_error {
            let _ = writeln!(s, "first failure: {e}");
        }
        s
    }

    pub fn json(&self) -> String {
        let q = |x| num(Self::quantile(&self.fps, x));
        let i = |x| num(Self::quantile(&self.intervals_ms, x));
        format!(
            concat!(
                "{{\"transport\":\"{}\",\"clients\":{},\"playing\":{},\"setup_s\":{},",
                "\"window_s\":{},\"fps_min\":{},\"fps_median\":{},\"fps_max\":{},",
                "\"frames\":{},\"packets\":{},\"bytes\":{},\"gbit_s\":{},\"broken\":{},\"lost\":{},",
                "\"not_jpeg\":{},\"interval_ms_p50\":{},\"interval_ms_p99\":{},",
                "\"interval_ms_p999\":{},\"interval_ms_p9999\":{},\"interval_ms_max\":{},",
                "\"every_frame\":{},\"first_error\":{},\"watched\":{{{}}},\"sessions\":[{}]}}"
            ),
            self.transport,
            self.clients,
            self.playing,
            num(self.setup_seconds),
            num(self.window_seconds),
            q(0.0),
            q(0.5),
            q(1.0),
            self.frames,
            self.packets,
            self.bytes,
            num(self.gbit_s()),
            self.broken,
            self.lost,
            self.not_jpeg,
            i(0.5),
            i(0.99),
            i(0.999),
            i(0.9999),
            i(1.0),
            self.every_frame(),
            self.first_error
                .as_deref()
                .map(string)
                .unwrap_or_else(|| "null".into()),
            self.watched
                .iter()
                .map(|(name, u)| format!(
                    "{}:{{\"cpu_s\":{},\"cpu_pct\":{},\"rss_kib\":{},\"hwm_kib\":{},\"camera_kib\":{}}}",
                    string(name),
                    num(u.cpu_s),
                    num(u.cpu_pct),
                    u.rss_kib,
                    u.hwm_kib,
                    u.camera_kib
                ))
                .collect::<Vec<_>>()
                .join(","),
            self.sessions
                .iter()
                .map(|s| format!(
                    "{{\"frames\":{},\"broken\":{},\"lost\":{},\"first_ts\":{},\"last_ts\":{},\"error\":{}}}",
                    s.frames,
                    s.broken,
                    s.lost,
                    s.span.map_or("null".into(), |(f, _)| f.to_string()),
                    s.span.map_or("null".into(), |(_, l)| l.to_string()),
                    s.error.as_deref().map(string).unwrap_or_else(|| "null".into())
                ))
                .collect::<Vec<_>>()
                .join(",")
        )
    }
}

/// A JSON string (the text here has no control characters).
fn string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A JSON number (NaN, which JSON lacks, as null).
fn num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.4}")
    } else {
        "null".into()
    }
}
