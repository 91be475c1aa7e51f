//! Makes frames RTP/JPEG cannot carry as they are carryable, keeping the
//! picture, with libjpeg-turbo:
//! - optimized or other non-standard Huffman tables, progressive,
//!   arithmetic-coded or multi-scan frames: a lossless transcode of the same
//!   DCT coefficients into one baseline scan with the standard tables;
//! - sizes that are not multiples of 8 (RTP/JPEG headers count 8-pixel
//!   blocks): a lossless crop to the multiple of 8 below, in the same pass;
//! - grayscale, 4:4:4, 4:1:1 and other samplings, a separate Cr
//!   quantization table, RGB: decode and encode again as 4:2:0.
//!
//! Which remedy a fault calls for is decided in `camstream_rtp::jpeg`; this
//! is the I/O side. Buffers are kept between frames, so a camera whose every
//! frame needs the same fix does not allocate per frame.

use anyhow::{Context, Result, bail};
use camstream_rtp::jpeg::{self, Jpeg, JpegError, Remedy};

use crate::convert::{i420_plane_sizes, resample_plane};
use crate::turbo::{Decoder, Encoder, Header, OnWarning};

pub struct Normalizer {
    decoder: Decoder,
    encoder: Encoder,
    out: Vec<u8>,
    decoded: [Vec<u8>; 3],
    i420: [Vec<u8>; 3],
    /// Frames with more pixels are refused before any buffer is sized for
    /// them: a corrupt header can claim 65535x65535 (12 GiB of output).
    max_pixels: usize,
}

/// What was done to a frame (what the log and /metrics count as repaired);
/// the parser's [`Remedy`] says what could be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    Transcoded,
    Cropped,
    Reencoded,
}

impl Repair {
    pub fn describe(self) -> &'static str {
        match self {
            Repair::Transcoded => {
                "transcoded losslessly to baseline with the standard Huffman tables"
            }
            Repair::Cropped => "cropped losslessly to a multiple of 8 pixels",
            Repair::Reencoded => "re-encoded as 4:2:0",
        }
    }
}

impl Normalizer {
    /// `max_pixels`: the most a frame may have (the stream's, with room).
    pub fn new(quality: u8, max_pixels: usize) -> Result<Normalizer> {
        Ok(Normalizer {
            decoder: Decoder::new()?,
            encoder: Encoder::new(quality)?,
            out: Vec::new(),
            decoded: Default::default(),
            i420: Default::default(),
            max_pixels,
        })
    }

    /// The frame's header, and its size cropped to whole 8-pixel blocks.
    fn header(&self, src: &[u8]) -> Result<(Header, (usize, usize))> {
        let h = self.decoder.header(src)?;
        if h.width * h.height > self.max_pixels {
            bail!(
                "a {}x{} frame is larger than this stream's frames can be",
                h.width,
                h.height
            );
        }
        let (w8, h8) = (h.width & !7, h.height & !7);
        if w8 == 0 || h8 == 0 {
            bail!("smaller than 8x8");
        }
        Ok((h, (w8, h8)))
    }

    /// A frame RTP/JPEG can carry made from `src`, which failed to parse
    /// with `fault` (None: it parsed, but its size is not a multiple of 8),
    /// parsed and ready to packetize. Errors mean the frame cannot be sent.
    pub fn normalize(
        &mut self,
        src: &[u8],
        fault: Option<JpegError>,
    ) -> Result<(Jpeg<'_>, Repair)> {
        let remedy = match fault {
            None => Remedy::Transcode,
            Some(e) => e.remedy().context("cannot be repaired")?,
        };
        let repair = match remedy {
            Remedy::Transcode => match self.transcode(src) {
                Ok(()) => match jpeg::parse(&self.out).err() {
                    None if fault.is_none() => Repair::Cropped,
                    None => Repair::Transcoded,
                    // E.g. progressive 4:4:4: now baseline, still 4:4:4.
                    Some(e) if e.remedy() == Some(Remedy::Reencode) => {
                        self.reencode(src)?;
                        Repair::Reencoded
                    }
                    Some(e) => bail!("transcoded frame still unsendable: {e}"),
                },
                // TurboJPEG could not classify the sampling: decode it.
                Err(_) => {
                    self.reencode(src)?;
                    Repair::Reencoded
                }
            },
            Remedy::Reencode => {
                self.reencode(src)?;
                Repair::Reencoded
            }
        };
        match jpeg::parse(&self.out) {
            Ok(j) => Ok((j, repair)),
            Err(e) => bail!("repaired frame still unsendable: {e}"),
        }
    }

    /// Lossless: same coefficients, one baseline scan, the standard
    /// Huffman tables, cropped to whole 8-pixel blocks.
    fn transcode(&mut self, src: &[u8]) -> Result<()> {
        let (h, size) = self.header(src)?;
        self.decoder.transcode(src, &h, size, &mut self.out)
    }

    /// Decodes to planes and encodes 4:2:0, cropped to whole 8-pixel blocks.
    fn reencode(&mut self, src: &[u8]) -> Result<()> {
        let (h, (w8, h8)) = self.header(src)?;
        if !h.planar() {
            // RGB-coded (or unclassifiable) frames: through RGB pixels.
            self.decoder
                .decode_rgb(src, &h, &mut self.decoded[0], OnWarning::Stop)?;
            return self.encoder.encode_rgb(
                &self.decoded[0],
                h.width * 3,
                false,
                w8,
                h8,
                &mut self.out,
            );
        }
        let sizes = self.decoder.decode_planes(
            src,
            &h,
            (h.width, h.height),
            &mut self.decoded,
            OnWarning::Stop,
        )?;
        let i420 = i420_plane_sizes(h.width, h.height);
        for i in 1..3 {
            let (cw, ch) = i420[i];
            self.i420[i].resize(cw * ch, 128);
            if h.gray() {
                self.i420[i].fill(128);
            } else {
                let (sw, sh) = sizes[i];
                resample_plane(&self.decoded[i], sw, sh, &mut self.i420[i], cw, ch);
            }
        }
        // Cropping: the encoder reads the top-left w8 x h8 of the planes.
        self.encoder.encode_planes(
            [&self.decoded[0], &self.i420[1], &self.i420[2]],
            [sizes[0].0, i420[1].0, i420[2].0],
            w8,
            h8,
            &mut self.out,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn testdata(name: &str) -> Vec<u8> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../camstream-rtp/testdata/");
        std::fs::read(format!("{dir}{name}")).unwrap()
    }

    fn rgb(jpeg: &[u8]) -> turbojpeg::Image<Vec<u8>> {
        turbojpeg::decompress(jpeg, turbojpeg::PixelFormat::RGB).unwrap()
    }

    /// Luma only: no chroma upsampling, which differs at cropped edges.
    fn luma(jpeg: &[u8]) -> turbojpeg::Image<Vec<u8>> {
        turbojpeg::decompress(jpeg, turbojpeg::PixelFormat::GRAY).unwrap()
    }

    fn psnr(a: &[u8], b: &[u8]) -> f64 {
        assert_eq!(a.len(), b.len());
        let se: f64 = a
            .iter()
            .zip(b)
            .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
            .sum();
        10.0 * (255.0f64.powi(2) / (se / a.len() as f64)).log10()
    }

    /// Every frame from a real encoder that the parser refuses but that can
    /// be repaired comes out sendable: the lossless fixes decode to the very
    /// same pixels, the re-encoded ones to nearly the same picture.
    #[test]
    fn repairs_frames_from_real_encoders() {
        let mut n = Normalizer::new(90, 160 * 120).unwrap();
        for (file, want) in [
            (
                "ffmpeg-5.1-mjpeg-yuvj420p-huffman-optimal-160x120.jpg",
                Repair::Transcoded,
            ),
            (
                "libjpeg-turbo-2.1-cjpeg-optimize-160x120.jpg",
                Repair::Transcoded,
            ),
            (
                "libjpeg-turbo-2.1-cjpeg-progressive-160x120.jpg",
                Repair::Transcoded,
            ),
            (
                "libjpeg-turbo-2.1-cjpeg-arithmetic-160x120.jpg",
                Repair::Transcoded,
            ),
            (
                "ffmpeg-5.1-mjpeg-yuvj422p-huffman-default-160x120.jpg",
                Repair::Reencoded,
            ),
            (
                "libjpeg-turbo-2.1-cjpeg-grayscale-160x120.jpg",
                Repair::Reencoded,
            ),
            (
                "libjpeg-turbo-2.1-cjpeg-sample-1x1-160x120.jpg",
                Repair::Reencoded,
            ),
            ("libjpeg-turbo-2.1-cjpeg-rgb-160x120.jpg", Repair::Reencoded),
        ] {
            let src = testdata(file);
            let fault = jpeg::parse(&src).unwrap_err();
            let (j, fix) = n.normalize(&src, Some(fault)).unwrap();
            assert_eq!((j.width, j.height, fix), (160, 120, want), "{file}");
            let out = &n.out.clone();
            let (a, b) = (rgb(&src), rgb(out));
            if want == Repair::Transcoded {
                assert!(a.pixels == b.pixels, "{file}: transcoding changed pixels");
            } else {
                // One generation at quality 90: luma nearly the same; colour
                // close (chroma halved; swapped or shifted planes score far
                // lower).
                let y = psnr(&luma(&src).pixels, &luma(out).pixels);
                let c = psnr(&a.pixels, &b.pixels);
                assert!(
                    y > 35.0 && c > 22.0,
                    "{file}: PSNR luma {y:.1} dB, RGB {c:.1} dB"
                );
            }
        }
    }

    #[test]
    fn crops_to_whole_blocks_and_refuses_broken_frames() {
        let mut n = Normalizer::new(90, 160 * 120).unwrap();
        let src = turbojpeg::compress(
            turbojpeg::Image {
                pixels: &(0..100 * 60 * 3)
                    .map(|i| (i % 253) as u8)
                    .collect::<Vec<u8>>()[..],
                width: 100,
                height: 60,
                pitch: 300,
                format: turbojpeg::PixelFormat::RGB,
            },
            90,
            turbojpeg::Subsamp::Sub2x2,
        )
        .unwrap();
        assert!(jpeg::parse(&src).is_ok());
        let (j, fix) = n.normalize(&src, None).unwrap();
        assert_eq!((j.width, j.height, fix), (96, 56, Repair::Cropped));
        let out = &n.out.clone();
        let (a, b) = (luma(&src), luma(out));
        for y in 0..56 {
            assert_eq!(
                a.pixels[y * 100..y * 100 + 96],
                b.pixels[y * 96..(y + 1) * 96]
            );
        }

        let baseline = testdata("ffmpeg-5.1-mjpeg-yuvj420p-huffman-default-160x120.jpg");
        let fault = jpeg::parse(&baseline[..baseline.len() / 2]).unwrap_err();
        assert_eq!(fault, JpegError::Truncated);
        assert_eq!(fault.remedy(), None);
        assert!(
            n.normalize(&baseline[..baseline.len() / 2], Some(fault))
                .is_err()
        );
        let good = testdata("libjpeg-turbo-2.1-cjpeg-progressive-160x120.jpg");
        assert!(
            n.normalize(&good[..good.len() / 2], Some(JpegError::Progressive))
                .is_err()
        );
        // A cut in the middle of the scan of a frame that needs transcoding:
        // an error, not a frame patched with grey.
        let mut cut = good[..good.len() * 3 / 4].to_vec();
        cut.extend_from_slice(&[0xff, 0xd9]);
        assert!(n.normalize(&cut, Some(JpegError::Progressive)).is_err());
    }

    /// A corrupt header claiming a huge frame is refused before anything is
    /// sized for it (it used to abort the daemon on a 12 GiB allocation).
    #[test]
    fn refuses_frames_larger_than_the_stream() {
        let mut src = testdata("libjpeg-turbo-2.1-cjpeg-progressive-160x120.jpg");
        let sof = src.windows(2).position(|w| w == [0xff, 0xc2]).unwrap();
        src[sof + 5..sof + 9].copy_from_slice(&[0xfd, 0xe8, 0xfd, 0xe8]); // 65000x65000
        let fault = jpeg::parse(&src).err();
        let mut n = Normalizer::new(90, 4 * 160 * 120).unwrap();
        let e = n.normalize(&src, fault).unwrap_err().to_string();
        assert!(e.contains("65000x65000 frame is larger"), "{e}");
    }
}
