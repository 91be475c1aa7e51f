//! Opening a camera: the device (the one named, or the first that offers a
//! usable format), the mode chosen from what it offers, the rate and
//! controls set, its buffers mapped and streaming.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, anyhow};
use rustix::io::Errno;

use super::DeviceSpec;
use super::buffers::Buffers;
use super::controls;
use super::device::{self, Device, PixFormat};
use super::m2m::CameraBuffers;
use super::picture;
use super::select::{self, fourcc_name};
use super::sys;
use crate::source::Settings;

/// Why a camera could not be opened.
pub(super) enum OpenError {
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
pub(super) struct Capture {
    pub buffers: Buffers,
    pub dev: Device,
    pub format: PixFormat,
    pub fps: Option<f64>,
    /// Size of the frames sent: the capture size rounded down to a multiple
    /// of 8, which is what RTP/JPEG headers can express.
    pub out_size: (usize, usize),
    /// Its picture settings, for the picture thread.
    pub picture: Arc<picture::Camera>,
}

impl Capture {
    pub fn open(device: &DeviceSpec, settings: &Settings) -> Result<Capture, OpenError> {
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
        picture::apply_kept(&dev, &settings.picture);
        let picture = Arc::new(
            picture::Camera::new(&dev).with_context(|| format!("{name}: a second descriptor"))?,
        );
        let (w, h) = (format.width as usize, format.height as usize);
        if !select::is_jpeg(format.fourcc) && (w < 16 || h < 16) {
            return Err(anyhow!("{name}: {w}x{h} is too small to encode").into());
        }
        let buffers = Buffers::start(&dev, settings.buffers)
            .with_context(|| format!("{name}: starting to stream"))?;
        Ok(Capture {
            buffers,
            dev,
            format,
            fps,
            out_size: (w & !7, h & !7),
            picture,
        })
    }

    /// Its buffers as a hardware encoder may read them (YU12).
    pub fn camera_buffers(&self) -> CameraBuffers {
        CameraBuffers {
            count: self.buffers.count(),
            stride: self.format.bytesperline as usize,
            rows: self.format.height as usize,
        }
    }

    pub fn describe(&self, quality: u8) -> String {
        let f = &self.format;
        let rate = self
            .fps
            .map_or("at the driver's rate".into(), |r| format!("at {r} fps"));
        let what = if select::is_jpeg(f.fourcc) {
            "sending the camera's JPEG".to_string()
        } else {
            format!(
                "encoding JPEG 4:2:0 at quality {quality} ({})",
                crate::source::range_words(f.full_range)
            )
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
