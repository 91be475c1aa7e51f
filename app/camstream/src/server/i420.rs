//! A main-stream JPEG as 4:2:0 planes, for the streams made of it (the
//! H.264 encoders, the sub-stream's): decoded by libjpeg-turbo (at a
//! scale, if asked), made 4:2:0 where the camera's JPEG is 4:2:2 or 4:4:4,
//! at the size asked.

use anyhow::{Result, bail};

use crate::convert::{i420_plane_sizes, planes_to_i420};
use crate::turbo::{Decoder, OnWarning};

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
