//! Raw camera frames (YUV 4:2:0, NV12, packed 4:2:2, RGB) as JPEG: into
//! the encoder's planes where they are not already, then encoded.

use anyhow::{Result, bail};

use super::device::PixFormat;
use super::m2m::{CameraBuffers, Dmabuf};
use super::select::{BGR24, NV12, RGB24, UYVY, YUV420, YUYV, fourcc_name};
use crate::convert::{Packed422, Range, i420_plane_sizes, packed422_to_i420, split_uv};
use crate::source::Raw;
use crate::source::jpeg::JpegEncoder;

/// Encodes a raw frame as JPEG into `out`; the picture as 4:2:0 planes
/// (None: RGB). `camera`: the buffer `data` lies in, which a kernel
/// encoder may read in place (YU12 only: what it takes). Video-range
/// samples are made full range on the way (JFIF's): where the planes are
/// otherwise used as they are, that takes a copy through the lookup.
pub(super) fn encode<'a>(
    enc: &mut JpegEncoder,
    planes: &'a mut [Vec<u8>; 3],
    f: &PixFormat,
    (w, h): (usize, usize),
    data: &'a [u8],
    camera: Option<(CameraBuffers, Dmabuf<'_>)>,
    out: &mut Vec<u8>,
) -> Result<Option<Raw<'a>>> {
    let stride = f.bytesperline as usize;
    let rows = f.height as usize;
    let sizes = i420_plane_sizes(w, h);
    let range = Range::of(f.full_range);
    let need = |len: usize| -> Result<()> {
        if data.len() < len {
            bail!("short buffer: {} bytes, expected {len}", data.len());
        }
        Ok(())
    };
    match f.fourcc {
        YUV420 => {
            let (camera_planes, strides) = yu12_planes(data, stride, rows)?;
            if range.is_full() {
                enc.encode_from(camera_planes, strides, w, h, camera, out)?;
                return Ok(Some(Raw {
                    planes: camera_planes,
                    strides,
                    size: (w, h),
                }));
            }
            let strides = range.copy_i420(camera_planes, strides, (w, h), planes);
            let planes: &'a [Vec<u8>; 3] = planes;
            let [y, u, v] = planes;
            enc.encode_i420([y, u, v], w, h, out)?;
            Ok(Some(Raw {
                planes: [y, u, v],
                strides,
                size: (w, h),
            }))
        }
        NV12 => {
            let y_len = stride * rows;
            need(y_len + stride * rows.div_ceil(2))?;
            let (cw, ch) = sizes[1];
            for p in &mut planes[1..] {
                p.resize(cw * ch, 0);
            }
            let [y, u, v] = &mut *planes;
            split_uv(&data[y_len..], stride, (cw, ch), range, u, v);
            // Luma is used where it lies unless it needs the lookup.
            if !range.is_full() {
                y.resize(w * h, 0);
                range.copy_plane(false, &data[..y_len], stride, w, y);
            }
            let planes: &'a [Vec<u8>; 3] = planes;
            let (luma, y_stride): (&'a [u8], usize) = if range.is_full() {
                (&data[..y_len], stride)
            } else {
                (&planes[0], w)
            };
            let strides = [y_stride, cw, cw];
            enc.encode_planes([luma, &planes[1], &planes[2]], strides, w, h, out)?;
            Ok(Some(Raw {
                planes: [luma, &planes[1], &planes[2]],
                strides,
                size: (w, h),
            }))
        }
        YUYV | UYVY => {
            need(stride * rows)?;
            for (p, (pw, ph)) in planes.iter_mut().zip(sizes) {
                p.resize(pw * ph, 0);
            }
            let layout = if f.fourcc == YUYV {
                Packed422::Yuyv
            } else {
                Packed422::Uyvy
            };
            let [y, u, v] = &mut *planes;
            packed422_to_i420(data, stride, w, h, layout, range, [y, u, v]);
            let planes: &'a [Vec<u8>; 3] = planes;
            let [y, u, v] = planes;
            enc.encode_i420([y, u, v], w, h, out)?;
            Ok(Some(Raw {
                planes: [y, u, v],
                strides: sizes.map(|p| p.0),
                size: (w, h),
            }))
        }
        RGB24 | BGR24 => {
            need(stride * rows)?;
            enc.encode_rgb(data, stride, f.fourcc == BGR24, w, h, out)?;
            Ok(None)
        }
        other => bail!("cannot encode {}", fourcc_name(other)),
    }
}

/// Makes a video-range YU12 frame (laid out as [`yu12_planes`] has it) full
/// range where it lies, `w` x `h` of it: the camera's own buffer, the
/// daemon's until it is queued again, so the frame needs no copy (1.3 MiB
/// at 720p) on its way to the encoder.
pub(super) fn yu12_full_range_in_place(
    data: &mut [u8],
    stride: usize,
    rows: usize,
    (w, h): (usize, usize),
) -> Result<()> {
    yu12_planes(data, stride, rows)?;
    let cs = stride / 2;
    let (y, rest) = data.split_at_mut(stride * rows);
    let (u, v) = rest.split_at_mut(cs * rows.div_ceil(2));
    let sizes = i420_plane_sizes(w, h);
    let range = Range::of(false);
    range.apply_plane(false, &mut y[..stride * sizes[0].1], stride, sizes[0].0);
    for p in [u, v] {
        let n = (cs * sizes[1].1).min(p.len());
        range.apply_plane(true, &mut p[..n], cs, sizes[1].0);
    }
    Ok(())
}

/// A YU12 frame's planes (`rows` luma rows of `stride` bytes, then U and
/// V at half the stride) and their strides.
pub(super) fn yu12_planes(
    data: &[u8],
    stride: usize,
    rows: usize,
) -> Result<([&[u8]; 3], [usize; 3])> {
    let cs = stride / 2;
    let (y_len, c_len) = (stride * rows, cs * rows.div_ceil(2));
    if data.len() < y_len + 2 * c_len {
        bail!(
            "short buffer: {} bytes, expected {}",
            data.len(),
            y_len + 2 * c_len
        );
    }
    let (y, rest) = data.split_at(y_len);
    let (u, v) = rest.split_at(c_len);
    Ok(([y, u, v], [stride, cs, cs]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_full_range_in_place_as_the_copy_makes_it() {
        // 62 x 46 of a 64 x 48 frame whose rows are 72 bytes apart.
        let (stride, rows, size) = (72, 48, (62, 46));
        let frame: Vec<u8> = (0..stride * rows * 3 / 2)
            .map(|i| (i * 37 % 256) as u8)
            .collect();
        let (planes, strides) = yu12_planes(&frame, stride, rows).unwrap();
        let mut copied: [Vec<u8>; 3] = Default::default();
        let widths = Range::of(false).copy_i420(planes, strides, size, &mut copied);
        let mut in_place = frame.clone();
        yu12_full_range_in_place(&mut in_place, stride, rows, size).unwrap();
        let (planes, _) = yu12_planes(&in_place, stride, rows).unwrap();
        let (before, _) = yu12_planes(&frame, stride, rows).unwrap();
        for (i, ((p, c), (b, ((w, h), s)))) in planes
            .iter()
            .zip(&copied)
            .zip(
                before
                    .iter()
                    .zip(i420_plane_sizes(size.0, size.1).into_iter().zip(strides)),
            )
            .enumerate()
        {
            assert_eq!(w, widths[i]);
            for r in 0..p.len() / s {
                let (row, was) = (&p[r * s..(r + 1) * s], &b[r * s..(r + 1) * s]);
                if r < h {
                    assert_eq!(&row[..w], &c[r * w..(r + 1) * w], "plane {i} row {r}");
                    assert_eq!(&row[w..], &was[w..], "plane {i} row {r}: past the picture");
                } else {
                    assert_eq!(row, was, "plane {i} row {r}: below the picture");
                }
            }
        }
        assert!(yu12_full_range_in_place(&mut in_place[..100], stride, rows, size).is_err());
    }

    /// Conversion + encoding throughput for a raw camera format on this
    /// machine (a figure, not a check):
    /// `cargo test --release -p camstream -- --ignored --nocapture raw_capture_encode_speed`
    #[test]
    #[ignore]
    fn raw_capture_encode_speed() {
        // 720p in every raw layout; 1080p in the two libcamera hands over
        // (the Pi's ISP gives YUV420 or NV12), encoded the same way.
        let cases = [(YUYV, 2), (NV12, 0), (YUV420, 0), (RGB24, 3)]
            .map(|(f, bpp)| (f, bpp, 1280usize, 720usize))
            .into_iter()
            .chain([(YUV420, 0, 1920, 1080), (NV12, 0, 1920, 1080)]);
        for (fourcc, bpp, w, h) in cases {
            let stride = if bpp > 0 { w * bpp } else { w };
            let len = if bpp > 0 { stride * h } else { w * h * 3 / 2 };
            // Gradients with some sensor-like noise: about what a camera's
            // frame costs the entropy coder.
            let mut frame: Vec<u8> = (0..len)
                .map(|i| {
                    ((i % stride) / 8 + (i / stride) / 4 + ((i * 2_654_435_761) >> 13) % 12) as u8
                })
                .collect();
            let f = PixFormat {
                fourcc,
                width: w as u32,
                height: h as u32,
                bytesperline: stride as u32,
                sizeimage: len as u32,
                full_range: false,
            };
            let mut enc =
                JpegEncoder::new(80, 30, &crate::source::v4l2::m2m::Choice::Software).unwrap();
            let (mut planes, mut out) = (Default::default(), Vec::new());
            let n = 150;
            let t = std::time::Instant::now();
            for i in 0..n {
                frame[i] = frame[i].wrapping_add(1);
                encode(&mut enc, &mut planes, &f, (w, h), &frame, None, &mut out).unwrap();
            }
            let s = t.elapsed().as_secs_f64();
            println!(
                "{} {w}x{h}: {:.0} frames/s on one core ({:.2} ms/frame, {} KB/frame)",
                fourcc_name(fourcc),
                n as f64 / s,
                s * 1000.0 / n as f64,
                out.len() / 1000
            );
        }
    }
}
