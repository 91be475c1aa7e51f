//! The detection sub-stream's encoder: a main-stream frame decoded by
//! libjpeg-turbo at a reduced scale (its IDCT makes M/8 sizes for little
//! more than the cost of entropy decoding, so 1/2, 1/4, 1/8 are cheap), the
//! planes box-filtered down to the sub-stream's size and encoded as 4:2:0.

use anyhow::Result;

use super::super::i420::ToI420;
use super::super::worker::{Encode, Picture};
use crate::turbo::Encoder;

pub struct SubEncoder {
    i420: ToI420,
    encoder: Encoder,
    /// The sub-stream's size (multiples of 8).
    width: usize,
    height: usize,
}

impl SubEncoder {
    pub fn new(width: usize, height: usize, quality: u8) -> Result<SubEncoder> {
        Ok(SubEncoder {
            i420: ToI420::new()?,
            encoder: Encoder::new(quality)?,
            width,
            height,
        })
    }
}

impl Encode for SubEncoder {
    /// The sub-stream's JPEG made from a main-stream frame; every JPEG is
    /// a key frame: `key` asks for nothing.
    fn encode(&mut self, pic: Picture<'_>, _key: bool, out: &mut Vec<u8>) -> Result<()> {
        let ([y, u, v], (tw, th)) = self.i420.picture(pic, Some((self.width, self.height)))?;
        self.encoder
            .encode_planes([y, u, v], ToI420::strides((tw, th)), tw, th, out)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::resample_plane;
    use crate::media::worker::Worker;

    #[test]
    fn the_worker_encodes_one_frame_at_a_time_and_wakes_the_loop() {
        let src = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../camstream-rtp/testdata/ffmpeg-5.1-mjpeg-yuvj420p-huffman-default-160x120.jpg"
        ))
        .unwrap();
        let mut poll = mio::Poll::new().unwrap();
        let waker = std::sync::Arc::new(mio::Waker::new(poll.registry(), mio::Token(9)).unwrap());
        let mut w =
            Worker::start(SubEncoder::new(80, 64, 75).unwrap(), "sub-stream", waker).unwrap();
        let t = crate::clock::Mono(42);
        assert!(w.offer(&src, t, false));
        // Busy: the next frame is not taken.
        assert!(!w.offer(&src, t, false));
        let mut events = mio::Events::with_capacity(4);
        poll.poll(&mut events, Some(std::time::Duration::from_secs(10)))
            .unwrap();
        assert!(events.iter().any(|e| e.token() == mio::Token(9)));
        let d = w.take().unwrap();
        d.made.unwrap();
        let jpeg = d.out;
        assert_eq!(d.captured.0, 42);
        let img = turbojpeg::decompress(&jpeg, turbojpeg::PixelFormat::GRAY).unwrap();
        assert_eq!((img.width, img.height), (80, 64));
        // Free again; a broken frame comes back as an error, not a crash.
        assert!(w.offer(b"not a jpeg", t, false));
        poll.poll(&mut events, Some(std::time::Duration::from_secs(10)))
            .unwrap();
        assert!(w.take().unwrap().made.is_err());
    }

    #[test]
    fn a_frame_becomes_the_sub_streams_size_and_picture() {
        let src = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../camstream-rtp/testdata/ffmpeg-5.1-mjpeg-yuvj420p-huffman-default-160x120.jpg"
        ))
        .unwrap();
        let mut enc = SubEncoder::new(80, 64, 75).unwrap();
        let mut out = Vec::new();
        enc.encode(Picture::Jpeg(&src), false, &mut out).unwrap();
        let img = turbojpeg::decompress(&out, turbojpeg::PixelFormat::GRAY).unwrap();
        assert_eq!((img.width, img.height), (80, 64));
        // The picture is the source's, smaller: compare with the source
        // decoded and box-filtered the same way.
        let full = turbojpeg::decompress(&src, turbojpeg::PixelFormat::GRAY).unwrap();
        let mut want = vec![0u8; 80 * 64];
        resample_plane(&full.pixels, 160, 120, &mut want, 80, 64);
        let diff: f64 = img
            .pixels
            .iter()
            .zip(&want)
            .map(|(a, b)| (f64::from(*a) - f64::from(*b)).abs())
            .sum::<f64>()
            / want.len() as f64;
        // Re-encoding at quality 75 and the IDCT's scaling leave a few
        // levels; a wrong picture (the same frame upside down) is far off.
        assert!(diff < 10.0, "mean difference {diff}");
        let flipped: f64 = img
            .pixels
            .chunks(80)
            .rev()
            .flatten()
            .zip(&want)
            .map(|(a, b)| (f64::from(*a) - f64::from(*b)).abs())
            .sum::<f64>()
            / want.len() as f64;
        assert!(
            flipped > 3.0 * diff,
            "upside down: {flipped}, as it is: {diff}"
        );
    }
}
