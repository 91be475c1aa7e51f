//! A fixed H.264 packetizing workload for counting instructions
//! (callgrind), as camstream-rtp's count-packetize is for JPEG: the access
//! units of an Annex B file (split at its access unit delimiters, as
//! FFmpeg's h264_metadata=aud=insert writes them) are packetized ROUNDS
//! times into one reused wire buffer. scripts/bench-cost runs it with two
//! ROUNDS: the difference is the cost of the extra frames alone.
//!
//!     count-packetize-h264 ROUNDS FILE.h264

use std::hint::black_box;

use camstream_h264::annexb::nal_units;
use camstream_h264::{AccessUnit, Packetizer};

/// NAL unit type of an access unit delimiter.
const AUD: u8 = 9;

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: count-packetize-h264 ROUNDS FILE.h264";
    let rounds: u32 = args.next().and_then(|r| r.parse().ok()).expect(usage);
    let file = args.next().expect(usage);
    let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
    // Where each access unit starts: the start code before its delimiter.
    let starts: Vec<usize> = nal_units(&data)
        .filter(|u| u[0] & 0x1f == AUD)
        .map(|u| u.as_ptr() as usize - data.as_ptr() as usize - 3)
        .collect();
    assert!(starts.len() > 1, "{file}: no access unit delimiters");
    let units: Vec<&[u8]> = starts
        .iter()
        .zip(starts.iter().skip(1).chain([&data.len()]))
        .map(|(&a, &b)| &data[a..b])
        .collect();
    let mut p = Packetizer::new(1, 1, 1400).expect("a valid MTU");
    let mut wire = vec![0u8; 1 << 16];
    let (mut packets, mut ts) = (0usize, 0u32);
    for _ in 0..rounds {
        for u in &units {
            ts = ts.wrapping_add(3000);
            let au = AccessUnit::parse(black_box(u)).expect("an access unit");
            let mut at = 0;
            for pkt in p.packetize(&au, ts) {
                // Laid out one after another, as the fan-out's records are.
                if at + pkt.len() > wire.len() {
                    at = 0;
                }
                pkt.write_to(&mut wire[at..at + pkt.len()]);
                at += pkt.len();
                packets += 1;
            }
            black_box(&wire);
        }
    }
    println!(
        "{} frames, {packets} packets",
        rounds as usize * units.len()
    );
}
