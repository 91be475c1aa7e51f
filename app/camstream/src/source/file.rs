//! `file:PATH`: a concatenated MJPEG stream (what `ffmpeg -f mjpeg` writes),
//! read frame by frame at the configured rate and looped. Only a window of
//! the file is held in memory, so long clips cost no more than one frame.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use camstream_rtp::jpeg::{self, JpegError};
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
    timerfd_settime,
};

use super::{CapturedFrame, FrameSource, StreamInfo};
use crate::clock::Mono;

/// A frame larger than this without an EOI means the file is not MJPEG.
const MAX_FRAME: usize = 64 << 20;
const READ_CHUNK: usize = 256 << 10;

pub struct FileSource {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    frames_this_pass: u64,
    /// What was skipped, reported once a frame shows the file is MJPEG
    /// (a file with no frame at all is one error, not a warning too).
    junk: Option<&'static str>,
    warned_junk: bool,
    timer: FrameTimer,
    info: StreamInfo,
}

/// A periodic CLOCK_MONOTONIC timer firing `fps` times a second. The kernel
/// keeps the phase, so the rate does not drift with processing time, and
/// frames are stamped with when their tick was due: evenly spaced RTP
/// timestamps whatever the scheduling delay.
pub struct FrameTimer {
    fd: OwnedFd,
    start: Mono,
    fps: u32,
    ticks: u64,
}

impl FrameTimer {
    pub fn new(fps: u32) -> Result<FrameTimer> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        let period = Duration::from_secs(1) / fps;
        let spec = Itimerspec {
            // fps = 1 is a whole second: tv_nsec alone would be 0, which
            // disarms the interval.
            it_interval: Timespec {
                tv_sec: period.as_secs() as _,
                tv_nsec: period.subsec_nanos().into(),
            },
            it_value: Timespec {
                tv_sec: 0,
                tv_nsec: 1,
            },
        };
        let start = Mono::now().whole_ms();
        timerfd_settime(&fd, TimerfdTimerFlags::empty(), &spec)?;
        Ok(FrameTimer {
            fd,
            start,
            fps,
            ticks: 0,
        })
    }

    /// Ticks since the last call (0 if none), and when the latest was due.
    pub fn expired(&mut self) -> (u64, Mono) {
        let mut b = [0u8; 8];
        let n = match rustix::io::read(&self.fd, &mut b) {
            Ok(8) => u64::from_ne_bytes(b),
            _ => 0,
        };
        self.ticks += n;
        // Due times on the exact 1/fps grid (the timer's period is rounded
        // down to whole nanoseconds; multiplying it would drift).
        let k = u128::from(self.ticks.saturating_sub(1));
        let due = Mono(self.start.0 + (k * 1_000_000_000 / u128::from(self.fps)) as u64);
        (n, due)
    }
}

impl FileSource {
    fn new(path: PathBuf, file: File, fps: u32) -> Result<FileSource> {
        Ok(FileSource {
            path,
            file,
            buf: Vec::new(),
            start: 0,
            end: 0,
            eof: false,
            frames_this_pass: 0,
            junk: None,
            warned_junk: false,
            timer: FrameTimer::new(fps)?,
            info: StreamInfo {
                width: 0,
                height: 0,
                fps,
            },
        })
    }

    pub fn open(path: &Path, fps: u32) -> Result<FileSource> {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let mut s = FileSource::new(path.to_owned(), file, fps)?;
        // The first frame decides the stream's size, and must be one we can
        // send (as it is, or repaired by the normalizer).
        let (a, b) = s.next_frame()?;
        let frame = &s.buf[a..b];
        let size = match jpeg::parse(frame) {
            Ok(j) => Some((j.width, j.height)),
            Err(e) if e.remedy().is_some() => jpeg::dimensions(frame),
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "{}: first frame cannot be streamed as RTP/JPEG",
                        path.display()
                    )
                });
            }
        };
        let (w, h) = size.context("first frame has no size")?;
        // Sizes that are not multiples of 8 are cropped to them.
        s.info.width = w & !7;
        s.info.height = h & !7;
        // Deliver that frame first too.
        s.start = a;
        s.frames_this_pass = 0;
        Ok(s)
    }

    /// Reads more of the file into the window; false at end of file.
    fn fill(&mut self) -> Result<bool> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            if self.buf.len() >= MAX_FRAME {
                bail!(
                    "{}: no JPEG end marker within {} MiB",
                    self.path.display(),
                    MAX_FRAME >> 20
                );
            }
            self.buf
                .resize((self.buf.len() + READ_CHUNK).min(MAX_FRAME), 0);
        }
        let n = self
            .file
            .read(&mut self.buf[self.end..])
            .with_context(|| format!("cannot read {}", self.path.display()))?;
        self.end += n;
        Ok(n > 0)
    }

    fn rewind(&mut self) -> Result<()> {
        if self.frames_this_pass == 0 {
            bail!("{}: no JPEG frames in the file", self.path.display());
        }
        self.file.seek(SeekFrom::Start(0))?;
        (self.start, self.end, self.eof, self.frames_this_pass) = (0, 0, false, 0);
        Ok(())
    }

    fn junk(&mut self, what: &'static str) {
        self.junk.get_or_insert(what);
    }

    /// The byte range of the next frame in `buf`, looping at end of file.
    fn next_frame(&mut self) -> Result<(usize, usize)> {
        loop {
            let data = &self.buf[self.start..self.end];
            // Frames start at SOI; anything before it is junk.
            match memchr_soi(data) {
                Some(0) => {}
                Some(i) => {
                    self.start += i;
                    self.junk("bytes between frames");
                    continue;
                }
                None => {
                    // Keep a trailing 0xFF: it may begin the next SOI.
                    let keep = usize::from(data.last() == Some(&0xff));
                    if data.len() > keep {
                        self.junk("bytes between frames");
                    }
                    self.start = self.end - keep;
                    if self.eof || !self.fill()? {
                        self.eof = true;
                        self.rewind()?;
                    }
                    continue;
                }
            }
            match jpeg::frame_len(data) {
                Ok(n) => {
                    let range = (self.start, self.start + n);
                    self.start += n;
                    self.frames_this_pass += 1;
                    if let Some(what) = self.junk.take().filter(|_| !self.warned_junk) {
                        log::warn!("{}: skipping {what} (warned once)", self.path.display());
                        self.warned_junk = true;
                    }
                    return Ok(range);
                }
                Err(JpegError::Truncated) if !self.eof => {
                    if !self.fill()? {
                        self.eof = true;
                    }
                }
                Err(JpegError::Truncated) => {
                    self.junk("a truncated frame at the end of the file");
                    self.rewind()?;
                }
                Err(_) => {
                    // Not a frame after all: look for the next SOI.
                    self.start += 2;
                    self.junk("a malformed frame");
                }
            }
        }
    }
}

fn memchr_soi(data: &[u8]) -> Option<usize> {
    data.windows(2).position(|w| w == [0xff, 0xd8])
}

impl FrameSource for FileSource {
    fn info(&self) -> StreamInfo {
        self.info
    }

    fn mode(&self) -> String {
        format!(
            "MJPEG file {}, {}x{} at {} fps, looped",
            self.path.display(),
            self.info.width,
            self.info.height,
            self.info.fps
        )
    }

    fn register(&mut self, registry: &Registry, token: Token) -> std::io::Result<()> {
        registry.register(
            &mut SourceFd(&self.timer.fd.as_raw_fd()),
            token,
            Interest::READABLE,
        )
    }

    fn ready(&mut self, sink: &mut dyn FnMut(CapturedFrame<'_>)) -> Result<()> {
        let (ticks, captured) = self.timer.expired();
        if ticks == 0 {
            return Ok(());
        }
        if ticks > 1 {
            log::debug!("file source: {} frame periods missed", ticks - 1);
        }
        let (a, b) = self.next_frame()?;
        sink(CapturedFrame {
            jpeg: &self.buf[a..b],
            captured,
            raw: None,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(fill: u8) -> Vec<u8> {
        // SOI, a COM segment, SOS header, scan, EOI: enough for frame_len.
        let mut f = vec![0xff, 0xd8, 0xff, 0xfe, 0, 3, fill, 0xff, 0xda, 0, 2];
        f.extend_from_slice(&[fill; 1000]);
        f.extend_from_slice(&[0xff, 0xd9]);
        f
    }

    fn source_over(bytes: &[u8]) -> FileSource {
        let path = std::env::temp_dir().join(format!(
            "camstream-file-test-{}-{}",
            std::process::id(),
            bytes.len()
        ));
        std::fs::write(&path, bytes).unwrap();
        let file = File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        FileSource::new(path, file, 30).unwrap()
    }

    #[test]
    fn splits_skips_junk_and_loops() {
        let mut bytes = frame(1);
        bytes.extend_from_slice(b"junk");
        bytes.extend_from_slice(&frame(2));
        bytes.extend_from_slice(&frame(3)[..500]); // truncated tail
        let mut s = source_over(&bytes);
        let mut got = Vec::new();
        for _ in 0..5 {
            let (a, b) = s.next_frame().unwrap();
            got.push((s.buf[a + 6], b - a));
        }
        let n = frame(1).len();
        assert_eq!(got, [(1, n), (2, n), (1, n), (2, n), (1, n)]);
    }

    #[test]
    fn a_file_without_frames_is_an_error() {
        let mut s = source_over(b"not a jpeg at all");
        let e = s.next_frame().unwrap_err().to_string();
        assert!(e.contains("no JPEG frames"), "{e}");
    }
}
