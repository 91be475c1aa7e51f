//! An access unit in the Annex B byte stream format (ITU-T H.264 Annex B):
//! NAL units each after a start code (00 00 01, or 00 00 00 01), as encoders
//! and V4L2's stateful encoders write one picture.

use crate::nal;

/// The NAL units of Annex B bytes, each without its start code and without
/// the zero bytes that end it (trailing_zero_8bits, or the first zero of
/// the next four-byte start code). Bytes before the first start code are
/// not a NAL unit and are passed over.
#[derive(Debug, Clone)]
pub struct NalUnits<'a> {
    data: &'a [u8],
    /// Where the next unit starts (just past a start code), if any.
    next: Option<usize>,
}

/// The NAL units of `data`.
pub fn nal_units(data: &[u8]) -> NalUnits<'_> {
    NalUnits {
        data,
        next: start_code_end(data, 0),
    }
}

/// The index just past the first start code at or after `from`.
fn start_code_end(data: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while at + 3 <= data.len() {
        let i = at + memchr::memchr(1, &data[at + 2..])? + 2;
        if data[i - 1] == 0 && data[i - 2] == 0 {
            return Some(i + 1);
        }
        at = i - 1;
    }
    None
}

impl<'a> Iterator for NalUnits<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            let start = self.next?;
            self.next = start_code_end(self.data, start);
            let end = self.next.map_or(self.data.len(), |n| n - 3);
            let mut unit = &self.data[start..end];
            while let [rest @ .., 0] = unit {
                unit = rest;
            }
            if !unit.is_empty() {
                return Some(unit);
            }
        }
    }
}

/// Why bytes are not an access unit this server sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessUnitError {
    /// No NAL unit (no start code, or only empty units).
    Empty,
    /// A unit with forbidden_zero_bit set: damaged.
    Forbidden,
    /// A unit of type 0 or 24..31, which no encoder writes (RTP's own
    /// packet types use 24..29).
    Reserved(u8),
    /// More than one SPS or PPS, or one of more than [`MAX_PARAMETER_SET`]
    /// bytes.
    ParameterSets,
}

impl core::fmt::Display for AccessUnitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AccessUnitError::Empty => f.write_str("no NAL unit in the access unit"),
            AccessUnitError::Forbidden => f.write_str("a NAL unit with forbidden_zero_bit set"),
            AccessUnitError::Reserved(t) => write!(f, "a NAL unit of reserved type {t}"),
            AccessUnitError::ParameterSets => {
                f.write_str("more than one SPS or PPS, or one too large")
            }
        }
    }
}

impl core::error::Error for AccessUnitError {}

/// Largest SPS or PPS kept (encoders write some 10 to 60 bytes).
pub const MAX_PARAMETER_SET: usize = 256;

/// One picture's NAL units, checked, and what a sender needs to know of
/// them.
#[derive(Debug, Clone, Copy)]
pub struct AccessUnit<'a> {
    pub data: &'a [u8],
    /// It holds an IDR slice: a receiver can start decoding here.
    pub idr: bool,
    pub sps: Option<&'a [u8]>,
    pub pps: Option<&'a [u8]>,
}

impl<'a> AccessUnit<'a> {
    pub fn parse(data: &'a [u8]) -> Result<AccessUnit<'a>, AccessUnitError> {
        let mut au = AccessUnit {
            data,
            idr: false,
            sps: None,
            pps: None,
        };
        let mut any = false;
        for unit in nal_units(data) {
            any = true;
            let header = unit[0];
            if nal::forbidden(header) {
                return Err(AccessUnitError::Forbidden);
            }
            let slot = match nal::unit_type(header) {
                t @ (0 | 24..=31) => return Err(AccessUnitError::Reserved(t)),
                nal::IDR => {
                    au.idr = true;
                    continue;
                }
                nal::SPS => &mut au.sps,
                nal::PPS => &mut au.pps,
                _ => continue,
            };
            if slot.is_some() || unit.len() > MAX_PARAMETER_SET {
                return Err(AccessUnitError::ParameterSets);
            }
            *slot = Some(unit);
        }
        if !any {
            return Err(AccessUnitError::Empty);
        }
        Ok(au)
    }

    pub fn units(&self) -> NalUnits<'a> {
        nal_units(self.data)
    }

    /// Where its SPS lies in `data`, if it has one.
    pub fn sps_at(&self) -> Option<core::ops::Range<usize>> {
        let sps = self.sps?;
        let start = sps.as_ptr() as usize - self.data.as_ptr() as usize;
        Some(start..start + sps.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn units_between_start_codes_of_both_lengths() {
        let data = [
            9, 9, // before the first start code: not a unit
            0, 0, 0, 1, 0x67, 1, 2, // SPS, 4-byte start code
            0, 0, 1, 0x68, 3, 0, // PPS ending in a zero byte (trailing)
            0, 0, 0, 1, 0x65, 0, 0, 3, 0, 5, // IDR holding an emulation-prevented 00 00 03
            0, 0, 1, // an empty unit at the end
        ];
        let units: Vec<&[u8]> = nal_units(&data).collect();
        assert_eq!(
            units,
            [&[0x67, 1, 2][..], &[0x68, 3], &[0x65, 0, 0, 3, 0, 5]]
        );
        let au = AccessUnit::parse(&data).unwrap();
        assert!(au.idr);
        assert_eq!(au.sps, Some(&[0x67, 1, 2][..]));
        assert_eq!(au.sps_at(), Some(6..9));
        assert_eq!(au.pps, Some(&[0x68, 3][..]));
    }

    #[test]
    fn refused() {
        assert_eq!(
            AccessUnit::parse(b"no start code").unwrap_err(),
            AccessUnitError::Empty
        );
        assert_eq!(
            AccessUnit::parse(&[0, 0, 1, 0x7c, 1]).unwrap_err(),
            AccessUnitError::Reserved(28)
        );
        assert_eq!(
            AccessUnit::parse(&[0, 0, 1, 0xe5, 1]).unwrap_err(),
            AccessUnitError::Forbidden
        );
        assert_eq!(
            AccessUnit::parse(&[0, 0, 1, 0x67, 1, 0, 0, 1, 0x67, 2]).unwrap_err(),
            AccessUnitError::ParameterSets
        );
    }
}
