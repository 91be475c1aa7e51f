//! ONVIF's device and media services (Profile S): each operation's answer
//! from the camera's streams (main, sub, and the H.264 stream's profile,
//! "h264"), and the changes a client may make (the sub-stream's encoder,
//! the H.264 streams' bit rate and key frame interval).

use camstream_onvif::responses::{self as resp, DeviceInfo, Profile, VideoSource, XAddrs};
use camstream_onvif::soap::{Fault, Request as Soap, Service};

use crate::fanout::{Fanout, StreamId};
use crate::media::h264;
use crate::media::h264::H264Stream;
use super::super::host::hostname;
use crate::media::substream::{self, Sub, SubStream};
use super::{Context, DEVICE_PATH, MEDIA_PATH, Request, board, clock_synchronised, ifaces, scopes};
use crate::clock::wall_now;
use crate::config::{H264_GOP, H264_KBIT, H264Settings};

/// An H.264 stream's Quality in ONVIF's encoder configuration, its only
/// one: its bit rate says how good its pictures are.
const H264_QUALITY: u32 = 50;

/// What SetVideoEncoderConfiguration may choose: the main stream is
/// the camera's as camstream.toml sets it (one size, rate and quality);
/// the sub-stream any of a few sizes of the main stream's shape, any
/// rate up to the main stream's, any quality (JPEG) or key frame interval
/// (H.264).
fn encoder_options(ctx: &Context<'_>, p: &Profile) -> resp::EncoderOptions {
    if !p.settable {
        return resp::EncoderOptions {
            sizes: vec![(p.width, p.height)],
            fps: (p.fps, p.fps),
            quality: (p.quality, p.quality),
            // The H.264 stream's key frame interval may change (and its
            // bit rate: SetVideoEncoderConfiguration's BitrateLimit).
            gov_length: p.h264.map(|_| H264_GOP),
        };
    }
    let main = ctx.fanout.stream(StreamId::MAIN).info;
    let (mw, mh) = (u32::from(main.width), u32::from(main.height));
    let mut sizes = vec![(p.width, p.height)];
    for div in [2, 3, 4, 6, 8] {
        let w = mw / div / 8 * 8;
        let h = (w * mh / mw) / 8 * 8;
        if w >= 16 && h >= 16 && !sizes.contains(&(w, h)) {
            sizes.push((w, h));
        }
    }
    resp::EncoderOptions {
        sizes,
        fps: (1, ctx.cfg.source.fps),
        // H.264's quality is its bit rate.
        quality: match p.h264 {
            None => (1, 100),
            Some(_) => (p.quality, p.quality),
        },
        gov_length: p.h264.map(|_| H264_GOP),
    }
}

/// SetVideoEncoderConfiguration: the sub-stream takes any of its
/// options; the main stream only what it has (ter:ConfigModify); an
/// unknown token is ter:NoConfig, whatever else the request says.
pub fn set_encoder(soap: &Soap, ctx: &mut Context<'_>) -> Result<String, Fault> {
    let bad = |why: &str| Fault::invalid_arg_val("ter:ConfigModify", why);
    let token = soap.arg_attr(&["Configuration"], "token").unwrap_or("");
    let known = match token {
        "main" => true,
        substream::PATH => ctx.producers.sub.is_some(),
        h264::PATH => ctx.producers.h264.is_some(),
        _ => false,
    };
    if !known {
        return Err(Fault::invalid_arg_val(
            "ter:NoConfig",
            "no such configuration",
        ));
    }
    // The schema's xs:int: an optional sign and digits (no fraction, no
    // exponent); none of the options is negative.
    let num = |path: &[&str]| -> Result<Option<u32>, Fault> {
        soap.arg(path)
            .map(|v| {
                xs_int(v)
                    .ok_or_else(|| bad("a number is not an xs:int"))
                    .and_then(|n| u32::try_from(n).map_err(|_| bad("a negative number")))
            })
            .transpose()
    };
    // Quality is an xs:float; it must lie in QualityRange.
    let quality = soap
        .arg(&["Configuration", "Quality"])
        .map(|v| xs_float(v).ok_or_else(|| bad("a Quality is not an xs:float")))
        .transpose()?;
    // EncodingIntervalRange is 1 to 1: each frame of the stream's rate.
    if num(&["Configuration", "RateControl", "EncodingInterval"])?.is_some_and(|i| i != 1) {
        return Err(bad("an EncodingInterval outside EncodingIntervalRange"));
    }
    let sub_h264 = matches!(ctx.producers.sub.as_ref(), Some(Sub::H264(_)));
    let encoding = if token == h264::PATH || (token == substream::PATH && sub_h264) {
        "H264"
    } else {
        "JPEG"
    };
    if soap
        .arg(&["Configuration", "Encoding"])
        .is_some_and(|e| e != encoding)
    {
        return Err(bad(
            "a profile's encoding is its stream's (H264 for the h264 profile, and for sub where \
             its codec is h264; JPEG otherwise)",
        ));
    }
    let w = num(&["Configuration", "Resolution", "Width"])?;
    let h = num(&["Configuration", "Resolution", "Height"])?;
    let fps = num(&["Configuration", "RateControl", "FrameRateLimit"])?;
    let main = ctx.fanout.stream(StreamId::MAIN).info;
    match (token, ctx.producers.sub.as_ref()) {
        ("sub", Some(sub)) => {
            // Size, rate and quality, whatever the codec: among the
            // options (H.264's quality is its bit rate: one value).
            let cur = sub_profile(sub, ctx.fanout);
            let opts = encoder_options(ctx, &cur);
            let q = quality.unwrap_or(f64::from(cur.quality));
            if q < f64::from(opts.quality.0) || q > f64::from(opts.quality.1) {
                return Err(bad("a quality outside QualityRange"));
            }
            let size = (w.unwrap_or(cur.width), h.unwrap_or(cur.height));
            if !opts.sizes.contains(&size) {
                return Err(bad(
                    "not one of the sizes GetVideoEncoderConfigurationOptions lists",
                ));
            }
            let fps = fps.unwrap_or(cur.fps);
            if fps < opts.fps.0 || fps > opts.fps.1 {
                return Err(bad("a frame rate outside FrameRateRange"));
            }
            let changed = |e: anyhow::Error| Fault::receiver(&["ter:Action"], &format!("{e:#}"));
            match ctx.producers.sub.as_mut() {
                Some(Sub::H264(sub)) => {
                    let (kbit, gov) = h264_change(soap, sub.settings(), num)?;
                    let mut shape = sub.shape();
                    let unchanged = (size, fps) == ((cur.width, cur.height), cur.fps)
                        && (kbit * 1000, gov) == (sub.settings().bitrate, sub.settings().gop);
                    shape.size = Some((size.0 as u16, size.1 as u16));
                    shape.fps = fps;
                    if !unchanged {
                        sub.reconfigure(kbit * 1000, gov, shape, ctx.fanout)
                            .map_err(changed)?;
                    }
                }
                Some(Sub::Jpeg(sub)) => {
                    let mut cfg = sub.cfg.clone();
                    cfg.width = size.0 as u16;
                    cfg.height = size.1 as u16;
                    cfg.fps = fps;
                    cfg.quality = q.round() as u8;
                    sub.reconfigure(cfg, ctx.fanout).map_err(changed)?;
                }
                None => unreachable!("matched above"),
            }
            Ok(resp::empty("trt", "SetVideoEncoderConfiguration"))
        }
        ("main", _) => {
            let same = w.is_none_or(|w| w == u32::from(main.width))
                && h.is_none_or(|h| h == u32::from(main.height))
                && fps.is_none_or(|f| f == ctx.cfg.source.fps)
                && quality.is_none_or(|q| q == f64::from(ctx.cfg.source.quality));
            if same {
                Ok(resp::empty("trt", "SetVideoEncoderConfiguration"))
            } else {
                Err(bad(
                    "the main stream's size, rate and quality are set in camstream.toml",
                ))
            }
        }
        (h264::PATH, _) if ctx.producers.h264.is_some() => {
            let same = w.is_none_or(|w| w == u32::from(main.width & !1))
                && h.is_none_or(|h| h == u32::from(main.height & !1))
                && fps.is_none_or(|f| f == ctx.cfg.source.fps)
                && quality.is_none_or(|q| q == f64::from(H264_QUALITY));
            if !same {
                return Err(bad(
                    "the H.264 stream's size and rate are the main stream's, set in camstream.toml, \
                     and its quality is its bit rate",
                ));
            }
            let Some(stream) = ctx.producers.h264.as_mut() else {
                unreachable!("matched above");
            };
            let (kbit, gov) = h264_change(soap, stream.settings(), num)?;
            let now = stream.settings();
            if (kbit * 1000, gov) != (now.bitrate, now.gop) {
                let shape = stream.shape();
                stream
                    .reconfigure(kbit * 1000, gov, shape, ctx.fanout)
                    .map_err(|e| Fault::receiver(&["ter:Action"], &format!("{e:#}")))?;
            }
            Ok(resp::empty("trt", "SetVideoEncoderConfiguration"))
        }
        _ => Err(Fault::invalid_arg_val(
            "ter:NoConfig",
            "no such configuration",
        )),
    }
}

/// The bit rate (kbit/s) and key frame interval SetVideoEncoderConfiguration
/// asks of an H.264 stream encoding with `now` (what it leaves out stays).
fn h264_change(
    soap: &Soap,
    now: &H264Settings,
    num: impl Fn(&[&str]) -> Result<Option<u32>, Fault>,
) -> Result<(u32, u32), Fault> {
    let bad = |why: &str| Fault::invalid_arg_val("ter:ConfigModify", why);
    if soap
        .arg(&["Configuration", "H264", "H264Profile"])
        .is_some_and(|p| p != "Baseline")
    {
        return Err(bad("the H.264 streams are Baseline (Constrained Baseline)"));
    }
    let kbit =
        num(&["Configuration", "RateControl", "BitrateLimit"])?.unwrap_or(now.bitrate / 1000);
    let gov = num(&["Configuration", "H264", "GovLength"])?.unwrap_or(now.gop);
    if !(H264_KBIT.0..=H264_KBIT.1).contains(&kbit) {
        return Err(bad("a BitrateLimit outside 64-100000 kbit/s"));
    }
    if !(H264_GOP.0..=H264_GOP.1).contains(&gov) {
        return Err(bad("a GovLength outside GovLengthRange"));
    }
    Ok((kbit, gov))
}

/// An xs:int as XML Schema writes it (`[\-+]?[0-9]+`, white space
/// around it collapsed), or None: Rust's i32 parsing takes exactly that.
fn xs_int(v: &str) -> Option<i32> {
    v.trim_matches(XML_SPACE).parse().ok()
}

/// A finite xs:float, or None (INF and NaN are never a quality).
fn xs_float(v: &str) -> Option<f64> {
    let v = v.trim_matches(XML_SPACE);
    // Rust also takes "inf", "infinity" and "nan" in any case, which the
    // schema does not; a finite value is all a quality may be anyway.
    v.parse::<f32>()
        .ok()
        .filter(|f| f.is_finite())
        .map(f64::from)
}

/// XML's white space (a space, tab, carriage return, line feed).
const XML_SPACE: &[char] = &[' ', '\t', '\r', '\n'];

/// The answer to every operation but SetVideoEncoderConfiguration.
pub fn answer(req: &Request, soap: &Soap, ctx: &Context<'_>) -> Result<String, Fault> {
    let host = req.host.clone().unwrap_or_else(|| "camera".to_owned());
    let x = XAddrs {
        device: format!("http://{host}{DEVICE_PATH}"),
        media: format!("http://{host}{MEDIA_PATH}"),
    };
    let op = soap.operation();
    let media = soap.service == Service::Media;
    let info = ctx.fanout.stream(StreamId::MAIN).info;
    let src = VideoSource {
        token: "camera".into(),
        width: u32::from(info.width),
        height: u32::from(info.height),
        fps: f64::from(ctx.cfg.source.fps),
    };
    let main = Profile {
        token: "main".into(),
        name: "main".into(),
        width: u32::from(info.width),
        height: u32::from(info.height),
        fps: ctx.cfg.source.fps,
        quality: u32::from(ctx.cfg.source.quality),
        settable: false,
        h264: None,
    };
    let mut profiles = vec![main];
    if let Some(sub) = ctx.producers.sub.as_ref() {
        profiles.push(sub_profile(sub, ctx.fanout));
    }
    if let Some(stream) = ctx.producers.h264.as_ref() {
        profiles.push(h264_profile(stream, ctx.fanout, h264::PATH));
    }
    let profile_arg = || -> Result<&Profile, Fault> {
        let token = soap.arg(&["ProfileToken"]).unwrap_or("");
        profiles
            .iter()
            .find(|p| p.token == token)
            .ok_or_else(|| Fault::invalid_arg_val("ter:NoProfile", "no such profile"))
    };
    let rtsp_host = host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h);
    Ok(match (media, op) {
        (false, "GetSystemDateAndTime") => {
            resp::system_date_and_time((wall_now().0 / 1_000_000_000) as i64, clock_synchronised())
        }
        (false, "GetDeviceInformation") => resp::device_information(&DeviceInfo {
            manufacturer: "camstream".into(),
            model: "camstream".into(),
            firmware_version: env!("CARGO_PKG_VERSION").into(),
            serial_number: hostname(),
            hardware_id: board(),
        }),
        (false, "GetCapabilities") => {
            let category = soap.arg(&["Category"]).unwrap_or("All");
            resp::capabilities(&x, category).ok_or_else(|| {
                Fault::invalid_arg_val("ter:NoSuchService", "no service of that category")
            })?
        }
        (false, "GetServices") => {
            let caps = soap.arg(&["IncludeCapability"]) == Some("true");
            resp::services(&x, caps)
        }
        (_, "GetServiceCapabilities") => resp::service_capabilities(media),
        (false, "GetScopes") => resp::scopes(&scopes()),
        (false, "GetHostname") => resp::hostname(&hostname(), true),
        (false, "GetWsdlUrl") => resp::wsdl_url(),
        (false, "GetNetworkInterfaces") => resp::network_interfaces(&ifaces::described()),
        (true, "GetProfiles") => resp::profiles(&profiles, &src),
        (true, "GetProfile") => resp::profile_response(profile_arg()?, &src, profiles.len()),
        (true, "GetVideoSources") => resp::video_sources(&src),
        (true, "GetVideoSourceConfigurations") => {
            resp::video_source_configurations(&src, profiles.len(), false)
        }
        (true, "GetVideoSourceConfiguration") => {
            resp::video_source_configurations(&src, profiles.len(), true)
        }
        (true, "GetVideoEncoderConfigurations") => resp::video_encoder_configurations(&profiles),
        (true, "GetVideoEncoderConfiguration") => {
            let token = soap.arg(&["ConfigurationToken"]).unwrap_or("");
            let p = profiles
                .iter()
                .find(|p| p.token == token)
                .ok_or_else(|| Fault::invalid_arg_val("ter:NoConfig", "no such configuration"))?;
            resp::video_encoder_configuration(p)
        }
        (true, "GetStreamUri") => {
            let p = profile_arg()?;
            let port = match ctx.cfg.rtsp_port {
                554 => String::new(),
                p => format!(":{p}"),
            };
            let path = match (p.token.as_str(), ctx.producers.sub.as_ref()) {
                ("sub", Some(sub)) => ctx.fanout.stream(sub.id()).name.as_str(),
                (h264::PATH, _) => h264::PATH,
                _ => ctx.fanout.stream(StreamId::MAIN).name.as_str(),
            };
            resp::media_uri(false, &format!("rtsp://{rtsp_host}{port}/{path}"))
        }
        (true, "GetVideoEncoderConfigurationOptions") => {
            // Each profile's configuration has the profile's token; an
            // unknown one is the fault of what it names (none: the main
            // stream's options).
            let (token, fault, why) = match soap.arg(&["ConfigurationToken"]) {
                Some(t) => (t, "ter:NoConfig", "no such configuration"),
                None => (
                    soap.arg(&["ProfileToken"]).unwrap_or("main"),
                    "ter:NoProfile",
                    "no such profile",
                ),
            };
            let p = profiles
                .iter()
                .find(|p| p.token == token)
                .ok_or_else(|| Fault::invalid_arg_val(fault, why))?;
            resp::video_encoder_configuration_options(&encoder_options(ctx, p))
        }
        (true, "GetSnapshotUri") => {
            profile_arg()?;
            resp::media_uri(true, &format!("http://{host}/snapshot.jpg"))
        }
        _ => return Err(Fault::action_not_supported(op)),
    })
}

/// An H.264 stream as the ONVIF profile `token`: the sub-stream's may
/// change its size and rate too.
fn h264_profile(stream: &H264Stream, fanout: &Fanout, token: &str) -> Profile {
    let h = stream.settings();
    let info = fanout.stream(stream.id).info;
    Profile {
        token: token.into(),
        name: token.into(),
        width: u32::from(info.width),
        height: u32::from(info.height),
        fps: info.fps,
        // ONVIF's encoder configuration has a quality whatever the codec;
        // H.264's is its bit rate.
        quality: H264_QUALITY,
        settable: token == substream::PATH,
        h264: Some(resp::H264 {
            bitrate: h.bitrate / 1000,
            gov_length: h.gop,
        }),
    }
}

/// The detection sub-stream as ONVIF's profile "sub", the one a client may
/// change.
fn sub_profile(sub: &Sub, fanout: &Fanout) -> Profile {
    match sub {
        Sub::H264(s) => h264_profile(s, fanout, substream::PATH),
        Sub::Jpeg(s) => jpeg_sub_profile(s, fanout),
    }
}

fn jpeg_sub_profile(sub: &SubStream, fanout: &Fanout) -> Profile {
    let info = fanout.stream(sub.id).info;
    Profile {
        token: "sub".into(),
        name: "sub".into(),
        width: u32::from(info.width),
        height: u32::from(info.height),
        fps: sub.cfg.fps,
        quality: u32::from(sub.cfg.quality),
        settable: true,
        h264: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_as_the_schema_writes_them() {
        // xs:int's lexical space allows a leading sign and zeros.
        assert_eq!(xs_int("1000"), Some(1000));
        assert_eq!(xs_int("+1000"), Some(1000));
        assert_eq!(xs_int(" 0100\n"), Some(100));
        assert_eq!(xs_int("-5"), Some(-5));
        for not in [
            "1e3",
            "99999.9",
            "1000.0",
            "",
            "+",
            "0x10",
            "1_000",
            "2147483648",
        ] {
            assert_eq!(xs_int(not), None, "{not}");
        }
        // xs:float: fractions and exponents, but never INF or NaN here.
        assert_eq!(xs_float("50.0"), Some(50.0));
        assert_eq!(xs_float("1e3"), Some(1000.0));
        for not in ["INF", "NaN", "inf", "", "five"] {
            assert_eq!(xs_float(not), None, "{not}");
        }
    }
}
