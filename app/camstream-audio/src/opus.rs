//! Opus as RTP carries it (RFC 7587): one Opus packet per RTP packet, no
//! payload header, a 48 kHz clock whatever the encoder's rate, and the
//! packet's duration read from its TOC byte (RFC 6716 3.1), which is how
//! far the next packet's timestamp moves.

use alloc::format;
use alloc::string::String;

/// RFC 7587 4.1: the timestamp counts 48 kHz samples for every rate.
pub const CLOCK_RATE: u32 = 48_000;
/// RFC 6716 3.2.5: a packet holds at most 120 ms.
pub const MAX_SAMPLES: u32 = 5_760;

/// Why bytes are not an Opus packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpusError {
    Empty,
    /// Code 3 without its frame count byte, or a count of zero.
    FrameCount,
    /// Frames adding up to more than 120 ms (RFC 6716 R5).
    TooLong,
    /// Code 1 with an odd payload (R3), or code 2 cut short (R4).
    Length,
}

impl core::fmt::Display for OpusError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            OpusError::Empty => "empty Opus packet",
            OpusError::FrameCount => "Opus packet without frames",
            OpusError::TooLong => "Opus packet longer than 120 ms",
            OpusError::Length => "Opus packet whose frame lengths do not add up",
        })
    }
}

impl core::error::Error for OpusError {}

/// One frame's length in 48 kHz samples for a TOC configuration (its top
/// five bits): SILK 10, 20, 40, 60 ms; hybrid 10, 20; CELT 2.5, 5, 10, 20.
fn frame_samples(config: u8) -> u32 {
    match config {
        0..=11 => [480, 960, 1920, 2880][usize::from(config % 4)],
        12..=15 => [480, 960][usize::from(config % 2)],
        _ => [120, 240, 480, 960][usize::from(config % 4)],
    }
}

/// The packet's duration in 48 kHz samples, checked as far as its framing
/// goes (RFC 6716 3.4's R1-R5; the frames themselves are the decoder's).
pub fn samples(packet: &[u8]) -> Result<u32, OpusError> {
    let (&toc, rest) = packet.split_first().ok_or(OpusError::Empty)?;
    let frames = match toc & 3 {
        0 => 1,
        1 if rest.len() % 2 == 0 => 2,
        1 => return Err(OpusError::Length),
        2 => {
            // The first frame's length, in one byte or two (3.2.1).
            let (len, used) = match rest {
                [b @ 0..=251, ..] => (usize::from(*b), 1),
                [b, c, ..] => (usize::from(*c) * 4 + usize::from(*b), 2),
                _ => return Err(OpusError::Length),
            };
            if used + len > rest.len() {
                return Err(OpusError::Length);
            }
            2
        }
        _ => match rest.first().map(|b| u32::from(b & 0x3f)) {
            Some(n @ 1..) => n,
            _ => return Err(OpusError::FrameCount),
        },
    };
    let total = frame_samples(toc >> 3) * frames;
    if total > MAX_SAMPLES {
        return Err(OpusError::TooLong);
    }
    Ok(total)
}

/// `a=rtpmap` value: always two channels (RFC 7587 7), what a mono
/// encoder's receivers may play as such.
pub fn rtpmap(pt: u8) -> String {
    format!("{pt} opus/{CLOCK_RATE}/2")
}

/// `a=fmtp` value: the stream is mono, without in-band FEC.
pub fn fmtp(pt: u8) -> String {
    format!("{pt} sprop-stereo=0;useinbandfec=0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_of_each_code() {
        // CELT fullband 20 ms (config 31), one frame: what libopus makes
        // of 960 samples.
        assert_eq!(samples(&[0xf8, 1, 2, 3]), Ok(960));
        // Two equal frames (code 1).
        assert_eq!(samples(&[0xf9, 1, 2]), Ok(1920));
        assert_eq!(samples(&[0xf9, 1, 2, 3]), Err(OpusError::Length));
        // Two frames, the first 2 bytes long (code 2).
        assert_eq!(samples(&[0xfa, 2, 9, 9, 9]), Ok(1920));
        assert_eq!(samples(&[0xfa, 9, 9]), Err(OpusError::Length));
        // Code 3: SILK 60 ms (config 3) twice is 120 ms, three times too long.
        assert_eq!(samples(&[0x1b, 2]), Ok(5760));
        assert_eq!(samples(&[0x1b, 3]), Err(OpusError::TooLong));
        assert_eq!(samples(&[0x1b, 0]), Err(OpusError::FrameCount));
        assert_eq!(samples(&[0x1b]), Err(OpusError::FrameCount));
        assert_eq!(samples(&[]), Err(OpusError::Empty));
        // Hybrid 10 ms (config 12), CELT 2.5 ms (config 16).
        assert_eq!(samples(&[12 << 3]), Ok(480));
        assert_eq!(samples(&[16 << 3]), Ok(120));
    }

    #[test]
    fn sdp_lines() {
        assert_eq!(rtpmap(98), "98 opus/48000/2");
        assert_eq!(fmtp(98), "98 sprop-stereo=0;useinbandfec=0");
    }
}
