//! Frames the RTP/JPEG parser refuses but that could be repaired, through
//! the normalizer (libjpeg-turbo behind it) as the daemon does: it refuses
//! them or gives back a frame the parser takes, of whole 8-pixel blocks,
//! never larger than it was told frames can be.
#![no_main]

// The daemon's own modules (a binary crate has no library to depend on).
#[allow(dead_code)]
#[path = "../../camstream/src/convert.rs"]
mod convert;
#[allow(dead_code)]
#[path = "../../camstream/src/turbo.rs"]
mod turbo;
#[allow(dead_code)]
#[path = "../../camstream/src/normalize.rs"]
mod normalize;

use std::cell::RefCell;

use camstream_rtp::jpeg;
use libfuzzer_sys::fuzz_target;

const MAX_PIXELS: usize = 4 * 320 * 240;

thread_local! {
    // One, as in the daemon: its buffers carry over from frame to frame.
    static NORMALIZER: RefCell<normalize::Normalizer> =
        RefCell::new(normalize::Normalizer::new(80, MAX_PIXELS).unwrap());
}

fuzz_target!(|data: &[u8]| {
    let fault = match jpeg::parse(data) {
        Ok(j) if j.width % 8 == 0 && j.height % 8 == 0 => return,
        Ok(_) => None,
        Err(e) if e.remedy().is_none() => return,
        Err(e) => Some(e),
    };
    NORMALIZER.with(|n| {
        if let Ok((j, _)) = n.borrow_mut().normalize(data, fault) {
            assert!(
                j.width % 8 == 0 && j.height % 8 == 0,
                "{}x{}",
                j.width,
                j.height
            );
            assert!(usize::from(j.width) * usize::from(j.height) <= MAX_PIXELS);
        }
    });
});
