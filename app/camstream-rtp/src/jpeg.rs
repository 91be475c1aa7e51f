//! A JPEG parser that finds what RFC 2435 carries (size, sampling, restart
//! interval, quantization tables, entropy-coded scan) and refuses, with a
//! reason, any frame a receiver could not rebuild bit-exactly from them.
//!
//! RFC 2435 transmits only the scan and the quantization tables; receivers
//! regenerate every other header with fixed choices: three components, luma
//! sampled 2x1 (type 0) or 2x2 (type 1) against chroma 1x1, one table for both
//! chroma components, the T.81 Annex K Huffman tables, one interleaved
//! baseline scan. Anything else would decode to garbage at the far end.

use crate::tables::{CHROMA_AC, CHROMA_DC, HuffmanTable, LUMA_AC, LUMA_DC};

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

/// How a frame RTP/JPEG cannot carry as it is can be made carryable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy {
    /// Lossless: re-code the same DCT coefficients as one baseline scan with
    /// the standard Huffman tables.
    Transcode,
    /// Decode and encode again as 4:2:0 (one generation of loss).
    Reencode,
}

/// The size a frame's SOF header declares (any SOF type), without checking
/// anything else; None when there is no SOF.
pub fn dimensions(data: &[u8]) -> Option<(u16, u16)> {
    let mut i = 2;
    if data.get(..2)? != [0xff, 0xd8] {
        return None;
    }
    while i + 4 <= data.len() {
        if data[i] != 0xff {
            return None;
        }
        let marker = data[i + 1];
        if marker == 0xff {
            i += 1;
            continue;
        }
        let len = usize::from(u16::from_be_bytes([data[i + 2], data[i + 3]]));
        let is_sof = matches!(marker, 0xc0..=0xcf) && !matches!(marker, 0xc4 | 0xc8 | 0xcc);
        if is_sof {
            let seg = data.get(i + 4..i + 2 + len)?;
            let h = u16::from_be_bytes([*seg.get(1)?, *seg.get(2)?]);
            let w = u16::from_be_bytes([*seg.get(3)?, *seg.get(4)?]);
            return Some((w, h));
        }
        if marker == 0xda || len < 2 {
            return None;
        }
        i += 2 + len;
    }
    None
}

/// Why a frame cannot be sent as RFC 2435 RTP/JPEG.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JpegError {
    /// No SOI marker at the start.
    NotJpeg,
    /// The data ends before EOI.
    Truncated,
    /// A marker segment is malformed (bad length, bad field, misplaced marker).
    Malformed,
    /// Progressive (SOF2/6/10/14).
    Progressive,
    /// Lossless (SOF3/7/11/15).
    Lossless,
    /// Hierarchical or differential (SOF5, DHP, EXP).
    Hierarchical,
    /// Arithmetic coding (SOF9..15, DAC).
    Arithmetic,
    /// Sample precision other than 8 bits (12-bit JPEG).
    Precision,
    /// One component: grayscale.
    Grayscale,
    /// A component count other than 1 or 3 (CMYK, ...).
    ComponentCount,
    /// 4:4:4: luma not subsampled.
    Subsampling444,
    /// Sampling factors RFC 2435 has no type for (4:1:1, 4:4:0, chroma subsampled unevenly, ...).
    UnsupportedSampling,
    /// The two chroma components use different quantization tables.
    ChromaQuantTables,
    /// A component refers to a quantization table the frame never defines.
    MissingQuantTable,
    /// Huffman tables other than T.81 Annex K (for instance optimized ones).
    NonStandardHuffman,
    /// More than one scan, or a scan that does not interleave all components.
    MultipleScans,
    /// RGB colour (Adobe transform 0 or component ids R, G, B); RFC 2435 implies YCbCr.
    Rgb,
    /// Zero width or height (height in a DNL segment).
    ZeroSize,
    /// Entropy-coded data of 16 MiB or more: does not fit the 24-bit fragment offset.
    TooLarge,
}

impl JpegError {
    /// Every reason, in the order of [`JpegError::index`].
    pub const ALL: [JpegError; 19] = [
        JpegError::NotJpeg,
        JpegError::Truncated,
        JpegError::Malformed,
        JpegError::Progressive,
        JpegError::Lossless,
        JpegError::Hierarchical,
        JpegError::Arithmetic,
        JpegError::Precision,
        JpegError::Grayscale,
        JpegError::ComponentCount,
        JpegError::Subsampling444,
        JpegError::UnsupportedSampling,
        JpegError::ChromaQuantTables,
        JpegError::MissingQuantTable,
        JpegError::NonStandardHuffman,
        JpegError::MultipleScans,
        JpegError::Rgb,
        JpegError::ZeroSize,
        JpegError::TooLarge,
    ];

    /// A dense index for per-reason counters.
    pub fn index(self) -> usize {
        self as usize
    }

    /// What can make such a frame sendable, keeping the picture; None when
    /// nothing can (the frame is broken or cannot be decoded here).
    pub fn remedy(self) -> Option<Remedy> {
        match self {
            // The coefficients are fine; only their coding is not.
            JpegError::NonStandardHuffman
            | JpegError::Progressive
            | JpegError::MultipleScans
            | JpegError::Arithmetic => Some(Remedy::Transcode),
            // The picture is fine; its colour layout is not.
            JpegError::Grayscale
            | JpegError::Subsampling444
            | JpegError::UnsupportedSampling
            | JpegError::ChromaQuantTables
            | JpegError::Rgb => Some(Remedy::Reencode),
            // Broken, or beyond what an 8-bit decoder reads: never sent.
            JpegError::NotJpeg
            | JpegError::Truncated
            | JpegError::Malformed
            | JpegError::Lossless
            | JpegError::Hierarchical
            | JpegError::Precision
            | JpegError::ComponentCount
            | JpegError::MissingQuantTable
            | JpegError::ZeroSize
            | JpegError::TooLarge => None,
        }
    }

    /// A short, stable name for logs and counters.
    pub fn name(self) -> &'static str {
        match self {
            JpegError::NotJpeg => "not-jpeg",
            JpegError::Truncated => "truncated",
            JpegError::Malformed => "malformed",
            JpegError::Progressive => "progressive",
            JpegError::Lossless => "lossless",
            JpegError::Hierarchical => "hierarchical",
            JpegError::Arithmetic => "arithmetic",
            JpegError::Precision => "12-bit",
            JpegError::Grayscale => "grayscale",
            JpegError::ComponentCount => "component-count",
            JpegError::Subsampling444 => "4:4:4",
            JpegError::UnsupportedSampling => "sampling",
            JpegError::ChromaQuantTables => "chroma-quant-tables",
            JpegError::MissingQuantTable => "missing-quant-table",
            JpegError::NonStandardHuffman => "non-standard-huffman",
            JpegError::MultipleScans => "multiple-scans",
            JpegError::Rgb => "rgb",
            JpegError::ZeroSize => "zero-size",
            JpegError::TooLarge => "too-large",
        }
    }
}

impl core::fmt::Display for JpegError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = match self {
            JpegError::NotJpeg => "not a JPEG (no SOI marker)",
            JpegError::Truncated => "truncated JPEG (no EOI marker)",
            JpegError::Malformed => "malformed JPEG marker segment",
            JpegError::Progressive => "progressive JPEG",
            JpegError::Lossless => "lossless JPEG",
            JpegError::Hierarchical => "hierarchical JPEG",
            JpegError::Arithmetic => "arithmetic-coded JPEG",
            JpegError::Precision => "JPEG sample precision is not 8 bits",
            JpegError::Grayscale => "grayscale JPEG",
            JpegError::ComponentCount => "JPEG component count is not 3",
            JpegError::Subsampling444 => "4:4:4 JPEG (RTP/JPEG carries only 4:2:2 and 4:2:0)",
            JpegError::UnsupportedSampling => {
                "JPEG sampling factors RTP/JPEG has no type for (it carries luma 2x1 or 2x2 with chroma 1x1)"
            }
            JpegError::ChromaQuantTables => {
                "the two chroma components use different quantization tables"
            }
            JpegError::MissingQuantTable => "a component refers to an undefined quantization table",
            JpegError::NonStandardHuffman => "non-standard (e.g. optimized) Huffman tables",
            JpegError::MultipleScans => "more than one scan, or a non-interleaved scan",
            JpegError::Rgb => "RGB-coded JPEG (RTP/JPEG implies YCbCr)",
            JpegError::ZeroSize => "zero width or height",
            JpegError::TooLarge => "entropy-coded data too large for RTP/JPEG (16 MiB)",
        };
        f.write_str(s)
    }
}

impl core::error::Error for JpegError {}

const SOI: u8 = 0xd8;
const EOI: u8 = 0xd9;
const SOS: u8 = 0xda;
const DQT: u8 = 0xdb;
const DNL: u8 = 0xdc;
const DRI: u8 = 0xdd;
const DHT: u8 = 0xc4;
const DAC: u8 = 0xcc;
const APP14: u8 = 0xee;

/// Largest entropy-coded segment the 24-bit fragment offset can address.
pub const MAX_SCAN_LEN: usize = 1 << 24;

fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

#[derive(Clone, Copy)]
struct Component {
    id: u8,
    sampling: u8,
    quant: u8,
}

/// Which standard table a DHT slot holds, if any.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Not defined by the frame: decoders of Motion-JPEG (AVI1, UVC) fill
    /// slot 0 with the luma and slot 1 with the chroma tables of Annex K.
    Undefined,
    Luma,
    Chroma,
    Other,
}

fn classify(table: &[u8], class: u8) -> Slot {
    let (luma, chroma) = if class == 0 {
        (LUMA_DC, CHROMA_DC)
    } else {
        (LUMA_AC, CHROMA_AC)
    };
    let is = |t: &HuffmanTable| table[..16] == t.counts && table[16..] == *t.symbols;
    if is(&luma) {
        Slot::Luma
    } else if is(&chroma) {
        Slot::Chroma
    } else {
        Slot::Other
    }
}

fn effective(slot: Slot, id: u8) -> Slot {
    match (slot, id) {
        (Slot::Undefined, 0) => Slot::Luma,
        (Slot::Undefined, 1) => Slot::Chroma,
        (Slot::Undefined, _) => Slot::Other,
        (s, _) => s,
    }
}

/// Walks marker segments from SOI to the first SOS; yields (marker, body).
struct Segments<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Segments<'a> {
    fn new(data: &'a [u8]) -> Result<Self, JpegError> {
        if data.len() < 2 || data[0] != 0xff || data[1] != SOI {
            return Err(JpegError::NotJpeg);
        }
        Ok(Segments { data, pos: 2 })
    }

    /// The next segment, or EOI as `(EOI, &[])`.
    fn next_segment(&mut self) -> Result<(u8, &'a [u8]), JpegError> {
        let d = self.data;
        if self.pos >= d.len() {
            return Err(JpegError::Truncated);
        }
        if d[self.pos] != 0xff {
            return Err(JpegError::Malformed);
        }
        // Any number of 0xFF fill bytes may precede a marker.
        while self.pos < d.len() && d[self.pos] == 0xff {
            self.pos += 1;
        }
        let Some(&marker) = d.get(self.pos) else {
            return Err(JpegError::Truncated);
        };
        self.pos += 1;
        match marker {
            EOI => return Ok((EOI, &[])),
            SOI | 0xd0..=0xd7 | 0x01 | 0x00 => return Err(JpegError::Malformed),
            _ => {}
        }
        if self.pos + 2 > d.len() {
            return Err(JpegError::Truncated);
        }
        let len = usize::from(be16(d, self.pos));
        if len < 2 {
            return Err(JpegError::Malformed);
        }
        let end = self.pos + len;
        if end > d.len() {
            return Err(JpegError::Truncated);
        }
        let body = &d[self.pos + 2..end];
        self.pos = end;
        Ok((marker, body))
    }
}

/// Length of entropy-coded data starting at `scan`: the offset of the first
/// marker that is not a restart marker. Returns that offset and the marker.
fn scan_end(scan: &[u8]) -> Result<(usize, u8), JpegError> {
    let mut pos = 0;
    while let Some(i) = memchr::memchr(0xff, &scan[pos..]) {
        let at = pos + i;
        let mut next = at + 1;
        // 0xFF fill bytes may precede a marker.
        while next < scan.len() && scan[next] == 0xff {
            next += 1;
        }
        match scan.get(next) {
            None => return Err(JpegError::Truncated),
            // Stuffed zero or restart marker: still inside the scan.
            Some(0x00) | Some(0xd0..=0xd7) => pos = next + 1,
            Some(&m) => return Ok((at, m)),
        }
    }
    Err(JpegError::Truncated)
}

/// Length of the JPEG at the start of `data` (SOI through EOI), whatever its
/// coding: used to split a concatenated MJPEG stream into frames, including
/// frames that [`parse`] would then refuse.
pub fn frame_len(data: &[u8]) -> Result<usize, JpegError> {
    let mut segs = Segments::new(data)?;
    loop {
        let (marker, _) = segs.next_segment()?;
        match marker {
            EOI => return Ok(segs.pos),
            SOS => {
                let start = segs.pos;
                let (len, m) = scan_end(&data[start..])?;
                segs.pos = start + len;
                if m == EOI {
                    return Ok(segs.pos + 2);
                }
                // A progressive or multi-scan frame: more segments follow.
                if !(0xc0..=0xfe).contains(&m) {
                    return Err(JpegError::Malformed);
                }
            }
            _ => {}
        }
    }
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

fn parse_dht(mut body: &[u8], huff: &mut [[Slot; 4]; 2]) -> Result<(), JpegError> {
    while !body.is_empty() {
        if body.len() < 17 {
            return Err(JpegError::Malformed);
        }
        let (class, id) = (body[0] >> 4, body[0] & 0x0f);
        if class > 1 || id > 3 {
            return Err(JpegError::Malformed);
        }
        let n: usize = body[1..17].iter().map(|&c| usize::from(c)).sum();
        if n > 256 || body.len() < 17 + n {
            return Err(JpegError::Malformed);
        }
        huff[usize::from(class)][usize::from(id)] = classify(&body[1..17 + n], class);
        body = &body[17 + n..];
    }
    Ok(())
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

    #[test]
    fn every_reason_has_its_index() {
        for (i, e) in JpegError::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
        }
    }
}
