//! RFC 6184 depacketizer (packetization-mode 0 and 1: single NAL units,
//! STAP-A, FU-A): RTP payloads back into an Annex B access unit, complete
//! at the marker bit. What the tests use to check the packetizer against
//! real encoders' output, as a client rebuilds it.

use alloc::vec::Vec;

use camstream_rtp::rtp::IncomingPacket;

use crate::nal;

/// Why a packet's payload could not be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepacketizeError {
    Empty,
    /// A STAP-A whose unit sizes run past its end, or a FU-A too short.
    Truncated,
    /// A payload type RFC 6184's mode 1 does not send (STAP-B, MTAPs, FU-B).
    Unsupported(u8),
    /// A FU-A piece that does not continue the unit being rebuilt (a lost
    /// packet): the unit is dropped.
    Lost,
}

impl core::fmt::Display for DepacketizeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DepacketizeError::Empty => f.write_str("empty H.264 payload"),
            DepacketizeError::Truncated => f.write_str("STAP-A or FU-A cut short"),
            DepacketizeError::Unsupported(t) => write!(f, "H.264 payload of type {t}"),
            DepacketizeError::Lost => f.write_str("a FU-A fragment is missing"),
        }
    }
}

impl core::error::Error for DepacketizeError {}

const START_CODE: [u8; 4] = [0, 0, 0, 1];

#[derive(Debug, Default)]
pub struct Depacketizer {
    au: Vec<u8>,
    /// Rebuilding a fragmented unit: the next sequence number expected.
    fragment_next: Option<u16>,
    /// The access unit is damaged (a lost fragment): dropped at its end.
    damaged: bool,
    /// `au` was returned: the next packet begins another.
    returned: bool,
}

impl Depacketizer {
    pub fn new() -> Depacketizer {
        Depacketizer::default()
    }

    /// Takes a packet; returns the access unit (Annex B, four-byte start
    /// codes) when the packet ends it.
    pub fn push(&mut self, p: &IncomingPacket<'_>) -> Result<Option<&[u8]>, DepacketizeError> {
        let r = self.take(p);
        if r.is_err() {
            self.damaged = true;
        }
        if !p.header.marker {
            return r.map(|()| None);
        }
        let damaged = core::mem::take(&mut self.damaged) || self.fragment_next.is_some();
        self.fragment_next = None;
        r?;
        if damaged || self.au.is_empty() {
            self.au.clear();
            return Err(DepacketizeError::Lost);
        }
        self.returned = true;
        Ok(Some(&self.au))
    }

    fn take(&mut self, p: &IncomingPacket<'_>) -> Result<(), DepacketizeError> {
        // The access unit returned last time is no longer the caller's.
        if core::mem::take(&mut self.returned) {
            self.au.clear();
        }
        let payload = p.payload;
        let header = *payload.first().ok_or(DepacketizeError::Empty)?;
        match nal::unit_type(header) {
            1..=23 => {
                self.end_fragment()?;
                self.unit(payload);
            }
            nal::STAP_A => {
                self.end_fragment()?;
                let mut rest = &payload[1..];
                while !rest.is_empty() {
                    let [a, b, tail @ ..] = rest else {
                        return Err(DepacketizeError::Truncated);
                    };
                    let n = usize::from(u16::from_be_bytes([*a, *b]));
                    if n == 0 || tail.len() < n {
                        return Err(DepacketizeError::Truncated);
                    }
                    self.unit(&tail[..n]);
                    rest = &tail[n..];
                }
            }
            nal::FU_A => {
                let [_, fu, body @ ..] = payload else {
                    return Err(DepacketizeError::Truncated);
                };
                let (first, last) = (fu & 0x80 != 0, fu & 0x40 != 0);
                if first {
                    self.end_fragment()?;
                    self.au.extend_from_slice(&START_CODE);
                    self.au.push(nal::nri(header) | nal::unit_type(*fu));
                } else if self.fragment_next != Some(p.header.sequence) {
                    self.fragment_next = None;
                    return Err(DepacketizeError::Lost);
                }
                self.au.extend_from_slice(body);
                self.fragment_next = (!last).then(|| p.header.sequence.wrapping_add(1));
            }
            t => return Err(DepacketizeError::Unsupported(t)),
        }
        Ok(())
    }

    fn unit(&mut self, unit: &[u8]) {
        self.au.extend_from_slice(&START_CODE);
        self.au.extend_from_slice(unit);
    }

    /// A new unit while a fragmented one is unfinished: that one is lost.
    fn end_fragment(&mut self) -> Result<(), DepacketizeError> {
        if self.fragment_next.take().is_some() {
            return Err(DepacketizeError::Lost);
        }
        Ok(())
    }
}
