//! One packetizer for the three audio payloads: Opus (RFC 7587) and PCMU
//! (RFC 3551) put a frame after the RTP header as it is; AAC-hbr (RFC 3640)
//! puts an AU header before each access unit, and splits one larger than
//! the MTU into fragments that each repeat it (3.2.3).
//!
//! No allocation: a packet is its headers held inline and a slice of the
//! encoded frame.

use alloc::format;
use alloc::string::String;

use camstream_rtp::rtp::{self, HEADER_LEN, MtuError, OutgoingPacket};

use crate::aac;
use crate::opus;

/// RFC 3551's static payload type of PCMU.
pub const PAYLOAD_TYPE_PCMU: u8 = 0;
/// The dynamic payload types camstream gives AAC and Opus in its SDP
/// (H.264 has 96).
pub const PAYLOAD_TYPE_AAC: u8 = 97;
pub const PAYLOAD_TYPE_OPUS: u8 = 98;
/// The RTP header and AAC-hbr's AU-headers-length and one AU header.
pub const MAX_HEADER_LEN: usize = HEADER_LEN + 4;
/// Smallest MTU: 20 ms of PCMU (160 bytes) and an Opus packet of up to
/// 128 kbit/s at 20 ms (320 bytes) whole, as every path carries.
pub const MIN_MTU: usize = HEADER_LEN + 320;
pub use camstream_rtp::rtp::MAX_MTU;

/// An audio payload format and what its SDP needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// AAC (an AudioSpecificConfig's) in AAC-hbr mode.
    Aac(aac::Config),
    Opus,
    /// G.711 µ-law at 8 kHz, mono.
    Pcmu,
}

impl Format {
    /// Its RTP timestamps' rate.
    pub fn clock_rate(&self) -> u32 {
        match self {
            Format::Aac(c) => c.rate(),
            Format::Opus => opus::CLOCK_RATE,
            Format::Pcmu => crate::decimate::OUTPUT_RATE,
        }
    }

    pub fn payload_type(&self) -> u8 {
        match self {
            Format::Aac(_) => PAYLOAD_TYPE_AAC,
            Format::Opus => PAYLOAD_TYPE_OPUS,
            Format::Pcmu => PAYLOAD_TYPE_PCMU,
        }
    }

    /// What /metrics and the status page call it.
    pub fn name(&self) -> &'static str {
        match self {
            Format::Aac(_) => "aac",
            Format::Opus => "opus",
            Format::Pcmu => "pcmu",
        }
    }

    /// `a=rtpmap` value.
    pub fn rtpmap(&self) -> String {
        let pt = self.payload_type();
        match self {
            Format::Aac(c) => aac::rtpmap(pt, c),
            Format::Opus => opus::rtpmap(pt),
            Format::Pcmu => format!("{pt} PCMU/8000"),
        }
    }

    /// `a=fmtp` value, where the format has one.
    pub fn fmtp(&self) -> Option<String> {
        let pt = self.payload_type();
        match self {
            Format::Aac(c) => Some(aac::fmtp(pt, c)),
            Format::Opus => Some(opus::fmtp(pt)),
            Format::Pcmu => None,
        }
    }
}

/// A frame the format cannot send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketizeError {
    Empty,
    /// An Opus or PCMU frame longer than the MTU leaves room for (neither
    /// is split), or an access unit past AAC-hbr's 13-bit size.
    TooLarge(usize),
}

impl core::fmt::Display for PacketizeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PacketizeError::Empty => f.write_str("empty audio frame"),
            PacketizeError::TooLarge(n) => write!(f, "audio frame of {n} bytes does not fit"),
        }
    }
}

impl core::error::Error for PacketizeError {}

/// Packetizer state for one audio RTP stream.
#[derive(Debug, Clone)]
pub struct Packetizer {
    sender: rtp::Sender,
    format: Format,
}

impl Packetizer {
    /// `mtu` counts the RTP header and payload. SSRC and initial sequence
    /// should be random (RFC 3550 5.1).
    pub fn new(
        format: Format,
        ssrc: u32,
        initial_sequence: u16,
        mtu: usize,
    ) -> Result<Self, MtuError> {
        Ok(Packetizer {
            sender: rtp::Sender::new(ssrc, initial_sequence, mtu, MIN_MTU)?,
            format,
        })
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn ssrc(&self) -> u32 {
        self.sender.ssrc()
    }

    /// Sequence number the next packet will carry.
    pub fn next_sequence(&self) -> u16 {
        self.sender.next_sequence()
    }

    /// The packets of one encoded frame (an Opus packet, an AAC access
    /// unit, PCMU bytes) whose first sample is at `timestamp`.
    pub fn packetize<'a>(
        &'a mut self,
        frame: &'a [u8],
        timestamp: u32,
    ) -> Result<Packets<'a>, PacketizeError> {
        if frame.is_empty() {
            return Err(PacketizeError::Empty);
        }
        let room = self.sender.mtu() - HEADER_LEN;
        match self.format {
            Format::Aac(_) if frame.len() > aac::MAX_AU => {
                Err(PacketizeError::TooLarge(frame.len()))
            }
            Format::Opus | Format::Pcmu if frame.len() > room => {
                Err(PacketizeError::TooLarge(frame.len()))
            }
            _ => Ok(Packets {
                packetizer: self,
                frame,
                at: 0,
                timestamp,
            }),
        }
    }
}

/// The packets of one frame, in order.
pub struct Packets<'a> {
    packetizer: &'a mut Packetizer,
    frame: &'a [u8],
    at: usize,
    timestamp: u32,
}

impl<'a> Iterator for Packets<'a> {
    type Item = OutgoingPacket<'a, MAX_HEADER_LEN>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at == self.frame.len() {
            return None;
        }
        let p = &mut *self.packetizer;
        let pt = p.format.payload_type();
        let mut header = [0u8; MAX_HEADER_LEN];
        let (len, payload) = match p.format {
            Format::Aac(_) => {
                let room = p.sender.mtu() - MAX_HEADER_LEN;
                let end = self.frame.len().min(self.at + room);
                // RFC 3640 3.3.6: AU-headers-length 16 bits, then the
                // unit's whole size (not the fragment's) and index 0.
                header[HEADER_LEN..].copy_from_slice(&[
                    0,
                    16,
                    (self.frame.len() >> 5) as u8,
                    (self.frame.len() << 3) as u8,
                ]);
                (MAX_HEADER_LEN, &self.frame[self.at..end])
            }
            Format::Opus | Format::Pcmu => (HEADER_LEN, self.frame),
        };
        self.at += payload.len();
        // AAC marks the packet that ends a unit (3.2.3); Opus and PCMU
        // have no silences to mark without DTX.
        let marker = matches!(p.format, Format::Aac(_)) && self.at == self.frame.len();
        p.sender.header(&mut header, marker, pt, self.timestamp);
        Some(OutgoingPacket::new(header, len, payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdp_of_each_format() {
        let aac = Format::Aac(aac::Config::lc(48_000, 1).unwrap());
        assert_eq!(aac.rtpmap(), "97 mpeg4-generic/48000/1");
        assert_eq!(aac.clock_rate(), 48_000);
        assert_eq!(Format::Opus.rtpmap(), "98 opus/48000/2");
        assert_eq!(Format::Pcmu.rtpmap(), "0 PCMU/8000");
        assert_eq!(Format::Pcmu.fmtp(), None);
        assert_eq!(Format::Pcmu.clock_rate(), 8_000);
    }

    #[test]
    fn opus_and_pcmu_go_whole() {
        let mut p = Packetizer::new(Format::Pcmu, 7, 65_535, 1400).unwrap();
        let frame = [0xffu8; 160];
        let packets: alloc::vec::Vec<_> = p.packetize(&frame, 1234).unwrap().collect();
        assert_eq!(packets.len(), 1);
        assert_eq!(packets[0].header()[..2], [0x80, 0]);
        assert_eq!(packets[0].sequence(), 65_535);
        assert!(!packets[0].marker());
        assert_eq!(p.next_sequence(), 0);
        let big = [0u8; 1400];
        assert_eq!(
            p.packetize(&big, 0).err(),
            Some(PacketizeError::TooLarge(1400))
        );
        assert_eq!(p.packetize(&[], 0).err(), Some(PacketizeError::Empty));
        assert!(Packetizer::new(Format::Opus, 7, 0, MIN_MTU - 1).is_err());
    }
}
