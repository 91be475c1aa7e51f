//! Audio over RTP without I/O, what camstream's audio path needs around the
//! encoders it links (libopus, FDK AAC): G.711 µ-law (RFC 3551's PCMU) and
//! the low-pass decimation from the capture's rate to its 8 kHz; AAC's
//! AudioSpecificConfig and ADTS header and RFC 3640's AAC-hbr payload;
//! Opus's packet duration (RFC 6716) and RFC 7587's payload; the SDP's
//! `rtpmap` and `fmtp` for each; and the fit of a sound card's sample count
//! to the monotonic clock, which maps both tracks to one wall clock in the
//! RTCP sender reports although the card's crystal drifts.
//!
//! No heap allocation per frame or packet: packetizers borrow the encoded
//! frame; the decimator and the clock keep fixed arrays; only the
//! depacketizer (a client's side: tests, `camstream check`) keeps a buffer,
//! reused once grown.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod aac;
pub mod clock;
pub mod decimate;
pub mod opus;
pub mod packetize;
pub mod pcmu;

pub use clock::SampleClock;
pub use decimate::Decimator;
pub use packetize::{Format, Packetizer};
