//! JPEG files as an RFC 2435 receiver rebuilds them (Appendix B): SOI, the
//! two quantization tables, DRI, SOF, the standard Huffman tables and SOS
//! before the scan. The depacketizer writes these for frames it receives;
//! the daemon writes them for frames it sends over HTTP, so a snapshot is
//! byte for byte the frame an RTSP client decodes, with its Huffman tables
//! even when the camera left them out (as USB webcams' MJPEG does).

use alloc::vec::Vec;

use crate::depacketize::{Headers, headers, quantization};
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

/// Writes the file [`write_file`] writes for a frame from the RTP/JPEG
/// payloads [`crate::Packetizer`] made of it, all of them in order (Q 255,
/// the tables in the first); `width` and `height` are the frame's, which
/// the payloads give only up to 2040. A sender that keeps its packets need
/// not keep the file too: it can make it when a client asks. None, and
/// nothing written, if they are not such a frame's payloads.
pub fn write_file_from_payloads<'a>(
    out: &mut Vec<u8>,
    width: u16,
    height: u16,
    payloads: impl IntoIterator<Item = &'a [u8]>,
) -> Option<()> {
    let start = out.len();
    let written = append_from_payloads(out, width, height, payloads);
    if written.is_none() {
        out.truncate(start);
    }
    written
}

fn append_from_payloads<'a>(
    out: &mut Vec<u8>,
    width: u16,
    height: u16,
    payloads: impl IntoIterator<Item = &'a [u8]>,
) -> Option<()> {
    let mut payloads = payloads.into_iter();
    let first = headers(payloads.next()?).ok()?;
    if first.offset != 0 || first.q < 128 {
        return None;
    }
    let (precision, tables, scan) = quantization(first.rest).ok()?;
    if tables.is_empty() {
        return None;
    }
    let luma = 64 << (precision & 1);
    write_headers(
        out,
        first.kind,
        width,
        height,
        first.restart_interval,
        [&tables[..luma], &tables[luma..]],
    );
    let scan_start = out.len();
    out.extend_from_slice(scan);
    for p in payloads {
        let Headers {
            kind, offset, rest, ..
        } = headers(p).ok()?;
        if kind != first.kind || offset != out.len() - scan_start {
            return None;
        }
        out.extend_from_slice(rest);
    }
    out.extend_from_slice(&[0xff, 0xd9]);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jpeg;
    use crate::packetize::{JPEG_HEADER_LEN, QUANT_HEADER_LEN, RESTART_HEADER_LEN};

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

    #[test]
    fn the_file_made_from_the_payloads_is_the_one_written() {
        let scan: Vec<u8> = (0..9000u32).map(|i| (i * 7 % 251) as u8).collect();
        let (t8, t16) = ([3u8; 64], [5u8; 128]);
        for (w, h, ri, sixteen, mtu) in [
            (64, 48, 0, false, 1400),
            (1280, 720, 4, true, 400),
            (3840, 2160, 0, false, 1400),
            (3840, 2160, 2, true, 9000),
        ] {
            let j = Jpeg {
                width: w,
                height: h,
                subsampling: jpeg::Subsampling::Yuv420,
                restart_interval: ri,
                quant_tables: [
                    jpeg::QuantTable { data: &t8 },
                    jpeg::QuantTable {
                        data: if sixteen { &t16 } else { &t8 },
                    },
                ],
                scan: &scan,
                len: 0,
            };
            let mut written = Vec::new();
            write_file(&mut written, &j);
            let mut p = crate::Packetizer::new(1, 2, mtu).unwrap();
            let packets: Vec<Vec<u8>> = p
                .packetize(&j, 3)
                .map(|p| {
                    let mut b = alloc::vec![0; p.len()];
                    p.write_to(&mut b);
                    b
                })
                .collect();
            let payloads = || {
                packets
                    .iter()
                    .map(|b| crate::IncomingPacket::parse(b).unwrap().payload)
            };
            let mut made = alloc::vec![1, 2];
            write_file_from_payloads(&mut made, w, h, payloads()).unwrap();
            assert_eq!(&made[2..], &written[..], "{w}x{h}, restart {ri}, mtu {mtu}");
            // A payload missing, or out of order: nothing written.
            let mut out = alloc::vec![1, 2];
            assert!(write_file_from_payloads(&mut out, w, h, payloads().skip(1)).is_none());
            assert!(write_file_from_payloads(&mut out, w, h, payloads().rev()).is_none());
            let mut no_second: Vec<&[u8]> = payloads().collect();
            if no_second.len() > 2 {
                no_second.remove(1);
                assert!(write_file_from_payloads(&mut out, w, h, no_second).is_none());
            }
            assert_eq!(out, [1, 2]);
            // Cut short within its headers and tables: nothing written.
            let first = payloads().next().unwrap();
            let headers = JPEG_HEADER_LEN
                + if ri > 0 { RESTART_HEADER_LEN } else { 0 }
                + QUANT_HEADER_LEN
                + 64
                + if sixteen { 128 } else { 64 };
            for cut in 0..headers {
                assert!(write_file_from_payloads(&mut out, w, h, [&first[..cut]]).is_none());
            }
            assert_eq!(out, [1, 2]);
        }
    }
}
