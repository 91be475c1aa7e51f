//! The fan-out: frames come in, each is made sendable and built once
//! ([`SharedFrame`]: RTP packets for RTSP, the JPEG file for HTTP), and its
//! reference is queued to every subscriber of its stream. Who subscribes
//! (an RTSP session, an MJPEG stream, a snapshot)
//! is not its business: a subscriber gives a token to be woken by, and
//! takes its frames with [`Fanout::next`] when it can send them, as
//! ustreamer's stream publishes a frame its HTTP server pulls. A queue is
//! bounded: a subscriber that cannot keep up loses whole frames, the oldest
//! first, and never holds back the others.

pub(crate) mod frame;
mod pace;

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use mio::Token;

use frame::Pool;
pub use frame::{RECORD_PREFIX, SharedFrame};
pub use pace::Pace;

use crate::table::{Id, Table};
use crate::clock::{Mono, RtpClock};
use crate::codec::{Codec, MediaKind, Packetizer, Unit};
use crate::intake::{Counts, Intake};
use crate::latency::SendLatency;
use crate::random::random_u64;
use crate::source::{CapturedFrame, StreamInfo};

/// A newest frame older than this is not the camera's picture now: a new
/// subscriber does not start with it.
pub const FRESH: Duration = Duration::from_secs(1);

/// One of the camera's streams: the main one (the camera's frames), or one
/// made from it (the detection sub-stream).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct StreamId(u8);

impl StreamId {
    pub const MAIN: StreamId = StreamId(0);
}

/// A stream's frames, as every client of it gets them.
pub struct Stream {
    id: StreamId,
    /// What clients name it by: its RTSP path.
    pub name: String,
    pub info: StreamInfo,
    pub packetizer: Packetizer,
    pub clock: RtpClock,
    pool: Rc<Pool>,
    last: Option<Rc<SharedFrame>>,
    /// The SDP's session id (o= line), fixed for the stream's life.
    pub sdp_session_id: u64,
    warned_size_change: bool,
    /// A subscriber waits for a key frame (H.264: an IDR picture): its
    /// encoder is asked for one.
    pub key_wanted: bool,
    /// Frames made and their RTP payload bytes, since the start (its bit
    /// rate, to /metrics).
    pub frames_made: u64,
    pub payload_bytes: u64,
}

impl Stream {
    /// A stream of `codec`. `ids`: random values for the SSRC, the first
    /// sequence number, the first timestamp and the SDP's session id.
    pub fn new(
        name: &str,
        codec: Codec,
        info: StreamInfo,
        mtu: usize,
        frames: usize,
        ids: [u64; 4],
    ) -> anyhow::Result<Stream> {
        let p = Packetizer::new(codec, ids[0] as u32, ids[1] as u16, mtu)?;
        Ok(Self::with(name, info, p, frames, ids))
    }

    /// The main stream: the camera's JPEGs, as the intake passes them,
    /// over RTP/JPEG and HTTP.
    pub fn camera(name: &str, info: StreamInfo, mtu: usize, frames: usize) -> anyhow::Result<Stream> {
        let ids = [random_u64(), random_u64(), random_u64(), random_u64()];
        Stream::new(name, Codec::Jpeg, info, mtu, frames, ids)
    }

    fn with(
        name: &str,
        info: StreamInfo,
        packetizer: Packetizer,
        frames: usize,
        ids: [u64; 4],
    ) -> Stream {
        let rate = packetizer.clock_rate();
        Stream {
            id: StreamId::MAIN,
            name: name.to_owned(),
            info,
            packetizer,
            clock: RtpClock::new(Mono::now(), ids[2] as u32, rate),
            pool: Pool::new(frames),
            last: None,
            sdp_session_id: ids[3] >> 1,
            warned_size_change: false,
            key_wanted: false,
            frames_made: 0,
            payload_bytes: 0,
        }
    }

    /// Its codec, as /metrics and the status page name it.
    pub fn codec(&self) -> &'static str {
        self.packetizer.name()
    }

    /// The RTP timestamp of instant `now` (a sender report's, PLAY's
    /// RTP-Info before any frame). Video's is its capture clock's; audio's
    /// runs on the card's samples, so it is the newest frame's, moved on
    /// at the nominal rate (off by its drift over at most a second: 0.1 ms
    /// at 100 ppm).
    pub fn rtp_at(&self, now: Mono) -> u32 {
        match (&self.last, self.packetizer.kind()) {
            (Some(f), MediaKind::Audio) => {
                let ns = now.0 as i128 - f.captured.0 as i128;
                let ticks = ns * i128::from(self.packetizer.clock_rate()) / 1_000_000_000;
                f.timestamp.wrapping_add(ticks as i64 as u32)
            }
            _ => self.clock.timestamp(now),
        }
    }

    /// The newest frame, if it is fresh.
    pub fn latest(&self, now: Mono) -> Option<&Rc<SharedFrame>> {
        self.last
            .as_ref()
            .filter(|f| now.saturating_sub(f.captured) < FRESH)
    }
}

/// Whose deliveries a subscriber's count in (the label /metrics shows:
/// "rtsp", "http"), as the subscriber's part named it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Label(u8);

/// Since the start, per label.
#[derive(Default, Clone, Copy)]
pub struct Delivery {
    pub frames_sent: u64,
    /// Dropped for a subscriber that could not keep up.
    pub frames_dropped: u64,
    pub bytes_sent: u64,
}

/// What a subscriber asks for.
pub struct Subscription {
    pub stream: StreamId,
    /// Given back by [`Fanout::take_ready`] when a frame is queued to it.
    pub wake: Token,
    pub label: Label,
    /// At most one frame this often (MJPEG's `?fps`).
    pub every: Option<Duration>,
    /// Frames its queue holds; None: client_queue.
    pub queue: Option<usize>,
    /// A streaming client (what max_clients counts), not a snapshot.
    pub client: bool,
    /// Frames are queued only while active (an RTSP session between PLAY
    /// and PAUSE).
    pub active: bool,
}

pub struct Subscriber {
    stream: StreamId,
    wake: Token,
    label: Label,
    pace: Pace,
    client: bool,
    active: bool,
    limit: usize,
    queue: VecDeque<Rc<SharedFrame>>,
    /// Frames wait for a key frame: it joined, or lost frames, mid-way
    /// through an H.264 group of pictures, which it could not decode.
    need_key: bool,
    pub frames_sent: u64,
    pub frames_dropped: u64,
    /// RTP packets and payload octets of the frames it took to send: an
    /// RTP sender's RTCP counts (they wrap, as RFC 3550 says).
    pub rtp_packets: u32,
    pub rtp_octets: u32,
}

pub type SubscriberId = Id<Subscriber>;

impl Subscriber {
    /// The token its frames wake.
    pub fn wake(&self) -> Token {
        self.wake
    }
}

pub struct Fanout {
    intake: Intake,
    streams: Vec<Stream>,
    subscribers: Table<Subscriber>,
    /// Frames queued per subscriber (client_queue).
    queue: usize,
    /// Wake tokens of subscribers given a frame since the last take.
    ready: Vec<Token>,
    labels: Vec<(&'static str, Delivery)>,
    pub latency: SendLatency,
    present: bool,
    /// When the fan-out began, and whether a client has had a frame since:
    /// the first one is said in the log, which the boot's health check
    /// waits for (docs/UPDATE.md).
    started: Mono,
    first_out: bool,
    /// The sound's encodings (`[audio]`), the configured one first: it is
    /// every video presentation's second track unless a client asks for
    /// another.
    audio: Vec<StreamId>,
}

impl Fanout {
    /// `quality`: what the intake re-encodes repaired frames at; `queue`:
    /// frames queued per subscriber (client_queue).
    pub fn new(quality: u8, queue: usize, main: Stream) -> anyhow::Result<Fanout> {
        let info = main.info;
        // Room for a camera that changes its size (clients keep the first),
        // none for a header claiming gigapixels; at most the largest size
        // the config takes.
        let max_pixels = (4 * info.width as usize * info.height as usize).min(8192 * 8192);
        Ok(Fanout {
            intake: Intake::new(quality, max_pixels)?,
            streams: vec![main],
            subscribers: Table::new(),
            queue,
            ready: Vec::new(),
            labels: Vec::new(),
            latency: SendLatency::default(),
            present: true,
            started: Mono::now(),
            first_out: false,
            audio: Vec::new(),
        })
    }

    pub fn add_stream(&mut self, mut stream: Stream) -> StreamId {
        let id = StreamId(self.streams.len() as u8);
        stream.id = id;
        self.streams.push(stream);
        id
    }

    #[expect(
        clippy::indexing_slicing,
        reason = "a StreamId is made only by add_stream, and streams stay for the server's life"
    )]
    pub fn stream(&self, id: StreamId) -> &Stream {
        &self.streams[usize::from(id.0)]
    }

    /// Every stream, the main one first.
    pub fn streams(&self) -> &[Stream] {
        &self.streams
    }

    #[expect(
        clippy::indexing_slicing,
        reason = "a StreamId is made only by add_stream, and streams stay for the server's life"
    )]
    pub fn stream_mut(&mut self, id: StreamId) -> &mut Stream {
        &mut self.streams[usize::from(id.0)]
    }

    /// The stream clients name `name`; "audio" is the configured
    /// encoding of the sound, whatever its own name.
    pub fn find(&self, name: &str) -> Option<StreamId> {
        if name == crate::media::audio::PATH {
            return self.audio();
        }
        let i = self.streams.iter().position(|s| s.name == name)?;
        Some(StreamId(i as u8))
    }

    pub fn label(&mut self, name: &'static str) -> Label {
        let i = match self.labels.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                self.labels.push((name, Delivery::default()));
                self.labels.len() - 1
            }
        };
        Label(i as u8)
    }

    /// What the subscribers of each label were sent and lost.
    pub fn deliveries(&self) -> &[(&'static str, Delivery)] {
        &self.labels
    }

    pub fn intake_counts(&self) -> &Counts {
        &self.intake.counts
    }

    /// A frame from the source: made sendable (or refused, counted) and
    /// published on the main stream; the frame as its clients have it.
    pub fn captured(&mut self, f: &CapturedFrame<'_>) -> Option<Rc<SharedFrame>> {
        let entered = Mono::now();
        let jpeg = self.intake.take(f.jpeg)?;
        publish(
            self.streams.first_mut()?,
            &mut self.subscribers,
            &mut self.ready,
            &mut self.labels,
            &Unit::Jpeg(&jpeg),
            f.captured,
            entered,
        )
    }

    /// A unit of one of its streams (a producer's frame), as
    /// [`Fanout::captured`] publishes the camera's.
    pub fn publish(
        &mut self,
        id: StreamId,
        unit: &Unit<'_>,
        captured: Mono,
        entered: Mono,
    ) -> Option<Rc<SharedFrame>> {
        publish(
            self.streams.get_mut(usize::from(id.0))?,
            &mut self.subscribers,
            &mut self.ready,
            &mut self.labels,
            unit,
            captured,
            entered,
        )
    }

    /// Takes back the wish for a key frame (the encoder was asked).
    pub fn take_key_wanted(&mut self, id: StreamId) -> bool {
        std::mem::take(&mut self.stream_mut(id).key_wanted)
    }

    /// A client asked for a key frame (WebRTC's PLI or FIR): the stream's
    /// encoder is asked, within its limit of one forced a second.
    #[cfg_attr(not(feature = "webrtc"), allow(dead_code))]
    pub fn want_key(&mut self, id: StreamId) {
        self.stream_mut(id).key_wanted = true;
    }

    pub fn subscribe(&mut self, s: Subscription) -> SubscriberId {
        let limit = s.queue.unwrap_or(self.queue).max(1);
        let id = self.subscribers.insert(Subscriber {
            stream: s.stream,
            wake: s.wake,
            label: s.label,
            pace: Pace::new(s.every),
            client: s.client,
            active: false,
            limit,
            queue: VecDeque::with_capacity(limit),
            need_key: false,
            frames_sent: 0,
            frames_dropped: 0,
            rtp_packets: 0,
            rtp_octets: 0,
        });
        if s.active {
            self.set_active(id, true);
        }
        id
    }

    /// The token [`Fanout::take_ready`] gives back for it from now on.
    pub fn set_wake(&mut self, id: SubscriberId, wake: Token) {
        if let Some(s) = self.subscribers.get_mut(id) {
            s.wake = wake;
        }
    }

    /// Its counts.
    pub fn subscriber(&self, id: SubscriberId) -> Option<&Subscriber> {
        self.subscribers.get(id)
    }

    /// Its counts, as it leaves.
    pub fn unsubscribe(&mut self, id: SubscriberId) -> Option<Subscriber> {
        self.subscribers.remove(id)
    }

    /// Starts its frames from the next one made (not the newest, which is
    /// older than the next of another stream: a client lining up a
    /// picture and its sound by their first packets' arrival, as
    /// GStreamer's rtspsrc over TCP does, would take its age for theirs).
    pub fn start_from_next(&mut self, id: SubscriberId) {
        self.activate(id, true, false);
    }

    /// Starts (the newest frame at once, if fresh, so the picture appears
    /// without waiting) or stops (what is queued is dropped) its frames.
    pub fn set_active(&mut self, id: SubscriberId, active: bool) {
        self.activate(id, active, true);
    }

    fn activate(&mut self, id: SubscriberId, active: bool, newest: bool) {
        let Some(s) = self.subscribers.get_mut(id) else {
            return;
        };
        if s.active == active {
            return;
        }
        s.active = active;
        if !active {
            s.queue.clear();
            return;
        }
        let now = Mono::now();
        let Some(stream) = self.streams.get_mut(usize::from(s.stream.0)) else {
            return;
        };
        // A picture at once; sound only from its next frame (an older one
        // would be a gap before the rest).
        let picture = newest && stream.packetizer.kind() == MediaKind::Video;
        match stream.latest(now).filter(|_| picture) {
            Some(f) if f.key => {
                s.pace.restart(f.captured);
                s.pace.advance(f.captured);
                s.queue.push_back(f.clone());
                self.ready.push(s.wake);
            }
            // No fresh key frame (H.264 mid-way through a group of
            // pictures): from the next one, which the stream's encoder is
            // asked for. (A JPEG stream's next frame is one anyway, and
            // every sound frame.)
            _ => {
                s.need_key = true;
                stream.key_wanted = true;
            }
        }
    }


    /// Whether it takes frames now (for audits: its owner keeps its own
    /// state).
    pub fn is_active(&self, id: SubscriberId) -> bool {
        self.subscribers.get(id).is_some_and(|s| s.active)
    }

    /// The next frame for it to send, left on its queue.
    pub fn peek(&self, id: SubscriberId) -> Option<&Rc<SharedFrame>> {
        self.subscribers.get(id)?.queue.front()
    }

    /// The next frame for it to send, taken off its queue.
    pub fn next(&mut self, id: SubscriberId) -> Option<Rc<SharedFrame>> {
        let s = self.subscribers.get_mut(id)?;
        let frame = s.queue.pop_front()?;
        s.rtp_packets = s.rtp_packets.wrapping_add(frame.packets() as u32);
        s.rtp_octets = s.rtp_octets.wrapping_add(frame.payload_octets);
        Some(frame)
    }

    /// A frame it took was written whole: `bytes` of it.
    pub fn delivered(&mut self, id: SubscriberId, frame: &SharedFrame, bytes: usize) {
        self.latency
            .record(Mono::now().saturating_sub(frame.entered));
        let Some(s) = self.subscribers.get_mut(id) else {
            return;
        };
        s.frames_sent += 1;
        let label = s.label;
        if let Some((_, d)) = self.labels.get_mut(usize::from(label.0)) {
            d.frames_sent += 1;
            d.bytes_sent += bytes as u64;
        }
        self.out(label);
    }

    /// Bytes of a frame sent outside any subscription (a snapshot of the
    /// newest frame).
    pub fn count_bytes(&mut self, label: Label, bytes: usize) {
        if let Some((_, d)) = self.labels.get_mut(usize::from(label.0)) {
            d.bytes_sent += bytes as u64;
        }
        self.out(label);
    }

    /// A frame went out whole to a client of `label`.
    fn out(&mut self, label: Label) {
        if !self.first_out {
            self.first_out = true;
            log::info!(
                "first frame sent to a client ({}), {:.1} s after the start",
                self.labels.get(usize::from(label.0)).map_or("", |l| l.0),
                Mono::now().saturating_sub(self.started).as_secs_f64()
            );
        }
    }

    /// Whether the camera is there (its newest frame is its picture).
    pub fn camera_present(&self) -> bool {
        self.present
    }

    /// The camera went away (its newest frame is no longer its picture) or
    /// came back.
    pub fn set_camera_present(&mut self, present: bool) {
        self.present = present;
        if !present {
            if let Some(main) = self.streams.first_mut() {
                main.last = None;
            }
        }
    }

    /// A frame it took could not be sent (a UDP send error).
    pub fn lost(&mut self, id: SubscriberId) {
        let Some(s) = self.subscribers.get_mut(id) else {
            return;
        };
        s.frames_dropped += 1;
        if let Some((_, d)) = self.labels.get_mut(usize::from(s.label.0)) {
            d.frames_dropped += 1;
        }
    }

    /// Whether a client is active on `stream` (a producer makes its
    /// stream only while someone watches it).
    pub fn watched(&self, stream: StreamId) -> bool {
        self.subscribers
            .iter()
            .any(|(_, s)| s.client && s.active && s.stream == stream)
    }

    /// The sound in its configured encoding, which video presentations
    /// carry as a second track.
    pub fn audio(&self) -> Option<StreamId> {
        self.audio.first().copied()
    }

    /// Every encoding of the sound, the configured one first.
    pub fn sounds(&self) -> &[StreamId] {
        &self.audio
    }

    /// The sound in `format` ("pcmu", "opus", "aac"), where it is made.
    pub fn sound(&self, format: &str) -> Option<StreamId> {
        self.audio.iter().copied().find(|&s| self.stream(s).codec() == format)
    }

    /// One more encoding of the sound (the configured one first).
    pub fn add_audio(&mut self, id: StreamId) {
        self.audio.push(id);
    }

    /// Whether anyone takes `stream`'s frames now (audio, which no
    /// producer subscribes to: its track is one of a client's).
    pub fn listened(&self, stream: StreamId) -> bool {
        self.subscribers
            .iter()
            .any(|(_, s)| s.active && s.stream == stream)
    }

    /// Streaming clients now, of every stream (max_clients counts them).
    pub fn clients(&self) -> usize {
        self.subscribers.iter().filter(|(_, s)| s.client).count()
    }

    /// The tokens of subscribers given frames since the last call, into
    /// `out` (emptied first; a token may appear more than once).
    pub fn take_ready(&mut self, out: &mut Vec<Token>) {
        out.clear();
        std::mem::swap(out, &mut self.ready);
    }
}

/// Builds `unit` once into a pooled frame of `stream` and queues it to
/// each of the stream's active subscribers that is due one (and, for
/// H.264, that can decode from it); the frame as they have it. Nothing if
/// the unit is not the stream's codec.
fn publish(
    stream: &mut Stream,
    subscribers: &mut Table<Subscriber>,
    ready: &mut Vec<Token>,
    labels: &mut [(&'static str, Delivery)],
    unit: &Unit<'_>,
    captured: Mono,
    entered: Mono,
) -> Option<Rc<SharedFrame>> {
    if let Some((w, h)) = unit.size() {
        if (w, h) != (stream.info.width, stream.info.height) && !stream.warned_size_change {
            log::warn!(
                "frame size changed from {}x{} to {w}x{h}; clients keep the size they were told",
                stream.info.width,
                stream.info.height,
            );
            stream.warned_size_change = true;
        }
    }
    let ts = match unit.ticks() {
        Some(t) => stream.clock.offset().wrapping_add(t),
        None => stream.clock.timestamp(captured),
    };
    let frame = SharedFrame::build(
        &stream.pool,
        &mut stream.packetizer,
        unit,
        ts,
        captured,
        entered,
    )?;
    if frame.key {
        stream.key_wanted = false;
    }
    queue(stream, subscribers, ready, labels, frame.clone());
    Some(frame)
}

/// Queues `frame` of `stream` to each of its active subscribers that is
/// due one (and, for H.264, that can decode from it).
fn queue(
    stream: &mut Stream,
    subscribers: &mut Table<Subscriber>,
    ready: &mut Vec<Token>,
    labels: &mut [(&'static str, Delivery)],
    frame: Rc<SharedFrame>,
) {
    let captured = frame.captured;
    stream.frames_made += 1;
    stream.payload_bytes += u64::from(frame.payload_octets);
    stream.last = Some(frame.clone());
    for (_, s) in subscribers.iter_mut() {
        if !s.active || s.stream != stream.id {
            continue;
        }
        if s.need_key && !frame.key {
            continue;
        }
        if !s.pace.due(captured) {
            continue;
        }
        s.need_key = false;
        s.pace.advance(captured);
        if s.queue.len() >= s.limit {
            if frame.key {
                s.queue.pop_front();
                s.frames_dropped += 1;
                if let Some((_, d)) = labels.get_mut(usize::from(s.label.0)) {
                    d.frames_dropped += 1;
                }
            } else {
                // What it holds needs the frames before it: all go, and
                // it waits for the next IDR picture.
                let n = s.queue.len() as u64 + 1;
                s.queue.clear();
                s.frames_dropped += n;
                if let Some((_, d)) = labels.get_mut(usize::from(s.label.0)) {
                    d.frames_dropped += n;
                }
                s.need_key = true;
                stream.key_wanted = true;
                continue;
            }
        }
        s.queue.push_back(frame.clone());
        ready.push(s.wake);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use camstream_h264::AccessUnit;
    use crate::source::StreamInfo;

    const INFO: StreamInfo = StreamInfo {
        width: 64,
        height: 64,
        fps: 30,
    };

    /// An access unit: an IDR picture with its parameter sets, or a P one.
    fn au(idr: bool) -> Vec<u8> {
        let mut b = Vec::new();
        if idr {
            b.extend_from_slice(&[0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x1f, 0xda]);
            b.extend_from_slice(&[0, 0, 0, 1, 0x68, 0xce, 0x3c, 0x80]);
            b.extend_from_slice(&[0, 0, 0, 1, 0x65, 0x88, 0x84, 0x21]);
        } else {
            b.extend_from_slice(&[0, 0, 0, 1, 0x41, 0x9a, 0x02, 0x03]);
        }
        b
    }

    fn publish(f: &mut Fanout, id: StreamId, idr: bool) {
        let bytes = au(idr);
        let au = AccessUnit::parse(&bytes).unwrap();
        f.publish(id, &Unit::H264(&au), Mono::now(), Mono::now());
    }

    /// Of a 30 frame/s stream whose frames come up to 4 ms early or late,
    /// a subscriber asking for one each 200 ms gets 5 a second: 300 in a
    /// minute, give or take one (it got 334, 0.167 and 0.200 s apart,
    /// when each slot moved to the frame taken less a tenth).
    #[test]
    fn a_subscriber_gets_the_rate_it_asks_for() {
        let main = Stream::new("stream", Codec::Jpeg, INFO, 1400, 4, [1, 2, 3, 4]).unwrap();
        let mut f = Fanout::new(80, 2, main).unwrap();
        let id = f.add_stream(Stream::new("h264", Codec::H264, INFO, 1400, 4, [5, 6, 7, 8]).unwrap());
        let label = f.label("rtsp");
        let every = Duration::from_millis(200);
        let s = f.subscribe(Subscription {
            stream: id,
            wake: Token(99),
            label,
            every: Some(every),
            queue: Some(1),
            client: false,
            active: true,
        });
        let bytes = au(true);
        let idr = AccessUnit::parse(&bytes).unwrap();
        let start = 1_000_000_000u64;
        let mut taken = Vec::new();
        for i in 0..30 * 60u64 {
            // A pseudo-random jitter of -4..=4 ms.
            let jitter = (i * 7919 % 9) as i64 - 4;
            let at =
                Mono((start as i64 + (i as i64 * 1_000_000_000) / 30 + jitter * 1_000_000) as u64);
            f.publish(id, &Unit::H264(&idr), at, at);
            if let Some(fr) = f.next(s) {
                taken.push(fr.captured);
            }
        }
        assert!((299..=301).contains(&taken.len()), "{}", taken.len());
        // No two closer than a source frame short of the interval.
        for w in taken.windows(2) {
            assert!(w[1].saturating_sub(w[0]) > Duration::from_millis(150));
        }
    }

    #[test]
    fn an_h264_subscriber_starts_and_restarts_at_an_idr_picture() {
        let main = Stream::new("stream", Codec::Jpeg, INFO, 1400, 4, [1, 2, 3, 4]).unwrap();
        let mut f = Fanout::new(80, 2, main).unwrap();
        let id = f.add_stream(Stream::new("h264", Codec::H264, INFO, 1400, 4, [5, 6, 7, 8]).unwrap());
        let label = f.label("rtsp");
        publish(&mut f, id, true);
        publish(&mut f, id, false);
        // Joining after a P picture: nothing until the next IDR picture,
        // which the encoder is asked for.
        let s = f.subscribe(Subscription {
            stream: id,
            wake: Token(99),
            label,
            every: None,
            queue: None,
            client: true,
            active: true,
        });
        assert!(f.next(s).is_none());
        assert!(f.take_key_wanted(id));
        publish(&mut f, id, false);
        assert!(f.next(s).is_none());
        publish(&mut f, id, true);
        assert!(f.next(s).is_some_and(|fr| fr.key));
        // Falling behind (a queue of 2) on P pictures: what it holds goes,
        // counted as dropped, and it waits for the next IDR picture again.
        publish(&mut f, id, false);
        publish(&mut f, id, false);
        publish(&mut f, id, false);
        assert!(f.next(s).is_none());
        assert!(f.take_key_wanted(id));
        assert_eq!(f.unsubscribe(s).map(|s| s.frames_dropped), Some(3));
        // A JPEG stream's frames are all key frames: a new subscriber gets
        // the newest at once (none here: no frame captured yet).
        assert!(!f.take_key_wanted(StreamId::MAIN));
    }
}
