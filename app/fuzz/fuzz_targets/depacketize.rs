//! Any packet sequence (2-byte length prefixes): no panic, and every frame
//! the depacketizer hands out is a JPEG from SOI to EOI.
#![no_main]

use camstream_rtp::{Depacketizer, jpeg};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut d = Depacketizer::new();
    if data.first().is_some_and(|b| b & 1 == 1) {
        d.set_x_dimensions(3840, 2160);
    }
    let mut rest = data.get(1..).unwrap_or_default();
    while rest.len() >= 2 {
        let n = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let (packet, tail) = rest[2..].split_at(n);
        rest = tail;
        if let Ok(Some(f)) = d.push(packet) {
            assert!(f.jpeg.starts_with(&[0xff, 0xd8]));
            assert!(f.jpeg.ends_with(&[0xff, 0xd9]));
            let _ = jpeg::parse(f.jpeg);
        }
    }
});
