//! ONVIF's device and media services (Profile S): each operation's answer
//! from the camera's streams (main, sub, and the H.264 stream's profile,
//! "h264"), and the changes a client may make (the sub-stream's encoder,
//! the H.264 streams' bit rate and key frame interval, the sound's bit
//! rate).

use camstream_onvif::responses::{self as resp, DeviceInfo, Profile, VideoSource, XAddrs};
use camstream_onvif::soap::{Fault, Request as Soap, Service};
use camstream_onvif::xml::{XML_SPACE, xs_float};

use crate::codec::Codec;
use camstream_audio::packetize::Format;
use crate::fanout::StreamId;
use crate::media::Encoding;
use super::super::host::hostname;
use super::{Context, DEVICE_PATH, MEDIA_PATH, Request, board, clock_synchronised, scopes};
use super::super::ifaces;
use crate::clock::wall_now;
use crate::config::{H264_GOP, H264_KBIT};

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
    let no_config = || Fault::invalid_arg_val("ter:NoConfig", "no such configuration");
    let token = soap.arg_attr(&["Configuration"], "token").unwrap_or("");
    // None: the main stream's, the camera's own.
    let current = match token {
        "main" => None,
        t => Some(
            ctx.producers
                .find(t)
                .map(|p| p.encoding(ctx.fanout))
                .ok_or_else(no_config)?,
        ),
    };
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
    let encoding = match current.as_ref().map(|e| e.codec) {
        Some(Codec::H264) => "H264",
        // A video encoder configuration's stream is never audio's.
        Some(Codec::Jpeg | Codec::Audio(_)) | None => "JPEG",
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
    let Some(cur) = current else {
        let main = ctx.fanout.stream(StreamId::MAIN).info;
        let same = w.is_none_or(|w| w == u32::from(main.width))
            && h.is_none_or(|h| h == u32::from(main.height))
            && fps.is_none_or(|f| f == ctx.cfg.source.fps)
            && quality.is_none_or(|q| q == f64::from(ctx.cfg.source.quality));
        return if same {
            Ok(resp::empty("trt", "SetVideoEncoderConfiguration"))
        } else {
            Err(bad(
                "the main stream's size, rate and quality are set in camstream.toml",
            ))
        };
    };
    // Size, rate and quality, whatever the codec: among the options
    // (H.264's quality is its bit rate: one value).
    let p = profile(&cur);
    let opts = encoder_options(ctx, &p);
    let fixed = "its size and rate are the main stream's, set in camstream.toml, and an H.264 \
                 stream's quality is its bit rate";
    let q = quality.unwrap_or(f64::from(p.quality));
    if q < f64::from(opts.quality.0) || q > f64::from(opts.quality.1) {
        return Err(bad(if cur.resizable {
            "a quality outside QualityRange"
        } else {
            fixed
        }));
    }
    let size = (w.unwrap_or(p.width), h.unwrap_or(p.height));
    if !opts.sizes.contains(&size) {
        return Err(bad(if cur.resizable {
            "not one of the sizes GetVideoEncoderConfigurationOptions lists"
        } else {
            fixed
        }));
    }
    let fps = fps.unwrap_or(p.fps);
    if fps < opts.fps.0 || fps > opts.fps.1 {
        return Err(bad(if cur.resizable {
            "a frame rate outside FrameRateRange"
        } else {
            fixed
        }));
    }
    let h264 = match cur.h264 {
        Some(now) => Some(h264_change(soap, now, num)?),
        None => None,
    };
    let to = Encoding {
        size: (size.0 as u16, size.1 as u16),
        fps,
        quality: cur.quality.map(|_| q.round() as u8),
        h264: h264.map(|(kbit, gov)| (kbit * 1000, gov)),
        ..cur
    };
    ctx.producers
        .find(token)
        .ok_or_else(no_config)?
        .reconfigure(&to, ctx.fanout)
        .map_err(|e| Fault::receiver(&["ter:Action"], &format!("{e:#}")))?;
    Ok(resp::empty("trt", "SetVideoEncoderConfiguration"))
}

/// SetAudioEncoderConfiguration: the sound's encoding and sample rate are
/// camstream.toml's (`[audio] codec`); its bit rate may be any of those
/// GetAudioEncoderConfigurationOptions lists (AAC's; G.711 has one). What
/// the request leaves out stays; Multicast and SessionTimeout are taken
/// as they are (camstream streams no multicast). Not kept past a restart,
/// as the video's changes are not.
pub fn set_audio_encoder(soap: &Soap, ctx: &mut Context<'_>) -> Result<String, Fault> {
    let bad = |why: &str| Fault::invalid_arg_val("ter:ConfigModify", why);
    let no_config = || Fault::invalid_arg_val("ter:NoConfig", "no such configuration");
    let Some(a) = ctx.producers.audio.as_mut() else {
        return Err(no_config());
    };
    let now = onvif_sound(a).ok_or_else(no_config)?.0;
    if soap.arg_attr(&["Configuration"], "token") != Some(resp::AUDIO_TOKEN) {
        return Err(no_config());
    }
    let num = |name: &str| -> Result<Option<u32>, Fault> {
        soap.arg(&["Configuration", name])
            .map(|v| {
                xs_int(v)
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| bad("a number is not a positive xs:int"))
            })
            .transpose()
    };
    if soap.arg(&["Configuration", "Encoding"]).is_some_and(|e| e != now.encoding) {
        return Err(bad("the sound's encoding is camstream.toml's ([audio] codec)"));
    }
    if num("SampleRate")?.is_some_and(|r| r != now.sample_rate) {
        return Err(bad("the sound's sample rate is its encoding's"));
    }
    let kbit = num("Bitrate")?.unwrap_or(now.bitrate);
    let allowed = now
        .options
        .iter()
        .find(|(encoding, ..)| *encoding == now.encoding)
        .is_some_and(|(_, bitrates, _)| bitrates.contains(&kbit));
    if !allowed {
        return Err(bad("not one of the bit rates GetAudioEncoderConfigurationOptions lists"));
    }
    // G.711's one rate is its own, not an encoder's setting.
    if kbit != now.bitrate {
        a.set_bitrate(kbit * 1000)
            .map_err(|e| Fault::receiver(&["ter:Action"], &format!("{e:#}")))?;
    }
    Ok(resp::empty("trt", "SetAudioEncoderConfiguration"))
}

/// The bit rate (kbit/s) and key frame interval SetVideoEncoderConfiguration
/// asks of an H.264 stream encoding at `now` (bit/s, key frame interval;
/// what it leaves out stays).
fn h264_change(
    soap: &Soap,
    now: (u32, u32),
    num: impl Fn(&[&str]) -> Result<Option<u32>, Fault>,
) -> Result<(u32, u32), Fault> {
    let bad = |why: &str| Fault::invalid_arg_val("ter:ConfigModify", why);
    if soap
        .arg(&["Configuration", "H264", "H264Profile"])
        .is_some_and(|p| p != "Baseline")
    {
        return Err(bad("the H.264 streams are Baseline (Constrained Baseline)"));
    }
    let kbit = num(&["Configuration", "RateControl", "BitrateLimit"])?.unwrap_or(now.0 / 1000);
    let gov = num(&["Configuration", "H264", "GovLength"])?.unwrap_or(now.1);
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

/// The answer to every operation but SetVideoEncoderConfiguration and
/// SetAudioEncoderConfiguration.
pub fn answer(req: &Request, soap: &Soap, ctx: &Context<'_>) -> Result<String, Fault> {
    let host = req.host.clone().unwrap_or_else(|| "camera".to_owned());
    // As known (the camera is asked only by the picture thread).
    let picture = ctx
        .source
        .and_then(|s| s.picture().ok())
        .map(|c| c.known())
        .filter(|known| !known.is_empty());
    let x = XAddrs {
        device: format!("http://{host}{DEVICE_PATH}"),
        media: format!("http://{host}{MEDIA_PATH}"),
        events: ctx
            .producers
            .motion
            .is_some()
            .then(|| format!("http://{host}{}", super::events::PATH)),
        imaging: picture
            .is_some()
            .then(|| format!("http://{host}{}", super::imaging::PATH)),
    };
    let op = soap.operation();
    let media = soap.service == Service::Media;
    let info = ctx.fanout.stream(StreamId::MAIN).info;
    let src = VideoSource {
        token: super::imaging::SOURCE.into(),
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
    profiles.extend(ctx.producers.all().map(|p| profile(&p.encoding(ctx.fanout))));
    let profile_arg = || -> Result<&Profile, Fault> {
        let token = soap.arg(&["ProfileToken"]).unwrap_or("");
        profiles
            .iter()
            .find(|p| p.token == token)
            .ok_or_else(|| Fault::invalid_arg_val("ter:NoProfile", "no such profile"))
    };
    let sound = ctx.producers.audio.as_ref().and_then(onvif_sound);
    let audio = sound.as_ref().map(|(a, _)| a);
    let uri_query = if sound.as_ref().is_some_and(|(_, asked)| *asked) {
        "?audio=pcmu"
    } else {
        ""
    };
    // A configuration token, the sound's: else the fault that says so.
    let audio_config = || -> Result<(), Fault> {
        match (audio, soap.arg(&["ConfigurationToken"])) {
            (Some(_), Some(resp::AUDIO_TOKEN)) => Ok(()),
            _ => Err(Fault::invalid_arg_val("ter:NoConfig", "no such configuration")),
        }
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
        (true, "GetProfiles") => resp::profiles(&profiles, &src, audio),
        (true, "GetProfile") => resp::profile_response(profile_arg()?, &src, profiles.len(), audio),
        (true, "GetAudioSources") => resp::audio_sources(audio),
        (true, "GetAudioSourceConfigurations") => {
            resp::audio_source_configurations(op, audio, profiles.len())
        }
        (true, "GetCompatibleAudioSourceConfigurations") => {
            profile_arg()?;
            resp::audio_source_configurations(op, audio, profiles.len())
        }
        (true, "GetAudioSourceConfiguration") => {
            audio_config()?;
            resp::audio_source_configurations(op, audio, profiles.len())
        }
        (true, "GetAudioSourceConfigurationOptions") if audio.is_some() => {
            resp::audio_source_configuration_options()
        }
        (true, "GetAudioEncoderConfigurations") => {
            resp::audio_encoder_configurations(op, audio, profiles.len())
        }
        (true, "GetCompatibleAudioEncoderConfigurations") => {
            profile_arg()?;
            resp::audio_encoder_configurations(op, audio, profiles.len())
        }
        (true, "GetAudioEncoderConfiguration") => {
            audio_config()?;
            resp::audio_encoder_configurations(op, audio, profiles.len())
        }
        (true, "GetAudioEncoderConfigurationOptions") => match audio {
            Some(a) => resp::audio_encoder_configuration_options(a),
            None => return Err(Fault::invalid_arg_val("ter:NoConfig", "the camera has no sound")),
        },
        // The one input, which a client may set to itself.
        (true, "SetAudioSourceConfiguration") => {
            let token = soap.arg_attr(&["Configuration"], "token");
            let source = soap.arg(&["Configuration", "SourceToken"]);
            if audio.is_none() || token != Some(resp::AUDIO_TOKEN) {
                return Err(Fault::invalid_arg_val("ter:NoConfig", "no such configuration"));
            }
            if source.is_some_and(|s| s != resp::AUDIO_TOKEN) {
                return Err(Fault::invalid_arg_val("ter:ConfigModify", "the camera has one audio source, \"audio\""));
            }
            resp::empty("trt", op)
        }
        // Every profile carries the sound already: adding it changes
        // nothing (an NVR adds it to the profile it records).
        (true, "AddAudioSourceConfiguration" | "AddAudioEncoderConfiguration") => {
            profile_arg()?;
            audio_config()?;
            resp::empty("trt", op)
        }
        (true, "GetVideoSources") => resp::video_sources(
            &src,
            &picture.as_deref().map_or_else(String::new, |p| {
                camstream_onvif::imaging::video_source_imaging(&super::imaging::imaging(p))
            }),
        ),
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
            // A producer's profile is named by its stream's path.
            let path = match p.token.as_str() {
                "main" => ctx.fanout.stream(StreamId::MAIN).name.as_str(),
                token => token,
            };
            resp::media_uri(false, &format!("rtsp://{rtsp_host}{port}/{path}{uri_query}"))
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

/// The sound ONVIF shows: the configured encoding where Media ver10 names
/// it (G.711, AAC); an Opus camera's G.711, which every build makes, and
/// which the profiles' stream URI then asks for (`?audio=pcmu`): true.
fn onvif_sound(a: &crate::media::audio::Audio) -> Option<(resp::Audio, bool)> {
    match a.format() {
        (Format::Opus, _) => onvif_audio((Format::Pcmu, 0)).map(|s| (s, true)),
        configured => onvif_audio(configured).map(|s| (s, false)),
    }
}

/// The sound as Media ver10 can tell it: G.711 or AAC (Opus has no name
/// there); the options are the encodings this build has.
fn onvif_audio((format, bitrate): (Format, u32)) -> Option<resp::Audio> {
    let mut options = vec![("G711", vec![64], vec![8])];
    if cfg!(feature = "aac") {
        options.push(("AAC", vec![32, 48, 64, 96, 128], vec![48]));
    }
    let (encoding, bitrate, sample_rate) = match format {
        Format::Pcmu => ("G711", 64, 8),
        Format::Aac(c) => ("AAC", bitrate / 1000, c.rate() / 1000),
        Format::Opus => return None,
    };
    Some(resp::Audio {
        encoding,
        bitrate,
        sample_rate,
        options,
    })
}

/// A producer's stream as the ONVIF profile named by its path: the
/// sub-stream's may change its size and rate too.
fn profile(e: &Encoding) -> Profile {
    Profile {
        token: e.path.into(),
        name: e.path.into(),
        width: u32::from(e.size.0),
        height: u32::from(e.size.1),
        fps: e.fps,
        // ONVIF's encoder configuration has a quality whatever the codec;
        // H.264's is its bit rate.
        quality: e.quality.map_or(H264_QUALITY, u32::from),
        settable: e.resizable,
        h264: e.h264.map(|(bitrate, gop)| resp::H264 {
            bitrate: bitrate / 1000,
            gov_length: gop,
        }),
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
