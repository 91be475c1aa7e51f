//! No heap allocation per frame or packet in steady state: parse, packetize,
//! write packets into a reused buffer, send an RTCP report and depacketize,
//! for many frames, under a global allocator that counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use camstream_rtp::{Depacketizer, Packetizer, jpeg, rtcp};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: each call goes unchanged to the system allocator, which keeps
// GlobalAlloc's contract; counting itself allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller keeps alloc's contract, which is System's too.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from System through this allocator, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: as for dealloc; the caller keeps realloc's contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> usize {
    ALLOCATIONS.with(|c| c.get())
}

fn frames() -> Vec<Vec<u8>> {
    // Different sizes and restart intervals, so buffers must cope with each.
    [(1920u16, 1080u16, 0u16), (1280, 720, 4), (640, 480, 0)]
        .iter()
        .map(|&(w, h, restart)| {
            let px: Vec<u8> = (0..usize::from(w) * usize::from(h) * 3)
                .map(|i| (i * 7 % 251) as u8)
                .collect();
            let mut out = Vec::new();
            let mut e = jpeg_encoder::Encoder::new(&mut out, 85);
            e.set_sampling_factor(jpeg_encoder::SamplingFactor::F_2_2);
            if restart > 0 {
                e.set_restart_interval(restart);
            }
            e.encode(&px, w, h, jpeg_encoder::ColorType::Rgb).unwrap();
            out
        })
        .collect()
}

#[test]
fn steady_state_allocates_nothing() {
    let frames = frames();
    let mut packetizer = Packetizer::new(0x1234, 1, 1400).unwrap();
    let mut depacketizer = Depacketizer::new();
    let mut wire = vec![0u8; 1400];
    let mut report = [0u8; rtcp::MAX_COMPOUND_LEN];
    let mut delivered = 0usize;

    let mut run = |rounds: usize| {
        for i in 0..rounds {
            for f in &frames {
                let j = jpeg::parse(f).unwrap();
                for p in packetizer.packetize(&j, i as u32 * 3000) {
                    p.write_to(&mut wire);
                    if let Some(frame) = depacketizer.push(&wire[..p.len()]).unwrap() {
                        delivered += frame.jpeg.len();
                    }
                }
                let sr = rtcp::SenderReport {
                    ssrc: 0x1234,
                    ntp_time: rtcp::ntp_from_unix(1_700_000_000 + i as u64, 0),
                    rtp_time: i as u32,
                    packet_count: 0,
                    octet_count: 0,
                };
                let n = rtcp::write_report(&sr, b"camstream", false, &mut report);
                assert!(rtcp::parse_compound(&report[..n]).all(|p| p.is_ok()));
            }
        }
    };

    // Warm up: the depacketizer's buffer grows to the largest frame.
    run(2);
    let before = allocations();
    run(50);
    let after = allocations();
    assert_eq!(after - before, 0, "allocations in steady state");
    assert!(delivered > 50 * frames.iter().map(Vec::len).sum::<usize>());
}
