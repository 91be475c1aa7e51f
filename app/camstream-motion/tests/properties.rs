//! Any picture, any size, any settings: no panic, and a picture that does
//! not change is never motion.

use camstream_motion::{Detector, Event, Rect, Settings};
use proptest::prelude::*;

fn settings() -> impl Strategy<Value = Settings> {
    (
        1u8..=100,
        0.1f32..100.0,
        0u32..2000,
        0u32..5000,
        prop::collection::vec((0f32..0.5, 0f32..0.5, 0.01f32..0.5, 0.01f32..0.5), 0..4),
    )
        .prop_map(
            |(sensitivity, min_area, min_duration_ms, hold_ms, ignore)| Settings {
                sensitivity,
                min_area,
                min_duration_ms,
                hold_ms,
                ignore: ignore
                    .into_iter()
                    .map(|(x, y, w, h)| Rect { x, y, w, h })
                    .collect(),
            },
        )
}

proptest! {
    #[test]
    fn any_picture_is_taken(s in settings(), w in 1usize..200, h in 1usize..120, pad in 0usize..8, seed in any::<u64>(), frames in 1usize..6) {
        let mut d = Detector::new(s).unwrap();
        let stride = w + pad;
        let mut x = seed;
        let mut pic = vec![0u8; stride * h];
        for f in 0..frames {
            for b in pic.iter_mut() {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                *b = x as u8;
            }
            let _ = d.feed(&pic, w, h, stride, f as u64 * 100);
            prop_assert!((0.0..=1.0).contains(&d.level()));
        }
    }

    #[test]
    fn a_still_picture_is_never_motion(s in settings(), w in 8usize..200, h in 8usize..120, seed in any::<u64>()) {
        let mut d = Detector::new(s).unwrap();
        let mut x = seed | 1;
        let pic: Vec<u8> = (0..w * h).map(|_| { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x as u8 }).collect();
        for f in 0..50u64 {
            prop_assert_eq!(d.feed(&pic, w, h, w, f * 200), None::<Event>);
        }
    }
}
