//! Any bytes as a compound RTCP packet: no panic, and report blocks read
//! from a parsed packet stay inside it.
#![no_main]

use camstream_rtp::rtcp;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for p in rtcp::parse_compound(data) {
        match p {
            Ok(rtcp::Packet::ReceiverReport { blocks, .. }) | Ok(rtcp::Packet::SenderReport { blocks, .. }) => {
                assert!(blocks.count() <= data.len() / 24);
            }
            Ok(p @ rtcp::Packet::Bye { .. }) => {
                assert!(p.bye_ssrcs().count() <= data.len() / 4);
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
});
