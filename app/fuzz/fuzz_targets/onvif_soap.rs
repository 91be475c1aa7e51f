//! Any bytes as the body of a POST to an ONVIF service: no panic; a
//! request's UsernameToken never passes the check without the password;
//! every fault the parser gives is itself a well-formed SOAP envelope; the
//! event service's times and topic filters parse or are refused (a filter
//! accepted selects a topic); SetImagingSettings' values
//! are taken only within the camera's ranges.
#![no_main]

use camstream_onvif::events;
use camstream_onvif::imaging::{self, Imaging, Level};
use camstream_onvif::soap::Request;
use camstream_onvif::wsse::Gate;
use camstream_onvif::xml::{Doc, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Seeds are whole recorded requests: the server reads the body after
    // the head.
    let body = match data.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) if data.starts_with(b"POST ") => &data[i + 4..],
        _ => data,
    };
    let limits = Limits::default();
    match Request::parse(body, &limits) {
        Ok(r) => {
            let _ = r.operation();
            let _ = r.arg(&["StreamSetup", "Transport", "Protocol"]);
            let _ = r.arg_attr(&["Configuration"], "token");
            // The event service's times: a duration or a date, each
            // within what an i64 of seconds holds, or refused.
            for path in [&["Timeout"][..], &["InitialTerminationTime"], &["TerminationTime"]] {
                if let Some(t) = r.arg(path) {
                    let _ = events::parse_duration(t);
                    let _ = events::parse_termination(t, 1_795_591_800);
                }
            }
            if let Ok(topics) = events::subscription_filter(&r) {
                assert!(events::Topic::ALL.iter().any(|&t| topics.has(t)));
            }
            // A camera with a brightness of 0 to 255 and nothing else.
            let has = Imaging {
                brightness: Some(Level {
                    value: 128.0,
                    min: 0.0,
                    max: 255.0,
                }),
                ..Imaging::default()
            };
            match imaging::parse_set(&r, &has) {
                Ok(c) => {
                    assert!(c.brightness.is_some_and(|b| (0.0..=255.0).contains(&b)), "{c:?}");
                    assert_eq!(c.contrast, None);
                }
                Err(fault) => assert!(Doc::parse(fault.envelope().as_bytes(), &limits).is_ok()),
            }
            if let Ok(Some(token)) = &r.token {
                let mut gate = Gate::new(300, 16);
                for now in [1_795_591_800, 0] {
                    assert!(gate.check(token, "s3cret", now).is_err());
                }
            }
        }
        Err(fault) => {
            let xml = fault.envelope();
            assert!(Doc::parse(xml.as_bytes(), &limits).is_ok(), "{xml}");
        }
    }
});
