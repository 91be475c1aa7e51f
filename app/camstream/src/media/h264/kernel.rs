//! The H.264 stream on the kernel's memory-to-memory encoder (the Pi's
//! VideoCore through bcm2835-codec, another board's VPU): the main-stream
//! frame made 4:2:0 planes ([`ToI420`]), copied into the encoder's buffer,
//! its access unit read back. The session opens at the first frame and
//! closes when no one watches, as OpenH264's does.

use std::path::PathBuf;

use anyhow::Result;

use crate::config::H264Settings;
use crate::media::i420::ToI420;
use crate::media::worker::{Encode, Picture};
use crate::source::v4l2::m2m::{H264, M2mEncoder, Params};

pub struct KernelEncoder {
    path: PathBuf,
    i420: ToI420,
    /// The pictures' size asked for (None: the main stream's).
    size: Option<(usize, usize)>,
    params: Params,
    session: Option<M2mEncoder>,
}

impl KernelEncoder {
    /// An encoder on `path`, tried at the stream's size (`width`x`height`,
    /// what `size` makes of the main stream's) so that a device that
    /// cannot is known before a client asks.
    pub fn new(
        path: PathBuf,
        settings: &H264Settings,
        (width, height): (u32, u32),
        size: Option<(usize, usize)>,
        fps: u32,
    ) -> Result<KernelEncoder> {
        let params = Params {
            coded: H264,
            width,
            height,
            fps,
            bitrate: Some(settings.bitrate),
            gop: Some(settings.gop),
            quality: None,
        };
        drop(M2mEncoder::open(&path, params)?);
        Ok(KernelEncoder {
            path,
            i420: ToI420::new()?,
            size,
            params,
            session: None,
        })
    }
}

impl Encode for KernelEncoder {
    fn encode(&mut self, pic: Picture<'_>, key: bool, out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        let ([y, u, v], (w, h)) = self.i420.picture(pic, self.size)?;
        if self
            .session
            .as_ref()
            .is_some_and(|_| (self.params.width, self.params.height) != (w as u32, h as u32))
        {
            // The camera came back at another size.
            self.session = None;
        }
        let session = match &mut self.session {
            Some(s) => s,
            None => {
                self.params.width = w as u32;
                self.params.height = h as u32;
                self.session
                    .insert(M2mEncoder::open(&self.path, self.params)?)
            }
        };
        let made = session.encode([y, u, v], ToI420::strides((w, h)), None, key, out);
        if made.is_err() {
            // Opened afresh with the next frame.
            self.session = None;
        }
        made.map(drop)
    }

    fn rest(&mut self) {
        self.session = None;
        self.i420.release();
    }
}
