//! Media producers: what the camera's picture is made into besides the
//! main stream (the H.264 stream, the sub-stream). Each subscribes to the
//! main stream while its own stream is watched, makes its frames on a
//! worker thread and publishes them on the fan-out as a stream of its
//! own; the event loop knows them only as [`Producer`]s, as ustreamer's
//! stream feeds its encoders from one capture buffer without its HTTP
//! server knowing which.

pub mod audio;
mod h264;
pub use h264::PATH as H264_PATH;
mod i420;
pub mod motion;
mod substream;
mod worker;

use std::rc::Rc;
use std::sync::Arc;

use mio::Waker;

use crate::codec::Codec;
use crate::config::Config;
use crate::fanout::{Fanout, SharedFrame};
use crate::source::Raw;

/// The main stream's picture as producers take it: its frame (the JPEG
/// its clients get) and, where the source had one, the raw picture it was
/// encoded from, borrowed from the source until the call returns.
pub struct MainPicture<'a> {
    pub frame: &'a Rc<SharedFrame>,
    pub raw: Option<Raw<'a>>,
}

/// What a producer's stream is encoded as (ONVIF's encoder
/// configuration of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoding {
    /// Its RTSP path, and ONVIF's token of its profile.
    pub path: &'static str,
    pub codec: Codec,
    pub size: (u16, u16),
    pub fps: u32,
    /// A JPEG stream's quality (1-100).
    pub quality: Option<u8>,
    /// An H.264 stream's bit rate (bit/s) and key frame interval.
    pub h264: Option<(u32, u32)>,
    /// Its size and rate may change (the sub-stream's); else they are the
    /// main stream's and only what its codec has (bit rate, key frame
    /// interval) may.
    pub resizable: bool,
}

/// A stream made of the main stream's pictures.
pub trait Producer {
    /// Its stream's RTSP path.
    fn path(&self) -> &'static str;

    /// What it makes now.
    fn encoding(&self, fanout: &Fanout) -> Encoding;

    /// Makes `to` from now on (a new encoder where it must; clients carry
    /// on), or says why it cannot. `to` keeps what cannot change.
    fn reconfigure(&mut self, to: &Encoding, fanout: &mut Fanout) -> anyhow::Result<()>;

    /// Made only while its own stream has a client playing; lets go of its
    /// encoder's memory when none has.
    fn follow_watchers(&mut self, fanout: &mut Fanout);

    /// Whether it would take the source's raw pictures now.
    fn wants_raw(&self) -> bool {
        false
    }

    /// A picture of the main stream, as it is published: to its worker
    /// if it is free and the picture is due (its rate), else kept until
    /// the worker is done, in place of an older one.
    fn picture(&mut self, pic: &MainPicture<'_>, fanout: &mut Fanout);

    /// Its worker may have finished a frame: published.
    fn done(&mut self, fanout: &mut Fanout);
}

/// The producers the config asks for. Each wakes the event loop with
/// `done` when its worker finishes a frame.
#[derive(Default)]
pub struct Producers {
    list: Vec<Box<dyn Producer>>,
    /// Motion detection (`[motion]`), which takes the main stream's
    /// pictures as they do but makes no stream.
    pub motion: Option<motion::Motion>,
    /// Sound (`[audio]`), made of a capture of its own.
    pub audio: Option<audio::Audio>,
}

impl Producers {
    /// Each producer the config turns on (and that could start: the log
    /// says why one did not), in the order ONVIF lists their profiles.
    pub fn start(cfg: &Config, fanout: &mut Fanout, done: &Arc<Waker>) -> Producers {
        // One line a producer.
        let list: Vec<Option<Box<dyn Producer>>> = vec![
            substream::start(cfg, fanout, done).map(|p| Box::new(p) as _),
            h264::start(cfg, fanout, done).map(|p| Box::new(p) as _),
        ];
        let motion = cfg.motion.clone().and_then(|m| {
            let main = fanout.stream(crate::fanout::StreamId::MAIN).info;
            motion::Motion::start(m, main, done)
                .map_err(|e| log::warn!("no motion detection: {e:#}"))
                .ok()
        });
        let audio = cfg.audio.clone().and_then(|a| {
            audio::Audio::start(a, cfg.mtu, fanout, done)
                .map_err(|e| log::warn!("no audio: {e:#}"))
                .ok()
                .flatten()
        });
        Producers {
            list: list.into_iter().flatten().collect(),
            motion,
            audio,
        }
    }

    fn each(&mut self) -> impl Iterator<Item = &mut dyn Producer> {
        self.list.iter_mut().map(|p| &mut **p as &mut dyn Producer)
    }

    pub fn follow_watchers(&mut self, fanout: &mut Fanout) {
        self.each().for_each(|p| p.follow_watchers(fanout));
        if let Some(a) = &mut self.audio {
            a.follow_watchers(fanout);
        }
    }

    pub fn picture(&mut self, pic: &MainPicture<'_>, fanout: &mut Fanout) {
        self.each().for_each(|p| p.picture(pic, fanout));
        if let Some(m) = &mut self.motion {
            m.picture(pic);
        }
    }

    pub fn wants_raw(&self) -> bool {
        self.all().any(|p| p.wants_raw())
    }

    pub fn done(&mut self, fanout: &mut Fanout) {
        self.each().for_each(|p| p.done(fanout));
        if let Some(m) = &mut self.motion {
            m.done();
        }
        if let Some(a) = &mut self.audio {
            a.done(fanout);
        }
    }

    /// Every producer, for what each makes.
    pub fn all(&self) -> impl Iterator<Item = &dyn Producer> {
        self.list.iter().map(|p| &**p)
    }

    /// The producer of the stream at `path`.
    pub fn find(&mut self, path: &str) -> Option<&mut dyn Producer> {
        self.each().find(|p| p.path() == path)
    }

    /// The sub-stream's path, or "" without one (/metrics).
    pub fn sub_path(&self) -> &'static str {
        self.all()
            .map(|p| p.path())
            .find(|&p| p == substream::PATH)
            .unwrap_or("")
    }
}
