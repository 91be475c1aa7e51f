//! Any bytes as a DESCRIBE answer's SDP: finding the RTP/JPEG track never
//! panics, and its URLs are the base's or absolute ones the SDP named.
#![no_main]

use camstream_rtsp::sdp;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for base in [Some("rtsp://cam/stream/"), None] {
        if let Ok(t) = sdp::jpeg_track(data, base, "rtsp://cam/stream") {
            assert_eq!(t.base, base.unwrap_or("rtsp://cam/stream"));
            assert!(
                t.control.starts_with(t.base.trim_end_matches('/')) || t.control.starts_with("rtsp"),
                "{t:?}"
            );
        }
    }
});
