//! What the daemon says of itself: a line in the log every minute, the
//! send latency on SIGUSR1 and at a stop, and /metrics' figures gathered
//! from the parts that count them (formatted by the HTTP side).

use std::time::Duration;

use super::admission::{Admission, Refusal};
use crate::fanout::{Fanout, StreamId};
use super::http::metrics::{self, Delivery, Figures, StreamFigures};
use super::{http, rtsp};
use crate::clock::{Mono, wall_now};
use crate::config::Config;
use crate::intake::Intake;
use crate::latency::{InputKind, Stalls};

const STATS_EVERY: Duration = Duration::from_secs(60);

pub struct Reports {
    started: Mono,
    /// Unix time of the start, for process_start_time_seconds.
    started_unix: f64,
    last_log: Option<Mono>,
    frames_at_last_log: u64,
    latency_since: Mono,
}

/// What /metrics reads of the parts.
pub struct Parts<'a> {
    pub cfg: &'a Config,
    pub stalls: &'a Stalls,
    pub fanout: &'a Fanout,
    pub admission: &'a Admission,
    pub rtsp: rtsp::Counts,
    pub http: http::Counts,
    /// The sub-stream's path, or "" without one.
    pub sub_path: &'a str,
    pub camera_mode: &'a str,
    pub rtsp_port: u16,
    pub http_port: u16,
    /// WS-Discovery answers and announces (ONVIF on, a socket it could open).
    pub discovery: bool,
    /// WebRTC's figures, when it is on.
    pub webrtc: Option<metrics::WebRtcFigures>,
    /// Motion detection's, when it is on.
    pub motion: Option<metrics::MotionFigures>,
    /// The sound's frames an encoding each, with `[audio]`.
    pub audio: Option<Vec<crate::media::audio::Counted>>,
}

impl Reports {
    pub fn new() -> Reports {
        let (wall, _) = wall_now();
        Reports {
            started: Mono::now(),
            started_unix: wall as f64 / 1e9,
            last_log: None,
            frames_at_last_log: 0,
            latency_since: Mono::now(),
        }
    }

    /// Every minute: the frame rate, the clients and what the intake did.
    pub fn minute(&mut self, now: Mono, fanout: &Fanout, clients: (usize, usize), conns: usize) {
        let Some(last) = self.last_log else {
            self.last_log = Some(now);
            return;
        };
        let elapsed = now.saturating_sub(last);
        if elapsed < STATS_EVERY {
            return;
        }
        let c = fanout.intake_counts();
        let streamed = c.frames_taken - self.frames_at_last_log;
        let refused: u64 = c.refused.iter().sum();
        let repaired: u64 = c.repaired.iter().sum();
        log::info!(
            "{:.1} frames/s, {} sessions, {} MJPEG streams, {conns} connections; of {} frames since start {repaired} repaired, {refused} refused",
            streamed as f64 / elapsed.as_secs_f64(),
            clients.0,
            clients.1,
            c.frames_in
        );
        self.last_log = Some(now);
        self.frames_at_last_log = c.frames_taken;
    }

    /// The send latency since the last report, then a new measurement.
    pub fn send_latency(&mut self, fanout: &mut Fanout) {
        let now = Mono::now();
        log::info!(
            "send latency (frame in to its last byte written, per client) over {:.1} s: {}",
            now.saturating_sub(self.latency_since).as_secs_f64(),
            fanout.latency.window
        );
        fanout.latency.window.reset();
        self.latency_since = now;
    }

    /// At a stop: the send latency and what came of the frames.
    pub fn stopping(&mut self, fanout: &mut Fanout) {
        self.send_latency(fanout);
        let c = fanout.intake_counts();
        log::info!(
            "{} frames in, {} streamed; repaired: {}; refused: {}",
            c.frames_in,
            c.frames_taken,
            Intake::summary(&c.repaired),
            Intake::summary(&c.refused)
        );
    }

    /// /metrics' text.
    pub fn metrics(&self, p: &Parts<'_>) -> String {
        let delivery = |label: &str| {
            let d = p
                .fanout
                .deliveries()
                .iter()
                .find(|(n, _)| *n == label)
                .map(|(_, d)| *d)
                .unwrap_or_default();
            Delivery {
                frames_sent: d.frames_sent,
                frames_dropped: d.frames_dropped,
                bytes_sent: d.bytes_sent,
            }
        };
        let main = p.fanout.stream(StreamId::MAIN);
        metrics::text(&Figures {
            path: &p.cfg.path,
            sub_path: p.sub_path,
            onvif: p.cfg.onvif,
            discovery: p.discovery,
            rtsp_port: p.rtsp_port,
            http_port: p.http_port,
            width: main.info.width,
            height: main.info.height,
            fps: main.info.fps,
            camera_present: p.fanout.camera_present(),
            source: p.cfg.source.spec.to_string(),
            mode: p.camera_mode,
            intake: p.fanout.intake_counts(),
            rtsp: delivery("rtsp"),
            http: delivery("http"),
            webrtc: delivery("webrtc"),
            webrtc_figures: p.webrtc,
            motion: p.motion,
            audio: p.audio.as_deref(),
            sessions_udp: p.rtsp.sessions_udp,
            sessions_tcp: p.rtsp.sessions_tcp,
            sessions_tunnelled: p.rtsp.sessions_tunnelled,
            mjpeg_streams: p.http.mjpeg_streams,
            rtsp_connections: p.rtsp.connections,
            http_connections: p.http.connections,
            refusals: Refusal::ALL
                .iter()
                .map(|r| {
                    (
                        r.name(),
                        p.admission.refusals.get(*r as usize).copied().unwrap_or(0),
                    )
                })
                .collect(),
            http_requests: p.http.requests,
            snapshots: p.http.snapshots,
            uptime_seconds: Mono::now().saturating_sub(self.started).as_secs_f64(),
            start_time_seconds: self.started_unix,
            latency: &p.fanout.latency.total,
            stalls: InputKind::ALL
                .iter()
                .filter_map(|&k| Some((k.name(), p.stalls.by_kind.get(k as usize)?)))
                .collect(),
            streams: p
                .fanout
                .streams()
                .iter()
                .map(|s| StreamFigures {
                    path: &s.name,
                    codec: s.codec(),
                    width: s.info.width,
                    height: s.info.height,
                    fps: s.info.fps,
                    frames: s.frames_made,
                    payload_bytes: s.payload_bytes,
                })
                .collect(),
        })
    }
}
