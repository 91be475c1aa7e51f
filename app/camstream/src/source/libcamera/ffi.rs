//! The C API of shim.cpp (compiled by build.rs against the libcamera found
//! by pkg-config) and safe owners around it. Nothing here runs per pixel.

use std::ffi::{CStr, CString, c_char, c_int};
use std::os::fd::BorrowedFd;

use anyhow::{Result, anyhow};

use super::describe::{self, CameraDesc};

#[repr(C)]
struct RawManager {
    _private: [u8; 0],
}
#[repr(C)]
struct RawCamera {
    _private: [u8; 0],
}

#[repr(C)]
pub struct RawFrame {
    pub index: u32,
    pub sequence: u32,
    pub timestamp_ns: u64,
    pub skipped: u32,
    pub failed: u32,
    pub planes: u32,
    pub data: [*const u8; 3],
    pub length: [usize; 3],
    pub fd: i32,
    pub buffers: u32,
    pub fd_length: usize,
    pub offset: [usize; 3],
}

impl RawFrame {
    fn empty() -> RawFrame {
        RawFrame {
            index: 0,
            sequence: 0,
            timestamp_ns: 0,
            skipped: 0,
            failed: 0,
            planes: 0,
            data: [std::ptr::null(); 3],
            length: [0; 3],
            fd: -1,
            buffers: 0,
            fd_length: 0,
            offset: [0; 3],
        }
    }
}

#[repr(C)]
#[derive(Default)]
struct RawPixFormat {
    width: u32,
    height: u32,
    stride: u32,
    format: [c_char; 16],
    full_range: u32,
    flips: u32,
    can_flip: u32,
}

unsafe extern "C" {
    fn cs_lc_init();
    fn cs_lc_version() -> *const c_char;
    fn cs_lc_manager_start(err: *mut c_char, len: usize) -> *mut RawManager;
    fn cs_lc_manager_stop(m: *mut RawManager);
    fn cs_lc_describe(m: *mut RawManager, buf: *mut c_char, len: usize) -> usize;
    fn cs_lc_open(
        m: *mut RawManager,
        id: *const c_char,
        width: u32,
        height: u32,
        buffers: u32,
        flips: u32,
        err: *mut c_char,
        len: usize,
    ) -> *mut RawCamera;
    fn cs_lc_pix_format(c: *const RawCamera, info: *mut RawPixFormat);
    fn cs_lc_control(
        c: *mut RawCamera,
        id: u32,
        v: *const f64,
        n: usize,
        err: *mut c_char,
        len: usize,
    ) -> c_int;
    fn cs_lc_start(c: *mut RawCamera, err: *mut c_char, len: usize) -> c_int;
    fn cs_lc_wait(c: *mut RawCamera, timeout_ms: c_int, f: *mut RawFrame) -> c_int;
    fn cs_lc_requeue(c: *mut RawCamera, index: u32) -> c_int;
    fn cs_lc_close(c: *mut RawCamera, lost: c_int);
}

/// Quiets libcamera's own logging to warnings (unless LIBCAMERA_LOG_LEVELS
/// says otherwise). Call while the process has one thread.
pub fn init() {
    // SAFETY: no argument; setenv is safe while no other thread runs.
    unsafe { cs_lc_init() }
}

pub fn version() -> String {
    // SAFETY: a NUL-terminated string that lives as long as the process.
    unsafe { CStr::from_ptr(cs_lc_version()) }
        .to_string_lossy()
        .into_owned()
}

/// An error line from the shim.
struct ErrBuf([c_char; 512]);

impl ErrBuf {
    fn new() -> ErrBuf {
        ErrBuf([0; 512])
    }
    fn ptr(&mut self) -> *mut c_char {
        self.0.as_mut_ptr()
    }
    fn error(&self) -> anyhow::Error {
        // SAFETY: zeroed at start and written by vsnprintf: NUL-terminated.
        let s = unsafe { CStr::from_ptr(self.0.as_ptr()) }.to_string_lossy();
        anyhow!("{}", if s.is_empty() { "libcamera failed" } else { &s })
    }
}

/// A started libcamera CameraManager (one per process at a time).
// Never null, and started until drop: the "valid manager" of the SAFETY
// comments below.
pub struct Manager(*mut RawManager);

// SAFETY: libcamera's CameraManager may be used from any thread; camstream
// uses each from one thread at a time.
unsafe impl Send for Manager {}

impl Manager {
    pub fn start() -> Result<Manager> {
        let mut err = ErrBuf::new();
        // SAFETY: the error buffer is valid for its length.
        let m = unsafe { cs_lc_manager_start(err.ptr(), err.0.len()) };
        if m.is_null() {
            return Err(err.error());
        }
        Ok(Manager(m))
    }

    /// The cameras libcamera found, with their modes and controls.
    pub fn cameras(&self) -> Vec<CameraDesc> {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            // SAFETY: `buf` is valid for its length; the shim writes at most
            // len - 1 bytes and a NUL.
            let n = unsafe { cs_lc_describe(self.0, buf.as_mut_ptr().cast(), buf.len()) };
            if n < buf.len() {
                buf.truncate(n);
                return describe::parse(&String::from_utf8_lossy(&buf));
            }
            buf.resize(n + 1, 0);
        }
    }

    /// Acquires and configures camera `id` for a stream of about
    /// `width` x `height`.
    /// Opens camera `id`, flipped as `flips` asks ([`HFLIP`], [`VFLIP`])
    /// where it can ([`PixFormat::flips`] says what it does).
    pub fn open(
        &self,
        id: &str,
        width: u32,
        height: u32,
        buffers: u32,
        flips: u32,
    ) -> Result<Camera> {
        let cid = CString::new(id).map_err(|_| anyhow!("{id:?}: a camera id has no NUL"))?;
        let mut err = ErrBuf::new();
        // SAFETY: valid manager, NUL-terminated id, error buffer of its length.
        let c = unsafe {
            cs_lc_open(
                self.0,
                cid.as_ptr(),
                width,
                height,
                buffers,
                flips,
                err.ptr(),
                err.0.len(),
            )
        };
        if c.is_null() {
            return Err(err.error());
        }
        Ok(Camera {
            raw: c,
            lost: false,
        })
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        // SAFETY: started by cs_lc_manager_start; its owner closes its
        // cameras first (capture.rs: `Capture` declares the camera first).
        unsafe { cs_lc_manager_stop(self.0) }
    }
}

/// What a camera was configured to capture: size, row stride, format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PixFormat {
    pub width: usize,
    pub height: usize,
    pub stride: usize,
    /// libcamera's name: YUV420, NV12, BGR888 or RGB888.
    pub format: String,
    /// Its samples span the full range (the colour space libcamera set).
    pub full_range: bool,
    /// The flips it makes ([`HFLIP`], [`VFLIP`]; 4: a rotation by 90).
    pub flips: u32,
    /// Whether it can flip both ways.
    pub can_flip: bool,
}

pub use super::picture::{HFLIP, VFLIP};

/// An acquired camera; streaming once started. Closing (drop) stops it
/// and releases it; it must be dropped before the manager it came from.
pub struct Camera {
    /// Never null, and open until drop: the "valid camera" of the SAFETY
    /// comments below.
    raw: *mut RawCamera,
    lost: bool,
}

// SAFETY: as for Manager: libcamera's Camera is thread-safe for the calls
// the shim makes, and camstream makes them from one thread at a time.
unsafe impl Send for Camera {}

pub enum Wait<'a> {
    Frame(CompletedRequest<'a>),
    Nothing,
    Gone,
}

/// A completed request: its planes, valid until requeued.
pub struct CompletedRequest<'a> {
    pub index: u32,
    pub sequence: u32,
    pub timestamp_ns: u64,
    pub skipped: u32,
    pub failed: u32,
    pub planes: [&'a [u8]; 3],
    pub plane_count: usize,
    /// The buffer all its planes lie in, if they share one.
    pub dmabuf: Option<Shared<'a>>,
}

/// A request's buffer as one dmabuf: what a hardware encoder may read in
/// place.
#[derive(Debug, Clone, Copy)]
pub struct Shared<'a> {
    pub fd: BorrowedFd<'a>,
    /// Its size, each plane's offset in it, and how many buffers the
    /// camera has.
    pub len: usize,
    pub offsets: [usize; 3],
    pub buffers: u32,
}

impl Camera {
    pub fn format(&self) -> PixFormat {
        let mut i = RawPixFormat::default();
        // SAFETY: valid camera, valid out pointer.
        unsafe { cs_lc_pix_format(self.raw, &mut i) };
        // SAFETY: snprintf wrote a NUL-terminated name into the array.
        let format = unsafe { CStr::from_ptr(i.format.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        PixFormat {
            width: i.width as usize,
            height: i.height as usize,
            stride: i.stride as usize,
            format,
            full_range: i.full_range != 0,
            flips: i.flips,
            can_flip: i.can_flip != 0,
        }
    }

    /// Sets control `id` to `values` when streaming starts, or once it
    /// has, from the next request (a picture setting changed live).
    pub fn control(&mut self, id: u32, values: &[f64]) -> Result<()> {
        let mut err = ErrBuf::new();
        // SAFETY: valid camera; `values` valid for its length.
        let r = unsafe {
            cs_lc_control(
                self.raw,
                id,
                values.as_ptr(),
                values.len(),
                err.ptr(),
                err.0.len(),
            )
        };
        if r != 0 {
            return Err(err.error());
        }
        Ok(())
    }

    pub fn start(&mut self) -> Result<()> {
        let mut err = ErrBuf::new();
        // SAFETY: valid camera, error buffer of its length.
        if unsafe { cs_lc_start(self.raw, err.ptr(), err.0.len()) } != 0 {
            return Err(err.error());
        }
        Ok(())
    }

    /// The newest frame within `timeout_ms`. The frame borrows the camera
    /// until [`Camera::requeue`] gives its buffer back.
    pub fn wait(&mut self, timeout_ms: i32) -> Wait<'_> {
        let mut f = RawFrame::empty();
        // SAFETY: valid camera, valid out pointer.
        match unsafe { cs_lc_wait(self.raw, timeout_ms, &mut f) } {
            1 => {
                let n = (f.planes as usize).min(3);
                let mut planes: [&[u8]; 3] = [&[]; 3];
                for (i, p) in planes.iter_mut().enumerate().take(n) {
                    // SAFETY: the shim maps each buffer once at start and
                    // unmaps at close; the request stays with camstream
                    // (not queued) until requeued, so libcamera does not
                    // write into it while the slice lives.
                    *p = unsafe { std::slice::from_raw_parts(f.data[i], f.length[i]) };
                }
                let dmabuf = (f.fd >= 0).then(|| Shared {
                    // SAFETY: the allocator's descriptor, open as long as
                    // the camera, which this frame borrows.
                    fd: unsafe { BorrowedFd::borrow_raw(f.fd) },
                    len: f.fd_length,
                    offsets: f.offset,
                    buffers: f.buffers,
                });
                Wait::Frame(CompletedRequest {
                    index: f.index,
                    sequence: f.sequence,
                    timestamp_ns: f.timestamp_ns,
                    skipped: f.skipped,
                    failed: f.failed,
                    planes,
                    plane_count: n,
                    dmabuf,
                })
            }
            0 => Wait::Nothing,
            _ => Wait::Gone,
        }
    }

    /// The camera stopped giving frames or went away: closing it leaves it
    /// to its manager (libcamera cannot always stop such a camera).
    pub fn mark_lost(&mut self) {
        self.lost = true;
    }

    pub fn requeue(&mut self, index: u32) -> Result<()> {
        // SAFETY: valid camera; the shim checks the index.
        if unsafe { cs_lc_requeue(self.raw, index) } != 0 {
            return Err(anyhow!("the camera refused a buffer back"));
        }
        Ok(())
    }
}

impl Drop for Camera {
    fn drop(&mut self) {
        // SAFETY: opened by cs_lc_open, closed once.
        unsafe { cs_lc_close(self.raw, c_int::from(self.lost)) }
    }
}
