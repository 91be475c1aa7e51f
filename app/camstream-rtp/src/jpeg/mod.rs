//! A JPEG parser that finds what RFC 2435 carries (size, sampling, restart
//! interval, quantization tables, entropy-coded scan) and refuses, with a
//! reason, any frame a receiver could not rebuild bit-exactly from them.
//!
//! RFC 2435 transmits only the scan and the quantization tables; receivers
//! regenerate every other header with fixed choices: three components, luma
//! sampled 2x1 (type 0) or 2x2 (type 1) against chroma 1x1, one table for both
//! chroma components, the T.81 Annex K Huffman tables, one interleaved
//! baseline scan. Anything else would decode to garbage at the far end.

mod dc;
mod error;
mod huffman;
mod markers;

pub use dc::{DcError, dc_luma, dc_size};
pub use error::{JpegError, Remedy};
pub use markers::{dimensions, frame_len};

use huffman::{Slot, effective, parse_dht};
use markers::{APP14, DAC, DHT, DNL, DQT, DRI, EOI, SOS, Segments, be16, scan_end};

/// Chroma subsampling of a frame RFC 2435 can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Subsampling {
    /// Luma 2x1, chroma 1x1: RTP/JPEG type 0.
    Yuv422,
    /// Luma 2x2, chroma 1x1: RTP/JPEG type 1.
    Yuv420,
}

impl Subsampling {
    /// The RTP/JPEG type (without the restart-marker flag 64).
    pub fn rtp_type(self) -> u8 {
        match self {
            Subsampling::Yuv422 => 0,
            Subsampling::Yuv420 => 1,
        }
    }

    /// Luma sampling factors (h << 4 | v) as a SOF header writes them.
    pub fn luma_sampling(self) -> u8 {
        match self {
            Subsampling::Yuv422 => 0x21,
            Subsampling::Yuv420 => 0x22,
        }
    }
}

/// A quantization table as DQT stores it: 64 entries in zigzag order, each one
/// (8-bit precision) or two (16-bit, big-endian) bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantTable<'a> {
    pub data: &'a [u8],
}

impl QuantTable<'_> {
    /// True for 16-bit entries (DQT Pq = 1).
    pub fn is_16bit(&self) -> bool {
        self.data.len() == 128
    }
}

/// A frame RFC 2435 can carry, borrowing from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jpeg<'a> {
    pub width: u16,
    pub height: u16,
    pub subsampling: Subsampling,
    /// Restart interval in MCUs from DRI; 0 when the frame has none.
    pub restart_interval: u16,
    /// Luma table, then the table both chroma components share.
    pub quant_tables: [QuantTable<'a>; 2],
    /// Entropy-coded data from after the SOS header up to (not including) EOI.
    pub scan: &'a [u8],
    /// Length of the whole frame from SOI through EOI; bytes after it (padding
    /// some cameras append, or the next frame of a stream) are not part of it.
    pub len: usize,
}

impl Jpeg<'_> {
    /// The RTP/JPEG type field: 0 or 1, plus 64 when restart markers are used.
    pub fn rtp_type(&self) -> u8 {
        self.subsampling.rtp_type() + if self.restart_interval > 0 { 64 } else { 0 }
    }
}

/// Largest entropy-coded segment the 24-bit fragment offset can address.
pub const MAX_SCAN_LEN: usize = 1 << 24;

#[derive(Clone, Copy)]
struct Component {
    id: u8,
    sampling: u8,
    quant: u8,
}

/// Parses a frame and checks that RFC 2435 can carry it unchanged.
///
/// Bytes after EOI are ignored ([`Jpeg::len`] tells where the frame ended).
/// Runs in time linear in the entropy-coded data (one `memchr` pass to find
/// EOI) and allocates nothing.
pub fn parse(data: &[u8]) -> Result<Jpeg<'_>, JpegError> {
    let mut segs = Segments::new(data)?;
    let mut quant: [Option<&[u8]>; 4] = [None; 4];
    // [class][id]: class 0 = DC, 1 = AC.
    let mut huff = [[Slot::Undefined; 4]; 2];
    let mut restart_interval = 0u16;
    let mut frame: Option<(u16, u16, [Component; 3])> = None;
    let mut adobe_rgb = false;

    let sos = loop {
        let (marker, body) = segs.next_segment()?;
        match marker {
            EOI => return Err(JpegError::Truncated),
            0xc0 | 0xc1 => {
                if frame.is_some() {
                    return Err(JpegError::Malformed);
                }
                frame = Some(parse_sof(body)?);
            }
            0xc2 | 0xc6 | 0xca | 0xce => return Err(JpegError::Progressive),
            0xc3 | 0xc7 | 0xcb | 0xcf => return Err(JpegError::Lossless),
            0xc5 | 0xde | 0xdf => return Err(JpegError::Hierarchical),
            0xc9 | DAC => return Err(JpegError::Arithmetic),
            DHT => parse_dht(body, &mut huff)?,
            DQT => parse_dqt(body, &mut quant)?,
            DRI => {
                if body.len() != 2 {
                    return Err(JpegError::Malformed);
                }
                restart_interval = be16(body, 0);
            }
            DNL => return Err(JpegError::ZeroSize),
            APP14 => {
                // "Adobe" segment: the last byte is the colour transform; 0
                // means the three components are R, G, B.
                if body.len() >= 12 && &body[..5] == b"Adobe" && body[11] == 0 {
                    adobe_rgb = true;
                }
            }
            SOS => break body,
            _ => {} // APPn, COM and others carry nothing RTP/JPEG needs.
        }
    };

    let (width, height, comps) = frame.ok_or(JpegError::Malformed)?;
    if adobe_rgb || comps.iter().map(|c| c.id).eq(*b"RGB") {
        return Err(JpegError::Rgb);
    }
    let subsampling = match (comps[0].sampling, comps[1].sampling, comps[2].sampling) {
        (0x21, 0x11, 0x11) => Subsampling::Yuv422,
        (0x22, 0x11, 0x11) => Subsampling::Yuv420,
        (0x11, 0x11, 0x11) => return Err(JpegError::Subsampling444),
        _ => return Err(JpegError::UnsupportedSampling),
    };
    if comps[1].quant != comps[2].quant {
        return Err(JpegError::ChromaQuantTables);
    }
    let table = |i: u8| quant[usize::from(i)].ok_or(JpegError::MissingQuantTable);
    let quant_tables = [
        QuantTable {
            data: table(comps[0].quant)?,
        },
        QuantTable {
            data: table(comps[1].quant)?,
        },
    ];

    // SOS: one scan interleaving the three components in frame order, full
    // spectral range, no successive approximation.
    let ns = usize::from(*sos.first().ok_or(JpegError::Malformed)?);
    if sos.len() != 1 + 2 * ns + 3 {
        return Err(JpegError::Malformed);
    }
    if ns != 3 {
        return Err(JpegError::MultipleScans);
    }
    if sos[1 + 2 * ns..] != [0, 63, 0] {
        return Err(JpegError::Progressive);
    }
    for (i, comp) in comps.iter().enumerate() {
        if sos[1 + 2 * i] != comp.id {
            return Err(JpegError::MultipleScans);
        }
        let (dc, ac) = (sos[2 + 2 * i] >> 4, sos[2 + 2 * i] & 0x0f);
        if dc > 3 || ac > 3 {
            return Err(JpegError::Malformed);
        }
        let want = if i == 0 { Slot::Luma } else { Slot::Chroma };
        if effective(huff[0][usize::from(dc)], dc) != want
            || effective(huff[1][usize::from(ac)], ac) != want
        {
            return Err(JpegError::NonStandardHuffman);
        }
    }

    let scan_start = segs.pos;
    let (scan_len, end_marker) = scan_end(&data[scan_start..])?;
    if end_marker != EOI {
        return Err(if end_marker == SOS || end_marker == DHT {
            JpegError::MultipleScans
        } else if end_marker == DNL {
            JpegError::ZeroSize
        } else {
            JpegError::Malformed
        });
    }
    if scan_len >= MAX_SCAN_LEN {
        return Err(JpegError::TooLarge);
    }
    Ok(Jpeg {
        width,
        height,
        subsampling,
        restart_interval,
        quant_tables,
        scan: &data[scan_start..scan_start + scan_len],
        len: scan_start + scan_len + 2,
    })
}

fn parse_sof(body: &[u8]) -> Result<(u16, u16, [Component; 3]), JpegError> {
    if body.len() < 6 {
        return Err(JpegError::Malformed);
    }
    if body[0] != 8 {
        return Err(JpegError::Precision);
    }
    let (height, width, nf) = (be16(body, 1), be16(body, 3), usize::from(body[5]));
    if body.len() != 6 + 3 * nf {
        return Err(JpegError::Malformed);
    }
    match nf {
        3 => {}
        1 => return Err(JpegError::Grayscale),
        _ => return Err(JpegError::ComponentCount),
    }
    if width == 0 || height == 0 {
        return Err(JpegError::ZeroSize);
    }
    let comp = |i: usize| Component {
        id: body[6 + 3 * i],
        sampling: body[7 + 3 * i],
        quant: body[8 + 3 * i],
    };
    let comps = [comp(0), comp(1), comp(2)];
    if comps.iter().any(|c| c.quant > 3)
        || comps[0].id == comps[1].id
        || comps[0].id == comps[2].id
        || comps[1].id == comps[2].id
    {
        return Err(JpegError::Malformed);
    }
    Ok((width, height, comps))
}

fn parse_dqt<'a>(mut body: &'a [u8], quant: &mut [Option<&'a [u8]>; 4]) -> Result<(), JpegError> {
    while !body.is_empty() {
        let (precision, id) = (body[0] >> 4, body[0] & 0x0f);
        let len = match precision {
            0 => 64,
            1 => 128,
            _ => return Err(JpegError::Malformed),
        };
        if id > 3 || body.len() < 1 + len {
            return Err(JpegError::Malformed);
        }
        quant[usize::from(id)] = Some(&body[1..1 + len]);
        body = &body[1 + len..];
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::markers::SOI;
    use super::*;
    use alloc::vec::Vec;

    /// A minimal hand-built frame: 16x8 4:2:2, tables by index, no DHT.
    pub(crate) fn tiny_frame(sampling: u8, extra: &[u8], scan: &[u8]) -> Vec<u8> {
        let mut f = alloc::vec![0xff, SOI];
        f.extend_from_slice(extra);
        // DQT: two 8-bit tables.
        f.extend_from_slice(&[0xff, DQT, 0, 2 + 65 * 2, 0x00]);
        f.extend_from_slice(&[1; 64]);
        f.push(0x01);
        f.extend_from_slice(&[2; 64]);
        f.extend_from_slice(&[0xff, 0xc0, 0, 17, 8, 0, 8, 0, 16, 3]);
        f.extend_from_slice(&[1, sampling, 0, 2, 0x11, 1, 3, 0x11, 1]);
        f.extend_from_slice(&[0xff, SOS, 0, 12, 3, 1, 0x00, 2, 0x11, 3, 0x11, 0, 63, 0]);
        f.extend_from_slice(scan);
        f.extend_from_slice(&[0xff, EOI]);
        f
    }

    #[test]
    fn parses_minimal_frame_without_dht() {
        let f = tiny_frame(0x21, &[], &[0x12, 0xff, 0x00, 0x34, 0xff, 0xd3, 0x56]);
        let j = parse(&f).unwrap();
        assert_eq!((j.width, j.height), (16, 8));
        assert_eq!(j.subsampling, Subsampling::Yuv422);
        assert_eq!(j.rtp_type(), 0);
        assert_eq!(j.scan, &[0x12, 0xff, 0x00, 0x34, 0xff, 0xd3, 0x56]);
        assert_eq!(j.len, f.len());
        assert_eq!(j.quant_tables[0].data, &[1; 64][..]);
        assert_eq!(j.quant_tables[1].data, &[2; 64][..]);
        assert_eq!(frame_len(&f), Ok(f.len()));
    }

    #[test]
    fn trailing_bytes_after_eoi_are_not_part_of_the_frame() {
        let mut f = tiny_frame(0x22, &[], &[1, 2, 3]);
        let n = f.len();
        f.extend_from_slice(&[0, 0, 0, 0xff, 0xd8]);
        let j = parse(&f).unwrap();
        assert_eq!(j.len, n);
        assert_eq!(j.rtp_type(), 1);
        assert_eq!(frame_len(&f), Ok(n));
    }

    #[test]
    fn dri_sets_restart_type() {
        let f = tiny_frame(0x22, &[0xff, DRI, 0, 4, 0, 5], &[1]);
        let j = parse(&f).unwrap();
        assert_eq!(j.restart_interval, 5);
        assert_eq!(j.rtp_type(), 65);
    }

    #[test]
    fn refusals() {
        assert_eq!(parse(b"GIF89a"), Err(JpegError::NotJpeg));
        let f = tiny_frame(0x11, &[], &[1]);
        assert_eq!(parse(&f), Err(JpegError::Subsampling444));
        let f = tiny_frame(0x12, &[], &[1]);
        assert_eq!(parse(&f), Err(JpegError::UnsupportedSampling));
        let f = tiny_frame(0x21, &[], &[1]);
        assert_eq!(parse(&f[..f.len() - 2]), Err(JpegError::Truncated));
        assert_eq!(parse(&f[..f.len() - 1]), Err(JpegError::Truncated));
        // Adobe APP14 with transform 0: RGB.
        let adobe = [
            0xff, APP14, 0, 14, b'A', b'd', b'o', b'b', b'e', 0, 100, 0, 0, 0, 0, 0,
        ];
        let f = tiny_frame(0x21, &adobe, &[1]);
        assert_eq!(parse(&f), Err(JpegError::Rgb));
        // A non-standard DC table in slot 0.
        let mut dht = alloc::vec![0xff, DHT, 0, 2 + 17 + 2, 0x00, 2];
        dht.extend_from_slice(&[0; 15]);
        dht.extend_from_slice(&[0, 1]);
        let f = tiny_frame(0x21, &dht, &[1]);
        assert_eq!(parse(&f), Err(JpegError::NonStandardHuffman));
        // A progressive SOF.
        let mut f = tiny_frame(0x21, &[], &[1]);
        let sof = f.windows(2).position(|w| w == [0xff, 0xc0]).unwrap();
        f[sof + 1] = 0xc2;
        assert_eq!(parse(&f), Err(JpegError::Progressive));
    }
}
