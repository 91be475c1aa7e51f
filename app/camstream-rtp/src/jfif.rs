//! JPEG files as an RFC 2435 receiver rebuilds them (Appendix B): SOI, the
//! two quantization tables, DRI, SOF, the standard Huffman tables and SOS
//! before the scan. The depacketizer writes these for frames it receives;
//! the daemon writes them for frames it sends over HTTP, so a snapshot is
//! byte for byte the frame an RTSP client decodes, with its Huffman tables
//! even when the camera left them out (as USB webcams' MJPEG does).

use alloc::vec::Vec;

use crate::jpeg::Jpeg;
use crate::tables::{CHROMA_AC, CHROMA_DC, HuffmanTable, LUMA_AC, LUMA_DC};

/// Writes the headers for a scan: `kind` 0 is 4:2:2, 1 is 4:2:0 (the
/// RTP/JPEG type's low bit); each table is 64 bytes (8-bit entries) or 128
/// (16-bit), in zigzag order.
pub fn write_headers(
    out: &mut Vec<u8>,
    kind: u8,
    width: u16,
    height: u16,
    restart_interval: u16,
    tables: [&[u8]; 2],
) {
    out.extend_from_slice(&[0xff, 0xd8]);
    let mut sixteen_bit = false;
    for (id, t) in (0u8..).zip(tables) {
        let sixteen = u8::from(t.len() == 128);
        sixteen_bit |= sixteen == 1;
        out.extend_from_slice(&[0xff, 0xdb]);
        out.extend_from_slice(&(3 + t.len() as u16).to_be_bytes());
        out.push(sixteen << 4 | id);
        out.extend_from_slice(t);
    }
    if restart_interval > 0 {
        out.extend_from_slice(&[0xff, 0xdd, 0, 4]);
        out.extend_from_slice(&restart_interval.to_be_bytes());
    }
    // Baseline, or extended sequential when a table has 16-bit entries
    // (T.81 allows those only there).
    let sof = if sixteen_bit { 0xc1 } else { 0xc0 };
    out.extend_from_slice(&[0xff, sof, 0, 17, 8]);
    out.extend_from_slice(&height.to_be_bytes());
    out.extend_from_slice(&width.to_be_bytes());
    let luma = if kind & 1 == 0 { 0x21 } else { 0x22 };
    out.extend_from_slice(&[3, 0, luma, 0, 1, 0x11, 1, 2, 0x11, 1]);
    for (class_id, t) in [
        (0x00, LUMA_DC),
        (0x10, LUMA_AC),
        (0x01, CHROMA_DC),
        (0x11, CHROMA_AC),
    ] {
        write_dht(out, class_id, &t);
    }
    out.extend_from_slice(&[0xff, 0xda, 0, 12, 3, 0, 0x00, 1, 0x11, 2, 0x11, 0, 63, 0]);
}

fn write_dht(out: &mut Vec<u8>, class_id: u8, t: &HuffmanTable) {
    out.extend_from_slice(&[0xff, 0xc4]);
    out.extend_from_slice(&(3 + 16 + t.symbols.len() as u16).to_be_bytes());
    out.push(class_id);
    out.extend_from_slice(&t.counts);
    out.extend_from_slice(t.symbols);
}

/// Appends `jpeg` to `out` as a whole file: headers, scan, EOI. Reuses
/// `out`'s capacity, so a buffer kept between frames allocates nothing.
pub fn write_file(out: &mut Vec<u8>, jpeg: &Jpeg<'_>) {
    write_headers(
        out,
        jpeg.subsampling.rtp_type(),
        jpeg.width,
        jpeg.height,
        jpeg.restart_interval,
        [jpeg.quant_tables[0].data, jpeg.quant_tables[1].data],
    );
    out.extend_from_slice(jpeg.scan);
    out.extend_from_slice(&[0xff, 0xd9]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jpeg;

    #[test]
    fn a_written_file_parses_to_the_same_frame() {
        let scan = [0x12, 0x34, 0xff, 0x00, 0x56];
        let (l, c) = ([3u8; 64], [5u8; 128]);
        for (sub, ri) in [
            (jpeg::Subsampling::Yuv420, 0),
            (jpeg::Subsampling::Yuv422, 4),
        ] {
            let j = Jpeg {
                width: 64,
                height: 48,
                subsampling: sub,
                restart_interval: ri,
                quant_tables: [jpeg::QuantTable { data: &l }, jpeg::QuantTable { data: &c }],
                scan: &scan,
                len: 0,
            };
            let mut out = Vec::new();
            write_file(&mut out, &j);
            let back = jpeg::parse(&out).unwrap();
            assert_eq!(back.len, out.len());
            assert_eq!(Jpeg { len: 0, ..back }, j);
        }
    }
}
