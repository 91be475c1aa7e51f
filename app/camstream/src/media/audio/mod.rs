//! Sound beside the picture (`[audio]`): a capture thread reads 20 ms at a
//! time, encodes it in each encoding a client listens to and hands the
//! frames to the event loop, which publishes each on the fan-out's stream
//! of its encoding. The configured encoding is the second track of every
//! RTSP presentation; a client may ask for another (`?audio=opus`). The
//! capture runs only while a client plays one of them, and an encoding
//! only while a client plays it.
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
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
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

/// What clients name the sound in its configured encoding (its RTSP
/// path: the sound alone); each encoding's own stream is `audio/NAME`.
pub const PATH: &str = "audio";
/// A client's sound queue (RTSP's track, HTTP's stream): half a second of
/// 20 ms frames, since a picture's write to a slow client lasts longer
/// than the three frames a picture's queue holds.
pub const QUEUE: usize = 25;
/// Frames of one encoding between the capture thread and the loop: 200 ms.
const IN_FLIGHT: usize = 10;
/// Frames a stream keeps for reuse: what a client's queue holds
/// ([`QUEUE`]) and a few, so a slow client costs no allocation.
const POOL: usize = 32;

/// One encoded frame on its way to the loop.
struct Encoded {
    /// Which encoding (its index in `Audio::encodings`).
    encoding: usize,
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

/// One of the forms the sound is made in, with its stream.
struct Encoding {
    format: Format,
    /// bit/s, where the format has one.
    bitrate: u32,
    stream: StreamId,
    /// Frames published, and those lost because the loop was behind (the
    /// capture thread counts them).
    made: u64,
    lost: Arc<AtomicU64>,
}

/// Frames of one encoding, made and lost (/metrics).
#[derive(Debug)]
pub struct Counted {
    pub codec: &'static str,
    pub made: u64,
    pub lost: u64,
}

pub struct Audio {
    device: AudioDevice,
    /// The configured encoding first, then every other this build has.
    encodings: Vec<Encoding>,
    /// The encodings a client listens to now, a bit each: what the
    /// capture thread encodes (it looks at each frame).
    wanted: Arc<AtomicU32>,
    max_frame: usize,
    done: Arc<Waker>,
    worker: Option<Worker>,
}

/// Each encoding this build makes, `first` first: G.711 always, Opus and
/// AAC with their features.
fn formats(first: AudioCodec) -> Vec<AudioCodec> {
    let built = [
        (AudioCodec::Pcmu, true),
        (AudioCodec::Opus, cfg!(feature = "opus")),
        (AudioCodec::Aac, cfg!(feature = "aac")),
    ];
    let mut all = vec![first];
    all.extend(built.iter().filter(|&&(c, on)| on && c != first).map(|&(c, _)| c));
    all
}

fn format_of(codec: AudioCodec) -> Result<Format> {
    Ok(match codec {
        AudioCodec::Opus => Format::Opus,
        AudioCodec::Pcmu => Format::Pcmu,
        AudioCodec::Aac => Format::Aac(camstream_audio::aac::Config::lc(INPUT_RATE, 1)?),
    })
}

impl Audio {
    /// The sound's streams on `fanout`, one an encoding; capture starts
    /// with the first client of any. None where `device = "auto"` found
    /// no sound card: no sound track.
    pub fn start(
        settings: AudioSettings,
        mtu: usize,
        fanout: &mut Fanout,
        done: &Arc<Waker>,
    ) -> Result<Option<Audio>> {
        // The configured encoding refused now rather than at the first
        // client.
        Encoder::new(format_of(settings.codec)?, settings.bitrate)?;
        let Some(settings) = check_device(settings)? else {
            return Ok(None);
        };
        let info = StreamInfo {
            width: 0,
            height: 0,
            fps: INPUT_RATE / FRAME as u32,
        };
        let mut encodings = Vec::new();
        for codec in formats(settings.codec) {
            let format = format_of(codec)?;
            let bitrate = if codec == settings.codec {
                settings.bitrate
            } else {
                crate::config::default_audio_bitrate(codec)
            };
            // Made in the capture thread when a client first plays it: one
            // that cannot be made is left out now (its error would stop
            // the capture, and every other encoding with it).
            if let Err(e) = Encoder::new(format, bitrate) {
                log::warn!("audio: no {}: {e:#}", format.name());
                continue;
            }
            let ids = [random_u64(), random_u64(), random_u64(), random_u64()];
            let name = format!("{PATH}/{}", format.name());
            let stream = fanout.add_stream(Stream::new(&name, Codec::Audio(format), info, mtu, POOL, ids)?);
            fanout.add_audio(stream);
            encodings.push(Encoding {
                format,
                bitrate,
                stream,
                made: 0,
                lost: Arc::new(AtomicU64::new(0)),
            });
        }
        let names: Vec<_> = encodings.iter().map(|e| e.format.name()).collect();
        log::info!("audio: {} from {}", names.join(", "), settings.device.name());
        Ok(Some(Audio {
            device: settings.device,
            encodings,
            wanted: Arc::new(AtomicU32::new(0)),
            max_frame: mtu - HEADER_LEN,
            done: done.clone(),
            worker: None,
        }))
    }

    /// The configured encoding, and its bit rate (bit/s, where the format
    /// has one).
    pub fn format(&self) -> (Format, u32) {
        self.encodings
            .first()
            .map_or((Format::Pcmu, 0), |e| (e.format, e.bitrate))
    }

    /// Encodes the configured encoding at `bitrate` (bit/s) from now on, if
    /// its encoder takes it: a capture that runs stops, and the next turn
    /// of the loop starts it again with the new rate (the sound pauses
    /// while the device is opened again).
    pub fn set_bitrate(&mut self, bitrate: u32) -> Result<()> {
        let Some(e) = self.encodings.first_mut() else {
            return Ok(());
        };
        if bitrate == e.bitrate {
            return Ok(());
        }
        Encoder::new(e.format, bitrate)?;
        e.bitrate = bitrate;
        log::info!("audio: {} at {} kbit/s from now on", e.format.name(), bitrate / 1000);
        if let Some(w) = self.worker.take() {
            w.stop.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Captures while a client plays one of the encodings, and makes those
    /// that are played; stops when none is.
    pub fn follow_watchers(&mut self, fanout: &mut Fanout) {
        let wanted = self
            .encodings
            .iter()
            .enumerate()
            .filter(|(_, e)| fanout.listened(e.stream))
            .fold(0u32, |m, (i, _)| m | 1 << i);
        self.wanted.store(wanted, Ordering::Relaxed);
        match (&self.worker, wanted != 0) {
            (None, true) => match self.spawn(fanout) {
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

    fn spawn(&mut self, fanout: &Fanout) -> Result<Worker> {
        let stop = Arc::new(AtomicBool::new(false));
        let in_flight = IN_FLIGHT * self.encodings.len();
        let (send, frames) = sync_channel(in_flight);
        let (recycle, buffers) = sync_channel(in_flight + 1);
        for _ in 0..in_flight {
            let _ = recycle.try_send(Vec::with_capacity(self.max_frame));
        }
        let made: Vec<Made> = self
            .encodings
            .iter()
            .map(|e| Made {
                format: e.format,
                bitrate: e.bitrate,
                rtp: fanout.stream(e.stream).clock,
                lost: e.lost.clone(),
                running: None,
            })
            .collect();
        let device = self.device.clone();
        let (done, max, halt, wanted) = (self.done.clone(), self.max_frame, stop.clone(), self.wanted.clone());
        std::thread::Builder::new()
            .name("audio".into())
            .spawn(move || {
                let out = Out {
                    frames: &send,
                    buffers: &buffers,
                    done: &done,
                };
                let mut pipe = Pipe::new(made, wanted, max);
                if let Err(e) = run(device, &mut pipe, &out, &halt) {
                    log::warn!("audio capture stopped: {e:#}");
                }
            })?;
        Ok(Worker {
            stop,
            frames,
            recycle,
        })
    }

    /// Frames of each encoding, made and lost.
    pub fn counted(&self) -> Vec<Counted> {
        self.encodings
            .iter()
            .map(|e| Counted {
                codec: e.format.name(),
                made: e.made,
                lost: e.lost.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Publishes what the capture thread made.
    pub fn done(&mut self, fanout: &mut Fanout) {
        let Some(w) = &self.worker else {
            return;
        };
        while let Ok(e) = w.frames.try_recv() {
            if let Some(enc) = self.encodings.get_mut(e.encoding) {
                enc.made += 1;
                let unit = Unit::Audio {
                    frame: &e.data,
                    sample: e.ticks,
                };
                fanout.publish(enc.stream, &unit, e.captured, Mono::now());
            }
            let _ = w.recycle.try_send(e.data);
        }
    }
}

/// Where the capture thread's frames go.
struct Out<'a> {
    frames: &'a SyncSender<Encoded>,
    /// Buffers the loop hands back.
    buffers: &'a Receiver<Vec<u8>>,
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
fn run(device: AudioDevice, pipe: &mut Pipe, out: &Out<'_>, stop: &AtomicBool) -> Result<()> {
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
        AudioDevice::Named(name) => run_alsa(&name, pipe, out, stop),
        #[allow(unreachable_patterns)]
        other => anyhow::bail!("audio.device {other:?} is not in this build"),
    }
}

/// Captures from `name` until stopped: opened again a second after it
/// fails or goes silent (a USB microphone unplugged and plugged back),
/// each failure said once.
#[cfg(feature = "alsa")]
fn run_alsa(name: &str, pipe: &mut Pipe, out: &Out<'_>, stop: &AtomicBool) -> Result<()> {
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
                pipe.restart();
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
                            pipe.overran();
                            pipe.restart();
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

/// One encoding in the capture thread: what makes it, while a client
/// plays it.
struct Made {
    format: Format,
    bitrate: u32,
    rtp: RtpClock,
    lost: Arc<AtomicU64>,
    running: Option<Running>,
}

/// An encoder at work, and the RTP timestamp of the capture's sample 0 at
/// its stream's clock (once the card's clock said when that was).
struct Running {
    encoder: Encoder,
    base: Option<u32>,
}

/// From captured samples to the loop: the capture clock's fit, and each
/// encoding a client plays, its RTP timestamps counted from its stream's
/// clock at the capture's first sample.
struct Pipe {
    made: Vec<Made>,
    wanted: Arc<AtomicU32>,
    clock: SampleClock,
    max: usize,
}

impl Pipe {
    fn new(made: Vec<Made>, wanted: Arc<AtomicU32>, max: usize) -> Pipe {
        Pipe {
            made,
            wanted,
            clock: SampleClock::new(INPUT_RATE),
            max,
        }
    }

    /// The count begins at 0 again (the device opened again, or overran):
    /// a new fit, new bases, and encoders without the old samples (their
    /// delay counts from the new first sample). The timestamps jump over
    /// the gap, which is what tells a player sound is missing.
    #[cfg_attr(not(feature = "alsa"), allow(dead_code))]
    fn restart(&mut self) {
        self.clock.reset();
        for m in &mut self.made {
            m.running = None;
        }
    }

    /// The card overran: a frame of each encoding made is lost.
    #[cfg_attr(not(feature = "alsa"), allow(dead_code))]
    fn overran(&self) {
        for m in self.made.iter().filter(|m| m.running.is_some()) {
            m.lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Encodes `pcm` (its first sample `first`; sample `seen.0` was
    /// captured at `seen.1`) in each encoding wanted, and sends what they
    /// made; false once the loop is gone.
    fn encode(&mut self, pcm: &[i16], first: u64, seen: (u64, Mono), out: &Out<'_>) -> Result<bool> {
        self.clock.observe(seen.0, seen.1.0);
        let wanted = self.wanted.load(Ordering::Relaxed);
        let (clock, max) = (&self.clock, self.max);
        let mut gone = false;
        for (i, m) in self.made.iter_mut().enumerate() {
            if wanted & 1 << i == 0 {
                // No one plays it: its encoder goes (a client's next
                // SETUP starts a new one, from that frame on).
                m.running = None;
                continue;
            }
            let e = match &mut m.running {
                Some(e) => e,
                None => m.running.insert(Running {
                    encoder: Encoder::new(m.format, m.bitrate)?,
                    base: None,
                }),
            };
            let (num, den) = e.encoder.ticks_per_input();
            // The stream's RTP clock at sample 0: the timestamps count
            // samples from there, so they agree with that clock (which
            // sender reports before the first frame use) but for the
            // card's drift.
            let rtp = &m.rtp;
            let base = *e.base.get_or_insert_with(|| {
                let zero = Mono(clock.instant_of(0.0).unwrap_or(seen.1.0));
                rtp.timestamp(zero).wrapping_sub(rtp.offset())
            });
            let lost = &m.lost;
            e.encoder.encode(pcm, first, max, |frame, stands_for| {
                let mut data = out.buffers.recv_timeout(Duration::from_millis(100)).unwrap_or_default();
                data.clear();
                data.extend_from_slice(frame);
                let captured = Mono(clock.instant_of(stands_for as f64).unwrap_or(0));
                let ticks = base.wrapping_add((stands_for * num / den) as u32);
                match out.frames.try_send(Encoded {
                    encoding: i,
                    data,
                    ticks,
                    captured,
                }) {
                    Ok(()) => out.done.wake()?,
                    // The loop is behind: this frame is lost, as in a
                    // card's overrun.
                    Err(TrySendError::Full(_)) => {
                        lost.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(TrySendError::Disconnected(_)) => gone = true,
                }
                Ok(())
            })?;
        }
        Ok(!gone)
    }
}
