//! What a sequence parameter set says of colour and timing. Pictures
//! decoded from JPEG have full-range samples and BT.601's matrix (JFIF);
//! an SPS with no VUI (OpenH264 writes none) leaves players to take video
//! range and, for HD, often BT.709: blacks and whites stretched, colours
//! shifted. Nor does it say the stream's rate, which players then guess
//! from the RTP timestamps (FFmpeg: 120 frames a second for a 5 frame/s
//! stream). [`signal`] makes the SPS of an access unit say both: a VUI
//! where it has none, the video signal type and the timing info in its
//! VUI (OpenH264's and libx264's have neither; a hardware encoder's may
//! say video range, as it is told nothing of the samples it codes, or a
//! rate of its own).
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

/// Room for the rewritten SPS: at most 14 bytes more (a whole VUI with a
/// signal type and timing info), and emulation prevention at most one
/// byte in two.
const OUT: usize = (MAX_SPS + 16) * 3 / 2;

/// VUI fields (H.264 E.1.1): video_format 5 (unspecified), full range,
/// colour_primaries and transfer_characteristics 2 (unspecified),
/// matrix_coefficients 6 (BT.601, as JFIF has it).
const VIDEO_FORMAT_UNSPECIFIED: u32 = 5;
const UNSPECIFIED: u32 = 2;
const MATRIX_BT601: u32 = 6;

/// The highest rate written into the timing info: time_scale, twice it,
/// fits in its 32 bits with room to spare.
const MAX_FPS: u32 = 1000;

/// What an SPS is made to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal {
    /// Full-range samples with BT.601's matrix (JPEG's).
    pub jpeg_colour: bool,
    /// Frames a second (1 to 1000), in the VUI's timing info; None leaves
    /// the timing info as it is.
    pub fps: Option<u32>,
}

/// Makes the SPS at `sps` in Annex B `au` (as [`AccessUnit::sps_at`]
/// finds it) say what `want` says, if it does not; whether it changed
/// `au`.
///
/// [`AccessUnit::sps_at`]: crate::AccessUnit::sps_at
pub fn signal(au: &mut Vec<u8>, sps: Range<usize>, want: Signal) -> bool {
    let Some(unit) = au.get(sps.clone()) else {
        return false;
    };
    let mut out = [0u8; OUT];
    let Some(n) = rewritten(unit, want, &mut out) else {
        return false;
    };
    au.splice(sps, out[..n].iter().copied());
    true
}

/// `sps` (a NAL unit: header, then its payload with emulation prevention)
/// saying what `want` says, written into `out`: its length; None if it
/// says so already, does not parse, or is longer than [`MAX_SPS`].
pub fn rewritten(sps: &[u8], want: Signal, out: &mut [u8; OUT]) -> Option<usize> {
    let (&header, payload) = sps.split_first()?;
    if nal::unit_type(header) != nal::SPS || sps.len() > MAX_SPS {
        return None;
    }
    let fps = want.fps.filter(|f| (1..=MAX_FPS).contains(f));
    let mut rbsp = [0u8; MAX_SPS];
    let rbsp = unescape(payload, &mut rbsp)?;
    // rbsp_stop_one_bit: the last bit set.
    let last = rbsp.iter().rposition(|&b| b != 0)?;
    let stop = last * 8 + 7 - rbsp[last].trailing_zeros() as usize;
    let mut r = Reader { data: rbsp, pos: 0 };
    skip_to_vui(&mut r)?;
    let vui_at = r.pos;
    let mut w = Writer {
        data: [0; OUT],
        pos: 0,
    };
    copy_bits(rbsp, 0..vui_at, &mut w)?;
    w.put(1, 1); // vui_parameters_present_flag
    if !r.bit()? {
        if !want.jpeg_colour && fps.is_none() {
            return None;
        }
        w.put(0, 1); // aspect_ratio_info_present_flag
        w.put(0, 1); // overscan_info_present_flag
        match want.jpeg_colour {
            true => put_jpeg_colour(&mut w),
            false => w.put(0, 1),
        }
        w.put(0, 1); // chroma_loc_info_present_flag
        match fps {
            Some(fps) => put_timing(&mut w, fps),
            None => w.put(0, 1),
        }
        // NAL and VCL HRD parameters, pic_struct and
        // bitstream_restriction: none.
        w.put(0, 4);
    } else {
        if r.bit()? && r.bits(8)? == 255 {
            // aspect_ratio_info_present_flag, aspect_ratio_idc
            // Extended_SAR: sar_width, sar_height.
            r.bits(32)?;
        }
        if r.bit()? {
            r.bit()?; // overscan_info_present_flag, overscan_appropriate_flag
        }
        copy_bits(rbsp, vui_at + 1..r.pos, &mut w)?;
        let mut changed = false;
        let at = r.pos;
        // video_signal_type_present_flag: video_format, then the range
        // and matrix, which must be JPEG's already to stay.
        let jpeg = r.bit()? && {
            r.bits(3)?;
            let full = r.bit()?;
            let matrix = match r.bit()? {
                true => r.bits(24)? & 0xff,
                false => 0,
            };
            full && matrix == MATRIX_BT601
        };
        if want.jpeg_colour && !jpeg {
            put_jpeg_colour(&mut w);
            changed = true;
        } else {
            copy_bits(rbsp, at..r.pos, &mut w)?;
        }
        if let Some(fps) = fps {
            let at = r.pos;
            if r.bit()? {
                // chroma_loc_info_present_flag: two ue(v).
                r.ue()?;
                r.ue()?;
            }
            copy_bits(rbsp, at..r.pos, &mut w)?;
            let at = r.pos;
            // timing_info_present_flag: num_units_in_tick, time_scale,
            // fixed_frame_rate_flag; a frame is two ticks.
            let said = r.bit()? && {
                let tick = u64::from(r.bits(32)?);
                let scale = u64::from(r.bits(32)?);
                r.bit()?;
                tick != 0 && scale == 2 * u64::from(fps) * tick
            };
            if said {
                copy_bits(rbsp, at..r.pos, &mut w)?;
            } else {
                put_timing(&mut w, fps);
                changed = true;
            }
        }
        if !changed || r.pos > stop {
            return None;
        }
        // The rest as it was (the VUI's later fields).
        copy_bits(rbsp, r.pos..stop, &mut w)?;
    }
    w.put(1, 1); // rbsp_stop_one_bit
    let len = w.pos.div_ceil(8);
    out[0] = header;
    Some(1 + escape(&w.data[..len], &mut out[1..]))
}

/// A video signal type saying JPEG's colour: full range, BT.601's matrix.
fn put_jpeg_colour(w: &mut Writer) {
    w.put(1, 1); // video_signal_type_present_flag
    w.put(VIDEO_FORMAT_UNSPECIFIED, 3);
    w.put(1, 1); // video_full_range_flag
    w.put(1, 1); // colour_description_present_flag
    w.put(UNSPECIFIED, 8);
    w.put(UNSPECIFIED, 8);
    w.put(MATRIX_BT601, 8);
}

/// Timing info saying `fps` frames a second: a tick of 1 / (2 fps) s, a
/// frame being two (E.2.1). fixed_frame_rate_flag clear: a frame the
/// encoder could not take in time is left out.
fn put_timing(w: &mut Writer, fps: u32) {
    w.put(1, 1); // timing_info_present_flag
    w.put(1, 32); // num_units_in_tick
    w.put(2 * fps, 32); // time_scale
    w.put(0, 1); // fixed_frame_rate_flag
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
    /// What camstream made SPSs say before they said the rate too.
    const JPEG: Signal = Signal {
        jpeg_colour: true,
        fps: None,
    };

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

    /// (num_units_in_tick, time_scale).
    type Ticks = (u32, u32);

    /// The VUI's timing info, or None (no VUI, or no timing info); the
    /// bits after it, to the stop bit.
    fn timing(sps: &[u8]) -> Option<(Option<Ticks>, alloc::vec::Vec<bool>)> {
        let mut buf = [0u8; OUT];
        let rbsp = unescape(&sps[1..], &mut buf)?;
        let mut r = Reader { data: rbsp, pos: 0 };
        skip_to_vui(&mut r)?;
        if !r.bit()? {
            return Some((None, alloc::vec![]));
        }
        if r.bit()? && r.bits(8)? == 255 {
            r.bits(32)?;
        }
        if r.bit()? {
            r.bit()?;
        }
        if r.bit()? {
            r.bits(4)?;
            if r.bit()? {
                r.bits(24)?;
            }
        }
        if r.bit()? {
            r.ue()?;
            r.ue()?;
        }
        let mut said = None;
        if r.bit()? {
            said = Some((r.bits(32)?, r.bits(32)?));
            r.bit()?;
        }
        let mut rest = alloc::vec![];
        while let Some(b) = r.bit() {
            rest.push(b);
        }
        while rest.pop() == Some(false) {}
        Some((said, rest))
    }

    /// `sps` with the timing info (and everything else) as `rewritten`
    /// left it, but saying `tick` and `scale`.
    fn with_timing(sps: &[u8], tick: u32, scale: u32) -> alloc::vec::Vec<u8> {
        let mut out = [0u8; OUT];
        let n = rewritten(
            sps,
            Signal {
                jpeg_colour: true,
                fps: Some(1),
            },
            &mut out,
        )
        .unwrap();
        let mut rbsp = [0u8; OUT];
        let len = unescape(&out[1..n], &mut rbsp).unwrap().len();
        let rbsp = &rbsp[..len];
        // The timing info's 65 bits (tick, scale, fixed_frame_rate_flag)
        // end where the rest begins.
        let (_, rest) = timing(&out[..n]).unwrap();
        let last = rbsp.iter().rposition(|&b| b != 0).unwrap();
        let stop = last * 8 + 7 - rbsp[last].trailing_zeros() as usize;
        let tick_at = stop - rest.len() - 65;
        let mut w = Writer {
            data: [0; OUT],
            pos: 0,
        };
        copy_bits(rbsp, 0..tick_at, &mut w).unwrap();
        w.put(tick, 32);
        w.put(scale, 32);
        copy_bits(rbsp, tick_at + 64..len * 8, &mut w).unwrap();
        let mut sps = alloc::vec![0u8; OUT];
        sps[0] = 0x67;
        let m = 1 + escape(&w.data[..len], &mut sps[1..]);
        sps.truncate(m);
        sps
    }

    #[test]
    fn the_rate_goes_into_openh264s_vui() {
        let before = timing(&OPENH264_720P).unwrap();
        assert_eq!(before.0, None);
        let mut out = [0u8; OUT];
        let five = Signal {
            jpeg_colour: true,
            fps: Some(5),
        };
        let n = rewritten(&OPENH264_720P, five, &mut out).unwrap();
        let after = timing(&out[..n]).unwrap();
        // 10 ticks a second, a frame two: 5 frames a second.
        assert_eq!(after.0, Some((1, 10)));
        // bitstream_restriction as it was; the colour said too.
        assert_eq!(after.1, before.1);
        let c = colour(&out[..n]).unwrap();
        assert_eq!((c.1, c.2, c.3), (true, true, 6));
        assert_eq!(rewritten(&out[..n], five, &mut [0u8; OUT]), None);
        // Its colour said already: the rate alone is news.
        let mut colour_said = [0u8; OUT];
        let k = rewritten(&OPENH264_720P, JPEG, &mut colour_said).unwrap();
        let n = rewritten(&colour_said[..k], five, &mut out).unwrap();
        assert_eq!(timing(&out[..n]).unwrap().0, Some((1, 10)));
        assert_eq!(rewritten(&colour_said[..k], JPEG, &mut out), None);
    }

    #[test]
    fn a_vui_with_the_rate_alone_where_there_is_none() {
        let mut out = [0u8; OUT];
        let thirty = Signal {
            jpeg_colour: false,
            fps: Some(30),
        };
        let n = rewritten(&NO_VUI_720P, thirty, &mut out).unwrap();
        assert_eq!(
            timing(&out[..n]).unwrap(),
            (Some((1, 60)), alloc::vec![false; 4])
        );
        // No video signal type: the samples' range left unsaid.
        assert!(!colour(&out[..n]).unwrap().1);
        assert_eq!(rewritten(&out[..n], thirty, &mut [0u8; OUT]), None);
        // Nothing asked: nothing to do.
        let none = Signal {
            jpeg_colour: false,
            fps: None,
        };
        assert_eq!(rewritten(&NO_VUI_720P, none, &mut out), None);
    }

    /// A hardware encoder's timing info: kept where it says the rate
    /// (in any units), replaced where it says another.
    #[test]
    fn an_encoders_own_rate_is_kept_only_if_it_is_the_streams() {
        let five = Signal {
            jpeg_colour: true,
            fps: Some(5),
        };
        let same = with_timing(&OPENH264_720P, 1000, 10_000);
        assert_eq!(timing(&same).unwrap().0, Some((1000, 10_000)));
        assert_eq!(rewritten(&same, five, &mut [0u8; OUT]), None);
        let thirty = with_timing(&OPENH264_720P, 1000, 60_000);
        let mut out = [0u8; OUT];
        let n = rewritten(&thirty, five, &mut out).unwrap();
        let after = timing(&out[..n]).unwrap();
        assert_eq!(after.0, Some((1, 10)));
        assert_eq!(after.1, timing(&thirty).unwrap().1);
        // A tick of zero says no rate.
        let zero = with_timing(&OPENH264_720P, 0, 10);
        assert!(rewritten(&zero, five, &mut out).is_some());
    }

    #[test]
    fn the_signal_type_goes_into_openh264s_vui() {
        let before = colour(&OPENH264_720P).unwrap();
        assert!(before.0 && !before.1);
        let mut out = [0u8; OUT];
        let n = rewritten(&OPENH264_720P, JPEG, &mut out).unwrap();
        let after = colour(&out[..n]).unwrap();
        assert_eq!((after.0, after.1, after.2, after.3), (true, true, true, 6));
        // The VUI's later fields (bitstream_restriction) as they were.
        assert_eq!(after.4, before.4);
        assert_eq!(out[..4], OPENH264_720P[..4]);
        assert_eq!(rewritten(&out[..n], JPEG, &mut [0u8; OUT]), None);
    }

    #[test]
    fn a_vui_is_added_where_there_is_none() {
        assert!(!colour(&NO_VUI_720P).unwrap().0);
        let mut out = [0u8; OUT];
        let n = rewritten(&NO_VUI_720P, JPEG, &mut out).unwrap();
        let after = colour(&out[..n]).unwrap();
        assert_eq!((after.0, after.1, after.2, after.3), (true, true, true, 6));
        assert_eq!(rewritten(&out[..n], JPEG, &mut [0u8; OUT]), None);
    }

    /// An SPS whose VUI says video range and BT.709's matrix, as a
    /// hardware encoder told nothing may write: made full range, BT.601,
    /// the rest as it was.
    #[test]
    fn a_video_range_signal_is_replaced() {
        let mut full = [0u8; OUT];
        let n = rewritten(&OPENH264_720P, JPEG, &mut full).unwrap();
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
        let k = rewritten(&video[..m], JPEG, &mut out).unwrap();
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
            let n = rewritten(sps, JPEG, &mut out).unwrap();
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
        assert!(signal(&mut au, at, JPEG));
        let units: Vec<&[u8]> = nal_units(&au).collect();
        assert_eq!(units.len(), 3);
        assert!(colour(units[0]).unwrap().2);
        assert_eq!(units[1], [0x68, 0xce, 0x3c, 0x80]);
        assert_eq!(units[2], [0x65, 0x88, 0x84]);
        let at = AccessUnit::parse(&au).unwrap().sps_at().unwrap();
        assert!(!signal(&mut au, at, JPEG));
        // No SPS there: nothing to do.
        let mut p = alloc::vec![0, 0, 0, 1, 0x41, 0x9a];
        assert_eq!(AccessUnit::parse(&p).unwrap().sps_at(), None);
        assert!(!signal(&mut p, 4..6, JPEG));
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
        fn any_sps(
            body in proptest::collection::vec(any::<u8>(), 0..MAX_SPS),
            jpeg_colour in any::<bool>(),
            fps in proptest::option::of(1u32..=MAX_FPS),
        ) {
            let mut sps = alloc::vec![0x67];
            sps.extend_from_slice(&body);
            let want = Signal { jpeg_colour, fps };
            let mut out = [0u8; OUT];
            if let Some(n) = rewritten(&sps, want, &mut out) {
                if jpeg_colour {
                    let c = colour(&out[..n]);
                    prop_assert_eq!(c.map(|c| (c.1, c.2, c.3)), Some((true, true, 6)));
                }
                if let Some(fps) = fps {
                    let t = timing(&out[..n]).and_then(|t| t.0);
                    prop_assert_eq!(t, Some((1, 2 * fps)));
                }
                prop_assert_eq!(rewritten(&out[..n], want, &mut [0u8; OUT]), None);
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
            match rewritten(sps, JPEG, &mut out) {
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
