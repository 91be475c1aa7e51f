//! H.264 over RTP without I/O: the NAL units of an Annex B access unit (as
//! encoders and V4L2's stateful encoders hand them over), RFC 6184's
//! packetization mode 1 (single NAL units, FU-A fragments, STAP-A for the
//! parameter sets, which go in band before every IDR picture), the
//! depacketizer tests and clients use, the SDP's `fmtp` line, and the
//! colour an SPS signals.
//!
//! No heap allocation per frame or packet: the packetizer borrows the
//! access unit and keeps the latest parameter sets in fixed buffers; the
//! depacketizer reuses its buffer once it has grown to the largest frame.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod annexb;
pub mod depacketize;
pub mod nal;
pub mod packetize;
pub mod sdp;
pub mod sps;

pub use annexb::{AccessUnit, AccessUnitError};
pub use depacketize::{DepacketizeError, Depacketizer};
pub use packetize::{OutgoingPacket, Packetizer};
