//! The codecs camstream sends, in one place, as retina picks a codec's
//! module in one match (its src/codec/mod.rs): each stream's RTP payload
//! format (its packetizer), what the SDP's media description says of it,
//! its payload type, clock rate and media kind, and what /metrics calls
//! it. A codec added here is one arm in each match below; the fan-out,
//! RTSP and HTTP ask this module rather than match codecs themselves.

use camstream_audio::packetize::Format;
use camstream_h264::AccessUnit;
use camstream_h264::packetize::PAYLOAD_TYPE_H264;
use camstream_h264::sdp as h264_sdp;
use camstream_rtp::packetize::needs_x_dimensions;
use camstream_rtp::rtp::{JPEG_CLOCK_RATE, OutgoingPacket, PAYLOAD_TYPE_JPEG};
use camstream_rtp::Jpeg;

use crate::source::StreamInfo;

/// What an SDP media line is (its `m=` media).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    Video,
    Audio,
}

impl MediaKind {
    pub fn sdp(self) -> &'static str {
        match self {
            MediaKind::Video => "video",
            MediaKind::Audio => "audio",
        }
    }
}

/// A codec a stream can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// JPEG pictures, as RTP/JPEG (RFC 2435).
    Jpeg,
    /// H.264 (RFC 6184).
    H264,
    /// Sound: Opus (RFC 7587), AAC (RFC 3640) or G.711 µ-law (RFC 3551).
    Audio(Format),
}

/// One encoded unit of a stream, as its producer (or the intake) made it.
#[derive(Clone, Copy)]
pub enum Unit<'a> {
    /// A JPEG picture (RFC 2435's payload).
    Jpeg(&'a Jpeg<'a>),
    /// An H.264 access unit (RFC 6184's).
    H264(&'a AccessUnit<'a>),
    /// An encoded audio frame (an Opus packet, an AAC access unit, PCMU
    /// bytes) and its first sample's index at the codec's clock rate,
    /// which its RTP timestamp counts from the stream's offset: audio's
    /// timestamps run on the sound card's samples, without gaps.
    Audio { frame: &'a [u8], sample: u32 },
}

impl Unit<'_> {
    /// A picture's size where the unit says it (a JPEG's header).
    pub fn size(&self) -> Option<(u16, u16)> {
        match self {
            Unit::Jpeg(j) => Some((j.width, j.height)),
            Unit::H264(_) | Unit::Audio { .. } => None,
        }
    }

    /// Where its RTP timestamp comes from the unit itself (audio's sample
    /// count) rather than its capture instant: the ticks from the stream's
    /// offset.
    pub fn ticks(&self) -> Option<u32> {
        match self {
            Unit::Audio { sample, .. } => Some(*sample),
            Unit::Jpeg(_) | Unit::H264(_) => None,
        }
    }
}

/// Where a unit's packets go: a frame's buffers.
pub trait Records {
    /// One RTP packet, its header then its payload.
    fn packet(&mut self, header: &[u8], payload: &[u8]);
    /// The unit as a file: an H.264 access unit's Annex B bytes (what
    /// WebRTC's packetizer takes), audio as HTTP clients play it; emptied
    /// by its writer. A JPEG's is not written here: it is made from the
    /// packets when someone asks.
    fn file(&mut self) -> &mut Vec<u8>;
}

/// A stream's RTP payload format.
pub enum Packetizer {
    /// RFC 2435.
    Jpeg(camstream_rtp::Packetizer),
    /// RFC 6184, packetization-mode 1 (boxed: it keeps the parameter sets
    /// inline, half a kilobyte).
    H264(Box<camstream_h264::Packetizer>),
    /// RFC 7587, 3640 or 3551.
    Audio(camstream_audio::Packetizer),
}

impl Packetizer {
    /// `codec`'s packetizer, its packets starting at `sequence`.
    pub fn new(codec: Codec, ssrc: u32, sequence: u16, mtu: usize) -> anyhow::Result<Packetizer> {
        Ok(match codec {
            Codec::Jpeg => Packetizer::Jpeg(camstream_rtp::Packetizer::new(ssrc, sequence, mtu)?),
            Codec::H264 => Packetizer::H264(Box::new(
                camstream_h264::Packetizer::new(ssrc, sequence, mtu)
                    .map_err(|e| anyhow::anyhow!("mtu = {mtu}: {e:?}"))?,
            )),
            Codec::Audio(f) => Packetizer::Audio(
                camstream_audio::Packetizer::new(f, ssrc, sequence, mtu)
                    .map_err(|e| anyhow::anyhow!("mtu = {mtu}: {e}"))?,
            ),
        })
    }

    /// What /metrics and the status page call it.
    pub fn name(&self) -> &'static str {
        match self {
            Packetizer::Jpeg(_) => "jpeg",
            Packetizer::H264(_) => "h264",
            Packetizer::Audio(p) => p.format().name(),
        }
    }

    pub fn kind(&self) -> MediaKind {
        match self {
            Packetizer::Jpeg(_) | Packetizer::H264(_) => MediaKind::Video,
            Packetizer::Audio(_) => MediaKind::Audio,
        }
    }

    /// Its RTP timestamps' rate.
    pub fn clock_rate(&self) -> u32 {
        match self {
            // RFC 6184 asks the same 90 kHz as RFC 2435.
            Packetizer::Jpeg(_) | Packetizer::H264(_) => JPEG_CLOCK_RATE,
            Packetizer::Audio(p) => p.format().clock_rate(),
        }
    }

    pub fn payload_type(&self) -> u8 {
        match self {
            Packetizer::Jpeg(_) => PAYLOAD_TYPE_JPEG,
            Packetizer::H264(_) => PAYLOAD_TYPE_H264,
            Packetizer::Audio(p) => p.format().payload_type(),
        }
    }

    pub fn ssrc(&self) -> u32 {
        match self {
            Packetizer::Jpeg(p) => p.ssrc(),
            Packetizer::H264(p) => p.ssrc(),
            Packetizer::Audio(p) => p.ssrc(),
        }
    }

    /// Sequence number the next packet will carry.
    pub fn next_sequence(&self) -> u16 {
        match self {
            Packetizer::Jpeg(p) => p.next_sequence(),
            Packetizer::H264(p) => p.next_sequence(),
            Packetizer::Audio(p) => p.next_sequence(),
        }
    }

    /// The media description's attributes beside `control`: `rtpmap`,
    /// `fmtp` (H.264's parameter sets once the encoder made them; without,
    /// a client takes them in band before each IDR picture) and, for
    /// JPEG, `x-dimensions` for sizes the RTP/JPEG header cannot carry
    /// (over 2040 or not a multiple of 8: GStreamer and live555 read it).
    pub fn sdp_attributes(&self, info: &StreamInfo) -> Vec<(&'static str, String)> {
        let pt = self.payload_type();
        match self {
            Packetizer::Jpeg(_) => {
                let mut a = vec![("rtpmap", format!("{pt} JPEG/{JPEG_CLOCK_RATE}"))];
                if needs_x_dimensions(info.width, info.height) {
                    a.push(("x-dimensions", format!("{},{}", info.width, info.height)));
                }
                a
            }
            Packetizer::H264(p) => vec![
                ("rtpmap", h264_sdp::rtpmap(pt)),
                ("fmtp", h264_sdp::fmtp(pt, p.parameter_sets())),
            ],
            Packetizer::Audio(p) => {
                let f = p.format();
                let mut a = vec![("rtpmap", f.rtpmap())];
                a.extend(f.fmtp().map(|v| ("fmtp", v)));
                a
            }
        }
    }

    /// Whether `unit` is this codec's.
    pub fn takes(&self, unit: &Unit<'_>) -> bool {
        matches!(
            (self, unit),
            (Packetizer::Jpeg(_), Unit::Jpeg(_))
                | (Packetizer::H264(_), Unit::H264(_))
                | (Packetizer::Audio(_), Unit::Audio { .. })
        )
    }

    /// Packetizes `unit` into `out` (an H.264 or audio file too): whether a client
    /// can start decoding at it (every JPEG picture, an H.264 IDR
    /// picture) and its RTP payload bytes; nothing if it is not this
    /// codec's ([`Packetizer::takes`]).
    pub fn write(&mut self, unit: &Unit<'_>, timestamp: u32, out: &mut impl Records) -> (bool, u32) {
        match (self, unit) {
            // A JPEG's file is made from its packets when a client asks
            // (SharedFrame::jpeg).
            (Packetizer::Jpeg(p), Unit::Jpeg(jpeg)) => (true, lay_out(p.packetize(jpeg, timestamp), out)),
            (Packetizer::H264(p), Unit::H264(au)) => {
                let octets = lay_out(p.packetize(au, timestamp), out);
                annex_b(out.file(), au, p.parameter_sets());
                (au.idr, octets)
            }
            (Packetizer::Audio(p), Unit::Audio { frame, .. }) => {
                // What an HTTP client (a page's audio element) plays: PCMU
                // as 16-bit PCM (a WAV stream's data), an AAC unit as an
                // ADTS frame; an Opus packet as it is (WebRTC's payload).
                let file = out.file();
                file.clear();
                match p.format() {
                    Format::Pcmu => {
                        for &c in *frame {
                            file.extend_from_slice(&camstream_audio::pcmu::decode(c).to_le_bytes());
                        }
                    }
                    Format::Aac(c) => {
                        if let Ok(h) = c.adts(frame.len()) {
                            file.extend_from_slice(&h);
                            file.extend_from_slice(frame);
                        }
                    }
                    Format::Opus => file.extend_from_slice(frame),
                }
                match p.packetize(frame, timestamp) {
                    // Every audio frame decodes alone.
                    Ok(packets) => (true, lay_out(packets, out)),
                    Err(e) => {
                        log::warn!("audio frame not sent: {e}");
                        (false, 0)
                    }
                }
            }
            _ => (false, 0),
        }
    }
}

/// An access unit as an Annex B byte stream (what WebRTC's packetizer
/// takes), the latest parameter sets first where an IDR picture came
/// without them, as the RTP packets carry them.
fn annex_b(file: &mut Vec<u8>, au: &AccessUnit<'_>, sets: Option<(&[u8], &[u8])>) {
    file.clear();
    if let (true, None, Some((sps, pps))) = (au.idr, au.sps, sets) {
        for set in [sps, pps] {
            file.extend_from_slice(&[0, 0, 0, 1]);
            file.extend_from_slice(set);
        }
    }
    file.extend_from_slice(au.data);
}

/// Each packet into `out`; the payload bytes.
fn lay_out<'a, const N: usize>(
    packets: impl Iterator<Item = OutgoingPacket<'a, N>>,
    out: &mut impl Records,
) -> u32 {
    let mut payload_octets = 0u32;
    for p in packets {
        out.packet(p.header(), p.payload);
        payload_octets = payload_octets.wrapping_add(p.payload_len() as u32);
    }
    payload_octets
}
