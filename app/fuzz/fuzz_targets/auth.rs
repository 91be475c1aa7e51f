//! Any bytes as an Authorization header (and as a WWW-Authenticate one for
//! the health check's answer): no panic, and without the password nobody is
//! let in.
#![no_main]

use camstream_rtsp::auth::{self, Auth, User, Verdict};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let user = User::from_password("admin", "camstream", "s3cret");
    let auth = Auth::new("camstream", vec![user.clone()], true, [7; 32], 600);
    let url = rtsp_types::Url::parse("rtsp://h/s").expect("a URL");
    let v = auth.check("DESCRIBE", Some(&url), Some("s"), Some(text), 1000);
    assert!(!matches!(v, Verdict::User(_) | Verdict::Expired(_)), "{text:?}");
    // The answer to any challenge is one header line.
    if let Some(a) = auth::answer(&[text], &user, "DESCRIBE", "rtsp://h/s", "c") {
        assert!(!a.contains(['\r', '\n']), "{a:?}");
    }
});
