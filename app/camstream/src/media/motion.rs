//! Motion detection, in one place: a subscriber of the main stream (its
//! newest picture at `[motion] fps`, always: motion is looked for whether
//! or not anyone watches) whose worker thread decodes each JPEG to its DC
//! coefficients (an eighth of its size, for little more than the cost of
//! entropy decoding) and hands its luma to camstream-motion's detector.
//! (A raw picture would be taken as it is; sources hand them over only
//! while H.264 is watched, and the worker is offered the JPEG.) The event
//! loop learns each picture's result when the worker is done: whether
//! motion started or stopped, and how much of the picture changed.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use camstream_motion::{Detector, Event};
use mio::Waker;

use super::MainPicture;
use super::i420::ToI420;
use super::worker::{Encode, Picture, Worker};
use crate::clock::Mono;
use crate::config::MotionSettings;
use crate::fanout::{Pace, SharedFrame};
use crate::source::StreamInfo;

/// The detector on the worker's thread.
struct Look {
    i420: ToI420,
    detector: Detector,
    /// The main stream's size: its JPEG is decoded at an eighth of it.
    main: (usize, usize),
}

/// What the worker says of a picture, in its output buffer: the event
/// (0 none, 1 started, 2 stopped), whether there is motion, and the
/// share of the picture that changed (per mille, little-endian u16).
const RESULT_LEN: usize = 4;

impl Encode for Look {
    fn encode(&mut self, pic: Picture<'_>, _key: bool, out: &mut Vec<u8>) -> Result<()> {
        let eighth = Some((self.main.0 / 8, self.main.1 / 8));
        let size = match pic {
            Picture::Jpeg(_) => eighth,
            Picture::I420 { .. } => None,
        };
        let ([y, _, _], (w, h)) = self.i420.picture(pic, size)?;
        let t = Mono::now().0 / 1_000_000;
        let event = self.detector.feed(y, w, h, w, t);
        let level = (self.detector.level() * 1000.0).round() as u16;
        out.clear();
        out.push(match event {
            None => 0,
            Some(Event::Started) => 1,
            Some(Event::Stopped) => 2,
        });
        out.push(u8::from(self.detector.moving()));
        out.extend_from_slice(&level.to_le_bytes());
        Ok(())
    }
}

pub struct Motion {
    pace: Pace,
    /// The picture that came while the worker was busy.
    pending: Option<Rc<SharedFrame>>,
    /// The picture the worker looks at, until it is done.
    looking: Option<Rc<SharedFrame>>,
    /// The picture in which motion last started (MQTT publishes it).
    pub started_picture: Option<Vec<u8>>,
    worker: Worker,
    /// Motion now, and the share of the picture the last one changed.
    pub moving: bool,
    pub level: f32,
    /// Motion events since the start, and pictures looked at.
    pub started: u64,
    pub stopped: u64,
    pub pictures: u64,
    pub failed: u64,
    /// CPU time the worker spent.
    pub cpu: Duration,
}

impl Motion {
    /// Starts its worker, which wakes the event loop with `done`.
    pub fn start(settings: MotionSettings, main: StreamInfo, done: &Arc<Waker>) -> Result<Motion> {
        let look = Look {
            i420: ToI420::new()?,
            detector: Detector::new(settings.detector.clone())?,
            main: (usize::from(main.width), usize::from(main.height)),
        };
        let pace = Pace::new(Some(Duration::from_secs(1) / settings.fps));
        log::info!(
            "motion detection: {} pictures a second, sensitivity {}, at least {} % of the picture for {} ms, {} regions ignored",
            settings.fps,
            settings.detector.sensitivity,
            settings.detector.min_area,
            settings.detector.min_duration_ms,
            settings.detector.ignore.len()
        );
        Ok(Motion {
            pace,
            pending: None,
            looking: None,
            started_picture: None,
            worker: Worker::start(look, "motion", done.clone())?,
            moving: false,
            level: 0.0,
            started: 0,
            stopped: 0,
            pictures: 0,
            failed: 0,
            cpu: Duration::ZERO,
        })
    }

    /// A main-stream picture, at its rate: to the worker if it is free,
    /// else kept (in place of an older one) until it is.
    pub fn picture(&mut self, pic: &MainPicture<'_>) {
        if self.pace.take(pic.frame.captured) {
            self.pending = Some(pic.frame.clone());
            self.offer();
        }
    }

    fn offer(&mut self) {
        if self.worker.busy() {
            return;
        }
        if let Some(frame) = self.pending.take() {
            self.worker.offer(frame.jpeg(), frame.captured, false);
            self.looking = Some(frame);
        }
    }

    /// The worker looked at a picture: motion started or stopped, or not.
    pub fn done(&mut self) -> Option<Event> {
        let done = self.worker.take()?;
        let looked_at = self.looking.take();
        self.cpu += done.took;
        let mut event = None;
        match (&done.made, done.out.get(..RESULT_LEN)) {
            (Ok(()), Some(&[e, moving, l0, l1])) => {
                self.pictures += 1;
                self.moving = moving == 1;
                self.level = f32::from(u16::from_le_bytes([l0, l1])) / 1000.0;
                event = match e {
                    1 => Some(Event::Started),
                    2 => Some(Event::Stopped),
                    _ => None,
                };
            }
            (Err(e), _) => {
                self.failed += 1;
                log::debug!("motion: {e}");
            }
            _ => self.failed += 1,
        }
        match event {
            Some(Event::Started) => {
                self.started += 1;
                self.started_picture = looked_at.map(|f| f.jpeg().to_vec());
                log::info!("motion started ({:.0} % of the picture changed)", self.level * 100.0);
            }
            Some(Event::Stopped) => {
                self.stopped += 1;
                log::info!("motion stopped");
            }
            None => {}
        }
        self.worker.give_back(done.out);
        self.offer();
        event
    }
}
