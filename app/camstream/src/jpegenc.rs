//! JPEG encoding of planar YUV with libjpeg-turbo (TurboJPEG 2.x API, which
//! libjpeg-turbo 3.x still exports). Output is baseline with the standard
//! Huffman tables, so it goes to RFC 2435 as is.

use std::ffi::CStr;

use anyhow::{Result, bail};
use turbojpeg::{libc, raw};

pub struct YuvEncoder {
    handle: raw::tjhandle,
    quality: i32,
}

// SAFETY: a TurboJPEG handle holds no thread-local state and may move
// between threads; owned by the encoder, it is used by one thread at a time
// (the encoder moves into the test pattern's thread).
unsafe impl Send for YuvEncoder {}

impl Drop for YuvEncoder {
    fn drop(&mut self) {
        // SAFETY: the handle came from tjInitCompress (never null here) and
        // is freed once, here.
        unsafe { raw::tjDestroy(self.handle) };
    }
}

pub fn last_error(handle: raw::tjhandle) -> String {
    // SAFETY: TurboJPEG returns a NUL-terminated static or per-handle string.
    unsafe { CStr::from_ptr(raw::tjGetErrorStr2(handle)) }
        .to_string_lossy()
        .into_owned()
}

/// Sizes of the planes of a 4:2:0 image: Y is `width x height`, U and V are
/// half that in both directions, rounded up.
pub fn i420_plane_sizes(width: usize, height: usize) -> [(usize, usize); 3] {
    let (cw, ch) = (width.div_ceil(2), height.div_ceil(2));
    [(width, height), (cw, ch), (cw, ch)]
}

impl YuvEncoder {
    pub fn new(quality: u8) -> Result<YuvEncoder> {
        // SAFETY: no arguments; the handle is checked for null below.
        let handle = unsafe { raw::tjInitCompress() };
        if handle.is_null() {
            bail!("libjpeg-turbo: cannot create a compressor");
        }
        Ok(YuvEncoder {
            handle,
            quality: i32::from(quality),
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

    /// Like [`YuvEncoder::encode_i420`] with rows `strides[i]` bytes apart,
    /// so planes can be read where the camera left them. `out` keeps its
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
        if call(self.handle, &mut dst, &mut len, self.quality) != 0 {
            bail!("libjpeg-turbo: {}", last_error(self.handle));
        }
        assert!(dst == out.as_mut_ptr() && len as usize <= out.capacity());
        // SAFETY: TurboJPEG wrote `len` bytes at the start of the buffer.
        unsafe { out.set_len(len as usize) };
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
        let mut enc = YuvEncoder::new(75).unwrap();
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
}
