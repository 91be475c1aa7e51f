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
use turbojpeg::{libc, raw};

use crate::convert::resample_plane;
use crate::jpegenc::{YuvEncoder, i420_plane_sizes, last_error};

pub struct Normalizer {
    handle: raw::tjhandle,
    encoder: YuvEncoder,
    out: Vec<u8>,
    decoded: [Vec<u8>; 3],
    i420: [Vec<u8>; 3],
    /// Frames with more pixels are refused before any buffer is sized for
    /// them: a corrupt header can claim 65535x65535 (12 GiB of output).
    max_pixels: usize,
}

impl Drop for Normalizer {
    fn drop(&mut self) {
        // SAFETY: the handle came from tjInitTransform (never null here)
        // and is freed once, here.
        unsafe { raw::tjDestroy(self.handle) };
    }
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

struct Header {
    width: usize,
    height: usize,
    subsamp: libc::c_int,
    colorspace: libc::c_int,
}

impl Normalizer {
    /// `max_pixels`: the most a frame may have (the stream's, with room).
    pub fn new(quality: u8, max_pixels: usize) -> Result<Normalizer> {
        // A transform handle decompresses and compresses too.
        // SAFETY: no arguments; the handle is checked for null below.
        let handle = unsafe { raw::tjInitTransform() };
        if handle.is_null() {
            bail!("libjpeg-turbo: cannot create a transformer");
        }
        Ok(Normalizer {
            handle,
            encoder: YuvEncoder::new(quality)?,
            out: Vec::new(),
            decoded: Default::default(),
            i420: Default::default(),
            max_pixels,
        })
    }

    fn error(&self) -> String {
        last_error(self.handle)
    }

    fn header(&self, src: &[u8]) -> Result<Header> {
        let (mut w, mut h, mut ss, mut cs) = (0, 0, 0, 0);
        // SAFETY: reads `src` only.
        let r = unsafe {
            raw::tjDecompressHeader3(
                self.handle,
                src.as_ptr(),
                src.len() as libc::c_ulong,
                &mut w,
                &mut h,
                &mut ss,
                &mut cs,
            )
        };
        if r != 0 || w <= 0 || h <= 0 {
            bail!("{}", self.error());
        }
        if w as usize * h as usize > self.max_pixels {
            bail!("a {w}x{h} frame is larger than this stream's frames can be");
        }
        Ok(Header {
            width: w as usize,
            height: h as usize,
            subsamp: ss,
            colorspace: cs,
        })
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

    /// Lossless: same coefficients, one baseline scan, Annex K Huffman
    /// tables (libjpeg's defaults), no APPn/COM markers, cropped to whole
    /// 8-pixel blocks.
    fn transcode(&mut self, src: &[u8]) -> Result<()> {
        let h = self.header(src)?;
        let (w8, h8) = (h.width & !7, h.height & !7);
        if w8 == 0 || h8 == 0 {
            bail!("smaller than 8x8");
        }
        let mut options = raw::TJXOPT_COPYNONE as libc::c_int;
        if (w8, h8) != (h.width, h.height) {
            options |= raw::TJXOPT_CROP as libc::c_int;
        }
        let mut t = raw::tjtransform {
            r: raw::tjregion {
                x: 0,
                y: 0,
                w: w8 as libc::c_int,
                h: h8 as libc::c_int,
            },
            op: raw::TJXOP_TJXOP_NONE as libc::c_int,
            options,
            data: std::ptr::null_mut(),
            customFilter: None,
        };
        // TurboJPEG checks against the bound for the frame's own sampling,
        // which 4:4:4's bound covers.
        // SAFETY: a pure function of its arguments.
        let bound = unsafe {
            raw::tjBufSize(
                w8 as libc::c_int,
                h8 as libc::c_int,
                raw::TJSAMP_TJSAMP_444 as libc::c_int,
            )
        };
        if bound == 0 || bound == libc::c_ulong::MAX {
            bail!("{}", self.error());
        }
        self.out.clear();
        self.out.reserve(bound as usize);
        let mut dst = self.out.as_mut_ptr();
        let mut len = self.out.capacity() as libc::c_ulong;
        // SAFETY: `dst` has `len` writable bytes; NOREALLOC keeps TurboJPEG
        // from replacing it. STOPONWARNING: corrupt data is an error, not
        // a frame patched with grey.
        let r = unsafe {
            raw::tjTransform(
                self.handle,
                src.as_ptr(),
                src.len() as libc::c_ulong,
                1,
                &mut dst,
                &mut len,
                &mut t,
                (raw::TJFLAG_NOREALLOC | raw::TJFLAG_STOPONWARNING) as libc::c_int,
            )
        };
        if r != 0 {
            bail!("{}", self.error());
        }
        assert!(dst == self.out.as_mut_ptr() && len as usize <= self.out.capacity());
        // SAFETY: TurboJPEG wrote `len` bytes at the start of the buffer.
        unsafe { self.out.set_len(len as usize) };
        Ok(())
    }

    /// Decodes to planes and encodes 4:2:0, cropped to whole 8-pixel blocks.
    fn reencode(&mut self, src: &[u8]) -> Result<()> {
        let h = self.header(src)?;
        let (w8, h8) = (h.width & !7, h.height & !7);
        if w8 == 0 || h8 == 0 {
            bail!("smaller than 8x8");
        }
        let flags = raw::TJFLAG_STOPONWARNING as libc::c_int;
        let i420 = i420_plane_sizes(h.width, h.height);
        let yuv = h.colorspace == raw::TJCS_TJCS_YCbCr as libc::c_int
            || h.colorspace == raw::TJCS_TJCS_GRAY as libc::c_int;
        if !yuv || h.subsamp < 0 {
            // RGB-coded (or unclassifiable) frames: through RGB pixels.
            let pitch = h.width * 3;
            self.decoded[0].resize(pitch * h.height, 0);
            // SAFETY: the buffer holds height rows of `pitch` bytes.
            let r = unsafe {
                raw::tjDecompress2(
                    self.handle,
                    src.as_ptr(),
                    src.len() as libc::c_ulong,
                    self.decoded[0].as_mut_ptr(),
                    h.width as libc::c_int,
                    pitch as libc::c_int,
                    h.height as libc::c_int,
                    raw::TJPF_TJPF_RGB as libc::c_int,
                    flags,
                )
            };
            if r != 0 {
                bail!("{}", self.error());
            }
            return self
                .encoder
                .encode_rgb(&self.decoded[0], pitch, false, w8, h8, &mut self.out);
        }
        let planes = if h.subsamp == raw::TJSAMP_TJSAMP_GRAY as libc::c_int {
            1
        } else {
            3
        };
        let mut sizes = [(0usize, 0usize); 3];
        for (i, size) in sizes.iter_mut().enumerate().take(planes) {
            // SAFETY: pure functions of their arguments.
            let (pw, ph) = unsafe {
                (
                    raw::tjPlaneWidth(i as libc::c_int, h.width as libc::c_int, h.subsamp),
                    raw::tjPlaneHeight(i as libc::c_int, h.height as libc::c_int, h.subsamp),
                )
            };
            if pw <= 0 || ph <= 0 {
                bail!("{}", self.error());
            }
            *size = (pw as usize, ph as usize);
            self.decoded[i].resize(size.0 * size.1, 0);
        }
        let mut ptrs = [std::ptr::null_mut::<u8>(); 3];
        for (p, buf) in ptrs.iter_mut().zip(&mut self.decoded).take(planes) {
            *p = buf.as_mut_ptr();
        }
        let mut strides = sizes.map(|(w, _)| w as libc::c_int);
        // SAFETY: each plane buffer holds its width x height bytes.
        let r = unsafe {
            raw::tjDecompressToYUVPlanes(
                self.handle,
                src.as_ptr(),
                src.len() as libc::c_ulong,
                ptrs.as_mut_ptr(),
                h.width as libc::c_int,
                strides.as_mut_ptr(),
                h.height as libc::c_int,
                flags,
            )
        };
        if r != 0 {
            bail!("{}", self.error());
        }
        for i in 1..3 {
            let (cw, ch) = i420[i];
            self.i420[i].resize(cw * ch, 128);
            if planes == 1 {
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
