//! The session description DESCRIBE returns.

use std::net::IpAddr;

use sdp_types::{Attribute, Connection, Media, Origin, Session, Time};

use crate::codec::{MediaKind, Packetizer};
use crate::source::StreamInfo;

/// The media-level control URL's name, relative to the Content-Base: the
/// track's number follows (`trackID=0` the picture, `trackID=1` the sound
/// in its configured encoding, 2 and on its other encodings).
pub const TRACK: &str = "trackID=";

fn attr(name: &str, value: impl Into<Option<String>>) -> Attribute {
    Attribute {
        attribute: name.into(),
        value: value.into(),
    }
}

/// One track's media description as its codec says
/// ([`Packetizer::sdp_attributes`]), control `trackID=N`.
fn media(n: u8, info: &StreamInfo, codec: &Packetizer) -> Media {
    let mut media_attrs: Vec<Attribute> = codec
        .sdp_attributes(info)
        .into_iter()
        .map(|(name, value)| attr(name, value))
        .collect();
    // rtpmap and fmtp first, as clients are used to; then the track.
    let at = media_attrs
        .iter()
        .take_while(|a| a.attribute == "rtpmap" || a.attribute == "fmtp")
        .count();
    media_attrs.insert(at, attr("control", format!("{TRACK}{n}")));
    if codec.kind() == MediaKind::Video {
        media_attrs.insert(at + 1, attr("framerate", info.fps.to_string()));
    }
    Media {
        media: codec.kind().sdp().into(),
        port: 0,
        num_ports: None,
        proto: "RTP/AVP".into(),
        fmt: codec.payload_type().to_string(),
        media_title: None,
        connections: vec![],
        bandwidths: vec![],
        key: None,
        attributes: media_attrs,
    }
}

/// A live presentation, aggregate control `*`, its tracks in order (the
/// picture, then the sound where there is one).
pub fn describe(tracks: &[(u8, &StreamInfo, &Packetizer)], local: IpAddr, session_id: u64) -> Vec<u8> {
    let unspecified: IpAddr = if local.is_ipv4() {
        [0u8; 4].into()
    } else {
        [0u16; 8].into()
    };
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
        medias: tracks
            .iter()
            .map(|&(n, info, codec)| media(n, info, codec))
            .collect(),
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
    use crate::codec::Codec;

    #[test]
    fn sdp_for_hd_and_4k() {
        let hd = describe(
            &[(
                0,
                &StreamInfo {
                    width: 1920,
                    height: 1080,
                    fps: 30,
                },
                &Packetizer::new(Codec::Jpeg, 1, 1, 1400).unwrap(),
            )],
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
            &[(
                0,
                &StreamInfo {
                    width: 3840,
                    height: 2160,
                    fps: 5,
                },
                &Packetizer::new(Codec::Jpeg, 1, 1, 1400).unwrap(),
            )],
            "::1".parse().unwrap(),
            1,
        ))
        .unwrap();
        assert!(
            uhd.contains("a=framerate:5\r\na=x-dimensions:3840,2160\r\n"),
            "{uhd}"
        );
        assert!(uhd.contains("c=IN IP6 ::\r\n"), "{uhd}");
        // It parses back.
        sdp_types::Session::parse(uhd.as_bytes()).unwrap();
    }

    #[test]
    fn sdp_for_h264_before_its_parameter_sets() {
        let info = StreamInfo {
            width: 1280,
            height: 720,
            fps: 30,
        };
        let sdp = describe(
            &[(0, &info, &Packetizer::new(Codec::H264, 1, 1, 1400).unwrap())],
            "192.0.2.7".parse().unwrap(),
            7,
        );
        let sdp = String::from_utf8(sdp).unwrap();
        assert!(
            sdp.contains(
                "m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1"
            ),
            "{sdp}"
        );
        assert!(sdp.contains("\r\na=control:trackID=0\r\na=framerate:30\r\n"), "{sdp}");
    }

    #[test]
    fn sdp_with_a_sound_track() {
        use camstream_audio::packetize::Format;
        let info = StreamInfo {
            width: 640,
            height: 480,
            fps: 25,
        };
        let video = Packetizer::new(Codec::Jpeg, 1, 1, 1400).unwrap();
        let opus = Packetizer::new(Codec::Audio(Format::Opus), 2, 1, 1400).unwrap();
        let sdp = describe(&[(0, &info, &video), (3, &info, &opus)], "192.0.2.7".parse().unwrap(), 7);
        let sdp = String::from_utf8(sdp).unwrap();
        assert!(
            sdp.ends_with(
                "m=video 0 RTP/AVP 26\r\na=rtpmap:26 JPEG/90000\r\na=control:trackID=0\r\na=framerate:25\r\n\
                 m=audio 0 RTP/AVP 98\r\na=rtpmap:98 opus/48000/2\r\na=fmtp:98 sprop-stereo=0;useinbandfec=0\r\n\
                 a=control:trackID=3\r\n"
            ),
            "{sdp}"
        );
        sdp_types::Session::parse(sdp.as_bytes()).unwrap();
    }
}
