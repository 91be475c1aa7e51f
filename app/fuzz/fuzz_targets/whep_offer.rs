//! A WHEP offer as the daemon takes it: the browser's candidates outside
//! the camera's networks left out, then str0m's SDP parser and
//! negotiation (`webrtc::peer_connection`). Any text is answered or
//! refused with a status, never a panic (the daemon aborts on one); an
//! answer reads back as SDP, is ICE-lite and names the video track it
//! sends H.264 on, and the sound's track where it took one. Seeds: offers Chromium and Firefox made
//! (tests/testdata/webrtc).
#![no_main]

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Instant;

use camstream::server::webrtc::{Network, certificate, keep_local_candidates, peer_connection};
use libfuzzer_sys::fuzz_target;
use str0m::change::SdpAnswer;
use str0m::config::DtlsCert;
use str0m::format::Codec;

fn cert() -> &'static DtlsCert {
    static CERT: OnceLock<DtlsCert> = OnceLock::new();
    CERT.get_or_init(|| certificate().expect("a DTLS certificate"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(sdp) = std::str::from_utf8(data) else {
        return;
    };
    let lan = [Network {
        addr: "192.168.1.7".parse().expect("an address"),
        prefix: 24,
    }];
    let (sdp, _) = keep_local_candidates(sdp, &lan);
    let candidates: [SocketAddr; 1] = ["192.168.1.7:8555".parse().expect("an address")];
    // With the sound in Opus, as a camera with a microphone answers.
    match peer_connection(&sdp, cert(), 227, &candidates, Some(Codec::Opus), Instant::now()) {
        Ok(pc) => {
            let answer = &pc.answer;
            assert!(answer.contains("a=ice-lite"), "{answer}");
            assert!(answer.contains(&format!("a=mid:{}", pc.video.0)), "{answer}");
            if let Some((mid, _)) = pc.audio {
                assert!(mid != pc.video.0 && answer.contains(&format!("a=mid:{mid}")), "{answer}");
            }
            SdpAnswer::from_sdp_string(answer).expect("the answer reads back as SDP");
        }
        Err((status, why)) => assert!(matches!(status, 400 | 406) && !why.is_empty()),
    }
});
