//! What the server does per frame, shared by the packetize bench and the
//! count-packetize example: parse, packetize, lay the packets out as RTSP
//! interleaved records in one reused wire buffer.

use camstream_rtp::{Packetizer, jpeg};

/// The packets the frame made; `wire` holds them afterwards.
pub fn packetize_into(data: &[u8], p: &mut Packetizer, wire: &mut Vec<u8>, ts: u32) -> usize {
    let j = jpeg::parse(data).expect("a baseline JPEG RFC 2435 can carry");
    wire.clear();
    let mut n = 0;
    for packet in p.packetize(&j, ts) {
        wire.extend_from_slice(&[b'$', 0]);
        wire.extend_from_slice(&(packet.len() as u16).to_be_bytes());
        wire.extend_from_slice(packet.header());
        wire.extend_from_slice(packet.payload);
        n += 1;
    }
    n
}
