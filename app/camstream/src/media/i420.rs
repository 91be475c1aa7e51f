//! A main-stream frame as 4:2:0 planes, for the streams made of it (the
//! H.264 encoders, the sub-stream's): a JPEG decoded by libjpeg-turbo (at a
//! scale, if asked), made 4:2:0 where the camera's JPEG is 4:2:2 or 4:4:4,
//! at the size asked; the camera's raw picture, where the source had one,
//! as it is.

use anyhow::{Result, bail};

use super::worker::Picture;
use crate::convert::{i420_plane_sizes, planes_to_i420};
use crate::turbo::{Decoder, OnWarning};

/// A picture's Y, U and V planes.
pub type Planes<'a> = [&'a [u8]; 3];

pub struct ToI420 {
    decoder: Decoder,
    decoded: [Vec<u8>; 3],
    /// The last frame's planes, tightly packed (stride = plane width).
    pub planes: [Vec<u8>; 3],
}

impl ToI420 {
    pub fn new() -> Result<ToI420> {
        Ok(ToI420 {
            decoder: Decoder::new()?,
            decoded: Default::default(),
            planes: Default::default(),
        })
    }

    /// Decodes `jpeg` into `planes`, cut to an even size (4:2:0 wants
    /// one); that size.
    pub fn convert(&mut self, jpeg: &[u8]) -> Result<(usize, usize)> {
        self.convert_to(jpeg, |(w, h)| {
            let even = (w & !1, h & !1);
            (even.0 >= 16 && even.1 >= 16).then_some(((w, h), even))
        })
    }

    /// Decodes `jpeg` at the size `size` gives for the frame's (the decode
    /// size, one libjpeg-turbo makes, and the planes'), or fails where it
    /// gives none; the planes' size.
    pub fn convert_to(
        &mut self,
        jpeg: &[u8],
        size: impl FnOnce((usize, usize)) -> Option<((usize, usize), (usize, usize))>,
    ) -> Result<(usize, usize)> {
        let header = self.decoder.header(jpeg)?;
        let (w, h) = (header.width, header.height);
        let Some((decoded, target)) = size((w, h)) else {
            bail!("{w}x{h} is too small to encode");
        };
        let sizes = self.decoder.decode_planes(
            jpeg,
            &header,
            decoded,
            &mut self.decoded,
            OnWarning::Continue,
        )?;
        planes_to_i420(
            &self.decoded,
            sizes,
            header.gray(),
            target,
            &mut self.planes,
        );
        Ok(target)
    }

    /// Decodes `jpeg` into `planes` at `size` as [`sub_size`] makes it for
    /// the frame (None: the frame's, cut to an even size); that size.
    pub fn convert_at(
        &mut self,
        jpeg: &[u8],
        size: Option<(usize, usize)>,
    ) -> Result<(usize, usize)> {
        let Some(configured) = size else {
            return self.convert(jpeg);
        };
        self.convert_to(jpeg, |src| {
            let target = sub_size(src, configured);
            // One of the sizes the decoder makes (M/8 of the frame's).
            Some((scaled_size(src, target), target))
        })
    }

    /// `pic`'s planes (tightly packed) at `size` as [`convert_at`] has it,
    /// and their size; a raw picture is taken as it is, at its own size
    /// only (the main stream's).
    ///
    /// [`convert_at`]: ToI420::convert_at
    pub fn picture<'a>(
        &'a mut self,
        pic: Picture<'a>,
        size: Option<(usize, usize)>,
    ) -> Result<(Planes<'a>, (usize, usize))> {
        match pic {
            Picture::Jpeg(jpeg) => {
                let made = self.convert_at(jpeg, size)?;
                let [y, u, v] = &self.planes;
                Ok(([y, u, v], made))
            }
            Picture::I420 { .. } if size.is_some() => {
                bail!("a raw picture is encoded at its own size only")
            }
            Picture::I420 { data, size: (w, h) } => {
                // A JPEG's buffers (the first frame after a client joined
                // comes without a raw picture) are not needed with these.
                if !self.planes[0].is_empty() {
                    self.release();
                }
                let [(yw, yh), (cw, ch), _] = i420_plane_sizes(w, h);
                let (y_len, c_len) = (yw * yh, cw * ch);
                if data.len() < y_len + 2 * c_len {
                    bail!("a raw {w}x{h} picture of {} bytes is short", data.len());
                }
                let (y, rest) = data.split_at(y_len);
                let (u, v) = rest.split_at(c_len);
                Ok(([y, u, v.get(..c_len).unwrap_or(v)], (w, h)))
            }
        }
    }

    /// The strides of `planes` for a frame of `size`.
    pub fn strides((w, h): (usize, usize)) -> [usize; 3] {
        i420_plane_sizes(w, h).map(|p| p.0)
    }

    /// Lets the buffers go (they grow back at the next frame).
    pub fn release(&mut self) {
        self.decoded = Default::default();
        self.planes = Default::default();
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_picture_is_taken_as_it_is() {
        let data: Vec<u8> = (0..24).collect();
        let mut to = ToI420::new().unwrap();
        let pic = Picture::I420 {
            data: &data,
            size: (4, 4),
        };
        let (planes, size) = to.picture(pic, None).unwrap();
        assert_eq!(size, (4, 4));
        assert_eq!(planes, [&data[..16], &data[16..20], &data[20..24]]);
        // Short, or asked at another size: an error, not a wrong picture.
        let short = Picture::I420 {
            data: &data[..23],
            size: (4, 4),
        };
        assert!(to.picture(short, None).is_err());
        assert!(to.picture(pic, Some((2, 2))).is_err());
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
}
