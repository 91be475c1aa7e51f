//! The ONVIF side of camstream that touches hostile bytes, without I/O:
//! SOAP 1.2 requests read by quick-xml under size and depth limits (no DTD,
//! no entities beyond XML's own), WS-Security UsernameToken digests checked
//! against a password with a bounded replay memory, and WS-Discovery's
//! Probe read and its answers written. The daemon and the fuzz targets
//! share it.
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

pub mod access;
pub mod discovery;
pub mod events;
pub mod imaging;
pub mod ns;
pub mod responses;
pub mod soap;
pub mod topics;
pub mod wsse;
pub mod xml;
