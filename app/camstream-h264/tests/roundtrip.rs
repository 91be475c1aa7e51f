//! Packetized and depacketized again, an access unit comes back as its NAL
//! units (less its access unit delimiter, with the parameter sets before
//! an IDR picture that had none): for real encoders' streams at several
//! MTUs, and for any access unit proptest makes.

use camstream_h264::annexb::nal_units;
use camstream_h264::packetize::MIN_MTU;
use camstream_h264::{AccessUnit, Depacketizer, Packetizer, nal};
use camstream_rtp::IncomingPacket;
use proptest::prelude::*;

/// The access units of an Annex B stream whose encoder wrote a delimiter
/// before each.
fn access_units(stream: &[u8]) -> Vec<Vec<u8>> {
    let mut aus: Vec<Vec<u8>> = Vec::new();
    for unit in nal_units(stream) {
        if nal::unit_type(unit[0]) == nal::AUD {
            aus.push(Vec::new());
        }
        let au = aus.last_mut().expect("the stream starts with a delimiter");
        au.extend_from_slice(&[0, 0, 0, 1]);
        au.extend_from_slice(unit);
    }
    aus
}

/// What a receiver must get of `au`, given the parameter sets sent before.
fn expected(au: &AccessUnit<'_>, sets: &mut [Option<Vec<u8>>; 2]) -> Vec<Vec<u8>> {
    for (kept, new) in sets.iter_mut().zip([au.sps, au.pps]) {
        if let Some(new) = new {
            *kept = Some(new.to_vec());
        }
    }
    let mut out = Vec::new();
    if au.idr && (au.sps.is_none() || au.pps.is_none()) {
        if let [Some(sps), Some(pps)] = sets {
            out.push(sps.clone());
            out.push(pps.clone());
        }
    }
    out.extend(
        au.units()
            .filter(|u| nal::unit_type(u[0]) != nal::AUD)
            .map(<[u8]>::to_vec),
    );
    out
}

fn roundtrip(aus: &[Vec<u8>], mtu: usize) -> Result<(), TestCaseError> {
    let mut p = Packetizer::new(0x1234, 65_530, mtu).unwrap();
    let mut d = Depacketizer::new();
    let mut sets = [None, None];
    let mut buf = vec![0u8; mtu];
    for (i, data) in aus.iter().enumerate() {
        let au = AccessUnit::parse(data).unwrap();
        let want = expected(&au, &mut sets);
        let ts = 3000 * i as u32;
        let mut got = None;
        let packets: Vec<_> = p.packetize(&au, ts).collect();
        for (k, pk) in packets.iter().enumerate() {
            prop_assert!(pk.len() <= mtu);
            prop_assert_eq!(pk.marker(), k == packets.len() - 1);
            pk.write_to(&mut buf);
            let incoming = IncomingPacket::parse(&buf[..pk.len()]).unwrap();
            prop_assert_eq!(incoming.header.timestamp, ts);
            if let Some(au) = d.push(&incoming).unwrap() {
                got = Some(nal_units(au).map(<[u8]>::to_vec).collect::<Vec<_>>());
            }
        }
        prop_assert_eq!(got, Some(want), "access unit {}", i);
    }
    Ok(())
}

#[test]
fn real_encoders_streams_at_several_mtus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "h264") {
            continue;
        }
        let aus = access_units(&std::fs::read(&path).unwrap());
        assert!(aus.len() >= 10, "{}", path.display());
        assert!(AccessUnit::parse(&aus[0]).unwrap().idr);
        for mtu in [MIN_MTU, 800, 1400] {
            roundtrip(&aus, mtu).unwrap_or_else(|e| panic!("{} at MTU {mtu}: {e}", path.display()));
        }
        files += 1;
    }
    assert!(files >= 2);
}

/// A NAL unit of one of the types an encoder writes, its body without the
/// zero bytes an Annex B stream escapes.
fn unit() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(vec![0x41u8, 0x65, 0x06, 0x67, 0x68, 0x01]),
        prop::collection::vec(1u8..=255, 1..3000),
    )
        .prop_map(|(h, body)| {
            let mut u = vec![h];
            u.extend(body);
            u
        })
}

fn access_unit() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(unit(), 1..6).prop_filter_map("one SPS, one PPS at most", |units| {
        let mut data = Vec::new();
        for u in &units {
            data.extend_from_slice(&[0, 0, 1]);
            data.extend_from_slice(u);
        }
        let ok = AccessUnit::parse(&data).is_ok();
        ok.then_some(data)
    })
}

proptest! {
    #[test]
    fn any_access_units(aus in prop::collection::vec(access_unit(), 1..5), mtu in MIN_MTU..2000usize) {
        roundtrip(&aus, mtu)?;
    }
}
