//! Tables from ITU-T T.81 Annex K that RFC 2435 relies on: the standard
//! Huffman tables (the only ones an RTP/JPEG receiver knows) and the example
//! quantization tables that RFC 2435 Appendix A scales for Q values 1..99.

/// Natural (row-major) index of the i-th coefficient in zigzag order.
pub const ZIGZAG: [u8; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

/// T.81 Table K.1, natural order.
const LUMA_QUANT_NATURAL: [u8; 64] = [
    16, 11, 10, 16, 24, 40, 51, 61, //
    12, 12, 14, 19, 26, 58, 60, 55, //
    14, 13, 16, 24, 40, 57, 69, 56, //
    14, 17, 22, 29, 51, 87, 80, 62, //
    18, 22, 37, 56, 68, 109, 103, 77, //
    24, 35, 55, 64, 81, 104, 113, 92, //
    49, 64, 78, 87, 103, 121, 120, 101, //
    72, 92, 95, 98, 112, 100, 103, 99,
];

/// T.81 Table K.2, natural order.
const CHROMA_QUANT_NATURAL: [u8; 64] = [
    17, 18, 24, 47, 99, 99, 99, 99, //
    18, 21, 26, 66, 99, 99, 99, 99, //
    24, 26, 56, 99, 99, 99, 99, 99, //
    47, 66, 99, 99, 99, 99, 99, 99, //
    99, 99, 99, 99, 99, 99, 99, 99, //
    99, 99, 99, 99, 99, 99, 99, 99, //
    99, 99, 99, 99, 99, 99, 99, 99, //
    99, 99, 99, 99, 99, 99, 99, 99,
];

const fn to_zigzag(natural: &[u8; 64]) -> [u8; 64] {
    let mut out = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        out[i] = natural[ZIGZAG[i] as usize];
        i += 1;
    }
    out
}

/// Table K.1 in zigzag order, as RFC 2435 Appendix A lists it.
pub const LUMA_QUANT: [u8; 64] = to_zigzag(&LUMA_QUANT_NATURAL);
/// Table K.2 in zigzag order.
pub const CHROMA_QUANT: [u8; 64] = to_zigzag(&CHROMA_QUANT_NATURAL);

/// Quantization tables for a Q value of 1..=99 (RFC 2435 Appendix A), in
/// zigzag order. This is the same scaling libjpeg's `jpeg_set_quality` uses,
/// so a libjpeg frame at quality q carries exactly these tables.
///
/// RFC 2435's sample code indexes the already zigzag-ordered base tables
/// through `zigzag[]` a second time; receivers (FFmpeg, GStreamer) and
/// senders ignore that erratum, and so do we.
pub fn scaled_quant_tables(q: u8) -> [[u8; 64]; 2] {
    let q = u32::from(q.clamp(1, 99));
    let scale = if q < 50 { 5000 / q } else { 200 - q * 2 };
    let mut out = [[0u8; 64]; 2];
    for (dst, base) in out.iter_mut().zip([&LUMA_QUANT, &CHROMA_QUANT]) {
        for (d, &b) in dst.iter_mut().zip(base.iter()) {
            *d = ((u32::from(b) * scale + 50) / 100).clamp(1, 255) as u8;
        }
    }
    out
}

/// A Huffman table as DHT carries it: code counts per length, then symbols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HuffmanTable {
    pub counts: [u8; 16],
    pub symbols: &'static [u8],
}

/// T.81 Table K.3.
pub const LUMA_DC: HuffmanTable = HuffmanTable {
    counts: [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0],
    symbols: &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
};

/// T.81 Table K.4.
pub const CHROMA_DC: HuffmanTable = HuffmanTable {
    counts: [0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
    symbols: &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
};

/// T.81 Table K.5.
pub const LUMA_AC: HuffmanTable = HuffmanTable {
    counts: [0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7d],
    symbols: &[
        0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61,
        0x07, 0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52,
        0xd1, 0xf0, 0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25,
        0x26, 0x27, 0x28, 0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45,
        0x46, 0x47, 0x48, 0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64,
        0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x83,
        0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99,
        0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6,
        0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3,
        0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8,
        0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa,
    ],
};

/// T.81 Table K.6.
pub const CHROMA_AC: HuffmanTable = HuffmanTable {
    counts: [0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 0x77],
    symbols: &[
        0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21, 0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61,
        0x71, 0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91, 0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33,
        0x52, 0xf0, 0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34, 0xe1, 0x25, 0xf1, 0x17, 0x18,
        0x19, 0x1a, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44,
        0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63,
        0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a,
        0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97,
        0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4,
        0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca,
        0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7,
        0xe8, 0xe9, 0xea, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa,
    ],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huffman_tables_are_complete() {
        for t in [LUMA_DC, CHROMA_DC, LUMA_AC, CHROMA_AC] {
            let n: usize = t.counts.iter().map(|&c| usize::from(c)).sum();
            assert_eq!(n, t.symbols.len());
        }
        assert_eq!(LUMA_AC.symbols.len(), 162);
        assert_eq!(CHROMA_AC.symbols.len(), 162);
    }

    #[test]
    fn base_tables_match_rfc2435_appendix_a() {
        // The first row of each table as printed in RFC 2435 Appendix A.
        assert_eq!(
            LUMA_QUANT[..16],
            [
                16, 11, 12, 14, 12, 10, 16, 14, 13, 14, 18, 17, 16, 19, 24, 40
            ]
        );
        assert_eq!(
            CHROMA_QUANT[..16],
            [
                17, 18, 18, 24, 21, 24, 47, 26, 26, 47, 99, 66, 56, 66, 99, 99
            ]
        );
        assert_eq!(scaled_quant_tables(50), [LUMA_QUANT, CHROMA_QUANT]);
    }

    #[test]
    fn zigzag_is_a_permutation() {
        let mut seen = [false; 64];
        for &z in &ZIGZAG {
            assert!(!seen[z as usize]);
            seen[z as usize] = true;
        }
    }
}
