//! `libcamera:auto` and `libcamera:ID`: cameras that need an ISP and control
//! loops to make a picture (the Raspberry Pi's Camera Modules), through
//! libcamera. libcamera hands over processed YUV (or RGB) frames in buffers
//! mapped once; a capture thread encodes the newest with libjpeg-turbo, as
//! for raw V4L2 cameras, and passes the JPEG to the event loop, which never
//! waits for an encode.
//!
//! The camera may go away (a cable, a driver reset, no frame for a while):
//! sessions stay open, the thread looks for it once a second with a fresh
//! camera manager (libcamera sees new cameras only then without udev), and
//! streaming resumes on the same sessions.

#[cfg(feature = "libcamera")]
pub mod capture;
pub mod controls;
pub mod describe;
#[cfg(feature = "libcamera")]
mod encode;
#[cfg(feature = "libcamera")]
mod ffi;
pub mod picture;

#[cfg(feature = "libcamera")]
pub use capture::{LibcameraSource, init, probe, usable_camera};

/// Which camera `source = "libcamera:..."` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CameraSpec {
    /// The first camera libcamera finds that is not a USB camera.
    Auto,
    /// An id as `camstream probe` lists it.
    Id(String),
}

impl std::fmt::Display for CameraSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CameraSpec::Auto => f.write_str("the first libcamera camera"),
            CameraSpec::Id(id) => write!(f, "libcamera camera {id}"),
        }
    }
}

/// Without libcamera (a build without the `libcamera` feature).
#[cfg(not(feature = "libcamera"))]
pub fn probe() -> Option<String> {
    None
}
