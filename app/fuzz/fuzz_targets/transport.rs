//! Any bytes as a SETUP's Transport header: parsing and the server's choice
//! never panic, never pick a taken channel, a port 0 or one port for both
//! RTP and RTCP, and the reply header reads back as what was chosen.
#![no_main]

use camstream_rtsp::transport::{self, Choice, Reply};
use libfuzzer_sys::fuzz_target;
use rtsp_types::{Message, headers::Transports};

fuzz_target!(|data: &[u8]| {
    let Some((&taken_below, header)) = data.split_first() else { return };
    let Ok(header) = std::str::from_utf8(header) else { return };
    if header.contains(['\r', '\n']) {
        return;
    }
    let raw = format!("SETUP rtsp://h/stream/trackID=0 RTSP/1.0\r\nCSeq: 1\r\nTransport: {header}\r\n\r\n");
    let Ok((Message::Request(req), _)) = Message::<Vec<u8>>::parse(raw.as_bytes()) else { return };
    let Ok(Some(offer)) = req.typed_header::<Transports>() else { return };
    let Some(choice) = transport::choose(&offer, |c| c < taken_below) else { return };
    match choice {
        Choice::Interleaved { rtp, rtcp } => assert!(rtp >= taken_below && rtcp >= taken_below && rtp != rtcp),
        Choice::Udp { rtp, rtcp } => assert!(rtp != 0 && rtcp != 0 && rtp != rtcp),
    }
    // What the client reads back is what the server will do.
    let reply = Reply { choice, server_port: 6970, ssrc: 1 }.to_string();
    let raw = format!("RTSP/1.0 200 OK\r\nCSeq: 1\r\nTransport: {reply}\r\n\r\n");
    let Ok((Message::Response(resp), _)) = Message::<Vec<u8>>::parse(raw.as_bytes()) else {
        panic!("reply does not parse: {reply}")
    };
    let back = resp.typed_header::<Transports>().unwrap().unwrap();
    assert_eq!(transport::choose(&back, |_| false), Some(choice), "{reply}");
});
