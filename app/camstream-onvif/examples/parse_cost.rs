//! What parsing one SOAP request costs at the 64 KiB a request may have,
//! for each shape of body found costly (docs/SECURITY.md's limits table
//! quotes these figures):
//!
//!     cargo run --release --locked -p camstream-onvif --example parse_cost
//!
//! Each shape is parsed 200 times; the median and the 95th percentile are
//! printed (the slowest run measures the machine's scheduler more than the
//! parser), with what the parser said.

use std::time::{Duration, Instant};

use camstream_onvif::soap::Request;
use camstream_onvif::xml::Limits;

const MAX: usize = 64 << 10;

/// A SOAP 1.2 envelope with `header` in its Header and `body` in its Body.
fn envelope(env_attrs: &str, header: &str, body: &str) -> Vec<u8> {
    format!(
        r#"<e:Envelope xmlns:e="http://www.w3.org/2003/05/soap-envelope"{env_attrs}><e:Header>{header}</e:Header><e:Body>{body}</e:Body></e:Envelope>"#
    )
    .into_bytes()
}

/// `item(i)` repeated inside `wrap` until the envelope is just under MAX.
fn fill(item: impl Fn(usize) -> String, wrap: impl Fn(&str) -> Vec<u8>) -> Vec<u8> {
    let mut items = String::new();
    let mut i = 0;
    loop {
        let next = item(i);
        if wrap(&format!("{items}{next}")).len() > MAX {
            return wrap(&items);
        }
        items.push_str(&next);
        i += 1;
    }
}

fn main() {
    let op = |attrs: &str| {
        envelope(
            "",
            "",
            &format!(r#"<GetProfiles xmlns="http://www.onvif.org/ver10/media/wsdl"{attrs}/>"#),
        )
    };
    let decls: String = (0..127).map(|i| format!(r#" xmlns:p{i}="u{i}""#)).collect();
    let shapes: Vec<(&str, Vec<u8>)> = vec![
        (
            "comment padding (honest size)",
            fill(
                |_| "<!-- padding padding padding -->".into(),
                |p| {
                    envelope(
                        "",
                        p,
                        "<GetProfiles xmlns=\"http://www.onvif.org/ver10/media/wsdl\"/>",
                    )
                },
            ),
        ),
        (
            "attributes on one element",
            fill(|i| format!(r#" a{i:x}="""#), op),
        ),
        (
            "namespace declarations on one element",
            fill(|i| format!(r#" xmlns:p{i:x}="u""#), op),
        ),
        (
            "elements under 127 declarations",
            fill(|_| "<x/>".into(), |p| envelope(&decls, p, "<GetProfiles/>")),
        ),
        (
            "escapes in texts",
            fill(
                |_| format!("<t>{}</t>", "&lt;".repeat(1000)),
                |p| envelope("", p, "<GetProfiles/>"),
            ),
        ),
        (
            "escapes in attribute values",
            fill(|i| format!(r#" v{i:x}="{}""#, "&amp;".repeat(100)), op),
        ),
        (
            "elements, nested 30 deep",
            fill(
                |_| format!("{}{}", "<d>".repeat(30), "</d>".repeat(30)),
                |p| envelope("", p, "<GetProfiles/>"),
            ),
        ),
    ];
    let limits = Limits::default();
    println!(
        "{:<40} {:>6} {:>9} {:>9}  result",
        "shape", "bytes", "median", "p95"
    );
    for (name, body) in &shapes {
        let mut times: Vec<Duration> = (0..200)
            .map(|_| {
                let t = Instant::now();
                let r = Request::parse(body, &limits);
                let d = t.elapsed();
                std::hint::black_box(r.is_ok());
                d
            })
            .collect();
        times.sort();
        let said = match Request::parse(body, &limits) {
            Ok(r) => format!("parsed: {}", r.operation()),
            Err(f) => f.reason,
        };
        println!(
            "{name:<40} {:>6} {:>7}us {:>7}us  {said}",
            body.len(),
            times[times.len() / 2].as_micros(),
            times[times.len() * 95 / 100].as_micros(),
        );
    }
}
