//! Sound beside the picture (`[audio]`): a capture thread reads 20 ms at a
//! time, encodes it and hands the frame to the event loop, which publishes
//! it on the fan-out's audio stream, the second track of every RTSP
//! presentation. It runs only while a client plays that track.
//!
//! Audio's RTP timestamps count its samples, without gaps; each frame's
//! capture instant is the monotonic time of the input its first sample
//! stands for (the encoder's delay taken off), from the capture clock's
//! fit. The sender reports map both tracks to one wall clock from there
//! (`Stream::rtp_at`), which is what players keep lips in sync by.

#[cfg(feature = "alsa")]
mod alsa;
mod encode;
mod tone;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use anyhow::Result;
use camstream_audio::SampleClock;
use camstream_audio::packetize::Format;
use camstream_rtp::rtp::HEADER_LEN;
use mio::Waker;

use crate::clock::{Mono, RtpClock};
use crate::codec::{Codec, Unit};
use crate::config::{AudioCodec, AudioDevice, AudioSettings};
use crate::fanout::{Fanout, Stream, StreamId};
use crate::random::random_u64;
use crate::source::StreamInfo;
use encode::{Encoder, FRAME, INPUT_RATE};

/// The audio stream's name in the fan-out (and its RTSP path: the sound
/// alone).
pub const PATH: &str = "audio";
/// A client's sound queue (RTSP's track, HTTP's stream): half a second of
/// 20 ms frames, since a picture's write to a slow client lasts longer
/// than the three frames a picture's queue holds.
pub const QUEUE: usize = 25;
/// Frames between the capture thread and the loop: 200 ms.
const IN_FLIGHT: usize = 10;
/// Frames the stream keeps for reuse: what a client's queue holds
/// ([`QUEUE`]) and a few, so a slow client costs no allocation.
const POOL: usize = 32;

/// One encoded frame on its way to the loop.
struct Encoded {
    data: Vec<u8>,
    /// Its first sample at the RTP clock's rate, from the capture's start.
    ticks: u32,
    captured: Mono,
}

struct Worker {
    stop: Arc<AtomicBool>,
    frames: Receiver<Encoded>,
    recycle: SyncSender<Vec<u8>>,
}

pub struct Audio {
    settings: AudioSettings,
    stream: StreamId,
    format: Format,
    max_frame: usize,
    done: Arc<Waker>,
    worker: Option<Worker>,
    /// Frames published, and those lost because the loop was behind
    /// (the capture thread counts them).
    pub frames_captured: u64,
    lost: Arc<AtomicU64>,
}

impl Audio {
    /// The audio stream on `fanout`; capture starts with its first client.
    /// None where `device = "auto"` found no sound card: no sound track.
    pub fn start(
        settings: AudioSettings,
        mtu: usize,
        fanout: &mut Fanout,
        done: &Arc<Waker>,
    ) -> Result<Option<Audio>> {
        let format = match settings.codec {
            AudioCodec::Opus => Format::Opus,
            AudioCodec::Pcmu => Format::Pcmu,
            AudioCodec::Aac => Format::Aac(camstream_audio::aac::Config::lc(INPUT_RATE, 1)?),
        };
        // Refused now rather than at the first client.
        Encoder::new(format, settings.bitrate)?;
        let Some(settings) = check_device(settings)? else {
            return Ok(None);
        };
        let info = StreamInfo {
            width: 0,
            height: 0,
            fps: INPUT_RATE / FRAME as u32,
        };
        let ids = [random_u64(), random_u64(), random_u64(), random_u64()];
        let stream = fanout.add_stream(Stream::new(PATH, Codec::Audio(format), info, mtu, POOL, ids)?);
        fanout.set_audio(stream);
        log::info!("audio: {} from {}", format.name(), settings.device.name());
        Ok(Some(Audio {
            settings,
            stream,
            format,
            max_frame: mtu - HEADER_LEN,
            done: done.clone(),
            worker: None,
            frames_captured: 0,
            lost: Arc::new(AtomicU64::new(0)),
        }))
    }

    /// What it encodes to, and at what bit rate (bit/s, where the format
    /// has one).
    pub fn format(&self) -> (Format, u32) {
        (self.format, self.settings.bitrate)
    }

    /// Encodes at `bitrate` (bit/s) from now on, if its encoder takes it:
    /// a capture that runs stops, and the next turn of the loop starts it
    /// again with the new rate (the sound pauses while the device is
    /// opened again).
    pub fn set_bitrate(&mut self, bitrate: u32) -> Result<()> {
        if bitrate == self.settings.bitrate {
            return Ok(());
        }
        Encoder::new(self.format, bitrate)?;
        self.settings.bitrate = bitrate;
        if let Some(w) = self.worker.take() {
            w.stop.store(true, Ordering::Relaxed);
        }
        log::info!("audio: {} at {} kbit/s from now on", self.format.name(), bitrate / 1000);
        Ok(())
    }

    /// Captures while a client plays the audio track; stops when none does.
    pub fn follow_watchers(&mut self, fanout: &mut Fanout) {
        let listened = fanout.listened(self.stream);
        match (&self.worker, listened) {
            (None, true) => match self.spawn(fanout.stream(self.stream).clock) {
                Ok(w) => self.worker = Some(w),
                Err(e) => log::warn!("audio: {e:#}"),
            },
            (Some(w), false) => {
                // The thread sees it within a frame and ends by itself.
                w.stop.store(true, Ordering::Relaxed);
                self.worker = None;
            }
            _ => {}
        }
    }

    fn spawn(&mut self, rtp: RtpClock) -> Result<Worker> {
        let stop = Arc::new(AtomicBool::new(false));
        let (send, frames) = sync_channel(IN_FLIGHT);
        let (recycle, buffers) = sync_channel(IN_FLIGHT + 1);
        for _ in 0..IN_FLIGHT {
            let _ = recycle.try_send(Vec::with_capacity(self.max_frame));
        }
        let mut encoder = Encoder::new(self.format, self.settings.bitrate)?;
        let device = self.settings.device.clone();
        let (done, max, halt, lost) = (self.done.clone(), self.max_frame, stop.clone(), self.lost.clone());
        std::thread::Builder::new()
            .name("audio".into())
            .spawn(move || {
                let out = Out {
                    frames: &send,
                    buffers: &buffers,
                    lost: &lost,
                    done: &done,
                };
                if let Err(e) = run(device, &mut encoder, rtp, max, &out, &halt) {
                    log::warn!("audio capture stopped: {e:#}");
                }
            })?;
        Ok(Worker {
            stop,
            frames,
            recycle,
        })
    }

    /// Frames the loop was too slow for.
    pub fn frames_lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Publishes what the capture thread made.
    pub fn done(&mut self, fanout: &mut Fanout) {
        let Some(w) = &self.worker else {
            return;
        };
        while let Ok(e) = w.frames.try_recv() {
            self.frames_captured += 1;
            let unit = Unit::Audio {
                frame: &e.data,
                sample: e.ticks,
            };
            fanout.publish(self.stream, &unit, e.captured, Mono::now());
            let _ = w.recycle.try_send(e.data);
        }
    }
}

/// Where the capture thread's frames go.
struct Out<'a> {
    frames: &'a SyncSender<Encoded>,
    /// Buffers the loop hands back.
    buffers: &'a Receiver<Vec<u8>>,
    lost: &'a AtomicU64,
    done: &'a Waker,
}

/// `settings` with the device `auto` found, checked: None where it found
/// none (sound off, said in the log). A named device that is not there is
/// only warned of: it may be plugged in later.
#[cfg(feature = "alsa")]
fn check_device(mut settings: AudioSettings) -> Result<Option<AudioSettings>> {
    match &settings.device {
        AudioDevice::Test => {}
        AudioDevice::Auto => {
            let all = alsa::devices();
            let Some(d) = alsa::choose(&all) else {
                log::info!(
                    "audio: no sound card to capture from (the machine has {}; auto takes no loopback card): no sound",
                    alsa::listing()
                );
                return Ok(None);
            };
            log::info!("audio: {} ({}, {})", d.name, d.card, d.driver);
            settings.device = AudioDevice::Named(d.name.clone());
        }
        AudioDevice::Named(name) => {
            if let Err(e) = alsa::check(name) {
                log::warn!("{e:#}");
            }
        }
    }
    Ok(Some(settings))
}

/// The test tone; `auto` finds nothing in such a build (the config
/// refuses a card named).
#[cfg(not(feature = "alsa"))]
fn check_device(settings: AudioSettings) -> Result<Option<AudioSettings>> {
    if settings.device == AudioDevice::Auto {
        log::info!("audio: this build captures from no sound card (its alsa feature is off): no sound");
        return Ok(None);
    }
    Ok(Some(settings))
}

/// The capture thread: 20 ms in, one encoded frame out, until stopped.
fn run(
    device: AudioDevice,
    encoder: &mut Encoder,
    rtp: RtpClock,
    max: usize,
    out: &Out<'_>,
    stop: &AtomicBool,
) -> Result<()> {
    let mut pipe = Pipe::new(encoder, rtp, max);
    match device {
        AudioDevice::Test => {
            let mut source = tone::Tone::new();
            let mut pcm = [0i16; FRAME];
            while !stop.load(Ordering::Relaxed) {
                let first = source.read(&mut pcm);
                let last = first + FRAME as u64;
                if !pipe.encode(&pcm, first, (last, source.instant(last)), out)? {
                    return Ok(());
                }
            }
            Ok(())
        }
        #[cfg(feature = "alsa")]
        AudioDevice::Named(name) => run_alsa(&name, &mut pipe, out, stop),
        #[allow(unreachable_patterns)]
        other => anyhow::bail!("audio.device {other:?} is not in this build"),
    }
}

/// Captures from `name` until stopped: opened again a second after it
/// fails or goes silent (a USB microphone unplugged and plugged back),
/// each failure said once.
#[cfg(feature = "alsa")]
fn run_alsa(name: &str, pipe: &mut Pipe<'_>, out: &Out<'_>, stop: &AtomicBool) -> Result<()> {
    // Silence this long (no samples at all, not quiet ones) is a device
    // that stopped: opened again.
    const SILENT: u32 = 8;
    let mut said = String::new();
    let mut pcm = [0i16; FRAME];
    while !stop.load(Ordering::Relaxed) {
        let failed = match alsa::Capture::open(name) {
            Err(e) => e,
            Ok(mut capture) => {
                if !said.is_empty() {
                    log::info!("audio: capturing from {name} again");
                    said.clear();
                }
                pipe.restart()?;
                let mut silent = 0;
                loop {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    match capture.read(&mut pcm) {
                        Ok(alsa::Got::Frame(r)) => {
                            silent = 0;
                            if !pipe.encode(&pcm, r.first, r.seen, out)? {
                                return Ok(());
                            }
                        }
                        Ok(alsa::Got::Restarted) => {
                            out.lost.fetch_add(1, Ordering::Relaxed);
                            pipe.restart()?;
                        }
                        Ok(alsa::Got::Nothing) if silent < SILENT => silent += 1,
                        Ok(alsa::Got::Nothing) => break anyhow::anyhow!("{name} gave no sound for 2 s"),
                        Err(e) => break e,
                    }
                }
            }
        };
        let msg = format!("{failed:#}");
        if msg != said {
            log::warn!("audio: {msg}; trying again each second");
            said = msg;
        }
        for _ in 0..10 {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

/// From captured samples to the loop: the encoder, the capture clock's
/// fit and the RTP timestamps counted from the stream's clock at the
/// capture's first sample.
struct Pipe<'a> {
    encoder: &'a mut Encoder,
    clock: SampleClock,
    rtp: RtpClock,
    /// The RTP timestamp of sample 0, once the card's clock said when
    /// that was.
    base: Option<u32>,
    max: usize,
}

impl<'a> Pipe<'a> {
    fn new(encoder: &'a mut Encoder, rtp: RtpClock, max: usize) -> Pipe<'a> {
        Pipe {
            encoder,
            clock: SampleClock::new(INPUT_RATE),
            rtp,
            base: None,
            max,
        }
    }

    /// The count begins at 0 again (the device opened again, or overran):
    /// a new fit, a new base, and an encoder without the old samples
    /// (its delay counts from the new first sample). The timestamps jump
    /// over the gap, which is what tells a player sound is missing.
    #[cfg_attr(not(feature = "alsa"), allow(dead_code))]
    fn restart(&mut self) -> Result<()> {
        self.clock.reset();
        self.base = None;
        self.encoder.reset()
    }

    /// Encodes `pcm` (its first sample `first`; sample `seen.0` was
    /// captured at `seen.1`) and sends what it made; false once the loop
    /// is gone.
    fn encode(&mut self, pcm: &[i16], first: u64, seen: (u64, Mono), out: &Out<'_>) -> Result<bool> {
        self.clock.observe(seen.0, seen.1.0);
        let (num, den) = self.encoder.ticks_per_input();
        // The stream's RTP clock at sample 0: the timestamps count samples
        // from there, so they agree with that clock (which sender reports
        // before the first frame use) but for the card's drift.
        let (clock, rtp) = (&self.clock, &self.rtp);
        let base = *self.base.get_or_insert_with(|| {
            let zero = Mono(clock.instant_of(0.0).unwrap_or(seen.1.0));
            rtp.timestamp(zero).wrapping_sub(rtp.offset())
        });
        let mut gone = false;
        self.encoder.encode(pcm, first, self.max, |frame, stands_for| {
            let mut data = out.buffers.recv_timeout(Duration::from_millis(100)).unwrap_or_default();
            data.clear();
            data.extend_from_slice(frame);
            let captured = Mono(clock.instant_of(stands_for as f64).unwrap_or(0));
            let ticks = base.wrapping_add((stands_for * num / den) as u32);
            match out.frames.try_send(Encoded { data, ticks, captured }) {
                Ok(()) => out.done.wake()?,
                // The loop is behind: this frame is lost, as in a card's
                // overrun.
                Err(TrySendError::Full(_)) => {
                    out.lost.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => gone = true,
            }
            Ok(())
        })?;
        Ok(!gone)
    }
}
