//! camstream: an RTSP server for camera firmware. Frames come from a source
//! (test pattern, MJPEG file, camera), are checked and packetized as RFC 2435
//! RTP/JPEG once, and are fanned out to every client. A library so that the
//! binary (main.rs) and the fuzz targets drive the same code.

pub mod check;
mod clock;
pub mod config;
mod convert;
pub mod encoders;
mod intake;
mod latency;
pub mod logger;
mod normalize;
pub mod privileges;
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
    mod fanout;
    mod media;
    mod random;
    pub mod server;
    mod table;
}
pub mod source;
mod turbo;
