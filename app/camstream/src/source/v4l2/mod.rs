//! `v4l2:/dev/videoN` and `v4l2:auto`: capture straight from a V4L2 device
//! (ioctls and mmap, no libv4l), in the daemon's event loop. MJPEG goes out
//! as the camera made it; raw formats are encoded with libjpeg-turbo.
//!
//! The camera may come and go (USB unplug, a driver reset): sessions stay
//! open, the source looks for the device once a second, and streaming
//! resumes on the same sessions when it is back.

mod controls;
mod device;
mod select;
mod sys;

pub use select::parse_format;

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use rustix::io::Errno;
use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
    timerfd_settime,
};

use super::{CapturedFrame, FrameSource, Settings, StreamInfo};
use crate::clock::Mono;
use crate::convert::{Packed422, i420_plane_sizes, packed422_to_i420, split_uv};
use crate::turbo::Encoder;
use device::{Buffers, Dequeued, Device, PixFormat};
use select::{BGR24, NV12, RGB24, UYVY, YUV420, YUYV, fourcc_name};

/// Which device `--source v4l2:...` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    /// The first capture device that offers a usable format.
    Auto,
    Path(PathBuf),
}

impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSpec::Auto => f.write_str("the first camera"),
            DeviceSpec::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// How often a missing camera is looked for; the first look comes sooner,
/// as a driver reset or a quick replug brings the device back at once.
const RETRY: Duration = Duration::from_secs(1);
const FIRST_RETRY: Duration = Duration::from_millis(250);
/// At most one line a minute about drops and corrupt frames.
const REPORT_EVERY: Duration = Duration::from_secs(60);

/// Why a camera could not be opened.
enum OpenError {
    /// Not there (yet): wait for it.
    Absent(String),
    /// There, but unusable as configured: a start-up error.
    Unusable(anyhow::Error),
}

impl From<anyhow::Error> for OpenError {
    fn from(e: anyhow::Error) -> Self {
        OpenError::Unusable(e)
    }
}

/// An open camera, capturing. `buffers` is declared first so it is dropped
/// (STREAMOFF, munmap) before the device's descriptor is closed.
struct Capture {
    buffers: Buffers,
    dev: Device,
    format: PixFormat,
    fps: Option<f64>,
    /// Size of the frames sent: the capture size rounded down to a multiple
    /// of 8, which is what RTP/JPEG headers can express.
    out_size: (usize, usize),
}

impl Capture {
    fn open(device: &DeviceSpec, settings: &Settings) -> Result<Capture, OpenError> {
        let size = (u32::from(settings.width), u32::from(settings.height));
        let dev = match device {
            DeviceSpec::Path(p) => open_node(p)?,
            DeviceSpec::Auto => device::list()
                .iter()
                .filter_map(|p| open_node(p).ok())
                .find(|d| {
                    d.caps.can_capture()
                        && d.formats(size)
                            .is_ok_and(|f| f.iter().any(|f| select::is_supported(f.fourcc)))
                })
                .ok_or_else(|| OpenError::Absent("no V4L2 capture device".into()))?,
        };
        let name = dev.path.display().to_string();
        if !dev.caps.can_capture() {
            let why = if dev.caps.device_caps & sys::V4L2_CAP_VIDEO_CAPTURE_MPLANE != 0 {
                "is a multi-planar capture device, which camstream does not support"
            } else {
                "is not a video capture device"
            };
            return Err(anyhow!("{name} ({}) {why}", dev.caps.card).into());
        }
        if !dev.caps.can_stream() {
            return Err(anyhow!("{name} ({}) cannot stream (no mmap I/O)", dev.caps.card).into());
        }
        let formats = dev
            .formats(size)
            .with_context(|| format!("{name}: listing formats"))?;
        let mut modes = Device::modes(&formats);
        if let Some(only) = settings.format {
            modes.retain(|m| m.fourcc == only);
            if modes.is_empty() {
                let offered: Vec<String> = formats.iter().map(|f| fourcc_name(f.fourcc)).collect();
                return Err(anyhow!(
                    "{name} ({}) has no {} format (it offers {})",
                    dev.caps.card,
                    fourcc_name(only),
                    offered.join(", ")
                )
                .into());
            }
        }
        let Some(mode) = select::choose(&modes, size, settings.fps) else {
            let offered: Vec<String> = formats.iter().map(|f| fourcc_name(f.fourcc)).collect();
            return Err(anyhow!(
                "{name} ({}) offers {}; camstream captures MJPEG, JPEG, YU12, NV12, YUYV, UYVY, RGB3 or BGR3",
                dev.caps.card,
                if offered.is_empty() { "no formats".into() } else { offered.join(", ") }
            )
            .into());
        };
        let format = dev
            .set_format(mode.fourcc, mode.width, mode.height)
            .with_context(|| format!("{name}: setting {}", fourcc_name(mode.fourcc)))?;
        if format.fourcc != mode.fourcc {
            return Err(anyhow!(
                "{name}: asked for {} but the driver set {}",
                fourcc_name(mode.fourcc),
                fourcc_name(format.fourcc)
            )
            .into());
        }
        let fps = dev
            .set_fps(settings.fps)
            .with_context(|| format!("{name}: setting the frame rate"))?;
        if !settings.controls.is_empty() {
            let all = dev
                .controls()
                .with_context(|| format!("{name}: listing controls"))?;
            for (c, v) in
                controls::resolve(&settings.controls, &all).with_context(|| name.clone())?
            {
                dev.set_control(c, v)
                    .with_context(|| format!("{name}: setting {} = {v}", controls::key(&c.name)))?;
            }
        }
        let (w, h) = (format.width as usize, format.height as usize);
        if !select::is_jpeg(format.fourcc) && (w < 16 || h < 16) {
            return Err(anyhow!("{name}: {w}x{h} is too small to encode").into());
        }
        let buffers = dev
            .start(settings.buffers)
            .with_context(|| format!("{name}: starting to stream"))?;
        Ok(Capture {
            buffers,
            dev,
            format,
            fps,
            out_size: (w & !7, h & !7),
        })
    }

    fn describe(&self, quality: u8) -> String {
        let f = &self.format;
        let rate = self
            .fps
            .map_or("at the driver's rate".into(), |r| format!("at {r} fps"));
        let what = if select::is_jpeg(f.fourcc) {
            "sending the camera's JPEG".to_string()
        } else {
            format!("encoding JPEG 4:2:0 at quality {quality}")
        };
        let crop = if self.out_size != (f.width as usize, f.height as usize) {
            format!(" (cropped to {}x{})", self.out_size.0, self.out_size.1)
        } else {
            String::new()
        };
        format!(
            "{} ({}, {}): capturing {} {}x{} {rate}, {what}{crop}",
            self.dev.path.display(),
            self.dev.caps.card,
            self.dev.caps.driver,
            fourcc_name(f.fourcc),
            f.width,
            f.height,
        )
    }
}

fn open_node(path: &Path) -> Result<Device, OpenError> {
    Device::open(path).map_err(|e| match e.raw_os_error().map(Errno::from_raw_os_error) {
        Some(Errno::NOENT | Errno::NODEV | Errno::NXIO | Errno::IO) => {
            OpenError::Absent(format!("{}: {e}", path.display()))
        }
        Some(Errno::NOTTY | Errno::INVAL) => {
            OpenError::Unusable(anyhow!("{} is not a V4L2 device", path.display()))
        }
        _ => OpenError::Unusable(anyhow!("{}: {e}", path.display())),
    })
}

#[derive(Debug, Default)]
struct Counters {
    frames: u64,
    /// Frames the driver dropped (sequence gaps).
    dropped: u64,
    /// Buffers the driver flagged as corrupt.
    corrupt: u64,
    /// Raw frames not encoded because a newer one was ready too (the CPU
    /// could not keep up with the camera).
    skipped: u64,
    /// Times the camera went away.
    lost: u64,
}

pub struct V4l2Source {
    device: DeviceSpec,
    settings: Settings,
    info: StreamInfo,
    capture: Option<Capture>,
    registry: Option<Registry>,
    token: Token,
    /// Fires once a second while the camera is missing.
    retry: OwnedFd,
    lost_since: Option<Mono>,
    encoder: Encoder,
    planes: [Vec<u8>; 3],
    out: Vec<u8>,
    /// Buffers dequeued in one turn (reused: no allocation per frame).
    ready: Vec<Dequeued>,
    counts: Counters,
    reported: (u64, u64, u64),
    reported_at: Option<Mono>,
}

impl V4l2Source {
    /// Opens the camera. A missing camera is not an error (the source waits
    /// for it); an unusable one is.
    pub fn open(device: DeviceSpec, settings: Settings) -> Result<V4l2Source> {
        let retry = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        let encoder = Encoder::new(settings.quality)?;
        let mut src = V4l2Source {
            info: StreamInfo {
                width: settings.width & !7,
                height: settings.height & !7,
                fps: settings.fps,
            },
            device,
            settings,
            capture: None,
            registry: None,
            token: Token(0),
            retry,
            lost_since: None,
            encoder,
            planes: Default::default(),
            out: Vec::new(),
            ready: Vec::with_capacity(32),
            counts: Counters::default(),
            reported: (0, 0, 0),
            reported_at: None,
        };
        match Capture::open(&src.device, &src.settings) {
            Ok(cap) => {
                log::info!("{}", cap.describe(src.settings.quality));
                src.info = StreamInfo {
                    width: cap.out_size.0 as u16,
                    height: cap.out_size.1 as u16,
                    fps: cap
                        .fps
                        .map_or(src.settings.fps, |f| f.round().max(1.0) as u32),
                };
                src.capture = Some(cap);
            }
            Err(OpenError::Absent(why)) => {
                log::warn!("{why}; waiting for {}", src.device);
                src.lost_since = Some(Mono::now());
            }
            Err(OpenError::Unusable(e)) => return Err(e),
        }
        Ok(src)
    }

    fn arm_retry(&self, on: bool) -> io::Result<()> {
        let ts = |d: Duration| Timespec {
            tv_sec: d.as_secs() as _,
            tv_nsec: d.subsec_nanos() as _,
        };
        let (first, every) = if on {
            (FIRST_RETRY, RETRY)
        } else {
            (Duration::ZERO, Duration::ZERO)
        };
        timerfd_settime(
            &self.retry,
            TimerfdTimerFlags::empty(),
            &Itimerspec {
                it_interval: ts(every),
                it_value: ts(first),
            },
        )?;
        Ok(())
    }

    fn watch(&mut self) -> io::Result<()> {
        if let (Some(cap), Some(reg)) = (&self.capture, &self.registry) {
            reg.register(
                &mut SourceFd(&cap.dev.raw_fd()),
                self.token,
                Interest::READABLE,
            )?;
        }
        Ok(())
    }

    /// The camera failed: close it and start looking for it.
    fn lose(&mut self, why: &io::Error) {
        if let Some(cap) = self.capture.take() {
            if let Some(reg) = &self.registry {
                let _ = reg.deregister(&mut SourceFd(&cap.dev.raw_fd()));
            }
            log::warn!(
                "{}: camera lost ({why}); sessions stay open, looking for it every {} s",
                cap.dev.path.display(),
                RETRY.as_secs()
            );
        }
        self.counts.lost += 1;
        self.lost_since = Some(Mono::now());
        if let Err(e) = self.arm_retry(true) {
            log::error!("camera retry timer: {e}");
        }
    }

    fn try_reopen(&mut self) {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(&self.retry, &mut buf);
        match Capture::open(&self.device, &self.settings) {
            Ok(cap) => {
                let away = self
                    .lost_since
                    .take()
                    .map(|t| Mono::now().saturating_sub(t));
                log::info!(
                    "{}{}",
                    cap.describe(self.settings.quality),
                    away.map_or(String::new(), |d| format!(
                        " (camera back after {:.1} s)",
                        d.as_secs_f32()
                    ))
                );
                let size = (cap.out_size.0 as u16, cap.out_size.1 as u16);
                if size != (self.info.width, self.info.height) {
                    log::warn!(
                        "the camera now gives {}x{}; clients were told {}x{}",
                        size.0,
                        size.1,
                        self.info.width,
                        self.info.height
                    );
                }
                self.capture = Some(cap);
                let _ = self.arm_retry(false);
                if let Err(e) = self.watch() {
                    self.lose(&e);
                }
            }
            Err(OpenError::Absent(_)) => {}
            Err(OpenError::Unusable(e)) => {
                // Say it once per disappearance, not every second.
                if self
                    .lost_since
                    .is_some_and(|t| Mono::now().saturating_sub(t) < RETRY * 2)
                {
                    log::error!("{e:#}");
                }
            }
        }
    }

    fn report(&mut self) {
        let c = &self.counts;
        if (c.dropped, c.corrupt, c.skipped) == self.reported {
            return;
        }
        let now = Mono::now();
        if self
            .reported_at
            .is_some_and(|t| now.saturating_sub(t) < REPORT_EVERY)
        {
            return;
        }
        log::warn!(
            "camera: {} frames captured, {} dropped by the driver, {} corrupt (skipped), \
             {} not encoded (a newer frame was ready: the CPU is behind); lost {} times",
            c.frames,
            c.dropped,
            c.corrupt,
            c.skipped,
            c.lost
        );
        self.reported = (c.dropped, c.corrupt, c.skipped);
        self.reported_at = Some(now);
    }
}

/// Encodes a raw frame as JPEG into `out`.
fn encode(
    enc: &mut Encoder,
    planes: &mut [Vec<u8>; 3],
    f: &PixFormat,
    (w, h): (usize, usize),
    data: &[u8],
    out: &mut Vec<u8>,
) -> Result<()> {
    let stride = f.bytesperline as usize;
    let rows = f.height as usize;
    let sizes = i420_plane_sizes(w, h);
    let need = |len: usize| -> Result<()> {
        if data.len() < len {
            bail!("short buffer: {} bytes, expected {len}", data.len());
        }
        Ok(())
    };
    match f.fourcc {
        YUV420 => {
            let cs = stride / 2;
            let (ch_full, y_len) = (rows.div_ceil(2), stride * rows);
            need(y_len + 2 * cs * ch_full)?;
            let (y, rest) = data.split_at(y_len);
            let (u, v) = rest.split_at(cs * ch_full);
            enc.encode_planes([y, u, v], [stride, cs, cs], w, h, out)
        }
        NV12 => {
            let y_len = stride * rows;
            need(y_len + stride * rows.div_ceil(2))?;
            let (cw, ch) = sizes[1];
            for p in &mut planes[1..] {
                p.resize(cw * ch, 0);
            }
            let [_, u, v] = planes;
            split_uv(&data[y_len..], stride, cw, ch, u, v);
            enc.encode_planes([&data[..y_len], u, v], [stride, cw, cw], w, h, out)
        }
        YUYV | UYVY => {
            need(stride * rows)?;
            for (p, (pw, ph)) in planes.iter_mut().zip(sizes) {
                p.resize(pw * ph, 0);
            }
            let layout = if f.fourcc == YUYV {
                Packed422::Yuyv
            } else {
                Packed422::Uyvy
            };
            let [y, u, v] = planes;
            packed422_to_i420(data, stride, w, h, layout, [y, u, v]);
            enc.encode_i420([y, u, v], w, h, out)
        }
        RGB24 | BGR24 => {
            need(stride * rows)?;
            enc.encode_rgb(data, stride, f.fourcc == BGR24, w, h, out)
        }
        other => bail!("cannot encode {}", fourcc_name(other)),
    }
}

impl FrameSource for V4l2Source {
    fn info(&self) -> StreamInfo {
        self.info
    }

    fn present(&self) -> bool {
        self.capture.is_some()
    }

    fn mode(&self) -> String {
        match &self.capture {
            Some(cap) => cap.describe(self.settings.quality),
            None => format!("absent: looking for {}", self.device),
        }
    }

    fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        self.registry = Some(registry.try_clone()?);
        self.token = token;
        registry.register(
            &mut SourceFd(&std::os::fd::AsRawFd::as_raw_fd(&self.retry)),
            token,
            Interest::READABLE,
        )?;
        if self.capture.is_some() {
            self.watch()?;
        } else {
            self.arm_retry(true)?;
        }
        Ok(())
    }

    fn ready(&mut self, sink: &mut dyn FnMut(CapturedFrame<'_>)) -> Result<()> {
        if self.capture.is_none() {
            self.try_reopen();
        }
        let mut failure = None;
        if let Some(cap) = &mut self.capture {
            // Edge-triggered: take every buffer that is ready now, and only
            // then work on them, so one call does bounded work. Encoding
            // buffer by buffer while the driver keeps filling them never
            // returns to the event loop once encoding is slower than the
            // camera (a busy CPU): no connection would be served again.
            let ready = &mut self.ready;
            ready.clear();
            loop {
                match cap.buffers.dequeue(cap.dev.fd()) {
                    Ok(Some(d)) => ready.push(d),
                    Ok(None) => break,
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            let jpeg = select::is_jpeg(cap.format.fourcc);
            // Raw frames cost an encode each: only the newest is worth it.
            let newest_good = ready.iter().rposition(|d| !d.error);
            for (i, d) in ready.iter().enumerate() {
                log::trace!(
                    "buffer {}: {} bytes, {} dropped before it{}",
                    d.index,
                    d.bytesused,
                    d.dropped,
                    if d.error { ", flagged corrupt" } else { "" }
                );
                self.counts.dropped += u64::from(d.dropped);
                if d.error {
                    self.counts.corrupt += 1;
                    continue;
                }
                self.counts.frames += 1;
                if !jpeg && Some(i) != newest_good {
                    self.counts.skipped += 1;
                    continue;
                }
                let captured = d.captured.unwrap_or_else(Mono::now);
                let data = cap.buffers.data(d);
                if jpeg {
                    // Checked (and made conformant if need be) by the
                    // server, which copies it once into its pool.
                    sink(CapturedFrame {
                        jpeg: data,
                        captured,
                    });
                    continue;
                }
                match encode(
                    &mut self.encoder,
                    &mut self.planes,
                    &cap.format,
                    cap.out_size,
                    data,
                    &mut self.out,
                ) {
                    Ok(()) => sink(CapturedFrame {
                        jpeg: &self.out,
                        captured,
                    }),
                    Err(e) => {
                        self.counts.corrupt += 1;
                        log::debug!("frame not encoded: {e:#}");
                    }
                }
            }
            for d in ready.iter() {
                if let Err(e) = cap.buffers.queue(cap.dev.fd(), d.index) {
                    failure.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failure {
            self.lose(&e);
        } else if let (Some(cap), Some(reg)) = (&self.capture, &self.registry) {
            if cap.dev.caps.driver == "v4l2 loopback" {
                // v4l2loopback (0.12.x) only hooks a poller onto its wait
                // queue when no frame is pending at the time it is polled,
                // so an epoll registration made while a frame was pending
                // never hears of later ones. Registering again now, with
                // the queue drained, hooks it (and if a frame slipped in,
                // the new registration reports it and we come back here).
                let fd = cap.dev.raw_fd();
                reg.deregister(&mut SourceFd(&fd))?;
                reg.register(&mut SourceFd(&fd), self.token, Interest::READABLE)?;
            }
        }
        self.report();
        Ok(())
    }
}

/// `camstream probe [DEVICE]`: what each capture device offers, like
/// `v4l2-ctl --list-formats-ext --list-ctrls`.
pub fn probe(device: Option<&Path>) -> Result<String> {
    use std::fmt::Write;
    let paths = match device {
        Some(p) => vec![p.to_path_buf()],
        None => device::list(),
    };
    if paths.is_empty() {
        bail!("no V4L2 devices (/dev/video*)");
    }
    let mut s = String::new();
    for path in &paths {
        let dev = match Device::open(path) {
            Ok(d) => d,
            Err(e) if device.is_some() => return Err(anyhow!("{}: {e}", path.display())),
            Err(e) => {
                let _ = writeln!(s, "{}: {e}\n", path.display());
                continue;
            }
        };
        let c = &dev.caps;
        let mut kinds = Vec::new();
        if c.can_capture() {
            kinds.push("video capture");
        }
        if c.device_caps & sys::V4L2_CAP_VIDEO_CAPTURE_MPLANE != 0 {
            kinds.push("multi-planar capture (unsupported)");
        }
        if c.can_stream() {
            kinds.push("streaming");
        }
        if kinds.is_empty() {
            kinds.push("no video capture");
        }
        let _ = writeln!(
            s,
            "{}: {} (driver {}, {}): {}",
            path.display(),
            c.card,
            c.driver,
            c.bus_info,
            kinds.join(", ")
        );
        if !c.can_capture() {
            s.push('\n');
            continue;
        }
        let _ = writeln!(s, "  formats:");
        for f in dev.formats((u32::MAX, u32::MAX)).unwrap_or_default() {
            let usable = if select::is_supported(f.fourcc) {
                ""
            } else {
                " (not used by camstream)"
            };
            let _ = writeln!(
                s,
                "    {} ({}){usable}",
                fourcc_name(f.fourcc),
                f.description
            );
            if let select::Sizes::Stepwise { min, max, step } = f.sizes {
                let _ = writeln!(
                    s,
                    "      {}x{} to {}x{}, steps {}x{}",
                    min.0, min.1, max.0, max.1, step.0, step.1
                );
                continue;
            }
            for ((w, h), rates) in &f.rates {
                let r = match rates {
                    device::Rates::Discrete(v) => {
                        let v: Vec<String> = v.iter().map(|f| format!("{f}")).collect();
                        format!("{} fps", v.join(", "))
                    }
                    device::Rates::Range { min, max } => format!("{min} to {max} fps"),
                    device::Rates::Unknown => "rates not listed".into(),
                };
                let _ = writeln!(s, "      {w}x{h}: {r}");
            }
        }
        let _ = writeln!(s, "  controls:");
        for ctl in dev.controls().unwrap_or_default() {
            let cur = dev.get_control(&ctl).ok();
            let _ = writeln!(s, "    {}", controls::describe(&ctl, cur));
        }
        s.push('\n');
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Conversion + encoding throughput for a raw camera format on this
    /// machine (a figure, not a check):
    /// `cargo test --release -p camstream -- --ignored --nocapture raw_capture_encode_speed`
    #[test]
    #[ignore]
    fn raw_capture_encode_speed() {
        // 720p in every raw layout; 1080p in the two libcamera hands over
        // (the Pi's ISP gives YUV420 or NV12), encoded the same way.
        let cases = [(YUYV, 2), (NV12, 0), (YUV420, 0), (RGB24, 3)]
            .map(|(f, bpp)| (f, bpp, 1280usize, 720usize))
            .into_iter()
            .chain([(YUV420, 0, 1920, 1080), (NV12, 0, 1920, 1080)]);
        for (fourcc, bpp, w, h) in cases {
            let stride = if bpp > 0 { w * bpp } else { w };
            let len = if bpp > 0 { stride * h } else { w * h * 3 / 2 };
            // Gradients with some sensor-like noise: about what a camera's
            // frame costs the entropy coder.
            let mut frame: Vec<u8> = (0..len)
                .map(|i| {
                    ((i % stride) / 8 + (i / stride) / 4 + ((i * 2_654_435_761) >> 13) % 12) as u8
                })
                .collect();
            let f = PixFormat {
                fourcc,
                width: w as u32,
                height: h as u32,
                bytesperline: stride as u32,
                sizeimage: len as u32,
            };
            let mut enc = Encoder::new(80).unwrap();
            let (mut planes, mut out) = (Default::default(), Vec::new());
            let n = 150;
            let t = std::time::Instant::now();
            for i in 0..n {
                frame[i] = frame[i].wrapping_add(1);
                encode(&mut enc, &mut planes, &f, (w, h), &frame, &mut out).unwrap();
            }
            let s = t.elapsed().as_secs_f64();
            println!(
                "{} {w}x{h}: {:.0} frames/s on one core ({:.2} ms/frame, {} KB/frame)",
                fourcc_name(fourcc),
                n as f64 / s,
                s * 1000.0 / n as f64,
                out.len() / 1000
            );
        }
    }
}
