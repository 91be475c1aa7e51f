//! A worker thread that makes a stream of its own out of main-stream
//! frames (the sub-stream's JPEG encoder, the H.264 encoder): it takes at
//! most one frame at a time (a frame offered while it is busy is not taken:
//! the main stream never waits) and wakes the event loop when one is done.
//! The frame's bytes go in and out in buffers handed back and forth, so a
//! frame costs no allocation once they have grown.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Result;

use crate::clock::Mono;

/// A main-stream frame as a worker takes it.
#[derive(Debug, Clone, Copy)]
pub enum Picture<'a> {
    /// The frame as the fan-out has it.
    Jpeg(&'a [u8]),
    /// The camera's raw picture before its JPEG encode, where the source
    /// had one: 4:2:0 planes packed tight (Y, U, V), `size` even.
    I420 {
        data: &'a [u8],
        size: (usize, usize),
    },
}

/// What a worker runs: one main-stream frame in, its own frame out.
pub trait Encode: Send + 'static {
    /// Writes the frame made of `pic` into `out` (emptied first); `key`:
    /// a key frame is asked for (a client of an H.264 stream joined or lost
    /// frames). An empty `out` is a frame the encoder skipped.
    fn encode(&mut self, pic: Picture<'_>, key: bool, out: &mut Vec<u8>) -> Result<()>;

    /// No one watches any more: memory kept only for the next frame may
    /// go (the next `encode` starts afresh).
    fn rest(&mut self) {}
}

impl Encode for Box<dyn Encode> {
    fn encode(&mut self, pic: Picture<'_>, key: bool, out: &mut Vec<u8>) -> Result<()> {
        (**self).encode(pic, key, out)
    }
    fn rest(&mut self) {
        (**self).rest()
    }
}

struct Job {
    input: Vec<u8>,
    /// `input` is a raw picture of this size (else a JPEG).
    i420: Option<(usize, usize)>,
    out: Vec<u8>,
    captured: Mono,
    key: bool,
    /// Not a frame: `Encode::rest`, and no answer.
    rest: bool,
}

pub struct Done {
    /// The frame (`out`), or why there is none.
    pub made: Result<(), String>,
    pub out: Vec<u8>,
    pub captured: Mono,
    /// The buffer the job came in, back for the next one.
    spare: Vec<u8>,
    /// CPU time the encode took on the worker's thread.
    pub took: Duration,
}

pub struct Worker {
    jobs: SyncSender<Job>,
    done: Receiver<Done>,
    busy: bool,
    spare: Vec<u8>,
    out: Vec<u8>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts `enc` on a thread called `name`, which wakes `waker` after
    /// each frame.
    pub fn start<E: Encode>(mut enc: E, name: &str, waker: Arc<mio::Waker>) -> Result<Worker> {
        let (jobs, rx) = sync_channel::<Job>(1);
        let (tx, done) = channel::<Done>();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                for mut job in rx {
                    if job.rest {
                        enc.rest();
                        trim_heap();
                        continue;
                    }
                    let t0 = thread_cpu();
                    let pic = match job.i420 {
                        None => Picture::Jpeg(&job.input),
                        Some(size) => Picture::I420 {
                            data: &job.input,
                            size,
                        },
                    };
                    let made = enc
                        .encode(pic, job.key, &mut job.out)
                        .map_err(|e| format!("{e:#}"));
                    let took = thread_cpu().saturating_sub(t0);
                    let d = Done {
                        made,
                        out: job.out,
                        captured: job.captured,
                        spare: job.input,
                        took,
                    };
                    if tx.send(d).is_err() || waker.wake().is_err() {
                        return;
                    }
                }
            })?;
        Ok(Worker {
            jobs,
            done,
            busy: false,
            spare: Vec::new(),
            out: Vec::new(),
            thread: Some(thread),
        })
    }

    pub fn busy(&self) -> bool {
        self.busy
    }

    /// Hands `jpeg` over (copied into the spare buffer), unless a frame is
    /// being made.
    pub fn offer(&mut self, jpeg: &[u8], captured: Mono, key: bool) -> bool {
        if self.busy {
            return false;
        }
        let mut buf = std::mem::take(&mut self.spare);
        buf.clear();
        buf.extend_from_slice(jpeg);
        self.send(buf, None, captured, key)
    }

    /// Hands a raw picture of `size` over, in `buf` (swapped for the spare
    /// buffer: no copy), unless a frame is being made.
    pub fn offer_i420(
        &mut self,
        buf: &mut Vec<u8>,
        size: (usize, usize),
        captured: Mono,
        key: bool,
    ) -> bool {
        if self.busy {
            return false;
        }
        let input = std::mem::replace(buf, std::mem::take(&mut self.spare));
        self.send(input, Some(size), captured, key)
    }

    fn send(
        &mut self,
        input: Vec<u8>,
        i420: Option<(usize, usize)>,
        captured: Mono,
        key: bool,
    ) -> bool {
        let job = Job {
            input,
            i420,
            out: std::mem::take(&mut self.out),
            captured,
            key,
            rest: false,
        };
        match self.jobs.try_send(job) {
            Ok(()) => {
                self.busy = true;
                true
            }
            Err(_) => false,
        }
    }

    /// Asks the encoder to let go of its memory (`Encode::rest`) once it
    /// is done with its frame; false if it is busy (ask again later).
    pub fn rest(&mut self) -> bool {
        if self.busy {
            return false;
        }
        let job = Job {
            input: Vec::new(),
            i420: None,
            out: Vec::new(),
            captured: Mono(0),
            key: false,
            rest: true,
        };
        // A raw picture's buffer is a megabyte or more.
        self.spare = Vec::new();
        self.jobs.try_send(job).is_ok()
    }

    /// The frame it finished, if it has; give its `out` back with
    /// [`Worker::give_back`] once published.
    pub fn take(&mut self) -> Option<Done> {
        let mut d = self.done.try_recv().ok()?;
        self.busy = false;
        self.spare = std::mem::take(&mut d.spare);
        Some(d)
    }

    /// The output buffer of a frame taken, for the next one.
    pub fn give_back(&mut self, out: Vec<u8>) {
        self.out = out;
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop after its frame.
        let (closed, _) = sync_channel(1);
        drop(std::mem::replace(&mut self.jobs, closed));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread's malloc arena keeps what an encoder freed: the free pages
/// go back (glibc trims every arena).
fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: no argument but the padding to keep; it only walks malloc's
    // own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}
