//! The detection sub-stream: every so often a main-stream frame goes to
//! a worker thread (substream.rs: scaled decode, box filter, encode) and
//! comes back as the sub-stream's frame, which RTSP clients of
//! rtsp://CAMERA/sub get through the same fan-out as the main stream's.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use camstream_rtp::Packetizer;
use mio::{Registry, Token, Waker};

use super::fanout::{Stream, StreamId};
use super::frame::{Pool, SharedFrame};
use super::{Server, random_u64};
use crate::clock::{Mono, RtpClock};
use crate::config::SubStream;
use crate::source::StreamInfo;
use crate::substream::{SubEncoder, Worker, sub_size};

/// Its path: rtsp://CAMERA/sub.
pub const PATH: &str = "sub";

pub struct Sub {
    pub stream: Stream,
    pub cfg: SubStream,
    worker: Worker,
    waker: Arc<Waker>,
    every: Duration,
    next_due: Mono,
    /// CPU time the worker spent, and frames it made.
    pub cpu: Duration,
    pub frames: u64,
    pub failed: u64,
}

impl Sub {
    pub fn start(
        cfg: SubStream,
        main: &StreamInfo,
        mtu: usize,
        registry: &Registry,
        token: Token,
    ) -> Result<Sub> {
        let (w, h) = sub_size(
            (usize::from(main.width), usize::from(main.height)),
            (usize::from(cfg.width), usize::from(cfg.height)),
        );
        let enc = SubEncoder::new(w, h, cfg.quality)?;
        let waker = Arc::new(Waker::new(registry, token)?);
        log::info!(
            "sub-stream: {w}x{h} at {} fps, rtsp://CAMERA/{PATH}",
            cfg.fps
        );
        Ok(Sub {
            cfg,
            stream: Stream {
                info: StreamInfo {
                    width: w as u16,
                    height: h as u16,
                    fps: cfg.fps,
                },
                packetizer: Packetizer::new(random_u64() as u32, random_u64() as u16, mtu)?,
                clock: RtpClock::new(Mono::now(), random_u64() as u32),
                pool: Pool::new(4),
                last: None,
                sdp_session_id: random_u64() >> 1,
                warned_size_change: false,
            },
            worker: Worker::start(enc, waker.clone())?,
            waker,
            every: Duration::from_secs(1) / cfg.fps,
            next_due: Mono(0),
            cpu: Duration::ZERO,
            frames: 0,
            failed: 0,
        })
    }
}

impl Sub {
    /// New size, rate and quality (ONVIF's SetVideoEncoderConfiguration):
    /// a new encoder on a new worker (the old one finishes its frame and
    /// ends first); clients already playing get frames of the new size,
    /// which RTP/JPEG carries in every packet.
    pub fn reconfigure(&mut self, cfg: SubStream, main: &StreamInfo) -> Result<()> {
        let (w, h) = sub_size(
            (usize::from(main.width), usize::from(main.height)),
            (usize::from(cfg.width), usize::from(cfg.height)),
        );
        let enc = SubEncoder::new(w, h, cfg.quality)?;
        self.worker = Worker::start(enc, self.waker.clone())?;
        self.stream.info = StreamInfo {
            width: w as u16,
            height: h as u16,
            fps: cfg.fps,
        };
        self.every = Duration::from_secs(1) / cfg.fps;
        self.cfg = cfg;
        log::info!(
            "sub-stream now {w}x{h} at {} fps, quality {}",
            cfg.fps,
            cfg.quality
        );
        Ok(())
    }
}

impl Server {
    /// The stream `id` names (the main one if there is no sub-stream).
    pub(super) fn stream_of(&self, id: StreamId) -> &Stream {
        match (id, &self.sub) {
            (StreamId::Sub, Some(s)) => &s.stream,
            _ => &self.stream,
        }
    }

    pub(super) fn stream_path(&self, id: StreamId) -> &str {
        match id {
            StreamId::Sub => PATH,
            StreamId::Main => &self.cfg.path,
        }
    }

    /// A main-stream frame: the worker's, when one is due and it is free.
    pub(super) fn sub_offer(&mut self, frame: &Rc<SharedFrame>) {
        let Some(sub) = &mut self.sub else {
            return;
        };
        if frame.captured < sub.next_due {
            return;
        }
        // Made only while someone watches it.
        let watched = self
            .sessions
            .iter()
            .any(|(_, s)| s.playing && s.stream == StreamId::Sub);
        if !watched {
            return;
        }
        if sub.worker.offer(frame.jpeg(), frame.captured) {
            // Due again a period after this frame's time, or after now if
            // frames stopped for a while.
            sub.next_due = frame
                .captured
                .add(sub.every)
                .max(sub.next_due.add(sub.every));
            if sub.next_due.saturating_sub(frame.captured) > sub.every {
                sub.next_due = frame.captured.add(sub.every);
            }
        }
    }

    /// The worker finished a frame: to the sub-stream's clients.
    pub(super) fn sub_readable(&mut self) {
        let Some(sub) = &mut self.sub else {
            return;
        };
        let Some(done) = sub.worker.take() else {
            return;
        };
        sub.cpu += done.took;
        let jpeg = match done.jpeg {
            Ok(j) => j,
            Err(e) => {
                sub.failed += 1;
                log::debug!("sub-stream: {e}");
                return;
            }
        };
        let parsed = match camstream_rtp::jpeg::parse(&jpeg) {
            Ok(p) => p,
            Err(e) => {
                sub.failed += 1;
                log::warn!("sub-stream: its own frame does not parse: {e:?}");
                return;
            }
        };
        sub.frames += 1;
        let s = &mut sub.stream;
        let ts = s.clock.timestamp(done.captured);
        let frame = SharedFrame::build(
            &s.pool,
            &mut s.packetizer,
            &parsed,
            ts,
            done.captured,
            Mono::now(),
        );
        s.last = Some(frame.clone());
        self.rtsp_offer(&frame, StreamId::Sub);
        self.flush_all();
    }
}
