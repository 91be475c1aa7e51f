//! `testpattern`: colour bars, a scrolling ramp, a bouncing box that changes
//! colour, and the frame number and UTC time, drawn straight into 4:2:0
//! planes and encoded with libjpeg-turbo on a worker thread, so the event
//! loop never waits for the encoder. No camera needed. SIGUSR2 stops the
//! ramp and the box, and starts them again: a picture with motion and one
//! without, on demand (motion detection's tests).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow};
use std::os::fd::{AsRawFd, OwnedFd};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use rustix::event::{EventfdFlags, eventfd};

use super::{CapturedFrame, FrameSource, Raw, StreamInfo};
use crate::clock::Mono;
use crate::convert::i420_plane_sizes;
use crate::turbo::Encoder;

/// Buffers in flight between the encoder thread and the event loop.
const BUFFERS: usize = 3;

pub struct TestPattern {
    info: StreamInfo,
    quality: u8,
    frames: Option<Receiver<(Frame, Mono)>>,
    recycle: Option<SyncSender<Frame>>,
    worker: Option<JoinHandle<Result<()>>>,
    /// Frames come with their planes too (someone watches H.264).
    want_raw: Arc<AtomicBool>,
    /// Signalled by the worker for each frame.
    event: Option<Arc<OwnedFd>>,
    /// The ramp and the box stand still (SIGUSR2 turns it over).
    still: Arc<AtomicBool>,
    signal: Option<signal_hook::SigId>,
}

/// A frame's buffers, handed to the event loop and back.
#[derive(Default)]
struct Frame {
    jpeg: Vec<u8>,
    /// The planes, tightly packed, when asked for.
    raw: Vec<u8>,
    raw_size: Option<(usize, usize)>,
}

impl TestPattern {
    pub fn new(info: StreamInfo, quality: u8) -> Result<TestPattern> {
        // Fail at start-up, not in the thread, if libjpeg-turbo is unusable.
        let mut p = Pattern::new(usize::from(info.width), usize::from(info.height));
        p.render(0, 0, 0);
        let mut enc = Encoder::new(quality)?;
        let mut out = Vec::new();
        enc.encode_i420(p.planes(), p.w, p.h, &mut out)?;
        Ok(TestPattern {
            info,
            quality,
            frames: None,
            recycle: None,
            worker: None,
            want_raw: Arc::new(AtomicBool::new(false)),
            event: None,
            still: Arc::new(AtomicBool::new(false)),
            signal: None,
        })
    }
}

impl Drop for TestPattern {
    fn drop(&mut self) {
        if let Some(id) = self.signal.take() {
            signal_hook::low_level::unregister(id);
        }
    }
}

impl FrameSource for TestPattern {
    fn info(&self) -> StreamInfo {
        self.info
    }

    fn mode(&self) -> String {
        format!(
            "test pattern {}x{} at {} fps, JPEG quality {}",
            self.info.width, self.info.height, self.info.fps, self.quality
        )
    }

    fn want_raw(&mut self, yes: bool) {
        self.want_raw.store(yes, Ordering::Relaxed);
    }

    fn register(&mut self, registry: &Registry, token: Token) -> std::io::Result<()> {
        // An eventfd rather than a mio Waker: mio allows one Waker per
        // poll, and the loop's worker threads have it.
        let event = Arc::new(eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)?);
        registry.register(&mut SourceFd(&event.as_raw_fd()), token, Interest::READABLE)?;
        self.event = Some(event.clone());
        let (frame_tx, frame_rx) = sync_channel(BUFFERS);
        let (recycle_tx, recycle_rx) = sync_channel(BUFFERS);
        let (info, quality) = (self.info, self.quality);
        let want_raw = self.want_raw.clone();
        let still = self.still.clone();
        let flip = self.still.clone();
        // SAFETY: the handler only flips an atomic, which is
        // async-signal-safe.
        self.signal = Some(unsafe {
            signal_hook::low_level::register(signal_hook::consts::SIGUSR2, move || {
                flip.fetch_xor(true, Ordering::Relaxed);
            })
        }?);
        let worker = std::thread::Builder::new()
            .name("testpattern".into())
            .spawn(move || {
                run(
                    info, quality, &event, frame_tx, recycle_rx, &want_raw, &still,
                )
            })?;
        self.frames = Some(frame_rx);
        self.recycle = Some(recycle_tx);
        self.worker = Some(worker);
        Ok(())
    }

    fn ready(&mut self, sink: &mut dyn FnMut(CapturedFrame<'_>)) -> Result<()> {
        let (Some(frames), Some(recycle)) = (&self.frames, &self.recycle) else {
            return Ok(());
        };
        if let Some(event) = &self.event {
            let mut count = [0u8; 8];
            let _ = rustix::io::read(&**event, &mut count);
        }
        // At most the frames that exist: if sending a frame ever took longer
        // than the frame period, looping until the channel is empty would
        // never return to the event loop. The rest wake it again.
        for _ in 0..BUFFERS {
            match frames.try_recv() {
                Ok((buf, captured)) => {
                    let raw = buf.raw_size.and_then(|size| Raw::packed(&buf.raw, size));
                    sink(CapturedFrame {
                        jpeg: &buf.jpeg,
                        captured,
                        raw,
                    });
                    // Cannot block: at most BUFFERS buffers exist.
                    let _ = recycle.try_send(buf);
                }
                Err(TryRecvError::Empty) => return Ok(()),
                Err(TryRecvError::Disconnected) => {
                    let worker = self.worker.take().context("test pattern thread gone")?;
                    return match worker.join() {
                        Ok(Err(e)) => Err(e.context("test pattern")),
                        _ => Err(anyhow!("test pattern thread stopped")),
                    };
                }
            }
        }
        Ok(())
    }
}

fn run(
    info: StreamInfo,
    quality: u8,
    event: &OwnedFd,
    frames: SyncSender<(Frame, Mono)>,
    recycle: Receiver<Frame>,
    want_raw: &AtomicBool,
    still: &AtomicBool,
) -> Result<()> {
    let mut pattern = Pattern::new(usize::from(info.width), usize::from(info.height));
    let mut encoder = Encoder::new(quality)?;
    let mut free: Vec<Frame> = (0..BUFFERS).map(|_| Frame::default()).collect();
    let period = Duration::from_secs(1) / info.fps;
    // Frames are due on the exact 1/fps grid from `start`: adding the
    // rounded-down period would drift off the 90 kHz grid.
    let (mut start, mut k) = (Mono::now().whole_ms(), 0u64);
    let due = |start: Mono, k: u64| {
        Mono(start.0 + (u128::from(k) * 1_000_000_000 / u128::from(info.fps)) as u64)
    };
    let mut next = start;
    let mut n = 0u64;
    // What the ramp and the box have moved: frames not standing still.
    let mut moved = 0u64;
    loop {
        let now = Mono::now();
        if next > now {
            std::thread::sleep(next.saturating_sub(now));
        } else if now.saturating_sub(next) > period * 2 {
            // Far behind (machine suspended or overloaded): resynchronise
            // rather than send a burst.
            (start, k) = (now.whole_ms(), 0);
            next = start;
        }
        while let Ok(b) = recycle.try_recv() {
            free.push(b);
        }
        // No free buffer: the event loop is behind; skip this frame.
        if let Some(mut buf) = free.pop() {
            let wall = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            if !still.load(Ordering::Relaxed) {
                moved += 1;
            }
            pattern.render(n, moved, wall.as_millis() as u64);
            encoder.encode_i420(pattern.planes(), pattern.w, pattern.h, &mut buf.jpeg)?;
            buf.raw_size = None;
            if want_raw.load(Ordering::Relaxed) {
                // The pattern's size is a multiple of 8: its planes are
                // packed tight already.
                buf.raw.clear();
                for p in pattern.planes() {
                    buf.raw.extend_from_slice(p);
                }
                buf.raw_size = Some((pattern.w, pattern.h));
            } else if !buf.raw.is_empty() {
                buf.raw = Vec::new();
            }
            if frames.send((buf, next)).is_err() {
                return Ok(()); // the daemon is shutting down
            }
            rustix::io::write(event, &1u64.to_ne_bytes())?;
        }
        n += 1;
        k += 1;
        next = due(start, k);
    }
}

/// Cells of the clock strip: white, 32 bits, black.
pub const STRIP_CELLS: usize = 34;

/// Where the clock strip is in a `w` x `h` picture: its left edge, top,
/// and each cell's width and height (even, so chroma lines up); None if
/// the picture is too small for one.
pub fn strip_geometry(w: usize, h: usize) -> Option<(usize, usize, usize, usize)> {
    let cell_w = (w / STRIP_CELLS) & !1;
    let cell_h = (h / 40).max(8) & !1;
    if cell_w < 4 || h < 4 * cell_h {
        return None;
    }
    Some((
        ((w - cell_w * STRIP_CELLS) / 2) & !1,
        (h - cell_h) & !1,
        cell_w,
        cell_h,
    ))
}

/// The picture, in 4:2:0 planes.
struct Pattern {
    w: usize,
    h: usize,
    cw: usize,
    planes: [Vec<u8>; 3],
    /// One row of the colour bars per plane; the picture is redrawn from it
    /// each frame rather than copied from a stored background (which would
    /// cost a second full-size image in memory).
    bar_rows: [Vec<u8>; 3],
    bars_h: usize,
}

/// 75% colour bars (RGB 191 or 0) in JFIF's full-range BT.601 YCbCr, as a
/// JPEG holds them: white, yellow, cyan, green, magenta, red, blue, black.
pub const BARS: [(u8, u8, u8); 8] = [
    (191, 128, 128),
    (169, 32, 144),
    (134, 160, 32),
    (112, 65, 48),
    (79, 191, 208),
    (57, 96, 224),
    (22, 224, 112),
    (0, 128, 128),
];

/// 5x7 glyphs for digits, ':' and '.', one row per byte, bit 4 leftmost.
const GLYPHS: [[u8; 7]; 12] = [
    [0x0e, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0e],
    [0x04, 0x0c, 0x04, 0x04, 0x04, 0x04, 0x0e],
    [0x0e, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1f],
    [0x1f, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0e],
    [0x02, 0x06, 0x0a, 0x12, 0x1f, 0x02, 0x02],
    [0x1f, 0x10, 0x1e, 0x01, 0x01, 0x11, 0x0e],
    [0x06, 0x08, 0x10, 0x1e, 0x11, 0x11, 0x0e],
    [0x1f, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
    [0x0e, 0x11, 0x11, 0x0e, 0x11, 0x11, 0x0e],
    [0x0e, 0x11, 0x11, 0x0f, 0x01, 0x02, 0x0c],
    [0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x0c, 0x00],
    [0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x0c],
];

impl Pattern {
    fn new(w: usize, h: usize) -> Pattern {
        let [(_, _), (cw, ch), _] = i420_plane_sizes(w, h);
        let bar = |x: usize| BARS[x * 8 / w];
        let bar_rows = [
            (0..w).map(|x| bar(x).0).collect(),
            (0..cw).map(|x| bar((2 * x).min(w - 1)).1).collect(),
            (0..cw).map(|x| bar((2 * x).min(w - 1)).2).collect(),
        ];
        Pattern {
            w,
            h,
            cw,
            planes: [vec![0u8; w * h], vec![128u8; cw * ch], vec![128u8; cw * ch]],
            bar_rows,
            bars_h: (h * 2 / 3) & !1,
        }
    }

    fn planes(&self) -> [&[u8]; 3] {
        [&self.planes[0], &self.planes[1], &self.planes[2]]
    }

    /// Frame `n` with the ramp and the box where `moved` frames took them.
    fn render(&mut self, n: u64, moved: u64, utc_ms: u64) {
        let (w, h, cw) = (self.w, self.h, self.cw);
        // Colour bars on top; neutral chroma under them for the ramp.
        for (i, (p, row)) in self.planes.iter_mut().zip(&self.bar_rows).enumerate() {
            let (pw, bars) = if i == 0 {
                (w, self.bars_h)
            } else {
                (cw, self.bars_h / 2)
            };
            for r in p.chunks_exact_mut(pw).take(bars) {
                r.copy_from_slice(row);
            }
            if i > 0 {
                p[bars * pw..].fill(128);
            }
        }

        // A luma ramp scrolling left under the bars.
        let shift = (moved as usize * 8) % w;
        for y in self.bars_h..h {
            let row = &mut self.planes[0][y * w..(y + 1) * w];
            for (x, px) in row.iter_mut().enumerate() {
                *px = ((x + shift) % w * 255 / w) as u8;
            }
        }

        // A box bouncing off the edges, its colour going round the hue circle.
        let size = (h / 6).max(2) & !1;
        let bounce = |t: usize, span: usize| {
            let span = span.max(1);
            let t = t % (2 * span);
            if t < span { t } else { 2 * span - t }
        };
        let bx = bounce(moved as usize * 6, w.saturating_sub(size)) & !1;
        let by = bounce(moved as usize * 4, h.saturating_sub(size)) & !1;
        let angle = (moved % 120) as f32 * std::f32::consts::TAU / 120.0;
        let (u, v) = (128.0 + 100.0 * angle.cos(), 128.0 + 100.0 * angle.sin());
        self.fill(bx, by, size, size, (179, u as u8, v as u8));

        // Frame number and UTC time of day, e.g. "000042 12:34:56.789".
        let (s, ms) = (utc_ms / 1000, utc_ms % 1000);
        let mut text = [0u8; 19];
        let digits = |out: &mut [u8], mut v: u64| {
            for c in out.iter_mut().rev() {
                *c = (v % 10) as u8;
                v /= 10;
            }
        };
        digits(&mut text[0..6], n % 1_000_000);
        text[6] = 255; // blank
        digits(&mut text[7..9], s / 3600 % 24);
        text[9] = 10;
        digits(&mut text[10..12], s / 60 % 60);
        text[12] = 10;
        digits(&mut text[13..15], s % 60);
        text[15] = 11;
        digits(&mut text[16..19], ms);
        let scale = (h / 120).max(1);
        let margin = scale * 2;
        let text_w = (text.len() * 6 + 1) * scale;
        self.fill(
            margin & !1,
            margin & !1,
            text_w + 2 * scale,
            9 * scale,
            (0, 128, 128),
        );
        for (i, &c) in text.iter().enumerate() {
            let Some(glyph) = GLYPHS.get(usize::from(c)) else {
                continue;
            };
            for (gy, bits) in glyph.iter().enumerate() {
                for gx in 0..5 {
                    if bits >> (4 - gx) & 1 == 1 {
                        let x = margin + (1 + i * 6 + gx) * scale;
                        let y = margin + (1 + gy) * scale;
                        self.fill_luma(x, y, scale, scale, 255);
                    }
                }
            }
        }
        self.clock_strip(utc_ms);
    }

    /// The capture's wall-clock time where a program can read it from any
    /// decoded frame: a strip along the bottom of [`STRIP_CELLS`] cells, a
    /// white one, the 32 low bits of the UTC time in milliseconds (most
    /// significant first; white 1, black 0), a black one. A page compares
    /// it with its own clock for the latency glass to glass
    /// (scripts/bench-latency); blocks this large survive any encoder.
    fn clock_strip(&mut self, utc_ms: u64) {
        let Some((x0, y, cell_w, cell_h)) = strip_geometry(self.w, self.h) else {
            return;
        };
        for i in 0..STRIP_CELLS {
            let on = match i {
                0 => true,
                i if i == STRIP_CELLS - 1 => false,
                b => utc_ms >> (32 - b) & 1 == 1,
            };
            let luma = if on { 235 } else { 16 };
            self.fill(x0 + i * cell_w, y, cell_w, cell_h, (luma, 128, 128));
        }
    }

    /// Fills a rectangle (clipped), chroma at half resolution.
    fn fill(&mut self, x: usize, y: usize, rw: usize, rh: usize, (yy, u, v): (u8, u8, u8)) {
        self.fill_luma(x, y, rw, rh, yy);
        let (cw, ch) = (self.cw, self.planes[1].len() / self.cw);
        let (x0, y0) = (x / 2, y / 2);
        let (x1, y1) = (((x + rw) / 2).min(cw), ((y + rh) / 2).min(ch));
        for cy in y0..y1 {
            if x0 < x1 {
                self.planes[1][cy * cw + x0..cy * cw + x1].fill(u);
                self.planes[2][cy * cw + x0..cy * cw + x1].fill(v);
            }
        }
    }

    fn fill_luma(&mut self, x: usize, y: usize, rw: usize, rh: usize, value: u8) {
        let (x1, y1) = ((x + rw).min(self.w), (y + rh).min(self.h));
        for py in y.min(y1)..y1 {
            if x < x1 {
                self.planes[0][py * self.w + x..py * self.w + x1].fill(value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_jfif_of_75_percent_rgb() {
        let rgb = [
            (1, 1, 1),
            (1, 1, 0),
            (0, 1, 1),
            (0, 1, 0),
            (1, 0, 1),
            (1, 0, 0),
            (0, 0, 1),
            (0, 0, 0),
        ];
        for (&(y, u, v), (r, g, b)) in BARS.iter().zip(rgb) {
            let [r, g, b] = [r, g, b].map(|c| f64::from(c) * 191.25);
            let want = [
                0.299 * r + 0.587 * g + 0.114 * b,
                128.0 - 0.168_736 * r - 0.331_264 * g + 0.5 * b,
                128.0 + 0.5 * r - 0.418_688 * g - 0.081_312 * b,
            ];
            for (got, want) in [y, u, v].into_iter().zip(want) {
                assert!(
                    (f64::from(got) - want).abs() <= 1.0,
                    "{got} against {want:.1}"
                );
            }
        }
    }

    #[test]
    fn frames_differ_and_encode() {
        let mut p = Pattern::new(320, 240);
        p.render(0, 0, 0);
        let a = p.planes[0].clone();
        p.render(1, 1, 40);
        assert_ne!(a, p.planes[0], "the picture moves");
        // Tiny and odd-ish sizes must not panic (clipping).
        for (w, h) in [(16, 16), (18, 2000), (2000, 18)] {
            let mut p = Pattern::new(w, h);
            for n in 0..300 {
                p.render(n, n, n * 33);
            }
        }
    }

    #[test]
    fn the_clock_strip_reads_back_after_jpeg() {
        // As a page reads it: the middle of each cell's middle row, the
        // threshold halfway between the white and the black cell.
        let (w, h) = (1280, 720);
        let mut p = Pattern::new(w, h);
        let utc_ms = 1_764_400_000_123u64;
        p.render(7, 7, utc_ms);
        let mut jpeg = Vec::new();
        Encoder::new(80)
            .unwrap()
            .encode_i420(p.planes(), w, h, &mut jpeg)
            .unwrap();
        let img = turbojpeg::decompress(&jpeg, turbojpeg::PixelFormat::GRAY).unwrap();
        let (x0, y, cw, ch) = strip_geometry(w, h).unwrap();
        let luma =
            |i: usize| i32::from(img.pixels[(y + ch / 2) * img.pitch + x0 + i * cw + cw / 2]);
        let threshold = (luma(0) + luma(STRIP_CELLS - 1)) / 2;
        assert!(luma(0) - luma(STRIP_CELLS - 1) > 150);
        let read = (1..STRIP_CELLS - 1).fold(0u64, |v, i| v << 1 | u64::from(luma(i) > threshold));
        assert_eq!(read, utc_ms & 0xffff_ffff);
    }
}
