//! Audio's RTP payloads: packets from anyone (two-byte lengths before each)
//! through the AAC-hbr depacketizer and the Opus framing, which take or
//! refuse them without panicking and never hand over a unit larger than
//! AAC-hbr carries; and the same bytes as one access unit, packetized at an
//! MTU the first byte picks and depacketized whole again.
#![no_main]

use camstream_audio::aac::{self, Config};
use camstream_audio::packetize::{Format, MIN_MTU, Packetizer};
use camstream_audio::{opus, pcmu};
use camstream_rtp::IncomingPacket;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&m, rest)) = data.split_first() else {
        return;
    };
    let mut d = aac::Depacketizer::new();
    let mut left = rest;
    while let [a, b, tail @ ..] = left {
        let n = usize::from(u16::from_be_bytes([*a, *b])).min(tail.len());
        let (packet, after) = tail.split_at(n);
        if let Ok(p) = IncomingPacket::parse(packet) {
            let _ = d.push(&p, |au, _| assert!(au.len() <= aac::MAX_AU));
            if let Ok(samples) = opus::samples(p.payload) {
                assert!((120..=opus::MAX_SAMPLES).contains(&samples));
            }
        }
        left = after;
    }
    for &b in rest {
        let code = pcmu::encode(pcmu::decode(b));
        assert!(code == b || (b == 0x7f && code == 0xff));
    }
    if rest.is_empty() || rest.len() > aac::MAX_AU {
        return;
    }
    let mtu = MIN_MTU + usize::from(m) * 4;
    let mut p = Packetizer::new(Format::Aac(Config::lc(16_000, 1).unwrap()), 1, 2, mtu).unwrap();
    let mut back = aac::Depacketizer::new();
    let mut got = Vec::new();
    let mut wire = vec![0; mtu];
    for q in p.packetize(rest, 7).unwrap() {
        assert!(q.len() <= mtu);
        q.write_to(&mut wire);
        let parsed = IncomingPacket::parse(&wire[..q.len()]).unwrap();
        back.push(&parsed, |au, ts| got.push((au.to_vec(), ts))).unwrap();
    }
    assert_eq!(got, vec![(rest.to_vec(), 7)]);
});
