//! camstream: the camera firmware's daemon. Pictures come from a source (a
//! V4L2 or libcamera camera, a test pattern, an MJPEG file) as JPEG, raw
//! planes beside them where the source has them; the main stream is
//! checked and built once (RFC 2435 RTP/JPEG, the JPEG file for HTTP) and
//! fanned out (`fanout`); producers (`media`) make an H.264 stream (RFC
//! 6184, the kernel's encoder or OpenH264) and a sub-stream of it; the
//! server (`server`) serves them over RTSP, HTTP (snapshot, MJPEG, RTSP
//! over HTTP, /metrics) and ONVIF from one event loop. A library so that
//! the binary (main.rs) and the fuzz targets drive the same code.

pub mod check;
mod clock;
pub mod config;
mod convert;
pub mod encoders;
mod intake;
mod latency;
pub mod logger;
pub mod mqtt;
mod normalize;
pub mod preseed;
pub mod privileges;
mod replace;
/// Modules a client's bytes reach: nothing there may panic on them (the
/// release build aborts on a panic, ending every viewer's stream).
macro_rules! client_facing {
    ($($v:vis mod $m:ident;)*) => {
        $(
            #[cfg_attr(
                not(test),
                deny(
                    clippy::unwrap_used,
                    clippy::expect_used,
                    clippy::indexing_slicing,
                    clippy::panic
                )
            )]
            $v mod $m;
        )*
    };
}

client_facing! {
    mod codec;
    mod fanout;
    mod media;
    mod random;
    pub mod server;
    mod table;
}
pub mod source;
mod turbo;
