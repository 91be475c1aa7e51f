//! The sound's encoders, one per format, each taking 20 ms of 48 kHz mono
//! at a time and giving back what it made of it: a frame, or none yet (AAC
//! gathers 1024 samples). Each frame comes with the input sample its first
//! sample stands for: the encoder's delay (the decimator's filter, Opus's
//! look-ahead, AAC's) taken off, which is the instant its RTP timestamp
//! must map to for lip sync.

use anyhow::Result;
use camstream_audio::packetize::Format;
use camstream_audio::{Decimator, pcmu};

/// Input samples each call takes: 20 ms at 48 kHz.
pub const FRAME: usize = 960;
pub const INPUT_RATE: u32 = 48_000;

pub struct Encoder {
    kind: Kind,
    /// The frame being made.
    scratch: Vec<u8>,
}

enum Kind {
    Pcmu {
        decimator: Box<Decimator>,
        eight: Vec<i16>,
    },
    #[cfg(feature = "opus")]
    Opus {
        encoder: Box<opusic_c::Encoder>,
        /// The samples' bits as opusic-c takes them (u16).
        input: Box<[u16; FRAME]>,
        lookahead: i64,
    },
    #[cfg(feature = "aac")]
    Aac {
        encoder: Box<fdk_aac::enc::Encoder>,
        /// The input sample it began at (an encoder starts when a client
        /// first plays it, not with the capture).
        start: Option<i64>,
        /// Access units made so far: unit n begins at input start + 1024·n,
        /// less the delay.
        units: i64,
        delay: i64,
    },
}

fn opus_or_aac_missing(format: Format) -> anyhow::Error {
    anyhow::anyhow!(
        "{} is not in this build (its feature is off)",
        format.name()
    )
}

impl Encoder {
    /// An encoder for `format`; `bitrate` (bit/s) where it has one.
    #[cfg_attr(
        not(any(feature = "opus", feature = "aac")),
        expect(unused_variables, reason = "G.711 has no bit rate")
    )]
    pub fn new(format: Format, bitrate: u32) -> Result<Encoder> {
        let kind = match format {
            Format::Pcmu => Kind::Pcmu {
                decimator: Box::new(Decimator::new(INPUT_RATE)?),
                eight: Vec::with_capacity(FRAME / 6),
            },
            #[cfg(feature = "opus")]
            Format::Opus => {
                use opusic_c::{Application, Bitrate, Channels, SampleRate};
                let mut e = opusic_c::Encoder::new(Channels::Mono, SampleRate::Hz48000, Application::Audio)
                    .map_err(|e| anyhow::anyhow!("Opus encoder: {e:?}"))?;
                e.set_bitrate(Bitrate::Value(bitrate))
                    .map_err(|e| anyhow::anyhow!("Opus bit rate {bitrate}: {e:?}"))?;
                // libopus 1.3's at 48 kHz, should it not say.
                let lookahead = i64::from(e.get_look_ahead().unwrap_or(312));
                Kind::Opus {
                    encoder: Box::new(e),
                    input: Box::new([0; FRAME]),
                    lookahead,
                }
            }
            #[cfg(feature = "aac")]
            Format::Aac(config) => {
                use fdk_aac::enc::{AudioObjectType, BitRate, ChannelMode, EncoderParams, Transport};
                let e = fdk_aac::enc::Encoder::new(EncoderParams {
                    bit_rate: BitRate::Cbr(bitrate),
                    sample_rate: config.rate(),
                    transport: Transport::Raw,
                    channels: ChannelMode::Mono,
                    audio_object_type: AudioObjectType::Mpeg4LowComplexity,
                })
                .map_err(|e| anyhow::anyhow!("AAC encoder: {e}"))?;
                let info = e.info().map_err(|e| anyhow::anyhow!("AAC encoder: {e}"))?;
                anyhow::ensure!(
                    info.confSize == 2 && info.confBuf[..2] == config.to_bytes(),
                    "AAC encoder's AudioSpecificConfig is not the SDP's"
                );
                Kind::Aac {
                    encoder: Box::new(e),
                    start: None,
                    units: 0,
                    delay: i64::from(info.nDelay),
                }
            }
            #[allow(unreachable_patterns)]
            other => return Err(opus_or_aac_missing(other)),
        };
        Ok(Encoder {
            kind,
            scratch: Vec::with_capacity(2048),
        })
    }

    /// Input samples to one tick of its RTP clock: (numerator,
    /// denominator).
    pub fn ticks_per_input(&self) -> (i64, i64) {
        match self.kind {
            Kind::Pcmu { .. } => (1, 6),
            #[cfg(feature = "opus")]
            Kind::Opus { .. } => (1, 1),
            #[cfg(feature = "aac")]
            Kind::Aac { .. } => (1, 1),
        }
    }

    /// Encodes `pcm` (FRAME samples, the first of them input sample
    /// `first`), handing each frame made, at most `max` bytes, to `emit`
    /// with the input sample its first sample stands for.
    pub fn encode(
        &mut self,
        pcm: &[i16],
        first: u64,
        max: usize,
        mut emit: impl FnMut(&[u8], i64) -> Result<()>,
    ) -> Result<()> {
        let out = &mut self.scratch;
        out.clear();
        let first = first as i64;
        match &mut self.kind {
            Kind::Pcmu { decimator, eight } => {
                eight.clear();
                decimator.push(pcm, |s| eight.push(s));
                out.resize(eight.len().min(max), 0);
                pcmu::encode_into(eight, out);
                emit(out, first - decimator.delay() as i64)
            }
            #[cfg(feature = "opus")]
            Kind::Opus {
                encoder,
                input,
                lookahead,
            } => {
                for (u, &s) in input.iter_mut().zip(pcm) {
                    *u = s as u16;
                }
                // A packet is at most 1275 bytes (RFC 6716 3.4 R2).
                out.resize(max.min(1275), 0);
                let n = encoder
                    .encode_to_slice(input.as_slice(), out)
                    .map_err(|e| anyhow::anyhow!("Opus: {e:?}"))?;
                out.truncate(n);
                emit(out, first - *lookahead)
            }
            #[cfg(feature = "aac")]
            Kind::Aac {
                encoder,
                start,
                units,
                delay,
            } => {
                let start = *start.get_or_insert(first);
                // AAC-hbr's 13-bit size bounds a unit; a mono LC unit is at
                // most 768 bytes.
                out.resize(max.min(camstream_audio::aac::MAX_AU), 0);
                let mut rest = pcm;
                loop {
                    let done = encoder
                        .encode(rest, out)
                        .map_err(|e| anyhow::anyhow!("AAC: {e}"))?;
                    if let Some(unit) = out.get(..done.output_size).filter(|u| !u.is_empty()) {
                        emit(unit, start + *units * 1024 - *delay)?;
                        *units += 1;
                    }
                    rest = rest.get(done.input_consumed..).unwrap_or_default();
                    // All taken, or nothing more it can take or give now.
                    if done.output_size == 0 && (rest.is_empty() || done.input_consumed == 0) {
                        return Ok(());
                    }
                }
            }
        }
    }
}
