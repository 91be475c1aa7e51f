//! Frames and their fan-out. Each frame the intake took is built once
//! ([`SharedFrame`]: RTP packets for RTSP, the JPEG file for HTTP) and its
//! reference queued to every client that wants it: RTSP sessions that are
//! playing, MJPEG streams, snapshots waiting for a frame. A client's queue is
//! bounded: one that cannot keep up loses whole frames, never part of one,
//! and never holds back the others.

use std::collections::VecDeque;
use std::rc::Rc;

use camstream_rtp::Packetizer;

use super::Server;
use super::frame::{Pool, SharedFrame};
use crate::clock::{Mono, RtpClock};
use crate::source::{CapturedFrame, StreamInfo};

/// Which of the camera's streams: the main one, or the detection
/// sub-stream made from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamId {
    #[default]
    Main,
    Sub,
}

pub struct Stream {
    pub info: StreamInfo,
    pub packetizer: Packetizer,
    pub clock: RtpClock,
    pub pool: Rc<Pool>,
    pub last: Option<Rc<SharedFrame>>,
    pub sdp_session_id: u64,
    pub warned_size_change: bool,
}

/// Since the start, per protocol: what /metrics reports.
#[derive(Default)]
pub struct Totals {
    pub rtsp: Delivery,
    pub http: Delivery,
    pub snapshots: u64,
    pub http_requests: u64,
}

#[derive(Default)]
pub struct Delivery {
    pub frames_sent: u64,
    /// Dropped for a client that could not keep up.
    pub frames_dropped: u64,
    pub bytes_sent: u64,
}

/// Queues `frame`, dropping the oldest frame not started when `queue` holds
/// `limit`; `keep_front` keeps the front one (partly sent). Returns whether
/// a frame was dropped.
pub fn enqueue(
    queue: &mut VecDeque<Rc<SharedFrame>>,
    frame: &Rc<SharedFrame>,
    limit: usize,
    keep_front: bool,
) -> bool {
    let mut dropped = false;
    if queue.len() >= limit {
        dropped = queue.remove(usize::from(keep_front)).is_some();
    }
    queue.push_back(frame.clone());
    dropped
}

impl Server {
    pub(super) fn frame_captured(&mut self, f: CapturedFrame<'_>) {
        let entered = Mono::now();
        let Some(jpeg) = self.intake.take(f.jpeg) else {
            return;
        };
        let s = &mut self.stream;
        if (jpeg.width, jpeg.height) != (s.info.width, s.info.height) && !s.warned_size_change {
            log::warn!(
                "frame size changed from {}x{} to {}x{}; clients keep the size they were told",
                s.info.width,
                s.info.height,
                jpeg.width,
                jpeg.height
            );
            s.warned_size_change = true;
        }
        let ts = s.clock.timestamp(f.captured);
        let frame = SharedFrame::build(&s.pool, &mut s.packetizer, &jpeg, ts, f.captured, entered);
        s.last = Some(frame.clone());
        self.rtsp_offer(&frame, StreamId::Main);
        self.http_offer(&frame);
        self.sub_offer(&frame);
        self.flush_all();
    }

    /// The camera went away: the newest frame is no longer the camera's
    /// picture, and HTTP clients waiting for one are told.
    pub(super) fn camera_lost(&mut self) {
        self.stream.last = None;
        self.http_camera_lost();
    }

    /// Sends what is queued: UDP sessions first (cheap), then TCP
    /// connections.
    pub(super) fn flush_all(&mut self) {
        self.rtsp_flush_udp_all();
        let mut keys = std::mem::take(&mut self.scratch_conns);
        keys.clear();
        keys.extend(
            self.conns
                .iter()
                .filter(|(_, c)| c.streaming())
                .map(|(k, _)| k),
        );
        for &ci in &keys {
            self.flush_conn(ci);
        }
        self.scratch_conns = keys;
    }
}
