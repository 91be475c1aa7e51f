//! RFC 2435 depacketizer: rebuilds a decodable JPEG (Appendix A tables for
//! Q < 128, Appendix B headers) from RTP packets. The output buffer is kept
//! between frames, so a warmed-up depacketizer allocates nothing.

use alloc::vec::Vec;

use crate::jfif::write_headers;
use crate::packetize::{JPEG_HEADER_LEN, QUANT_HEADER_LEN, RESTART_HEADER_LEN};
use crate::rtp;
use crate::tables::scaled_quant_tables;

/// Why a packet was not used. Any error also drops the frame being assembled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepacketizeError {
    /// Not an RTP packet.
    Rtp(rtp::PacketError),
    /// The RTP/JPEG headers are cut short or inconsistent.
    Header,
    /// A type other than 0, 1, 64 or 65.
    UnsupportedType(u8),
    /// Q 0 or 100..=127 (reserved), or a quantization table header whose
    /// length does not match its precision.
    BadQuantization,
    /// Q 128..=254 with no tables yet, or Q 255 without tables.
    MissingTables,
    /// Width or height 0 and no `a=x-dimensions` given.
    MissingDimensions,
    /// A packet is missing or out of order; the frame is dropped.
    Discontinuity,
}

impl core::fmt::Display for DepacketizeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DepacketizeError::Rtp(e) => write!(f, "{e}"),
            DepacketizeError::Header => f.write_str("RTP/JPEG header truncated or inconsistent"),
            DepacketizeError::UnsupportedType(t) => write!(f, "RTP/JPEG type {t} not supported"),
            DepacketizeError::BadQuantization => {
                f.write_str("bad RTP/JPEG Q value or table header")
            }
            DepacketizeError::MissingTables => f.write_str("RTP/JPEG quantization tables missing"),
            DepacketizeError::MissingDimensions => {
                f.write_str("RTP/JPEG size 0 and no a=x-dimensions")
            }
            DepacketizeError::Discontinuity => {
                f.write_str("packet lost or reordered; frame dropped")
            }
        }
    }
}

impl core::error::Error for DepacketizeError {}

/// A complete frame, valid until the next call to [`Depacketizer::push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DepacketizedFrame<'a> {
    pub timestamp: u32,
    pub width: u16,
    pub height: u16,
    /// A JPEG file from SOI to EOI.
    pub jpeg: &'a [u8],
}

#[derive(Debug, Clone, Copy)]
struct Assembling {
    timestamp: u32,
    next_offset: usize,
    next_sequence: u16,
    width: u16,
    height: u16,
}

/// Tables received with a Q of 128..=254, kept for frames that omit them.
#[derive(Clone, Copy)]
struct CachedTables {
    precision: u8,
    data: [u8; 256],
}

/// What an RTP/JPEG payload's headers say (RFC 2435 3.1.1 and, for types
/// 64-127, 3.1.7), and what follows them.
pub(crate) struct Headers<'a> {
    pub offset: usize,
    pub kind: u8,
    pub q: u8,
    /// Width and height in blocks of 8 (0: larger than 2040).
    pub blocks: (u8, u8),
    pub restart_interval: u16,
    pub rest: &'a [u8],
}

/// The main JPEG header and the restart header of payload `p`.
pub(crate) fn headers(p: &[u8]) -> Result<Headers<'_>, DepacketizeError> {
    let h = p.get(..JPEG_HEADER_LEN).ok_or(DepacketizeError::Header)?;
    let kind = h[4];
    if kind & 0x3f > 1 || kind >= 128 {
        return Err(DepacketizeError::UnsupportedType(kind));
    }
    let mut rest = &p[JPEG_HEADER_LEN..];
    let mut restart_interval = 0;
    if kind >= 64 {
        let r = rest
            .get(..RESTART_HEADER_LEN)
            .ok_or(DepacketizeError::Header)?;
        restart_interval = u16::from_be_bytes([r[0], r[1]]);
        rest = &rest[RESTART_HEADER_LEN..];
    }
    Ok(Headers {
        offset: usize::from(h[1]) << 16 | usize::from(h[2]) << 8 | usize::from(h[3]),
        kind,
        q: h[5],
        blocks: (h[6], h[7]),
        restart_interval,
        rest,
    })
}

/// The quantization header at the start of `rest` (a frame's first
/// payload, Q 128-255): the tables' precision bits, the tables (none: the
/// sender's earlier ones for this Q), and what follows them.
pub(crate) fn quantization(rest: &[u8]) -> Result<(u8, &[u8], &[u8]), DepacketizeError> {
    let h = rest
        .get(..QUANT_HEADER_LEN)
        .ok_or(DepacketizeError::Header)?;
    let precision = h[1];
    let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let want = 64 * (2 + usize::from(precision & 1) + usize::from(precision >> 1 & 1));
    if len != 0 && len != want {
        return Err(DepacketizeError::BadQuantization);
    }
    let rest = &rest[QUANT_HEADER_LEN..];
    let tables = rest.get(..len).ok_or(DepacketizeError::Header)?;
    Ok((precision, tables, &rest[len..]))
}

/// Reassembles frames of one RTP/JPEG stream.
pub struct Depacketizer {
    buf: Vec<u8>,
    assembling: Option<Assembling>,
    x_dimensions: Option<(u16, u16)>,
    cache: Vec<Option<CachedTables>>,
    frames_dropped: u64,
}

impl Default for Depacketizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Depacketizer {
    pub fn new() -> Self {
        Depacketizer {
            buf: Vec::new(),
            assembling: None,
            x_dimensions: None,
            cache: alloc::vec![None; 127],
            frames_dropped: 0,
        }
    }

    /// The size from SDP `a=x-dimensions`, used when the header says 0.
    pub fn set_x_dimensions(&mut self, width: u16, height: u16) {
        self.x_dimensions = Some((width, height));
    }

    /// Frames started but not completed (lost or reordered packets).
    pub fn frames_dropped(&self) -> u64 {
        self.frames_dropped
    }

    fn drop_frame(&mut self) {
        if self.assembling.take().is_some() {
            self.frames_dropped += 1;
        }
    }

    /// Feeds one RTP packet; returns a frame when its last packet arrives.
    pub fn push(
        &mut self,
        packet: &[u8],
    ) -> Result<Option<DepacketizedFrame<'_>>, DepacketizeError> {
        match self.push_packet(packet) {
            Ok(Some(a)) => Ok(Some(DepacketizedFrame {
                timestamp: a.timestamp,
                width: a.width,
                height: a.height,
                jpeg: &self.buf,
            })),
            Ok(None) => Ok(None),
            Err(e) => {
                self.drop_frame();
                Err(e)
            }
        }
    }

    /// Returns the finished frame's state when `packet` completes it.
    fn push_packet(&mut self, packet: &[u8]) -> Result<Option<Assembling>, DepacketizeError> {
        let packet = rtp::IncomingPacket::parse(packet).map_err(DepacketizeError::Rtp)?;
        let Headers {
            offset,
            kind,
            q,
            blocks,
            restart_interval,
            mut rest,
        } = headers(packet.payload)?;
        let h = packet.header;

        if offset == 0 {
            // A new frame; one still being assembled lost its end.
            self.drop_frame();
            let width = u16::from(blocks.0) * 8;
            let height = u16::from(blocks.1) * 8;
            let (width, height) = match (width, height, self.x_dimensions) {
                (0, _, Some(d)) | (_, 0, Some(d)) => d,
                (0, _, None) | (_, 0, None) => return Err(DepacketizeError::MissingDimensions),
                // The exact size of a frame the header rounded up to blocks of 8.
                (w, h, Some(d)) if d.0.div_ceil(8) * 8 == w && d.1.div_ceil(8) * 8 == h => d,
                (w, h, _) => (w, h),
            };
            let mut tables = CachedTables {
                precision: 0,
                data: [0; 256],
            };
            if q >= 128 {
                let (precision, data, after) = quantization(rest)?;
                rest = after;
                if data.is_empty() {
                    if q == 255 {
                        return Err(DepacketizeError::MissingTables);
                    }
                    tables =
                        self.cache[usize::from(q - 128)].ok_or(DepacketizeError::MissingTables)?;
                } else {
                    tables.precision = precision & 3;
                    tables.data[..data.len()].copy_from_slice(data);
                    if q < 255 {
                        self.cache[usize::from(q - 128)] = Some(tables);
                    }
                }
            } else if (1..100).contains(&q) {
                let [l, c] = scaled_quant_tables(q);
                tables.data[..64].copy_from_slice(&l);
                tables.data[64..128].copy_from_slice(&c);
            } else {
                return Err(DepacketizeError::BadQuantization);
            }
            self.buf.clear();
            let luma = 64 << (tables.precision & 1);
            let chroma = 64 << (tables.precision >> 1 & 1);
            write_headers(
                &mut self.buf,
                kind & 1,
                width,
                height,
                restart_interval,
                [&tables.data[..luma], &tables.data[luma..luma + chroma]],
            );
            self.assembling = Some(Assembling {
                timestamp: h.timestamp,
                next_offset: 0,
                next_sequence: h.sequence,
                width,
                height,
            });
        }

        let Some(a) = self.assembling.as_mut() else {
            // The middle of a frame whose start we missed.
            return Err(DepacketizeError::Discontinuity);
        };
        if a.timestamp != h.timestamp || a.next_offset != offset || a.next_sequence != h.sequence {
            return Err(DepacketizeError::Discontinuity);
        }
        let data = rest;
        a.next_offset += data.len();
        a.next_sequence = h.sequence.wrapping_add(1);
        self.buf.extend_from_slice(data);
        if !h.marker {
            return Ok(None);
        }
        if !self.buf.ends_with(&[0xff, 0xd9]) {
            self.buf.extend_from_slice(&[0xff, 0xd9]);
        }
        Ok(self.assembling.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jpeg;
    use crate::packetize::Packetizer;

    fn packets_of(frame: &[u8], mtu: usize, seq: u16) -> Vec<Vec<u8>> {
        let j = jpeg::parse(frame).unwrap();
        let mut p = Packetizer::new(1, seq, mtu).unwrap();
        p.packetize(&j, 9000)
            .map(|pkt| {
                let mut v = alloc::vec![0; pkt.len()];
                pkt.write_to(&mut v);
                v
            })
            .collect()
    }

    #[test]
    fn rebuilt_frame_parses_to_the_same_scan_and_tables() {
        let scan: Vec<u8> = (0..5000u32)
            .map(|i| (i % 251) as u8)
            .filter(|&b| b != 0xff)
            .collect();
        let f = jpeg::tests::tiny_frame(0x22, &[0xff, 0xdd, 0, 4, 0, 2], &scan);
        let mut d = Depacketizer::new();
        let packets = packets_of(&f, 600, 65530);
        let mut out = None;
        for (i, p) in packets.iter().enumerate() {
            let r = d.push(p).unwrap();
            assert_eq!(r.is_some(), i == packets.len() - 1);
            if let Some(fr) = r {
                out = Some(fr.jpeg.to_vec());
            }
        }
        let out = out.unwrap();
        let a = jpeg::parse(&f).unwrap();
        let b = jpeg::parse(&out).unwrap();
        assert_eq!(a.scan, b.scan);
        assert_eq!(a.quant_tables, b.quant_tables);
        assert_eq!(
            (a.width, a.height, a.restart_interval, a.subsampling),
            (b.width, b.height, b.restart_interval, b.subsampling)
        );
    }

    #[test]
    fn loss_drops_the_frame_and_the_next_one_recovers() {
        let scan = [0x11u8; 3000];
        let f = jpeg::tests::tiny_frame(0x21, &[], &scan);
        let mut d = Depacketizer::new();
        let packets = packets_of(&f, 1000, 0);
        assert!(packets.len() >= 3);
        d.push(&packets[0]).unwrap();
        assert_eq!(d.push(&packets[2]), Err(DepacketizeError::Discontinuity));
        assert_eq!(d.frames_dropped(), 1);
        // The next frame (here: the same packets again) comes through.
        let mut got = 0;
        for p in &packets {
            if d.push(p).unwrap().is_some() {
                got += 1;
            }
        }
        assert_eq!(got, 1);
    }

    #[test]
    fn q_below_128_uses_appendix_a_tables() {
        // Hand-built packet: type 1, Q 50, 16x16, a few scan bytes.
        let mut pkt = alloc::vec![0x80, 0x80 | 26, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1];
        pkt.extend_from_slice(&[0, 0, 0, 0, 1, 50, 2, 2, 0x12, 0x34]);
        let mut d = Depacketizer::new();
        let f = d.push(&pkt).unwrap().unwrap();
        let j = jpeg::parse(f.jpeg).unwrap();
        assert_eq!(j.quant_tables[0].data, &crate::tables::LUMA_QUANT[..]);
        assert_eq!(j.quant_tables[1].data, &crate::tables::CHROMA_QUANT[..]);
        assert_eq!((f.width, f.height), (16, 16));
        assert_eq!(j.scan, &[0x12, 0x34]);
    }

    #[test]
    fn x_dimensions_fill_in_zero_sizes() {
        let mut pkt = alloc::vec![0x80, 0x80 | 26, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1];
        pkt.extend_from_slice(&[0, 0, 0, 0, 1, 50, 0, 0, 0x12]);
        let mut d = Depacketizer::new();
        assert_eq!(d.push(&pkt), Err(DepacketizeError::MissingDimensions));
        d.set_x_dimensions(3840, 2160);
        let f = d.push(&pkt).unwrap().unwrap();
        assert_eq!((f.width, f.height), (3840, 2160));
    }
}
