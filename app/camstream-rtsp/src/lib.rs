//! The RTSP side of camstream that touches hostile bytes, without I/O:
//! framing requests out of a connection's input under size and header-count
//! limits, choosing a transport from a client's offer, finding the RTP/JPEG
//! track in a server's SDP (the health check and the load client), and
//! Digest/Basic authentication, and rtsp:// URLs as a client reads them. The daemon and the fuzz targets share it.
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

pub mod auth;
pub mod framing;
pub mod sdp;
pub mod transport;
pub mod url;
