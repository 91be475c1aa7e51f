//! A fixed packetizing workload for counting instructions (callgrind):
//! each JPEG file given is parsed and packetized ROUNDS times, as the
//! server does, into one reused wire buffer. scripts/bench-cost runs it
//! twice with different ROUNDS: the difference is the cost of the extra
//! frames alone, start-up and file reading cancelled out.
//!
//!     count-packetize ROUNDS FRAME.jpg...

#[path = "../benches/common/mod.rs"]
mod common;

use std::hint::black_box;

use camstream_rtp::Packetizer;
use common::packetize_into;

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: count-packetize ROUNDS FRAME.jpg...";
    let rounds: u32 = args.next().and_then(|r| r.parse().ok()).expect(usage);
    let frames: Vec<Vec<u8>> = args
        .map(|f| std::fs::read(&f).unwrap_or_else(|e| panic!("{f}: {e}")))
        .collect();
    assert!(!frames.is_empty(), "{usage}");
    let mut p = Packetizer::new(1, 1, 1400).expect("a valid MTU");
    let mut wire = Vec::new();
    let mut packets = 0;
    let mut ts = 0u32;
    for _ in 0..rounds {
        for f in &frames {
            ts = ts.wrapping_add(3000);
            packets += packetize_into(black_box(f), &mut p, &mut wire, ts);
        }
    }
    println!(
        "{} frames, {packets} packets",
        rounds as usize * frames.len()
    );
}
