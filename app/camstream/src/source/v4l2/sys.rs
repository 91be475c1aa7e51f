//! The slice of the V4L2 user API (linux/videodev2.h) camstream uses, written
//! out by hand so the build needs neither bindgen nor kernel headers.
//!
//! Layouts follow the C structs on 64-bit (aarch64, x86_64) and 32-bit ARM;
//! the `const` checks below fail the build if a size or offset drifts. Buffer
//! timestamps use the kernel's original `timeval` (two `long`s): on 32-bit
//! ARM that is the 32-bit layout every kernel still accepts, and it cannot
//! overflow because V4L2 stamps buffers with CLOCK_MONOTONIC (time since
//! boot), not with the calendar.

#![allow(non_camel_case_types, dead_code)]

use std::mem::{offset_of, size_of};
use std::os::raw::{c_long, c_ulong, c_void};

use rustix::ioctl::{Opcode, opcode};

pub const fn fourcc(s: &[u8; 4]) -> u32 {
    s[0] as u32 | (s[1] as u32) << 8 | (s[2] as u32) << 16 | (s[3] as u32) << 24
}

pub const V4L2_CAP_VIDEO_CAPTURE: u32 = 0x0000_0001;
pub const V4L2_CAP_VIDEO_CAPTURE_MPLANE: u32 = 0x0000_1000;
pub const V4L2_CAP_VIDEO_M2M_MPLANE: u32 = 0x0000_4000;
pub const V4L2_CAP_VIDEO_M2M: u32 = 0x0000_8000;
pub const V4L2_CAP_STREAMING: u32 = 0x0400_0000;
pub const V4L2_CAP_DEVICE_CAPS: u32 = 0x8000_0000;

pub const V4L2_BUF_TYPE_VIDEO_CAPTURE: u32 = 1;
pub const V4L2_BUF_TYPE_VIDEO_OUTPUT: u32 = 2;
pub const V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE: u32 = 9;
pub const V4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE: u32 = 10;
pub const V4L2_MEMORY_MMAP: u32 = 1;
/// REQBUFS capabilities: videobuf2 sets these (other drivers leave 0).
pub const V4L2_BUF_CAP_SUPPORTS_MMAP: u32 = 1 << 0;
pub const V4L2_MEMORY_DMABUF: u32 = 4;
pub const V4L2_FIELD_ANY: u32 = 0;
pub const V4L2_FIELD_NONE: u32 = 1;

pub const V4L2_FRMSIZE_TYPE_DISCRETE: u32 = 1;
pub const V4L2_FRMSIZE_TYPE_CONTINUOUS: u32 = 2;
pub const V4L2_FRMSIZE_TYPE_STEPWISE: u32 = 3;
pub const V4L2_FRMIVAL_TYPE_DISCRETE: u32 = 1;

pub const V4L2_FMT_FLAG_COMPRESSED: u32 = 0x0001;
/// ENUM_FMT: the driver sets a capture format's quantization when asked.
pub const V4L2_FMT_FLAG_CSC_QUANTIZATION: u32 = 0x0100;
/// `v4l2_pix_format.priv` saying its extended fields (`flags` on) are set.
pub const V4L2_PIX_FMT_PRIV_MAGIC: u32 = 0xfeed_cafe;
/// The application asks for the colour fields it sets (quantization).
pub const V4L2_PIX_FMT_FLAG_SET_CSC: u32 = 0x0002;
pub const V4L2_QUANTIZATION_DEFAULT: u32 = 0;
pub const V4L2_QUANTIZATION_FULL_RANGE: u32 = 1;
pub const V4L2_COLORSPACE_JPEG: u32 = 7;

pub const V4L2_BUF_FLAG_KEYFRAME: u32 = 0x0008;
pub const V4L2_BUF_FLAG_ERROR: u32 = 0x0040;
pub const V4L2_BUF_FLAG_TIMESTAMP_MASK: u32 = 0xe000;
pub const V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC: u32 = 0x2000;

pub const V4L2_CAP_TIMEPERFRAME: u32 = 0x1000;

pub const V4L2_CTRL_TYPE_INTEGER: u32 = 1;
pub const V4L2_CTRL_TYPE_BOOLEAN: u32 = 2;
pub const V4L2_CTRL_TYPE_MENU: u32 = 3;
pub const V4L2_CTRL_TYPE_BUTTON: u32 = 4;
pub const V4L2_CTRL_TYPE_INTEGER64: u32 = 5;
pub const V4L2_CTRL_TYPE_CTRL_CLASS: u32 = 6;
pub const V4L2_CTRL_TYPE_STRING: u32 = 7;
pub const V4L2_CTRL_TYPE_BITMASK: u32 = 8;
pub const V4L2_CTRL_TYPE_INTEGER_MENU: u32 = 9;

pub const V4L2_CTRL_FLAG_DISABLED: u32 = 0x0001;
pub const V4L2_CTRL_FLAG_READ_ONLY: u32 = 0x0004;
pub const V4L2_CTRL_FLAG_INACTIVE: u32 = 0x0010;
pub const V4L2_CTRL_FLAG_NEXT_CTRL: u32 = 0x8000_0000;
pub const V4L2_CTRL_WHICH_CUR_VAL: u32 = 0;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_capability {
    pub driver: [u8; 16],
    pub card: [u8; 32],
    pub bus_info: [u8; 32],
    pub version: u32,
    pub capabilities: u32,
    pub device_caps: u32,
    pub reserved: [u32; 3],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_fmtdesc {
    pub index: u32,
    pub type_: u32,
    pub flags: u32,
    pub description: [u8; 32],
    pub pixelformat: u32,
    pub mbus_code: u32,
    pub reserved: [u32; 3],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_frmsize_stepwise {
    pub min_width: u32,
    pub max_width: u32,
    pub step_width: u32,
    pub min_height: u32,
    pub max_height: u32,
    pub step_height: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_frmsizeenum {
    pub index: u32,
    pub pixel_format: u32,
    pub type_: u32,
    /// `discrete` (width, height) overlays the first two fields.
    pub stepwise: v4l2_frmsize_stepwise,
    pub reserved: [u32; 2],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct v4l2_fract {
    pub numerator: u32,
    pub denominator: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_frmival_stepwise {
    pub min: v4l2_fract,
    pub max: v4l2_fract,
    pub step: v4l2_fract,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_frmivalenum {
    pub index: u32,
    pub pixel_format: u32,
    pub width: u32,
    pub height: u32,
    pub type_: u32,
    /// `discrete` overlays `stepwise.min`.
    pub stepwise: v4l2_frmival_stepwise,
    pub reserved: [u32; 2],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_pix_format {
    pub width: u32,
    pub height: u32,
    pub pixelformat: u32,
    pub field: u32,
    pub bytesperline: u32,
    pub sizeimage: u32,
    pub colorspace: u32,
    pub priv_: u32,
    pub flags: u32,
    pub ycbcr_enc: u32,
    pub quantization: u32,
    pub xfer_func: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_plane_pix_format {
    pub sizeimage: u32,
    pub bytesperline: u32,
    pub reserved: [u16; 6],
}

/// Packed in C (`__attribute__ ((packed))`): 192 bytes, no padding.
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct v4l2_pix_format_mplane {
    pub width: u32,
    pub height: u32,
    pub pixelformat: u32,
    pub field: u32,
    pub colorspace: u32,
    pub plane_fmt: [v4l2_plane_pix_format; 8],
    pub num_planes: u8,
    pub flags: u8,
    pub ycbcr_enc: u8,
    pub quantization: u8,
    pub xfer_func: u8,
    pub reserved: [u8; 7],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union v4l2_format_union {
    pub pix: v4l2_pix_format,
    pub pix_mp: v4l2_pix_format_mplane,
    pub raw_data: [u8; 200],
    /// `struct v4l2_window` in the C union holds pointers, which sets the
    /// union's alignment (8 on 64-bit targets, 4 on 32-bit ARM).
    _align: [*const c_void; 0],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_format {
    pub type_: u32,
    pub fmt: v4l2_format_union,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_requestbuffers {
    pub count: u32,
    pub type_: u32,
    pub memory: u32,
    pub capabilities: u32,
    pub flags: u8,
    pub reserved: [u8; 3],
}

/// The kernel's `__kernel_old_timeval`: `long` seconds and microseconds.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct timeval {
    pub tv_sec: c_long,
    pub tv_usec: c_long,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_timecode {
    pub type_: u32,
    pub flags: u32,
    pub frames: u8,
    pub seconds: u8,
    pub minutes: u8,
    pub hours: u8,
    pub userbits: [u8; 4],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union v4l2_buffer_m {
    pub offset: u32,
    pub userptr: c_ulong,
    pub planes: *mut c_void,
    pub fd: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union v4l2_plane_m {
    pub mem_offset: u32,
    pub userptr: c_ulong,
    pub fd: i32,
}

/// One plane of a multi-planar buffer (`v4l2_buffer.m.planes` points at
/// an array of them, `length` long).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_plane {
    pub bytesused: u32,
    pub length: u32,
    pub m: v4l2_plane_m,
    pub data_offset: u32,
    pub reserved: [u32; 11],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_buffer {
    pub index: u32,
    pub type_: u32,
    pub bytesused: u32,
    pub flags: u32,
    pub field: u32,
    pub timestamp: timeval,
    pub timecode: v4l2_timecode,
    pub sequence: u32,
    pub memory: u32,
    pub m: v4l2_buffer_m,
    pub length: u32,
    pub reserved2: u32,
    pub request_fd: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_captureparm {
    pub capability: u32,
    pub capturemode: u32,
    pub timeperframe: v4l2_fract,
    pub extendedmode: u32,
    pub readbuffers: u32,
    pub reserved: [u32; 4],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union v4l2_streamparm_union {
    pub capture: v4l2_captureparm,
    pub raw_data: [u8; 200],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_streamparm {
    pub type_: u32,
    pub parm: v4l2_streamparm_union,
}

/// VIDIOC_EXPBUF's argument: a buffer of ours as a DMABUF descriptor.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_exportbuffer {
    pub type_: u32,
    pub index: u32,
    pub plane: u32,
    pub flags: u32,
    pub fd: i32,
    pub reserved: [u32; 11],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_control {
    pub id: u32,
    pub value: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_queryctrl {
    pub id: u32,
    pub type_: u32,
    pub name: [u8; 32],
    pub minimum: i32,
    pub maximum: i32,
    pub step: i32,
    pub default_value: i32,
    pub flags: u32,
    pub reserved: [u32; 2],
}

/// Packed in C: `name` and the 64-bit `value` of integer menus overlay.
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct v4l2_querymenu {
    pub id: u32,
    pub index: u32,
    pub name: [u8; 32],
    pub reserved: u32,
}

/// Packed in C; `value64` is the widest member of the value union.
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct v4l2_ext_control {
    pub id: u32,
    pub size: u32,
    pub reserved2: [u32; 1],
    pub value64: i64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_ext_controls {
    pub which: u32,
    pub count: u32,
    pub error_idx: u32,
    pub request_fd: i32,
    pub reserved: [u32; 1],
    pub controls: *mut v4l2_ext_control,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct v4l2_rect {
    pub left: i32,
    pub top: i32,
    pub width: u32,
    pub height: u32,
}

pub const V4L2_SEL_TGT_CROP: u32 = 0;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_selection {
    pub type_: u32,
    pub target: u32,
    pub flags: u32,
    pub r: v4l2_rect,
    pub reserved: [u32; 9],
}

/// All-zero value of a plain-data ioctl struct, as the API expects for
/// reserved fields.
pub fn zeroed<T: Copy>() -> T {
    // SAFETY: only used with the `repr(C)` integer/array/pointer structs
    // above, for which all-zero bytes are a valid value.
    unsafe { std::mem::zeroed() }
}

pub const VIDIOC_QUERYCAP: Opcode = opcode::read::<v4l2_capability>(b'V', 0);
pub const VIDIOC_ENUM_FMT: Opcode = opcode::read_write::<v4l2_fmtdesc>(b'V', 2);
pub const VIDIOC_G_FMT: Opcode = opcode::read_write::<v4l2_format>(b'V', 4);
pub const VIDIOC_S_FMT: Opcode = opcode::read_write::<v4l2_format>(b'V', 5);
pub const VIDIOC_REQBUFS: Opcode = opcode::read_write::<v4l2_requestbuffers>(b'V', 8);
pub const VIDIOC_QUERYBUF: Opcode = opcode::read_write::<v4l2_buffer>(b'V', 9);
pub const VIDIOC_EXPBUF: Opcode = opcode::read_write::<v4l2_exportbuffer>(b'V', 16);
pub const VIDIOC_QBUF: Opcode = opcode::read_write::<v4l2_buffer>(b'V', 15);
pub const VIDIOC_DQBUF: Opcode = opcode::read_write::<v4l2_buffer>(b'V', 17);
pub const VIDIOC_STREAMON: Opcode = opcode::write::<i32>(b'V', 18);
pub const VIDIOC_STREAMOFF: Opcode = opcode::write::<i32>(b'V', 19);
pub const VIDIOC_G_PARM: Opcode = opcode::read_write::<v4l2_streamparm>(b'V', 21);
pub const VIDIOC_S_PARM: Opcode = opcode::read_write::<v4l2_streamparm>(b'V', 22);
pub const VIDIOC_G_CTRL: Opcode = opcode::read_write::<v4l2_control>(b'V', 27);
pub const VIDIOC_S_CTRL: Opcode = opcode::read_write::<v4l2_control>(b'V', 28);
pub const VIDIOC_QUERYCTRL: Opcode = opcode::read_write::<v4l2_queryctrl>(b'V', 36);
pub const VIDIOC_QUERYMENU: Opcode = opcode::read_write::<v4l2_querymenu>(b'V', 37);
pub const VIDIOC_G_EXT_CTRLS: Opcode = opcode::read_write::<v4l2_ext_controls>(b'V', 71);
pub const VIDIOC_S_EXT_CTRLS: Opcode = opcode::read_write::<v4l2_ext_controls>(b'V', 72);
pub const VIDIOC_S_SELECTION: Opcode = opcode::read_write::<v4l2_selection>(b'V', 95);
pub const VIDIOC_ENUM_FRAMESIZES: Opcode = opcode::read_write::<v4l2_frmsizeenum>(b'V', 74);
pub const VIDIOC_ENUM_FRAMEINTERVALS: Opcode = opcode::read_write::<v4l2_frmivalenum>(b'V', 75);

// The layouts videodev2.h gives on each target (sizes from `pahole` and
// `sizeof` on aarch64 and armhf).
const LP64: bool = size_of::<c_long>() == 8;
const fn pick(lp64: usize, ilp32: usize) -> usize {
    if LP64 { lp64 } else { ilp32 }
}
const _: () = {
    assert!(size_of::<v4l2_capability>() == 104);
    assert!(size_of::<v4l2_fmtdesc>() == 64);
    assert!(size_of::<v4l2_frmsizeenum>() == 44);
    assert!(size_of::<v4l2_frmivalenum>() == 52);
    assert!(size_of::<v4l2_pix_format>() == 48);
    assert!(size_of::<v4l2_pix_format_mplane>() == 192);
    assert!(size_of::<v4l2_plane>() == pick(64, 60));
    assert!(size_of::<v4l2_selection>() == 64);
    assert!(size_of::<v4l2_format>() == pick(208, 204));
    assert!(offset_of!(v4l2_format, fmt) == pick(8, 4));
    assert!(size_of::<v4l2_requestbuffers>() == 20);
    assert!(size_of::<v4l2_buffer>() == pick(88, 68));
    assert!(offset_of!(v4l2_buffer, timestamp) == pick(24, 20));
    assert!(offset_of!(v4l2_buffer, sequence) == pick(56, 44));
    assert!(offset_of!(v4l2_buffer, m) == pick(64, 52));
    assert!(offset_of!(v4l2_buffer, length) == pick(72, 56));
    assert!(size_of::<v4l2_streamparm>() == 204);
    assert!(size_of::<v4l2_exportbuffer>() == 64);
    assert!(size_of::<v4l2_control>() == 8);
    assert!(size_of::<v4l2_queryctrl>() == 68);
    assert!(size_of::<v4l2_querymenu>() == 44);
    assert!(size_of::<v4l2_ext_control>() == 20);
    assert!(size_of::<v4l2_ext_controls>() == pick(32, 24));
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The request codes the kernel defines, as `strace` prints them on
    /// aarch64 and x86_64 (64-bit layouts).
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn request_codes_match_the_kernel() {
        assert_eq!(VIDIOC_QUERYCAP, 0x8068_5600);
        assert_eq!(VIDIOC_ENUM_FMT, 0xc040_5602);
        assert_eq!(VIDIOC_S_FMT, 0xc0d0_5605);
        assert_eq!(VIDIOC_REQBUFS, 0xc014_5608);
        assert_eq!(VIDIOC_QUERYBUF, 0xc058_5609);
        assert_eq!(VIDIOC_EXPBUF, 0xc040_5610);
        assert_eq!(VIDIOC_QBUF, 0xc058_560f);
        assert_eq!(VIDIOC_DQBUF, 0xc058_5611);
        assert_eq!(VIDIOC_STREAMON, 0x4004_5612);
        assert_eq!(VIDIOC_S_PARM, 0xc0cc_5616);
        assert_eq!(VIDIOC_S_CTRL, 0xc008_561c);
        assert_eq!(VIDIOC_QUERYCTRL, 0xc044_5624);
        assert_eq!(VIDIOC_QUERYMENU, 0xc02c_5625);
        assert_eq!(VIDIOC_S_EXT_CTRLS, 0xc020_5648);
        assert_eq!(VIDIOC_ENUM_FRAMESIZES, 0xc02c_564a);
        assert_eq!(VIDIOC_S_SELECTION, 0xc040_565f);
        assert_eq!(VIDIOC_ENUM_FRAMEINTERVALS, 0xc034_564b);
    }

    #[test]
    fn fourcc_is_little_endian() {
        assert_eq!(fourcc(b"MJPG"), 0x4750_4a4d);
        assert_eq!(fourcc(b"YUYV"), 0x5659_5559);
    }
}
