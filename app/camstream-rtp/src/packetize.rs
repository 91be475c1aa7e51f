//! RFC 2435 packetizer: splits a parsed frame into RTP packets without
//! copying or allocating. Each packet is a small header (RTP, JPEG, restart,
//! and in the first packet the quantization tables) plus a slice of the scan.

use crate::jpeg::Jpeg;
use crate::rtp::{self, PAYLOAD_TYPE_JPEG};

/// The RTP/JPEG main header (RFC 2435 3.1).
pub const JPEG_HEADER_LEN: usize = 8;
/// The restart marker header (RFC 2435 3.1.7), types 64..127.
pub const RESTART_HEADER_LEN: usize = 4;
/// Quantization table header without the tables (RFC 2435 3.1.8).
pub const QUANT_HEADER_LEN: usize = 4;
/// RTP + JPEG + restart + quantization header with two 16-bit tables.
pub const MAX_HEADER_LEN: usize =
    rtp::HEADER_LEN + JPEG_HEADER_LEN + RESTART_HEADER_LEN + QUANT_HEADER_LEN + 256;
/// Smallest MTU (RTP header + payload) that leaves room for scan data in
/// every packet, the first included.
pub const MIN_MTU: usize = MAX_HEADER_LEN + 64;
pub use crate::rtp::{MAX_MTU, MtuError};

/// Q value meaning "tables in every frame" (RFC 2435 4.2).
pub const Q_DYNAMIC: u8 = 255;

/// Largest width or height the 8-bit header fields can express (255 * 8).
pub const MAX_HEADER_DIMENSION: u16 = 2040;

/// The header field for a dimension: blocks of 8 pixels, rounded up (the
/// receiver shows the encoder's padding), or 0 when it does not fit and the
/// SDP attribute `a=x-dimensions` must carry the size.
pub fn header_dimension(pixels: u16) -> u8 {
    let blocks = pixels.div_ceil(8);
    if blocks > 255 { 0 } else { blocks as u8 }
}

/// True when a receiver needs `a=x-dimensions` to learn the exact size.
pub fn needs_x_dimensions(width: u16, height: u16) -> bool {
    width % 8 != 0
        || height % 8 != 0
        || width > MAX_HEADER_DIMENSION
        || height > MAX_HEADER_DIMENSION
}

/// Packetizer state for one RTP stream: SSRC, next sequence number, MTU.
#[derive(Debug, Clone)]
pub struct Packetizer {
    sender: rtp::Sender,
}

impl Packetizer {
    /// `mtu` counts the RTP header and payload (not UDP/IP or TCP framing).
    /// SSRC and initial sequence should be random (RFC 3550 5.1).
    pub fn new(ssrc: u32, initial_sequence: u16, mtu: usize) -> Result<Self, MtuError> {
        Ok(Packetizer {
            sender: rtp::Sender::new(ssrc, initial_sequence, mtu, MIN_MTU)?,
        })
    }

    pub fn ssrc(&self) -> u32 {
        self.sender.ssrc()
    }

    pub fn mtu(&self) -> usize {
        self.sender.mtu()
    }

    /// Sequence number the next packet will carry.
    pub fn next_sequence(&self) -> u16 {
        self.sender.next_sequence()
    }

    /// The packets of one frame, all with `timestamp` (90 kHz), the last
    /// with the marker bit. Sequence numbers advance as packets are taken.
    pub fn packetize<'p, 'j>(&'p mut self, jpeg: &Jpeg<'j>, timestamp: u32) -> Packets<'p, 'j> {
        Packets {
            packetizer: self,
            jpeg: *jpeg,
            timestamp,
            offset: 0,
            done: false,
        }
    }
}

/// Iterator over the packets of one frame.
#[derive(Debug)]
pub struct Packets<'p, 'j> {
    packetizer: &'p mut Packetizer,
    jpeg: Jpeg<'j>,
    timestamp: u32,
    offset: usize,
    done: bool,
}

/// One RTP/JPEG packet (RTP, JPEG, restart and quantization headers).
pub type OutgoingPacket<'a> = rtp::OutgoingPacket<'a, MAX_HEADER_LEN>;

impl<'j> Iterator for Packets<'_, 'j> {
    type Item = OutgoingPacket<'j>;

    fn next(&mut self) -> Option<OutgoingPacket<'j>> {
        if self.done {
            return None;
        }
        let j = &self.jpeg;
        let mut header = [0u8; MAX_HEADER_LEN];
        let mut h = rtp::HEADER_LEN;

        // Main JPEG header: type-specific 0 (progressive scan of a whole
        // frame), 24-bit fragment offset, type, Q, width/8, height/8.
        let offset = self.offset as u32;
        header[h..h + 4].copy_from_slice(&offset.to_be_bytes());
        header[h] = 0;
        header[h + 4] = j.rtp_type();
        header[h + 5] = Q_DYNAMIC;
        header[h + 6] = header_dimension(j.width);
        header[h + 7] = header_dimension(j.height);
        h += JPEG_HEADER_LEN;

        if j.restart_interval > 0 {
            // Packets do not start at restart intervals: F = L = 1 and a
            // count of 0x3FFF tell the receiver to wait for the whole frame.
            header[h..h + 2].copy_from_slice(&j.restart_interval.to_be_bytes());
            header[h + 2..h + 4].copy_from_slice(&0xffffu16.to_be_bytes());
            h += RESTART_HEADER_LEN;
        }

        if self.offset == 0 {
            let [t0, t1] = j.quant_tables;
            header[h] = 0; // MBZ
            header[h + 1] = u8::from(t0.is_16bit()) | (u8::from(t1.is_16bit()) << 1);
            let len = t0.data.len() + t1.data.len();
            header[h + 2..h + 4].copy_from_slice(&(len as u16).to_be_bytes());
            h += QUANT_HEADER_LEN;
            header[h..h + t0.data.len()].copy_from_slice(t0.data);
            h += t0.data.len();
            header[h..h + t1.data.len()].copy_from_slice(t1.data);
            h += t1.data.len();
        }

        let room = self.packetizer.mtu() - h;
        let end = (self.offset + room).min(j.scan.len());
        let payload = &j.scan[self.offset..end];
        self.offset = end;
        let marker = end == j.scan.len();
        self.done = marker;

        self.packetizer
            .sender
            .header(&mut header, marker, PAYLOAD_TYPE_JPEG, self.timestamp);

        Some(OutgoingPacket::new(header, h, payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jpeg::{QuantTable, Subsampling};

    fn frame(scan: &[u8], dri: u16, sixteen: bool) -> Jpeg<'_> {
        static T8: [u8; 64] = [7; 64];
        static T16: [u8; 128] = [9; 128];
        Jpeg {
            width: 3840,
            height: 2160,
            subsampling: Subsampling::Yuv420,
            restart_interval: dri,
            quant_tables: [
                QuantTable { data: &T8 },
                QuantTable {
                    data: if sixteen { &T16 } else { &T8 },
                },
            ],
            scan,
            len: 0,
        }
    }

    #[test]
    fn headers_as_rfc2435_lays_them_out() {
        let scan = [0xabu8; 3000];
        let mut p = Packetizer::new(0x1122_3344, 0xfffe, 1400).unwrap();
        let packets: alloc::vec::Vec<_> = p.packetize(&frame(&scan, 4, true), 1234).collect();
        assert_eq!(packets.len(), 3);
        let first = packets[0].header();
        assert_eq!(
            &first[..12],
            &[0x80, 26, 0xff, 0xfe, 0, 0, 4, 0xd2, 0x11, 0x22, 0x33, 0x44]
        );
        // Offset 0, type 1 + 64, Q 255, 3840x2160 does not fit: 0 x 0.
        assert_eq!(&first[12..20], &[0, 0, 0, 0, 65, 255, 0, 0]);
        // Restart interval 4, F = L = 1, count 0x3FFF.
        assert_eq!(&first[20..24], &[0, 4, 0xff, 0xff]);
        // Quantization header: table 1 is 16-bit, 64 + 128 bytes.
        assert_eq!(&first[24..28], &[0, 2, 0, 192]);
        assert_eq!(first.len(), 28 + 192);
        assert_eq!(packets[0].len(), 1400);
        // Later packets: no quantization header, offsets advance, marker last.
        let second = packets[1].header();
        assert_eq!(second.len(), 24);
        assert_eq!(&second[2..4], &[0xff, 0xff]);
        let off = 1400 - 28 - 192;
        assert_eq!(&second[13..16], &(off as u32).to_be_bytes()[1..]);
        assert_eq!(&packets[2].header()[2..4], &[0, 0]);
        assert!(!packets[0].marker() && !packets[1].marker() && packets[2].marker());
        let total: usize = packets.iter().map(|p| p.payload.len()).sum();
        assert_eq!(total, scan.len());
        assert_eq!(p.next_sequence(), 1);
    }

    #[test]
    fn dimensions() {
        assert_eq!(header_dimension(1920), 240);
        assert_eq!(header_dimension(2040), 255);
        assert_eq!(header_dimension(2041), 0);
        assert_eq!(header_dimension(1366), 171);
        assert!(!needs_x_dimensions(1920, 1080));
        assert!(needs_x_dimensions(3840, 2160));
        assert!(needs_x_dimensions(1366, 768));
    }

    #[test]
    fn mtu_bounds() {
        assert!(Packetizer::new(0, 0, MIN_MTU - 1).is_err());
        assert!(Packetizer::new(0, 0, MAX_MTU + 1).is_err());
        assert!(Packetizer::new(0, 0, 500).is_ok());
    }
}
