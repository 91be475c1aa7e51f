//! Walking a JPEG's marker segments: the segments before the scan, where
//! the entropy-coded data ends, where the frame ends, the size SOF
//! declares. Nothing here judges whether RFC 2435 can carry the frame.

use super::JpegError;

pub(super) const SOI: u8 = 0xd8;
pub(super) const EOI: u8 = 0xd9;
pub(super) const SOS: u8 = 0xda;
pub(super) const DQT: u8 = 0xdb;
pub(super) const DNL: u8 = 0xdc;
pub(super) const DRI: u8 = 0xdd;
pub(super) const DHT: u8 = 0xc4;
pub(super) const DAC: u8 = 0xcc;
pub(super) const APP14: u8 = 0xee;

pub(super) fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

/// Walks marker segments from SOI to the first SOS; yields (marker, body).
pub(super) struct Segments<'a> {
    data: &'a [u8],
    pub pos: usize,
}

impl<'a> Segments<'a> {
    pub fn new(data: &'a [u8]) -> Result<Self, JpegError> {
        if data.len() < 2 || data[0] != 0xff || data[1] != SOI {
            return Err(JpegError::NotJpeg);
        }
        Ok(Segments { data, pos: 2 })
    }

    /// The next segment, or EOI as `(EOI, &[])`.
    pub fn next_segment(&mut self) -> Result<(u8, &'a [u8]), JpegError> {
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
pub(super) fn scan_end(scan: &[u8]) -> Result<(usize, u8), JpegError> {
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
/// frames that [`parse`](super::parse) would then refuse.
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
