//! What a sequence parameter set says of colour. Pictures decoded from
//! JPEG have full-range samples and BT.601's matrix (JFIF); an SPS with
//! no VUI (OpenH264 writes none) leaves players to take video range and,
//! for HD, often BT.709: blacks and whites stretched, colours shifted.
//! [`signal_jpeg_colour`] makes the SPS of an access unit say so: a VUI
//! where it has none, the video signal type in its VUI (OpenH264's and
//! libx264's have none; a hardware encoder's may say video range, as it
//! is told nothing of the samples it codes).
//!
//! No allocation: the SPS is rewritten in fixed buffers and spliced into
//! the access unit, which keeps its capacity.

use alloc::vec::Vec;
use core::ops::Range;

use crate::nal;

/// The longest SPS rewritten (header and emulation prevention included):
/// a Baseline SPS is about 10 bytes; one this long carries scaling lists
/// and is left as it is.
pub const MAX_SPS: usize = 128;

/// Room for the rewritten SPS: at most 5 bytes more, and emulation
/// prevention at most one byte in three.
const OUT: usize = MAX_SPS + MAX_SPS / 2 + 8;

/// VUI fields (H.264 E.1.1): video_format 5 (unspecified), full range,
/// colour_primaries and transfer_characteristics 2 (unspecified),
/// matrix_coefficients 6 (BT.601, as JFIF has it).
const VIDEO_FORMAT_UNSPECIFIED: u32 = 5;
const UNSPECIFIED: u32 = 2;
const MATRIX_BT601: u32 = 6;

/// Makes the SPS at `sps` in Annex B `au` (as [`AccessUnit::sps_at`]
/// finds it) say its samples are full range with BT.601's matrix, if it
/// does not; whether it changed `au`.
///
/// [`AccessUnit::sps_at`]: crate::AccessUnit::sps_at
pub fn signal_jpeg_colour(au: &mut Vec<u8>, sps: Range<usize>) -> bool {
    let Some(unit) = au.get(sps.clone()) else {
        return false;
    };
    let mut out = [0u8; OUT];
    let Some(n) = with_jpeg_colour(unit, &mut out) else {
        return false;
    };
    au.splice(sps, out[..n].iter().copied());
    true
}

/// `sps` (a NAL unit: header, then its payload with emulation prevention)
/// saying its samples are full range with BT.601's matrix, written into
/// `out`: its length; None if it says so already, does not parse, or is
/// longer than [`MAX_SPS`].
pub fn with_jpeg_colour(sps: &[u8], out: &mut [u8; OUT]) -> Option<usize> {
    let (&header, payload) = sps.split_first()?;
    if nal::unit_type(header) != nal::SPS || sps.len() > MAX_SPS {
        return None;
    }
    let mut rbsp = [0u8; MAX_SPS];
    let rbsp = unescape(payload, &mut rbsp)?;
    // rbsp_stop_one_bit: the last bit set.
    let last = rbsp.iter().rposition(|&b| b != 0)?;
    let stop = last * 8 + 7 - rbsp[last].trailing_zeros() as usize;
    let mut r = Reader { data: rbsp, pos: 0 };
    skip_to_vui(&mut r)?;
    let mut at = r.pos;
    let vui = r.bit()?;
    let mut w = Writer {
        data: [0; OUT],
        pos: 0,
    };
    // What is replaced: with no VUI, its flag; with one, its video signal
    // type (its flag, and the fields it says are there).
    let end = if vui {
        if r.bit()? && r.bits(8)? == 255 {
            // aspect_ratio_info_present_flag, aspect_ratio_idc
            // Extended_SAR: sar_width, sar_height.
            r.bits(32)?;
        }
        if r.bit()? {
            r.bit()?; // overscan_info_present_flag, overscan_appropriate_flag
        }
        at = r.pos;
        if r.bit()? {
            // video_signal_type_present_flag: video_format, then the
            // range and matrix, which must be JPEG's already to stay.
            r.bits(3)?;
            let full = r.bit()?;
            let matrix = match r.bit()? {
                true => r.bits(24)? & 0xff,
                false => 0,
            };
            if full && matrix == MATRIX_BT601 {
                return None;
            }
        }
        r.pos
    } else {
        at + 1
    };
    if end > stop {
        return None;
    }
    copy_bits(rbsp, 0..at, &mut w)?;
    if !vui {
        w.put(1, 1); // vui_parameters_present_flag
        w.put(0, 1); // aspect_ratio_info_present_flag
        w.put(0, 1); // overscan_info_present_flag
    }
    w.put(1, 1); // video_signal_type_present_flag
    w.put(VIDEO_FORMAT_UNSPECIFIED, 3);
    w.put(1, 1); // video_full_range_flag
    w.put(1, 1); // colour_description_present_flag
    w.put(UNSPECIFIED, 8);
    w.put(UNSPECIFIED, 8);
    w.put(MATRIX_BT601, 8);
    if !vui {
        // chroma_loc_info, timing_info, NAL and VCL HRD parameters,
        // pic_struct and bitstream_restriction: none.
        w.put(0, 6);
    }
    // The rest as it was (the VUI's later fields), then the stop bit.
    copy_bits(rbsp, end..stop, &mut w)?;
    w.put(1, 1);
    let len = w.pos.div_ceil(8);
    out[0] = header;
    Some(1 + escape(&w.data[..len], &mut out[1..]))
}

/// Bits `range` of `data`, appended to `w`.
fn copy_bits(data: &[u8], range: Range<usize>, w: &mut Writer) -> Option<()> {
    let mut r = Reader {
        data,
        pos: range.start,
    };
    while r.pos < range.end {
        let n = (range.end - r.pos).min(8);
        w.put(r.bits(n)?, n);
    }
    Some(())
}

/// Reads an SPS's fields up to vui_parameters_present_flag (H.264
/// 7.3.2.1.1), which is where it leaves `r`; that bit's position.
fn skip_to_vui(r: &mut Reader<'_>) -> Option<usize> {
    let profile = r.bits(8)?;
    r.bits(16)?; // constraint flags, level_idc
    r.ue()?; // seq_parameter_set_id
    if matches!(
        profile,
        100 | 110 | 122 | 244 | 44 | 83 | 86 | 118 | 128 | 138 | 139 | 134 | 135
    ) {
        let chroma_format = r.ue()?;
        if chroma_format == 3 {
            r.bit()?; // separate_colour_plane_flag
        }
        r.ue()?; // bit_depth_luma_minus8
        r.ue()?; // bit_depth_chroma_minus8
        r.bit()?; // qpprime_y_zero_transform_bypass_flag
        if r.bit()? {
            // seq_scaling_matrix_present_flag
            let lists = if chroma_format == 3 { 12 } else { 8 };
            for i in 0..lists {
                if r.bit()? {
                    skip_scaling_list(r, if i < 6 { 16 } else { 64 })?;
                }
            }
        }
    }
    r.ue()?; // log2_max_frame_num_minus4
    match r.ue()? {
        0 => {
            r.ue()?; // log2_max_pic_order_cnt_lsb_minus4
        }
        1 => {
            r.bit()?; // delta_pic_order_always_zero_flag
            r.ue()?; // offset_for_non_ref_pic (se: same length)
            r.ue()?; // offset_for_top_to_bottom_field
            for _ in 0..r.ue()? {
                r.ue()?; // offset_for_ref_frame
            }
        }
        2 => {}
        _ => return None,
    }
    r.ue()?; // max_num_ref_frames
    r.bit()?; // gaps_in_frame_num_value_allowed_flag
    r.ue()?; // pic_width_in_mbs_minus1
    r.ue()?; // pic_height_in_map_units_minus1
    if !r.bit()? {
        // frame_mbs_only_flag clear
        r.bit()?; // mb_adaptive_frame_field_flag
    }
    r.bit()?; // direct_8x8_inference_flag
    if r.bit()? {
        // frame_cropping_flag: four offsets
        for _ in 0..4 {
            r.ue()?;
        }
    }
    Some(r.pos)
}

/// Passes over a scaling list of `size` entries (7.3.2.1.1.1).
fn skip_scaling_list(r: &mut Reader<'_>, size: usize) -> Option<()> {
    let (mut last, mut next) = (8i64, 8i64);
    for _ in 0..size {
        if next != 0 {
            let delta = r.se()?;
            next = (last + delta + 256).rem_euclid(256);
        }
        if next != 0 {
            last = next;
        }
    }
    Some(())
}

/// The payload without emulation prevention (00 00 03 becomes 00 00);
/// None if `buf` is too short.
fn unescape<'a>(payload: &[u8], buf: &'a mut [u8]) -> Option<&'a [u8]> {
    let (mut n, mut zeros) = (0, 0);
    for &b in payload {
        if zeros >= 2 && b == 3 {
            zeros = 0;
            continue;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        *buf.get_mut(n)? = b;
        n += 1;
    }
    Some(&buf[..n])
}

/// `rbsp` with emulation prevention, into `out`: its length.
fn escape(rbsp: &[u8], out: &mut [u8]) -> usize {
    let (mut n, mut zeros) = (0, 0);
    for &b in rbsp {
        if zeros >= 2 && b <= 3 {
            out[n] = 3;
            n += 1;
            zeros = 0;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        out[n] = b;
        n += 1;
    }
    n
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn bit(&mut self) -> Option<bool> {
        let byte = *self.data.get(self.pos / 8)?;
        let b = byte >> (7 - self.pos % 8) & 1;
        self.pos += 1;
        Some(b == 1)
    }

    fn bits(&mut self, n: usize) -> Option<u32> {
        let mut v = 0;
        for _ in 0..n {
            v = v << 1 | u32::from(self.bit()?);
        }
        Some(v)
    }

    /// ue(v), Exp-Golomb (9.1).
    fn ue(&mut self) -> Option<u32> {
        let mut zeros = 0;
        while !self.bit()? {
            zeros += 1;
            if zeros > 31 {
                return None;
            }
        }
        let rest = self.bits(zeros)?;
        Some(((1u64 << zeros) - 1 + u64::from(rest)).min(u64::from(u32::MAX)) as u32)
    }

    /// se(v) (9.1.1).
    fn se(&mut self) -> Option<i64> {
        let k = i64::from(self.ue()?);
        Some(if k % 2 == 1 { (k + 1) / 2 } else { -(k / 2) })
    }
}

struct Writer {
    data: [u8; OUT],
    pos: usize,
}

impl Writer {
    /// The `n` low bits of `v`, most significant first.
    fn put(&mut self, v: u32, n: usize) {
        for i in (0..n).rev() {
            if v >> i & 1 == 1 {
                self.data[self.pos / 8] |= 0x80 >> (self.pos % 8);
            }
            self.pos += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::AccessUnit;
    use crate::annexb::nal_units;
    use proptest::prelude::*;

    /// OpenH264's SPS for 1280x720 Constrained Baseline (camstream's
    /// software encoder): a VUI with bitstream_restriction, no video
    /// signal type.
    const OPENH264_720P: [u8; 14] = [
        0x67, 0x42, 0xc0, 0x1f, 0x8c, 0x68, 0x05, 0x00, 0x5b, 0xa0, 0x1e, 0x11, 0x08, 0xd4,
    ];
    /// The same fields with no VUI.
    const NO_VUI_720P: [u8; 10] = [0x67, 0x42, 0xc0, 0x1f, 0x8c, 0x68, 0x05, 0x00, 0x5b, 0x90];

    /// (VUI present, video signal type present, full range, matrix) and
    /// the bits after the colour description, to the stop bit.
    fn colour(sps: &[u8]) -> Option<(bool, bool, bool, u32, alloc::vec::Vec<bool>)> {
        let mut buf = [0u8; OUT];
        let rbsp = unescape(&sps[1..], &mut buf)?;
        let mut r = Reader { data: rbsp, pos: 0 };
        skip_to_vui(&mut r)?;
        if !r.bit()? {
            return Some((false, false, false, 0, alloc::vec![]));
        }
        if r.bit()? && r.bits(8)? == 255 {
            r.bits(32)?;
        }
        if r.bit()? {
            r.bit()?;
        }
        let (mut vst, mut full, mut matrix) = (false, false, 0);
        if r.bit()? {
            vst = true;
            r.bits(3)?;
            full = r.bit()?;
            if r.bit()? {
                r.bits(16)?;
                matrix = r.bits(8)?;
            }
        }
        let mut rest = alloc::vec![];
        while let Some(b) = r.bit() {
            rest.push(b);
        }
        // Up to the stop bit.
        while rest.pop() == Some(false) {}
        Some((true, vst, full, matrix, rest))
    }

    #[test]
    fn the_signal_type_goes_into_openh264s_vui() {
        let before = colour(&OPENH264_720P).unwrap();
        assert!(before.0 && !before.1);
        let mut out = [0u8; OUT];
        let n = with_jpeg_colour(&OPENH264_720P, &mut out).unwrap();
        let after = colour(&out[..n]).unwrap();
        assert_eq!((after.0, after.1, after.2, after.3), (true, true, true, 6));
        // The VUI's later fields (bitstream_restriction) as they were.
        assert_eq!(after.4, before.4);
        assert_eq!(out[..4], OPENH264_720P[..4]);
        assert_eq!(with_jpeg_colour(&out[..n], &mut [0u8; OUT]), None);
    }

    #[test]
    fn a_vui_is_added_where_there_is_none() {
        assert!(!colour(&NO_VUI_720P).unwrap().0);
        let mut out = [0u8; OUT];
        let n = with_jpeg_colour(&NO_VUI_720P, &mut out).unwrap();
        let after = colour(&out[..n]).unwrap();
        assert_eq!((after.0, after.1, after.2, after.3), (true, true, true, 6));
        assert_eq!(with_jpeg_colour(&out[..n], &mut [0u8; OUT]), None);
    }

    /// An SPS whose VUI says video range and BT.709's matrix, as a
    /// hardware encoder told nothing may write: made full range, BT.601,
    /// the rest as it was.
    #[test]
    fn a_video_range_signal_is_replaced() {
        let mut full = [0u8; OUT];
        let n = with_jpeg_colour(&OPENH264_720P, &mut full).unwrap();
        // Its video_full_range_flag cleared and matrix_coefficients 1.
        let mut rbsp = [0u8; OUT];
        let len = unescape(&full[1..n], &mut rbsp).unwrap().len();
        let mut r = Reader {
            data: &rbsp[..len],
            pos: 0,
        };
        skip_to_vui(&mut r).unwrap();
        let full_at = r.pos + 4 + 3; // VUI, aspect, overscan, signal type flags; video_format
        let matrix_at = full_at + 2 + 16;
        let mut bits = Writer {
            data: [0; OUT],
            pos: 0,
        };
        copy_bits(&rbsp[..len], 0..full_at, &mut bits).unwrap();
        bits.put(0, 1);
        copy_bits(&rbsp[..len], full_at + 1..matrix_at, &mut bits).unwrap();
        bits.put(1, 8);
        copy_bits(&rbsp[..len], matrix_at + 8..len * 8, &mut bits).unwrap();
        let mut video = [0u8; OUT];
        video[0] = 0x67;
        let m = 1 + escape(&bits.data[..len], &mut video[1..]);
        let before = colour(&video[..m]).unwrap();
        assert_eq!((before.1, before.2, before.3), (true, false, 1));

        let mut out = [0u8; OUT];
        let k = with_jpeg_colour(&video[..m], &mut out).unwrap();
        let after = colour(&out[..k]).unwrap();
        assert_eq!((after.1, after.2, after.3), (true, true, 6));
        assert_eq!(after.4, before.4);
    }

    /// libx264's SPS (Baseline; High with 8x8 transform), recorded by
    /// FFmpeg 5.1: a VUI with bitstream_restriction and no video signal
    /// type, as OpenH264's.
    #[test]
    fn libx264s_sps_too() {
        for name in [
            "ffmpeg-5.1-libx264-baseline-aud-96x64.h264",
            "ffmpeg-5.1-libx264-high-4-slices-aud-160x120.h264",
        ] {
            let path = alloc::format!("{}/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
            let data = std::fs::read(path).unwrap();
            let sps = nal_units(&data)
                .find(|u| nal::unit_type(u[0]) == nal::SPS)
                .unwrap();
            let before = colour(sps).unwrap();
            assert!(before.0 && !before.1, "{name}");
            let mut out = [0u8; OUT];
            let n = with_jpeg_colour(sps, &mut out).unwrap();
            let after = colour(&out[..n]).unwrap();
            assert_eq!((after.1, after.2, after.3), (true, true, 6), "{name}");
            assert_eq!(after.4, before.4, "{name}");
        }
    }

    #[test]
    fn the_access_unit_gets_the_new_sps() {
        let mut au = alloc::vec![0, 0, 0, 1];
        au.extend_from_slice(&OPENH264_720P);
        au.extend_from_slice(&[
            0, 0, 0, 1, 0x68, 0xce, 0x3c, 0x80, 0, 0, 0, 1, 0x65, 0x88, 0x84,
        ]);
        let at = AccessUnit::parse(&au).unwrap().sps_at().unwrap();
        assert_eq!(at, 4..4 + OPENH264_720P.len());
        assert!(signal_jpeg_colour(&mut au, at));
        let units: Vec<&[u8]> = nal_units(&au).collect();
        assert_eq!(units.len(), 3);
        assert!(colour(units[0]).unwrap().2);
        assert_eq!(units[1], [0x68, 0xce, 0x3c, 0x80]);
        assert_eq!(units[2], [0x65, 0x88, 0x84]);
        let at = AccessUnit::parse(&au).unwrap().sps_at().unwrap();
        assert!(!signal_jpeg_colour(&mut au, at));
        // No SPS there: nothing to do.
        let mut p = alloc::vec![0, 0, 0, 1, 0x41, 0x9a];
        assert_eq!(AccessUnit::parse(&p).unwrap().sps_at(), None);
        assert!(!signal_jpeg_colour(&mut p, 4..6));
    }

    #[test]
    fn emulation_prevention_round_trips() {
        let rbsp = [0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 7, 0, 0];
        let mut esc = [0u8; 32];
        let n = escape(&rbsp, &mut esc);
        assert_eq!(
            esc[..n],
            [0, 0, 3, 0, 0, 3, 1, 0, 0, 3, 2, 0, 0, 3, 3, 7, 0, 0]
        );
        let mut back = [0u8; MAX_SPS];
        assert_eq!(unescape(&esc[..n], &mut back), Some(&rbsp[..]));
    }

    proptest! {
        /// Any bytes: no panic; whatever is rewritten parses, says full
        /// range and BT.601, and is not rewritten again.
        #[test]
        fn any_sps(body in proptest::collection::vec(any::<u8>(), 0..MAX_SPS)) {
            let mut sps = alloc::vec![0x67];
            sps.extend_from_slice(&body);
            let mut out = [0u8; OUT];
            if let Some(n) = with_jpeg_colour(&sps, &mut out) {
                let c = colour(&out[..n]);
                prop_assert_eq!(c.map(|c| (c.1, c.2, c.3)), Some((true, true, 6)));
                prop_assert_eq!(with_jpeg_colour(&out[..n], &mut [0u8; OUT]), None);
            }
        }

        /// SPSs as encoders write them (Baseline, Main, High; each order
        /// of pictures; cropped or not; with no VUI, or one with or
        /// without an aspect ratio, overscan, a video signal type and the
        /// fields after it): each is made to say JPEG's colour, its fields
        /// before the VUI and after the video signal type as they were.
        #[test]
        fn sps_as_encoders_write_them(
            profile in prop::sample::select(alloc::vec![66u32, 77, 100]),
            ue in proptest::collection::vec(0u32..300, 12),
            flags in proptest::collection::vec(any::<bool>(), 10),
            vui in proptest::option::of((
                proptest::option::of(prop::sample::select(alloc::vec![1u32, 4, 255])),
                proptest::option::of(any::<bool>()),
                proptest::option::of((0u32..8, any::<bool>(), proptest::option::of(any::<[u8; 3]>()))),
                proptest::collection::vec(any::<bool>(), 0..40),
            )),
        ) {
            let mut w = Writer { data: [0; OUT], pos: 0 };
            let ue_at = |w: &mut Writer, v: u32| {
                let v = v + 1;
                let n = 32 - v.leading_zeros() as usize;
                w.put(0, n - 1);
                w.put(v, n);
            };
            w.put(profile, 8);
            w.put(0xc0, 8);
            w.put(31, 8);
            ue_at(&mut w, ue[0] % 32);
            if profile == 100 {
                ue_at(&mut w, 1); // chroma_format_idc 4:2:0
                ue_at(&mut w, 0);
                ue_at(&mut w, 0);
                w.put(0, 1);
                w.put(0, 1); // no scaling matrix
            }
            ue_at(&mut w, ue[1] % 13);
            let poc = ue[2] % 3;
            ue_at(&mut w, poc);
            if poc == 0 {
                ue_at(&mut w, ue[3] % 13);
            } else if poc == 1 {
                w.put(u32::from(flags[0]), 1);
                ue_at(&mut w, ue[4]);
                ue_at(&mut w, ue[5]);
                ue_at(&mut w, ue[6] % 4);
                for _ in 0..ue[6] % 4 {
                    ue_at(&mut w, ue[7]);
                }
            }
            ue_at(&mut w, ue[8] % 17);
            w.put(u32::from(flags[1]), 1);
            ue_at(&mut w, ue[9]);
            ue_at(&mut w, ue[10]);
            w.put(u32::from(flags[2]), 1);
            if !flags[2] {
                w.put(u32::from(flags[3]), 1);
            }
            w.put(u32::from(flags[4]), 1);
            w.put(u32::from(flags[5]), 1);
            if flags[5] {
                for _ in 0..4 {
                    ue_at(&mut w, ue[11] % 16);
                }
            }
            let fields = w.pos;
            let mut tail = alloc::vec![];
            match &vui {
                None => w.put(0, 1),
                Some((aspect, overscan, signal, rest)) => {
                    w.put(1, 1);
                    w.put(u32::from(aspect.is_some()), 1);
                    if let Some(idc) = aspect {
                        w.put(*idc, 8);
                        if *idc == 255 {
                            w.put(0x0001_0001, 32);
                        }
                    }
                    w.put(u32::from(overscan.is_some()), 1);
                    if let Some(o) = overscan {
                        w.put(u32::from(*o), 1);
                    }
                    w.put(u32::from(signal.is_some()), 1);
                    if let Some((format, full, description)) = signal {
                        w.put(*format, 3);
                        w.put(u32::from(*full), 1);
                        w.put(u32::from(description.is_some()), 1);
                        if let Some(d) = description {
                            for b in d {
                                w.put(u32::from(*b), 8);
                            }
                        }
                    }
                    for &b in rest {
                        w.put(u32::from(b), 1);
                    }
                    tail.clone_from(rest);
                }
            }
            w.put(1, 1); // rbsp_stop_one_bit
            let len = w.pos.div_ceil(8);
            let mut sps = [0u8; OUT];
            sps[0] = 0x67;
            let n = 1 + escape(&w.data[..len], &mut sps[1..]);
            let sps = &sps[..n];

            let mut out = [0u8; OUT];
            let said = vui.as_ref().and_then(|v| v.2).is_some_and(|(_, full, d)| {
                full && d.is_some_and(|d| u32::from(d[2]) == MATRIX_BT601)
            });
            match with_jpeg_colour(sps, &mut out) {
                None => prop_assert!(said),
                Some(k) => {
                    prop_assert!(!said);
                    let c = colour(&out[..k]).unwrap();
                    prop_assert_eq!((c.1, c.2, c.3), (true, true, 6));
                    // With no VUI the new one's later fields are all absent.
                    let want = if vui.is_some() { tail } else { alloc::vec![false; 6] };
                    prop_assert!(c.4.len() >= want.len());
                    prop_assert_eq!(&c.4[..want.len()], &want[..]);
                    // The fields before the VUI as they were.
                    let mut a = [0u8; OUT];
                    let a = unescape(&out[1..k], &mut a).unwrap();
                    let mut copy = Writer { data: [0; OUT], pos: 0 };
                    copy_bits(a, 0..fields, &mut copy).unwrap();
                    let mut orig = Writer { data: [0; OUT], pos: 0 };
                    copy_bits(&w.data[..len], 0..fields, &mut orig).unwrap();
                    prop_assert_eq!(&copy.data[..], &orig.data[..]);
                }
            }
        }
    }
}
