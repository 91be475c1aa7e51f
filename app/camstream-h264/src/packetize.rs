//! RFC 6184 packetizer, packetization-mode=1: a NAL unit that fits the MTU
//! goes whole (5.6), a larger one in FU-A fragments (5.8), and the SPS and
//! PPS together in one STAP-A (5.7.1). Every IDR picture is preceded by its
//! parameter sets, in band: an access unit that has none carries the latest
//! seen, so a client that joins at any IDR can decode (what a client joining
//! mid-stream gets first is the next IDR picture; the sender asks its
//! encoder for one).
//!
//! No allocation: a packet is a small header held inline (RTP, and the
//! FU-A or STAP-A bytes) and a slice of the access unit.

use camstream_rtp::rtp::{self, HEADER_LEN};

use crate::annexb::{AccessUnit, MAX_PARAMETER_SET, NalUnits};
use crate::nal;

/// The dynamic payload type camstream gives H.264 in its SDP.
pub const PAYLOAD_TYPE_H264: u8 = 96;
/// RTP clock rate of H.264 video (RFC 6184 8.2.1).
pub const CLOCK_RATE: u32 = 90_000;
/// A STAP-A's NAL header and the size of each unit it carries.
const STAP_OVERHEAD: usize = 1 + 2 + 2;
/// RTP header and a STAP-A of both parameter sets, or a FU-A's two bytes.
pub const MAX_HEADER_LEN: usize = HEADER_LEN + STAP_OVERHEAD + 2 * MAX_PARAMETER_SET;
/// Smallest MTU (RTP header and payload): room for the parameter sets in
/// one packet, and for FU-A fragments of some size.
pub const MIN_MTU: usize = MAX_HEADER_LEN + 64;
pub use camstream_rtp::rtp::{MAX_MTU, MtuError};

/// The latest SPS and PPS of the stream, kept to send before an IDR
/// picture that comes without them.
#[derive(Debug, Clone)]
struct ParameterSets {
    sps: [u8; MAX_PARAMETER_SET],
    sps_len: usize,
    pps: [u8; MAX_PARAMETER_SET],
    pps_len: usize,
}

impl ParameterSets {
    fn sps(&self) -> Option<&[u8]> {
        (self.sps_len > 0).then(|| &self.sps[..self.sps_len])
    }

    fn pps(&self) -> Option<&[u8]> {
        (self.pps_len > 0).then(|| &self.pps[..self.pps_len])
    }
}

/// Packetizer state for one RTP stream: SSRC, next sequence number, MTU,
/// payload type and the latest parameter sets.
#[derive(Debug, Clone)]
pub struct Packetizer {
    sender: rtp::Sender,
    payload_type: u8,
    sets: ParameterSets,
}

impl Packetizer {
    /// `mtu` counts the RTP header and payload (not UDP/IP or TCP
    /// framing). SSRC and initial sequence should be random (RFC 3550 5.1).
    pub fn new(ssrc: u32, initial_sequence: u16, mtu: usize) -> Result<Self, MtuError> {
        Ok(Packetizer {
            sender: rtp::Sender::new(ssrc, initial_sequence, mtu, MIN_MTU)?,
            payload_type: PAYLOAD_TYPE_H264,
            sets: ParameterSets {
                sps: [0; MAX_PARAMETER_SET],
                sps_len: 0,
                pps: [0; MAX_PARAMETER_SET],
                pps_len: 0,
            },
        })
    }

    pub fn ssrc(&self) -> u32 {
        self.sender.ssrc()
    }

    /// Sequence number the next packet will carry.
    pub fn next_sequence(&self) -> u16 {
        self.sender.next_sequence()
    }

    /// The latest SPS and PPS seen (what the SDP's sprop-parameter-sets
    /// names), once both came.
    pub fn parameter_sets(&self) -> Option<(&[u8], &[u8])> {
        Some((self.sets.sps()?, self.sets.pps()?))
    }

    /// The packets of one access unit, all with `timestamp` (90 kHz), the
    /// last with the marker bit. Sequence numbers advance as packets are
    /// taken. Access unit delimiters are left out (RFC 6184 leaves framing
    /// to the marker bit and the timestamp).
    pub fn packetize<'p, 'a>(&'p mut self, au: &AccessUnit<'a>, timestamp: u32) -> Packets<'p, 'a> {
        if let Some(sps) = au.sps {
            self.sets.sps[..sps.len()].copy_from_slice(sps);
            self.sets.sps_len = sps.len();
        }
        if let Some(pps) = au.pps {
            self.sets.pps[..pps.len()].copy_from_slice(pps);
            self.sets.pps_len = pps.len();
        }
        // An IDR picture without its parameter sets gets the latest ones
        // first (once both came); one that has them sends them as they come.
        let sets_first =
            au.idr && (au.sps.is_none() || au.pps.is_none()) && self.parameter_sets().is_some();
        let mut units = au.units();
        let current = next_unit(&mut units);
        Packets {
            packetizer: self,
            units,
            current,
            fragment: 0,
            sets_first,
            timestamp,
        }
    }
}

/// The next NAL unit that is sent (access unit delimiters are not).
fn next_unit<'a>(units: &mut NalUnits<'a>) -> Option<&'a [u8]> {
    units.find(|u| nal::unit_type(u[0]) != nal::AUD)
}

/// Iterator over the packets of one access unit.
#[derive(Debug)]
pub struct Packets<'p, 'a> {
    packetizer: &'p mut Packetizer,
    units: NalUnits<'a>,
    /// The unit being sent, whole or in fragments.
    current: Option<&'a [u8]>,
    /// Bytes of `current` after its header already sent in FU-As.
    fragment: usize,
    /// The kept parameter sets go first, in a STAP-A.
    sets_first: bool,
    timestamp: u32,
}

/// One RTP packet of H.264: the RTP header and the FU-A or STAP-A bytes,
/// then a slice of the access unit.
pub type OutgoingPacket<'a> = rtp::OutgoingPacket<'a, MAX_HEADER_LEN>;

/// A STAP-A of `units` after `h` bytes of `header`; its length.
fn stap_a(header: &mut [u8], mut h: usize, units: &[&[u8]]) -> usize {
    // The STAP-A's NRI is the highest of its units' (RFC 6184 5.7).
    let nri = units.iter().map(|u| nal::nri(u[0])).max().unwrap_or(0);
    header[h] = nri | nal::STAP_A;
    h += 1;
    for u in units {
        header[h..h + 2].copy_from_slice(&(u.len() as u16).to_be_bytes());
        header[h + 2..h + 2 + u.len()].copy_from_slice(u);
        h += 2 + u.len();
    }
    h
}

impl<'a> Iterator for Packets<'_, 'a> {
    type Item = OutgoingPacket<'a>;

    fn next(&mut self) -> Option<OutgoingPacket<'a>> {
        let max_payload = self.packetizer.sender.mtu() - HEADER_LEN;
        let mut header = [0u8; MAX_HEADER_LEN];
        let mut payload: &'a [u8] = &[];
        let header_len;
        if self.sets_first {
            self.sets_first = false;
            let (sps, pps) = self
                .packetizer
                .parameter_sets()
                .expect("checked at the start");
            header_len = stap_a(&mut header, HEADER_LEN, &[sps, pps]);
        } else {
            let unit = self.current?;
            let t = nal::unit_type(unit[0]);
            let next = self
                .units
                .clone()
                .find(|u| nal::unit_type(u[0]) != nal::AUD);
            if self.fragment == 0
                && t == nal::SPS
                && next.is_some_and(|n| nal::unit_type(n[0]) == nal::PPS)
            {
                // SPS and PPS together; both fit (at most 256 bytes each).
                let pps = next_unit(&mut self.units).expect("looked at above");
                header_len = stap_a(&mut header, HEADER_LEN, &[unit, pps]);
                self.current = next_unit(&mut self.units);
            } else if self.fragment == 0 && unit.len() <= max_payload {
                header_len = HEADER_LEN;
                payload = unit;
                self.current = next_unit(&mut self.units);
            } else {
                // FU-A: the indicator carries the unit's NRI, the FU header
                // its type and whether this is its first or last piece.
                let body = &unit[1..];
                let room = max_payload - 2;
                let start = self.fragment;
                let end = (start + room).min(body.len());
                let first = start == 0;
                let last = end == body.len();
                header[HEADER_LEN] = nal::nri(unit[0]) | nal::FU_A;
                header[HEADER_LEN + 1] =
                    (u8::from(first) << 7) | (u8::from(last) << 6) | nal::unit_type(unit[0]);
                header_len = HEADER_LEN + 2;
                payload = &body[start..end];
                if last {
                    self.fragment = 0;
                    self.current = next_unit(&mut self.units);
                } else {
                    self.fragment = end;
                }
            }
        }
        let marker = self.current.is_none() && !self.sets_first;
        let p = &mut *self.packetizer;
        p.sender
            .header(&mut header, marker, p.payload_type, self.timestamp);
        Some(OutgoingPacket::new(header, header_len, payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn au(units: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for u in units {
            out.extend_from_slice(&[0, 0, 0, 1]);
            out.extend_from_slice(u);
        }
        out
    }

    #[test]
    fn small_units_whole_parameter_sets_together_the_last_marked() {
        let data = au(&[
            &[0x09, 0xf0],
            &[0x67, 1, 2, 3],
            &[0x68, 4],
            &[0x65, 9, 9, 9],
        ]);
        let a = AccessUnit::parse(&data).unwrap();
        let mut p = Packetizer::new(7, 100, 1400).unwrap();
        let packets: Vec<_> = p.packetize(&a, 3000).collect();
        assert_eq!(packets.len(), 2);
        // STAP-A: NRI 3 of the SPS, type 24, then each unit's size and bytes.
        assert_eq!(
            &packets[0].header()[HEADER_LEN..],
            &[0x78, 0, 4, 0x67, 1, 2, 3, 0, 2, 0x68, 4]
        );
        assert!(!packets[0].marker());
        assert_eq!(packets[1].payload, &[0x65, 9, 9, 9]);
        assert!(packets[1].marker());
        assert_eq!((packets[0].sequence(), packets[1].sequence()), (100, 101));
        assert_eq!(
            p.parameter_sets(),
            Some((&[0x67, 1, 2, 3][..], &[0x68, 4][..]))
        );
    }

    #[test]
    fn an_idr_without_parameter_sets_gets_the_latest() {
        let mut p = Packetizer::new(7, 0, 1400).unwrap();
        let first = au(&[&[0x67, 1], &[0x68, 2], &[0x65, 1]]);
        assert_eq!(
            p.packetize(&AccessUnit::parse(&first).unwrap(), 0).count(),
            2
        );
        let later = au(&[&[0x65, 5, 5]]);
        let packets: Vec<_> = p
            .packetize(&AccessUnit::parse(&later).unwrap(), 3000)
            .collect();
        assert_eq!(
            &packets[0].header()[HEADER_LEN..],
            &[0x78, 0, 2, 0x67, 1, 0, 2, 0x68, 2]
        );
        assert_eq!(packets[1].payload, &[0x65, 5, 5]);
        // A P picture goes alone.
        let p_frame = au(&[&[0x41, 7]]);
        assert_eq!(
            p.packetize(&AccessUnit::parse(&p_frame).unwrap(), 6000)
                .count(),
            1
        );
    }

    #[test]
    fn a_large_unit_in_fu_a_fragments() {
        let mut big = Vec::from([0x65u8]);
        big.extend((0..3000u32).map(|i| (i % 251) as u8 + 1));
        let data = au(&[&big]);
        let mtu = MIN_MTU;
        let mut p = Packetizer::new(7, 0, mtu).unwrap();
        let packets: Vec<_> = p.packetize(&AccessUnit::parse(&data).unwrap(), 0).collect();
        assert!(packets.len() > 2);
        let mut body = Vec::new();
        for (i, pk) in packets.iter().enumerate() {
            assert!(pk.len() <= mtu);
            let h = &pk.header()[HEADER_LEN..];
            assert_eq!(h[0], 0x60 | 28);
            assert_eq!(h[1] & 0x1f, 5);
            assert_eq!(h[1] & 0x80 != 0, i == 0);
            assert_eq!(h[1] & 0x40 != 0, i == packets.len() - 1);
            assert_eq!(pk.marker(), i == packets.len() - 1);
            body.extend_from_slice(pk.payload);
        }
        assert_eq!(body, &big[1..]);
    }
}
