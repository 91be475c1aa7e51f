//! Any bytes as what a client sends on the HTTP port, cut into request
//! heads as the server does: no panic, every head lies within the input
//! and the limit, its path is the target's, and its Authorization header
//! goes through the server's Digest/Basic check without letting anyone in.
#![no_main]

use camstream_http::request::{self, Framed, Limits};
use camstream_rtsp::auth::{Auth, User, Verdict};
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits { max_size: 8192 };

static AUTH: LazyLock<Auth> = LazyLock::new(|| {
    Auth::new(
        "camstream",
        vec![User::from_password("admin", "camstream", "s3cret")],
        true,
        [7; 32],
        600,
    )
});

fuzz_target!(|data: &[u8]| {
    // The server never holds more than max_size bytes unread.
    let mut rest = &data[..data.len().min(LIMITS.max_size)];
    while !rest.is_empty() {
        match request::next(rest, &LIMITS) {
            Framed::Head(h, used) => {
                assert!(used > 0 && used <= rest.len());
                assert!(h.target.contains(h.path));
                assert!(h.path.starts_with('/') || h.path == "*");
                if let Some(fps) = h.query_param("fps") {
                    let _ = fps.parse::<f64>();
                }
                let url = rtsp_types::Url::parse(&format!("http://camera{}", h.path)).ok();
                let verdict = AUTH.check(h.method, url.as_ref(), None, h.authorization, 1000);
                assert!(!matches!(verdict, Verdict::User(_) | Verdict::Expired(_)));
                // The server reads no request bodies but a tunnel's.
                if h.has_body() {
                    break;
                }
                rest = &rest[used..];
            }
            Framed::Incomplete | Framed::Refused(_) => break,
        }
    }
});
