//! The client's side of DESCRIBE: the video track in a server's SDP (RFC
//! 4566), RTP/JPEG or H.264 (RFC 6184), and the URLs to SETUP and PLAY it
//! (RFC 2326 §C.1.1).

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// A video track's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// RTP/JPEG, payload type 26.
    Jpeg,
    /// H.264 on the dynamic payload type its `a=rtpmap` names.
    H264 { payload_type: u8 },
}

#[derive(Debug, PartialEq, Eq)]
pub struct VideoTrack {
    /// The URL to SETUP.
    pub control: String,
    /// The presentation's URL (PLAY, TEARDOWN): the Content-Base, or else the
    /// URL that was described.
    pub base: String,
    /// `a=x-dimensions` (sizes RTP/JPEG's 8-bit fields cannot carry).
    pub x_dimensions: Option<(u16, u16)>,
    pub codec: Codec,
    /// H.264's parameter sets from its `a=fmtp`'s sprop-parameter-sets
    /// (RFC 6184 §8.1): NAL units, SPS and PPS, without start codes; those
    /// that are not base64 are left out.
    pub parameter_sets: Vec<Vec<u8>>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum SdpError {
    Unparseable(String),
    NoJpeg,
    NoVideo,
}

impl fmt::Display for SdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SdpError::Unparseable(e) => write!(f, "bad SDP: {e}"),
            SdpError::NoJpeg => f.write_str("the SDP offers no RTP/JPEG (payload type 26) video"),
            SdpError::NoVideo => f.write_str("the SDP offers neither RTP/JPEG nor H.264 video"),
        }
    }
}

impl std::error::Error for SdpError {}

/// Finds the first video medium with payload type 26. `content_base` is the
/// DESCRIBE response's Content-Base header, `described` the request's URL.
pub fn jpeg_track(
    body: &[u8],
    content_base: Option<&str>,
    described: &str,
) -> Result<VideoTrack, SdpError> {
    track(body, content_base, described, false)?.ok_or(SdpError::NoJpeg)
}

/// The first video medium that is RTP/JPEG or H.264, as [`jpeg_track`].
pub fn video_track(
    body: &[u8],
    content_base: Option<&str>,
    described: &str,
) -> Result<VideoTrack, SdpError> {
    track(body, content_base, described, true)?.ok_or(SdpError::NoVideo)
}

/// The codec of a video medium's first format camstream's clients read.
fn codec(media: &sdp_types::Media, h264: bool) -> Option<Codec> {
    media.fmt.split(' ').find_map(|f| {
        if f == "26" {
            return Some(Codec::Jpeg);
        }
        let pt: u8 = f.parse().ok().filter(|&pt| h264 && pt >= 96)?;
        media
            .attributes
            .iter()
            .filter(|a| a.attribute == "rtpmap")
            .filter_map(|a| a.value.as_deref()?.split_once(' '))
            .any(|(p, enc)| p == f && enc.to_ascii_uppercase().starts_with("H264/90000"))
            .then_some(Codec::H264 { payload_type: pt })
    })
}

fn track(
    body: &[u8],
    content_base: Option<&str>,
    described: &str,
    h264: bool,
) -> Result<Option<VideoTrack>, SdpError> {
    let sdp = sdp_types::Session::parse(body).map_err(|e| SdpError::Unparseable(e.to_string()))?;
    let Some((media, codec)) = sdp
        .medias
        .iter()
        .filter(|m| m.media == "video")
        .find_map(|m| Some((m, codec(m, h264)?)))
    else {
        return Ok(None);
    };
    let base = content_base.unwrap_or(described).to_owned();
    let control = media
        .get_first_attribute_value("control")
        .flatten()
        .unwrap_or("*");
    let control = if control.starts_with("rtsp://") || control.starts_with("rtsps://") {
        control.to_owned()
    } else if control == "*" {
        base.clone()
    } else {
        format!("{}/{control}", base.trim_end_matches('/'))
    };
    let x_dimensions = media
        .get_first_attribute_value("x-dimensions")
        .flatten()
        .and_then(|v| {
            let (w, h) = v.split_once(',')?;
            Some((w.trim().parse().ok()?, h.trim().parse().ok()?))
        });
    let parameter_sets = match codec {
        Codec::H264 { payload_type } => parameter_sets(media, payload_type),
        Codec::Jpeg => Vec::new(),
    };
    Ok(Some(VideoTrack {
        control,
        base,
        x_dimensions,
        codec,
        parameter_sets,
    }))
}

/// The sprop-parameter-sets of `payload_type`'s `a=fmtp`, decoded.
fn parameter_sets(media: &sdp_types::Media, payload_type: u8) -> Vec<Vec<u8>> {
    let pt = payload_type.to_string();
    media
        .attributes
        .iter()
        .filter(|a| a.attribute == "fmtp")
        .filter_map(|a| a.value.as_deref()?.split_once(' '))
        .filter(|(p, _)| *p == pt)
        .flat_map(|(_, params)| params.split(';'))
        .filter_map(|param| {
            let (k, v) = param.trim().split_once('=')?;
            k.eq_ignore_ascii_case("sprop-parameter-sets").then_some(v)
        })
        .flat_map(|v| v.split(','))
        .filter_map(|set| STANDARD.decode(set.trim()).ok())
        .filter(|set| !set.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAMSTREAM: &[u8] = b"v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=camstream\r\nt=0 0\r\n\
        a=control:*\r\nm=video 0 RTP/AVP 26\r\na=control:trackID=0\r\na=x-dimensions:2560,1440\r\n";

    #[test]
    fn relative_control_against_the_content_base() {
        let t = jpeg_track(CAMSTREAM, Some("rtsp://cam/stream/"), "rtsp://cam/stream").unwrap();
        assert_eq!(
            t,
            VideoTrack {
                control: "rtsp://cam/stream/trackID=0".into(),
                base: "rtsp://cam/stream/".into(),
                x_dimensions: Some((2560, 1440)),
                codec: Codec::Jpeg,
                parameter_sets: Vec::new(),
            }
        );
    }

    #[test]
    fn absolute_or_star_control_and_no_base() {
        let sdp = b"v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=x\r\nt=0 0\r\nm=audio 0 RTP/AVP 0\r\n\
            a=control:rtsp://cam/a\r\nm=video 0 RTP/AVP 96 26\r\na=control:rtsp://cam/v\r\n";
        let t = jpeg_track(sdp, None, "rtsp://cam/s").unwrap();
        assert_eq!(
            (t.control.as_str(), t.base.as_str(), t.x_dimensions),
            ("rtsp://cam/v", "rtsp://cam/s", None)
        );
        let sdp = b"v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=x\r\nt=0 0\r\nm=video 0 RTP/AVP 26\r\n";
        assert_eq!(
            jpeg_track(sdp, None, "rtsp://cam/s").unwrap().control,
            "rtsp://cam/s"
        );
    }

    #[test]
    fn h264_on_its_dynamic_payload_type() {
        let sdp = b"v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=camstream\r\nt=0 0\r\n\
            m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\na=control:trackID=0\r\n";
        let t = video_track(sdp, None, "rtsp://cam/h264").unwrap();
        assert_eq!(t.codec, Codec::H264 { payload_type: 96 });
        assert!(t.parameter_sets.is_empty());
        assert_eq!(t.control, "rtsp://cam/h264/trackID=0");
        assert_eq!(
            jpeg_track(sdp, None, "rtsp://cam/h264"),
            Err(SdpError::NoJpeg)
        );
        let jpeg = video_track(CAMSTREAM, None, "rtsp://cam/stream").unwrap();
        assert_eq!(jpeg.codec, Codec::Jpeg);
        let other = b"v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=x\r\nt=0 0\r\n\
            m=video 0 RTP/AVP 97\r\na=rtpmap:97 H265/90000\r\n";
        assert_eq!(
            video_track(other, None, "rtsp://c/s"),
            Err(SdpError::NoVideo)
        );
    }

    #[test]
    fn h264_parameter_sets_of_its_payload_type() {
        // FFmpeg 5.1's SDP for libx264 (`-flags +global_header -f rtp
        // -sdp_file`), behind another format's fmtp.
        let sdp = b"v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=No Name\r\nt=0 0\r\n\
            m=video 0 RTP/AVP 97 96\r\na=rtpmap:97 H265/90000\r\n\
            a=fmtp:97 sprop-vps=QAEMAf//\r\na=rtpmap:96 H264/90000\r\n\
            a=fmtp:96 packetization-mode=1; sprop-parameter-sets=Z/QADJGbKCg/YCIAAAMAAgAAAwAoHihTLA==,aOvjxEhE; profile-level-id=F4000C\r\n";
        let t = video_track(sdp, None, "rtsp://c/s").unwrap();
        assert_eq!(t.codec, Codec::H264 { payload_type: 96 });
        assert_eq!(t.parameter_sets.len(), 2);
        assert_eq!(t.parameter_sets[0][0] & 0x1f, 7, "SPS");
        assert_eq!(
            t.parameter_sets[1],
            [0x68, 0xeb, 0xe3, 0xc4, 0x48, 0x44],
            "PPS"
        );
        // Not base64: left out.
        let bad = b"v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=x\r\nt=0 0\r\nm=video 0 RTP/AVP 96\r\n\
            a=rtpmap:96 H264/90000\r\na=fmtp:96 sprop-parameter-sets=%%%,aOvjyyLA\r\n";
        assert_eq!(
            video_track(bad, None, "rtsp://c/s")
                .unwrap()
                .parameter_sets
                .len(),
            1
        );
    }

    #[test]
    fn no_jpeg_or_no_sdp() {
        let h264 = b"v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=x\r\nt=0 0\r\nm=video 0 RTP/AVP 96\r\n";
        assert_eq!(jpeg_track(h264, None, "rtsp://c/s"), Err(SdpError::NoJpeg));
        assert!(matches!(
            jpeg_track(b"\xff\x00", None, "rtsp://c/s"),
            Err(SdpError::Unparseable(_))
        ));
    }
}
