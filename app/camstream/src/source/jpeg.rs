//! The JPEG camstream makes of raw camera frames (raw V4L2 formats,
//! libcamera's): on the kernel's memory-to-memory JPEG encoder where the
//! board has one and `encoder` allows (the Pi's VideoCore, bcm2835-codec's
//! image encoder), else libjpeg-turbo. RGB frames, and a frame the kernel's
//! encoder fails on, go to libjpeg-turbo: no frame is lost to it, and after
//! a few failures in a row it is given up.

use anyhow::Result;

use super::v4l2::m2m::{CameraBuffers, Choice, Dmabuf, Found, JPEG, M2mEncoder, Params};
use crate::convert::i420_plane_sizes;
use crate::turbo::Encoder;

/// Frames in a row the kernel's encoder may fail before libjpeg-turbo
/// takes over for good.
const GIVE_UP: u32 = 3;

pub struct JpegEncoder {
    turbo: Encoder,
    kernel: Option<Kernel>,
}

struct Kernel {
    found: Found,
    quality: u8,
    fps: u32,
    session: Option<Session>,
    failures: u32,
}

struct Session {
    /// Open for frames of this size, from these buffers.
    size: (usize, usize),
    camera: Option<CameraBuffers>,
    enc: M2mEncoder,
    /// Its first frame logged.
    told: bool,
}

impl JpegEncoder {
    pub fn new(quality: u8, fps: u32, choice: &Choice) -> Result<JpegEncoder> {
        let kernel = choice.find("encoder", JPEG)?.map(|found| Kernel {
            found,
            quality,
            fps,
            session: None,
            failures: 0,
        });
        Ok(JpegEncoder {
            turbo: Encoder::new(quality)?,
            kernel,
        })
    }

    /// What encodes: for the log.
    pub fn by(&self) -> String {
        match &self.kernel {
            Some(k) => format!("{} ({})", k.found.card, k.found.path.display()),
            None => "libjpeg-turbo".into(),
        }
    }

    /// Whether a frame's camera buffer could be read in place (a kernel
    /// encoder does the work): worth exporting it for.
    pub fn takes_dmabuf(&self) -> bool {
        self.kernel.is_some()
    }

    /// As [`Encoder::encode_planes`].
    pub fn encode_planes(
        &mut self,
        planes: [&[u8]; 3],
        strides: [usize; 3],
        width: usize,
        height: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        self.encode_from(planes, strides, width, height, None, out)
    }

    /// As [`JpegEncoder::encode_planes`], the planes lying in one of the
    /// camera's buffers, which a kernel encoder may read in place.
    pub fn encode_from(
        &mut self,
        planes: [&[u8]; 3],
        strides: [usize; 3],
        width: usize,
        height: usize,
        camera: Option<(CameraBuffers, Dmabuf<'_>)>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        if let Some(k) = &mut self.kernel {
            match k.encode(planes, strides, (width, height), camera, out) {
                Ok(()) => {
                    k.failures = 0;
                    return Ok(());
                }
                Err(e) => {
                    k.failures += 1;
                    k.session = None;
                    if k.failures >= GIVE_UP {
                        log::warn!(
                            "{}: {e:#}; JPEG by libjpeg-turbo from now on",
                            k.found.path.display()
                        );
                        self.kernel = None;
                    } else {
                        log::debug!("{}: {e:#}", k.found.path.display());
                    }
                }
            }
        }
        self.turbo
            .encode_planes(planes, strides, width, height, out)
    }

    /// As [`Encoder::encode_i420`].
    pub fn encode_i420(
        &mut self,
        planes: [&[u8]; 3],
        width: usize,
        height: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let strides = i420_plane_sizes(width, height).map(|p| p.0);
        self.encode_planes(planes, strides, width, height, out)
    }

    /// As [`Encoder::encode_rgb`]: libjpeg-turbo's (the VideoCore takes
    /// 4:2:0 from camstream).
    pub fn encode_rgb(
        &mut self,
        pixels: &[u8],
        pitch: usize,
        bgr: bool,
        width: usize,
        height: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        self.turbo
            .encode_rgb(pixels, pitch, bgr, width, height, out)
    }
}

impl Kernel {
    fn encode(
        &mut self,
        planes: [&[u8]; 3],
        strides: [usize; 3],
        size: (usize, usize),
        camera: Option<(CameraBuffers, Dmabuf<'_>)>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let buffers = camera.map(|c| c.0);
        if self
            .session
            .as_ref()
            .is_some_and(|s| (s.size, s.camera) != (size, buffers))
        {
            self.session = None;
        }
        let session = match &mut self.session {
            Some(s) => s,
            None => {
                let params = Params {
                    coded: JPEG,
                    width: size.0 as u32,
                    height: size.1 as u32,
                    fps: self.fps,
                    bitrate: None,
                    gop: None,
                    quality: Some(self.quality),
                };
                let enc = M2mEncoder::open_for(&self.found.path, params, buffers)?;
                self.session.insert(Session {
                    size,
                    camera: buffers,
                    enc,
                    told: false,
                })
            }
        };
        session
            .enc
            .encode(planes, strides, camera.map(|c| c.1), false, out)?;
        if !session.told {
            // After the first frame: a driver may refuse the camera's
            // buffers only when one is queued.
            log::info!(
                "JPEG of the camera's {}x{} frames encoded by {} ({}), {}",
                size.0,
                size.1,
                self.found.card,
                self.found.path.display(),
                session.enc.input()
            );
            session.told = true;
        }
        Ok(())
    }
}
