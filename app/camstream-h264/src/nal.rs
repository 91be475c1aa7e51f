//! NAL unit headers (ITU-T H.264 7.3.1) and the types RFC 6184 adds.

/// A slice of a picture that is not an IDR picture.
pub const NON_IDR: u8 = 1;
/// A slice of an IDR picture: a decoder can start here.
pub const IDR: u8 = 5;
pub const SEI: u8 = 6;
/// Sequence parameter set.
pub const SPS: u8 = 7;
/// Picture parameter set.
pub const PPS: u8 = 8;
/// Access unit delimiter.
pub const AUD: u8 = 9;
/// RFC 6184 5.7.1: single-time aggregation packet.
pub const STAP_A: u8 = 24;
/// RFC 6184 5.8: fragmentation unit.
pub const FU_A: u8 = 28;

/// The type in a NAL unit's header byte.
pub fn unit_type(header: u8) -> u8 {
    header & 0x1f
}

/// nal_ref_idc, in place (the bits a FU indicator and a STAP-A header
/// carry on).
pub fn nri(header: u8) -> u8 {
    header & 0x60
}

/// forbidden_zero_bit: set in a unit that is damaged.
pub fn forbidden(header: u8) -> bool {
    header & 0x80 != 0
}
