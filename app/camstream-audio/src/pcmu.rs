//! G.711 µ-law (ITU-T G.711; RFC 3551 4.5.14's PCMU): 16-bit linear samples
//! to eight bits each and back, as the ITU's own reference (G.191's
//! software tools, `ulaw_compress` and `ulaw_expand`) does them: the 14 bits
//! G.711 takes (a negative sample's ones' complement), truncated within a
//! segment. FFmpeg's encoder gives the same codes for ordinary sound; at
//! the segment edges it rounds to the nearer level instead (one 16-bit
//! value in about seventy, each a code apart).

/// What 0x84 adds before the segment is found: it moves every segment's
/// start to a power of two.
const BIAS: i32 = 0x84;

/// One sample's µ-law code.
pub fn encode(sample: i16) -> u8 {
    let x = i32::from(sample);
    let magnitude = (if x < 0 { !x } else { x }) >> 2;
    // The 14-bit bias (0x84 >> 2), clipped to the top segment's end.
    let biased = (magnitude + 33).min(0x1fff);
    // The segment, 0-7: how many bits are set above the lowest six.
    let segment = 32 - (biased >> 6).leading_zeros() as i32;
    let mantissa = (biased >> (segment + 1)) & 0x0f;
    let code = (((7 - segment) << 4) | (15 - mantissa)) as u8;
    if x >= 0 { code | 0x80 } else { code }
}

/// The linear sample a µ-law code stands for.
pub fn decode(code: u8) -> i16 {
    let u = !code;
    let t = ((i32::from(u & 0x0f) << 3) + BIAS) << ((u & 0x70) >> 4);
    // At most (0x78 + 0x84) << 7 - 0x84 = 32_124: an i16.
    (if u & 0x80 != 0 { BIAS - t } else { t - BIAS }) as i16
}

/// Encodes `samples` into `out`, one code each (`out` as long as
/// `samples`; what is past either's end is left).
pub fn encode_into(samples: &[i16], out: &mut [u8]) {
    for (o, &s) in out.iter_mut().zip(samples) {
        *o = encode(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_of_known_samples() {
        // Silence is 0xff (positive zero); the extremes are 0x80 and 0x00.
        assert_eq!(encode(0), 0xff);
        assert_eq!(encode(-1), 0x7f);
        assert_eq!(encode(i16::MAX), 0x80);
        assert_eq!(encode(i16::MIN), 0x00);
        assert_eq!(decode(0xff), 0);
        assert_eq!(decode(0x7f), 0);
        assert_eq!(decode(0x80), 32_124);
        assert_eq!(decode(0x00), -32_124);
        // Segment 1 begins at 31 in 14 bits (124 in 16).
        assert_eq!(encode(124), 0xef);
        assert_eq!(encode(123), 0xf0);
    }

    #[test]
    fn every_code_survives_a_round_trip() {
        for code in 0..=255u8 {
            // Negative zero (0x7f) comes back as positive zero.
            let want = if code == 0x7f { 0xff } else { code };
            assert_eq!(encode(decode(code)), want, "code {code:#04x}");
        }
    }

    #[test]
    fn the_error_is_within_a_step() {
        for s in i16::MIN..=i16::MAX {
            let back = i32::from(decode(encode(s)));
            let s = i32::from(s).clamp(-32_124, 32_124);
            // A segment's step is 8 << segment (in 16 bits): truncation
            // loses up to one, the 14 bits up to 4 more.
            let biased = ((s.abs() >> 2) + 33).min(0x1fff);
            let step = 8 << (32 - (biased >> 6).leading_zeros());
            assert!((back - s).abs() <= step + 4, "{s} came back as {back}");
        }
    }
}
