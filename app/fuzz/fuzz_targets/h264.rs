//! An access unit as an H.264 encoder hands it over (Annex B): what parses
//! is packetized at any MTU and depacketized again into the same NAL units
//! (less delimiters, with the parameter sets an IDR needs), every packet
//! within the MTU, the last one marked; its SPS made to say JPEG's colour
//! and a rate keeps the NAL units as they were, still parses, and says it
//! once.
#![no_main]

use camstream_h264::annexb::nal_units;
use camstream_h264::packetize::{MAX_MTU, MIN_MTU};
use camstream_h264::sps::{Signal, signal};
use camstream_h264::{AccessUnit, Depacketizer, Packetizer, nal};
use camstream_rtp::IncomingPacket;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&m, data)) = data.split_first() else {
        return;
    };
    let Ok(au) = AccessUnit::parse(data) else {
        return;
    };
    if let Some(at) = au.sps_at() {
        let mut said = data.to_vec();
        let want = Signal {
            jpeg_colour: m & 1 == 1,
            fps: Some(u32::from(m >> 1) + 1),
        };
        if signal(&mut said, at, want) {
            assert_eq!(nal_units(&said).count(), nal_units(data).count());
            let again = AccessUnit::parse(&said).unwrap();
            assert!(!signal(&mut said.clone(), again.sps_at().unwrap(), want));
        }
    }
    let mtu = MIN_MTU + usize::from(m) * 16;
    assert!(mtu <= MAX_MTU);
    let mut p = Packetizer::new(1, 0, mtu).unwrap();
    let mut d = Depacketizer::new();
    let packets: Vec<_> = p.packetize(&au, 90_000).collect();
    let mut buf = vec![0u8; mtu];
    let mut got = None;
    for (i, pk) in packets.iter().enumerate() {
        assert!(pk.len() <= mtu);
        assert_eq!(pk.marker(), i == packets.len() - 1);
        pk.write_to(&mut buf);
        let incoming = IncomingPacket::parse(&buf[..pk.len()]).unwrap();
        if let Some(out) = d.push(&incoming).unwrap() {
            got = Some(nal_units(out).map(<[u8]>::to_vec).collect::<Vec<_>>());
        }
    }
    // The first access unit: no parameter sets kept before it.
    let want: Vec<Vec<u8>> = au
        .units()
        .filter(|u| nal::unit_type(u[0]) != nal::AUD)
        .map(<[u8]>::to_vec)
        .collect();
    if want.is_empty() {
        assert!(packets.is_empty());
    } else {
        assert_eq!(got, Some(want));
    }
});
