//! RTCP (RFC 3550 section 6): the sender report with CNAME a sender emits,
//! BYE, and a parser for the compound packets receivers send back.

pub const PT_SR: u8 = 200;
pub const PT_RR: u8 = 201;
pub const PT_SDES: u8 = 202;
pub const PT_BYE: u8 = 203;

/// Largest CNAME we write (SDES item length is one byte).
pub const MAX_CNAME: usize = 255;

/// A compound of SR + SDES(CNAME) [+ BYE] fits in this many bytes.
pub const MAX_COMPOUND_LEN: usize = 28 + 8 + 4 + MAX_CNAME + 4 + 8;

/// What a sender report says (RFC 3550 6.4.1), without report blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderReport {
    pub ssrc: u32,
    /// Wall clock as a 64-bit NTP timestamp (seconds since 1900 << 32 | fraction).
    pub ntp_time: u64,
    /// The RTP timestamp of the same instant.
    pub rtp_time: u32,
    pub packet_count: u32,
    pub octet_count: u32,
}

/// A writer of big-endian fields into a buffer that holds them: one past
/// its end is left unwritten (debug builds say so) instead of panicking.
struct Out<'a> {
    buf: &'a mut [u8],
}

impl Out<'_> {
    fn put(&mut self, at: usize, bytes: &[u8]) {
        let slot = self.buf.get_mut(at..at + bytes.len());
        debug_assert!(slot.is_some(), "out holds MAX_COMPOUND_LEN bytes");
        if let Some(slot) = slot {
            slot.copy_from_slice(bytes);
        }
    }

    fn header(&mut self, at: usize, count: u8, pt: u8, len_bytes: usize) {
        debug_assert!(len_bytes % 4 == 0);
        self.put(at, &[0x80 | count, pt]);
        self.put(at + 2, &((len_bytes / 4 - 1) as u16).to_be_bytes());
    }
}

/// Writes a compound packet: SR, SDES with CNAME and, if `bye`, a BYE.
/// Returns its length. `out` must hold [`MAX_COMPOUND_LEN`] bytes; a CNAME
/// longer than [`MAX_CNAME`] is cut.
pub fn write_report(sr: &SenderReport, cname: &[u8], bye: bool, out: &mut [u8]) -> usize {
    let mut o = Out { buf: out };
    o.header(0, 0, PT_SR, 28);
    o.put(4, &sr.ssrc.to_be_bytes());
    o.put(8, &sr.ntp_time.to_be_bytes());
    o.put(16, &sr.rtp_time.to_be_bytes());
    o.put(20, &sr.packet_count.to_be_bytes());
    o.put(24, &sr.octet_count.to_be_bytes());

    // SDES: one chunk with a CNAME item, then a null item, padded to 32 bits.
    let cname = cname.get(..MAX_CNAME).unwrap_or(cname);
    let sdes = 28;
    let items = 4 + 2 + cname.len() + 1;
    let sdes_len = 4 + items.div_ceil(4) * 4;
    if let Some(chunk) = o.buf.get_mut(sdes..sdes + sdes_len) {
        chunk.fill(0);
    }
    o.header(sdes, 1, PT_SDES, sdes_len);
    o.put(sdes + 4, &sr.ssrc.to_be_bytes());
    o.put(sdes + 8, &[1, cname.len() as u8]); // CNAME, its length
    o.put(sdes + 10, cname);
    let mut len = sdes + sdes_len;

    if bye {
        o.header(len, 1, PT_BYE, 8);
        o.put(len + 4, &sr.ssrc.to_be_bytes());
        len += 8;
    }
    len
}

/// The big-endian 32-bit word at `i`, if `b` holds it.
fn word(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?))
}

/// One reception report block (RFC 3550 6.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportBlock {
    pub ssrc: u32,
    pub fraction_lost: u8,
    /// Cumulative number of packets lost (24-bit, signed).
    pub cumulative_lost: i32,
    pub highest_sequence: u32,
    pub jitter: u32,
    pub last_sr: u32,
    pub delay_since_last_sr: u32,
}

/// Report blocks of an SR or RR, parsed lazily.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportBlocks<'a>(&'a [u8]);

impl Iterator for ReportBlocks<'_> {
    type Item = ReportBlock;
    fn next(&mut self) -> Option<ReportBlock> {
        let (b, rest) = self.0.split_at_checked(24)?;
        let loss = word(b, 4)?;
        let block = ReportBlock {
            ssrc: word(b, 0)?,
            fraction_lost: (loss >> 24) as u8,
            // Sign-extend the 24-bit count.
            cumulative_lost: ((loss << 8) as i32) >> 8,
            highest_sequence: word(b, 8)?,
            jitter: word(b, 12)?,
            last_sr: word(b, 16)?,
            delay_since_last_sr: word(b, 20)?,
        };
        self.0 = rest;
        Some(block)
    }
}

/// One packet of a compound RTCP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packet<'a> {
    SenderReport {
        report: SenderReport,
        blocks: ReportBlocks<'a>,
    },
    ReceiverReport {
        ssrc: u32,
        blocks: ReportBlocks<'a>,
    },
    /// BYE with the SSRCs that leave (the optional reason is not kept).
    Bye {
        ssrcs: &'a [u8],
    },
    /// SDES, APP, feedback and anything else, by packet type.
    Other {
        packet_type: u8,
        body: &'a [u8],
    },
}

impl Packet<'_> {
    /// For BYE: the SSRCs leaving.
    pub fn bye_ssrcs(&self) -> impl Iterator<Item = u32> + '_ {
        let s: &[u8] = match self {
            Packet::Bye { ssrcs } => ssrcs,
            _ => &[],
        };
        s.chunks_exact(4).filter_map(|c| word(c, 0))
    }
}

/// Why bytes are not a valid compound RTCP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompoundError {
    TooShort,
    Version,
    /// A length field runs past the end, or a report count does not fit.
    Length,
}

impl core::fmt::Display for CompoundError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            CompoundError::TooShort => "RTCP packet shorter than its header",
            CompoundError::Version => "RTCP version is not 2",
            CompoundError::Length => "RTCP length or count field does not match the data",
        })
    }
}

impl core::error::Error for CompoundError {}

/// Iterates the packets of a compound RTCP packet; stops after the first error.
#[derive(Debug, Clone)]
pub struct Compound<'a> {
    rest: &'a [u8],
}

/// Parses a compound RTCP packet lazily.
pub fn parse_compound(data: &[u8]) -> Compound<'_> {
    Compound { rest: data }
}

impl<'a> Iterator for Compound<'a> {
    type Item = Result<Packet<'a>, CompoundError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = parse_one(self.rest);
        match r {
            Ok((p, len)) => {
                self.rest = self.rest.get(len..).unwrap_or_default();
                Some(Ok(p))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

fn parse_one(d: &[u8]) -> Result<(Packet<'_>, usize), CompoundError> {
    let &[first, packet_type, len_hi, len_lo, ..] = d else {
        return Err(CompoundError::TooShort);
    };
    if first >> 6 != 2 {
        return Err(CompoundError::Version);
    }
    let count = usize::from(first & 0x1f);
    let len = (usize::from(u16::from_be_bytes([len_hi, len_lo])) + 1) * 4;
    let mut body = d.get(4..len).ok_or(CompoundError::Length)?;
    if first & 0x20 != 0 {
        let pad = usize::from(*body.last().ok_or(CompoundError::Length)?);
        if pad == 0 {
            return Err(CompoundError::Length);
        }
        body = body
            .get(..body.len().wrapping_sub(pad))
            .filter(|_| pad <= body.len())
            .ok_or(CompoundError::Length)?;
    }
    let short = CompoundError::Length;
    let packet = match packet_type {
        PT_SR => Packet::SenderReport {
            report: SenderReport {
                ssrc: word(body, 0).ok_or(short)?,
                ntp_time: (u64::from(word(body, 4).ok_or(short)?) << 32)
                    | u64::from(word(body, 8).ok_or(short)?),
                rtp_time: word(body, 12).ok_or(short)?,
                packet_count: word(body, 16).ok_or(short)?,
                octet_count: word(body, 20).ok_or(short)?,
            },
            blocks: ReportBlocks(body.get(24..24 + 24 * count).ok_or(short)?),
        },
        PT_RR => Packet::ReceiverReport {
            ssrc: word(body, 0).ok_or(short)?,
            blocks: ReportBlocks(body.get(4..4 + 24 * count).ok_or(short)?),
        },
        PT_BYE => Packet::Bye {
            ssrcs: body.get(..4 * count).ok_or(short)?,
        },
        pt => Packet::Other {
            packet_type: pt,
            body,
        },
    };
    Ok((packet, len))
}

/// Converts Unix time (seconds and nanoseconds since 1970) to NTP format.
pub fn ntp_from_unix(secs: u64, nanos: u32) -> u64 {
    const UNIX_TO_NTP: u64 = 2_208_988_800;
    let frac = (u64::from(nanos) << 32) / 1_000_000_000;
    ((secs + UNIX_TO_NTP) << 32) | frac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_round_trip() {
        let sr = SenderReport {
            ssrc: 0x0102_0304,
            ntp_time: ntp_from_unix(1_700_000_000, 500_000_000),
            rtp_time: 90_000,
            packet_count: 7,
            octet_count: 7000,
        };
        let mut buf = [0u8; MAX_COMPOUND_LEN];
        let n = write_report(&sr, b"camstream@cam", true, &mut buf);
        assert_eq!(n % 4, 0);
        let packets: alloc::vec::Vec<_> = parse_compound(&buf[..n]).collect();
        assert_eq!(packets.len(), 3);
        match packets[0] {
            Ok(Packet::SenderReport { report, mut blocks }) => {
                assert_eq!(report, sr);
                assert!(blocks.next().is_none());
            }
            ref p => panic!("{p:?}"),
        }
        assert!(matches!(
            packets[1],
            Ok(Packet::Other {
                packet_type: PT_SDES,
                ..
            })
        ));
        let bye = packets[2].unwrap();
        assert_eq!(
            bye.bye_ssrcs().collect::<alloc::vec::Vec<_>>(),
            [0x0102_0304]
        );
        // The fraction of .5 s is 2^31.
        assert_eq!(sr.ntp_time & 0xffff_ffff, 1 << 31);
    }

    fn hex(s: &str) -> alloc::vec::Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The compound packets clients send: an RR with one block, then SDES,
    /// then nothing. Returns the RR's SSRC and its block.
    fn one_block_rr_then_sdes(data: &[u8]) -> (u32, ReportBlock) {
        let mut it = parse_compound(data);
        let (ssrc, block) = match it.next() {
            Some(Ok(Packet::ReceiverReport { ssrc, mut blocks })) => {
                let b = blocks.next().unwrap();
                assert!(blocks.next().is_none());
                (ssrc, b)
            }
            other => panic!("{other:?}"),
        };
        assert!(matches!(
            it.next(),
            Some(Ok(Packet::Other {
                packet_type: PT_SDES,
                ..
            }))
        ));
        assert!(it.next().is_none());
        (ssrc, block)
    }

    #[test]
    fn receiver_report_from_gstreamer() {
        // What GStreamer 1.22's rtspsrc sent to camstream over TCP (see
        // tests/record_transcript.py): RR with one block, then SDES.
        let rr = hex(include_str!("../testdata/rtcp/gstreamer-1.22-rtspsrc-tcp.rtcp").trim());
        let (ssrc, b) = one_block_rr_then_sdes(&rr);
        assert_eq!(ssrc, 0x5179_ab64);
        assert_eq!(b.ssrc, 0x1168_5018);
        assert_eq!(b.fraction_lost, 0);
        assert_eq!(b.cumulative_lost, -1);
        assert_eq!(b.highest_sequence, 0x11a4);
        assert_eq!(b.jitter, 2);
    }

    #[test]
    fn receiver_reports_and_bye_from_live555() {
        // What live555's openRTSP 2026.06.24 (VLC's RTSP client) sent over
        // TCP: RR + SDES, and at the end RR + BYE without SDES.
        let text = include_str!("../testdata/rtcp/live555-2026.06.24-openrtsp-tcp.rtcp");
        let mut lines = text.lines().map(hex);
        let (ssrc, b) = one_block_rr_then_sdes(&lines.next().unwrap());
        assert_eq!(ssrc, 0xf8f3_93a6);
        assert_eq!(b.ssrc, 0x56de_a85c);
        assert_eq!(b.highest_sequence, 0x0001_f8c0);
        let last = lines.next().unwrap();
        let mut it = parse_compound(&last);
        assert!(matches!(
            it.next(),
            Some(Ok(Packet::ReceiverReport {
                ssrc: 0xf8f3_93a6,
                ..
            }))
        ));
        let bye = it.next().unwrap().unwrap();
        assert_eq!(
            bye.bye_ssrcs().collect::<alloc::vec::Vec<_>>(),
            [0xf8f3_93a6]
        );
        assert!(it.next().is_none());
        assert!(lines.next().is_none());
    }

    #[test]
    fn malformed_stops_iteration() {
        let mut it = parse_compound(&[0x80, 0xc9, 0x00, 0x09, 0, 0, 0, 0]);
        assert_eq!(it.next(), Some(Err(CompoundError::Length)));
        assert!(it.next().is_none());
        assert_eq!(
            parse_compound(&[0x40, 0, 0, 0]).next(),
            Some(Err(CompoundError::Version))
        );
    }
}
