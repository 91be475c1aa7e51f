//! A completed request's picture (YUV420, NV12 or RGB, in libcamera's
//! layout) encoded as JPEG, cropped to the size sent, and the raw picture
//! beside it for an H.264 encoder.

use anyhow::{Result, anyhow, bail};

use super::ffi::{CompletedRequest, PixFormat};
use crate::convert::{Range, i420_plane_sizes, split_uv};
use crate::source::Raw;
use crate::source::jpeg::JpegEncoder;
use crate::source::v4l2::m2m::{CameraBuffers, Dmabuf};

/// Buffers reused from frame to frame.
#[derive(Default)]
pub struct Work {
    /// 4:2:0 planes made here: NV12's chroma split, and planes made full
    /// range where they were not.
    planes: [Vec<u8>; 3],
    pub out: Vec<u8>,
    /// The picture, packed 4:2:0, when asked for.
    pub raw: Vec<u8>,
}

/// Encodes the frame's planes as JPEG into `work.out`, cropped to `w` x `h`;
/// the picture as 4:2:0 planes (None: RGB). Video-range samples (a
/// pipeline that could not give sYCC) are made full range on the way,
/// through a copy where the planes were used in place.
pub fn encode<'a>(
    enc: &mut JpegEncoder,
    work: &'a mut Work,
    f: &PixFormat,
    (w, h): (usize, usize),
    frame: &CompletedRequest<'a>,
) -> Result<Option<Raw<'a>>> {
    let stride = f.stride;
    let rows = f.height;
    let p = &frame.planes;
    let short = |what: &str| anyhow!("{what}: short buffer");
    let range = Range::of(f.full_range);
    match f.format.as_str() {
        "YUV420" => {
            let cs = stride / 2;
            let (y_len, c_len) = (stride * rows, cs * rows.div_ceil(2));
            // Three planes, or one holding all three.
            let (y, u, v) = if frame.plane_count >= 3 {
                (p[0], p[1], p[2])
            } else {
                let all = p[0];
                if all.len() < y_len + 2 * c_len {
                    return Err(short("YUV420"));
                }
                let (y, rest) = all.split_at(y_len);
                let (u, v) = rest.split_at(c_len);
                (y, u, v)
            };
            let c_need = cs * (h / 2 - 1) + w / 2;
            if y.len() < stride * (h - 1) + w || u.len() < c_need || v.len() < c_need {
                return Err(short("YUV420"));
            }
            if !range.is_full() {
                // Made full range: a copy through the lookup, encoded
                // from there.
                let strides =
                    range.copy_i420([y, u, v], [stride, cs, cs], (w, h), &mut work.planes);
                let [y, u, v] = &work.planes;
                enc.encode_planes([y, u, v], strides, w, h, &mut work.out)?;
                return Ok(Some(Raw {
                    planes: [y, u, v],
                    strides,
                    size: (w, h),
                }));
            }
            // The planes one after another in one buffer, as a kernel
            // encoder reads them: it may read them there.
            let planes_at = match frame.plane_count {
                1 => [0, 0, 0],
                _ => [0, y_len, y_len + c_len],
            };
            let camera = frame
                .dmabuf
                .filter(|d| enc.takes_dmabuf() && d.offsets == planes_at)
                .map(|d| {
                    let buffers = CameraBuffers {
                        count: d.buffers,
                        stride,
                        rows,
                    };
                    let buf = Dmabuf {
                        fd: d.fd,
                        index: frame.index,
                        len: d.len,
                    };
                    (buffers, buf)
                });
            enc.encode_from([y, u, v], [stride, cs, cs], w, h, camera, &mut work.out)?;
            Ok(Some(Raw {
                planes: [y, u, v],
                strides: [stride, cs, cs],
                size: (w, h),
            }))
        }
        "NV12" => {
            let y_len = stride * rows;
            let (y, uv) = if frame.plane_count >= 2 {
                (p[0], p[1])
            } else {
                if p[0].len() < y_len + stride * rows.div_ceil(2) {
                    return Err(short("NV12"));
                }
                p[0].split_at(y_len)
            };
            let (cw, ch) = i420_plane_sizes(w, h)[1];
            if y.len() < stride * (h - 1) + w || uv.len() < stride * (ch - 1) + cw * 2 {
                return Err(short("NV12"));
            }
            let [luma, u, v] = &mut work.planes;
            u.resize(cw * ch, 0);
            v.resize(cw * ch, 0);
            split_uv(uv, stride, (cw, ch), range, u, v);
            // Luma where it lies unless it needs the lookup.
            let (y, y_stride) = if range.is_full() {
                (y, stride)
            } else {
                luma.resize(w * h, 0);
                range.copy_plane(false, y, stride, w, luma);
                (&work.planes[0][..], w)
            };
            let strides = [y_stride, cw, cw];
            let [_, u, v] = &work.planes;
            enc.encode_planes([y, u, v], strides, w, h, &mut work.out)?;
            Ok(Some(Raw {
                planes: [y, u, v],
                strides,
                size: (w, h),
            }))
        }
        // libcamera names packed RGB as DRM does, by the order in a
        // little-endian word: BGR888 is R, G, B in memory.
        fmt @ ("BGR888" | "RGB888") => {
            if p[0].len() < stride * (h - 1) + w * 3 {
                return Err(short(fmt));
            }
            enc.encode_rgb(p[0], stride, fmt == "RGB888", w, h, &mut work.out)?;
            Ok(None)
        }
        other => bail!("cannot encode {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame<'a>(planes: [&'a [u8]; 3], n: usize) -> CompletedRequest<'a> {
        CompletedRequest {
            index: 0,
            sequence: 0,
            timestamp_ns: 0,
            skipped: 0,
            failed: 0,
            planes,
            plane_count: n,
            dmabuf: None,
        }
    }

    /// The same picture in each layout libcamera may hand over encodes to
    /// the same JPEG (YUV420 and NV12) or a close one (RGB).
    #[test]
    fn every_layout_encodes_the_same_picture() {
        let (w, h, stride) = (64usize, 48usize, 80usize);
        let y: Vec<u8> = (0..stride * h)
            .map(|i| ((i % stride) * 3 + (i / stride)) as u8)
            .collect();
        let u: Vec<u8> = (0..stride / 2 * h / 2)
            .map(|i| (100 + i % 40) as u8)
            .collect();
        let v: Vec<u8> = (0..stride / 2 * h / 2)
            .map(|i| (150 - i % 30) as u8)
            .collect();
        let mut nv = vec![0u8; stride * h / 2];
        for r in 0..h / 2 {
            for x in 0..w / 2 {
                nv[r * stride + 2 * x] = u[r * stride / 2 + x];
                nv[r * stride + 2 * x + 1] = v[r * stride / 2 + x];
            }
        }
        let mut enc =
            JpegEncoder::new(90, 30, &crate::source::v4l2::m2m::Choice::Software).unwrap();
        let mut work = Work::default();
        let fmt = |name: &str| PixFormat {
            width: w,
            height: h,
            stride,
            format: name.into(),
            full_range: true,
            flips: 0,
            can_flip: false,
        };
        encode(
            &mut enc,
            &mut work,
            &fmt("YUV420"),
            (w, h),
            &frame([&y, &u, &v], 3),
        )
        .unwrap();
        let three = work.out.clone();
        let one: Vec<u8> = [&y[..], &u, &v].concat();
        encode(
            &mut enc,
            &mut work,
            &fmt("YUV420"),
            (w, h),
            &frame([&one, &[], &[]], 1),
        )
        .unwrap();
        assert_eq!(work.out, three);
        encode(
            &mut enc,
            &mut work,
            &fmt("NV12"),
            (w, h),
            &frame([&y, &nv, &[]], 2),
        )
        .unwrap();
        assert_eq!(work.out, three);
        // Video range (a pipeline that gave no sYCC): made full range, the
        // same from both layouts, and not the picture as it came.
        let video = |name: &str| PixFormat {
            full_range: false,
            ..fmt(name)
        };
        let planes = frame([&y, &u, &v], 3);
        encode(&mut enc, &mut work, &video("YUV420"), (w, h), &planes).unwrap();
        let stretched = work.out.clone();
        assert_ne!(stretched, three);
        let nv12 = frame([&y, &nv, &[]], 2);
        encode(&mut enc, &mut work, &video("NV12"), (w, h), &nv12).unwrap();
        assert_eq!(work.out, stretched);
        // Cropped to a multiple of 8 by the caller's size.
        encode(
            &mut enc,
            &mut work,
            &fmt("YUV420"),
            (56, 40),
            &frame([&y, &u, &v], 3),
        )
        .unwrap();
        assert_ne!(work.out, three);
        let rgb = PixFormat {
            stride: w * 3,
            ..fmt("BGR888")
        };
        let px: Vec<u8> = (0..w * 3 * h).map(|i| (i % 251) as u8).collect();
        encode(
            &mut enc,
            &mut work,
            &rgb,
            (w, h),
            &frame([&px, &[], &[]], 1),
        )
        .unwrap();
        assert!(work.out.starts_with(&[0xFF, 0xD8]));
        // Too short a buffer is an error, not a read past its end.
        let e = encode(
            &mut enc,
            &mut work,
            &fmt("YUV420"),
            (w, h),
            &frame([&y[..100], &[], &[]], 1),
        );
        assert_eq!(e.unwrap_err().to_string(), "YUV420: short buffer");
        let e = encode(
            &mut enc,
            &mut work,
            &fmt("XRGB8888"),
            (w, h),
            &frame([&px, &[], &[]], 1),
        );
        assert_eq!(e.unwrap_err().to_string(), "cannot encode XRGB8888");
    }
}
