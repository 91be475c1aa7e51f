//! GET /metrics: the daemon's counts in Prometheus' text format, written by
//! the `prometheus` crate's encoder from families built at each scrape.
//! The counts live where they are kept; the event loop gathers them into
//! [`Figures`] and this only formats them.

use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};
use prometheus::{Encoder, TextEncoder};

use crate::intake::{Counts as Intake, REPAIR_REASONS, repair_reason};
use crate::latency::{Cumulative, METRIC_BOUNDS_US};
use camstream_rtp::JpegError;

pub const CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

fn metric(labels: &[(&str, &str)]) -> Metric {
    let mut m = Metric::default();
    m.set_label(
        labels
            .iter()
            .map(|(k, v)| {
                let mut l = LabelPair::default();
                l.set_name(k.to_string());
                l.set_value(v.to_string());
                l
            })
            .collect(),
    );
    m
}

fn family(name: &str, help: &str, kind: MetricType, metrics: Vec<Metric>) -> MetricFamily {
    let mut f = MetricFamily::default();
    f.set_name(name.to_string());
    f.set_help(help.to_string());
    f.set_field_type(kind);
    f.set_metric(metrics);
    f
}

/// A counter family, one series per labels and value.
fn counters(name: &str, help: &str, series: &[(&[(&str, &str)], u64)]) -> MetricFamily {
    let metrics = series
        .iter()
        .map(|(labels, v)| {
            let mut m = metric(labels);
            let mut c = Counter::default();
            c.set_value(*v as f64);
            m.set_counter(c);
            m
        })
        .collect();
    family(name, help, MetricType::COUNTER, metrics)
}

fn gauges(name: &str, help: &str, series: &[(&[(&str, &str)], f64)]) -> MetricFamily {
    let metrics = series
        .iter()
        .map(|(labels, v)| {
            let mut m = metric(labels);
            let mut g = Gauge::default();
            g.set_value(*v);
            m.set_gauge(g);
            m
        })
        .collect();
    family(name, help, MetricType::GAUGE, metrics)
}

/// The resident set size from /proc (the figure `ps` and the benchmarks show).
fn rss_bytes() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024.0)
}

/// Deliveries of one protocol since the start.
#[derive(Default, Clone, Copy)]
pub struct Delivery {
    pub frames_sent: u64,
    pub frames_dropped: u64,
    pub bytes_sent: u64,
}

/// One of the camera's streams (the main one, the sub-stream, H.264).
pub struct StreamFigures<'a> {
    pub path: &'a str,
    pub codec: &'static str,
    pub width: u16,
    pub height: u16,
    pub fps: u32,
    pub frames: u64,
    pub payload_bytes: u64,
}

/// WebRTC's port and counts.
#[derive(Default, Clone, Copy)]
pub struct WebRtcFigures {
    pub port: u16,
    /// Sessions now, connected or connecting.
    pub sessions: usize,
    pub started: u64,
    pub connected: u64,
    /// PLI and FIR from browsers.
    pub key_frame_requests: u64,
    /// Datagrams no session took.
    pub datagrams_unmatched: u64,
}

/// Motion detection's state and counts.
#[derive(Default, Clone, Copy)]
pub struct MotionFigures {
    pub moving: bool,
    /// The share of the picture the last picture looked at changed, 0-1.
    pub level: f32,
    pub started: u64,
    pub stopped: u64,
    pub pictures: u64,
    pub cpu_seconds: f64,
    /// ONVIF's event subscriptions, which motion detection feeds.
    pub onvif_subscriptions: usize,
    /// Whether MQTT is connected to its broker, with `[mqtt]`.
    pub mqtt_connected: Option<bool>,
}

/// Everything /metrics shows, gathered from the parts that count it.
pub struct Figures<'a> {
    pub path: &'a str,
    /// The sub-stream's path, or "" without one.
    pub sub_path: &'a str,
    pub onvif: bool,
    /// WS-Discovery is on.
    pub discovery: bool,
    pub rtsp_port: u16,
    pub http_port: u16,
    pub width: u16,
    pub height: u16,
    pub fps: u32,
    pub camera_present: bool,
    pub source: String,
    pub mode: &'a str,
    pub intake: &'a Intake,
    pub rtsp: Delivery,
    pub http: Delivery,
    pub webrtc: Delivery,
    /// WebRTC's figures, when it is on.
    pub webrtc_figures: Option<WebRtcFigures>,
    /// Motion detection's, when it is on.
    pub motion: Option<MotionFigures>,
    /// The sound's frames, an encoding each, with `[audio]`.
    pub audio: Option<&'a [crate::media::audio::Counted]>,
    pub sessions_udp: usize,
    pub sessions_tcp: usize,
    pub sessions_tunnelled: usize,
    pub mjpeg_streams: usize,
    pub rtsp_connections: usize,
    pub http_connections: usize,
    /// Refusals by reason: (name, count).
    pub refusals: Vec<(&'static str, u64)>,
    pub http_requests: u64,
    pub snapshots: u64,
    pub uptime_seconds: f64,
    pub start_time_seconds: f64,
    pub latency: &'a Cumulative,
    /// The event loop's time on each input, by kind (rtsp, http, onvif...).
    pub stalls: Vec<(&'static str, &'a Cumulative)>,
    pub streams: Vec<StreamFigures<'a>>,
}

/// The figures in Prometheus' text format.
pub fn text(f: &Figures<'_>) -> String {
    let c = f.intake;
    let (width, height, fps) = (f.width.to_string(), f.height.to_string(), f.fps.to_string());
    let (rtsp_port, http_port) = (f.rtsp_port.to_string(), f.http_port.to_string());
    let refused_reasons: Vec<[(&str, &str); 1]> = JpegError::ALL
        .iter()
        .map(|e| [("reason", e.name())])
        .collect();
    let repaired_reasons: Vec<[(&str, &str); 1]> = (0..REPAIR_REASONS)
        .map(|i| [("reason", repair_reason(i))])
        .collect();
    let refusal_reasons: Vec<[(&str, &str); 1]> = f
        .refusals
        .iter()
        .map(|(name, _)| [("reason", *name)])
        .collect();
    let stream_sizes: Vec<[String; 3]> = f
        .streams
        .iter()
        .map(|s| [s.width.to_string(), s.height.to_string(), s.fps.to_string()])
        .collect();
    let stream_labels: Vec<[(&str, &str); 5]> = f
        .streams
        .iter()
        .zip(&stream_sizes)
        .map(|(s, [w, h, r])| {
            [
                ("path", s.path),
                ("codec", s.codec),
                ("width", w.as_str()),
                ("height", h.as_str()),
                ("fps", r.as_str()),
            ]
        })
        .collect();
    let stream_paths: Vec<[(&str, &str); 1]> =
        f.streams.iter().map(|s| [("path", s.path)]).collect();
    let rtsp = [("protocol", "rtsp")];
    let http = [("protocol", "http")];
    let webrtc = [("protocol", "webrtc")];
    let w = f.webrtc_figures.unwrap_or_default();
    let webrtc_port = f.webrtc_figures.map_or(String::new(), |w| w.port.to_string());
    let onvif = if f.onvif { "true" } else { "false" };
    let discovery = if f.discovery { "true" } else { "false" };
    let mut families = vec![
        gauges(
            "camstream_info",
            "The daemon: its version, stream paths, ports, stream size whether ONVIF and WS-Discovery are on, and WebRTC's UDP port when it is on (value 1).",
            &[(
                &[
                    ("version", env!("CARGO_PKG_VERSION")),
                    ("path", f.path),
                    ("sub_path", f.sub_path),
                    ("onvif", onvif),
                    ("discovery", discovery),
                    ("webrtc_port", &webrtc_port),
                    ("rtsp_port", &rtsp_port),
                    ("http_port", &http_port),
                    ("width", &width),
                    ("height", &height),
                    ("fps", &fps),
                ],
                1.0,
            )],
        ),
        gauges(
            "camstream_stream_info",
            "Each stream: its RTSP path, codec, size and rate (value 1).",
            &stream_labels
                .iter()
                .map(|l| (l.as_slice(), 1.0))
                .collect::<Vec<_>>(),
        ),
        counters(
            "camstream_stream_frames_total",
            "Frames each stream made (an H.264 stream's only while someone watches it).",
            &f.streams
                .iter()
                .zip(&stream_paths)
                .map(|(s, l)| (l.as_slice(), s.frames))
                .collect::<Vec<_>>(),
        ),
        counters(
            "camstream_stream_payload_bytes_total",
            "RTP payload bytes each stream made: its bit rate is this counter's rate, times 8.",
            &f.streams
                .iter()
                .zip(&stream_paths)
                .map(|(s, l)| (l.as_slice(), s.payload_bytes))
                .collect::<Vec<_>>(),
        ),
        gauges(
            "camstream_camera_present",
            "1 while the camera is there, 0 while it is absent (unplugged, not found).",
            &[(&[], if f.camera_present { 1.0 } else { 0.0 })],
        ),
        gauges(
            "camstream_camera_info",
            "The configured source and the mode it runs in (value 1).",
            &[(&[("source", &f.source), ("mode", f.mode)], 1.0)],
        ),
        counters(
            "camstream_frames_captured_total",
            "Frames from the source.",
            &[(&[], c.frames_in)],
        ),
        counters(
            "camstream_frames_streamed_total",
            "Frames made sendable (as captured, or repaired) and offered to the clients.",
            &[(&[], c.frames_taken)],
        ),
        counters(
            "camstream_frames_repaired_total",
            "Frames made sendable by the normalizer, by what was wrong with them.",
            &repaired_reasons
                .iter()
                .zip(c.repaired)
                .map(|(l, n)| (l.as_slice(), n))
                .collect::<Vec<_>>(),
        ),
        counters(
            "camstream_frames_refused_total",
            "Frames not sent because they could not be made sendable, by reason.",
            &refused_reasons
                .iter()
                .zip(c.refused)
                .map(|(l, n)| (l.as_slice(), n))
                .collect::<Vec<_>>(),
        ),
        counters(
            "camstream_frames_sent_total",
            "Frames written whole to a client, summed over clients.",
            &[(&rtsp, f.rtsp.frames_sent), (&http, f.http.frames_sent), (&webrtc, f.webrtc.frames_sent)],
        ),
        counters(
            "camstream_frames_dropped_total",
            "Frames a client did not get because it could not keep up, summed over clients.",
            &[
                (&rtsp, f.rtsp.frames_dropped),
                (&http, f.http.frames_dropped),
                (&webrtc, f.webrtc.frames_dropped),
            ],
        ),
        counters(
            "camstream_bytes_sent_total",
            "Frame bytes written to clients (RTP packets, JPEG parts), summed over clients.",
            &[(&rtsp, f.rtsp.bytes_sent), (&http, f.http.bytes_sent), (&webrtc, f.webrtc.bytes_sent)],
        ),
        gauges(
            "camstream_clients",
            "Streaming clients now, by protocol and transport.",
            &[
                (
                    &[("protocol", "rtsp"), ("transport", "udp")],
                    f.sessions_udp as f64,
                ),
                (
                    &[("protocol", "rtsp"), ("transport", "tcp")],
                    f.sessions_tcp as f64,
                ),
                (
                    &[("protocol", "rtsp"), ("transport", "http-tunnel")],
                    f.sessions_tunnelled as f64,
                ),
                (
                    &[("protocol", "http"), ("transport", "mjpeg")],
                    f.mjpeg_streams as f64,
                ),
                (
                    &[("protocol", "webrtc"), ("transport", "udp")],
                    w.sessions as f64,
                ),
            ],
        ),
        counters(
            "camstream_webrtc_sessions_total",
            "WebRTC sessions since the start: offered (a WHEP offer answered), and connected (ICE and DTLS done).",
            &[
                (&[("state", "offered")], w.started),
                (&[("state", "connected")], w.connected),
            ],
        ),
        counters(
            "camstream_webrtc_key_frame_requests_total",
            "Key frames browsers asked for (RTCP PLI and FIR); the encoder forces at most one a second.",
            &[(&[], w.key_frame_requests)],
        ),
        counters(
            "camstream_webrtc_datagrams_unmatched_total",
            "Datagrams to WebRTC's port that no session took (not its ICE credentials, or not from its peer).",
            &[(&[], w.datagrams_unmatched)],
        ),
        gauges(
            "camstream_connections",
            "Open client connections, by protocol (a tunnel's POST side counts as RTSP).",
            &[
                (&rtsp, f.rtsp_connections as f64),
                (&http, f.http_connections as f64),
            ],
        ),
        counters(
            "camstream_refused_total",
            "Connections and requests refused, by reason.",
            &refusal_reasons
                .iter()
                .zip(&f.refusals)
                .map(|(l, (_, n))| (l.as_slice(), *n))
                .collect::<Vec<_>>(),
        ),
        counters(
            "camstream_http_requests_total",
            "HTTP requests read.",
            &[(&[], f.http_requests)],
        ),
        counters(
            "camstream_snapshots_total",
            "Snapshots answered with a frame.",
            &[(&[], f.snapshots)],
        ),
        gauges(
            "camstream_uptime_seconds",
            "Seconds since the daemon started (monotonic: right even without NTP).",
            &[(&[], f.uptime_seconds)],
        ),
        gauges(
            "process_start_time_seconds",
            "Start time of the process since the Unix epoch, by the camera's clock.",
            &[(&[], f.start_time_seconds)],
        ),
    ];
    if let Some(m) = f.motion {
        families.push(gauges(
            "camstream_motion",
            "Motion in the picture now (1) or not (0): motion detection ([motion]) is on.",
            &[(&[], f64::from(u8::from(m.moving)))],
        ));
        families.push(gauges(
            "camstream_motion_level",
            "The share of the picture (its cells not ignored) the last picture looked at changed, 0 to 1.",
            &[(&[], f64::from(m.level))],
        ));
        families.push(counters(
            "camstream_motion_events_total",
            "Motion events since the start: started, stopped.",
            &[(&[("state", "started")], m.started), (&[("state", "stopped")], m.stopped)],
        ));
        families.push(counters(
            "camstream_motion_pictures_total",
            "Pictures motion detection looked at.",
            &[(&[], m.pictures)],
        ));
        families.push(gauges(
            "camstream_motion_cpu_seconds_total",
            "CPU time motion detection's thread spent decoding and looking at pictures.",
            &[(&[], m.cpu_seconds)],
        ));
        if let Some(c) = m.mqtt_connected {
            families.push(gauges(
                "camstream_mqtt_connected",
                "Whether MQTT ([mqtt]) is connected to its broker (1) or trying again (0).",
                &[(&[], f64::from(u8::from(c)))],
            ));
        }
        if f.onvif {
            families.push(gauges(
                "camstream_onvif_subscriptions",
                "ONVIF event subscriptions (PullPoint) whose term has not ended.",
                &[(&[], m.onvif_subscriptions as f64)],
            ));
        }
    }
    if let Some(a) = f.audio {
        let labels: Vec<[[(&str, &str); 2]; 2]> = a
            .iter()
            .map(|c| [[("codec", c.codec), ("state", "made")], [("codec", c.codec), ("state", "lost")]])
            .collect();
        let values: Vec<(&[(&str, &str)], u64)> = labels
            .iter()
            .zip(a)
            .flat_map(|(l, c)| [(&l[0][..], c.made), (&l[1][..], c.lost)])
            .collect();
        families.push(counters(
            "camstream_audio_frames_total",
            "Sound frames encoded, by encoding (while a client plays it): made, or lost because the server (or the capture, an overrun) was behind.",
            &values,
        ));
    }
    if let Some(rss) = rss_bytes() {
        families.push(gauges(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            &[(&[], rss)],
        ));
    }
    families.push(histograms(
        "camstream_send_latency_seconds",
        "From a frame entering the server to its last byte written to a client, per client and frame.",
        &[(&[], f.latency)],
    ));
    let stall_kinds: Vec<[(&str, &str); 1]> =
        f.stalls.iter().map(|(k, _)| [("kind", *k)]).collect();
    let stalls: Vec<(&[(&str, &str)], &Cumulative)> = stall_kinds
        .iter()
        .zip(&f.stalls)
        .map(|(l, (_, c))| (&l[..], *c))
        .collect();
    families.push(histograms(
        "camstream_input_stall_seconds",
        "The event loop's time on one input handed to a protocol (a request, or what arrived of it), by kind: every other client waited that long.",
        &stalls,
    ));
    let mut out = Vec::with_capacity(8192);
    // The families above are well formed: a failure would be a bug here,
    // answered with what was written rather than a panic.
    if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
        log::error!("metrics: {e}");
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A histogram family, one series per labels and counts.
fn histograms(name: &str, help: &str, series: &[(&[(&str, &str)], &Cumulative)]) -> MetricFamily {
    let metrics = series
        .iter()
        .map(|(labels, total)| {
            let mut h = Histogram::default();
            let mut cumulative = 0;
            let buckets = METRIC_BOUNDS_US
                .iter()
                .zip(total.buckets)
                .map(|(&bound, n)| {
                    cumulative += n;
                    let mut b = Bucket::default();
                    b.set_upper_bound(bound as f64 / 1e6);
                    b.set_cumulative_count(cumulative);
                    b
                })
                .collect();
            h.set_bucket(buckets);
            h.set_sample_count(total.count);
            h.set_sample_sum(total.sum_us as f64 / 1e6);
            let mut m = metric(labels);
            m.set_histogram(h);
            m
        })
        .collect();
    family(name, help, MetricType::HISTOGRAM, metrics)
}
