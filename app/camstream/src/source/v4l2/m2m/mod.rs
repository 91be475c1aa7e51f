//! The kernel's memory-to-memory encoders (V4L2's stateful encoder
//! interface): the Pi's VideoCore (bcm2835-codec: H.264, and JPEG on its
//! own device), other boards' VPUs, and the virtual vicodec the tests
//! drive. Raw 4:2:0 frames go in on the OUTPUT queue, coded frames come
//! back on the CAPTURE queue ([`encoder`]); this file finds them.

mod encoder;
mod queue;
mod setup;

pub use encoder::{CameraBuffers, Dmabuf, Encoded, M2mEncoder, Params};

use std::fmt::Write;
use std::io;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

use super::device::{Device, update};
use super::select::fourcc_name;
use super::sys::*;

pub const H264: u32 = fourcc(b"H264");
pub const JPEG: u32 = fourcc(b"JPEG");
/// The raw layout camstream hands over: 4:2:0, three planes in one buffer.
pub const YUV420: u32 = fourcc(b"YU12");

/// Which encoder a stream uses (`encoder`, `[streams.h264] encoder`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// The kernel's memory-to-memory encoder if there is one (the Pi's
    /// VideoCore), software otherwise.
    Auto,
    /// Software (libjpeg-turbo, OpenH264).
    Software,
    /// This memory-to-memory device.
    Device(PathBuf),
}

impl Choice {
    /// `s` as the config's `key` gives it.
    pub fn parse(key: &str, s: &str) -> anyhow::Result<Choice> {
        Ok(match s {
            "auto" => Choice::Auto,
            "software" => Choice::Software,
            p if p.starts_with("/dev/") => Choice::Device(p.into()),
            _ => anyhow::bail!(
                "{key} = {s:?}: use \"auto\", \"software\" or a device such as \"/dev/video11\""
            ),
        })
    }

    /// The encoder it names for `coded`, if any: for Auto the first that
    /// codes to it from YU12; a named device must be one.
    pub fn find(&self, key: &str, coded: u32) -> anyhow::Result<Option<Found>> {
        match self {
            Choice::Software => Ok(None),
            Choice::Auto => Ok(find(coded)),
            Choice::Device(path) => match inspect(path) {
                Ok(Some(f)) if f.coded.contains(&coded) && f.takes_yuv420() => Ok(Some(f)),
                Ok(_) => anyhow::bail!(
                    "{key} = {:?} is not a{} encoder taking YU12 (`camstream encoders` lists them)",
                    path.display(),
                    if coded == H264 { "n H.264" } else { " JPEG" }
                ),
                Err(e) => anyhow::bail!("{key} = {:?}: {e}", path.display()),
            },
        }
    }
}

/// A memory-to-memory encoder the kernel has.
#[derive(Debug, Clone)]
pub struct Found {
    pub path: PathBuf,
    pub driver: String,
    pub card: String,
    /// Multi-planar API (bcm2835-codec is; vicodec is either, as loaded).
    pub mplane: bool,
    /// What it codes to (CAPTURE's compressed formats).
    pub coded: Vec<u32>,
    /// What it takes (OUTPUT's formats).
    pub raw: Vec<u32>,
}

impl Found {
    pub fn takes_yuv420(&self) -> bool {
        self.raw.contains(&YUV420)
    }
}

/// (CAPTURE, OUTPUT) buffer types of the API a device speaks.
pub(super) fn types(mplane: bool) -> (u32, u32) {
    if mplane {
        (
            V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE,
            V4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE,
        )
    } else {
        (V4L2_BUF_TYPE_VIDEO_CAPTURE, V4L2_BUF_TYPE_VIDEO_OUTPUT)
    }
}

/// The formats a queue of `type_` offers: (fourcc, compressed).
fn formats(fd: BorrowedFd<'_>, type_: u32) -> Vec<(u32, bool)> {
    let mut out = Vec::new();
    for index in 0..64 {
        let mut d: v4l2_fmtdesc = zeroed();
        d.index = index;
        d.type_ = type_;
        // SAFETY: VIDIOC_ENUM_FMT takes a v4l2_fmtdesc, as `update` asks.
        if unsafe { update::<VIDIOC_ENUM_FMT, _>(fd, &mut d) }.is_err() {
            break;
        }
        out.push((d.pixelformat, d.flags & V4L2_FMT_FLAG_COMPRESSED != 0));
    }
    out
}

/// The device at `path`, if it is a memory-to-memory encoder: raw frames
/// in, compressed ones out (a decoder is the other way round).
pub fn inspect(path: &Path) -> io::Result<Option<Found>> {
    let dev = Device::open(path)?;
    let caps = dev.caps.device_caps;
    let mplane = caps & V4L2_CAP_VIDEO_M2M_MPLANE != 0;
    if !mplane && caps & V4L2_CAP_VIDEO_M2M == 0 {
        return Ok(None);
    }
    let (capture, output) = types(mplane);
    let coded: Vec<u32> = formats(dev.fd(), capture)
        .into_iter()
        .filter(|f| f.1)
        .map(|f| f.0)
        .collect();
    let raw: Vec<(u32, bool)> = formats(dev.fd(), output);
    if coded.is_empty() || raw.iter().any(|f| f.1) {
        return Ok(None);
    }
    Ok(Some(Found {
        path: path.to_path_buf(),
        driver: dev.caps.driver.clone(),
        card: dev.caps.card.clone(),
        mplane,
        coded,
        raw: raw.into_iter().map(|f| f.0).collect(),
    }))
}

/// Every memory-to-memory encoder under /dev, in device order.
pub fn list() -> Vec<Found> {
    super::device::list()
        .iter()
        .filter_map(|p| inspect(p).ok().flatten())
        .collect()
}

/// The first encoder that codes to `coded` from camstream's raw layout.
pub fn find(coded: u32) -> Option<Found> {
    list()
        .into_iter()
        .find(|f| f.coded.contains(&coded) && f.takes_yuv420())
}

/// What `camstream encoders` prints: one line per encoder.
pub fn describe(found: &[Found]) -> String {
    let mut s = String::new();
    if found.is_empty() {
        s.push_str("no memory-to-memory encoder: H.264 and JPEG are encoded in software\n");
    }
    let names = |v: &[u32]| {
        v.iter()
            .map(|&f| fourcc_name(f))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for f in found {
        let _ = writeln!(
            s,
            "{}: {} ({}), {}-planar: {} from {}",
            f.path.display(),
            f.card,
            f.driver,
            if f.mplane { "multi" } else { "single" },
            names(&f.coded),
            names(&f.raw)
        );
    }
    s
}
