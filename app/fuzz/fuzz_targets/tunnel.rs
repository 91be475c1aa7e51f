//! Any bytes as an RTSP-over-HTTP POST body, split at a point the input
//! chooses: no panic, the decoded bytes do not depend on where the input
//! was split, and valid base64 decodes to what the base64 crate says.
#![no_main]

use base64::Engine;
use camstream_http::tunnel::Decoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let cut = usize::from(cut).min(body.len());
    let mut whole = Vec::new();
    let whole_result = Decoder::default().decode(body, &mut whole);
    let mut split = Vec::new();
    let mut d = Decoder::default();
    let split_result = d
        .decode(&body[..cut], &mut split)
        .and_then(|()| d.decode(&body[cut..], &mut split));
    assert_eq!(whole_result.is_ok(), split_result.is_ok());
    if whole_result.is_ok() {
        assert_eq!(whole, split);
        // Whole quanta without whitespace decode as the base64 crate does.
        if body.len() % 4 == 0 && !body.iter().any(u8::is_ascii_whitespace) && !body.contains(&b'=') {
            let expect = base64::engine::general_purpose::STANDARD.decode(body).unwrap();
            assert_eq!(whole, expect);
        }
    }
});
