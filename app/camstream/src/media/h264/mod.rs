//! An H.264 stream, rtsp://CAMERA/h264 (and the sub-stream, with
//! `codec = "h264"`): the main stream's frames encoded again as H.264 (by
//! the kernel's encoder, [`kernel`], where the board has one, else
//! OpenH264, [`encoder`]; on a worker thread; at the sub-stream's size and
//! rate for it) while someone watches it, published on the fan-out as a
//! stream of its own and sent as RFC 6184 packets. A client that joins (or
//! falls behind) waits for an IDR picture, which the encoder is asked for
//! at once.

#[cfg(feature = "h264")]
mod encoder;
mod kernel;

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use camstream_h264::AccessUnit;
use mio::Waker;

use super::{Encoding, MainPicture, Producer};
use crate::codec::{Codec, Unit};
use crate::fanout::{Fanout, Pace, SharedFrame, Stream, StreamId};
use super::i420::sub_size;
use crate::random::random_u64;
use super::worker::{Encode, Picture, Worker};
use crate::clock::Mono;
use crate::config::{Config, H264Settings};
use crate::source::v4l2::m2m::{self, Choice};
use crate::source::StreamInfo;
#[cfg(feature = "h264")]
use encoder::H264Encoder;
use kernel::KernelEncoder;

/// Built without the h264 feature: the stream is not made, and says why.
#[cfg(not(feature = "h264"))]
struct H264Encoder;

#[cfg(not(feature = "h264"))]
impl H264Encoder {
    fn new(_: &H264Settings, _: Option<(usize, usize)>, _: u32) -> Result<H264Encoder> {
        anyhow::bail!(
            "no hardware encoder, and this camstream was built without OpenH264 (cargo feature h264)"
        )
    }
}

#[cfg(not(feature = "h264"))]
impl super::worker::Encode for H264Encoder {
    fn encode(&mut self, _: Picture<'_>, _: bool, _: &mut Vec<u8>) -> Result<()> {
        unreachable!("never made")
    }
}

/// Its path: rtsp://CAMERA/h264.
pub const PATH: &str = "h264";

/// The H.264 stream [streams.h264] asks for, or None (turned off, or it
/// could not start: the log says why).
pub fn start(
    cfg: &Config,
    fanout: &mut Fanout,
    done: &Arc<Waker>,
) -> Option<H264Stream> {
    let settings = cfg.h264.clone()?;
    let shape = Shape {
        path: PATH,
        name: "H.264 stream",
        size: None,
        // The camera's rate, as the main stream has it.
        fps: fanout.stream(StreamId::MAIN).info.fps,
    };
    match H264Stream::start(settings, shape, cfg.mtu, fanout, done) {
        Ok(s) => Some(s),
        Err(e) => {
            log::warn!("no H.264 stream: {e:#}");
            None
        }
    }
}

/// What an H.264 stream is made as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// rtsp://CAMERA/PATH.
    pub path: &'static str,
    /// What the log calls it.
    pub name: &'static str,
    /// The size asked for, made as the sub-stream's is ([`sub_size`]);
    /// None: the main stream's.
    pub size: Option<(u16, u16)>,
    /// Frames a second: the main stream's, or fewer.
    pub fps: u32,
}

impl Shape {
    /// Its pictures' size for the main stream's (`main`): even, as 4:2:0
    /// wants.
    fn picture(&self, main: StreamInfo) -> (u32, u32) {
        let src = (usize::from(main.width), usize::from(main.height));
        let (w, h) = match self.size {
            None => (src.0 & !1, src.1 & !1),
            Some((w, h)) => sub_size(src, (w.into(), h.into())),
        };
        (w as u32, h as u32)
    }

    /// Of the main stream's frames, one this often (None: each).
    fn every(&self, main: StreamInfo) -> Option<Duration> {
        (self.fps < main.fps).then(|| Duration::from_secs(1) / self.fps.max(1))
    }

    /// Its stream's size and rate, for the fan-out.
    fn info(&self, main: StreamInfo) -> StreamInfo {
        let (w, h) = self.picture(main);
        StreamInfo {
            width: w as u16,
            height: h as u16,
            fps: self.fps,
        }
    }

    fn size_arg(&self) -> Option<(usize, usize)> {
        self.size.map(|(w, h)| (w.into(), h.into()))
    }
}

/// A main-stream frame kept for the worker, and the size of its raw
/// picture where that is kept too.
type Pending = (Rc<SharedFrame>, Option<(usize, usize)>);

pub struct H264Stream {
    /// Its stream on the fan-out.
    pub id: StreamId,
    /// Which of the main stream's pictures it takes (its rate).
    pace: Pace,
    /// Someone plays its stream: it encodes.
    watched: bool,
    worker: Worker,
    /// The encoder was told to let go of its memory since the last client.
    resting: bool,
    /// When the encoder was last asked for a key frame out of turn.
    forced: Option<Mono>,
    settings: H264Settings,
    shape: Shape,
    waker: Arc<Waker>,
    /// The picture that came while the worker was busy, the newest, for
    /// when it is done: the main stream's frame, and its raw picture
    /// (packed 4:2:0, in `raw`) where the source had one.
    pending: Option<Pending>,
    raw: Vec<u8>,
    /// A raw picture was offered (logged once).
    offered_raw: bool,
}

/// The encoder `[streams.h264] encoder` (or the sub-stream's) asks for,
/// and what it is called.
fn choose(
    cfg: &H264Settings,
    shape: Shape,
    picture: (u32, u32),
) -> Result<(Box<dyn Encode>, String)> {
    let (size, fps) = (shape.size_arg(), shape.fps);
    let software = || -> Result<(Box<dyn Encode>, String)> {
        Ok((
            Box::new(H264Encoder::new(cfg, size, fps)?),
            "OpenH264 (software)".into(),
        ))
    };
    let key = if shape.path == PATH {
        "streams.h264.encoder"
    } else {
        "streams.sub.encoder"
    };
    let Some(f) = cfg.encoder.find(key, m2m::H264)? else {
        return software();
    };
    let by = format!("{} ({})", f.card, f.path.display());
    let path = f.path.clone();
    match (
        KernelEncoder::new(f.path, cfg, picture, size, fps),
        &cfg.encoder,
    ) {
        // A device named in the config: it or no stream.
        (Ok(k), Choice::Device(_)) => Ok((Box::new(k), by)),
        (Ok(k), _) => Ok((
            Box::new(Fallback {
                kernel: Some(k),
                failures: 0,
                cfg: cfg.clone(),
                size,
                fps,
                software: None,
            }),
            by,
        )),
        (Err(e), Choice::Device(_)) => Err(e),
        (Err(e), _) => {
            log::warn!(
                "{}: {}: {e:#}; encoding in software",
                shape.name,
                path.display()
            );
            software()
        }
    }
}

/// Frames in a row the kernel's encoder may fail before OpenH264 takes
/// over (`encoder = "auto"`).
const GIVE_UP: u32 = 3;

/// The kernel's encoder, given up for OpenH264 after it failed on
/// [`GIVE_UP`] frames in a row: a driver that stops working must not
/// leave the stream without pictures when software could make them.
struct Fallback<K = KernelEncoder> {
    kernel: Option<K>,
    failures: u32,
    cfg: H264Settings,
    size: Option<(usize, usize)>,
    fps: u32,
    software: Option<H264Encoder>,
}

impl<K: Encode> Encode for Fallback<K> {
    fn encode(&mut self, pic: Picture<'_>, key: bool, out: &mut Vec<u8>) -> Result<()> {
        if let Some(k) = &mut self.kernel {
            match k.encode(pic, key, out) {
                Ok(()) => {
                    self.failures = 0;
                    return Ok(());
                }
                Err(e) if self.failures + 1 < GIVE_UP => {
                    self.failures += 1;
                    return Err(e);
                }
                Err(e) => {
                    log::warn!(
                        "H.264: the hardware encoder failed {GIVE_UP} frames in a row \
                         ({e:#}); encoding in software from now on"
                    );
                    self.kernel = None;
                }
            }
        }
        let s = match &mut self.software {
            Some(s) => s,
            None => self
                .software
                .insert(H264Encoder::new(&self.cfg, self.size, self.fps)?),
        };
        // Its first picture is an IDR picture: clients waiting for one get it.
        s.encode(pic, key, out)
    }

    fn rest(&mut self) {
        if let Some(k) = &mut self.kernel {
            k.rest();
        }
        if let Some(s) = &mut self.software {
            s.rest();
        }
    }
}

/// Key frames asked for out of turn, at most one this often: a client
/// that joins and leaves on a loop must not raise everyone's bit rate
/// with IDR pictures (it waits that long at most for its own).
const FORCED_KEY_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether a key frame asked for now may be forced, the last having been
/// forced at `last`.
fn may_force(last: Option<Mono>, now: Mono) -> bool {
    last.is_none_or(|t| now.saturating_sub(t) >= FORCED_KEY_EVERY)
}

impl H264Stream {
    /// Starts its worker, which wakes the event loop with `done`.
    pub fn start(
        cfg: H264Settings,
        shape: Shape,
        mtu: usize,
        fanout: &mut Fanout,
        done: &Arc<Waker>,
    ) -> Result<H264Stream> {
        let main = fanout.stream(StreamId::MAIN).info;
        let size = shape.picture(main);
        let (enc, by) = choose(&cfg, shape, size)?;
        let waker = done.clone();
        let ids = [random_u64(), random_u64(), random_u64(), random_u64()];
        let info = shape.info(main);
        let id = fanout.add_stream(Stream::new(shape.path, Codec::H264, info, mtu, 4, ids)?);
        log::info!(
            "{}: {}x{} at {} fps, {} kbit/s, a key frame every {} frames, \
             encoded by {by}, rtsp://CAMERA/{}",
            shape.name,
            size.0,
            size.1,
            shape.fps,
            cfg.bitrate / 1000,
            cfg.gop,
            shape.path
        );
        Ok(H264Stream {
            id,
            pace: Pace::new(shape.every(main)),
            watched: false,
            worker: Worker::start(enc, shape.path, waker.clone())?,
            resting: true,
            forced: None,
            settings: cfg,
            shape,
            waker,
            pending: None,
            raw: Vec::new(),
            offered_raw: false,
        })
    }

    /// Encodes from now on at `bitrate` (bit/s) with a key frame every
    /// `gop` frames, and as `shape` (ONVIF's SetVideoEncoderConfiguration):
    /// a new encoder, whose first picture is an IDR picture with the new
    /// parameter sets, so clients carry on.
    fn encode_as(
        &mut self,
        bitrate: u32,
        gop: u32,
        shape: Shape,
        fanout: &mut Fanout,
    ) -> Result<()> {
        // A new encoder starts with an IDR picture: changes on a loop must
        // not raise everyone's bit rate more than joining clients may.
        let now = Mono::now();
        if !may_force(self.forced, now) {
            anyhow::bail!(
                "the H.264 stream changed or made a key frame less than a second ago: try again"
            );
        }
        let mut settings = self.settings.clone();
        settings.bitrate = bitrate;
        settings.gop = gop;
        let main = fanout.stream(StreamId::MAIN).info;
        let size = shape.picture(main);
        let (enc, by) = choose(&settings, shape, size)?;
        self.worker = Worker::start(enc, shape.path, self.waker.clone())?;
        self.resting = true;
        self.forced = Some(now);
        fanout.stream_mut(self.id).info = shape.info(main);
        self.pace.set(shape.every(main));
        self.pending = None;
        log::info!(
            "{} now {}x{} at {} fps, {} kbit/s, a key frame every {gop} frames, encoded by {by}",
            shape.name,
            size.0,
            size.1,
            shape.fps,
            bitrate / 1000
        );
        self.settings = settings;
        self.shape = shape;
        Ok(())
    }

    /// The picture kept, to the worker, if it is free.
    fn offer(&mut self, fanout: &mut Fanout) {
        if self.worker.busy() {
            return;
        }
        let Some((frame, raw)) = self.pending.take() else {
            return;
        };
        let now = Mono::now();
        let key = may_force(self.forced, now) && fanout.take_key_wanted(self.id);
        if raw.is_some() && !self.offered_raw {
            // Once: a source with raw pictures has them from its next
            // frame after someone starts watching.
            self.offered_raw = true;
            log::info!(
                "{}: encoding the camera's raw pictures (no JPEG decode)",
                self.shape.name
            );
        }
        let offered = match raw {
            Some(size) => self
                .worker
                .offer_i420(&mut self.raw, size, frame.captured, key),
            None => self.worker.offer(frame.jpeg(), frame.captured, key),
        };
        if !offered {
            // Asked again with the next picture.
            fanout.stream_mut(self.id).key_wanted |= key;
        } else if key {
            self.forced = Some(now);
        }
    }
}

impl Producer for H264Stream {
    fn path(&self) -> &'static str {
        self.shape.path
    }

    fn encoding(&self, fanout: &Fanout) -> Encoding {
        let info = fanout.stream(self.id).info;
        Encoding {
            path: self.shape.path,
            codec: Codec::H264,
            size: (info.width, info.height),
            fps: self.shape.fps,
            quality: None,
            h264: Some((self.settings.bitrate, self.settings.gop)),
            resizable: self.shape.size.is_some(),
        }
    }

    /// A new encoder only if something changes: a change is refused
    /// within a second of the last (a new encoder starts with an IDR
    /// picture).
    fn reconfigure(&mut self, to: &Encoding, fanout: &mut Fanout) -> Result<()> {
        if *to == self.encoding(fanout) {
            return Ok(());
        }
        let (bitrate, gop) = to.h264.unwrap_or((self.settings.bitrate, self.settings.gop));
        let mut shape = self.shape;
        if shape.size.is_some() {
            shape.size = Some(to.size);
            shape.fps = to.fps;
        }
        self.encode_as(bitrate, gop, shape, fanout)
    }

    /// Whether it takes the camera's raw pictures: the main stream's size
    /// only, and only while someone watches.
    fn wants_raw(&self) -> bool {
        self.shape.size.is_none() && self.watched
    }

    /// Encoded only while someone watches it; the encoder's memory goes
    /// when the last client does.
    fn follow_watchers(&mut self, fanout: &mut Fanout) {
        let watched = fanout.watched(self.id);
        if watched && !self.watched {
            self.pace.restart(Mono(0));
        }
        self.watched = watched;
        if watched {
            self.resting = false;
        } else {
            self.pending = None;
            if !self.resting {
                self.resting = self.worker.rest();
                self.raw = Vec::new();
            }
        }
    }

    /// A main-stream picture, at its rate: to the worker if it is free,
    /// else kept (in place of an older one) until it is.
    fn picture(&mut self, pic: &MainPicture<'_>, fanout: &mut Fanout) {
        if !self.watched || !self.pace.take(pic.frame.captured) {
            return;
        }
        // Its raw picture is the source's only for now: copied, packed.
        let raw = match pic.raw {
            Some(raw) if self.wants_raw() => raw.pack(&mut self.raw),
            _ => None,
        };
        self.pending = Some((pic.frame.clone(), raw));
        self.offer(fanout);
    }

    /// The worker finished an access unit: published to the stream's
    /// clients; then the picture that waited, if one did.
    fn done(&mut self, fanout: &mut Fanout) {
        let Some(mut done) = self.worker.take() else {
            return;
        };
        match done.made {
            Ok(()) if done.out.is_empty() => {}
            Ok(()) => {
                let mut parsed = AccessUnit::parse(&done.out);
                // The SPS (before each IDR picture) made to say the
                // stream's rate, and the camera's full range where it
                // has it: parsed again then.
                let sps = parsed.as_ref().ok().and_then(AccessUnit::sps_at);
                if let Some(at) = sps {
                    let want = camstream_h264::sps::Signal {
                        jpeg_colour: true,
                        fps: Some(self.shape.fps),
                    };
                    camstream_h264::sps::signal(&mut done.out, at, want);
                    parsed = AccessUnit::parse(&done.out);
                }
                match parsed {
                    Ok(au) => {
                        fanout.publish(self.id, &Unit::H264(&au), done.captured, Mono::now());
                    }
                    Err(e) => log::warn!(
                        "{}: the encoder's access unit does not parse: {e:?}",
                        self.shape.name
                    ),
                }
            }
            Err(e) => log::debug!("{}: {e}", self.shape.name),
        }
        self.worker.give_back(done.out);
        self.offer(fanout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hardware encoder that has stopped working.
    struct Broken;

    impl Encode for Broken {
        fn encode(&mut self, _: Picture<'_>, _: bool, _: &mut Vec<u8>) -> Result<()> {
            anyhow::bail!("no frame back from the encoder in 2 s")
        }
    }

    #[cfg(feature = "h264")]
    #[test]
    fn software_takes_over_from_a_failing_hardware_encoder() {
        let jpeg = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../camstream-rtp/testdata/ffmpeg-5.1-mjpeg-yuvj420p-huffman-default-160x120.jpg"
        ))
        .unwrap();
        let mut f = Fallback {
            kernel: Some(Broken),
            failures: 0,
            cfg: H264Settings {
                bitrate: 500_000,
                gop: 60,
                encoder: Choice::Auto,
            },
            size: None,
            fps: 30,
            software: None,
        };
        let mut out = Vec::new();
        for _ in 1..GIVE_UP {
            assert!(f.encode(Picture::Jpeg(&jpeg), false, &mut out).is_err());
        }
        f.encode(Picture::Jpeg(&jpeg), false, &mut out).unwrap();
        assert!(f.kernel.is_none());
        assert!(AccessUnit::parse(&out).unwrap().idr);
        f.encode(Picture::Jpeg(&jpeg), false, &mut out).unwrap();
        assert!(!AccessUnit::parse(&out).unwrap().idr);
    }

    #[test]
    fn key_frames_out_of_turn_at_most_once_a_second() {
        let t = Mono(5_000_000_000);
        assert!(may_force(None, t));
        assert!(!may_force(
            Some(t),
            t.add(std::time::Duration::from_millis(999))
        ));
        assert!(may_force(Some(t), t.add(FORCED_KEY_EVERY)));
    }
}
