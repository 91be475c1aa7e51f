//! One encoding session on a memory-to-memory device, as the kernel's
//! stateful encoder interface has it: the coded format set on CAPTURE
//! first, then the raw one on OUTPUT, both queues streaming. A frame is
//! copied into a free OUTPUT buffer (MMAP) in the layout the driver asked
//! for (its stride and rows, which the VideoCore pads) and queued; or,
//! where the camera's buffers have exactly that layout and the driver
//! takes them (DMABUF), the camera's buffer itself is queued and read in
//! place, and handed back before the camera gets it again. The coded
//! frame is read from the CAPTURE buffer (MMAP) it comes back in, which
//! is queued again at once.

use std::io;
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rustix::event::{PollFd, PollFlags, poll};

use super::super::device::{Control, Device};
use super::super::select::fourcc_name;
use super::super::sys::*;
use super::queue::Queue;
use super::setup::{crop, set_controls, set_format, set_fps};
use super::{H264, YUV420, types};

/// How long a coded frame may take: the VideoCore takes milliseconds; a
/// driver that keeps a frame this long is stuck.
const WAIT: Duration = Duration::from_secs(2);

/// What to encode to.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// The coded format: H264, JPEG (or vicodec's FWHT).
    pub coded: u32,
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    /// H.264: bits per second, and frames from one key frame to the next.
    pub bitrate: Option<u32>,
    pub gop: Option<u32>,
    /// JPEG: 1-100.
    pub quality: Option<u8>,
}

/// A coded frame's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoded {
    /// The driver marked it a key frame.
    pub key: bool,
}

/// A camera's buffers, which an encoder may read in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CameraBuffers {
    /// How many: each keeps a slot of its own in the encoder.
    pub count: u32,
    /// Their frames: 4:2:0, the planes one after another, `stride` bytes
    /// a luma row, `rows` luma rows.
    pub stride: usize,
    pub rows: usize,
}

/// One of the camera's buffers, holding the frame to encode.
#[derive(Debug, Clone, Copy)]
pub struct Dmabuf<'a> {
    pub fd: BorrowedFd<'a>,
    pub index: u32,
    pub len: usize,
}

/// How frames reach the encoder.
enum Input {
    /// Copied into its own buffers: these are free; why not in place.
    Copy { free: Vec<u32>, why: Option<String> },
    /// The camera's buffers, read in place; how many frames so far.
    Import { frames: u64 },
}

/// The raw frame's place in an OUTPUT buffer.
#[derive(Debug, Clone, Copy)]
struct Layout {
    stride: usize,
    /// Luma rows the driver wants (the picture's, or more: padded).
    rows: usize,
    size: usize,
}

pub struct M2mEncoder {
    // Fields drop in order: both queues before the device they belong to.
    output: Queue,
    capture: Queue,
    dev: Device,
    input: Input,
    layout: Layout,
    params: Params,
    force_key: Option<Control>,
}

impl M2mEncoder {
    /// A session whose frames are copied in.
    pub fn open(path: &Path, params: Params) -> Result<M2mEncoder> {
        M2mEncoder::open_for(path, params, None)
    }

    /// A session reading `camera`'s buffers in place if the driver takes
    /// them as they are, copying otherwise ([`M2mEncoder::input`] says
    /// which, and why).
    pub fn open_for(
        path: &Path,
        params: Params,
        camera: Option<CameraBuffers>,
    ) -> Result<M2mEncoder> {
        let dev = Device::open(path).with_context(|| format!("{}", path.display()))?;
        let mplane = dev.caps.device_caps & V4L2_CAP_VIDEO_M2M_MPLANE != 0;
        let (capture_type, output_type) = types(mplane);
        let (w, h) = (params.width, params.height);
        let coded =
            set_format(&dev, capture_type, mplane, params.coded, w, h, 0).with_context(|| {
                format!(
                    "{}: {} on CAPTURE",
                    path.display(),
                    fourcc_name(params.coded)
                )
            })?;
        // Asked for the camera's stride: a driver that can read its rows
        // where they are says so by keeping it.
        let stride = camera.map_or(0, |c| c.stride);
        let raw = set_format(&dev, output_type, mplane, YUV420, w, h, stride)
            .with_context(|| format!("{}: YU12 on OUTPUT", path.display()))?;
        if coded.fourcc != params.coded || raw.fourcc != YUV420 {
            bail!(
                "{}: asked for YU12 to {}, the driver set {} to {}",
                path.display(),
                fourcc_name(params.coded),
                fourcc_name(raw.fourcc),
                fourcc_name(coded.fourcc)
            );
        }
        if w == 0 || h == 0 {
            bail!("{}: an empty picture ({w}x{h})", path.display());
        }
        if raw.width < w || raw.height < h || raw.stride < w.div_ceil(2) as usize * 2 {
            bail!(
                "{}: {w}x{h} asked, the driver set {}x{} (stride {})",
                path.display(),
                raw.width,
                raw.height,
                raw.stride
            );
        }
        if (raw.width, raw.height) != (w, h) {
            // A driver that codes whole macroblocks or has a least size
            // (1080 rows as 1088; vicodec's 640x360) takes a larger frame:
            // the picture is its top left corner, the rest padding.
            crop(&dev, w, h).with_context(|| {
                format!(
                    "{}: {w}x{h} in the driver's {}x{}",
                    path.display(),
                    raw.width,
                    raw.height
                )
            })?;
        }
        let rows = raw.height as usize;
        let layout = Layout {
            stride: raw.stride,
            rows,
            size: raw.stride * rows + 2 * (raw.stride / 2) * rows.div_ceil(2),
        };
        set_fps(&dev, output_type, params.fps);
        let force_key = set_controls(&dev, &params)?;
        let (mut output, input) = match camera.map(|c| import(&dev, output_type, mplane, c, layout))
        {
            Some(Ok(q)) => (q, Input::Import { frames: 0 }),
            why => {
                let q = Queue::request(&dev, output_type, mplane, 2)
                    .with_context(|| format!("{}: OUTPUT buffers", path.display()))?;
                if let Some(small) = (0..q.count()).find(|&i| q.len(i) < layout.size) {
                    bail!(
                        "{}: OUTPUT buffer {small} has {} bytes, a frame {}",
                        path.display(),
                        q.len(small),
                        layout.size
                    );
                }
                let free = (0..q.count()).rev().collect();
                (
                    q,
                    Input::Copy {
                        free,
                        why: why.and_then(|w| w.err()),
                    },
                )
            }
        };
        let mut capture = Queue::request(&dev, capture_type, mplane, 4)
            .with_context(|| format!("{}: CAPTURE buffers", path.display()))?;
        for i in 0..capture.count() {
            capture.queue(dev.fd(), i, 0)?;
        }
        output.stream_on(dev.fd())?;
        capture.stream_on(dev.fd())?;
        Ok(M2mEncoder {
            output,
            capture,
            dev,
            input,
            layout,
            params,
            force_key,
        })
    }

    /// Encodes one 4:2:0 frame (`planes` with their `strides`, the size
    /// given at open; `dmabuf`, the camera's buffer holding them, if they
    /// came in one) into `out`; `key` asks for a key frame, where the
    /// driver can be asked. After an error, drop the session before the
    /// camera's buffer goes back to the camera: the driver may hold it.
    pub fn encode(
        &mut self,
        planes: [&[u8]; 3],
        strides: [usize; 3],
        dmabuf: Option<Dmabuf<'_>>,
        key: bool,
        out: &mut Vec<u8>,
    ) -> Result<Encoded> {
        out.clear();
        let (w, h) = (self.params.width as usize, self.params.height as usize);
        for (i, p) in planes.iter().enumerate() {
            let (pw, ph) = if i == 0 {
                (w, h)
            } else {
                (w.div_ceil(2), h.div_ceil(2))
            };
            if strides[i] < pw || p.len() < strides[i] * (ph - 1) + pw {
                bail!(
                    "plane {i}: {} bytes at stride {} for {pw}x{ph}",
                    p.len(),
                    strides[i]
                );
            }
        }
        if let Input::Import { frames } = self.input {
            match dmabuf.map(|d| self.import(d, key, out)) {
                Some(Ok(e)) => {
                    if let Input::Import { frames } = &mut self.input {
                        *frames += 1;
                    }
                    return Ok(e);
                }
                // Refused from the start: the driver cannot read these
                // buffers (the VideoCore, a camera's scattered pages).
                Some(Err(e)) if frames == 0 => {
                    self.copy_instead(format!("the driver refused the first: {e:#}"))?
                }
                Some(Err(e)) => return Err(e),
                None => self.copy_instead("a frame came without its buffer".into())?,
            }
        }
        let index = self.free_output()?;
        let l = self.layout;
        let buf = &mut self.output.bytes_mut(index)[..l.size];
        let (y, chroma) = buf.split_at_mut(l.stride * l.rows);
        let (u, v) = chroma.split_at_mut(l.stride / 2 * l.rows.div_ceil(2));
        copy_plane(planes[0], strides[0], (w, h), y, l.stride, l.rows);
        let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
        copy_plane(
            planes[1],
            strides[1],
            (cw, ch),
            u,
            l.stride / 2,
            l.rows.div_ceil(2),
        );
        copy_plane(
            planes[2],
            strides[2],
            (cw, ch),
            v,
            l.stride / 2,
            l.rows.div_ceil(2),
        );
        self.ask_key(key)?;
        self.output.queue(self.dev.fd(), index, l.size)?;
        self.coded(out)
    }

    /// How frames reach the encoder, for the log.
    pub fn input(&self) -> String {
        match &self.input {
            Input::Import { .. } => "reading the camera's buffers in place (DMABUF)".into(),
            Input::Copy { why: Some(why), .. } => {
                format!("copying each frame in (not the camera's buffers: {why})")
            }
            Input::Copy { why: None, .. } => "copying each frame in".into(),
        }
    }

    /// Encodes the frame in the camera's buffer `d`, read in place, and
    /// waits for the driver to hand the buffer back.
    fn import(&mut self, d: Dmabuf<'_>, key: bool, out: &mut Vec<u8>) -> Result<Encoded> {
        let size = self.layout.size;
        if d.len < size {
            bail!("buffer {} has {} bytes, a frame {size}", d.index, d.len);
        }
        self.ask_key(key)?;
        self.output
            .queue_dmabuf(self.dev.fd(), d.index, d.fd, d.len, size)
            .with_context(|| format!("buffer {}", d.index))?;
        let coded = self.coded(out)?;
        loop {
            match self.output.dequeue(self.dev.fd())? {
                Some(done) if done.index == d.index => return Ok(coded),
                Some(_) => {}
                None => self.wait(PollFlags::OUT)?,
            }
        }
    }

    /// This session again, copying frames in, for `why`.
    fn copy_instead(&mut self, why: String) -> Result<()> {
        let (path, params) = (self.dev.path.clone(), self.params);
        *self = M2mEncoder::open(&path, params)?;
        if let Input::Copy { why: w, .. } = &mut self.input {
            *w = Some(why);
        }
        Ok(())
    }

    fn ask_key(&self, key: bool) -> Result<()> {
        if key && let Some(c) = &self.force_key {
            self.dev.set_control(c, 1)?;
        }
        Ok(())
    }

    /// The coded frame for the one just queued, into `out`.
    fn coded(&mut self, out: &mut Vec<u8>) -> Result<Encoded> {
        let mut flags = 0;
        for buffers in 1.. {
            // Parameter sets and a picture: two buffers; more without a
            // picture is a driver gone wrong.
            if buffers > 4 {
                out.clear();
                bail!("{}: no picture in 4 buffers", self.dev.path.display());
            }
            self.wait(PollFlags::IN)?;
            let Some(done) = self.capture.dequeue(self.dev.fd())? else {
                continue;
            };
            out.extend_from_slice(self.capture.bytes(&done));
            flags |= done.flags;
            self.capture.queue(self.dev.fd(), done.index, 0)?;
            if done.flags & V4L2_BUF_FLAG_ERROR != 0 {
                out.clear();
                bail!(
                    "{}: the driver flagged the frame as bad",
                    self.dev.path.display()
                );
            }
            // An encoder may hand the parameter sets over in a buffer of
            // their own: they go before the picture that follows.
            if self.params.coded != H264 || has_picture(out) {
                break;
            }
        }
        Ok(Encoded {
            key: flags & V4L2_BUF_FLAG_KEYFRAME != 0,
        })
    }

    /// An OUTPUT buffer the driver is done with.
    fn free_output(&mut self) -> Result<u32> {
        loop {
            let Input::Copy { free, .. } = &mut self.input else {
                bail!("no buffers of its own to copy into");
            };
            while let Some(d) = self.output.dequeue(self.dev.fd())? {
                free.push(d.index);
            }
            if let Some(i) = free.pop() {
                return Ok(i);
            }
            self.wait(PollFlags::OUT)?;
        }
    }

    fn wait(&self, what: PollFlags) -> Result<()> {
        let fd = self.dev.fd();
        let mut fds = [PollFd::new(&fd, what)];
        let timeout = rustix::time::Timespec {
            tv_sec: WAIT.as_secs() as _,
            tv_nsec: 0,
        };
        loop {
            match poll(&mut fds, Some(&timeout)) {
                Ok(0) => bail!(
                    "{}: no frame back from the encoder in {} s",
                    self.dev.path.display(),
                    WAIT.as_secs()
                ),
                Ok(_) => {
                    if fds[0].revents().contains(PollFlags::ERR) {
                        bail!("{}: the device reports an error", self.dev.path.display());
                    }
                    return Ok(());
                }
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(io::Error::from(e).into()),
            }
        }
    }
}

/// Slots for the camera's buffers, if the driver reads their layout as
/// it is; why not otherwise.
fn import(
    dev: &Device,
    output_type: u32,
    mplane: bool,
    c: CameraBuffers,
    l: Layout,
) -> std::result::Result<Queue, String> {
    if (l.stride, l.rows) != (c.stride, c.rows) {
        return Err(format!(
            "the encoder reads {} rows of {} bytes, the camera's buffers hold {} of {}",
            l.rows, l.stride, c.rows, c.stride
        ));
    }
    Queue::request_dmabuf(dev, output_type, mplane, c.count)
        .map_err(|e| format!("no DMABUF slots: {e}"))
}

/// Whether Annex B `data` holds a coded picture (a slice NAL unit).
fn has_picture(data: &[u8]) -> bool {
    camstream_h264::annexb::nal_units(data)
        .any(|n| matches!(n.first().map(|b| b & 0x1f), Some(1..=5)))
}

/// Copies a `w`x`h` plane into `dst` (`rows` rows of `stride`), repeating
/// the last row into any rows the driver pads with.
fn copy_plane(
    src: &[u8],
    src_stride: usize,
    (w, h): (usize, usize),
    dst: &mut [u8],
    stride: usize,
    rows: usize,
) {
    for r in 0..rows {
        let s = r.min(h - 1) * src_stride;
        let d = &mut dst[r * stride..r * stride + stride];
        d[..w].copy_from_slice(&src[s..s + w]);
        // The columns past the picture: its last one, not noise.
        let last = d[w - 1];
        d[w..].fill(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_repeats_the_edge() {
        // A 3x2 plane at stride 4 into 4 columns by 3 rows.
        let src = [1, 2, 3, 9, 4, 5, 6, 9];
        let mut dst = [0u8; 12];
        copy_plane(&src, 4, (3, 2), &mut dst, 4, 3);
        assert_eq!(dst, [1, 2, 3, 3, 4, 5, 6, 6, 4, 5, 6, 6]);
    }

    #[test]
    fn parameter_sets_alone_are_not_a_picture() {
        let sps_pps = [0, 0, 0, 1, 0x67, 0x42, 0, 0x1f, 0, 0, 0, 1, 0x68, 0xce];
        assert!(!has_picture(&sps_pps));
        let mut idr = sps_pps.to_vec();
        idr.extend_from_slice(&[0, 0, 0, 1, 0x65, 0x88, 0x84]);
        assert!(has_picture(&idr));
        assert!(has_picture(&[0, 0, 1, 0x41, 0x9a]));
    }
}
