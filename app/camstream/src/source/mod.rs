//! Frame sources: where JPEG frames come from. A source owns a file
//! descriptor the event loop polls (a timer, an eventfd a worker thread
//! signals, or a V4L2 device) and hands over frames when it is ready.

pub mod controls;
pub mod file;
pub mod jpeg;
pub mod libcamera;
pub mod picture;
pub mod testpattern;
pub mod v4l2;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, bail};
use mio::{Registry, Token};

use crate::clock::Mono;
use controls::ControlSetting;

/// What `--source` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    /// A moving pattern encoded with libjpeg-turbo: no camera needed.
    TestPattern,
    /// A concatenated MJPEG stream (as `ffmpeg -f mjpeg` writes), looped.
    File(PathBuf),
    /// A V4L2 capture device (a USB webcam, a CSI camera's capture node).
    V4l2(v4l2::DeviceSpec),
    /// A camera libcamera drives (the Raspberry Pi's Camera Modules).
    Libcamera(libcamera::CameraSpec),
    /// A libcamera camera if there is one, else the first V4L2 camera.
    Auto,
}

impl SourceSpec {
    pub fn parse(s: &str) -> Result<SourceSpec> {
        if s == "testpattern" {
            return Ok(SourceSpec::TestPattern);
        }
        if s == "auto" {
            return Ok(SourceSpec::Auto);
        }
        if let Some(id) = s.strip_prefix("libcamera:") {
            return Ok(SourceSpec::Libcamera(match id {
                "auto" => libcamera::CameraSpec::Auto,
                "" => bail!(
                    "source = {s:?}: give a camera, e.g. libcamera:auto, or an id `camstream probe` lists"
                ),
                id => libcamera::CameraSpec::Id(id.into()),
            }));
        }
        if let Some(path) = s.strip_prefix("file:") {
            if path.is_empty() {
                bail!("source = {s:?}: give a path, e.g. file:/data/clip.mjpeg");
            }
            return Ok(SourceSpec::File(path.into()));
        }
        if let Some(dev) = s.strip_prefix("v4l2:") {
            return Ok(SourceSpec::V4l2(match dev {
                "auto" => v4l2::DeviceSpec::Auto,
                "" => bail!("source = {s:?}: give a device, e.g. v4l2:/dev/video0, or v4l2:auto"),
                path => v4l2::DeviceSpec::Path(path.into()),
            }));
        }
        bail!(
            "source = {s:?}: use auto, libcamera:auto, libcamera:ID, v4l2:auto, v4l2:/dev/videoN, \
             testpattern or file:PATH"
        )
    }
}

impl std::fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceSpec::TestPattern => f.write_str("the test pattern"),
            SourceSpec::File(p) => write!(f, "{}", p.display()),
            SourceSpec::V4l2(d) => d.fmt(f),
            SourceSpec::Libcamera(c) => c.fmt(f),
            SourceSpec::Auto => f.write_str("the first camera"),
        }
    }
}

/// What a source is opened with (from the config): which source, the
/// stream's size, rate and JPEG quality, and how a camera captures it.
#[derive(Debug, Clone)]
pub struct Settings {
    pub spec: SourceSpec,
    /// Asked for: a camera gives the nearest size it has; frames are
    /// cropped to a multiple of 8.
    pub width: u16,
    pub height: u16,
    pub fps: u32,
    /// Of the JPEG camstream encodes (raw camera formats, the test pattern).
    pub quality: u8,
    /// Which encoder makes that JPEG of raw camera frames.
    pub encoder: v4l2::m2m::Choice,
    /// Camera buffers the driver fills while frames are sent.
    pub buffers: u32,
    /// A pixel format a V4L2 camera must use (fourcc, as
    /// [`v4l2::parse_format`] checks it), if the user chose one.
    pub format: Option<u32>,
    /// Camera controls, in the order given (a later one wins).
    pub controls: Vec<ControlSetting>,
    /// Picture settings kept from the page or ONVIF (camstream.picture.toml),
    /// set after `controls`; one the camera refuses is logged and skipped.
    pub picture: Vec<ControlSetting>,
}

/// What clients are told about the stream before any frame is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamInfo {
    pub width: u16,
    pub height: u16,
    pub fps: u32,
}

/// One captured frame, borrowed from the source until the callback returns.
#[derive(Debug, Clone, Copy)]
pub struct CapturedFrame<'a> {
    pub jpeg: &'a [u8],
    /// When the frame was captured (not when it was read).
    pub captured: Mono,
    /// The raw picture `jpeg` was encoded from, where the source had one
    /// (and, for sources that copy it across threads, was asked for it:
    /// [`FrameSource::want_raw`]): an H.264 encoder takes it instead of
    /// decoding the JPEG again.
    /// Its samples, as the JPEG's, span the full range (JFIF's): every
    /// source makes video-range samples full range (convert::Range).
    pub raw: Option<Raw<'a>>,
}

/// How a raw source's samples reach the JPEG, as the log says it.
pub fn range_words(full_range: bool) -> &'static str {
    if full_range {
        "full range"
    } else {
        "video range, made full range"
    }
}

/// A raw picture as 4:2:0 planes (Y, U, V) with their strides.
#[derive(Debug, Clone, Copy)]
pub struct Raw<'a> {
    pub planes: [&'a [u8]; 3],
    pub strides: [usize; 3],
    /// The picture's, as its JPEG has it.
    pub size: (usize, usize),
}

impl<'a> Raw<'a> {
    /// A picture packed as [`Raw::pack`] makes it (`size` even), or None if
    /// `data` is short.
    pub fn packed(data: &'a [u8], (w, h): (usize, usize)) -> Option<Raw<'a>> {
        let (y, c) = (w * h, (w / 2) * (h / 2));
        let data = data.get(..y + 2 * c)?;
        let (y_plane, rest) = data.split_at(y);
        let (u, v) = rest.split_at(c);
        Some(Raw {
            planes: [y_plane, u, v],
            strides: [w, w / 2, w / 2],
            size: (w, h),
        })
    }

    /// Copies the picture into `out`, planes packed tight, cut to an even
    /// size (4:2:0 wants one); that size, or None if a plane is short.
    pub fn pack(&self, out: &mut Vec<u8>) -> Option<(usize, usize)> {
        let (w, h) = (self.size.0 & !1, self.size.1 & !1);
        out.clear();
        for (i, plane) in self.planes.iter().enumerate() {
            let (pw, ph) = if i == 0 { (w, h) } else { (w / 2, h / 2) };
            let stride = self.strides[i];
            if pw == 0 || ph == 0 || stride < pw || plane.len() < stride * (ph - 1) + pw {
                return None;
            }
            for row in plane.chunks(stride).take(ph) {
                out.extend_from_slice(&row[..pw]);
            }
        }
        Some((w, h))
    }
}

/// The seam between capture and streaming.
pub trait FrameSource {
    fn info(&self) -> StreamInfo;

    /// Registers the descriptor(s) the event loop must poll under `token`.
    fn register(&mut self, registry: &Registry, token: Token) -> std::io::Result<()>;

    /// Called when `token` fires: hands every frame that is ready to `sink`.
    /// An error stops the daemon.
    fn ready(&mut self, sink: &mut dyn FnMut(CapturedFrame<'_>)) -> Result<()>;

    /// Whether the camera is there (a camera may be unplugged and come
    /// back; other sources always are).
    fn present(&self) -> bool {
        true
    }

    /// What the source runs as, for a person: format, size and rate, device.
    fn mode(&self) -> String;

    /// Whether frames should come with their raw picture where the source
    /// must copy it to hand it over (someone watches the H.264 stream).
    fn want_raw(&mut self, _yes: bool) {}

    /// The camera's picture settings ([`picture::OFFERED`]), to be read
    /// and set off the loop; why there are none (a source without camera
    /// controls, a camera not there).
    fn picture(&self) -> Result<Arc<dyn picture::Controls>, String> {
        Err("this source has no picture settings".into())
    }

    /// Picture settings set through [`FrameSource::picture`]: set again
    /// when the camera comes back.
    fn keep_picture(&mut self, _changes: &[ControlSetting]) {}
}

/// A source absent at start-up (a camera not plugged in yet), which logs
/// `line`, the line a present one starts with, once it is there.
pub struct Awaited {
    source: Box<dyn FrameSource>,
    line: Option<String>,
}

impl Awaited {
    pub fn new(source: Box<dyn FrameSource>, line: String) -> Awaited {
        Awaited {
            source,
            line: Some(line),
        }
    }
}

impl FrameSource for Awaited {
    fn info(&self) -> StreamInfo {
        self.source.info()
    }

    fn register(&mut self, registry: &Registry, token: Token) -> std::io::Result<()> {
        self.source.register(registry, token)
    }

    fn ready(&mut self, sink: &mut dyn FnMut(CapturedFrame<'_>)) -> Result<()> {
        let r = self.source.ready(sink);
        if self.line.is_some() && self.source.present() {
            log::info!("{}", self.line.take().unwrap_or_default());
        }
        r
    }

    fn present(&self) -> bool {
        self.source.present()
    }

    fn mode(&self) -> String {
        self.source.mode()
    }

    fn want_raw(&mut self, yes: bool) {
        self.source.want_raw(yes)
    }

    fn picture(&self) -> Result<Arc<dyn picture::Controls>, String> {
        self.source.picture()
    }

    fn keep_picture(&mut self, changes: &[ControlSetting]) {
        self.source.keep_picture(changes)
    }
}

/// Opens the source `settings` name. Errors here are start-up errors
/// (missing file, unsupported first frame, encoder failure).
pub fn open(settings: &Settings) -> Result<Box<dyn FrameSource>> {
    Ok(match &settings.spec {
        // RTP/JPEG headers count 8-pixel blocks: the pattern is drawn at the
        // multiple of 8 below the size asked for.
        SourceSpec::TestPattern => Box::new(testpattern::TestPattern::new(
            StreamInfo {
                width: settings.width & !7,
                height: settings.height & !7,
                fps: settings.fps,
            },
            settings.quality,
        )?),
        SourceSpec::File(path) => Box::new(file::FileSource::open(path, settings.fps)?),
        SourceSpec::Libcamera(camera) => open_libcamera(camera, settings)?,
        SourceSpec::Auto if libcamera_has_camera() => {
            open_libcamera(&libcamera::CameraSpec::Auto, settings)?
        }
        SourceSpec::V4l2(device) => {
            Box::new(v4l2::V4l2Source::open(device.clone(), settings.clone())?)
        }
        SourceSpec::Auto => Box::new(v4l2::V4l2Source::open(
            v4l2::DeviceSpec::Auto,
            settings.clone(),
        )?),
    })
}

/// libcamera's camera manager is started only when a sensor for it is
/// there: for a V4L2 camera it would cost start-up time and memory.
#[cfg(feature = "libcamera")]
fn libcamera_has_camera() -> bool {
    v4l2::libcamera_sensor_present() && libcamera::usable_camera()
}

#[cfg(not(feature = "libcamera"))]
fn libcamera_has_camera() -> bool {
    false
}

#[cfg(feature = "libcamera")]
fn open_libcamera(
    camera: &libcamera::CameraSpec,
    settings: &Settings,
) -> Result<Box<dyn FrameSource>> {
    Ok(Box::new(libcamera::LibcameraSource::open(
        camera.clone(),
        settings.clone(),
    )?))
}

#[cfg(not(feature = "libcamera"))]
fn open_libcamera(camera: &libcamera::CameraSpec, _: &Settings) -> Result<Box<dyn FrameSource>> {
    bail!("{camera}: this camstream was built without libcamera (cargo feature `libcamera`)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn a_raw_picture_is_packed_tight_at_an_even_size() {
        // 5x3 with strides of 8 and 4: packed as 4x2, 2x1 and 2x1.
        let y: Vec<u8> = (0..24).collect();
        let u: Vec<u8> = (100..108).collect();
        let v: Vec<u8> = (200..208).collect();
        let raw = Raw {
            planes: [&y, &u, &v],
            strides: [8, 4, 4],
            size: (5, 3),
        };
        let mut out = vec![9; 3];
        assert_eq!(raw.pack(&mut out), Some((4, 2)));
        assert_eq!(out, [0, 1, 2, 3, 8, 9, 10, 11, 100, 101, 200, 201]);
        let back = Raw::packed(&out, (4, 2)).unwrap();
        assert_eq!(back.planes, [&out[..8], &out[8..10], &out[10..12]]);
        assert!(Raw::packed(&out[..11], (4, 2)).is_none());
        // A plane shorter than its rows: none, rather than a wrong picture.
        let short = Raw {
            planes: [&y[..10], &u, &v],
            ..raw
        };
        assert_eq!(short.pack(&mut out), None);
    }

    /// The lines logged while the test runs (no other test logs through a
    /// logger: main sets the daemon's).
    static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

    struct Recorder;

    impl log::Log for Recorder {
        fn enabled(&self, _: &log::Metadata<'_>) -> bool {
            true
        }

        fn log(&self, r: &log::Record<'_>) {
            LINES.lock().unwrap().push(r.args().to_string());
        }

        fn flush(&self) {}
    }

    /// A camera that is there from its source's third turn on, as a V4L2
    /// device is once the retry timer's turn finds it (no camera can be
    /// plugged in where unit tests run).
    struct PluggedInLater {
        turns: u32,
    }

    impl FrameSource for PluggedInLater {
        fn info(&self) -> StreamInfo {
            StreamInfo {
                width: 320,
                height: 240,
                fps: 30,
            }
        }

        fn register(&mut self, _: &Registry, _: Token) -> std::io::Result<()> {
            Ok(())
        }

        fn ready(&mut self, _: &mut dyn FnMut(CapturedFrame<'_>)) -> Result<()> {
            self.turns += 1;
            Ok(())
        }

        fn present(&self) -> bool {
            self.turns >= 3
        }

        fn mode(&self) -> String {
            String::new()
        }
    }

    #[test]
    fn an_awaited_camera_is_said_to_stream_once_when_it_is_there() {
        static LOGGER: Recorder = Recorder;
        log::set_logger(&LOGGER).unwrap();
        log::set_max_level(log::LevelFilter::Info);
        let line =
            "streaming 320x240 at 30 fps from /dev/video-later on rtsp://127.0.0.1:8554/stream";
        let said = || LINES.lock().unwrap().iter().filter(|l| *l == line).count();
        let mut source = Awaited::new(Box::new(PluggedInLater { turns: 0 }), line.into());
        for turn in 1..=5 {
            source.ready(&mut |_| {}).unwrap();
            assert_eq!(said(), usize::from(turn >= 3), "turn {turn}");
            assert_eq!(source.present(), turn >= 3);
        }
    }
}
