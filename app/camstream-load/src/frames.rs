//! Whether a session's RTP packets make whole frames: RTP/JPEG's (RFC
//! 2435) fragment offsets joining up, H.264's (RFC 6184) access units
//! complete at their marker bit; what was lost between them.

use camstream_rtp::rtp;
use camstream_rtsp::sdp::Codec;

use crate::stats::Verdict;

const RTP_JPEG: u8 = 26;

/// Where the current frame's packets have got to.
pub struct FrameCheck {
    /// What the track carries (the SDP says).
    pub codec: Codec,
    /// H.264: a marker bit came since the session joined or lost a packet,
    /// so the next packet starts an access unit.
    synced: bool,
    /// The RTP timestamp and the offset the next packet must have.
    current: Option<(u32, usize)>,
    next_seq: Option<u16>,
    /// RTP timestamps of the first and the latest whole frame: which of the
    /// server's frames the session spans, for a harness that knows them all
    /// (scripts/soak).
    pub span: Option<(u32, u32)>,
}

impl Default for FrameCheck {
    fn default() -> FrameCheck {
        FrameCheck {
            codec: Codec::Jpeg,
            synced: false,
            current: None,
            next_seq: None,
            span: None,
        }
    }
}

/// A packet of the track: its verdict, and how many packets were skipped
/// before it (whole frames a server dropped show only there). Sequence
/// numbers count up by one.
pub fn check_packet(state: &mut FrameCheck, packet: &[u8]) -> (Verdict, u16) {
    let Ok(p) = rtp::IncomingPacket::parse(packet) else {
        return (Verdict::NotJpeg, 0);
    };
    match state.codec {
        Codec::Jpeg => check_jpeg(state, p),
        Codec::H264 { payload_type } => check_h264(state, p, payload_type),
    }
}

/// RFC 6184: an access unit's packets share a timestamp, the last has the
/// marker bit. One that lost a packet is broken; counting starts again
/// after the next marker bit.
fn check_h264(state: &mut FrameCheck, p: rtp::IncomingPacket<'_>, pt: u8) -> (Verdict, u16) {
    if p.header.payload_type != pt || p.payload.is_empty() {
        return (Verdict::NotJpeg, 0);
    }
    let gap = match state.next_seq {
        Some(expected) => p.header.sequence.wrapping_sub(expected),
        None => 0,
    };
    state.next_seq = Some(p.header.sequence.wrapping_add(1));
    let ts = p.header.timestamp;
    // A fragment (FU-A, type 28) without its start bit continues a unit.
    let continues = p.payload[0] & 0x1f == 28 && p.payload.get(1).is_some_and(|b| b & 0x80 == 0);
    let broken = match state.current {
        Some((t, _)) => gap != 0 || t != ts,
        // Packets lost between units are whole units the server dropped
        // (counted as lost), unless this one is the rest of a unit.
        None => gap != 0 && state.synced && continues,
    };
    if broken {
        state.synced = false;
        state.current = None;
        return (Verdict::Broken, gap);
    }
    if !p.header.marker {
        if state.synced {
            state.current = Some((ts, 0));
        }
        return (Verdict::Part, gap);
    }
    state.current = None;
    if !state.synced {
        // The end of the unit the session joined in: not counted.
        state.synced = true;
        return (Verdict::Part, gap);
    }
    state.span = Some((state.span.map_or(ts, |(first, _)| first), ts));
    (Verdict::Frame, gap)
}

/// RFC 2435: a frame's packets share a timestamp, their fragment offsets
/// join up from 0, the last has the marker bit.
fn check_jpeg(state: &mut FrameCheck, p: rtp::IncomingPacket<'_>) -> (Verdict, u16) {
    if p.header.payload_type != RTP_JPEG || p.payload.len() < 8 {
        return (Verdict::NotJpeg, 0);
    }
    let seq = p.header.sequence;
    let first_packet = state.next_seq.is_none();
    let gap = match state.next_seq {
        Some(expected) => seq.wrapping_sub(expected),
        None => 0,
    };
    state.next_seq = Some(seq.wrapping_add(1));
    let payload = p.payload;
    let offset =
        usize::from(payload[1]) << 16 | usize::from(payload[2]) << 8 | usize::from(payload[3]);
    let data_len = payload.len() - header_len(payload);
    let ts = p.header.timestamp;
    let verdict = match state.current {
        // A new frame; one still open lost its end.
        _ if offset == 0 => {
            let lost_end = state.current.is_some();
            state.current = Some((ts, data_len));
            if lost_end {
                return (Verdict::Broken, gap);
            }
            Verdict::Part
        }
        Some((t, expected)) if t == ts && expected == offset && gap == 0 => {
            state.current = Some((ts, expected + data_len));
            Verdict::Part
        }
        // The middle of the first frame after joining: not counted.
        None if first_packet => return (Verdict::Part, gap),
        // A frame whose first packet (or an earlier one) never came.
        _ => {
            state.current = None;
            return (Verdict::Broken, gap);
        }
    };
    if p.header.marker {
        state.current = None;
        state.span = Some((state.span.map_or(ts, |(first, _)| first), ts));
        return (Verdict::Frame, gap);
    }
    (verdict, gap)
}

/// RTP/JPEG main header, restart header (types 64-127), quantization table
/// header (Q >= 128, first packet only).
fn header_len(payload: &[u8]) -> usize {
    let mut n = 8;
    if payload[4] >= 64 && payload.len() >= n + 4 {
        n += 4;
    }
    let offset_zero = payload[1] == 0 && payload[2] == 0 && payload[3] == 0;
    if payload[5] >= 128 && offset_zero && payload.len() >= n + 4 {
        n += 4 + usize::from(u16::from_be_bytes([payload[n + 2], payload[n + 3]]));
    }
    n.min(payload.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use camstream_rtp::packetize::Packetizer;

    fn packets_of(jpeg: &[u8]) -> Vec<Vec<u8>> {
        let parsed = camstream_rtp::jpeg::parse(jpeg).unwrap();
        // A small MTU, so the frame takes several packets.
        let mut p = Packetizer::new(0x1234, 1, camstream_rtp::packetize::MIN_MTU).unwrap();
        p.packetize(&parsed, 9000)
            .map(|pkt| {
                let mut v = vec![0; pkt.len()];
                pkt.write_to(&mut v);
                v
            })
            .collect()
    }

    #[test]
    fn whole_frames_and_lost_packets() {
        let jpeg = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../camstream-rtp/testdata/ffmpeg-5.1-mjpeg-yuvj420p-huffman-default-160x120.jpg"
        ))
        .unwrap();
        let pkts = packets_of(&jpeg);
        let mut st = FrameCheck::default();
        let verdicts: Vec<_> = pkts.iter().map(|p| check_packet(&mut st, p).0).collect();
        assert_eq!(verdicts.last(), Some(&Verdict::Frame));
        assert_eq!(st.span, Some((9000, 9000)));
        assert!(
            verdicts[..verdicts.len() - 1]
                .iter()
                .all(|v| *v == Verdict::Part)
        );
        // The same frame with its second packet missing.
        assert!(pkts.len() > 2);
        {
            let mut st = FrameCheck::default();
            let got: Vec<_> = pkts
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != 1)
                .map(|(_, p)| check_packet(&mut st, p))
                .collect();
            assert!(got.contains(&(Verdict::Broken, 1)), "{got:?}");
            assert!(!got.iter().any(|(v, _)| *v == Verdict::Frame));
        }
    }

    #[test]
    fn h264_access_units_whole_and_broken() {
        use camstream_h264::{AccessUnit, Packetizer};
        // An IDR picture of 3000 bytes (FU-A at this MTU) with its
        // parameter sets, then P pictures.
        let mut idr = vec![
            0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x1e, 0, 0, 0, 1, 0x68, 0xce, 0x3c, 0x80,
        ];
        idr.extend_from_slice(&[0, 0, 0, 1, 0x65]);
        idr.extend((0..3000).map(|i| (i % 251) as u8 | 1));
        // P pictures of two packets each.
        let p_pic: Vec<u8> = [0, 0, 0, 1, 0x41].into_iter().chain([7u8; 2000]).collect();
        let mut pk = Packetizer::new(0x99, 10, 1200).unwrap();
        let mut units = Vec::new();
        for (i, au) in [&idr, &p_pic, &p_pic, &p_pic, &p_pic]
            .into_iter()
            .enumerate()
        {
            let au = AccessUnit::parse(au).unwrap();
            let pkts: Vec<Vec<u8>> = pk
                .packetize(&au, 3000 * i as u32)
                .map(|pkt| {
                    let mut v = vec![0; pkt.len()];
                    pkt.write_to(&mut v);
                    v
                })
                .collect();
            units.push(pkts);
        }
        assert!(units[0].len() > 2);
        assert_eq!(units[1].len(), 2);
        let check = |skip: &[(usize, usize)]| {
            let mut st = FrameCheck {
                codec: Codec::H264 { payload_type: 96 },
                ..FrameCheck::default()
            };
            let mut v = Vec::new();
            for (u, pkts) in units.iter().enumerate() {
                for (i, p) in pkts.iter().enumerate() {
                    if !skip.contains(&(u, i)) {
                        v.push(check_packet(&mut st, p));
                    }
                }
            }
            let frames = v.iter().filter(|v| v.0 == Verdict::Frame).count();
            let broken = v.iter().filter(|v| v.0 == Verdict::Broken).count();
            (frames, broken)
        };
        // Joined at the first packet: the first unit completes the sync,
        // the four after it count.
        assert_eq!(check(&[]), (4, 0));
        // A whole unit dropped: the others count.
        assert_eq!(check(&[(2, 0), (2, 1)]), (3, 0));
        // A unit's second packet lost: broken when the next unit comes;
        // that one syncs again, the last counts.
        assert_eq!(check(&[(2, 1)]), (2, 1));
        // A unit's first packet lost: its rest is broken.
        assert_eq!(check(&[(2, 0)]), (2, 1));
    }
}
