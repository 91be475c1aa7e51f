//! Any bytes: parse must not panic, and what it accepts must survive an
//! RTP round trip (same scan, tables, size, type) and be read by the DC
//! decoder without a panic.
#![no_main]

use camstream_rtp::packetize::{self, Packetizer};
use camstream_rtp::{Depacketizer, jpeg};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mtu_seed, frame)) = data.split_first() else { return };
    let Ok(j) = jpeg::parse(frame) else {
        let _ = jpeg::frame_len(frame);
        return;
    };
    assert!(j.len <= frame.len());
    assert_eq!(jpeg::frame_len(frame), Ok(j.len), "splitter and parser agree on the end");
    // Motion detection's reading of the scan (bounded: a header may claim
    // 65535x65535).
    let (w, h) = jpeg::dc_size(j.width, j.height);
    if w * h <= 1 << 16 {
        let mut luma = vec![0u8; w * h];
        let _ = jpeg::dc_luma(&j, &mut luma);
    }

    let mtu = packetize::MIN_MTU + usize::from(mtu_seed) * 32;
    let mut p = Packetizer::new(1, u16::MAX - 3, mtu).unwrap();
    let mut d = Depacketizer::new();
    if packetize::needs_x_dimensions(j.width, j.height) {
        d.set_x_dimensions(j.width, j.height);
    }
    let mut wire = vec![0u8; mtu];
    let mut rebuilt = None;
    for pkt in p.packetize(&j, 42) {
        assert!(pkt.len() <= mtu);
        pkt.write_to(&mut wire);
        if let Some(f) = d.push(&wire[..pkt.len()]).unwrap() {
            rebuilt = Some(f.jpeg.to_vec());
        }
    }
    let rebuilt = rebuilt.expect("the last packet completes the frame");
    let r = jpeg::parse(&rebuilt).expect("the receiver's frame parses");
    assert_eq!(r.scan, j.scan);
    assert_eq!(r.quant_tables, j.quant_tables);
    assert_eq!((r.width, r.height, r.rtp_type()), (j.width, j.height, j.rtp_type()));
});
