//! One queue of a memory-to-memory device (OUTPUT: raw frames in;
//! CAPTURE: coded frames out), single- or multi-planar as the driver's
//! API is: its own buffers mapped once (MMAP), or slots for another
//! device's buffers (DMABUF: a camera's, read by the encoder in place);
//! streaming stops and they are unmapped when it is dropped.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::ptr::NonNull;

use rustix::ioctl::ioctl;
use rustix::mm::{MapFlags, ProtFlags, mmap, munmap};

use super::super::buffers::BufTypeArg;
use super::super::device::{Device, update};
use super::super::sys::*;

/// A buffer the driver handed back.
#[derive(Debug, Clone, Copy)]
pub struct Done {
    pub index: u32,
    /// Where its bytes start and how many there are.
    pub offset: usize,
    pub len: usize,
    pub flags: u32,
}

pub struct Queue {
    type_: u32,
    mplane: bool,
    memory: u32,
    count: u32,
    /// MMAP buffers' mappings (none for DMABUF).
    maps: Vec<(NonNull<u8>, usize)>,
    fd: RawFd,
    streaming: bool,
}

impl Queue {
    /// Asks for `count` MMAP buffers of `type_` and maps them.
    pub fn request(dev: &Device, type_: u32, mplane: bool, count: u32) -> io::Result<Queue> {
        let mut q = Queue::slots(dev, type_, mplane, V4L2_MEMORY_MMAP, count)?;
        for index in 0..q.count {
            let mut plane: v4l2_plane = zeroed();
            let mut b = q.buffer(index, &mut plane);
            // SAFETY: VIDIOC_QUERYBUF takes a v4l2_buffer; a multi-planar
            // one points at `plane`, one entry long, which outlives the call.
            unsafe { update::<VIDIOC_QUERYBUF, _>(dev.fd(), &mut b)? };
            let (len, offset) = if mplane {
                // SAFETY: MMAP buffers report their offset in mem_offset.
                (
                    plane.length as usize,
                    u64::from(unsafe { plane.m.mem_offset }),
                )
            } else {
                // SAFETY: MMAP buffers report their offset in m.offset.
                (b.length as usize, u64::from(unsafe { b.m.offset }))
            };
            // SAFETY: maps the buffer the driver just described; unmapped
            // in Drop.
            let ptr = unsafe {
                mmap(
                    std::ptr::null_mut(),
                    len,
                    ProtFlags::READ | ProtFlags::WRITE,
                    MapFlags::SHARED,
                    dev.fd(),
                    offset,
                )?
            };
            q.maps.push((NonNull::new(ptr.cast()).unwrap(), len));
        }
        Ok(q)
    }

    /// Asks for `count` slots for DMABUF buffers (exactly: each of the
    /// camera's buffers keeps its slot, and its mapping in the driver).
    pub fn request_dmabuf(dev: &Device, type_: u32, mplane: bool, count: u32) -> io::Result<Queue> {
        let q = Queue::slots(dev, type_, mplane, V4L2_MEMORY_DMABUF, count)?;
        if q.count != count {
            return Err(io::Error::other(format!(
                "the driver gave {} slots for {count} buffers",
                q.count
            )));
        }
        Ok(q)
    }

    fn slots(dev: &Device, type_: u32, mplane: bool, memory: u32, count: u32) -> io::Result<Queue> {
        let mut req: v4l2_requestbuffers = zeroed();
        req.count = count;
        req.type_ = type_;
        req.memory = memory;
        // SAFETY: VIDIOC_REQBUFS takes a v4l2_requestbuffers, as `update` asks.
        unsafe { update::<VIDIOC_REQBUFS, _>(dev.fd(), &mut req)? };
        if req.count == 0 {
            return Err(io::Error::other("the driver gave no buffers"));
        }
        Ok(Queue {
            type_,
            mplane,
            memory,
            count: req.count,
            maps: Vec::new(),
            fd: dev.raw_fd(),
            streaming: false,
        })
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    pub fn len(&self, index: u32) -> usize {
        self.maps[index as usize].1
    }

    /// A v4l2_buffer for `index`; multi-planar, it points at `plane`.
    fn buffer(&self, index: u32, plane: &mut v4l2_plane) -> v4l2_buffer {
        let mut b: v4l2_buffer = zeroed();
        b.index = index;
        b.type_ = self.type_;
        b.memory = self.memory;
        if self.mplane {
            b.length = 1;
            b.m.planes = (plane as *mut v4l2_plane).cast();
        }
        b
    }

    /// A buffer to write into before it is queued.
    pub fn bytes_mut(&mut self, index: u32) -> &mut [u8] {
        let (ptr, len) = self.maps[index as usize];
        // SAFETY: the mapping lives as long as `self` and is writable; the
        // driver does not touch a buffer that is not queued.
        unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), len) }
    }

    /// The bytes of a buffer the driver handed back.
    pub fn bytes(&self, d: &Done) -> &[u8] {
        let (ptr, len) = self.maps[d.index as usize];
        let start = d.offset.min(len);
        let end = (d.offset + d.len).min(len);
        // SAFETY: as in bytes_mut; the range lies inside the mapping.
        unsafe { &std::slice::from_raw_parts(ptr.as_ptr(), len)[start..end] }
    }

    /// Queues buffer `index` holding `bytesused` bytes (0 for CAPTURE).
    pub fn queue(&self, fd: BorrowedFd<'_>, index: u32, bytesused: usize) -> io::Result<()> {
        let mut plane: v4l2_plane = zeroed();
        // Set before the buffer points at it: written after, through the
        // pointer the kernel reads, the compiler could not see it read.
        plane.bytesused = bytesused as u32;
        let mut b = self.buffer(index, &mut plane);
        if !self.mplane {
            b.bytesused = bytesused as u32;
        }
        // SAFETY: VIDIOC_QBUF takes a v4l2_buffer; `plane` outlives the call.
        unsafe { update::<VIDIOC_QBUF, _>(fd, &mut b) }
    }

    /// Queues DMABUF `dmabuf` (`len` bytes, `bytesused` of them a frame)
    /// in slot `index`.
    pub fn queue_dmabuf(
        &self,
        fd: BorrowedFd<'_>,
        index: u32,
        dmabuf: BorrowedFd<'_>,
        len: usize,
        bytesused: usize,
    ) -> io::Result<()> {
        let mut plane: v4l2_plane = zeroed();
        // Set before the buffer points at it, as in `queue`.
        plane.bytesused = bytesused as u32;
        plane.length = len as u32;
        plane.m.fd = dmabuf.as_raw_fd();
        let mut b = self.buffer(index, &mut plane);
        if !self.mplane {
            b.bytesused = bytesused as u32;
            b.length = len as u32;
            b.m.fd = dmabuf.as_raw_fd();
        }
        // SAFETY: VIDIOC_QBUF takes a v4l2_buffer; `plane` outlives the
        // call; the kernel takes its own reference to the DMABUF.
        unsafe { update::<VIDIOC_QBUF, _>(fd, &mut b) }
    }

    /// A buffer the driver is done with, or None.
    pub fn dequeue(&self, fd: BorrowedFd<'_>) -> io::Result<Option<Done>> {
        let mut plane: v4l2_plane = zeroed();
        let mut b = self.buffer(0, &mut plane);
        // SAFETY: VIDIOC_DQBUF takes a v4l2_buffer; `plane` outlives the call.
        match unsafe { update::<VIDIOC_DQBUF, _>(fd, &mut b) } {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) => return Err(e),
        }
        let (offset, len) = if self.mplane {
            let off = plane.data_offset as usize;
            (off, (plane.bytesused as usize).saturating_sub(off))
        } else {
            (0, b.bytesused as usize)
        };
        if b.index >= self.count {
            return Err(io::Error::other(format!("buffer {} is not ours", b.index)));
        }
        Ok(Some(Done {
            index: b.index,
            offset,
            len,
            flags: b.flags,
        }))
    }

    pub fn stream_on(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        // SAFETY: a BufTypeArg is STREAMON's argument.
        unsafe { ioctl(fd, BufTypeArg::<VIDIOC_STREAMON>(self.type_))? };
        self.streaming = true;
        Ok(())
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: the device outlives its queues (the encoder drops them
        // first).
        let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
        if self.streaming {
            // SAFETY: a BufTypeArg is STREAMOFF's argument.
            let _ = unsafe { ioctl(fd, BufTypeArg::<VIDIOC_STREAMOFF>(self.type_)) };
        }
        for &(ptr, len) in &self.maps {
            // SAFETY: each mapping came from mmap in `request` with this
            // length and is unmapped once; the slices lent borrow `self`.
            let _ = unsafe { munmap(ptr.as_ptr().cast(), len) };
        }
        let mut req: v4l2_requestbuffers = zeroed();
        req.type_ = self.type_;
        req.memory = self.memory;
        // SAFETY: VIDIOC_REQBUFS takes a v4l2_requestbuffers.
        let _ = unsafe { update::<VIDIOC_REQBUFS, _>(fd, &mut req) };
    }
}

// SAFETY: the mappings are plain memory owned by this queue; nothing in
// them is tied to the thread that made them.
unsafe impl Send for Queue {}
