//! Motion detection, in one place: a subscriber of the main stream (its
//! newest picture at `[motion] fps`, always: motion is looked for whether
//! or not anyone watches) whose worker thread reads each JPEG's DC
//! coefficients alone (its luma at an eighth of its size: camstream-rtp's
//! DC decoder skips the rest of the scan, and nothing is transformed) and
//! hands them to camstream-motion's detector. The event loop learns each
//! picture's result when the worker is done: whether motion started or
//! stopped, and how much of the picture changed.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use camstream_motion::{Detector, Event};
use camstream_rtp::jpeg;
use mio::Waker;

use super::MainPicture;
use super::worker::{Encode, Picture, Worker};
use crate::clock::Mono;
use crate::config::MotionSettings;
use crate::fanout::{Pace, SharedFrame};
use crate::source::StreamInfo;

/// The detector on the worker's thread.
struct Look {
    detector: Detector,
    /// The main stream's luma at an eighth of its size.
    luma: Vec<u8>,
}

/// What the worker says of a picture, in its output buffer: the event
/// (0 none, 1 started, 2 stopped), whether there is motion, and the
/// share of the picture that changed (per mille, little-endian u16).
const RESULT_LEN: usize = 4;

impl Encode for Look {
    fn encode(&mut self, pic: Picture<'_>, _key: bool, out: &mut Vec<u8>) -> Result<()> {
        let Picture::Jpeg(frame) = pic else {
            bail!("motion detection takes the main stream's JPEG");
        };
        // The main stream's frames are what RTP/JPEG carries (the intake
        // made them so): the parse only finds the scan again.
        let j = jpeg::parse(frame).map_err(|e| anyhow!("{e}"))?;
        // The buffer is the main stream's size: a frame of another is
        // refused, not looked at in part.
        let (w, h) = jpeg::dc_luma(&j, &mut self.luma).map_err(|e| anyhow!("{e}"))?;
        if w * h != self.luma.len() {
            bail!("a {}x{} frame in the main stream", j.width, j.height);
        }
        let y = &self.luma[..];
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

/// Pictures looked at a second unless `[motion] fps` says: 5 up to
/// 1280x720, fewer in proportion above (2 at 1920x1080, 1 from 5 MP), so
/// that a Pi 3 spends about 2 % of a core on it whatever the size: reading
/// a frame's DC coefficients costs in proportion to its pixels
/// (docs/BENCHMARKS.md). Never more than the camera's rate.
pub fn default_rate(main: StreamInfo) -> u32 {
    let pixels = u64::from(main.width) * u64::from(main.height);
    let rate = (5 * 1280 * 720 / pixels.max(1)).clamp(1, 5) as u32;
    rate.min(main.fps.max(1))
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
        let (w, h) = jpeg::dc_size(main.width, main.height);
        let look = Look {
            detector: Detector::new(settings.detector.clone())?,
            luma: vec![0; w * h],
        };
        let fps = settings.fps.unwrap_or_else(|| default_rate(main));
        let pace = Pace::new(Some(Duration::from_secs(1) / fps));
        log::info!(
            "motion detection: {} pictures a second, sensitivity {}, at least {} % of the picture for {} ms, {} regions ignored",
            fps,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_rate_falls_with_the_picture_size() {
        let rate = |width, height, fps| default_rate(StreamInfo { width, height, fps });
        assert_eq!(rate(640, 480, 30), 5);
        assert_eq!(rate(1280, 720, 30), 5);
        assert_eq!(rate(1920, 1080, 30), 2);
        assert_eq!(rate(2592, 1944, 15), 1);
        assert_eq!(rate(640, 480, 3), 3);
    }

    #[test]
    fn a_frame_of_the_main_streams_size_is_looked_at_and_another_refused() {
        // A frame from a real encoder (FFmpeg), 160x120.
        let jpeg = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../camstream-rtp/testdata/ffmpeg-5.1-mjpeg-yuvj420p-huffman-default-160x120.jpg"
        ))
        .unwrap();
        let look = |w: u16, h: u16| Look {
            detector: Detector::new(camstream_motion::Settings::default()).unwrap(),
            luma: vec![0; usize::from(w / 8) * usize::from(h / 8)],
        };
        let mut out = Vec::new();
        look(160, 120)
            .encode(Picture::Jpeg(&jpeg), false, &mut out)
            .unwrap();
        // The first picture is the background: no event, no motion.
        assert_eq!(out, [0, 0, 0, 0]);
        let err = look(320, 240)
            .encode(Picture::Jpeg(&jpeg), false, &mut out)
            .unwrap_err();
        assert_eq!(err.to_string(), "a 160x120 frame in the main stream");
        let err = look(160, 120)
            .encode(Picture::Jpeg(&jpeg[..jpeg.len() / 2]), false, &mut out)
            .unwrap_err();
        assert_eq!(err.to_string(), "truncated JPEG (no EOI marker)");
    }
}
