//! Packetizer speed and allocations per frame: parse a 1080p JPEG and
//! packetize it as the server does, copying every packet into one reused
//! wire buffer (RTSP interleaved records).
//!
//!     cargo bench -p camstream-rtp --bench packetize [-- FILTER]
//!
//! The frame is CAMSTREAM_BENCH_FRAME (a JPEG file; scripts/bench passes a
//! frame of its 1080p clip) or else a 1920x1080 noise picture encoded here
//! with libjpeg-turbo at quality 80 (standard Huffman tables).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use camstream_rtp::{Packetizer, jpeg};
use common::packetize_into;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Counts allocations, so the bench can say how many a frame costs.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: each call goes unchanged to the system allocator, which keeps
// GlobalAlloc's contract; counting itself allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller keeps alloc's contract, which is System's too.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from System through this allocator, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for dealloc; the caller keeps realloc's contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn frame() -> Vec<u8> {
    if let Some(path) = std::env::var_os("CAMSTREAM_BENCH_FRAME") {
        return std::fs::read(&path).expect("CAMSTREAM_BENCH_FRAME: a readable JPEG file");
    }
    let (w, h) = (1920, 1080);
    // A fixed pseudo-random picture: noise keeps the scan near real sizes.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let pixels: Vec<u8> = (0..w * h * 3)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((i % (w * 3)) as u64 / 16 + (x & 31)) as u8
        })
        .collect();
    let img = turbojpeg::Image {
        pixels: pixels.as_slice(),
        width: w,
        pitch: w * 3,
        height: h,
        format: turbojpeg::PixelFormat::RGB,
    };
    let mut comp = turbojpeg::Compressor::new().expect("libjpeg-turbo");
    comp.set_quality(80);
    comp.set_subsamp(turbojpeg::Subsamp::Sub2x2);
    comp.compress_to_vec(img).expect("libjpeg-turbo")
}

fn bench(c: &mut Criterion) {
    let data = frame();
    let j = jpeg::parse(&data).expect("a baseline JPEG RFC 2435 can carry");
    let (w, h) = (j.width, j.height);
    let mut p = Packetizer::new(1, 1, 1400).unwrap();
    let mut wire = Vec::new();
    // Warm up (the wire buffer grows once), then count.
    let packets = packetize_into(&data, &mut p, &mut wire, 0);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    const COUNTED: u32 = 1000;
    for ts in 0..COUNTED {
        black_box(packetize_into(black_box(&data), &mut p, &mut wire, ts));
    }
    let allocs = ALLOCATIONS.load(Ordering::Relaxed) - before;
    println!(
        "frame: {w}x{h}, {} bytes, {packets} packets of at most 1400 bytes; \
         allocations per frame in steady state: {}",
        data.len(),
        allocs as f64 / f64::from(COUNTED)
    );
    let mut g = c.benchmark_group("packetize");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function(format!("{w}x{h} parse + packetize + copy to wire"), |b| {
        let mut ts = 0u32;
        b.iter(|| {
            ts = ts.wrapping_add(3000);
            packetize_into(black_box(&data), &mut p, &mut wire, ts)
        })
    });
    g.bench_function(format!("{w}x{h} packetize only"), |b| {
        let mut ts = 0u32;
        b.iter(|| {
            ts = ts.wrapping_add(3000);
            p.packetize(black_box(&j), ts)
                .map(|packet| packet.len())
                .sum::<usize>()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
