//! Any bytes as what a client sends on an RTSP connection, cut into
//! messages as the server does: no panic, framing always progresses or
//! stops, nothing framed is larger than the limits, and every request's
//! Transport and Authorization headers go through the server's parsers.
#![no_main]

use camstream_rtsp::auth::{Auth, User, Verdict};
use camstream_rtsp::framing::{self, Framed, Limits};
use camstream_rtsp::transport::{self, Choice};
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use rtsp_types::{Message, headers::Transports};

const LIMITS: Limits = Limits {
    max_size: 8192,
    max_headers: 64,
};

static AUTH: LazyLock<Auth> = LazyLock::new(|| {
    Auth::new(
        "camstream",
        vec![User::from_password("admin", "camstream", "s3cret")],
        false,
        [7; 32],
        600,
    )
});

fuzz_target!(|data: &[u8]| {
    let auth = &*AUTH;
    // The server never holds more than max_size bytes unread.
    let mut rest = &data[..data.len().min(LIMITS.max_size)];
    while !rest.is_empty() {
        match framing::next(rest, &LIMITS) {
            Framed::Message(msg, used) => {
                assert!(used > 0 && used <= rest.len());
                rest = &rest[used..];
                let Message::Request(req) = msg else { continue };
                if let Ok(Some(offer)) = req.typed_header::<Transports>() {
                    check_choice(transport::choose(&offer, |c| c < 2));
                }
                let authorization = req
                    .header(&rtsp_types::headers::AUTHORIZATION)
                    .map(|v| v.as_str());
                let verdict = auth.check(req.method().into(), req.request_uri(), Some("stream"), authorization, 1000);
                // Without the password nobody gets in.
                assert!(!matches!(verdict, Verdict::User(_) | Verdict::Expired(_)));
            }
            Framed::Incomplete => break,
            Framed::Refused(r) => {
                if let Some(c) = &r.cseq {
                    assert!(!c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()));
                }
                match r.skip {
                    Some(n) => {
                        assert!(n > 0 && n <= rest.len());
                        rest = &rest[n..];
                    }
                    None => break,
                }
            }
        }
    }
});

fn check_choice(c: Option<Choice>) {
    match c {
        Some(Choice::Interleaved { rtp, rtcp }) => assert!(rtp >= 2 && rtcp >= 2 && rtp != rtcp),
        Some(Choice::Udp { rtp, rtcp }) => assert!(rtp != 0 && rtcp != 0 && rtp != rtcp),
        None => {}
    }
}
