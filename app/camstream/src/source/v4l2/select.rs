//! Choosing what to capture: pure logic over what the device offers, so it
//! is tested without a camera.

use super::sys::fourcc;

pub const MJPG: u32 = fourcc(b"MJPG");
pub const JPEG: u32 = fourcc(b"JPEG");
pub const YUV420: u32 = fourcc(b"YU12");
pub const NV12: u32 = fourcc(b"NV12");
pub const YUYV: u32 = fourcc(b"YUYV");
pub const UYVY: u32 = fourcc(b"UYVY");
pub const RGB24: u32 = fourcc(b"RGB3");
pub const BGR24: u32 = fourcc(b"BGR3");

/// Formats camstream captures, best first: JPEG as the camera sends it,
/// then raw formats by how little work they need before the encoder
/// (planar 4:2:0 goes in as is; packed 4:2:2 needs its chroma halved; RGB
/// needs a colour conversion).
const PREFERENCE: [u32; 8] = [MJPG, JPEG, YUV420, NV12, YUYV, UYVY, RGB24, BGR24];

pub fn is_jpeg(fourcc: u32) -> bool {
    fourcc == MJPG || fourcc == JPEG
}

pub fn is_supported(fourcc: u32) -> bool {
    PREFERENCE.contains(&fourcc)
}

/// The format `format = NAME` names (`MJPG`, `YUYV`, ... as `camstream
/// probe` lists them), if camstream captures it.
pub fn parse_format(name: &str) -> anyhow::Result<u32> {
    match <[u8; 4]>::try_from(name.as_bytes()) {
        Ok(b) if is_supported(fourcc(&b)) => Ok(fourcc(&b)),
        _ => {
            anyhow::bail!("format = {name:?}: use MJPG, JPEG, YU12, NV12, YUYV, UYVY, RGB3 or BGR3")
        }
    }
}

/// `MJPG`, `YUYV`, ... for logs.
pub fn fourcc_name(f: u32) -> String {
    f.to_le_bytes()
        .iter()
        .map(|&b| if b.is_ascii_graphic() { b as char } else { '?' })
        .collect()
}

/// Frame sizes a format offers (VIDIOC_ENUM_FRAMESIZES).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sizes {
    Discrete(Vec<(u32, u32)>),
    /// A range with steps (continuous ranges have step 1).
    Stepwise {
        min: (u32, u32),
        max: (u32, u32),
        step: (u32, u32),
    },
}

impl Sizes {
    /// The offered size nearest to `want`: every discrete size, or `want`
    /// clamped and rounded to the steps of a range.
    pub fn candidates(&self, want: (u32, u32)) -> Vec<(u32, u32)> {
        match self {
            Sizes::Discrete(v) => v.clone(),
            Sizes::Stepwise { min, max, step } => {
                let fit = |w: u32, lo: u32, hi: u32, st: u32| {
                    let st = st.max(1);
                    let v = w.clamp(lo, hi.max(lo));
                    lo + (v - lo) / st * st
                };
                vec![(
                    fit(want.0, min.0, max.0, step.0),
                    fit(want.1, min.1, max.1, step.1),
                )]
            }
        }
    }
}

/// A size and the highest frame rate the device offers there (None when it
/// does not enumerate intervals; then the rate is only known once set).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mode {
    pub fourcc: u32,
    pub width: u32,
    pub height: u32,
    pub max_fps: Option<f64>,
}

/// Picks the mode to capture: the requested size first (else the nearest),
/// then the requested rate (else the fastest), then the cheapest format.
/// So a camera that offers MJPEG at the requested size and rate streams its
/// own JPEG; one whose MJPEG is slower there than its YUYV gets encoded.
pub fn choose(modes: &[Mode], want: (u32, u32), fps: u32) -> Option<Mode> {
    modes
        .iter()
        .filter(|m| is_supported(m.fourcc) && m.width > 0 && m.height > 0)
        .min_by_key(|m| {
            let size_off = m.width.abs_diff(want.0) as u64 + m.height.abs_diff(want.1) as u64;
            // Modes with unknown rates rank as if they reach it.
            let rate_short = m
                .max_fps
                .map_or(0, |f| ((f64::from(fps) - f).max(0.0) * 1000.0) as u64);
            let rank = PREFERENCE.iter().position(|&p| p == m.fourcc).unwrap_or(99);
            (size_off, rate_short, rank)
        })
        .copied()
}

/// Frames per second of a frame interval (seconds per frame).
pub fn fps_of(numerator: u32, denominator: u32) -> Option<f64> {
    (numerator > 0 && denominator > 0).then(|| f64::from(denominator) / f64::from(numerator))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(f: &[u8; 4], width: u32, height: u32, fps: f64) -> Mode {
        Mode {
            fourcc: fourcc(f),
            width,
            height,
            max_fps: Some(fps),
        }
    }

    /// A typical UVC webcam: MJPEG at full rate everywhere, YUYV slow at HD.
    fn webcam() -> Vec<Mode> {
        vec![
            m(b"YUYV", 640, 480, 30.0),
            m(b"YUYV", 1280, 720, 10.0),
            m(b"YUYV", 1920, 1080, 5.0),
            m(b"MJPG", 640, 480, 30.0),
            m(b"MJPG", 1280, 720, 30.0),
            m(b"MJPG", 1920, 1080, 30.0),
        ]
    }

    #[test]
    fn mjpeg_when_it_has_the_size_and_rate() {
        let c = choose(&webcam(), (1280, 720), 30).unwrap();
        assert_eq!((c.fourcc, c.width, c.height), (MJPG, 1280, 720));
        let c = choose(&webcam(), (640, 480), 30).unwrap();
        assert_eq!(c.fourcc, MJPG, "MJPEG is preferred at equal size and rate");
    }

    #[test]
    fn raw_when_mjpeg_is_slower_or_missing() {
        let mut modes = webcam();
        modes.retain(|x| !(x.fourcc == MJPG && x.width == 640));
        modes.push(m(b"MJPG", 640, 480, 15.0));
        let c = choose(&modes, (640, 480), 30).unwrap();
        assert_eq!(c.fourcc, YUYV);
        // vivid: raw formats only, the planar one is cheapest.
        let vivid = [
            m(b"YUYV", 1280, 720, 12.5),
            m(b"RGB3", 1280, 720, 12.5),
            m(b"NV12", 1280, 720, 12.5),
            m(b"BA81", 1280, 720, 12.5),
        ];
        let c = choose(&vivid, (1280, 720), 30).unwrap();
        assert_eq!(c.fourcc, NV12);
        assert_eq!(
            c.max_fps,
            Some(12.5),
            "the fastest is taken when none is fast enough"
        );
    }

    #[test]
    fn nearest_size_when_the_requested_one_is_absent() {
        let c = choose(&webcam(), (1280, 800), 30).unwrap();
        assert_eq!((c.fourcc, c.width, c.height), (MJPG, 1280, 720));
        assert!(choose(&[m(b"BA81", 640, 480, 30.0)], (640, 480), 30).is_none());
        assert!(choose(&[], (640, 480), 30).is_none());
    }

    #[test]
    fn stepwise_sizes_are_clamped_and_rounded() {
        let s = Sizes::Stepwise {
            min: (16, 16),
            max: (1920, 1080),
            step: (16, 8),
        };
        assert_eq!(s.candidates((1284, 722)), vec![(1280, 720)]);
        assert_eq!(s.candidates((4000, 4000)), vec![(1920, 1080)]);
        assert_eq!(s.candidates((1, 1)), vec![(16, 16)]);
        assert_eq!(fps_of(1, 30), Some(30.0));
        assert_eq!(fps_of(2, 25), Some(12.5));
        assert_eq!(fps_of(0, 30), None);
        assert_eq!(fourcc_name(MJPG), "MJPG");
    }
}
