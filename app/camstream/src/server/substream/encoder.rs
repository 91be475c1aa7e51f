//! The detection sub-stream's encoder: a main-stream frame decoded by
//! libjpeg-turbo at a reduced scale (its IDCT makes M/8 sizes for little
//! more than the cost of entropy decoding, so 1/2, 1/4, 1/8 are cheap), the
//! planes box-filtered down to the sub-stream's size and encoded as 4:2:0.

use anyhow::Result;

use super::super::i420::ToI420;
use super::super::worker::Encode;
use crate::turbo::Encoder;

pub struct SubEncoder {
    i420: ToI420,
    encoder: Encoder,
    /// The sub-stream's size (multiples of 8).
    width: usize,
    height: usize,
}

/// The smallest size libjpeg-turbo's scaled decode makes (M/8 of the
/// source, M = 1..8, rounded up) that still covers `target`: what is then
/// box-filtered down. A source smaller than the target is decoded whole.
pub fn scaled_size(src: (usize, usize), target: (usize, usize)) -> (usize, usize) {
    for m in 1..=8 {
        let size = ((src.0 * m).div_ceil(8), (src.1 * m).div_ceil(8));
        if size.0 >= target.0 && size.1 >= target.1 {
            return size;
        }
    }
    src
}

/// The sub-stream's size for a source: the configured size, never larger
/// than the source, in multiples of 8 (RFC 2435 counts in 8-pixel blocks).
pub fn sub_size(src: (usize, usize), configured: (usize, usize)) -> (usize, usize) {
    let w = configured.0.min(src.0) / 8 * 8;
    let h = configured.1.min(src.1) / 8 * 8;
    (w.max(8), h.max(8))
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
    fn encode(&mut self, jpeg: &[u8], _key: bool, out: &mut Vec<u8>) -> Result<()> {
        let configured = (self.width, self.height);
        let (tw, th) = self.i420.convert_to(jpeg, |src| {
            let target = sub_size(src, configured);
            // One of the sizes the decoder makes (M/8 of the frame's).
            Some((scaled_size(src, target), target))
        })?;
        let [y, u, v] = &self.i420.planes;
        self.encoder
            .encode_planes([y, u, v], ToI420::strides((tw, th)), tw, th, out)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::resample_plane;
    use crate::server::worker::Worker;

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
    fn sizes() {
        // 720p to 640x360: exactly half.
        assert_eq!(scaled_size((1280, 720), (640, 360)), (640, 360));
        // 1080p: 3/8 is 720x405, the smallest covering 640x360.
        assert_eq!(scaled_size((1920, 1080), (640, 360)), (720, 405));
        // 4K to 320x180: 1/8 is 480x270.
        assert_eq!(scaled_size((3840, 2160), (320, 180)), (480, 270));
        assert_eq!(scaled_size((320, 240), (640, 360)), (320, 240));
        assert_eq!(sub_size((1920, 1080), (640, 360)), (640, 360));
        assert_eq!(sub_size((320, 240), (640, 360)), (320, 240));
        assert_eq!(sub_size((1920, 1080), (642, 363)), (640, 360));
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
        enc.encode(&src, false, &mut out).unwrap();
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
