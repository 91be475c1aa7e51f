//! Frames from real encoders (see testdata/README.md): each is sent
//! pixel-identically through an RTP round trip, or refused for the right
//! reason.

use std::path::Path;

use camstream_rtp::packetize::{self, Packetizer};
use camstream_rtp::{Depacketizer, JpegError, jpeg};

fn read(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata")
            .join(name),
    )
    .unwrap()
}

/// Packetizes at `mtu`, depacketizes, and returns the rebuilt JPEG.
fn round_trip(data: &[u8], mtu: usize) -> Vec<u8> {
    let j = jpeg::parse(data).unwrap();
    let mut p = Packetizer::new(7, 9, mtu).unwrap();
    let mut d = Depacketizer::new();
    if packetize::needs_x_dimensions(j.width, j.height) {
        d.set_x_dimensions(j.width, j.height);
    }
    let mut wire = vec![0; mtu];
    let mut out = None;
    for pkt in p.packetize(&j, 1) {
        pkt.write_to(&mut wire);
        if let Some(f) = d.push(&wire[..pkt.len()]).unwrap() {
            out = Some(f.jpeg.to_vec());
        }
    }
    out.unwrap()
}

fn pixels(data: &[u8]) -> Vec<u8> {
    turbojpeg::decompress(data, turbojpeg::PixelFormat::RGB)
        .unwrap()
        .pixels
}

#[test]
fn frames_camstream_sends() {
    for (name, rtp_type, sixteen_bit) in [
        (
            "ffmpeg-5.1-mjpeg-yuvj420p-huffman-default-160x120.jpg",
            1,
            false,
        ),
        ("gstreamer-1.22-jpegenc-i420-160x120.jpg", 1, false),
        (
            "libjpeg-turbo-2.1-cjpeg-sample-2x1-restart-1-160x120.jpg",
            64,
            false,
        ),
        ("libjpeg-turbo-2.1-cjpeg-quality-2-160x120.jpg", 1, true),
    ] {
        let data = read(name);
        let j = jpeg::parse(&data).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(j.rtp_type(), rtp_type, "{name}");
        assert_eq!(j.quant_tables[0].is_16bit(), sixteen_bit, "{name}");
        assert_eq!((j.width, j.height), (160, 120));
        assert_eq!(j.len, data.len());
        for mtu in [500, 1400] {
            assert!(
                pixels(&round_trip(&data, mtu)) == pixels(&data),
                "{name} at MTU {mtu}"
            );
        }
    }
}

/// The parser refuses these; the daemon repairs them (see the `Remedy`),
/// which needs their declared size.
#[test]
fn frames_camstream_must_repair() {
    for (name, reason) in [
        (
            "ffmpeg-5.1-mjpeg-yuvj420p-huffman-optimal-160x120.jpg",
            JpegError::NonStandardHuffman,
        ),
        (
            "ffmpeg-5.1-mjpeg-yuvj422p-huffman-default-160x120.jpg",
            JpegError::UnsupportedSampling,
        ),
        (
            "libjpeg-turbo-2.1-cjpeg-progressive-160x120.jpg",
            JpegError::Progressive,
        ),
        (
            "libjpeg-turbo-2.1-cjpeg-optimize-160x120.jpg",
            JpegError::NonStandardHuffman,
        ),
        (
            "libjpeg-turbo-2.1-cjpeg-arithmetic-160x120.jpg",
            JpegError::Arithmetic,
        ),
        (
            "libjpeg-turbo-2.1-cjpeg-grayscale-160x120.jpg",
            JpegError::Grayscale,
        ),
        (
            "libjpeg-turbo-2.1-cjpeg-sample-1x1-160x120.jpg",
            JpegError::Subsampling444,
        ),
        ("libjpeg-turbo-2.1-cjpeg-rgb-160x120.jpg", JpegError::Rgb),
    ] {
        let data = read(name);
        assert_eq!(jpeg::parse(&data), Err(reason), "{name}");
        assert!(reason.remedy().is_some(), "{name}");
        assert_eq!(jpeg::dimensions(&data), Some((160, 120)), "{name}");
        // Still a well-formed frame: a stream splitter finds its end.
        assert_eq!(jpeg::frame_len(&data), Ok(data.len()), "{name}");
        // Cut before its SOF, a frame has no size.
        assert!(jpeg::dimensions(&data[..10]).is_none(), "{name}");
    }
}

/// Motion-JPEG from UVC webcams leaves out DHT: decoders use the standard
/// tables. Such a frame (here: FFmpeg's with its DHT segments removed) is
/// sent, and the receiver's rebuilt frame decodes like the original.
#[test]
fn frames_without_huffman_tables() {
    let data = read("ffmpeg-5.1-mjpeg-yuvj420p-huffman-default-160x120.jpg");
    let mut stripped = data[..2].to_vec();
    let mut pos = 2;
    while data[pos + 1] != 0xda {
        let len = usize::from(u16::from_be_bytes([data[pos + 2], data[pos + 3]]));
        if data[pos + 1] != 0xc4 {
            stripped.extend_from_slice(&data[pos..pos + 2 + len]);
        }
        pos += 2 + len;
    }
    stripped.extend_from_slice(&data[pos..]);
    assert!(stripped.len() < data.len());
    assert!(pixels(&round_trip(&stripped, 1400)) == pixels(&data));
}

/// Tables for Q 1..99 (RFC 2435 Appendix A) are libjpeg's tables for that
/// quality: a receiver of Q < 128 reconstructs what libjpeg used.
#[test]
fn appendix_a_tables_match_libjpeg_turbo() {
    let px = vec![128u8; 16 * 16 * 3];
    for q in [1u8, 10, 50, 75, 99] {
        let mut c = turbojpeg::Compressor::new().unwrap();
        c.set_quality(i32::from(q));
        c.set_subsamp(turbojpeg::Subsamp::Sub2x2);
        let img = turbojpeg::Image {
            pixels: &px[..],
            width: 16,
            pitch: 48,
            height: 16,
            format: turbojpeg::PixelFormat::RGB,
        };
        let data = c.compress_to_vec(img).unwrap();
        let j = jpeg::parse(&data).unwrap();
        let want = camstream_rtp::tables::scaled_quant_tables(q);
        assert_eq!(j.quant_tables[0].data, &want[0][..], "luma, quality {q}");
        assert_eq!(j.quant_tables[1].data, &want[1][..], "chroma, quality {q}");
    }
}
