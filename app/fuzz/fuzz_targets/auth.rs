//! Any bytes as an Authorization header (and as a WWW-Authenticate one for
//! the health check's answer): no panic, without the password nobody is
//! let in, and only a user known by a password hash is sent to be checked.
#![no_main]

use camstream_rtsp::auth::{self, Auth, User, Verdict};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let user = User::from_password("admin", "camstream", "s3cret");
    let auth = Auth::new("camstream", vec![user.clone()], true, [7; 32], 600)
        .with_hashed(Vec::new(), vec!["alice".into()]);
    let url = rtsp_types::Url::parse("rtsp://h/s").expect("a URL");
    let v = auth.check("DESCRIBE", Some(&url), Some("s"), Some(text), 1000);
    assert!(!matches!(v, Verdict::User(_) | Verdict::Expired(_)), "{text:?}");
    if let Verdict::Verify { name, .. } = v {
        assert_eq!(name, "alice", "{text:?}");
    }
    // The answer to any challenge is one header line.
    if let Some(a) = auth::answer(&[text], &user, "DESCRIBE", "rtsp://h/s", "c") {
        assert!(!a.contains(['\r', '\n']), "{a:?}");
    }
});
