//! A main-stream JPEG as the 4:2:0 planes an H.264 encoder takes:
//! decoded by libjpeg-turbo, made 4:2:0 where the camera's JPEG is 4:2:2
//! or 4:4:4, cut to an even size (4:2:0 wants one).

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

    /// Decodes `jpeg` into `planes`; its (even) size.
    pub fn convert(&mut self, jpeg: &[u8]) -> Result<(usize, usize)> {
        let header = self.decoder.header(jpeg)?;
        let (w, h) = (header.width, header.height);
        // An odd last row or column goes.
        let (tw, th) = (w & !1, h & !1);
        if tw < 16 || th < 16 {
            bail!("{w}x{h} is too small to encode");
        }
        let sizes = self.decoder.decode_planes(
            jpeg,
            &header,
            (w, h),
            &mut self.decoded,
            OnWarning::Continue,
        )?;
        planes_to_i420(
            &self.decoded,
            sizes,
            header.gray(),
            (tw, th),
            &mut self.planes,
        );
        Ok((tw, th))
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
