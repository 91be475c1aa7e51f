//! The HTTP side of camstream that touches hostile bytes, without I/O:
//! request heads cut out of a connection's input by `httparse` under size
//! and header-count limits, the base64 stream of an RTSP-over-HTTP tunnel's
//! POST decoded as it arrives, and the headers of multipart MJPEG parts.
//! The daemon and the fuzz targets share it.
#![forbid(unsafe_code)]

pub mod mjpeg;
pub mod request;
pub mod response;
pub mod tunnel;
