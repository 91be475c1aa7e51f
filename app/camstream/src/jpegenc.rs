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

// The handle is used by one thread at a time (the encoder moves into the
// test pattern's thread).
unsafe impl Send for YuvEncoder {}

impl Drop for YuvEncoder {
    fn drop(&mut self) {
        unsafe { raw::tjDestroy(self.handle) };
    }
}

fn last_error(handle: raw::tjhandle) -> String {
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
    /// contents. `out` keeps its capacity, so steady-state encoding does not
    /// allocate; the worst-case capacity is reserved but only the bytes
    /// written are touched.
    pub fn encode_i420(
        &mut self,
        planes: [&[u8]; 3],
        width: usize,
        height: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let sizes = i420_plane_sizes(width, height);
        for (p, (w, h)) in planes.iter().zip(sizes) {
            assert!(p.len() >= w * h, "plane too small");
        }
        let (w, h) = (width as libc::c_int, height as libc::c_int);
        let bound = unsafe { raw::tjBufSize(w, h, raw::TJSAMP_TJSAMP_420 as libc::c_int) } as usize;
        out.clear();
        out.reserve(bound);
        let mut src = [planes[0].as_ptr(), planes[1].as_ptr(), planes[2].as_ptr()];
        let strides = [w, sizes[1].0 as libc::c_int, sizes[2].0 as libc::c_int];
        let mut dst = out.as_mut_ptr();
        let mut len = out.capacity() as libc::c_ulong;
        // SAFETY: the planes are at least as large as the strides and sizes
        // say; `dst` has `len` writable bytes and NOREALLOC keeps TurboJPEG
        // from freeing or moving it.
        let r = unsafe {
            raw::tjCompressFromYUVPlanes(
                self.handle,
                src.as_mut_ptr(),
                w,
                strides.as_ptr(),
                h,
                raw::TJSAMP_TJSAMP_420 as libc::c_int,
                &mut dst,
                &mut len,
                self.quality,
                raw::TJFLAG_NOREALLOC as libc::c_int,
            )
        };
        if r != 0 {
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
        enc.encode_i420([&planes[0], &planes[1], &planes[2]], w, h, &mut out)
            .unwrap();
        assert_eq!(out.capacity(), cap);
    }
}
