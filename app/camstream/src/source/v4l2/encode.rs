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
