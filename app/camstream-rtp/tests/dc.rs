//! The DC decoder against libjpeg-turbo's decode at 1/8 scale: frames
//! from real encoders, and frames of any size, quality, sampling and
//! restart interval.

use camstream_rtp::Jpeg;
use camstream_rtp::jpeg::{DcError, dc_luma, dc_size, parse};
use proptest::prelude::*;
use turbojpeg::{Decompressor, Image, PixelFormat};

/// libjpeg-turbo's decode at 1/8 scale, to grayscale.
fn turbo_eighth(jpeg: &[u8]) -> (Vec<u8>, (usize, usize)) {
    let mut d = Decompressor::new().unwrap();
    let header = d.read_header(jpeg).unwrap();
    let (w, h) = (header.width.div_ceil(8), header.height.div_ceil(8));
    let mut pixels = vec![0u8; w * h];
    let image = Image {
        pixels: pixels.as_mut_slice(),
        width: w,
        pitch: w,
        height: h,
        format: PixelFormat::GRAY,
    };
    d.decompress(jpeg, image).unwrap();
    (pixels, (w, h))
}

fn ours(jpeg: &[u8]) -> Result<(Vec<u8>, (usize, usize)), DcError> {
    let j = parse(jpeg).unwrap();
    let (w, h) = dc_size(j.width, j.height);
    let mut out = vec![0u8; w * h];
    let size = dc_luma(&j, &mut out)?;
    Ok((out, size))
}

/// A picture with edges, gradients and noise (a small LCG), RGB.
fn picture(w: usize, h: usize, seed: u32) -> Vec<u8> {
    let mut s = seed;
    let mut out = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let noise = (s >> 24) as usize % 48;
            let in_box = (x / 13 + y / 7) % 3 == 0;
            out.push(((x * 255 / w + noise) % 256) as u8);
            out.push(if in_box {
                250
            } else {
                (y * 200 / h + noise) as u8
            });
            out.push(((x + y) * 3 % 256) as u8);
        }
    }
    out
}

fn encode(
    w: usize,
    h: usize,
    seed: u32,
    quality: u8,
    four_two_zero: bool,
    restart: u16,
) -> Vec<u8> {
    use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
    let mut jpeg = Vec::new();
    let mut e = Encoder::new(&mut jpeg, quality);
    e.set_sampling_factor(if four_two_zero {
        SamplingFactor::R_4_2_0
    } else {
        SamplingFactor::R_4_2_2
    });
    e.set_restart_interval(restart);
    e.encode(&picture(w, h, seed), w as u16, h as u16, ColorType::Rgb)
        .unwrap();
    jpeg
}

#[test]
fn the_real_encoders_frames_decode_as_libjpeg_turbo_decodes_them() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let Ok(data) = std::fs::read(&path) else {
            continue;
        };
        if parse(&data).is_err() {
            continue; // what the normalizer remakes first
        }
        assert_eq!(
            ours(&data).unwrap(),
            turbo_eighth(&data),
            "{}",
            path.display()
        );
        checked.push(path);
    }
    // FFmpeg's and GStreamer's 4:2:0, cjpeg's at quality 2 and its 4:2:2
    // with a restart marker every MCU.
    assert_eq!(checked.len(), 4, "{checked:?}");
}

#[test]
fn a_short_buffer_or_a_wrong_restart_marker_is_an_error() {
    let jpeg = encode(64, 16, 1, 80, true, 1);
    let j = parse(&jpeg).unwrap();
    assert_eq!(dc_luma(&j, &mut [0u8; 15]), Err(DcError::Buffer));
    assert_eq!(dc_luma(&j, &mut [0u8; 16]), Ok((8, 2)));
    let rst = j.scan.windows(2).position(|w| w == [0xff, 0xd0]).unwrap();
    let mut scan = j.scan.to_vec();
    scan[rst + 1] = 0xd1;
    let wrong = Jpeg { scan: &scan, ..j };
    assert_eq!(dc_luma(&wrong, &mut [0u8; 16]), Err(DcError::Restart));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// At least 5 pixels wide: TurboJPEG decodes to the largest scale that
    /// fits the size asked for, and a picture of under 5x5 fits 1/4 (or
    /// more) in the size its eighth has, which is then no eighth.
    #[test]
    fn as_libjpeg_turbo_at_an_eighth(
        w in 5usize..200, h in 1usize..120, quality in 1u8..=100,
        four_two_zero: bool, restart in prop_oneof![Just(0u16), 1u16..20], seed: u32,
    ) {
        let jpeg = encode(w, h, seed, quality, four_two_zero, restart);
        prop_assert_eq!(ours(&jpeg).unwrap(), turbo_eighth(&jpeg));
    }

    /// A scan cut short or with bytes changed gives an error or a
    /// picture, never a panic.
    #[test]
    fn corrupt_scans_are_survived(
        cut in 0usize..3000,
        changes in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
    ) {
        let jpeg = encode(64, 48, 7, 80, true, 3);
        let j = parse(&jpeg).unwrap();
        let mut scan = j.scan.to_vec();
        for (at, b) in changes {
            let n = scan.len();
            scan[at % n] = b;
        }
        scan.truncate(cut);
        let j = Jpeg { scan: &scan, ..j };
        let mut out = [0u8; 48];
        let _ = dc_luma(&j, &mut out);
    }
}
