//! Pixel conversions into the planar 4:2:0 the JPEG encoder takes. Pure and
//! allocation-free: callers own the destination planes and reuse them.

/// Sizes of the planes of a 4:2:0 image: Y is `width x height`, U and V are
/// half that in both directions, rounded up.
pub fn i420_plane_sizes(width: usize, height: usize) -> [(usize, usize); 3] {
    let (cw, ch) = (width.div_ceil(2), height.div_ceil(2));
    [(width, height), (cw, ch), (cw, ch)]
}

/// How a source's samples become JFIF's: JPEG (and the H.264 stream made
/// of its pictures) takes full-range samples, 0-255; YUV cameras and
/// Camera Modules that cannot be asked otherwise give video range (luma
/// 16-235, chroma 16-240), which decoded as full range is washed out:
/// black 16, white 235. The lookup is applied where a conversion or copy
/// touches each sample anyway, never as a pass of its own.
pub struct Range {
    luma: [u8; 256],
    chroma: [u8; 256],
}

impl Range {
    /// Full range already: the samples as they are.
    pub const FULL: Range = Range::table(false);
    /// BT.601/709 video range stretched to full range.
    pub const VIDEO: Range = Range::table(true);

    pub fn of(full_range: bool) -> &'static Range {
        if full_range {
            &Range::FULL
        } else {
            &Range::VIDEO
        }
    }

    const fn table(video: bool) -> Range {
        let (mut luma, mut chroma) = ([0u8; 256], [0u8; 256]);
        let mut i = 0;
        while i < 256 {
            if video {
                // Rounded to nearest, clamped: (v - 16) * 255 / 219 and
                // 128 + (v - 128) * 255 / 224.
                let y = ((i as i32 - 16) * 255 * 2 + 219) / (219 * 2);
                let c = 128
                    + ((i as i32 - 128) * 255 * 2 + if i >= 128 { 224 } else { -224 }) / (224 * 2);
                luma[i] = clamp(y);
                chroma[i] = clamp(c);
            } else {
                luma[i] = i as u8;
                chroma[i] = i as u8;
            }
            i += 1;
        }
        Range { luma, chroma }
    }

    pub fn is_full(&self) -> bool {
        self.luma[16] == 16
    }

    /// A 4:2:0 picture `size` large (planes `strides` apart) into `dst`'s
    /// planes, tightly packed, through the lookup; their strides.
    pub fn copy_i420(
        &self,
        src: [&[u8]; 3],
        strides: [usize; 3],
        (w, h): (usize, usize),
        dst: &mut [Vec<u8>; 3],
    ) -> [usize; 3] {
        let sizes = i420_plane_sizes(w, h);
        for (i, (d, (pw, ph))) in dst.iter_mut().zip(sizes).enumerate() {
            d.resize(pw * ph, 0);
            self.copy_plane(i > 0, src[i], strides[i], pw, d);
        }
        sizes.map(|p| p.0)
    }

    /// A plane's rows (`stride` bytes apart), `width` samples each, through
    /// the luma or chroma lookup where they lie.
    pub fn apply_plane(&self, chroma: bool, plane: &mut [u8], stride: usize, width: usize) {
        let lut = if chroma { &self.chroma } else { &self.luma };
        for row in plane.chunks_mut(stride) {
            let n = width.min(row.len());
            for s in &mut row[..n] {
                *s = lut[usize::from(*s)];
            }
        }
    }

    /// A plane's rows (`stride` bytes apart in `src`) into `dst`, tightly
    /// packed, `width` samples each, through the luma or chroma lookup.
    pub fn copy_plane(
        &self,
        chroma: bool,
        src: &[u8],
        stride: usize,
        width: usize,
        dst: &mut [u8],
    ) {
        let lut = if chroma { &self.chroma } else { &self.luma };
        for (d, s) in dst.chunks_exact_mut(width).zip(src.chunks(stride)) {
            for (d, &s) in d.iter_mut().zip(&s[..width]) {
                *d = lut[usize::from(s)];
            }
        }
    }
}

const fn clamp(v: i32) -> u8 {
    if v < 0 {
        0
    } else if v > 255 {
        255
    } else {
        v as u8
    }
}

/// Which byte of a packed 4:2:2 macropixel holds what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packed422 {
    /// Y0 U Y1 V.
    Yuyv,
    /// U Y0 V Y1.
    Uyvy,
}

/// Packed 4:2:2 rows (`stride` bytes apart) to 4:2:0 planes of `width` and
/// `width / 2` bytes per row, through `range`. Chroma of each row pair is
/// averaged. `width` and `height` must be even.
pub fn packed422_to_i420(
    src: &[u8],
    stride: usize,
    width: usize,
    height: usize,
    layout: Packed422,
    range: &Range,
    [y, u, v]: [&mut [u8]; 3],
) {
    let (ly, lc) = (&range.luma, &range.chroma);
    debug_assert!(width % 2 == 0 && height % 2 == 0);
    let (yo, uo, vo) = match layout {
        Packed422::Yuyv => (0, 1, 3),
        Packed422::Uyvy => (1, 0, 2),
    };
    let cw = width / 2;
    for row in 0..height / 2 {
        let a = &src[2 * row * stride..][..width * 2];
        let b = &src[(2 * row + 1) * stride..][..width * 2];
        let (ya, yb) = y[2 * row * width..][..2 * width].split_at_mut(width);
        for (x, (pa, pb)) in a.chunks_exact(4).zip(b.chunks_exact(4)).enumerate() {
            ya[2 * x] = ly[usize::from(pa[yo])];
            ya[2 * x + 1] = ly[usize::from(pa[yo + 2])];
            yb[2 * x] = ly[usize::from(pb[yo])];
            yb[2 * x + 1] = ly[usize::from(pb[yo + 2])];
            let avg = |a: u8, b: u8| (u16::from(a) + u16::from(b)).div_ceil(2) as usize;
            u[row * cw + x] = lc[avg(pa[uo], pb[uo])];
            v[row * cw + x] = lc[avg(pa[vo], pb[vo])];
        }
    }
}

/// Splits an interleaved CbCr plane (NV12) into U and V planes, through
/// `range`.
pub fn split_uv(
    src: &[u8],
    stride: usize,
    (cw, ch): (usize, usize),
    range: &Range,
    u: &mut [u8],
    v: &mut [u8],
) {
    let lc = &range.chroma;
    for row in 0..ch {
        let s = &src[row * stride..][..cw * 2];
        for (x, p) in s.chunks_exact(2).enumerate() {
            u[row * cw + x] = lc[usize::from(p[0])];
            v[row * cw + x] = lc[usize::from(p[1])];
        }
    }
}

/// Decoded planes (`sizes` each; a gray frame's chroma is not used) made
/// the 4:2:0 planes of `target`: copied where a plane has the size already,
/// cut where luma has one row or column more (an odd-sized frame), else
/// resampled.
pub fn planes_to_i420(
    decoded: &[Vec<u8>; 3],
    sizes: [(usize, usize); 3],
    gray: bool,
    target: (usize, usize),
    i420: &mut [Vec<u8>; 3],
) {
    let want = i420_plane_sizes(target.0, target.1);
    for i in 0..3 {
        let (cw, ch) = want[i];
        let (sw, sh) = sizes[i];
        let dst = &mut i420[i];
        dst.resize(cw * ch, 128);
        if i > 0 && gray {
            dst.fill(128);
        } else if (sw, sh) == (cw, ch) {
            dst.copy_from_slice(&decoded[i][..cw * ch]);
        } else if i == 0 && sw >= cw && sh >= ch && sw - cw <= 1 && sh - ch <= 1 {
            for (row, d) in dst.chunks_exact_mut(cw).enumerate() {
                d.copy_from_slice(&decoded[0][row * sw..row * sw + cw]);
            }
        } else {
            resample_plane(&decoded[i], sw, sh, dst, cw, ch);
        }
    }
}

/// Resizes a plane by an integer-ish ratio: box average when shrinking,
/// nearest sample when growing. Used to bring the chroma of 4:4:4, 4:1:1,
/// 4:4:0, ... JPEGs to 4:2:0.
pub fn resample_plane(src: &[u8], sw: usize, sh: usize, dst: &mut [u8], dw: usize, dh: usize) {
    for dy in 0..dh {
        let y0 = dy * sh / dh;
        let y1 = ((dy + 1) * sh / dh).max(y0 + 1).min(sh);
        for dx in 0..dw {
            let x0 = dx * sw / dw;
            let x1 = ((dx + 1) * sw / dw).max(x0 + 1).min(sw);
            let mut sum = 0u32;
            for r in y0..y1 {
                sum += src[r * sw + x0..r * sw + x1]
                    .iter()
                    .map(|&p| u32::from(p))
                    .sum::<u32>();
            }
            let n = ((y1 - y0) * (x1 - x0)) as u32;
            dst[dy * dw + dx] = ((sum + n / 2) / n) as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planes_become_i420_of_the_target() {
        // A 5x3 frame of 4:4:4 (chroma as large as luma) to 4x2 4:2:0.
        let luma: Vec<u8> = (0..15).collect();
        let decoded = [luma, vec![100; 15], vec![200; 15]];
        let mut out: [Vec<u8>; 3] = Default::default();
        planes_to_i420(&decoded, [(5, 3); 3], false, (4, 2), &mut out);
        // Luma cut to 4x2, rows kept; chroma averaged down to 2x1.
        assert_eq!(out[0], [0, 1, 2, 3, 5, 6, 7, 8]);
        assert_eq!(
            (out[1].as_slice(), out[2].as_slice()),
            (&[100, 100][..], &[200, 200][..])
        );
        // Gray: neutral chroma.
        planes_to_i420(&decoded, [(5, 3), (0, 0), (0, 0)], true, (4, 2), &mut out);
        assert_eq!(out[1], [128, 128]);
    }

    #[test]
    fn yuyv_and_uyvy() {
        // 4x2 image: two macropixels per row.
        let yuyv = [
            10, 100, 11, 200, 12, 102, 13, 202, //
            20, 110, 21, 210, 22, 112, 23, 212,
        ];
        let (mut y, mut u, mut v) = ([0; 8], [0; 2], [0; 2]);
        packed422_to_i420(
            &yuyv,
            8,
            4,
            2,
            Packed422::Yuyv,
            &Range::FULL,
            [&mut y, &mut u, &mut v],
        );
        assert_eq!(y, [10, 11, 12, 13, 20, 21, 22, 23]);
        assert_eq!(u, [105, 107]);
        assert_eq!(v, [205, 207]);
        let uyvy: Vec<u8> = yuyv.chunks_exact(2).flat_map(|p| [p[1], p[0]]).collect();
        let (mut y2, mut u2, mut v2) = ([0; 8], [0; 2], [0; 2]);
        packed422_to_i420(
            &uyvy,
            8,
            4,
            2,
            Packed422::Uyvy,
            &Range::FULL,
            [&mut y2, &mut u2, &mut v2],
        );
        assert_eq!((y2, u2, v2), (y, u, v));
    }

    #[test]
    fn strides_are_honoured() {
        // Rows padded to 12 bytes; padding must not leak in.
        let mut src = vec![0xee; 24];
        src[..8].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        src[12..20].copy_from_slice(&[9, 10, 11, 12, 13, 14, 15, 16]);
        let (mut y, mut u, mut v) = ([0; 8], [0; 2], [0; 2]);
        packed422_to_i420(
            &src,
            12,
            4,
            2,
            Packed422::Yuyv,
            &Range::FULL,
            [&mut y, &mut u, &mut v],
        );
        assert_eq!(y, [1, 3, 5, 7, 9, 11, 13, 15]);
        let nv = [1, 2, 3, 4, 0xee, 5, 6, 7, 8, 0xee];
        let (mut u, mut v) = ([0; 4], [0; 4]);
        split_uv(&nv, 5, (2, 2), &Range::FULL, &mut u, &mut v);
        assert_eq!((u, v), ([1, 3, 5, 7], [2, 4, 6, 8]));
    }

    #[test]
    fn video_range_becomes_full_range() {
        let r = &Range::VIDEO;
        // Black, white and the extremes of chroma land on JFIF's ends;
        // grey stays grey; out-of-range samples clamp.
        assert_eq!(
            [r.luma[16], r.luma[235], r.luma[0], r.luma[255]],
            [0, 255, 0, 255]
        );
        assert_eq!([r.chroma[16], r.chroma[128], r.chroma[240]], [0, 128, 255]);
        // 75 % white (180 in video range) is 191 in full range.
        assert_eq!(r.luma[180], 191);
        assert!((0..255).all(|i| r.luma[i] <= r.luma[i + 1] && r.chroma[i] <= r.chroma[i + 1]));
        assert!(Range::FULL.is_full() && !r.is_full());
        // A plane with padded rows, copied through the lookup.
        let src = [16, 235, 128, 0xee, 180, 255, 0, 0xee];
        let mut dst = [0; 6];
        r.copy_plane(false, &src, 4, 3, &mut dst);
        assert_eq!(dst, [0, 255, 130, 191, 255, 0]);
        Range::FULL.copy_plane(true, &src, 4, 3, &mut dst);
        assert_eq!(dst, [16, 235, 128, 180, 255, 0]);
        // YUYV through it: luma and the averaged chroma both stretched.
        let yuyv = [16, 16, 235, 240, 16, 16, 235, 240];
        let (mut y, mut u, mut v) = ([0; 4], [0; 1], [0; 1]);
        packed422_to_i420(&yuyv, 4, 2, 2, Packed422::Yuyv, r, [&mut y, &mut u, &mut v]);
        assert_eq!((y, u, v), ([0, 255, 0, 255], [0], [255]));
    }

    /// What the lookup costs where it is added (a figure, not a check):
    /// `cargo test --release -p camstream -- --ignored --nocapture range_lookup_cost`
    #[test]
    #[ignore]
    fn range_lookup_cost() {
        let (w, h) = (1920, 1080);
        let yuyv: Vec<u8> = (0..w * h * 2).map(|i| (i * 7 % 251) as u8).collect();
        let [(yw, yh), (cw, ch), _] = i420_plane_sizes(w, h);
        let (mut y, mut u, mut v) = (vec![0; yw * yh], vec![0; cw * ch], vec![0; cw * ch]);
        let n = 100;
        let time = |f: &mut dyn FnMut()| {
            let t = std::time::Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_secs_f64() * 1000.0 / f64::from(n)
        };
        for (name, range) in [("full", &Range::FULL), ("video", &Range::VIDEO)] {
            let ms = time(&mut || {
                let planes = [&mut y[..], &mut u[..], &mut v[..]];
                packed422_to_i420(&yuyv, w * 2, w, h, Packed422::Yuyv, range, planes);
                std::hint::black_box(&y);
            });
            println!("YUYV {w}x{h} to 4:2:0, {name} range: {ms:.2} ms/frame");
        }
        // YU12 in video range: the planes copied through the lookup, where
        // full range uses them in place (no copy at all).
        let src = &yuyv[..w * h * 3 / 2];
        let ms = time(&mut || {
            Range::VIDEO.copy_plane(false, &src[..w * h], w, w, &mut y);
            Range::VIDEO.copy_plane(true, &src[w * h..][..cw * ch], cw, cw, &mut u);
            Range::VIDEO.copy_plane(true, &src[w * h + cw * ch..], cw, cw, &mut v);
            std::hint::black_box(&v);
        });
        println!("YU12 {w}x{h}, video range: the copy through the lookup {ms:.2} ms/frame");
        let ms = time(&mut || {
            y.copy_from_slice(&src[..w * h]);
            std::hint::black_box(&y);
        });
        println!("  (a plain copy of its luma: {ms:.2} ms/frame)");
    }

    #[test]
    fn resampling() {
        // 4:4:4 -> 4:2:0: 2x2 box average.
        let src = [0, 2, 10, 20, 4, 6, 30, 40];
        let mut dst = [0; 2];
        resample_plane(&src, 4, 2, &mut dst, 2, 1);
        assert_eq!(dst, [3, 25]);
        // 4:1:1 -> 4:2:0: twice as wide, half as high.
        let src = [8, 16, 24, 32];
        let mut dst = [0; 4];
        resample_plane(&src, 2, 2, &mut dst, 4, 1);
        assert_eq!(dst, [16, 16, 24, 24]);
        // Same size: a copy; odd sizes do not panic.
        let src: Vec<u8> = (0..35).collect();
        let mut dst = [0; 35];
        resample_plane(&src, 7, 5, &mut dst, 7, 5);
        assert_eq!(&dst[..], &src[..]);
        let mut small = [0; 6];
        resample_plane(&src, 7, 5, &mut small, 3, 2);
    }
}
