//! The session description DESCRIBE returns.

use std::net::IpAddr;

use camstream_h264::packetize::PAYLOAD_TYPE_H264;
use camstream_h264::sdp as h264_sdp;
use camstream_rtp::packetize::needs_x_dimensions;
use camstream_rtp::rtp::{JPEG_CLOCK_RATE, PAYLOAD_TYPE_JPEG};
use sdp_types::{Attribute, Connection, Media, Origin, Session, Time};

use crate::source::StreamInfo;

/// The media-level control URL, relative to the Content-Base.
pub const TRACK: &str = "trackID=0";

fn attr(name: &str, value: impl Into<Option<String>>) -> Attribute {
    Attribute {
        attribute: name.into(),
        value: value.into(),
    }
}

/// What a stream's media line says of its codec.
pub enum Format<'a> {
    /// RTP/JPEG (RFC 2435), static payload type 26.
    Jpeg,
    /// H.264 (RFC 6184) with these parameter sets, once the encoder made
    /// them (without, a client takes them from the stream: they come in
    /// band before each IDR picture).
    H264(Option<(&'a [u8], &'a [u8])>),
}

/// One live video stream, aggregate control `*`, track `trackID=0`. For
/// JPEG, `a=x-dimensions` carries sizes the RTP/JPEG header cannot (over
/// 2040 or not a multiple of 8); GStreamer and live555 (VLC) read it.
pub fn describe(info: &StreamInfo, format: &Format<'_>, local: IpAddr, session_id: u64) -> Vec<u8> {
    let unspecified: IpAddr = if local.is_ipv4() {
        [0u8; 4].into()
    } else {
        [0u16; 8].into()
    };
    let (payload_type, mut media_attrs) = match format {
        Format::Jpeg => (
            PAYLOAD_TYPE_JPEG,
            vec![attr(
                "rtpmap",
                format!("{PAYLOAD_TYPE_JPEG} JPEG/{JPEG_CLOCK_RATE}"),
            )],
        ),
        Format::H264(sets) => (
            PAYLOAD_TYPE_H264,
            vec![
                attr("rtpmap", h264_sdp::rtpmap(PAYLOAD_TYPE_H264)),
                attr("fmtp", h264_sdp::fmtp(PAYLOAD_TYPE_H264, *sets)),
            ],
        ),
    };
    media_attrs.push(attr("control", TRACK.to_string()));
    media_attrs.push(attr("framerate", info.fps.to_string()));
    if matches!(format, Format::Jpeg) && needs_x_dimensions(info.width, info.height) {
        media_attrs.push(attr(
            "x-dimensions",
            format!("{},{}", info.width, info.height),
        ));
    }
    let session = Session {
        origin: Origin::with_ip_addr(session_id, 1, local),
        session_name: "camstream".into(),
        session_description: None,
        uri: None,
        emails: vec![],
        phones: vec![],
        connection: Some(Connection::from_ip_addr(unspecified)),
        bandwidths: vec![],
        times: vec![Time {
            start_time: 0,
            stop_time: 0,
            repeats: vec![],
        }],
        time_zones: vec![],
        key: None,
        attributes: vec![
            attr("tool", format!("camstream {}", env!("CARGO_PKG_VERSION"))),
            attr("range", "npt=now-".to_string()),
            attr("control", "*".to_string()),
        ],
        medias: vec![Media {
            media: "video".into(),
            port: 0,
            num_ports: None,
            proto: "RTP/AVP".into(),
            fmt: payload_type.to_string(),
            media_title: None,
            connections: vec![],
            bandwidths: vec![],
            key: None,
            attributes: media_attrs,
        }],
    };
    let mut out = Vec::with_capacity(512);
    // Writing to a Vec cannot fail: an error would leave the body empty.
    if session.write(&mut out).is_err() {
        out.clear();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdp_for_hd_and_4k() {
        let hd = describe(
            &StreamInfo {
                width: 1920,
                height: 1080,
                fps: 30,
            },
            &Format::Jpeg,
            "192.0.2.7".parse().unwrap(),
            42,
        );
        let hd = String::from_utf8(hd).unwrap();
        assert!(
            hd.starts_with("v=0\r\no=- 42 1 IN IP4 192.0.2.7\r\n"),
            "{hd}"
        );
        for line in [
            "c=IN IP4 0.0.0.0",
            "a=range:npt=now-",
            "a=control:*",
            "m=video 0 RTP/AVP 26",
            "a=rtpmap:26 JPEG/90000",
            "a=control:trackID=0",
            "a=framerate:30",
        ] {
            assert!(
                hd.contains(&format!("{line}\r\n")),
                "{line} missing in\n{hd}"
            );
        }
        assert!(!hd.contains("x-dimensions"));
        let uhd = String::from_utf8(describe(
            &StreamInfo {
                width: 3840,
                height: 2160,
                fps: 5,
            },
            &Format::Jpeg,
            "::1".parse().unwrap(),
            1,
        ))
        .unwrap();
        assert!(uhd.contains("a=x-dimensions:3840,2160\r\n"), "{uhd}");
        assert!(uhd.contains("c=IN IP6 ::\r\n"), "{uhd}");
        // It parses back.
        sdp_types::Session::parse(uhd.as_bytes()).unwrap();
    }
}
