//! GET /metrics: the daemon's counts in Prometheus' text format, written by
//! the `prometheus` crate's encoder from families built at each scrape
//! (the counts live where they are kept; nothing is registered).

use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};
use prometheus::{Encoder, TextEncoder};

use super::super::conn::Proto;
use super::super::rtsp::Transport;
use super::super::{Refusal, Server};
use super::State;
use crate::clock::Mono;
use crate::intake::{REPAIR_REASONS, repair_reason};
use crate::latency::METRIC_BOUNDS_US;
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

impl Server {
    pub(super) fn metrics_text(&self) -> String {
        let t = &self.totals;
        let c = &self.intake.counts;
        let info = &self.stream.info;
        let (width, height, fps) = (
            info.width.to_string(),
            info.height.to_string(),
            info.fps.to_string(),
        );
        let (rtsp_port, http_port) = (
            self.listener
                .local_addr()
                .map_or(self.cfg.rtsp_port, |a| a.port())
                .to_string(),
            self.http_addr()
                .map_or(self.cfg.http_port, |a| a.port())
                .to_string(),
        );
        let (mut udp, mut tcp, mut tunnelled) = (0.0, 0.0, 0.0);
        for (_, s) in self.sessions.iter() {
            let tunnel = self
                .conns
                .get(s.conn)
                .and_then(|c| c.rtsp())
                .is_some_and(|r| r.tunnel.is_some());
            match s.transport {
                Transport::Udp { .. } => udp += 1.0,
                Transport::Interleaved { .. } if tunnel => tunnelled += 1.0,
                Transport::Interleaved { .. } => tcp += 1.0,
            }
        }
        let (mut rtsp_conns, mut http_conns) = (0.0, 0.0);
        for (_, conn) in self.conns.iter() {
            match &conn.proto {
                Proto::Rtsp(_) => rtsp_conns += 1.0,
                Proto::Http(h) if matches!(h.state, State::TunnelIn { .. }) => rtsp_conns += 1.0,
                Proto::Http(_) => http_conns += 1.0,
            }
        }
        let refused_reasons: Vec<[(&str, &str); 1]> = JpegError::ALL
            .iter()
            .map(|e| [("reason", e.name())])
            .collect();
        let repaired_reasons: Vec<[(&str, &str); 1]> = (0..REPAIR_REASONS)
            .map(|i| [("reason", repair_reason(i))])
            .collect();
        let refusal_reasons: Vec<[(&str, &str); 1]> = Refusal::ALL
            .iter()
            .map(|r| [("reason", r.name())])
            .collect();
        let rtsp = [("protocol", "rtsp")];
        let http = [("protocol", "http")];
        let mode = self.camera.mode.as_str();
        let source = self.cfg.source.to_string();
        // What the status page lists beside the main stream.
        let sub_path = if self.sub.is_some() {
            super::super::sub::PATH
        } else {
            ""
        };
        let onvif = if self.cfg.onvif { "true" } else { "false" };
        let mut families = vec![
            gauges(
                "camstream_info",
                "The daemon: its version, stream paths, ports, stream size and whether ONVIF is on (value 1).",
                &[(
                    &[
                        ("version", env!("CARGO_PKG_VERSION")),
                        ("path", &self.cfg.path),
                        ("sub_path", sub_path),
                        ("onvif", onvif),
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
                "camstream_camera_present",
                "1 while the camera is there, 0 while it is absent (unplugged, not found).",
                &[(&[], if self.camera.present { 1.0 } else { 0.0 })],
            ),
            gauges(
                "camstream_camera_info",
                "The configured source and the mode it runs in (value 1).",
                &[(&[("source", &source), ("mode", mode)], 1.0)],
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
                &[(&rtsp, t.rtsp.frames_sent), (&http, t.http.frames_sent)],
            ),
            counters(
                "camstream_frames_dropped_total",
                "Frames a client did not get because it could not keep up, summed over clients.",
                &[
                    (&rtsp, t.rtsp.frames_dropped),
                    (&http, t.http.frames_dropped),
                ],
            ),
            counters(
                "camstream_bytes_sent_total",
                "Frame bytes written to clients (RTP packets, JPEG parts), summed over clients.",
                &[(&rtsp, t.rtsp.bytes_sent), (&http, t.http.bytes_sent)],
            ),
            gauges(
                "camstream_clients",
                "Streaming clients now, by protocol and transport.",
                &[
                    (&[("protocol", "rtsp"), ("transport", "udp")], udp),
                    (&[("protocol", "rtsp"), ("transport", "tcp")], tcp),
                    (
                        &[("protocol", "rtsp"), ("transport", "http-tunnel")],
                        tunnelled,
                    ),
                    (
                        &[("protocol", "http"), ("transport", "mjpeg")],
                        self.mjpeg_clients() as f64,
                    ),
                ],
            ),
            gauges(
                "camstream_connections",
                "Open client connections, by protocol (a tunnel's POST side counts as RTSP).",
                &[(&rtsp, rtsp_conns), (&http, http_conns)],
            ),
            counters(
                "camstream_refused_total",
                "Connections and requests refused, by reason.",
                &refusal_reasons
                    .iter()
                    .zip(self.admission.refusals)
                    .map(|(l, n)| (l.as_slice(), n))
                    .collect::<Vec<_>>(),
            ),
            counters(
                "camstream_http_requests_total",
                "HTTP requests read.",
                &[(&[], t.http_requests)],
            ),
            counters(
                "camstream_snapshots_total",
                "Snapshots answered with a frame.",
                &[(&[], t.snapshots)],
            ),
            gauges(
                "camstream_uptime_seconds",
                "Seconds since the daemon started (monotonic: right even without NTP).",
                &[(&[], Mono::now().saturating_sub(self.started).as_secs_f64())],
            ),
            gauges(
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch, by the camera's clock.",
                &[(&[], self.started_unix)],
            ),
        ];
        if let Some(rss) = rss_bytes() {
            families.push(gauges(
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                &[(&[], rss)],
            ));
        }
        families.push(self.latency_family());
        let mut out = Vec::with_capacity(8192);
        TextEncoder::new()
            .encode(&families, &mut out)
            .expect("the families above are well formed");
        String::from_utf8(out).expect("the text format is UTF-8")
    }

    fn latency_family(&self) -> MetricFamily {
        let total = &self.send_latency.total;
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
        let mut m = metric(&[]);
        m.set_histogram(h);
        family(
            "camstream_send_latency_seconds",
            "From a frame entering the server to its last byte written to a client, per client and frame.",
            MetricType::HISTOGRAM,
            vec![m],
        )
    }
}
