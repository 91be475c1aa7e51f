//! A V4L2 capture device: what it is, offers and is set to, through its
//! ioctls (its buffers are `buffers`). Thin and unsafe only where the
//! kernel API is; choices live in `select` and the source.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, open};
use rustix::io::Errno;
use rustix::ioctl::{Opcode, Updater, ioctl};

use super::select::{self, Mode as CaptureMode, Sizes};
use super::sys::*;

/// An ioctl whose argument the kernel reads and writes.
///
/// # Safety
///
/// `T` must be the argument type OPCODE was built for (sys.rs builds each
/// opcode from its type's size), and any pointer in it valid for the call.
pub(super) unsafe fn update<const OPCODE: Opcode, T>(
    fd: BorrowedFd<'_>,
    arg: &mut T,
) -> io::Result<()> {
    loop {
        // SAFETY: the caller pairs OPCODE with its argument type (above);
        // the opcode encodes `size_of::<T>()`, so the kernel copies exactly T.
        match unsafe { ioctl(fd, Updater::<OPCODE, T>::new(arg)) } {
            Err(rustix::io::Errno::INTR) => continue,
            r => return r.map_err(io::Error::from),
        }
    }
}

pub(super) fn cstr(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).trim().to_string()
}

/// What VIDIOC_QUERYCAP says.
#[derive(Debug, Clone)]
pub struct Caps {
    pub driver: String,
    pub card: String,
    pub bus_info: String,
    /// The capabilities of this device node.
    pub device_caps: u32,
}

impl Caps {
    pub fn can_capture(&self) -> bool {
        self.device_caps & V4L2_CAP_VIDEO_CAPTURE != 0
    }
    pub fn can_stream(&self) -> bool {
        self.device_caps & V4L2_CAP_STREAMING != 0
    }
}

/// One format with its sizes and, per size, its frame rates.
#[derive(Debug, Clone)]
pub struct Format {
    pub fourcc: u32,
    pub description: String,
    pub sizes: Sizes,
    /// Frame rates offered at each candidate size, fastest first.
    pub rates: Vec<((u32, u32), Rates)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Rates {
    Discrete(Vec<f64>),
    /// A continuous or stepwise range of frame rates.
    Range {
        min: f64,
        max: f64,
    },
    /// The driver does not enumerate frame intervals.
    Unknown,
}

impl Rates {
    pub fn max(&self) -> Option<f64> {
        match self {
            Rates::Discrete(v) => v.iter().copied().reduce(f64::max),
            Rates::Range { max, .. } => Some(*max),
            Rates::Unknown => None,
        }
    }
}

/// A control as VIDIOC_QUERYCTRL describes it.
#[derive(Debug, Clone)]
pub struct Control {
    pub id: u32,
    pub name: String,
    pub kind: u32,
    pub min: i64,
    pub max: i64,
    pub step: i64,
    pub default: i64,
    pub flags: u32,
    /// Menu items (index, name) of menu controls.
    pub menu: Vec<(u32, String)>,
}

/// The pixel format in effect after VIDIOC_S_FMT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PixFormat {
    pub fourcc: u32,
    pub width: u32,
    pub height: u32,
    pub bytesperline: u32,
    pub sizeimage: u32,
    /// Its samples span the full range (JFIF's), as the driver says: by
    /// its quantization, or by its colour space where that is left to it.
    /// Else video range.
    pub full_range: bool,
}

pub struct Device {
    fd: OwnedFd,
    pub path: PathBuf,
    pub caps: Caps,
}

impl Device {
    /// Opens a device node non-blocking and asks what it is.
    pub fn open(path: &Path) -> io::Result<Device> {
        let fd = open(
            path,
            OFlags::RDWR | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let mut cap: v4l2_capability = zeroed();
        // SAFETY: VIDIOC_QUERYCAP takes a v4l2_capability, as `update` asks.
        unsafe { update::<VIDIOC_QUERYCAP, _>(fd.as_fd(), &mut cap)? };
        let device_caps = if cap.capabilities & V4L2_CAP_DEVICE_CAPS != 0 {
            cap.device_caps
        } else {
            cap.capabilities
        };
        Ok(Device {
            fd,
            path: path.to_path_buf(),
            caps: Caps {
                driver: cstr(&cap.driver),
                card: cstr(&cap.card),
                bus_info: cstr(&cap.bus_info),
                device_caps,
            },
        })
    }

    /// The same open device through a second descriptor: for another
    /// thread's ioctls (picture settings), the capture's own untouched.
    pub fn try_clone(&self) -> io::Result<Device> {
        Ok(Device {
            fd: self.fd.try_clone()?,
            path: self.path.clone(),
            caps: self.caps.clone(),
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Every capture format with its sizes; rates for the sizes `want`
    /// selects among (all discrete sizes, or `want` fitted to a range).
    pub fn formats(&self, want: (u32, u32)) -> io::Result<Vec<Format>> {
        let mut out = Vec::new();
        for index in 0.. {
            let mut d: v4l2_fmtdesc = zeroed();
            d.index = index;
            d.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
            // SAFETY: VIDIOC_ENUM_FMT takes a v4l2_fmtdesc, as `update` asks.
            match unsafe { update::<VIDIOC_ENUM_FMT, _>(self.fd(), &mut d) } {
                Ok(()) => {}
                Err(e) if end_of_list(&e) => break,
                Err(e) => return Err(e),
            }
            let sizes = self.sizes(d.pixelformat)?;
            let rates = sizes
                .candidates(want)
                .into_iter()
                .map(|s| Ok((s, self.rates(d.pixelformat, s)?)))
                .collect::<io::Result<_>>()?;
            out.push(Format {
                fourcc: d.pixelformat,
                description: cstr(&d.description),
                sizes,
                rates,
            });
        }
        Ok(out)
    }

    fn sizes(&self, fourcc: u32) -> io::Result<Sizes> {
        let mut discrete = Vec::new();
        for index in 0.. {
            let mut s: v4l2_frmsizeenum = zeroed();
            s.index = index;
            s.pixel_format = fourcc;
            // SAFETY: VIDIOC_ENUM_FRAMESIZES takes a v4l2_frmsizeenum, as `update` asks.
            match unsafe { update::<VIDIOC_ENUM_FRAMESIZES, _>(self.fd(), &mut s) } {
                Ok(()) => {}
                // Drivers that cannot enumerate sizes (loopback devices):
                // the current format's size is all there is (below).
                Err(e) if end_of_list(&e) => break,
                Err(e) => return Err(e),
            }
            let w = s.stepwise;
            match s.type_ {
                V4L2_FRMSIZE_TYPE_DISCRETE => discrete.push((w.min_width, w.max_width)),
                _ => {
                    return Ok(Sizes::Stepwise {
                        min: (w.min_width, w.min_height),
                        max: (w.max_width, w.max_height),
                        step: (w.step_width, w.step_height),
                    });
                }
            }
        }
        if discrete.is_empty() {
            if let Ok(f) = self.format() {
                if f.fourcc == fourcc {
                    discrete.push((f.width, f.height));
                }
            }
        }
        Ok(Sizes::Discrete(discrete))
    }

    fn rates(&self, fourcc: u32, (width, height): (u32, u32)) -> io::Result<Rates> {
        let mut discrete = Vec::new();
        for index in 0.. {
            let mut i: v4l2_frmivalenum = zeroed();
            i.index = index;
            i.pixel_format = fourcc;
            i.width = width;
            i.height = height;
            // SAFETY: VIDIOC_ENUM_FRAMEINTERVALS takes a v4l2_frmivalenum, as `update` asks.
            match unsafe { update::<VIDIOC_ENUM_FRAMEINTERVALS, _>(self.fd(), &mut i) } {
                Ok(()) => {}
                Err(e) if end_of_list(&e) => break,
                Err(e) => return Err(e),
            }
            let s = i.stepwise;
            if i.type_ == V4L2_FRMIVAL_TYPE_DISCRETE {
                discrete.extend(select::fps_of(s.min.numerator, s.min.denominator));
            } else {
                // min/max are intervals: the shortest is the fastest rate.
                let fast = select::fps_of(s.min.numerator, s.min.denominator);
                let slow = select::fps_of(s.max.numerator, s.max.denominator);
                return Ok(match (slow, fast) {
                    (Some(min), Some(max)) => Rates::Range { min, max },
                    _ => Rates::Unknown,
                });
            }
        }
        discrete.sort_by(|a, b| b.total_cmp(a));
        Ok(if discrete.is_empty() {
            Rates::Unknown
        } else {
            Rates::Discrete(discrete)
        })
    }

    /// Every mode the selector may choose from.
    pub fn modes(formats: &[Format]) -> Vec<CaptureMode> {
        formats
            .iter()
            .flat_map(|f| {
                f.rates.iter().map(|&((width, height), ref r)| CaptureMode {
                    fourcc: f.fourcc,
                    width,
                    height,
                    max_fps: r.max(),
                })
            })
            .collect()
    }

    pub fn format(&self) -> io::Result<PixFormat> {
        let mut f: v4l2_format = zeroed();
        f.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        // SAFETY: VIDIOC_G_FMT takes a v4l2_format, as `update` asks.
        unsafe { update::<VIDIOC_G_FMT, _>(self.fd(), &mut f)? };
        Ok(pix(&f))
    }

    pub fn set_format(&self, fourcc: u32, width: u32, height: u32) -> io::Result<PixFormat> {
        let mut f: v4l2_format = zeroed();
        f.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        // SAFETY: writing the `pix` member of a zeroed union, the member
        // capture formats use; VIDIOC_S_FMT takes a v4l2_format, as `update`
        // asks.
        unsafe {
            f.fmt.pix.width = width;
            f.fmt.pix.height = height;
            f.fmt.pix.pixelformat = fourcc;
            f.fmt.pix.field = V4L2_FIELD_NONE;
            // Full range asked for, as a JPEG wants it, from a driver that
            // says it can set it; what the driver gives is read back.
            if self.sets_quantization(fourcc) {
                f.fmt.pix.priv_ = V4L2_PIX_FMT_PRIV_MAGIC;
                f.fmt.pix.flags = V4L2_PIX_FMT_FLAG_SET_CSC;
                f.fmt.pix.quantization = V4L2_QUANTIZATION_FULL_RANGE;
            }
            update::<VIDIOC_S_FMT, _>(self.fd(), &mut f)?;
        }
        Ok(pix(&f))
    }

    /// ENUM_FMT says the driver sets this capture format's quantization
    /// as asked (V4L2_FMT_FLAG_CSC_QUANTIZATION).
    fn sets_quantization(&self, fourcc: u32) -> bool {
        for index in 0..64 {
            let mut d: v4l2_fmtdesc = zeroed();
            d.index = index;
            d.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
            // SAFETY: VIDIOC_ENUM_FMT takes a v4l2_fmtdesc, as `update` asks.
            if unsafe { update::<VIDIOC_ENUM_FMT, _>(self.fd(), &mut d) }.is_err() {
                break;
            }
            if d.pixelformat == fourcc {
                return d.flags & V4L2_FMT_FLAG_CSC_QUANTIZATION != 0;
            }
        }
        false
    }

    /// Asks for `fps` frames a second; returns the rate the driver set, or
    /// None when it has no frame-rate control.
    pub fn set_fps(&self, fps: u32) -> io::Result<Option<f64>> {
        let mut p: v4l2_streamparm = zeroed();
        p.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        // SAFETY: VIDIOC_G_PARM takes a v4l2_streamparm, as `update` asks.
        match unsafe { update::<VIDIOC_G_PARM, _>(self.fd(), &mut p) } {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(Errno::NOTTY.raw_os_error()) => return Ok(None),
            Err(e) => return Err(e),
        }
        // SAFETY: `capture` is the member for capture buffer types.
        let cap = unsafe { p.parm.capture };
        if cap.capability & V4L2_CAP_TIMEPERFRAME == 0 {
            return Ok(select::fps_of(
                cap.timeperframe.numerator,
                cap.timeperframe.denominator,
            ));
        }
        let mut p: v4l2_streamparm = zeroed();
        p.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        // SAFETY: `capture` is the member for capture buffer types (all
        // zeroes is a valid one); VIDIOC_S_PARM takes a v4l2_streamparm, as
        // `update` asks.
        unsafe {
            p.parm.capture.timeperframe = v4l2_fract {
                numerator: 1,
                denominator: fps,
            };
            update::<VIDIOC_S_PARM, _>(self.fd(), &mut p)?;
            let t = p.parm.capture.timeperframe;
            Ok(select::fps_of(t.numerator, t.denominator))
        }
    }

    /// Every enabled control, menus included.
    pub fn controls(&self) -> io::Result<Vec<Control>> {
        let mut out = Vec::new();
        let mut id = V4L2_CTRL_FLAG_NEXT_CTRL;
        loop {
            let mut q: v4l2_queryctrl = zeroed();
            q.id = id;
            // SAFETY: VIDIOC_QUERYCTRL takes a v4l2_queryctrl, as `update` asks.
            match unsafe { update::<VIDIOC_QUERYCTRL, _>(self.fd(), &mut q) } {
                Ok(()) => {}
                Err(e) if end_of_list(&e) => break,
                Err(e) => return Err(e),
            }
            id = q.id | V4L2_CTRL_FLAG_NEXT_CTRL;
            if q.flags & V4L2_CTRL_FLAG_DISABLED != 0 || q.type_ == V4L2_CTRL_TYPE_CTRL_CLASS {
                continue;
            }
            let mut menu = Vec::new();
            if q.type_ == V4L2_CTRL_TYPE_MENU || q.type_ == V4L2_CTRL_TYPE_INTEGER_MENU {
                for index in q.minimum.max(0) as u32..=q.maximum.max(0) as u32 {
                    let mut m: v4l2_querymenu = zeroed();
                    m.id = q.id;
                    m.index = index;
                    // Drivers leave holes in menus (EINVAL for those).
                    // SAFETY: VIDIOC_QUERYMENU takes a v4l2_querymenu, as `update` asks.
                    if unsafe { update::<VIDIOC_QUERYMENU, _>(self.fd(), &mut m) }.is_ok() {
                        let name = if q.type_ == V4L2_CTRL_TYPE_INTEGER_MENU {
                            let raw = m.name;
                            i64::from_ne_bytes(raw[..8].try_into().unwrap()).to_string()
                        } else {
                            let raw = m.name;
                            cstr(&raw)
                        };
                        menu.push((index, name));
                    }
                }
            }
            out.push(Control {
                id: q.id,
                name: cstr(&q.name),
                kind: q.type_,
                min: q.minimum.into(),
                max: q.maximum.into(),
                step: q.step.into(),
                default: q.default_value.into(),
                flags: q.flags,
                menu,
            });
        }
        Ok(out)
    }

    pub fn get_control(&self, c: &Control) -> io::Result<i64> {
        if c.kind == V4L2_CTRL_TYPE_INTEGER64 {
            return self.ext_control(c.id, None);
        }
        let mut v = v4l2_control { id: c.id, value: 0 };
        // SAFETY: VIDIOC_G_CTRL takes a v4l2_control, as `update` asks.
        unsafe { update::<VIDIOC_G_CTRL, _>(self.fd(), &mut v)? };
        Ok(v.value.into())
    }

    /// VIDIOC_S_CTRL, or VIDIOC_S_EXT_CTRLS for 64-bit controls.
    pub fn set_control(&self, c: &Control, value: i64) -> io::Result<()> {
        if c.kind == V4L2_CTRL_TYPE_INTEGER64 {
            return self.ext_control(c.id, Some(value)).map(drop);
        }
        let mut v = v4l2_control {
            id: c.id,
            value: value as i32,
        };
        // SAFETY: VIDIOC_S_CTRL takes a v4l2_control, as `update` asks.
        unsafe { update::<VIDIOC_S_CTRL, _>(self.fd(), &mut v) }
    }

    /// Reads (`set` None) or writes a 64-bit control; returns its value.
    fn ext_control(&self, id: u32, set: Option<i64>) -> io::Result<i64> {
        let mut ctrl = v4l2_ext_control {
            id,
            size: 0,
            reserved2: [0],
            value64: set.unwrap_or(0),
        };
        let mut ctrls: v4l2_ext_controls = zeroed();
        ctrls.which = V4L2_CTRL_WHICH_CUR_VAL;
        ctrls.count = 1;
        ctrls.controls = &mut ctrl;
        if set.is_some() {
            // SAFETY: VIDIOC_S_EXT_CTRLS takes a v4l2_ext_controls, as `update`
            // asks; its `controls` points at the one `ctrl`, alive till the end.
            unsafe { update::<VIDIOC_S_EXT_CTRLS, _>(self.fd(), &mut ctrls)? };
        } else {
            // SAFETY: as for VIDIOC_S_EXT_CTRLS.
            unsafe { update::<VIDIOC_G_EXT_CTRLS, _>(self.fd(), &mut ctrls)? };
        }
        Ok(ctrl.value64)
    }
}

fn pix(f: &v4l2_format) -> PixFormat {
    // SAFETY: capture formats use the `pix` member.
    let p = unsafe { f.fmt.pix };
    PixFormat {
        fourcc: p.pixelformat,
        width: p.width,
        height: p.height,
        bytesperline: p.bytesperline,
        sizeimage: p.sizeimage,
        full_range: full_range(&p),
    }
}

/// What V4L2_MAP_QUANTIZATION_DEFAULT says where the driver leaves the
/// quantization to its colour space: full range for RGB and for the JPEG
/// colour space, video range for other YUV.
fn full_range(p: &v4l2_pix_format) -> bool {
    let rgb = matches!(p.pixelformat, select::RGB24 | select::BGR24);
    match p.quantization {
        V4L2_QUANTIZATION_FULL_RANGE => true,
        V4L2_QUANTIZATION_DEFAULT => {
            rgb || p.colorspace == V4L2_COLORSPACE_JPEG || select::is_jpeg(p.pixelformat)
        }
        _ => false,
    }
}

/// How an enumeration ioctl says "no more" (EINVAL past the last index) or
/// "not supported by this driver" (ENOTTY), both meaning: stop listing.
fn end_of_list(e: &io::Error) -> bool {
    let code = e.raw_os_error();
    code == Some(Errno::INVAL.raw_os_error()) || code == Some(Errno::NOTTY.raw_os_error())
}

/// Capture device nodes, in numeric order (/dev/video0, video1, ...).
pub fn list() -> Vec<PathBuf> {
    let mut v: Vec<(u32, PathBuf)> = std::fs::read_dir("/dev")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n = name.strip_prefix("video")?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}
