//! `camstream encoders`: the kernel's memory-to-memory encoders, and with
//! `--try` each of them run on a moving test picture: how fast, how large,
//! whether what comes back is what was asked for (an H.264 access unit
//! with an IDR picture first; a JPEG that decodes to the picture sent).
//! With `--from`, a YU12 camera's frames instead, each encoder handed the
//! camera's own buffers where it can read them (DMABUF), as the daemon
//! does. On a board it answers "will camstream use the hardware, and how
//! well does it do"; the tests run it against the kernel's virtual
//! vicodec and vivid.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use camstream_h264::AccessUnit;

use crate::source::Raw;
use crate::source::v4l2::Camera;
use crate::source::v4l2::m2m::{self, H264, JPEG, M2mEncoder, Params};
use crate::turbo::{Decoder, OnWarning};

pub struct Trial {
    pub width: u32,
    pub height: u32,
    pub frames: u32,
    /// Writes the frames sent (input.yu12; from a camera, each encoder's
    /// as videoN.FOURCC.yu12) and each encoder's output (videoN.FOURCC)
    /// here.
    pub save: Option<PathBuf>,
    /// A YU12 camera whose frames are sent instead of the test picture.
    pub from: Option<PathBuf>,
}

/// Where a trial's frames come from.
enum Frames<'a> {
    Picture(&'a [[Vec<u8>; 3]]),
    /// The camera, and each frame sent, packed 4:2:0.
    Camera(Box<Camera>, Vec<u8>),
}

/// The report, or an error naming each encoder that failed.
pub fn run(trial: Option<Trial>) -> Result<String> {
    let found = m2m::list();
    let mut report = m2m::describe(&found);
    let Some(t) = trial else {
        return Ok(report);
    };
    let sizes = 16..=8192;
    if !sizes.contains(&t.width)
        || !sizes.contains(&t.height)
        || t.width % 2 + t.height % 2 != 0
        || t.frames == 0
    {
        bail!("--size takes an even WIDTHxHEIGHT from 16x16 to 8192x8192, --frames at least 1");
    }
    let (w, h) = (t.width as usize, t.height as usize);
    let frames: Vec<[Vec<u8>; 3]> = match t.from {
        Some(_) => Vec::new(),
        None => (0..t.frames as usize).map(|i| picture(w, h, i)).collect(),
    };
    if let Some(dir) = &t.save {
        std::fs::create_dir_all(dir)?;
    }
    if let (Some(dir), None) = (&t.save, &t.from) {
        let raw: Vec<u8> = frames
            .iter()
            .flat_map(|f| f.iter().flatten().copied())
            .collect();
        std::fs::write(dir.join("input.yu12"), raw)?;
    }
    let mut failed = Vec::new();
    for f in found.iter().filter(|f| f.takes_yuv420()) {
        for &coded in &f.coded {
            let name = crate::source::v4l2::fourcc_name(coded);
            let label = format!("{} {name} {w}x{h}", f.path.display());
            let source = match &t.from {
                Some(cam) => Camera::open(cam, (t.width as u16, t.height as u16))
                    .map(|c| Frames::Camera(Box::new(c), Vec::new())),
                None => Ok(Frames::Picture(&frames)),
            };
            match source.and_then(|s| try_one(f, coded, &t, s)) {
                Ok((line, bytes, sent)) => {
                    let _ = writeln!(report, "{label}: {line}");
                    if let Some(dir) = &t.save {
                        let file = f
                            .path
                            .file_name()
                            .map_or("encoder".into(), |n| n.to_string_lossy());
                        std::fs::write(dir.join(format!("{file}.{name}")), bytes)?;
                        if let Some(sent) = sent {
                            std::fs::write(dir.join(format!("{file}.{name}.yu12")), sent)?;
                        }
                    }
                }
                Err(e) => {
                    let _ = writeln!(report, "{label}: FAILED: {e:#}");
                    failed.push(label);
                }
            }
        }
    }
    if failed.is_empty() {
        Ok(report)
    } else {
        print!("{report}");
        bail!("{} failed", failed.join(", "))
    }
}

/// Encodes every frame on one encoder: its summary line, the coded
/// stream and, from a camera, the frames sent.
fn try_one(
    f: &m2m::Found,
    coded: u32,
    t: &Trial,
    mut frames: Frames<'_>,
) -> Result<(String, Vec<u8>, Option<Vec<u8>>)> {
    let (w, h) = (t.width as usize, t.height as usize);
    let params = Params {
        coded,
        width: t.width,
        height: t.height,
        fps: 30,
        bitrate: (coded == H264).then_some(2_000_000),
        gop: Some(30),
        quality: (coded == JPEG).then_some(85),
    };
    let camera = match &frames {
        Frames::Camera(c, _) => Some(c.buffers()),
        Frames::Picture(_) => None,
    };
    let mut enc = M2mEncoder::open_for(&f.path, params, camera)?;
    let (mut all, mut out, mut keys) = (Vec::new(), Vec::new(), 0);
    // A camera's frame, packed (as it is saved).
    let mut one = Vec::new();
    let mut extra = String::new();
    let n = t.frames as usize;
    let start = Instant::now();
    for i in 0..n {
        let made = match &mut frames {
            Frames::Picture(p) => {
                let p = &p[i];
                enc.encode(
                    [&p[0], &p[1], &p[2]],
                    [w, w / 2, w / 2],
                    None,
                    i == 0,
                    &mut out,
                )
            }
            Frames::Camera(cam, sent) => cam.frame(|planes, strides, buf| {
                let size = (w, h);
                Raw {
                    planes,
                    strides,
                    size,
                }
                .pack(&mut one);
                sent.extend_from_slice(&one);
                enc.encode(planes, strides, buf, i == 0, &mut out)
            })?,
        }
        .with_context(|| format!("frame {i}"))?;
        if out.is_empty() {
            bail!("frame {i}: nothing came back");
        }
        keys += usize::from(made.key);
        if coded == H264 {
            let au = AccessUnit::parse(&out).map_err(|e| anyhow::anyhow!("frame {i}: {e:?}"))?;
            if i == 0 && !(au.idr && au.sps.is_some() && au.pps.is_some()) {
                bail!("the first access unit is not an IDR picture with SPS and PPS");
            }
        }
        if coded == JPEG && i == 0 {
            let luma = match &frames {
                Frames::Picture(p) => &p[0][0][..],
                Frames::Camera(_, sent) => &sent[..w * h],
            };
            let db = jpeg_psnr(&out, luma, (w, h))?;
            let _ = write!(extra, ", luma {db:.1} dB from the picture sent");
        }
        all.extend_from_slice(&out);
    }
    let took = start.elapsed().as_secs_f64();
    if camera.is_some() {
        let _ = write!(extra, ", {}", enc.input());
    }
    let sent = match frames {
        Frames::Camera(_, sent) => Some(sent),
        Frames::Picture(_) => None,
    };
    Ok((
        format!(
            "{n} frames, {:.1} ms a frame, {} bytes a frame, {keys} marked key frame(s){extra}",
            took * 1000.0 / n as f64,
            all.len() / n
        ),
        all,
        sent,
    ))
}

/// Frame `i` of a test picture: a gradient across, stripes down, and a
/// bright square that moves 8 pixels a frame (an encoder has motion to
/// find).
fn picture(w: usize, h: usize, i: usize) -> [Vec<u8>; 3] {
    let (cw, ch) = (w / 2, h / 2);
    let side = (h / 4).max(4);
    let (x0, y0) = ((i * 8) % (w - side), h / 3);
    let mut y = vec![0u8; w * h];
    for r in 0..h {
        for c in 0..w {
            let inside = (x0..x0 + side).contains(&c) && (y0..y0 + side).contains(&r);
            // Stripes four rows high: a row out of place shows.
            y[r * w + c] = if inside {
                235
            } else {
                (16 + (c * 160 / w) + 40 * ((r / 4) % 2)) as u8
            };
        }
    }
    let u = (0..cw * ch)
        .map(|k| (64 + (k % cw) * 128 / cw) as u8)
        .collect();
    let v = (0..cw * ch)
        .map(|k| (192 - (k / cw) * 128 / ch) as u8)
        .collect();
    [y, u, v]
}

/// Luma PSNR of a JPEG against the plane it was made of.
fn jpeg_psnr(jpeg: &[u8], luma: &[u8], (w, h): (usize, usize)) -> Result<f64> {
    let d = Decoder::new()?;
    let header = d.header(jpeg)?;
    if (header.width, header.height) != (w, h) {
        bail!(
            "the JPEG is {}x{}, the picture {w}x{h}",
            header.width,
            header.height
        );
    }
    let mut planes = Default::default();
    let sizes = d.decode_planes(jpeg, &header, (w, h), &mut planes, OnWarning::Stop)?;
    let stride = sizes[0].0;
    let mse = (0..h)
        .flat_map(|r| (0..w).map(move |c| (r, c)))
        .map(|(r, c)| {
            let e = f64::from(planes[0][r * stride + c]) - f64::from(luma[r * w + c]);
            e * e
        })
        .sum::<f64>()
        / (w * h) as f64;
    Ok(10.0 * (255.0f64 * 255.0 / mse.max(1e-9)).log10())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_square_moves() {
        let a = picture(64, 32, 0);
        let b = picture(64, 32, 1);
        assert_ne!(a[0], b[0]);
        assert_eq!(a[1], b[1]);
        assert_eq!(a[0].len(), 64 * 32);
        assert_eq!(a[1].len(), 32 * 16);
    }
}
