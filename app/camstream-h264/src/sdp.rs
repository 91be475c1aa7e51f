//! What the SDP says of an H.264 stream (RFC 6184 8.1, 8.2.1): the rtpmap
//! and the fmtp with packetization-mode=1, profile-level-id (the SPS's
//! profile_idc, constraint flags and level_idc) and sprop-parameter-sets.

use alloc::format;
use alloc::string::String;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// `a=rtpmap` value for payload type `pt`.
pub fn rtpmap(pt: u8) -> String {
    format!("{pt} H264/90000")
}

/// `a=fmtp` value for payload type `pt` with these parameter sets (each a
/// NAL unit without start code), or without them while none came yet.
pub fn fmtp(pt: u8, sets: Option<(&[u8], &[u8])>) -> String {
    let Some((sps, pps)) = sets.filter(|(sps, _)| sps.len() >= 4) else {
        return format!("{pt} packetization-mode=1");
    };
    format!(
        "{pt} packetization-mode=1;profile-level-id={:02X}{:02X}{:02X};sprop-parameter-sets={},{}",
        sps[1],
        sps[2],
        sps[3],
        STANDARD.encode(sps),
        STANDARD.encode(pps)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmtp_names_the_profile_and_the_sets() {
        let sps = [0x67, 0x42, 0xc0, 0x1f, 0xda];
        let pps = [0x68, 0xce, 0x3c, 0x80];
        assert_eq!(
            fmtp(96, Some((&sps, &pps))),
            "96 packetization-mode=1;profile-level-id=42C01F;sprop-parameter-sets=Z0LAH9o=,aM48gA=="
        );
        assert_eq!(fmtp(96, None), "96 packetization-mode=1");
        assert_eq!(rtpmap(96), "96 H264/90000");
    }
}
