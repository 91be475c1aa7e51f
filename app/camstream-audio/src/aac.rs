//! AAC as RTSP clients and NVRs take it: the AudioSpecificConfig
//! (ISO/IEC 14496-3 1.6.2.1) an SDP's `config` carries in hex, the ADTS
//! header (14496-3 1.A.2) that makes an access unit a file of its own, and
//! RFC 3640's mpeg4-generic payload in AAC-hbr mode: a 16-bit AU header
//! (13 bits of size, 3 of index) per access unit.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use camstream_rtp::rtp::IncomingPacket;

/// The sampling frequency index's table (14496-3 1.6.3.4).
pub const SAMPLE_RATES: [u32; 13] = [
    96_000, 88_200, 64_000, 48_000, 44_100, 32_000, 24_000, 22_050, 16_000, 12_000, 11_025, 8_000,
    7_350,
];
/// AAC-LC's audio object type.
pub const OBJECT_TYPE_LC: u8 = 2;
/// Samples an AAC-LC access unit holds (frameLengthFlag 0).
pub const FRAME_SAMPLES: u32 = 1024;
/// Largest access unit AAC-hbr's 13-bit size carries.
pub const MAX_AU: usize = (1 << 13) - 1;
/// An ADTS header without CRC.
pub const ADTS_LEN: usize = 7;

/// What an AAC stream is, as its AudioSpecificConfig says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub object_type: u8,
    /// An index into [`SAMPLE_RATES`].
    pub rate_index: u8,
    /// The channel configuration: 1 mono, 2 stereo.
    pub channels: u8,
}

/// Why an AAC stream's description or data was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AacError {
    /// A rate outside the sampling frequency table.
    Rate(u32),
    /// Channels outside 1-7 (what a channel configuration says).
    Channels(u8),
    /// An object type of five bits' escape (31) or an
    /// AudioSpecificConfig shorter than two bytes, or not hex.
    Config,
    /// An access unit too large for its header's length field.
    TooLarge(usize),
}

impl core::fmt::Display for AacError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AacError::Rate(r) => write!(f, "{r} Hz is not among AAC's sampling frequencies"),
            AacError::Channels(c) => write!(f, "{c} channels: AAC's configurations have 1 to 7"),
            AacError::Config => f.write_str("AudioSpecificConfig cut short, or escaped"),
            AacError::TooLarge(n) => write!(f, "AAC access unit of {n} bytes"),
        }
    }
}

impl core::error::Error for AacError {}

impl Config {
    /// AAC-LC at `rate` Hz with `channels`.
    pub fn lc(rate: u32, channels: u8) -> Result<Config, AacError> {
        let rate_index = SAMPLE_RATES
            .iter()
            .position(|&r| r == rate)
            .ok_or(AacError::Rate(rate))? as u8;
        if !(1..=7).contains(&channels) {
            return Err(AacError::Channels(channels));
        }
        Ok(Config {
            object_type: OBJECT_TYPE_LC,
            rate_index,
            channels,
        })
    }

    pub fn rate(&self) -> u32 {
        SAMPLE_RATES[usize::from(self.rate_index)]
    }

    /// The two bytes of the AudioSpecificConfig: object type (5 bits),
    /// frequency index (4), channel configuration (4), then
    /// GASpecificConfig's three flags, all zero (1024 samples a frame, no
    /// core coder, no extension).
    pub fn to_bytes(&self) -> [u8; 2] {
        let v = (u16::from(self.object_type) << 11)
            | (u16::from(self.rate_index) << 7)
            | (u16::from(self.channels) << 3);
        v.to_be_bytes()
    }

    /// The first two bytes of an AudioSpecificConfig (what follows, an
    /// extension's, is left).
    pub fn parse(asc: &[u8]) -> Result<Config, AacError> {
        let [a, b, ..] = *asc else {
            return Err(AacError::Config);
        };
        let v = u16::from_be_bytes([a, b]);
        let object_type = (v >> 11) as u8;
        let rate_index = ((v >> 7) & 0x0f) as u8;
        let channels = ((v >> 3) & 0x0f) as u8;
        if object_type == 31 || usize::from(rate_index) >= SAMPLE_RATES.len() {
            return Err(AacError::Config);
        }
        if !(1..=7).contains(&channels) {
            return Err(AacError::Channels(channels));
        }
        Ok(Config {
            object_type,
            rate_index,
            channels,
        })
    }

    /// The SDP fmtp's `config`: the AudioSpecificConfig in hex.
    pub fn parse_hex(hex: &str) -> Result<Config, AacError> {
        let digit = |c: u8| (c as char).to_digit(16).ok_or(AacError::Config);
        let b = hex.as_bytes();
        if b.len() < 4 {
            return Err(AacError::Config);
        }
        let mut asc = [0u8; 2];
        for (i, byte) in asc.iter_mut().enumerate() {
            *byte = (digit(b[2 * i])? * 16 + digit(b[2 * i + 1])?) as u8;
        }
        Config::parse(&asc)
    }

    /// The ADTS header (MPEG-4, no CRC) of an access unit of `au_len`
    /// bytes: what makes it a file a player reads on its own.
    pub fn adts(&self, au_len: usize) -> Result<[u8; ADTS_LEN], AacError> {
        let len = au_len + ADTS_LEN;
        if len > MAX_AU {
            return Err(AacError::TooLarge(au_len));
        }
        let profile = self.object_type.saturating_sub(1) & 3;
        Ok([
            0xff,
            // Sync word's end, MPEG-4, layer 0, no CRC.
            0xf1,
            (profile << 6) | (self.rate_index << 2) | (self.channels >> 2),
            ((self.channels & 3) << 6) | (len >> 11) as u8,
            (len >> 3) as u8,
            // The length's last bits, then a buffer fullness of 0x7ff
            // (variable rate) and one raw data block.
            ((len as u8 & 7) << 5) | 0x1f,
            0xfc,
        ])
    }
}

/// `a=rtpmap` value: RFC 3640's name, the clock at the sample rate.
pub fn rtpmap(pt: u8, config: &Config) -> String {
    format!("{pt} mpeg4-generic/{}/{}", config.rate(), config.channels)
}

/// `a=fmtp` value for AAC-hbr (RFC 3640 3.3.6), as FFmpeg, GStreamer and
/// live555 read it.
pub fn fmtp(pt: u8, config: &Config) -> String {
    let [a, b] = config.to_bytes();
    format!(
        "{pt} streamtype=5;profile-level-id=1;mode=AAC-hbr;sizelength=13;indexlength=3;indexdeltalength=3;config={a:02X}{b:02X}"
    )
}

/// Why a packet's AAC-hbr payload could not be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepacketizeError {
    /// AU headers running past the payload, or of another size than
    /// AAC-hbr's 16 bits.
    Headers,
    /// Access units' sizes adding up past the payload, in a packet of
    /// several.
    Truncated,
    /// A fragment that does not continue the access unit being rebuilt
    /// (a lost packet): the unit is dropped.
    Lost,
}

impl core::fmt::Display for DepacketizeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            DepacketizeError::Headers => "AAC-hbr AU headers malformed",
            DepacketizeError::Truncated => "AAC-hbr access units cut short",
            DepacketizeError::Lost => "an AAC-hbr fragment is missing",
        })
    }
}

impl core::error::Error for DepacketizeError {}

/// RFC 3640 AAC-hbr depacketizer (sizelength 13, indexlength and
/// indexdeltalength 3): several access units a packet, or one in
/// fragments. What tests and clients use to read camstream's AAC back.
#[derive(Debug, Default)]
pub struct Depacketizer {
    /// The fragmented access unit being rebuilt.
    fragment: Vec<u8>,
    /// Its full size, and the sequence number its next piece must have.
    expect: Option<(usize, u16)>,
}

impl Depacketizer {
    pub fn new() -> Depacketizer {
        Depacketizer::default()
    }

    /// Takes a packet; hands each whole access unit to `each` with its
    /// RTP timestamp (the packet's plus 1024 for each unit before it).
    pub fn push(
        &mut self,
        p: &IncomingPacket<'_>,
        mut each: impl FnMut(&[u8], u32),
    ) -> Result<(), DepacketizeError> {
        let d = p.payload;
        let [h0, h1, rest @ ..] = d else {
            return Err(DepacketizeError::Headers);
        };
        let header_bits = usize::from(u16::from_be_bytes([*h0, *h1]));
        if header_bits == 0 || header_bits % 16 != 0 || rest.len() < header_bits / 8 {
            return Err(DepacketizeError::Headers);
        }
        let (headers, mut data) = rest.split_at(header_bits / 8);
        let sizes = headers
            .chunks_exact(2)
            .map(|h| usize::from(u16::from_be_bytes([h[0], h[1]]) >> 3));
        let ts = p.header.timestamp;
        let sequence = p.header.sequence;
        if headers.len() == 2 {
            let size = (u16::from_be_bytes([headers[0], headers[1]]) >> 3) as usize;
            if let Some((whole, next)) = self.expect.take() {
                // A piece of the unit being rebuilt: the same size, the
                // next packet.
                if whole != size || next != sequence || self.fragment.len() + data.len() > whole {
                    self.fragment.clear();
                    return Err(DepacketizeError::Lost);
                }
                self.fragment.extend_from_slice(data);
                return self.fragment_end(whole, sequence, p.header.marker, ts, each);
            }
            if data.len() < size {
                // The first piece of a fragmented unit.
                self.fragment.clear();
                self.fragment.extend_from_slice(data);
                return self.fragment_end(size, sequence, p.header.marker, ts, each);
            }
        } else if self.expect.take().is_some() {
            self.fragment.clear();
            return Err(DepacketizeError::Lost);
        }
        if sizes.clone().sum::<usize>() > data.len() {
            return Err(DepacketizeError::Truncated);
        }
        for (i, size) in sizes.enumerate() {
            let (au, after) = data.split_at(size);
            each(au, ts.wrapping_add(FRAME_SAMPLES * i as u32));
            data = after;
        }
        Ok(())
    }

    /// After a fragment: the unit handed over once whole (its last piece
    /// carries the marker), else the next piece awaited.
    fn fragment_end(
        &mut self,
        whole: usize,
        sequence: u16,
        marker: bool,
        ts: u32,
        mut each: impl FnMut(&[u8], u32),
    ) -> Result<(), DepacketizeError> {
        if self.fragment.len() == whole {
            if !marker {
                self.fragment.clear();
                return Err(DepacketizeError::Headers);
            }
            each(&self.fragment, ts);
            self.fragment.clear();
        } else if marker {
            self.fragment.clear();
            return Err(DepacketizeError::Truncated);
        } else {
            self.expect = Some((whole, sequence.wrapping_add(1)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_of_48khz_mono() {
        // What FDK AAC and FFmpeg's aac give for LC at 48 kHz, mono.
        let c = Config::lc(48_000, 1).unwrap();
        assert_eq!(c.to_bytes(), [0x11, 0x88]);
        assert_eq!(Config::parse(&[0x11, 0x88]), Ok(c));
        assert_eq!(Config::parse_hex("1188"), Ok(c));
        assert_eq!(Config::parse_hex("1190"), Config::lc(48_000, 2));
        assert_eq!(Config::parse_hex("118"), Err(AacError::Config));
        assert_eq!(Config::parse_hex("11x8"), Err(AacError::Config));
        assert_eq!(Config::lc(44_000, 1), Err(AacError::Rate(44_000)));
        assert_eq!(Config::lc(48_000, 0), Err(AacError::Channels(0)));
        assert_eq!(
            fmtp(97, &c),
            "97 streamtype=5;profile-level-id=1;mode=AAC-hbr;sizelength=13;indexlength=3;indexdeltalength=3;config=1188"
        );
        assert_eq!(rtpmap(97, &c), "97 mpeg4-generic/48000/1");
    }

    #[test]
    fn adts_header_of_a_unit() {
        // FFmpeg's adts muxer writes ff f1 4c 40 xx xx fc for LC 48 kHz
        // mono; the length (here 7 + 200 = 207) spans bytes 3 to 5.
        let c = Config::lc(48_000, 1).unwrap();
        assert_eq!(
            c.adts(200).unwrap(),
            [0xff, 0xf1, 0x4c, 0x40, 0x19, 0xff, 0xfc]
        );
        assert_eq!(c.adts(MAX_AU), Err(AacError::TooLarge(MAX_AU)));
    }
}
