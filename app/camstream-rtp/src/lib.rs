//! The pure core of camstream: JPEG parsing and RFC 2435 (RTP Payload Format
//! for JPEG) packetizing and depacketizing, RTP and RTCP headers.
//!
//! No I/O, and no heap allocation per frame or packet: the parser and the
//! packetizer borrow from the caller's frame; the depacketizer reuses its
//! buffer once it has grown to the largest frame.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod depacketize;
pub mod jfif;
pub mod jpeg;
pub mod packetize;
// What receivers send back reaches the server's parser: nothing there may
// panic on it.
#[cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]
pub mod rtcp;
pub mod rtp;
pub mod tables;

pub use depacketize::{DepacketizeError, Depacketizer};
pub use jpeg::{Jpeg, JpegError, Subsampling};
pub use packetize::{OutgoingPacket, Packetizer};
pub use rtp::IncomingPacket;
