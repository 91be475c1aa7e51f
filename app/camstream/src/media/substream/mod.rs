//! The detection sub-stream, in one place: a subscriber of the main stream
//! (the newest frame, at the sub-stream's rate, only while someone watches
//! it) whose worker thread ([`encoder`]: scaled decode, box filter, encode)
//! makes each into a frame of the sub-stream, which it publishes on the
//! fan-out as a stream of its own, rtsp://CAMERA/sub. With `codec =
//! "h264"` it is an H.264 stream ([`H264Stream`]) at its size and rate.

mod encoder;

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use mio::Waker;

use crate::codec::{Codec, Unit};
use crate::fanout::{Fanout, Pace, SharedFrame, Stream, StreamId};
use super::{Encoding, MainPicture, Producer};
use super::h264::{H264Stream, Shape};
use super::i420::sub_size;
use crate::random::random_u64;
use super::worker::Worker;
use crate::clock::Mono;
use crate::config::{Config, SubSettings};
use crate::source::StreamInfo;
use encoder::SubEncoder;

/// Its path: rtsp://CAMERA/sub.
pub const PATH: &str = "sub";

/// The sub-stream [streams.sub] asks for, or None (turned off, or it could
/// not start: the main stream is what matters; the log says why).
pub fn start(cfg: &Config, fanout: &mut Fanout, done: &Arc<Waker>) -> Option<Sub> {
    let settings = cfg.sub.clone()?;
    let started = match settings.h264.clone() {
        None => SubStream::start(settings, cfg.mtu, fanout, done).map(Sub::Jpeg),
        Some(h264) => H264Stream::start(h264, h264_shape(&settings), cfg.mtu, fanout, done)
            .map(Sub::H264),
    };
    match started {
        Ok(s) => Some(s),
        Err(e) => {
            log::warn!("no sub-stream: {e:#}");
            None
        }
    }
}

/// An H.264 sub-stream's shape: its path, size and rate.
fn h264_shape(cfg: &SubSettings) -> Shape {
    Shape {
        path: PATH,
        name: "sub-stream (H.264)",
        size: Some((cfg.width, cfg.height)),
        fps: cfg.fps,
    }
}

/// The sub-stream in its codec.
pub enum Sub {
    Jpeg(SubStream),
    H264(H264Stream),
}

impl Sub {
    fn producer(&mut self) -> &mut dyn Producer {
        match self {
            Sub::Jpeg(s) => s,
            Sub::H264(s) => s,
        }
    }

}

impl Producer for Sub {
    fn path(&self) -> &'static str {
        PATH
    }

    fn encoding(&self, fanout: &Fanout) -> Encoding {
        match self {
            Sub::Jpeg(s) => s.encoding(fanout),
            Sub::H264(s) => s.encoding(fanout),
        }
    }

    fn reconfigure(&mut self, to: &Encoding, fanout: &mut Fanout) -> Result<()> {
        self.producer().reconfigure(to, fanout)
    }

    fn follow_watchers(&mut self, fanout: &mut Fanout) {
        self.producer().follow_watchers(fanout);
    }

    fn wants_raw(&self) -> bool {
        match self {
            Sub::Jpeg(s) => s.wants_raw(),
            Sub::H264(s) => s.wants_raw(),
        }
    }

    fn picture(&mut self, pic: &MainPicture<'_>, fanout: &mut Fanout) {
        self.producer().picture(pic, fanout);
    }

    fn done(&mut self, fanout: &mut Fanout) {
        self.producer().done(fanout);
    }
}

pub struct SubStream {
    /// Its stream on the fan-out.
    pub id: StreamId,
    pub cfg: SubSettings,
    /// Which of the main stream's pictures it takes (its rate).
    pace: Pace,
    /// Someone plays it: it is made.
    watched: bool,
    /// The picture that came while the worker was busy, for when it is
    /// done.
    pending: Option<Rc<SharedFrame>>,
    worker: Worker,
    waker: Arc<Waker>,
    /// CPU time the worker spent, and frames it made.
    pub cpu: Duration,
    pub frames: u64,
    pub failed: u64,
}

impl SubStream {
    /// Starts its worker, which wakes the event loop with `done`.
    pub fn start(
        cfg: SubSettings,
        mtu: usize,
        fanout: &mut Fanout,
        done: &Arc<Waker>,
    ) -> Result<SubStream> {
        let main = fanout.stream(StreamId::MAIN).info;
        let (w, h) = sub_size(
            (usize::from(main.width), usize::from(main.height)),
            (usize::from(cfg.width), usize::from(cfg.height)),
        );
        let enc = SubEncoder::new(w, h, cfg.quality)?;
        let waker = done.clone();
        let info = StreamInfo {
            width: w as u16,
            height: h as u16,
            fps: cfg.fps,
        };
        let ids = [random_u64(), random_u64(), random_u64(), random_u64()];
        let id = fanout.add_stream(Stream::new(PATH, Codec::Jpeg, info, mtu, 4, ids)?);
        let pace = Pace::new(Some(Duration::from_secs(1) / cfg.fps));
        log::info!(
            "sub-stream: {w}x{h} at {} fps, rtsp://CAMERA/{PATH}",
            cfg.fps
        );
        Ok(SubStream {
            id,
            cfg,
            pace,
            watched: false,
            pending: None,
            worker: Worker::start(enc, "sub-stream", waker.clone())?,
            waker,
            cpu: Duration::ZERO,
            frames: 0,
            failed: 0,
        })
    }

    /// New size, rate and quality (ONVIF's SetVideoEncoderConfiguration):
    /// a new encoder on a new worker (the old one finishes its frame and
    /// ends first); clients already playing get frames of the new size,
    /// which RTP/JPEG carries in every packet.
    fn encode_as(&mut self, cfg: SubSettings, fanout: &mut Fanout) -> Result<()> {
        let main = fanout.stream(StreamId::MAIN).info;
        let (w, h) = sub_size(
            (usize::from(main.width), usize::from(main.height)),
            (usize::from(cfg.width), usize::from(cfg.height)),
        );
        let enc = SubEncoder::new(w, h, cfg.quality)?;
        self.worker = Worker::start(enc, "sub-stream", self.waker.clone())?;
        fanout.stream_mut(self.id).info = StreamInfo {
            width: w as u16,
            height: h as u16,
            fps: cfg.fps,
        };
        self.pace.set(Some(Duration::from_secs(1) / cfg.fps));
        self.pending = None;
        log::info!(
            "sub-stream now {w}x{h} at {} fps, quality {}",
            cfg.fps,
            cfg.quality
        );
        self.cfg = cfg;
        Ok(())
    }

    /// The picture kept, to the worker, if it is free.
    fn offer(&mut self) {
        if self.worker.busy() {
            return;
        }
        if let Some(frame) = self.pending.take() {
            self.worker.offer(frame.jpeg(), frame.captured, false);
        }
    }
}

impl Producer for SubStream {
    fn path(&self) -> &'static str {
        PATH
    }

    fn encoding(&self, fanout: &Fanout) -> Encoding {
        let info = fanout.stream(self.id).info;
        Encoding {
            path: PATH,
            codec: Codec::Jpeg,
            size: (info.width, info.height),
            fps: self.cfg.fps,
            quality: Some(self.cfg.quality),
            h264: None,
            resizable: true,
        }
    }

    fn reconfigure(&mut self, to: &Encoding, fanout: &mut Fanout) -> Result<()> {
        let mut cfg = self.cfg.clone();
        (cfg.width, cfg.height) = to.size;
        cfg.fps = to.fps;
        cfg.quality = to.quality.unwrap_or(cfg.quality);
        self.encode_as(cfg, fanout)
    }

    /// Made only while someone watches it.
    fn follow_watchers(&mut self, fanout: &mut Fanout) {
        let watched = fanout.watched(self.id);
        if watched && !self.watched {
            self.pace.restart(Mono(0));
        }
        self.watched = watched;
        if !watched {
            self.pending = None;
        }
    }

    /// A main-stream picture, at its rate: to the worker if it is free,
    /// else kept (in place of an older one) until it is.
    fn picture(&mut self, pic: &MainPicture<'_>, _: &mut Fanout) {
        if self.watched && self.pace.take(pic.frame.captured) {
            self.pending = Some(pic.frame.clone());
            self.offer();
        }
    }

    /// The worker finished a frame: published to the sub-stream's clients.
    fn done(&mut self, fanout: &mut Fanout) {
        let Some(done) = self.worker.take() else {
            return;
        };
        self.cpu += done.took;
        match done.made {
            Ok(()) => match camstream_rtp::jpeg::parse(&done.out) {
                Ok(parsed) => {
                    self.frames += 1;
                    fanout.publish(self.id, &Unit::Jpeg(&parsed), done.captured, Mono::now());
                }
                Err(e) => {
                    self.failed += 1;
                    log::warn!("sub-stream: its own frame does not parse: {e:?}");
                }
            },
            Err(e) => {
                self.failed += 1;
                log::debug!("sub-stream: {e}");
            }
        }
        self.worker.give_back(done.out);
        // A picture that came while it worked.
        self.offer();
    }
}
