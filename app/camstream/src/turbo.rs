//! libjpeg-turbo through its TurboJPEG 2.x API (which libjpeg-turbo 3.x
//! still exports): the one place that holds TurboJPEG handles and calls
//! them. The [`Encoder`] makes baseline 4:2:0 with the standard Huffman
//! tables, which RFC 2435 carries as is; the [`Decoder`] reads headers,
//! decodes to planes (at a reduced scale if asked) or RGB, and transcodes
//! losslessly. Output goes into the caller's buffers, which keep their
//! capacity: once grown, nothing is allocated per frame.

use std::ffi::CStr;

use anyhow::{Result, bail};
use turbojpeg::{libc, raw};

use crate::convert::i420_plane_sizes;

/// A TurboJPEG instance, as one of the tjInit functions made it; freed once,
/// on drop. Never null: the "valid handle" of the SAFETY comments below.
struct Handle(raw::tjhandle);

// SAFETY: a TurboJPEG handle holds no thread-local state and may move
// between threads; its owner uses it from one thread at a time (an encoder
// moves into the test pattern's and the sub-stream's threads).
unsafe impl Send for Handle {}

impl Handle {
    /// `init` is tjInitCompress, tjInitDecompress or tjInitTransform.
    fn new(init: unsafe extern "C" fn() -> raw::tjhandle, what: &str) -> Result<Handle> {
        // SAFETY: no arguments; the handle is checked for null below.
        let handle = unsafe { init() };
        if handle.is_null() {
            bail!("libjpeg-turbo: cannot create a {what}");
        }
        Ok(Handle(handle))
    }

    /// Why the last call on this handle failed.
    fn error(&self) -> String {
        // SAFETY: TurboJPEG returns a NUL-terminated static or per-handle
        // string.
        unsafe { CStr::from_ptr(raw::tjGetErrorStr2(self.0)) }
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: a valid handle, freed once, here.
        unsafe { raw::tjDestroy(self.0) };
    }
}

/// Sets `out`'s length to the `len` bytes TurboJPEG wrote at its start,
/// after a call given `out`'s buffer with TJFLAG_NOREALLOC.
fn written(out: &mut Vec<u8>, dst: *mut u8, len: libc::c_ulong) {
    // NOREALLOC: TurboJPEG neither freed nor moved the buffer.
    assert!(dst == out.as_mut_ptr() && len as usize <= out.capacity());
    // SAFETY: TurboJPEG wrote `len` bytes at the start of the buffer.
    unsafe { out.set_len(len as usize) };
}

/// Encodes planar 4:2:0 or packed RGB as baseline 4:2:0 JPEG.
pub struct Encoder {
    handle: Handle,
    quality: libc::c_int,
}

impl Encoder {
    pub fn new(quality: u8) -> Result<Encoder> {
        Ok(Encoder {
            handle: Handle::new(raw::tjInitCompress, "compressor")?,
            quality: libc::c_int::from(quality),
        })
    }

    /// Encodes a 4:2:0 planar image (planes sized as [`i420_plane_sizes`],
    /// rows `width` resp. `width / 2` bytes apart) into `out`, replacing its
    /// contents.
    pub fn encode_i420(
        &mut self,
        planes: [&[u8]; 3],
        width: usize,
        height: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let sizes = i420_plane_sizes(width, height);
        self.encode_planes(planes, [width, sizes[1].0, sizes[2].0], width, height, out)
    }

    /// Like [`Encoder::encode_i420`] with rows `strides[i]` bytes apart, so
    /// planes can be read where the camera left them. `out` keeps its
    /// capacity, so steady-state encoding does not allocate; the worst-case
    /// capacity is reserved but only the bytes written are touched.
    pub fn encode_planes(
        &mut self,
        planes: [&[u8]; 3],
        strides: [usize; 3],
        width: usize,
        height: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let sizes = i420_plane_sizes(width, height);
        for ((p, (w, h)), stride) in planes.iter().zip(sizes).zip(strides) {
            assert!(
                stride >= w && p.len() >= stride * (h - 1) + w,
                "plane too small"
            );
        }
        let mut src = [planes[0].as_ptr(), planes[1].as_ptr(), planes[2].as_ptr()];
        let strides = strides.map(|s| s as libc::c_int);
        self.compress(out, width, height, |handle, dst, len, quality| {
            // SAFETY: the planes hold `strides` x plane height bytes (checked
            // above); the rest as in `compress`.
            unsafe {
                raw::tjCompressFromYUVPlanes(
                    handle,
                    src.as_mut_ptr(),
                    width as libc::c_int,
                    strides.as_ptr(),
                    height as libc::c_int,
                    raw::TJSAMP_TJSAMP_420 as libc::c_int,
                    dst,
                    len,
                    quality,
                    raw::TJFLAG_NOREALLOC as libc::c_int,
                )
            }
        })
    }

    /// Encodes packed 8-bit RGB or BGR (`bgr`) rows `pitch` bytes apart as
    /// 4:2:0.
    pub fn encode_rgb(
        &mut self,
        pixels: &[u8],
        pitch: usize,
        bgr: bool,
        width: usize,
        height: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        assert!(pitch >= width * 3 && pixels.len() >= pitch * (height - 1) + width * 3);
        let format = if bgr {
            raw::TJPF_TJPF_BGR
        } else {
            raw::TJPF_TJPF_RGB
        };
        self.compress(out, width, height, |handle, dst, len, quality| {
            // SAFETY: `pixels` holds `height` rows of `pitch` bytes (checked).
            unsafe {
                raw::tjCompress2(
                    handle,
                    pixels.as_ptr(),
                    width as libc::c_int,
                    pitch as libc::c_int,
                    height as libc::c_int,
                    format as libc::c_int,
                    dst,
                    len,
                    raw::TJSAMP_TJSAMP_420 as libc::c_int,
                    quality,
                    raw::TJFLAG_NOREALLOC as libc::c_int,
                )
            }
        })
    }

    /// Runs one TurboJPEG compression call into `out`, sized for the worst
    /// case of a `width` x `height` 4:2:0 image.
    fn compress(
        &mut self,
        out: &mut Vec<u8>,
        width: usize,
        height: usize,
        call: impl FnOnce(raw::tjhandle, *mut *mut u8, *mut libc::c_ulong, libc::c_int) -> libc::c_int,
    ) -> Result<()> {
        let (w, h) = (width as libc::c_int, height as libc::c_int);
        // SAFETY: a pure function of its arguments.
        let bound = unsafe { raw::tjBufSize(w, h, raw::TJSAMP_TJSAMP_420 as libc::c_int) } as usize;
        out.clear();
        out.reserve(bound);
        let mut dst = out.as_mut_ptr();
        let mut len = out.capacity() as libc::c_ulong;
        // `dst` has `len` writable bytes and NOREALLOC keeps TurboJPEG from
        // freeing or moving it.
        if call(self.handle.0, &mut dst, &mut len, self.quality) != 0 {
            bail!("libjpeg-turbo: {}", self.handle.error());
        }
        written(out, dst, len);
        Ok(())
    }
}

/// What a frame's header says decoding needs.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    pub width: usize,
    pub height: usize,
    /// TurboJPEG's sampling (TJSAMP_*), -1 for one it cannot classify.
    subsamp: libc::c_int,
    /// TurboJPEG's colour space (TJCS_*).
    colorspace: libc::c_int,
}

impl Header {
    /// One plane: grayscale.
    pub fn gray(&self) -> bool {
        self.subsamp == raw::TJSAMP_TJSAMP_GRAY as libc::c_int
    }

    /// YCbCr (or grayscale) in a sampling TurboJPEG knows: decodable to
    /// planes as they are coded. Other frames go through RGB pixels.
    pub fn planar(&self) -> bool {
        let yuv = self.colorspace == raw::TJCS_TJCS_YCbCr as libc::c_int
            || self.colorspace == raw::TJCS_TJCS_GRAY as libc::c_int;
        yuv && self.subsamp >= 0
    }
}

/// What a decode does about corrupt data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnWarning {
    /// An error, not a frame patched with grey (TJFLAG_STOPONWARNING).
    Stop,
    /// The picture as far as it decodes.
    Continue,
}

impl OnWarning {
    fn flags(self) -> libc::c_int {
        match self {
            OnWarning::Stop => raw::TJFLAG_STOPONWARNING as libc::c_int,
            OnWarning::Continue => 0,
        }
    }
}

/// Reads JPEG: headers, decodes, lossless transcodes. A transform handle,
/// which decompresses too.
pub struct Decoder {
    handle: Handle,
}

impl Decoder {
    pub fn new() -> Result<Decoder> {
        Ok(Decoder {
            handle: Handle::new(raw::tjInitTransform, "transformer")?,
        })
    }

    /// The frame's size, sampling and colour space.
    pub fn header(&self, jpeg: &[u8]) -> Result<Header> {
        let (mut w, mut h, mut ss, mut cs) = (0, 0, 0, 0);
        // SAFETY: a valid handle; reads `jpeg` only.
        let r = unsafe {
            raw::tjDecompressHeader3(
                self.handle.0,
                jpeg.as_ptr(),
                jpeg.len() as libc::c_ulong,
                &mut w,
                &mut h,
                &mut ss,
                &mut cs,
            )
        };
        if r != 0 || w <= 0 || h <= 0 {
            bail!("{}", self.handle.error());
        }
        Ok(Header {
            width: w as usize,
            height: h as usize,
            subsamp: ss,
            colorspace: cs,
        })
    }

    /// Decodes the frame `header` describes to its planes, as coded (one
    /// for grayscale, else three), at `size`: the frame's own size or one
    /// of the scaled sizes the decoder makes (M/8 of it, rounded up). Each
    /// plane goes into its buffer, rows as wide as the plane; returns the
    /// planes' sizes ((0, 0) for a plane the frame does not have).
    pub fn decode_planes(
        &self,
        jpeg: &[u8],
        header: &Header,
        (width, height): (usize, usize),
        planes: &mut [Vec<u8>; 3],
        on_warning: OnWarning,
    ) -> Result<[(usize, usize); 3]> {
        let count = if header.gray() { 1 } else { 3 };
        let mut sizes = [(0usize, 0usize); 3];
        for (i, size) in sizes.iter_mut().enumerate().take(count) {
            // SAFETY: pure functions of their arguments.
            let (pw, ph) = unsafe {
                (
                    raw::tjPlaneWidth(i as libc::c_int, width as libc::c_int, header.subsamp),
                    raw::tjPlaneHeight(i as libc::c_int, height as libc::c_int, header.subsamp),
                )
            };
            if pw <= 0 || ph <= 0 {
                bail!("{}", self.handle.error());
            }
            *size = (pw as usize, ph as usize);
            planes[i].resize(size.0 * size.1, 0);
        }
        let mut ptrs = [std::ptr::null_mut::<u8>(); 3];
        for (p, buf) in ptrs.iter_mut().zip(planes.iter_mut()).take(count) {
            *p = buf.as_mut_ptr();
        }
        let mut strides = sizes.map(|(w, _)| w as libc::c_int);
        // SAFETY: a valid handle; each plane buffer holds its width x height
        // bytes at the size asked for.
        let r = unsafe {
            raw::tjDecompressToYUVPlanes(
                self.handle.0,
                jpeg.as_ptr(),
                jpeg.len() as libc::c_ulong,
                ptrs.as_mut_ptr(),
                width as libc::c_int,
                strides.as_mut_ptr(),
                height as libc::c_int,
                on_warning.flags(),
            )
        };
        if r != 0 {
            bail!("{}", self.handle.error());
        }
        Ok(sizes)
    }

    /// Decodes the frame `header` describes to packed RGB in `out`, rows
    /// `3 x width` bytes apart.
    pub fn decode_rgb(
        &self,
        jpeg: &[u8],
        header: &Header,
        out: &mut Vec<u8>,
        on_warning: OnWarning,
    ) -> Result<()> {
        let pitch = header.width * 3;
        out.resize(pitch * header.height, 0);
        // SAFETY: a valid handle; the buffer holds height rows of `pitch`
        // bytes.
        let r = unsafe {
            raw::tjDecompress2(
                self.handle.0,
                jpeg.as_ptr(),
                jpeg.len() as libc::c_ulong,
                out.as_mut_ptr(),
                header.width as libc::c_int,
                pitch as libc::c_int,
                header.height as libc::c_int,
                raw::TJPF_TJPF_RGB as libc::c_int,
                on_warning.flags(),
            )
        };
        if r != 0 {
            bail!("{}", self.handle.error());
        }
        Ok(())
    }

    /// Lossless: the same coefficients as one baseline scan with Annex K
    /// Huffman tables (libjpeg's defaults), no APPn/COM markers, cropped to
    /// the top-left `width` x `height` (whole MCUs) of the `header`'s frame
    /// if that is smaller. Into `out`, replacing its contents; corrupt data
    /// is an error.
    pub fn transcode(
        &self,
        jpeg: &[u8],
        header: &Header,
        (width, height): (usize, usize),
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let mut options = raw::TJXOPT_COPYNONE as libc::c_int;
        if (width, height) != (header.width, header.height) {
            options |= raw::TJXOPT_CROP as libc::c_int;
        }
        let mut t = raw::tjtransform {
            r: raw::tjregion {
                x: 0,
                y: 0,
                w: width as libc::c_int,
                h: height as libc::c_int,
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
                width as libc::c_int,
                height as libc::c_int,
                raw::TJSAMP_TJSAMP_444 as libc::c_int,
            )
        };
        if bound == 0 || bound == libc::c_ulong::MAX {
            bail!("{}", self.handle.error());
        }
        out.clear();
        out.reserve(bound as usize);
        let mut dst = out.as_mut_ptr();
        let mut len = out.capacity() as libc::c_ulong;
        // SAFETY: a valid handle; `dst` has `len` writable bytes; NOREALLOC
        // keeps TurboJPEG from replacing it.
        let r = unsafe {
            raw::tjTransform(
                self.handle.0,
                jpeg.as_ptr(),
                jpeg.len() as libc::c_ulong,
                1,
                &mut dst,
                &mut len,
                &mut t,
                (raw::TJFLAG_NOREALLOC | raw::TJFLAG_STOPONWARNING) as libc::c_int,
            )
        };
        if r != 0 {
            bail!("{}", self.handle.error());
        }
        written(out, dst, len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_a_frame_rfc2435_can_carry() {
        let (w, h) = (322, 180);
        let planes: Vec<Vec<u8>> = i420_plane_sizes(w, h)
            .iter()
            .enumerate()
            .map(|(i, &(pw, ph))| (0..pw * ph).map(|p| (p * (i + 3)) as u8).collect())
            .collect();
        let mut enc = Encoder::new(75).unwrap();
        let mut out = Vec::new();
        enc.encode_i420([&planes[0], &planes[1], &planes[2]], w, h, &mut out)
            .unwrap();
        let j = camstream_rtp::jpeg::parse(&out).unwrap();
        assert_eq!((j.width, j.height), (322, 180));
        assert_eq!(j.rtp_type(), 1);
        let cap = out.capacity();
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i % 251) as u8).collect();
        let mut rgb_out = Vec::new();
        enc.encode_rgb(&rgb, w * 3, true, w, h, &mut rgb_out)
            .unwrap();
        assert_eq!(camstream_rtp::jpeg::parse(&rgb_out).unwrap().rtp_type(), 1);
        enc.encode_i420([&planes[0], &planes[1], &planes[2]], w, h, &mut out)
            .unwrap();
        assert_eq!(out.capacity(), cap);
    }

    /// The decoder reads back what the encoder made: its size, three
    /// planes at full and at half scale, RGB pixels; and says why it
    /// cannot read what is not a JPEG.
    #[test]
    fn decodes_what_the_encoder_made() {
        let (w, h) = (64, 48);
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i % 241) as u8).collect();
        let mut jpeg = Vec::new();
        Encoder::new(90)
            .unwrap()
            .encode_rgb(&rgb, w * 3, false, w, h, &mut jpeg)
            .unwrap();
        let d = Decoder::new().unwrap();
        let header = d.header(&jpeg).unwrap();
        assert_eq!((header.width, header.height), (w, h));
        assert!(header.planar() && !header.gray());
        let mut planes: [Vec<u8>; 3] = Default::default();
        let sizes = d
            .decode_planes(&jpeg, &header, (w, h), &mut planes, OnWarning::Stop)
            .unwrap();
        assert_eq!(sizes, i420_plane_sizes(w, h));
        let half = d
            .decode_planes(&jpeg, &header, (w / 2, h / 2), &mut planes, OnWarning::Stop)
            .unwrap();
        assert_eq!(half, i420_plane_sizes(w / 2, h / 2));
        let mut pixels = Vec::new();
        d.decode_rgb(&jpeg, &header, &mut pixels, OnWarning::Stop)
            .unwrap();
        assert_eq!(pixels.len(), w * h * 3);
        let mut out = Vec::new();
        d.transcode(&jpeg, &header, (w, 40), &mut out).unwrap();
        let j = camstream_rtp::jpeg::parse(&out).unwrap();
        assert_eq!((j.width, j.height), (64, 40));
        let e = d.header(b"not a jpeg").unwrap_err().to_string();
        assert!(!e.is_empty());
    }
}
