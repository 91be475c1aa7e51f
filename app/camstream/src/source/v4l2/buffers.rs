//! A streaming device's buffers: allocated by the driver, mapped once,
//! queued, dequeued as frames fill them, read in place (no copy), queued
//! again; streaming stops and they are unmapped when dropped.

use std::ffi::c_void;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use rustix::ioctl::{Ioctl, IoctlOutput, Opcode, ioctl};
use rustix::mm::{MapFlags, ProtFlags, mmap, munmap};

use super::device::{Device, update};
use super::m2m::Dmabuf;
use super::sys::*;
use crate::clock::Mono;

/// STREAMON/STREAMOFF: an `int` buffer type passed by pointer.
pub(super) struct BufTypeArg<const OPCODE: Opcode>(pub(super) u32);

// SAFETY: STREAMON and STREAMOFF take a pointer to the 4-byte buffer type
// `as_ptr` gives, which the kernel only reads; nothing comes back.
unsafe impl<const OPCODE: Opcode> Ioctl for BufTypeArg<OPCODE> {
    type Output = ();
    const IS_MUTATING: bool = false;
    fn opcode(&self) -> Opcode {
        OPCODE
    }
    fn as_ptr(&mut self) -> *mut c_void {
        (&mut self.0 as *mut u32).cast()
    }
    unsafe fn output_from_ptr(_: IoctlOutput, _: *mut c_void) -> rustix::io::Result<()> {
        Ok(())
    }
}

fn buffer(index: u32) -> v4l2_buffer {
    let mut b: v4l2_buffer = zeroed();
    b.index = index;
    b.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    b.memory = V4L2_MEMORY_MMAP;
    b
}

/// A dequeued buffer: read `data`, then give it back with [`Buffers::queue`].
#[derive(Debug, Clone, Copy)]
pub struct Dequeued {
    pub index: u32,
    pub bytesused: usize,
    /// When the sensor captured the frame, if the driver stamps with
    /// CLOCK_MONOTONIC (all current drivers do).
    pub captured: Option<Mono>,
    /// The driver flagged the frame as corrupt (V4L2_BUF_FLAG_ERROR).
    pub error: bool,
    /// Frames the driver dropped before this one (sequence-number gap).
    pub dropped: u32,
}

/// The mapped buffers of a streaming device. Dropping it stops streaming and
/// unmaps; the device must outlive it.
pub struct Buffers {
    maps: Vec<(NonNull<u8>, usize)>,
    /// Each buffer as a DMABUF descriptor (None: the driver could not),
    /// made when a hardware encoder may read them. A descriptor holds its
    /// buffer's memory, whatever order they are closed in.
    exported: Vec<Option<OwnedFd>>,
    fd: RawFd,
    streaming: bool,
    next_sequence: Option<u32>,
    /// Mapped writable (`data_mut`).
    writable: bool,
}

impl Buffers {
    /// Allocates `count` driver buffers, maps them, queues them and starts
    /// streaming.
    pub fn start(dev: &Device, count: u32) -> io::Result<Buffers> {
        let mut req: v4l2_requestbuffers = zeroed();
        req.count = count;
        req.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        req.memory = V4L2_MEMORY_MMAP;
        // SAFETY: VIDIOC_REQBUFS takes a v4l2_requestbuffers, as `update` asks.
        unsafe { update::<VIDIOC_REQBUFS, _>(dev.fd(), &mut req)? };
        if req.count < 2 {
            return Err(io::Error::other(format!(
                "the driver gave {} buffer(s); streaming needs at least 2",
                req.count
            )));
        }
        let mut buffers = Buffers {
            maps: Vec::new(),
            exported: Vec::new(),
            fd: dev.raw_fd(),
            streaming: false,
            next_sequence: None,
            // videobuf2 says what its buffers support (other drivers leave
            // this 0), and gives them to this descriptor alone:
            // v4l2loopback's buffers are every reader's, not ours to change.
            writable: req.capabilities & V4L2_BUF_CAP_SUPPORTS_MMAP != 0,
        };
        for index in 0..req.count {
            let mut b = buffer(index);
            // SAFETY: VIDIOC_QUERYBUF takes a v4l2_buffer, as `update` asks.
            unsafe { update::<VIDIOC_QUERYBUF, _>(dev.fd(), &mut b)? };
            let len = b.length as usize;
            // Writable where they are ours alone, so a frame can be changed
            // where it lies (made full range) rather than copied.
            let map = |prot| {
                // SAFETY: maps the buffer the driver just described;
                // unmapped in Buffers's Drop.
                unsafe {
                    mmap(
                        std::ptr::null_mut(),
                        len,
                        prot,
                        MapFlags::SHARED,
                        dev.fd(),
                        u64::from(b.m.offset),
                    )
                }
            };
            let ptr = match buffers.writable {
                true => match map(ProtFlags::READ | ProtFlags::WRITE) {
                    Ok(ptr) => ptr,
                    Err(_) => {
                        buffers.writable = false;
                        map(ProtFlags::READ)?
                    }
                },
                false => map(ProtFlags::READ)?,
            };
            buffers.maps.push((NonNull::new(ptr.cast()).unwrap(), len));
        }
        for index in 0..req.count {
            buffers.queue(dev.fd(), index)?;
        }
        // SAFETY: a BufTypeArg is STREAMON's argument (its impl above).
        unsafe {
            ioctl(
                dev.fd(),
                BufTypeArg::<VIDIOC_STREAMON>(V4L2_BUF_TYPE_VIDEO_CAPTURE),
            )?
        };
        buffers.streaming = true;
        Ok(buffers)
    }

    pub fn queue(&mut self, fd: BorrowedFd<'_>, index: u32) -> io::Result<()> {
        let mut b = buffer(index);
        // SAFETY: VIDIOC_QBUF takes a v4l2_buffer, as `update` asks.
        unsafe { update::<VIDIOC_QBUF, _>(fd, &mut b) }
    }

    /// The next filled buffer, or None when none is ready.
    pub fn dequeue(&mut self, fd: BorrowedFd<'_>) -> io::Result<Option<Dequeued>> {
        let mut b = buffer(0);
        // SAFETY: VIDIOC_DQBUF takes a v4l2_buffer, as `update` asks.
        match unsafe { update::<VIDIOC_DQBUF, _>(fd, &mut b) } {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) => return Err(e),
        }
        let captured = (b.flags & V4L2_BUF_FLAG_TIMESTAMP_MASK
            == V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC
            && (b.timestamp.tv_sec != 0 || b.timestamp.tv_usec != 0))
            .then(|| {
                Mono(b.timestamp.tv_sec as u64 * 1_000_000_000 + b.timestamp.tv_usec as u64 * 1000)
            });
        let dropped = self
            .next_sequence
            .map_or(0, |n| b.sequence.wrapping_sub(n))
            .min(1_000_000);
        self.next_sequence = Some(b.sequence.wrapping_add(1));
        let len = self.maps.get(b.index as usize).map_or(0, |m| m.1);
        Ok(Some(Dequeued {
            index: b.index,
            bytesused: (b.bytesused as usize).min(len),
            captured,
            error: b.flags & V4L2_BUF_FLAG_ERROR != 0,
            dropped,
        }))
    }

    /// How many buffers the driver gave.
    pub fn count(&self) -> u32 {
        self.maps.len() as u32
    }

    /// Makes each buffer a DMABUF descriptor another device can read
    /// (VIDIOC_EXPBUF), once; a driver that cannot is asked once.
    pub fn export(&mut self) {
        if !self.exported.is_empty() {
            return;
        }
        // SAFETY: the device fd outlives the buffers.
        let dev = unsafe { BorrowedFd::borrow_raw(self.fd) };
        for index in 0..self.count() {
            let mut e: v4l2_exportbuffer = zeroed();
            e.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
            e.index = index;
            e.flags = rustix::fs::OFlags::CLOEXEC.bits();
            // SAFETY: VIDIOC_EXPBUF takes a v4l2_exportbuffer, as `update` asks.
            let fd = match unsafe { update::<VIDIOC_EXPBUF, _>(dev, &mut e) } {
                // SAFETY: the kernel just made this descriptor, ours alone.
                Ok(()) => Some(unsafe { OwnedFd::from_raw_fd(e.fd) }),
                Err(err) => {
                    log::debug!("buffer {index} not exported: {err}");
                    None
                }
            };
            self.exported.push(fd);
        }
    }

    /// A dequeued buffer as [`Buffers::export`] made it, if it could.
    pub fn dmabuf(&self, d: &Dequeued) -> Option<Dmabuf<'_>> {
        let fd = self.exported.get(d.index as usize)?.as_ref()?;
        Some(Dmabuf {
            fd: fd.as_fd(),
            index: d.index,
            len: self.maps[d.index as usize].1,
        })
    }

    /// The bytes of a dequeued buffer, to change where they lie; None if
    /// the driver maps its buffers read-only.
    pub fn data_mut(&mut self, d: &Dequeued) -> Option<&mut [u8]> {
        if !self.writable {
            return None;
        }
        let (ptr, len) = self.maps[d.index as usize];
        // SAFETY: as in `data`; mapped writable, and `&mut self` keeps any
        // other view of it from being taken meanwhile.
        Some(unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), d.bytesused.min(len)) })
    }

    /// The bytes of a dequeued buffer.
    pub fn data(&self, d: &Dequeued) -> &[u8] {
        let (ptr, len) = self.maps[d.index as usize];
        // SAFETY: the mapping lives as long as `self`; the driver does not
        // write a buffer while it is dequeued.
        unsafe { std::slice::from_raw_parts(ptr.as_ptr(), d.bytesused.min(len)) }
    }
}

impl Drop for Buffers {
    fn drop(&mut self) {
        // SAFETY: the device fd outlives the buffers (the source drops
        // them first); on an unplugged device these fail harmlessly.
        let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
        if self.streaming {
            // SAFETY: a BufTypeArg is STREAMOFF's argument (its impl above).
            let _ = unsafe {
                ioctl(
                    fd,
                    BufTypeArg::<VIDIOC_STREAMOFF>(V4L2_BUF_TYPE_VIDEO_CAPTURE),
                )
            };
        }
        for &(ptr, len) in &self.maps {
            // SAFETY: each mapping came from mmap in `start` with this length
            // and is unmapped once; the slices `data` lends borrow `self`, so
            // none outlives it.
            let _ = unsafe { munmap(ptr.as_ptr().cast(), len) };
        }
        let mut req: v4l2_requestbuffers = zeroed();
        req.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        req.memory = V4L2_MEMORY_MMAP;
        // SAFETY: VIDIOC_REQBUFS takes a v4l2_requestbuffers, as `update` asks.
        let _ = unsafe { update::<VIDIOC_REQBUFS, _>(fd, &mut req) };
    }
}
