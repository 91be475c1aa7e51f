//! Media producers: what the camera's picture is made into besides the
//! main stream (the H.264 stream, the sub-stream), each on a worker
//! thread, each published on the fan-out as a stream of its own.

pub mod h264;
mod i420;
pub mod substream;
mod worker;
