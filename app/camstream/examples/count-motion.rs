//! The motion detector's workload for counting instructions (callgrind):
//! each JPEG file given is decoded to its DC coefficients alone (an eighth
//! of its size, luma only: what the detector looks at), and fed to the
//! detector, ROUNDS times. Run twice with different ROUNDS, the difference
//! is the cost of the extra frames alone. `--detector` counts the detector
//! alone on pictures decoded once; `--turbo` decodes with libjpeg-turbo at
//! 1/8 scale instead of camstream-rtp's DC decoder (what it replaced).
//!
//!     count-motion [--detector | --turbo] ROUNDS FRAME.jpg...

use std::hint::black_box;

use camstream_motion::{Detector, Settings};
use turbojpeg::{Decompressor, Image, PixelFormat};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: count-motion [--detector | --turbo] ROUNDS FRAME.jpg...";
    let flag = |args: &mut Vec<String>, name: &str| {
        let set = args.first().is_some_and(|a| a == name);
        if set {
            args.remove(0);
        }
        set
    };
    let detector_only = flag(&mut args, "--detector");
    let turbo = flag(&mut args, "--turbo");
    let rounds: u32 = args.first().and_then(|r| r.parse().ok()).expect(usage);
    let frames: Vec<Vec<u8>> = args[1..]
        .iter()
        .map(|f| std::fs::read(f).unwrap_or_else(|e| panic!("{f}: {e}")))
        .collect();
    assert!(!frames.is_empty(), "{usage}");
    let mut d = Decompressor::new().expect("a decompressor");
    let header = d.read_header(&frames[0]).expect("a JPEG");
    // tjDecompress2 takes the largest scale that fits: 1/8.
    let (w, h) = (header.width.div_ceil(8), header.height.div_ceil(8));
    let mut decode = |jpeg: &[u8], luma: &mut Vec<u8>| {
        if !turbo {
            let j = camstream_rtp::jpeg::parse(jpeg).expect("a frame RTP/JPEG carries");
            camstream_rtp::jpeg::dc_luma(&j, luma).expect("decoded");
            return;
        }
        let image = Image {
            pixels: luma.as_mut_slice(),
            width: w,
            pitch: w,
            height: h,
            format: PixelFormat::GRAY,
        };
        d.decompress(jpeg, image).expect("decoded");
    };
    let mut pictures: Vec<Vec<u8>> = Vec::new();
    if detector_only {
        for f in &frames {
            let mut luma = vec![0u8; w * h];
            decode(f, &mut luma);
            pictures.push(luma);
        }
    }
    let mut detector = Detector::new(Settings::default()).expect("default settings");
    let mut luma = vec![0u8; w * h];
    let mut t = 0u64;
    let mut events = 0;
    for _ in 0..rounds {
        for (i, f) in frames.iter().enumerate() {
            let pic = if detector_only {
                &pictures[i]
            } else {
                decode(black_box(f), &mut luma);
                &luma
            };
            t += 200;
            events += usize::from(detector.feed(black_box(pic), w, h, w, t).is_some());
        }
    }
    println!(
        "{} frames of {w}x{h}, {events} events",
        rounds as usize * frames.len()
    );
}
