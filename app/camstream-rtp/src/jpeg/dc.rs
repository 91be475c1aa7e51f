//! A frame's luma at an eighth of its size, from the DC coefficients of
//! its scan alone: what motion detection looks at.
//!
//! Every 8x8 luma block's DC coefficient is its mean; the AC coefficients
//! are skipped, not decoded (one table lookup a coefficient gives a code's
//! length and its value's together), and nothing is transformed. The
//! frames are those [`parse`](super::parse) accepts, whose Huffman tables
//! are T.81 Annex K's: the lookup tables are built at compile time. The
//! result is libjpeg's decode at 1/8 scale to grayscale, sample for sample,
//! for two thirds of libjpeg-turbo's instructions (callgrind, a noisy
//! 1080p frame: docs/BENCHMARKS.md). Reading every code is the cost that
//! is left: a block's end is found no other way.
//!
//! A corrupt scan gives a wrong picture or an error, never a panic, and
//! its work is bounded by the frame's block count.

use super::{Jpeg, Subsampling};
use crate::tables::{CHROMA_AC, CHROMA_DC, HuffmanTable, LUMA_AC, LUMA_DC};

/// Why a scan's DC coefficients could not be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DcError {
    /// The output is smaller than the frame's eighth-size picture.
    Buffer,
    /// A bit pattern no Huffman table has a code for.
    Code,
    /// A restart marker missing or out of order.
    Restart,
}

impl core::fmt::Display for DcError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            DcError::Buffer => "the picture is larger than its buffer",
            DcError::Code => "a code no Huffman table has: corrupt data",
            DcError::Restart => "a restart marker missing or out of order: corrupt data",
        })
    }
}

/// The size of the eighth-size picture of a `width` x `height` frame.
pub fn dc_size(width: u16, height: u16) -> (usize, usize) {
    (
        usize::from(width).div_ceil(8),
        usize::from(height).div_ceil(8),
    )
}

/// Writes `j`'s luma at an eighth of its size into `out`, rows of
/// [`dc_size`]'s width packed tight, and returns that size.
pub fn dc_luma(j: &Jpeg<'_>, out: &mut [u8]) -> Result<(usize, usize), DcError> {
    let (w, h) = dc_size(j.width, j.height);
    let out = out.get_mut(..w * h).ok_or(DcError::Buffer)?;
    // Luma blocks across and down an MCU.
    let (bh, bv) = match j.subsampling {
        Subsampling::Yuv422 => (2, 1),
        Subsampling::Yuv420 => (2, 2),
    };
    let (mcus_across, mcus_down) = (w.div_ceil(bh), h.div_ceil(bv));
    let q = j.quant_tables[0].data;
    // The DC entry comes first (zigzag order); 16-bit entries are big-endian.
    let q0 = if j.quant_tables[0].is_16bit() {
        i32::from(u16::from_be_bytes([q[0], q[1]]))
    } else {
        i32::from(q[0])
    };
    let mut bits = Bits::new(j.scan);
    let mut pred = [0i32; 3];
    let interval = usize::from(j.restart_interval);
    let mut restarts = 0u8;
    let mut left = interval;
    for my in 0..mcus_down {
        for mx in 0..mcus_across {
            if interval > 0 {
                if left == 0 {
                    bits.restart(restarts)?;
                    restarts = restarts.wrapping_add(1);
                    pred = [0; 3];
                    left = interval;
                }
                left -= 1;
            }
            for v in 0..bv {
                for u in 0..bh {
                    // A corrupt scan's differences may add up past an
                    // i32: wrapped, as its picture is wrong anyway.
                    pred[0] = pred[0].wrapping_add(bits.dc(&DC_LUMA)?);
                    bits.skip_ac(&AC_LUMA, &AC_LUMA_LONG)?;
                    let (x, y) = (mx * bh + u, my * bv + v);
                    if x < w && y < h {
                        // libjpeg's 1x1 inverse DCT: the mean, rounded.
                        let mean = ((i64::from(pred[0]) * i64::from(q0) + 4) >> 3) + 128;
                        out[y * w + x] = mean.clamp(0, 255) as u8;
                    }
                }
            }
            for p in &mut pred[1..] {
                *p = p.wrapping_add(bits.dc(&DC_CHROMA)?);
                bits.skip_ac(&AC_CHROMA, &AC_CHROMA_LONG)?;
            }
        }
    }
    Ok((w, h))
}

/// Bits of the scan, most significant first, with stuffed zero bytes
/// taken out; past the data or at a marker, zeros.
struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
    /// `n` bits at the top; the rest zero.
    acc: u64,
    n: u32,
}

/// Bits a decoding step may take at most (a 16-bit code and 11 bits of
/// value): a step is taken only with this many in `acc`.
const STEP_BITS: u32 = 27;

impl<'a> Bits<'a> {
    fn new(data: &'a [u8]) -> Bits<'a> {
        Bits {
            data,
            pos: 0,
            acc: 0,
            n: 0,
        }
    }

    /// Tops `acc` up to at least 57 bits.
    #[inline]
    fn refill(&mut self) {
        // Eight bytes without a 0xff (almost always): as many whole bytes
        // as fit at once.
        if let Some(&word) = self.data.get(self.pos..).and_then(|d| d.first_chunk::<8>()) {
            let w = u64::from_be_bytes(word);
            let inverted = !w;
            let has_ff =
                inverted.wrapping_sub(0x0101_0101_0101_0101) & w & 0x8080_8080_8080_8080 != 0;
            if !has_ff {
                let take = (64 - self.n) / 8;
                let keep = u64::MAX.checked_shr(take * 8).unwrap_or(0);
                self.acc |= (w & !keep) >> self.n;
                self.n += take * 8;
                self.pos += take as usize;
                return;
            }
        }
        while self.n <= 56 {
            let byte = match self.data.get(self.pos) {
                Some(0xff) if self.data.get(self.pos + 1) == Some(&0) => {
                    self.pos += 2;
                    0xff
                }
                // A marker (only RSTn may be here), or the end: zeros,
                // and the marker stays for `restart`.
                Some(0xff) | None => 0,
                Some(&b) => {
                    self.pos += 1;
                    b
                }
            };
            self.acc |= u64::from(byte) << (56 - self.n);
            self.n += 8;
        }
    }

    #[inline]
    fn consume(&mut self, len: u32) {
        self.acc <<= len;
        self.n -= len;
    }

    /// A DC difference.
    #[inline(always)]
    fn dc(&mut self, table: &[u16; 1 << DC_PEEK]) -> Result<i32, DcError> {
        if self.n < STEP_BITS {
            self.refill();
        }
        let e = table[(self.acc >> (64 - DC_PEEK)) as usize];
        if e == 0 {
            return Err(DcError::Code);
        }
        let (len, s) = (u32::from(e & 0xff), u32::from(e >> 8));
        self.consume(len);
        if s == 0 {
            return Ok(0);
        }
        let v = (self.acc >> (64 - s)) as i32;
        self.consume(s);
        // T.81 F.12: values below half the range are negative.
        Ok(if v < 1 << (s - 1) {
            v - (1 << s) + 1
        } else {
            v
        })
    }

    /// Skips a block's AC coefficients.
    #[inline(always)]
    fn skip_ac(&mut self, table: &[u16; 1 << AC_PEEK], long: &Long) -> Result<(), DcError> {
        let mut k = 1;
        while k < 64 {
            if self.n < STEP_BITS {
                self.refill();
            }
            let mut e = table[(self.acc >> (64 - AC_PEEK)) as usize];
            if e == 0 {
                e = long.entry(self.acc).ok_or(DcError::Code)?;
            }
            self.consume(u32::from(e & 0x1f));
            k += e >> 5;
        }
        Ok(())
    }

    /// Steps over the restart marker due (`RSTm`, m counting from 0):
    /// what is left of the segment's last byte is padding.
    fn restart(&mut self, m: u8) -> Result<(), DcError> {
        // `refill` never reads past a marker: a valid segment's bytes are
        // all taken, and the marker is next.
        let marker = [0xff, 0xd0 + (m & 7)];
        // A marker may follow fill bytes (0xff) of its own.
        while self.data.get(self.pos..self.pos + 2) == Some(&[0xff, 0xff][..]) {
            self.pos += 1;
        }
        if self.data.get(self.pos..self.pos + 2) != Some(&marker[..]) {
            return Err(DcError::Restart);
        }
        self.pos += 2;
        self.acc = 0;
        self.n = 0;
        Ok(())
    }
}

/// Bits looked up at once: every DC code of Annex K has at most 11.
const DC_PEEK: u32 = 11;
/// Bits looked up at once for an AC code: most codes have at most 10
/// (2 KiB a table, in a Cortex-A53's cache); the others, [`Long`].
const AC_PEEK: u32 = 10;

/// The canonical codes of a table: (length, code, symbol) in order.
const fn for_each_code<const N: usize>(t: &HuffmanTable) -> [(u8, u16, u8); N] {
    let mut out = [(0u8, 0u16, 0u8); N];
    let (mut code, mut i, mut len) = (0u16, 0, 1);
    while len <= 16 {
        let mut c = 0;
        while c < t.counts[len - 1] {
            out[i] = (len as u8, code, t.symbols[i]);
            code += 1;
            i += 1;
            c += 1;
        }
        code <<= 1;
        len += 1;
    }
    out
}

/// A DC lookup: the code's length | its value's bit count << 8; 0 for no
/// code.
const fn dc_table(t: &HuffmanTable) -> [u16; 1 << DC_PEEK] {
    let mut out = [0u16; 1 << DC_PEEK];
    let codes = for_each_code::<12>(t);
    let mut i = 0;
    while i < 12 {
        let (len, code, symbol) = codes[i];
        let fill = DC_PEEK - len as u32;
        let mut low = 0;
        while low < 1 << fill {
            out[((code as usize) << fill) | low] = len as u16 | (symbol as u16) << 8;
            low += 1;
        }
        i += 1;
    }
    out
}

/// An AC code's entry: the bits it takes with its value | how far it moves
/// along the block << 5 (64 ends it).
const fn ac_entry(len: u8, symbol: u8) -> u16 {
    let (run, size) = ((symbol >> 4) as u16, (symbol & 0x0f) as u16);
    let advance = match (run, size) {
        (0, 0) => 64,  // end of block
        (15, 0) => 16, // sixteen zeros
        _ => run + 1,
    };
    (len as u16 + size) | advance << 5
}

const fn ac_table(t: &HuffmanTable) -> [u16; 1 << AC_PEEK] {
    let mut out = [0u16; 1 << AC_PEEK];
    let codes = for_each_code::<162>(t);
    let mut i = 0;
    while i < 162 {
        let (len, code, symbol) = codes[i];
        if len as u32 <= AC_PEEK {
            let fill = AC_PEEK - len as u32;
            let mut low = 0;
            while low < 1 << fill {
                out[((code as usize) << fill) | low] = ac_entry(len, symbol);
                low += 1;
            }
        }
        i += 1;
    }
    out
}

/// The AC codes longer than [`AC_PEEK`] bits, by length (T.81 F.16's
/// decode): the largest code of each length and its first symbol's entry.
struct Long {
    /// Per length 1..=16: one past the largest code, and the index of the
    /// first code of that length in `entries` minus that code.
    max: [u32; 17],
    offset: [i32; 17],
    entries: [u16; 162],
}

impl Long {
    const fn new(t: &HuffmanTable) -> Long {
        let codes = for_each_code::<162>(t);
        let mut long = Long {
            max: [0; 17],
            offset: [0; 17],
            entries: [0; 162],
        };
        let mut i = 0;
        while i < 162 {
            let (len, code, symbol) = codes[i];
            let l = len as usize;
            if long.max[l] == 0 {
                long.offset[l] = i as i32 - code as i32;
            }
            long.max[l] = code as u32 + 1;
            long.entries[i] = ac_entry(len, symbol);
            i += 1;
        }
        long
    }

    fn entry(&self, acc: u64) -> Option<u16> {
        (AC_PEEK as usize + 1..=16).find_map(|l| {
            let code = (acc >> (64 - l)) as u32;
            (code < self.max[l]).then(|| {
                let i = self.offset[l] + code as i32;
                self.entries.get(usize::try_from(i).ok()?).copied()
            })?
        })
    }
}

static DC_LUMA: [u16; 1 << DC_PEEK] = dc_table(&LUMA_DC);
static DC_CHROMA: [u16; 1 << DC_PEEK] = dc_table(&CHROMA_DC);
static AC_LUMA: [u16; 1 << AC_PEEK] = ac_table(&LUMA_AC);
static AC_CHROMA: [u16; 1 << AC_PEEK] = ac_table(&CHROMA_AC);
static AC_LUMA_LONG: Long = Long::new(&LUMA_AC);
static AC_CHROMA_LONG: Long = Long::new(&CHROMA_AC);

#[cfg(test)]
mod tests {
    use super::super::QuantTable;
    use super::*;
    use alloc::borrow::ToOwned;

    /// Bits written most significant first, stuffed as a scan is.
    fn scan(bits: &str) -> alloc::vec::Vec<u8> {
        let mut out = alloc::vec::Vec::new();
        for chunk in bits.as_bytes().chunks(8) {
            let mut b = 0u8;
            for (i, c) in chunk.iter().enumerate() {
                b |= u8::from(*c == b'1') << (7 - i);
            }
            b |= 0xffu8.checked_shr(chunk.len() as u32).unwrap_or(0);
            out.push(b);
            if b == 0xff {
                out.push(0);
            }
        }
        out
    }

    #[test]
    fn differences_adding_up_past_an_i32_give_a_picture() {
        // Every DC difference the largest (category 11, all ones), every
        // block ending at once, and a 16-bit table of 65535: the running DC
        // times its quantizer is far past an i32 in a 2048x2048 frame.
        let luma = "111111110".to_owned() + "11111111111" + "1010";
        let chroma = "11111111110".to_owned() + "11111111111" + "00";
        let mcu = luma.repeat(4) + &chroma.repeat(2);
        let data = scan(&mcu.repeat(128 * 128));
        let j = Jpeg {
            width: 2048,
            height: 2048,
            subsampling: Subsampling::Yuv420,
            restart_interval: 0,
            quant_tables: [
                QuantTable { data: &[0xff; 128] },
                QuantTable { data: &[1; 64] },
            ],
            scan: &data,
            len: 0,
        };
        let mut out = alloc::vec![0u8; 256 * 256];
        assert_eq!(dc_luma(&j, &mut out), Ok((256, 256)));
        // The first block's mean: 2047 x 65535 / 8, past white.
        assert_eq!(out[0], 255);
    }

    #[test]
    fn the_tables_hold_every_code() {
        // Every code of each table is found, at its length.
        for (t, short, long) in [
            (&LUMA_AC, &AC_LUMA, &AC_LUMA_LONG),
            (&CHROMA_AC, &AC_CHROMA, &AC_CHROMA_LONG),
        ] {
            for (len, code, symbol) in for_each_code::<162>(t) {
                let acc = u64::from(code) << (64 - u32::from(len));
                let e = match short[(acc >> (64 - AC_PEEK)) as usize] {
                    0 => long.entry(acc).unwrap(),
                    e => e,
                };
                assert_eq!(e, ac_entry(len, symbol), "code {code:b}");
                assert_eq!(
                    u32::from(len) <= AC_PEEK,
                    short[(acc >> (64 - AC_PEEK)) as usize] != 0
                );
            }
            // The all-ones 16 bits are no code.
            assert_eq!(long.entry(u64::MAX), None);
        }
        for (t, table) in [(&LUMA_DC, &DC_LUMA), (&CHROMA_DC, &DC_CHROMA)] {
            for (len, code, symbol) in for_each_code::<12>(t) {
                let i = usize::from(code) << (DC_PEEK - u32::from(len));
                assert_eq!(table[i], u16::from(len) | u16::from(symbol) << 8);
            }
        }
    }
}
