//! The libcamera frame source: a capture thread that owns libcamera (its
//! camera manager, the camera, the mapped buffers), encodes, and hands
//! JPEG frames to the event loop through one slot and an eventfd.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use rustix::event::{EventfdFlags, eventfd};

use super::CameraSpec;
use super::controls::{self, Resolved};
use super::describe::{self, CameraDesc, ControlDesc};
use super::encode::{Work, encode};
use super::ffi::{self, Camera, Manager, PixFormat, Wait};
use super::picture as offered;
use super::picture::Flips;
use crate::clock::Mono;
use crate::source::controls::ControlSetting;
use crate::source::jpeg::JpegEncoder;
use crate::source::picture::{self, Controls, Setting};
use crate::source::{CapturedFrame, FrameSource, Raw, Settings, StreamInfo};

/// How often a missing camera is looked for.
const RETRY: Duration = Duration::from_secs(1);
/// A camera that gives no frame for this long is taken for gone (without
/// udev libcamera does not hear of an unplugged camera).
const STALL: Duration = Duration::from_secs(3);
/// How long one wait for a frame lasts: how soon a stop is noticed.
const WAIT_MS: i32 = 200;
/// At most one line a minute about skipped and failed frames.
const REPORT_EVERY: Duration = Duration::from_secs(60);

/// Quiets libcamera's logging; call while the process has one thread.
pub fn init() {
    ffi::init();
}

/// `camstream probe`'s libcamera section, or None if libcamera cannot start.
pub fn probe() -> Option<String> {
    match Manager::start() {
        Ok(m) => Some(describe::report(&ffi::version(), &m.cameras())),
        Err(e) => Some(format!("{e:#}\n\n")),
    }
}

/// For `source = "auto"`: whether libcamera has a camera worth taking (not
/// a USB camera, which V4L2 serves better).
pub fn usable_camera() -> bool {
    Manager::start().is_ok_and(|m| m.cameras().iter().any(|c| !c.is_external()))
}

/// Why a camera could not be opened.
enum OpenError {
    /// Not there (yet): wait for it.
    Absent(String),
    /// There, but unusable as configured: a start-up error.
    Unusable(anyhow::Error),
}

/// The JPEG the capture thread made last, waiting for the event loop.
struct Slot {
    jpeg: Vec<u8>,
    captured: Mono,
    fresh: bool,
    /// The frame's picture, packed 4:2:0, when asked for (`want_raw`).
    raw: Vec<u8>,
    raw_size: Option<(usize, usize)>,
}

struct Shared {
    slot: Mutex<Slot>,
    /// Signalled by the capture thread when the slot is fresh.
    event: OwnedFd,
    stop: AtomicBool,
    /// Frames come with their picture too (someone watches H.264).
    want_raw: AtomicBool,
    /// What the camera runs as while it is there (None while absent).
    mode: Mutex<Option<String>>,
    live: Mutex<Live>,
}

/// The camera's controls as picture settings: what the page and ONVIF
/// set goes to the capture thread, which hands it to the next request.
#[derive(Default)]
struct Live {
    /// The camera's controls while it is there.
    have: Vec<ControlDesc>,
    /// Their values as set (by the config, the kept settings, or live).
    now: offered::Values,
    /// Set, for the capture thread to hand over.
    pending: Vec<Resolved>,
    /// The kept settings (camstream.picture.toml and what was set since),
    /// set again whenever the camera opens.
    kept: Vec<ControlSetting>,
    /// The flips asked for, then made (what the camera could), and whether
    /// it can flip.
    flips: Flips,
    /// Flips changed: the capture thread reopens the camera.
    reconfigure: bool,
}

impl Shared {
    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A libcamera camera's picture settings ([`Live`]).
struct LivePicture(Arc<Shared>);

impl Controls for LivePicture {
    fn known(&self) -> Vec<Setting> {
        let live = self.0.live();
        offered::settings(&live.have, &live.now, live.flips)
    }

    fn read(&self) -> Vec<Setting> {
        // What was set is what the camera has: libcamera reports back only
        // what its control loops chose (in metadata), not its settings.
        self.known()
    }

    fn set(&self, changes: &[ControlSetting]) -> Result<(), String> {
        let mut live = self.0.live();
        if live.have.is_empty() {
            return Err("the camera is not there".into());
        }
        let change = offered::resolve(changes, &live.have, &live.now, live.flips)?;
        for r in change.controls {
            live.now.insert(r.id, r.values.clone());
            live.pending.retain(|p| p.id != r.id);
            live.pending.push(r);
        }
        if change.flips != live.flips.now {
            live.flips.now = change.flips;
            live.reconfigure = true;
        }
        // Kept at once: a reopen for the flips may come before the loop
        // keeps them (keep_picture).
        picture::merge(&mut live.kept, changes);
        Ok(())
    }
}

pub struct LibcameraSource {
    info: StreamInfo,
    camera: CameraSpec,
    shared: Arc<Shared>,
    /// The frame being sent (swapped with the slot: no copy, no allocation).
    held: Vec<u8>,
    held_raw: Vec<u8>,
    worker: Option<JoinHandle<()>>,
}

impl LibcameraSource {
    /// Opens the camera on the capture thread. A missing camera is not an
    /// error (the thread waits for it); an unusable one is.
    pub fn open(camera: CameraSpec, settings: Settings) -> Result<LibcameraSource> {
        // Fail at start-up, not in the thread, if libjpeg-turbo is unusable.
        JpegEncoder::new(settings.quality, settings.fps, &settings.encoder)?;
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot {
                jpeg: Vec::new(),
                captured: Mono(0),
                fresh: false,
                raw: Vec::new(),
                raw_size: None,
            }),
            event: eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)?,
            stop: AtomicBool::new(false),
            want_raw: AtomicBool::new(false),
            mode: Mutex::new(None),
            live: Mutex::new(Live {
                kept: settings.picture.clone(),
                flips: Flips {
                    can: false,
                    now: offered::kept_flips(&settings.picture),
                },
                ..Live::default()
            }),
        });
        let mut info = StreamInfo {
            width: settings.width & !7,
            height: settings.height & !7,
            fps: settings.fps,
        };
        let (tx, rx) = sync_channel(1);
        let worker = {
            let (camera, shared) = (camera.clone(), shared.clone());
            std::thread::Builder::new()
                .name("libcamera".into())
                .spawn(move || run(camera, settings, &shared, tx))?
        };
        match rx.recv() {
            Ok(Ok(size)) => (info.width, info.height) = size,
            Ok(Err(OpenError::Absent(why))) => log::warn!("{why}; waiting for {camera}"),
            Ok(Err(OpenError::Unusable(e))) => {
                let _ = worker.join();
                return Err(e);
            }
            Err(_) => {
                let _ = worker.join();
                bail!("the libcamera thread stopped");
            }
        }
        Ok(LibcameraSource {
            info,
            camera,
            shared,
            held: Vec::new(),
            held_raw: Vec::new(),
            worker: Some(worker),
        })
    }
}

impl Drop for LibcameraSource {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

impl FrameSource for LibcameraSource {
    fn info(&self) -> StreamInfo {
        self.info
    }

    fn present(&self) -> bool {
        self.shared.mode.lock().is_ok_and(|m| m.is_some())
    }

    fn want_raw(&mut self, yes: bool) {
        self.shared.want_raw.store(yes, Ordering::Relaxed);
    }

    fn picture(&self) -> Result<Arc<dyn Controls>, String> {
        if !self.present() || self.shared.live().have.is_empty() {
            return Err(format!(
                "the camera is not there: looking for {}",
                self.camera
            ));
        }
        Ok(Arc::new(LivePicture(self.shared.clone())))
    }

    fn keep_picture(&mut self, changes: &[ControlSetting]) {
        picture::merge(&mut self.shared.live().kept, changes);
    }

    fn mode(&self) -> String {
        match self.shared.mode.lock().ok().and_then(|m| m.clone()) {
            Some(m) => m,
            None => format!("absent: looking for {}", self.camera),
        }
    }

    fn register(&mut self, registry: &Registry, token: Token) -> std::io::Result<()> {
        registry.register(
            &mut SourceFd(&self.shared.event.as_raw_fd()),
            token,
            Interest::READABLE,
        )
    }

    fn ready(&mut self, sink: &mut dyn FnMut(CapturedFrame<'_>)) -> Result<()> {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(&self.shared.event, &mut count);
        let captured = {
            let mut slot = self
                .shared
                .slot
                .lock()
                .map_err(|_| anyhow!("libcamera thread panicked"))?;
            if !slot.fresh {
                return Ok(());
            }
            slot.fresh = false;
            std::mem::swap(&mut slot.jpeg, &mut self.held);
            std::mem::swap(&mut slot.raw, &mut self.held_raw);
            (slot.captured, slot.raw_size.take())
        };
        let (captured, raw_size) = captured;
        let raw = raw_size.and_then(|size| Raw::packed(&self.held_raw, size));
        sink(CapturedFrame {
            jpeg: &self.held,
            captured,
            raw,
        });
        Ok(())
    }
}

#[derive(Debug, Default)]
struct Counters {
    frames: u64,
    /// Frames not encoded because a newer one was ready (the CPU is behind).
    skipped: u64,
    /// Frames libcamera flagged as failed, and frames that could not be encoded.
    failed: u64,
    /// Frames the pipeline dropped (sequence gaps).
    dropped: u64,
    lost: u64,
}

/// An open camera, capturing, and the manager it came from (declared in
/// that order: the camera closes first).
struct Capture {
    camera: Camera,
    _manager: Manager,
    desc: CameraDesc,
    format: PixFormat,
    /// What is sent: the capture size cropped to a multiple of 8.
    out_size: (usize, usize),
}

impl Capture {
    fn open(
        camera: &CameraSpec,
        settings: &Settings,
        shared: &Shared,
    ) -> Result<Capture, OpenError> {
        // Without udev, libcamera's manager fails to start while there is
        // no media device at all: a camera yet to come.
        let manager = Manager::start().map_err(|e| OpenError::Absent(format!("{e:#}")))?;
        let cams = manager.cameras();
        let desc = match camera {
            CameraSpec::Auto => cams.into_iter().find(|c| !c.is_external()),
            CameraSpec::Id(id) => cams.into_iter().find(|c| c.id == *id),
        }
        .ok_or_else(|| OpenError::Absent(format!("no {camera}")))?;
        let mut wanted =
            controls::resolve(&settings.controls, &desc.controls).map_err(OpenError::Unusable)?;
        wanted.extend(controls::frame_duration(
            settings.fps,
            &desc.controls,
            &wanted,
        ));
        // The kept picture settings after the config's, as for V4L2.
        let configured: offered::Values = wanted.iter().map(|r| (r.id, r.values.clone())).collect();
        let kept = offered::kept(&shared.live().kept, &desc.controls, &configured);
        for r in kept {
            wanted.retain(|w| w.id != r.id);
            wanted.push(r);
        }
        let flips = shared.live().flips.now;
        let mut camera = manager
            .open(
                &desc.id,
                settings.width.into(),
                settings.height.into(),
                settings.buffers,
                flips,
            )
            .map_err(OpenError::Unusable)?;
        let format = camera.format();
        if format.flips != flips {
            log::warn!(
                "libcamera:{}: the camera cannot flip its picture as asked (horizontal {}, vertical {})",
                desc.id,
                flips & ffi::HFLIP != 0,
                flips & ffi::VFLIP != 0
            );
        }
        let (w, h) = (format.width, format.height);
        if w < 16 || h < 16 {
            return Err(OpenError::Unusable(anyhow!(
                "libcamera:{}: {w}x{h} is too small to encode",
                desc.id
            )));
        }
        for Resolved { id, name, values } in &wanted {
            camera
                .control(*id, values)
                .with_context(|| format!("libcamera:{}: setting {name}", desc.id))
                .map_err(OpenError::Unusable)?;
        }
        camera.start().map_err(OpenError::Unusable)?;
        {
            let mut live = shared.live();
            live.have = desc.controls.clone();
            live.now = wanted.iter().map(|r| (r.id, r.values.clone())).collect();
            live.pending.clear();
            live.flips = Flips {
                can: format.can_flip,
                now: format.flips & (ffi::HFLIP | ffi::VFLIP),
            };
            live.reconfigure = false;
        }
        Ok(Capture {
            camera,
            _manager: manager,
            desc,
            format,
            out_size: (w & !7, h & !7),
        })
    }

    fn describe(&self, settings: &Settings) -> String {
        let f = &self.format;
        let crop = if self.out_size != (f.width, f.height) {
            format!(" (cropped to {}x{})", self.out_size.0, self.out_size.1)
        } else {
            String::new()
        };
        format!(
            "libcamera:{} ({}, libcamera {}): capturing {} {}x{} at up to {} fps, \
             encoding JPEG 4:2:0 at quality {} ({}){crop}",
            self.desc.id,
            if self.desc.model.is_empty() {
                "unnamed"
            } else {
                &self.desc.model
            },
            ffi::version(),
            f.format,
            f.width,
            f.height,
            settings.fps,
            settings.quality,
            crate::source::range_words(f.full_range)
        )
    }
}

/// The capture thread: opens the camera (the first result goes to `first`),
/// streams, and reopens it after a loss until told to stop.
fn run(
    camera: CameraSpec,
    settings: Settings,
    shared: &Shared,
    first: SyncSender<Result<(u16, u16), OpenError>>,
) {
    let mut first = Some(first);
    let mut counts = Counters::default();
    let mut lost_since: Option<Mono> = None;
    let mut said_unusable = false;
    let mut encoder = match JpegEncoder::new(settings.quality, settings.fps, &settings.encoder) {
        Ok(e) => e,
        Err(e) => {
            if let Some(tx) = first.take() {
                let _ = tx.send(Err(OpenError::Unusable(e)));
            }
            return;
        }
    };
    let mut work = Work::default();
    while !shared.stop.load(Ordering::Relaxed) {
        match Capture::open(&camera, &settings, shared) {
            Ok(mut cap) => {
                let away = lost_since.take().map(|t| Mono::now().saturating_sub(t));
                let mode = cap.describe(&settings);
                if let Ok(mut m) = shared.mode.lock() {
                    *m = Some(mode.clone());
                }
                log::info!(
                    "{mode}{}",
                    away.map_or(String::new(), |d| format!(
                        " (camera back after {:.1} s)",
                        d.as_secs_f32()
                    ))
                );
                said_unusable = false;
                let size = (cap.out_size.0 as u16, cap.out_size.1 as u16);
                if let Some(tx) = first.take() {
                    let _ = tx.send(Ok(size));
                }
                let end = capture_frames(&mut cap, &mut encoder, &mut work, shared, &mut counts);
                if let Ok(mut m) = shared.mode.lock() {
                    *m = None;
                }
                shared.live().have.clear();
                let why = match end {
                    End::Stopped => return,
                    End::Reconfigure => {
                        // Closed and opened again at once: not a loss.
                        log::info!("libcamera:{}: reopening it flipped as set", cap.desc.id);
                        continue;
                    }
                    End::Lost(why) => why,
                };
                cap.camera.mark_lost();
                counts.lost += 1;
                lost_since = Some(Mono::now());
                log::warn!(
                    "libcamera:{}: camera lost ({why}); sessions stay open, looking for it every {} s",
                    cap.desc.id,
                    RETRY.as_secs()
                );
            }
            Err(OpenError::Absent(why)) => {
                if let Some(tx) = first.take() {
                    lost_since = Some(Mono::now());
                    let _ = tx.send(Err(OpenError::Absent(why)));
                }
            }
            Err(OpenError::Unusable(e)) => {
                if let Some(tx) = first.take() {
                    let _ = tx.send(Err(OpenError::Unusable(e)));
                    return;
                }
                // Once per disappearance, not every second.
                if !said_unusable {
                    log::error!("{e:#}");
                    said_unusable = true;
                }
            }
        }
        sleep_unless_stopped(shared, RETRY);
    }
}

fn sleep_unless_stopped(shared: &Shared, d: Duration) {
    let step = Duration::from_millis(WAIT_MS as u64);
    let mut left = d;
    while !left.is_zero() && !shared.stop.load(Ordering::Relaxed) {
        std::thread::sleep(step.min(left));
        left = left.saturating_sub(step);
    }
}

/// Why capturing ended.
enum End {
    /// The source stops.
    Stopped,
    /// The camera is lost: why.
    Lost(String),
    /// Its flips changed: it is opened again.
    Reconfigure,
}

/// Captures until the camera is lost, its flips change, or the source
/// stops.
fn capture_frames(
    cap: &mut Capture,
    encoder: &mut JpegEncoder,
    work: &mut Work,
    shared: &Shared,
    counts: &mut Counters,
) -> End {
    let mut last = Mono::now();
    let mut sequence: Option<u32> = None;
    let mut reported = (0, 0, 0);
    let mut reported_at: Option<Mono> = None;
    let (format, out_size) = (cap.format.clone(), cap.out_size);
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            return End::Stopped;
        }
        // Picture settings set since: the request requeued next carries
        // them; flips need the camera configured anew.
        let (set, reconfigure) = {
            let mut live = shared.live();
            (
                std::mem::take(&mut live.pending),
                std::mem::take(&mut live.reconfigure),
            )
        };
        if reconfigure {
            return End::Reconfigure;
        }
        for r in set {
            log::debug!(
                "libcamera:{}: {} = {:?} from the next request",
                cap.desc.id,
                r.name,
                r.values
            );
            if let Err(e) = cap.camera.control(r.id, &r.values) {
                log::warn!("libcamera:{}: setting {}: {e:#}", cap.desc.id, r.name);
            }
        }
        let now = Mono::now();
        let frame = match cap.camera.wait(WAIT_MS) {
            Wait::Gone => return End::Lost("disconnected".into()),
            Wait::Nothing if now.saturating_sub(last) > STALL => {
                return End::Lost(format!("no frame for {} s", STALL.as_secs()));
            }
            Wait::Nothing => continue,
            Wait::Frame(f) => f,
        };
        last = now;
        counts.frames += 1;
        counts.skipped += u64::from(frame.skipped);
        counts.failed += u64::from(frame.failed);
        // Frames skipped here have sequence numbers too.
        if let Some(prev) = sequence {
            let gap = frame
                .sequence
                .wrapping_sub(prev)
                .saturating_sub(1 + frame.skipped);
            counts.dropped += u64::from(gap);
        }
        sequence = Some(frame.sequence);
        // V4L2 timestamps are CLOCK_MONOTONIC, as Mono is.
        let captured = if frame.timestamp_ns > 0 && frame.timestamp_ns <= now.0 {
            Mono(frame.timestamp_ns)
        } else {
            now
        };
        let index = frame.index;
        // Its buffers go once no one wants the pictures.
        let want_raw = shared.want_raw.load(Ordering::Relaxed);
        let mut raw = match want_raw {
            true => std::mem::take(&mut work.raw),
            false => Vec::new(),
        };
        let encoded = encode(encoder, work, &format, out_size, &frame).map(|r| {
            // Copied before the buffer goes back to the camera.
            r.filter(|_| want_raw).and_then(|r| r.pack(&mut raw))
        });
        work.raw = raw;
        if let Err(e) = cap.camera.requeue(index) {
            return End::Lost(format!("{e:#}"));
        }
        match encoded {
            Ok(raw_size) => {
                if let Ok(mut slot) = shared.slot.lock() {
                    std::mem::swap(&mut slot.jpeg, &mut work.out);
                    std::mem::swap(&mut slot.raw, &mut work.raw);
                    slot.raw_size = raw_size;
                    slot.captured = captured;
                    slot.fresh = true;
                }
                let _ = rustix::io::write(&shared.event, &1u64.to_ne_bytes());
            }
            Err(e) => {
                counts.failed += 1;
                log::debug!("frame not encoded: {e:#}");
            }
        }
        if (counts.skipped, counts.failed, counts.dropped) != reported
            && reported_at.is_none_or(|t| now.saturating_sub(t) >= REPORT_EVERY)
        {
            log::warn!(
                "camera: {} frames captured, {} dropped by the pipeline, {} not encoded \
                 (a newer frame was ready: the CPU is behind), {} failed; lost {} times",
                counts.frames,
                counts.dropped,
                counts.skipped,
                counts.failed,
                counts.lost
            );
            reported = (counts.skipped, counts.failed, counts.dropped);
            reported_at = Some(now);
        }
    }
}
