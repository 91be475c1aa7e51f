//! `v4l2:/dev/videoN` and `v4l2:auto`: capture straight from a V4L2 device
//! (ioctls and mmap, no libv4l), in the daemon's event loop. MJPEG goes out
//! as the camera made it; raw formats are encoded with libjpeg-turbo.
//!
//! The camera may come and go (USB unplug, a driver reset): sessions stay
//! open, the source looks for the device once a second, and streaming
//! resumes on the same sessions when it is back.

mod buffers;
mod capture;
mod controls;
mod device;
mod encode;
pub mod m2m;
mod media;
mod picture;
mod probe;
mod select;
mod sys;

pub use media::libcamera_sensor_present;
pub use probe::probe;
pub use select::{fourcc_name, parse_format};

use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
    timerfd_settime,
};

use super::{CapturedFrame, FrameSource, Settings, StreamInfo};
use crate::clock::Mono;
use crate::source::jpeg::JpegEncoder;
use buffers::Dequeued;
use capture::{Capture, OpenError};
use encode::encode;
use m2m::CameraBuffers;

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
    encoder: JpegEncoder,
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
        let encoder = JpegEncoder::new(settings.quality, settings.fps, &settings.encoder)?;
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

impl FrameSource for V4l2Source {
    fn info(&self) -> StreamInfo {
        self.info
    }

    fn picture(&self) -> Result<std::sync::Arc<dyn crate::source::picture::Controls>, String> {
        match &self.capture {
            Some(c) => Ok(c.picture.clone()),
            None => Err(format!(
                "the camera is not there: looking for {}",
                self.device
            )),
        }
    }

    fn keep_picture(&mut self, changes: &[crate::source::controls::ControlSetting]) {
        crate::source::picture::merge(&mut self.settings.picture, changes);
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
            // A kernel encoder may read YU12 frames where the camera put
            // them.
            let camera =
                (cap.format.fourcc == select::YUV420 && self.encoder.takes_dmabuf()).then(|| {
                    cap.buffers.export();
                    cap.camera_buffers()
                });
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
                // A video-range YU12 frame is made full range where the
                // camera put it, and then encoded as a full-range one.
                let mut format = cap.format;
                if format.fourcc == select::YUV420 && !format.full_range {
                    if let Some(data) = cap.buffers.data_mut(d) {
                        let (stride, rows) = (format.bytesperline as usize, format.height as usize);
                        format.full_range =
                            encode::yu12_full_range_in_place(data, stride, rows, cap.out_size)
                                .is_ok();
                    }
                }
                let data = cap.buffers.data(d);
                if jpeg {
                    // Checked (and made conformant if need be) by the
                    // server, which copies it once into its pool.
                    sink(CapturedFrame {
                        jpeg: data,
                        captured,
                        raw: None,
                    });
                    continue;
                }
                match encode(
                    &mut self.encoder,
                    &mut self.planes,
                    &format,
                    cap.out_size,
                    data,
                    camera.zip(cap.buffers.dmabuf(d)),
                    &mut self.out,
                ) {
                    Ok(raw) => sink(CapturedFrame {
                        jpeg: &self.out,
                        captured,
                        raw,
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

/// A camera's YU12 frames, one at a time in its own buffers, for
/// `camstream encoders --try --from`: what an encoder is handed in the
/// daemon, in place where it can read them.
pub struct Camera {
    cap: Capture,
}

impl Camera {
    pub fn open(path: &std::path::Path, (w, h): (u16, u16)) -> Result<Camera> {
        let settings = Settings {
            spec: super::SourceSpec::V4l2(DeviceSpec::Path(path.into())),
            width: w,
            height: h,
            fps: 30,
            quality: 85,
            encoder: m2m::Choice::Software,
            buffers: 4,
            format: Some(select::YUV420),
            controls: Vec::new(),
            picture: Vec::new(),
        };
        let mut cap = match Capture::open(&DeviceSpec::Path(path.into()), &settings) {
            Ok(c) => c,
            Err(OpenError::Absent(why)) => anyhow::bail!("{why}"),
            Err(OpenError::Unusable(e)) => return Err(e),
        };
        let f = &cap.format;
        if (f.width, f.height) != (w.into(), h.into()) {
            anyhow::bail!(
                "{}: {w}x{h} asked, the camera gives {}x{}",
                path.display(),
                f.width,
                f.height
            );
        }
        cap.buffers.export();
        Ok(Camera { cap })
    }

    pub fn buffers(&self) -> CameraBuffers {
        self.cap.camera_buffers()
    }

    /// Waits for the next frame and hands `f` its planes, their strides
    /// and its buffer (if the driver could export it); the buffer goes
    /// back to the camera when `f` returns.
    pub fn frame<R>(
        &mut self,
        f: impl FnOnce([&[u8]; 3], [usize; 3], Option<m2m::Dmabuf<'_>>) -> R,
    ) -> Result<R> {
        let cap = &mut self.cap;
        let d = loop {
            if let Some(d) = cap.buffers.dequeue(cap.dev.fd())? {
                break d;
            }
            let fd = cap.dev.fd();
            let mut fds = [rustix::event::PollFd::new(
                &fd,
                rustix::event::PollFlags::IN,
            )];
            let five = Timespec {
                tv_sec: 5,
                tv_nsec: 0,
            };
            if rustix::event::poll(&mut fds, Some(&five))? == 0 {
                anyhow::bail!("{}: no frame in 5 s", cap.dev.path.display());
            }
        };
        let (stride, rows) = (cap.format.bytesperline as usize, cap.format.height as usize);
        let r = encode::yu12_planes(cap.buffers.data(&d), stride, rows)
            .map(|(planes, strides)| f(planes, strides, cap.buffers.dmabuf(&d)));
        cap.buffers.queue(cap.dev.fd(), d.index)?;
        r
    }
}
