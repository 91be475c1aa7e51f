//! The HTTP side of camstream that touches hostile bytes, without I/O:
//! request heads cut out of a connection's input by `httparse` under size
//! and header-count limits, the base64 stream of an RTSP-over-HTTP tunnel's
//! POST decoded as it arrives, and the headers of multipart MJPEG parts.
//! The daemon and the fuzz targets share it.
#![forbid(unsafe_code)]
// A client's bytes reach every function here: nothing may panic on them
// (the release build aborts on a panic, ending every viewer's stream).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

pub mod mjpeg;
pub mod request;
pub mod response;
pub mod tunnel;
