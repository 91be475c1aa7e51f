//! What an encoding session is opened with: the coded and raw formats
//! (the driver answers with the layout it takes), the crop to the
//! picture's size, the frame rate, and the encoder's controls.

use std::io;

use anyhow::{Result, bail};

use super::super::device::{Control, Device, update};
use super::super::sys::*;
use super::{H264, Params};

// The controls camstream sets where the driver has them (linux/v4l2-controls.h).
const CID_CODEC_BASE: u32 = 0x0099_0900;
const CID_GOP_SIZE: u32 = CID_CODEC_BASE + 203;
const CID_BITRATE: u32 = CID_CODEC_BASE + 207;
const CID_REPEAT_SEQ_HEADER: u32 = CID_CODEC_BASE + 226;
const CID_FORCE_KEY_FRAME: u32 = CID_CODEC_BASE + 229;
const CID_H264_I_PERIOD: u32 = CID_CODEC_BASE + 358;
const CID_H264_PROFILE: u32 = CID_CODEC_BASE + 363;
const H264_PROFILE_CONSTRAINED_BASELINE: i64 = 1;
const CID_JPEG_COMPRESSION_QUALITY: u32 = 0x009d_0903;

/// A format as the driver set it.
pub struct Set {
    pub fourcc: u32,
    pub width: u32,
    pub height: u32,
    pub stride: usize,
}

pub fn set_format(
    dev: &Device,
    type_: u32,
    mplane: bool,
    fourcc: u32,
    w: u32,
    h: u32,
    stride: usize,
) -> io::Result<Set> {
    let mut f: v4l2_format = zeroed();
    f.type_ = type_;
    if mplane {
        let mut p: v4l2_pix_format_mplane = zeroed();
        p.width = w;
        p.height = h;
        p.pixelformat = fourcc;
        p.field = V4L2_FIELD_NONE;
        p.num_planes = 1;
        p.plane_fmt[0].bytesperline = stride as u32;
        f.fmt.pix_mp = p;
    } else {
        let mut p: v4l2_pix_format = zeroed();
        p.width = w;
        p.height = h;
        p.pixelformat = fourcc;
        p.field = V4L2_FIELD_NONE;
        p.bytesperline = stride as u32;
        f.fmt.pix = p;
    }
    // SAFETY: VIDIOC_S_FMT takes a v4l2_format, as `update` asks.
    unsafe { update::<VIDIOC_S_FMT, _>(dev.fd(), &mut f)? };
    // SAFETY: the driver filled the member of the union `type_` selects.
    Ok(unsafe {
        if mplane {
            let p = f.fmt.pix_mp;
            if p.num_planes != 1 {
                return Err(io::Error::other(format!(
                    "{} planes where camstream writes one",
                    p.num_planes
                )));
            }
            Set {
                fourcc: p.pixelformat,
                width: p.width,
                height: p.height,
                stride: p.plane_fmt[0].bytesperline as usize,
            }
        } else {
            let p = f.fmt.pix;
            Set {
                fourcc: p.pixelformat,
                width: p.width,
                height: p.height,
                stride: p.bytesperline as usize,
            }
        }
    })
}

/// Tells the encoder the picture is the top left `w`x`h` of its frame.
pub fn crop(dev: &Device, w: u32, h: u32) -> Result<()> {
    let mut s: v4l2_selection = zeroed();
    // The selection API names the single-planar type for both APIs.
    s.type_ = V4L2_BUF_TYPE_VIDEO_OUTPUT;
    s.target = V4L2_SEL_TGT_CROP;
    s.r = v4l2_rect {
        left: 0,
        top: 0,
        width: w,
        height: h,
    };
    // SAFETY: VIDIOC_S_SELECTION takes a v4l2_selection, as `update` asks.
    unsafe { update::<VIDIOC_S_SELECTION, _>(dev.fd(), &mut s)? };
    if (s.r.left, s.r.top, s.r.width, s.r.height) != (0, 0, w, h) {
        bail!(
            "the driver cropped to {}x{} at ({}, {})",
            s.r.width,
            s.r.height,
            s.r.left,
            s.r.top
        );
    }
    Ok(())
}

/// The frame rate the encoder's rate control counts with; a driver
/// without it counts its own way.
pub fn set_fps(dev: &Device, output_type: u32, fps: u32) {
    let mut p: v4l2_streamparm = zeroed();
    p.type_ = output_type;
    // The OUTPUT queue's parameters have the capture ones' layout.
    p.parm.capture.timeperframe = v4l2_fract {
        numerator: 1,
        denominator: fps.max(1),
    };
    // SAFETY: VIDIOC_S_PARM takes a v4l2_streamparm, as `update` asks.
    if let Err(e) = unsafe { update::<VIDIOC_S_PARM, _>(dev.fd(), &mut p) } {
        log::debug!("{}: no frame rate set: {e}", dev.path.display());
    }
}

/// Sets the rate, key frame and quality controls the driver has; returns
/// the one that asks for a key frame, if it has it.
pub fn set_controls(dev: &Device, p: &Params) -> Result<Option<Control>> {
    let controls = dev.controls().unwrap_or_default();
    let find = |id| {
        controls
            .iter()
            .find(|c| c.id == id && c.flags & V4L2_CTRL_FLAG_READ_ONLY == 0)
    };
    let set = |id, value: i64| {
        if let Some(c) = find(id) {
            let v = value.clamp(c.min, c.max);
            if let Err(e) = dev.set_control(c, v) {
                log::debug!("{}: {} = {v}: {e}", dev.path.display(), c.name);
            }
        }
    };
    if let Some(b) = p.bitrate {
        set(CID_BITRATE, b.into());
    }
    let force_key = find(CID_FORCE_KEY_FRAME).cloned();
    if let Some(g) = p.gop {
        // An encoder that cannot be asked for a key frame when a client
        // joins makes one at least every second: no one waits longer.
        let g = if force_key.is_none() && p.coded == H264 {
            g.min(p.fps.max(1))
        } else {
            g
        };
        set(CID_GOP_SIZE, g.into());
        set(CID_H264_I_PERIOD, g.into());
    }
    if p.coded == H264 {
        // SPS and PPS before every IDR picture: a client may join at any.
        set(CID_REPEAT_SEQ_HEADER, 1);
        if find(CID_H264_PROFILE).is_some_and(|c| c.menu.iter().any(|m| m.0 == 1)) {
            set(CID_H264_PROFILE, H264_PROFILE_CONSTRAINED_BASELINE);
        }
    }
    if let Some(q) = p.quality {
        set(CID_JPEG_COMPRESSION_QUALITY, q.into());
    }
    Ok(force_key)
}
