//! The answers of the device and media (ver10) services a Profile S client
//! asks for, written from what the daemon knows: the camera, its streams,
//! its addresses. Element order and required elements follow ONVIF's
//! schema (onvif.xsd), which clients such as zeep read by.

use std::fmt::Write;

use crate::ns;
use crate::xml::escape;

/// A SOAP 1.2 envelope with ONVIF's namespaces and `body` in its Body.
pub fn envelope(body: &str) -> String {
    let mut s = String::with_capacity(body.len() + 400);
    let _ = write!(
        s,
        r#"<?xml version="1.0" encoding="UTF-8"?><env:Envelope xmlns:env="{}" xmlns:tt="{}" xmlns:tds="{}" xmlns:trt="{}" xmlns:tev="{}"><env:Body>"#,
        ns::SOAP_ENV,
        ns::SCHEMA,
        ns::DEVICE,
        ns::MEDIA,
        ns::EVENTS
    );
    s.push_str(body);
    s.push_str("</env:Body></env:Envelope>");
    s
}

/// A UTC date and time, broken down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateTime {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

impl DateTime {
    /// From seconds since 1970 (Howard Hinnant's civil_from_days).
    pub fn from_unix(t: i64) -> DateTime {
        let days = t.div_euclid(86400);
        let secs = t.rem_euclid(86400);
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        DateTime {
            year,
            month,
            day,
            hour: (secs / 3600) as u32,
            minute: (secs % 3600 / 60) as u32,
            second: (secs % 60) as u32,
        }
    }
}

/// GetSystemDateAndTime: the camera keeps UTC; `ntp`: the clock is set by
/// NTP (else the camera says Manual, and clients adjust their tokens'
/// Created by the difference).
pub fn system_date_and_time(now: i64, ntp: bool) -> String {
    let t = DateTime::from_unix(now);
    let when = format!(
        "<tt:Time><tt:Hour>{}</tt:Hour><tt:Minute>{}</tt:Minute><tt:Second>{}</tt:Second></tt:Time><tt:Date><tt:Year>{}</tt:Year><tt:Month>{}</tt:Month><tt:Day>{}</tt:Day></tt:Date>",
        t.hour, t.minute, t.second, t.year, t.month, t.day
    );
    envelope(&format!(
        "<tds:GetSystemDateAndTimeResponse><tds:SystemDateAndTime><tt:DateTimeType>{}</tt:DateTimeType><tt:DaylightSavings>false</tt:DaylightSavings><tt:TimeZone><tt:TZ>UTC0</tt:TZ></tt:TimeZone><tt:UTCDateTime>{when}</tt:UTCDateTime><tt:LocalDateTime>{when}</tt:LocalDateTime></tds:SystemDateAndTime></tds:GetSystemDateAndTimeResponse>",
        if ntp { "NTP" } else { "Manual" }
    ))
}

#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub manufacturer: String,
    pub model: String,
    pub firmware_version: String,
    pub serial_number: String,
    pub hardware_id: String,
}

pub fn device_information(d: &DeviceInfo) -> String {
    envelope(&format!(
        "<tds:GetDeviceInformationResponse><tds:Manufacturer>{}</tds:Manufacturer><tds:Model>{}</tds:Model><tds:FirmwareVersion>{}</tds:FirmwareVersion><tds:SerialNumber>{}</tds:SerialNumber><tds:HardwareId>{}</tds:HardwareId></tds:GetDeviceInformationResponse>",
        escape(&d.manufacturer),
        escape(&d.model),
        escape(&d.firmware_version),
        escape(&d.serial_number),
        escape(&d.hardware_id)
    ))
}

/// The services' addresses as the client reached the camera (the Host it
/// used), so that a client behind NAT or on another interface gets an
/// address it can reach.
#[derive(Debug, Clone)]
pub struct XAddrs {
    pub device: String,
    pub media: String,
    /// The event service's, when motion detection publishes events.
    pub events: Option<String>,
    /// The imaging service's, when the camera has picture settings.
    pub imaging: Option<String>,
}

/// RTP over UDP, RTSP-interleaved TCP and RTSP over HTTP; no multicast.
const STREAMING: &str = "<tt:StreamingCapabilities><tt:RTPMulticast>false</tt:RTPMulticast><tt:RTP_TCP>true</tt:RTP_TCP><tt:RTP_RTSP_TCP>true</tt:RTP_RTSP_TCP></tt:StreamingCapabilities>";

/// GetCapabilities for Category `category` ("All", "Device", "Media");
/// None for a category the camera has no service for.
pub fn capabilities(x: &XAddrs, category: &str) -> Option<String> {
    let device = format!(
        "<tt:Device><tt:XAddr>{}</tt:XAddr><tt:Network><tt:IPFilter>false</tt:IPFilter><tt:ZeroConfiguration>true</tt:ZeroConfiguration><tt:IPVersion6>false</tt:IPVersion6><tt:DynDNS>false</tt:DynDNS></tt:Network><tt:System><tt:DiscoveryResolve>false</tt:DiscoveryResolve><tt:DiscoveryBye>true</tt:DiscoveryBye><tt:RemoteDiscovery>false</tt:RemoteDiscovery><tt:SystemBackup>false</tt:SystemBackup><tt:SystemLogging>false</tt:SystemLogging><tt:FirmwareUpgrade>false</tt:FirmwareUpgrade><tt:SupportedVersions><tt:Major>2</tt:Major><tt:Minor>60</tt:Minor></tt:SupportedVersions></tt:System><tt:Security><tt:TLS1.1>false</tt:TLS1.1><tt:TLS1.2>false</tt:TLS1.2><tt:OnboardKeyGeneration>false</tt:OnboardKeyGeneration><tt:AccessPolicyConfig>false</tt:AccessPolicyConfig><tt:X.509Token>false</tt:X.509Token><tt:SAMLToken>false</tt:SAMLToken><tt:KerberosToken>false</tt:KerberosToken><tt:RELToken>false</tt:RELToken></tt:Security></tt:Device>",
        escape(&x.device)
    );
    let media = format!(
        "<tt:Media><tt:XAddr>{}</tt:XAddr>{STREAMING}</tt:Media>",
        escape(&x.media)
    );
    // PullPoint only: no WS-BaseNotification subscription (push).
    let events = x.events.as_ref().map(|e| {
        format!(
            "<tt:Events><tt:XAddr>{}</tt:XAddr><tt:WSSubscriptionPolicySupport>false</tt:WSSubscriptionPolicySupport><tt:WSPullPointSupport>true</tt:WSPullPointSupport><tt:WSPausableSubscriptionManagerInterfaceSupport>false</tt:WSPausableSubscriptionManagerInterfaceSupport></tt:Events>",
            escape(e)
        )
    });
    let imaging = x.imaging.as_ref().map(|i| {
        format!(
            "<tt:Imaging><tt:XAddr>{}</tt:XAddr></tt:Imaging>",
            escape(i)
        )
    });
    // The schema's order: Analytics, Device, Events, Imaging, Media.
    let caps = match category {
        "All" => format!(
            "{device}{}{}{media}",
            events.unwrap_or_default(),
            imaging.unwrap_or_default()
        ),
        "Device" => device,
        "Media" => media,
        "Events" => events?,
        "Imaging" => imaging?,
        _ => return None,
    };
    Some(envelope(&format!(
        "<tds:GetCapabilitiesResponse><tds:Capabilities>{caps}</tds:Capabilities></tds:GetCapabilitiesResponse>"
    )))
}

fn device_service_capabilities() -> &'static str {
    r#"<tds:Capabilities><tds:Network IPFilter="false" ZeroConfiguration="true" IPVersion6="false" DynDNS="false" NTP="0" HostnameFromDHCP="true"/><tds:Security TLS1.0="false" TLS1.1="false" TLS1.2="false" OnboardKeyGeneration="false" AccessPolicyConfig="false" DefaultAccessPolicy="false" Dot1X="false" RemoteUserHandling="false" X.509Token="false" SAMLToken="false" KerberosToken="false" UsernameToken="true" HttpDigest="true" RELToken="false"/><tds:System DiscoveryResolve="false" DiscoveryBye="true" RemoteDiscovery="false" SystemBackup="false" SystemLogging="false" FirmwareUpgrade="false" HttpFirmwareUpgrade="false" HttpSystemBackup="false" HttpSystemLogging="false" HttpSupportInformation="false"/></tds:Capabilities>"#
}

fn media_service_capabilities() -> &'static str {
    r#"<trt:Capabilities SnapshotUri="true" Rotation="false" VideoSourceMode="false" OSD="false"><trt:ProfileCapabilities MaximumNumberOfProfiles="2"/><trt:StreamingCapabilities RTPMulticast="false" RTP_TCP="true" RTP_RTSP_TCP="true" NonAggregateControl="false" NoRTSPStreaming="false"/></trt:Capabilities>"#
}

/// GetServices: the device and media services, with their capabilities
/// when asked.
pub fn services(x: &XAddrs, include_capability: bool) -> String {
    let mut body = String::from("<tds:GetServicesResponse>");
    let events = crate::events::service_capabilities_element();
    let mut list = vec![
        (ns::DEVICE, &x.device, device_service_capabilities()),
        (ns::MEDIA, &x.media, media_service_capabilities()),
    ];
    if let Some(e) = &x.events {
        list.push((ns::EVENTS, e, events.as_str()));
    }
    let imaging = crate::imaging::service_capabilities_element();
    if let Some(i) = &x.imaging {
        list.push((ns::IMAGING, i, imaging.as_str()));
    }
    for (namespace, addr, caps) in list {
        let _ = write!(
            body,
            "<tds:Service><tds:Namespace>{namespace}</tds:Namespace><tds:XAddr>{}</tds:XAddr>",
            escape(addr)
        );
        if include_capability {
            let _ = write!(body, "<tds:Capabilities>{caps}</tds:Capabilities>");
        }
        body.push_str("<tds:Version><tt:Major>2</tt:Major><tt:Minor>60</tt:Minor></tds:Version></tds:Service>");
    }
    body.push_str("</tds:GetServicesResponse>");
    envelope(&body)
}

/// GetServiceCapabilities of the device or the media service.
pub fn service_capabilities(media: bool) -> String {
    if media {
        envelope(&format!(
            "<trt:GetServiceCapabilitiesResponse>{}</trt:GetServiceCapabilitiesResponse>",
            media_service_capabilities()
        ))
    } else {
        envelope(&format!(
            "<tds:GetServiceCapabilitiesResponse>{}</tds:GetServiceCapabilitiesResponse>",
            device_service_capabilities()
        ))
    }
}

/// GetScopes: all Fixed (set by the camera, not by clients).
pub fn scopes(scopes: &[String]) -> String {
    let mut body = String::from("<tds:GetScopesResponse>");
    for s in scopes {
        let _ = write!(
            body,
            "<tds:Scopes><tt:ScopeDef>Fixed</tt:ScopeDef><tt:ScopeItem>{}</tt:ScopeItem></tds:Scopes>",
            escape(s)
        );
    }
    body.push_str("</tds:GetScopesResponse>");
    envelope(&body)
}

pub fn hostname(name: &str, from_dhcp: bool) -> String {
    envelope(&format!(
        "<tds:GetHostnameResponse><tds:HostnameInformation><tt:FromDHCP>{from_dhcp}</tt:FromDHCP><tt:Name>{}</tt:Name></tds:HostnameInformation></tds:GetHostnameResponse>",
        escape(name)
    ))
}

/// GetWsdlUrl: camstream serves no WSDL of its own; the services are
/// ONVIF's, whose WSDLs ONVIF publishes.
pub fn wsdl_url() -> String {
    envelope(
        "<tds:GetWsdlUrlResponse><tds:WsdlUrl>http://www.onvif.org/ver10/device/wsdl/devicemgmt.wsdl</tds:WsdlUrl></tds:GetWsdlUrlResponse>",
    )
}

#[derive(Debug, Clone)]
pub struct Interface {
    pub name: String,
    /// aa:bb:cc:dd:ee:ff
    pub mac: String,
    pub mtu: u32,
    /// (address, prefix length)
    pub ipv4: Option<(String, u8)>,
    pub dhcp: bool,
}

pub fn network_interfaces(ifaces: &[Interface]) -> String {
    let mut body = String::from("<tds:GetNetworkInterfacesResponse>");
    for i in ifaces {
        let _ = write!(
            body,
            "<tds:NetworkInterfaces token=\"{}\"><tt:Enabled>true</tt:Enabled><tt:Info><tt:Name>{}</tt:Name><tt:HwAddress>{}</tt:HwAddress><tt:MTU>{}</tt:MTU></tt:Info>",
            escape(&i.name),
            escape(&i.name),
            escape(&i.mac),
            i.mtu
        );
        if let Some((addr, prefix)) = &i.ipv4 {
            let (manual, from_dhcp) = if i.dhcp {
                (
                    String::new(),
                    format!(
                        "<tt:FromDHCP><tt:Address>{}</tt:Address><tt:PrefixLength>{prefix}</tt:PrefixLength></tt:FromDHCP>",
                        escape(addr)
                    ),
                )
            } else {
                (
                    format!(
                        "<tt:Manual><tt:Address>{}</tt:Address><tt:PrefixLength>{prefix}</tt:PrefixLength></tt:Manual>",
                        escape(addr)
                    ),
                    String::new(),
                )
            };
            let _ = write!(
                body,
                "<tt:IPv4><tt:Enabled>true</tt:Enabled><tt:Config>{manual}{from_dhcp}<tt:DHCP>{}</tt:DHCP></tt:Config></tt:IPv4>",
                i.dhcp
            );
        }
        body.push_str("</tds:NetworkInterfaces>");
    }
    body.push_str("</tds:GetNetworkInterfacesResponse>");
    envelope(&body)
}

/// The one video source: the camera at the size and rate it captures.
#[derive(Debug, Clone)]
pub struct VideoSource {
    pub token: String,
    pub width: u32,
    pub height: u32,
    pub fps: f64,
}

/// What an H.264 stream's encoder configuration says beyond JPEG's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H264 {
    /// kbit/s.
    pub bitrate: u32,
    /// Frames from one key frame to the next.
    pub gov_length: u32,
}

/// A stream as a profile: its encoder configuration (JPEG, or H.264
/// Baseline) on the source.
#[derive(Debug, Clone)]
pub struct Profile {
    /// "main" or "sub": the profile's and its encoder configuration's token.
    pub token: String,
    pub name: String,
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    /// 1-100, libjpeg's scale.
    pub quality: u32,
    /// Whether a client may change its size, rate and quality.
    pub settable: bool,
    /// An H.264 stream's (None: JPEG).
    pub h264: Option<H264>,
}

fn source_configuration(tag: &str, src: &VideoSource, users: usize) -> String {
    format!(
        "<{tag} token=\"{t}\"><tt:Name>{t}</tt:Name><tt:UseCount>{users}</tt:UseCount><tt:SourceToken>{t}</tt:SourceToken><tt:Bounds x=\"0\" y=\"0\" width=\"{}\" height=\"{}\"/></{tag}>",
        src.width,
        src.height,
        t = escape(&src.token)
    )
}

fn encoder_configuration(tag: &str, p: &Profile) -> String {
    let (encoding, bitrate, h264) = match p.h264 {
        None => ("JPEG", 0, String::new()),
        Some(h) => (
            "H264",
            h.bitrate,
            format!(
                "<tt:H264><tt:GovLength>{}</tt:GovLength><tt:H264Profile>Baseline</tt:H264Profile></tt:H264>",
                h.gov_length
            ),
        ),
    };
    format!(
        "<{tag} token=\"{t}\"><tt:Name>{n}</tt:Name><tt:UseCount>1</tt:UseCount><tt:Encoding>{encoding}</tt:Encoding><tt:Resolution><tt:Width>{}</tt:Width><tt:Height>{}</tt:Height></tt:Resolution><tt:Quality>{}</tt:Quality><tt:RateControl><tt:FrameRateLimit>{}</tt:FrameRateLimit><tt:EncodingInterval>1</tt:EncodingInterval><tt:BitrateLimit>{bitrate}</tt:BitrateLimit></tt:RateControl>{h264}<tt:Multicast><tt:Address><tt:Type>IPv4</tt:Type><tt:IPv4Address>0.0.0.0</tt:IPv4Address></tt:Address><tt:Port>0</tt:Port><tt:TTL>0</tt:TTL><tt:AutoStart>false</tt:AutoStart></tt:Multicast><tt:SessionTimeout>PT60S</tt:SessionTimeout></{tag}>",
        p.width,
        p.height,
        p.quality,
        p.fps,
        t = escape(&p.token),
        n = escape(&p.name)
    )
}

fn profile(
    tag: &str,
    p: &Profile,
    src: &VideoSource,
    profiles: usize,
    audio: Option<&Audio>,
) -> String {
    // The schema's order: video source, audio source, video encoder,
    // audio encoder.
    let (audio_source, audio_encoder) = audio.map_or_else(Default::default, |a| {
        (
            audio_source_configuration("tt:AudioSourceConfiguration", profiles),
            audio_encoder_configuration("tt:AudioEncoderConfiguration", a, profiles),
        )
    });
    format!(
        "<{tag} token=\"{t}\" fixed=\"true\"><tt:Name>{n}</tt:Name>{}{audio_source}{}{audio_encoder}</{tag}>",
        source_configuration("tt:VideoSourceConfiguration", src, profiles),
        encoder_configuration("tt:VideoEncoderConfiguration", p),
        t = escape(&p.token),
        n = escape(&p.name)
    )
}

/// The sound's source, its configuration's and its encoder
/// configuration's token: one of each, in every profile.
pub const AUDIO_TOKEN: &str = "audio";

/// The sound as Media ver10 tells it (its AudioEncoding is G711, G726 or
/// AAC: Opus has no name there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audio {
    /// "G711" or "AAC".
    pub encoding: &'static str,
    /// kbit/s.
    pub bitrate: u32,
    /// kHz.
    pub sample_rate: u32,
    /// What each encoding this build has may be: (encoding, bit rates,
    /// sample rates).
    pub options: Vec<(&'static str, Vec<u32>, Vec<u32>)>,
}

fn audio_source_configuration(tag: &str, profiles: usize) -> String {
    format!(
        "<{tag} token=\"{AUDIO_TOKEN}\"><tt:Name>{AUDIO_TOKEN}</tt:Name><tt:UseCount>{profiles}</tt:UseCount><tt:SourceToken>{AUDIO_TOKEN}</tt:SourceToken></{tag}>"
    )
}

fn audio_encoder_configuration(tag: &str, a: &Audio, profiles: usize) -> String {
    format!(
        "<{tag} token=\"{AUDIO_TOKEN}\"><tt:Name>{AUDIO_TOKEN}</tt:Name><tt:UseCount>{profiles}</tt:UseCount><tt:Encoding>{}</tt:Encoding><tt:Bitrate>{}</tt:Bitrate><tt:SampleRate>{}</tt:SampleRate><tt:Multicast><tt:Address><tt:Type>IPv4</tt:Type><tt:IPv4Address>0.0.0.0</tt:IPv4Address></tt:Address><tt:Port>0</tt:Port><tt:TTL>0</tt:TTL><tt:AutoStart>false</tt:AutoStart></tt:Multicast><tt:SessionTimeout>PT60S</tt:SessionTimeout></{tag}>",
        a.encoding, a.bitrate, a.sample_rate
    )
}

/// GetAudioSources: the one microphone (or none).
pub fn audio_sources(audio: Option<&Audio>) -> String {
    let source = audio.map_or_else(String::new, |_| {
        format!("<trt:AudioSources token=\"{AUDIO_TOKEN}\"><tt:Channels>1</tt:Channels></trt:AudioSources>")
    });
    envelope(&format!(
        "<trt:GetAudioSourcesResponse>{source}</trt:GetAudioSourcesResponse>"
    ))
}

/// `op`'s response with the audio source configuration (none without
/// sound): under `trt:Configurations` for the lists, `trt:Configuration`
/// for GetAudioSourceConfiguration.
pub fn audio_source_configurations(op: &str, audio: Option<&Audio>, profiles: usize) -> String {
    let tag = if op.ends_with("Configurations") {
        "trt:Configurations"
    } else {
        "trt:Configuration"
    };
    let c = audio.map_or_else(String::new, |_| audio_source_configuration(tag, profiles));
    envelope(&format!("<trt:{op}Response>{c}</trt:{op}Response>"))
}

/// `op`'s response with the audio encoder configuration, as above.
pub fn audio_encoder_configurations(op: &str, audio: Option<&Audio>, profiles: usize) -> String {
    let tag = if op.ends_with("Configurations") {
        "trt:Configurations"
    } else {
        "trt:Configuration"
    };
    let c = audio.map_or_else(String::new, |a| {
        audio_encoder_configuration(tag, a, profiles)
    });
    envelope(&format!("<trt:{op}Response>{c}</trt:{op}Response>"))
}

/// GetAudioSourceConfigurationOptions: the one input.
pub fn audio_source_configuration_options() -> String {
    envelope(&format!(
        "<trt:GetAudioSourceConfigurationOptionsResponse><trt:Options><tt:InputTokensAvailable>{AUDIO_TOKEN}</tt:InputTokensAvailable></trt:Options></trt:GetAudioSourceConfigurationOptionsResponse>"
    ))
}

/// GetAudioEncoderConfigurationOptions: each encoding with its bit rates
/// (kbit/s) and sample rates (kHz).
pub fn audio_encoder_configuration_options(a: &Audio) -> String {
    let items = |v: &[u32]| {
        v.iter()
            .map(|i| format!("<tt:Items>{i}</tt:Items>"))
            .collect::<String>()
    };
    let options: String = a
        .options
        .iter()
        .map(|(encoding, bitrates, rates)| {
            format!(
                "<tt:Options><tt:Encoding>{encoding}</tt:Encoding><tt:BitrateList>{}</tt:BitrateList><tt:SampleRateList>{}</tt:SampleRateList></tt:Options>",
                items(bitrates),
                items(rates)
            )
        })
        .collect();
    envelope(&format!(
        "<trt:GetAudioEncoderConfigurationOptionsResponse><trt:Options>{options}</trt:Options></trt:GetAudioEncoderConfigurationOptionsResponse>"
    ))
}

pub fn profiles(ps: &[Profile], src: &VideoSource, audio: Option<&Audio>) -> String {
    let mut body = String::from("<trt:GetProfilesResponse>");
    for p in ps {
        body.push_str(&profile("trt:Profiles", p, src, ps.len(), audio));
    }
    body.push_str("</trt:GetProfilesResponse>");
    envelope(&body)
}

pub fn profile_response(
    p: &Profile,
    src: &VideoSource,
    profiles: usize,
    audio: Option<&Audio>,
) -> String {
    envelope(&format!(
        "<trt:GetProfileResponse>{}</trt:GetProfileResponse>",
        profile("trt:Profile", p, src, profiles, audio)
    ))
}

/// GetVideoSources; `imaging`: the source's Imaging element (see
/// crate::imaging::video_source_imaging), or "".
pub fn video_sources(src: &VideoSource, imaging: &str) -> String {
    envelope(&format!(
        "<trt:GetVideoSourcesResponse><trt:VideoSources token=\"{}\"><tt:Framerate>{}</tt:Framerate><tt:Resolution><tt:Width>{}</tt:Width><tt:Height>{}</tt:Height></tt:Resolution>{imaging}</trt:VideoSources></trt:GetVideoSourcesResponse>",
        escape(&src.token),
        src.fps,
        src.width,
        src.height
    ))
}

/// GetVideoSourceConfigurations (`one`: false) or GetVideoSourceConfiguration.
pub fn video_source_configurations(src: &VideoSource, profiles: usize, one: bool) -> String {
    if one {
        envelope(&format!(
            "<trt:GetVideoSourceConfigurationResponse>{}</trt:GetVideoSourceConfigurationResponse>",
            source_configuration("trt:Configuration", src, profiles)
        ))
    } else {
        envelope(&format!(
            "<trt:GetVideoSourceConfigurationsResponse>{}</trt:GetVideoSourceConfigurationsResponse>",
            source_configuration("trt:Configurations", src, profiles)
        ))
    }
}

pub fn video_encoder_configurations(ps: &[Profile]) -> String {
    let mut body = String::from("<trt:GetVideoEncoderConfigurationsResponse>");
    for p in ps {
        body.push_str(&encoder_configuration("trt:Configurations", p));
    }
    body.push_str("</trt:GetVideoEncoderConfigurationsResponse>");
    envelope(&body)
}

pub fn video_encoder_configuration(p: &Profile) -> String {
    envelope(&format!(
        "<trt:GetVideoEncoderConfigurationResponse>{}</trt:GetVideoEncoderConfigurationResponse>",
        encoder_configuration("trt:Configuration", p)
    ))
}

/// What SetVideoEncoderConfiguration may choose for a stream.
#[derive(Debug, Clone)]
pub struct EncoderOptions {
    pub sizes: Vec<(u32, u32)>,
    pub fps: (u32, u32),
    pub quality: (u32, u32),
    /// An H.264 stream's key frame interval (None: JPEG).
    pub gov_length: Option<(u32, u32)>,
}

pub fn video_encoder_configuration_options(o: &EncoderOptions) -> String {
    let mut sizes = String::new();
    for (w, h) in &o.sizes {
        let _ = write!(
            sizes,
            "<tt:ResolutionsAvailable><tt:Width>{w}</tt:Width><tt:Height>{h}</tt:Height></tt:ResolutionsAvailable>"
        );
    }
    let rates = format!(
        "<tt:FrameRateRange><tt:Min>{}</tt:Min><tt:Max>{}</tt:Max></tt:FrameRateRange><tt:EncodingIntervalRange><tt:Min>1</tt:Min><tt:Max>1</tt:Max></tt:EncodingIntervalRange>",
        o.fps.0, o.fps.1
    );
    let codec = match o.gov_length {
        None => format!("<tt:JPEG>{sizes}{rates}</tt:JPEG>"),
        Some((lo, hi)) => format!(
            "<tt:H264>{sizes}<tt:GovLengthRange><tt:Min>{lo}</tt:Min><tt:Max>{hi}</tt:Max></tt:GovLengthRange>{rates}<tt:H264ProfilesSupported>Baseline</tt:H264ProfilesSupported></tt:H264>"
        ),
    };
    envelope(&format!(
        "<trt:GetVideoEncoderConfigurationOptionsResponse><trt:Options><tt:QualityRange><tt:Min>{}</tt:Min><tt:Max>{}</tt:Max></tt:QualityRange>{codec}</trt:Options></trt:GetVideoEncoderConfigurationOptionsResponse>",
        o.quality.0, o.quality.1
    ))
}

/// GetStreamUri and GetSnapshotUri: the URI, valid for as long as the
/// camera's settings stay.
pub fn media_uri(snapshot: bool, uri: &str) -> String {
    let op = if snapshot {
        "GetSnapshotUri"
    } else {
        "GetStreamUri"
    };
    envelope(&format!(
        "<trt:{op}Response><trt:MediaUri><tt:Uri>{}</tt:Uri><tt:InvalidAfterConnect>false</tt:InvalidAfterConnect><tt:InvalidAfterReboot>false</tt:InvalidAfterReboot><tt:Timeout>PT0S</tt:Timeout></trt:MediaUri></trt:{op}Response>",
        escape(uri)
    ))
}

pub fn empty(service_prefix: &str, op: &str) -> String {
    envelope(&format!("<{service_prefix}:{op}Response/>"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xml::{Doc, Limits};

    fn camera() -> (Vec<Profile>, VideoSource) {
        let main = Profile {
            token: "main".into(),
            name: "main <1280x720>".into(),
            width: 1280,
            height: 720,
            fps: 30,
            quality: 80,
            settable: true,
            h264: None,
        };
        let sub = Profile {
            token: "sub".into(),
            name: "sub".into(),
            width: 640,
            height: 360,
            fps: 5,
            quality: 70,
            settable: true,
            h264: None,
        };
        let src = VideoSource {
            token: "camera".into(),
            width: 1280,
            height: 720,
            fps: 30.0,
        };
        (vec![main, sub], src)
    }

    #[test]
    fn dates() {
        let t = DateTime::from_unix(1_795_591_800);
        assert_eq!(
            (t.year, t.month, t.day, t.hour, t.minute, t.second),
            (2026, 11, 25, 7, 30, 0)
        );
        let t = DateTime::from_unix(951_782_400); // 2000-02-29
        assert_eq!((t.year, t.month, t.day), (2000, 2, 29));
        assert_eq!(DateTime::from_unix(0).year, 1970);
    }

    #[test]
    fn every_answer_is_well_formed() {
        let (ps, src) = camera();
        let x = XAddrs {
            device: "http://192.0.2.10/onvif/device_service".into(),
            media: "http://192.0.2.10/onvif/media_service".into(),
            events: None,
            imaging: Some("http://192.0.2.10/onvif/imaging_service".into()),
        };
        let level = Some(crate::imaging::Level {
            value: 128.0,
            min: 0.0,
            max: 255.0,
        });
        let imaging = crate::imaging::Imaging {
            brightness: level,
            sharpness: level,
            exposure: Some(crate::imaging::Exposure {
                modes: vec![crate::imaging::Mode::Auto, crate::imaging::Mode::Manual],
                mode: crate::imaging::Mode::Manual,
                time: level,
            }),
            white_balance: Some(crate::imaging::WhiteBalance {
                modes: vec![crate::imaging::Mode::Auto],
                mode: crate::imaging::Mode::Auto,
            }),
            ..Default::default()
        };
        let info = DeviceInfo {
            manufacturer: "camstream".into(),
            model: "rpi4_64 & camera".into(),
            firmware_version: "0.1.0".into(),
            serial_number: "100000001".into(),
            hardware_id: "rpi4_64".into(),
        };
        let iface = Interface {
            name: "eth0".into(),
            mac: "02:00:00:00:00:01".into(),
            mtu: 1500,
            ipv4: Some(("192.0.2.10".into(), 24)),
            dhcp: true,
        };
        let audio = Audio {
            encoding: "G711",
            bitrate: 64,
            sample_rate: 8,
            options: vec![("G711", vec![64], vec![8]), ("AAC", vec![32, 64], vec![48])],
        };
        let all = [
            system_date_and_time(1_795_591_800, false),
            device_information(&info),
            capabilities(&x, "All").unwrap(),
            capabilities(&x, "Media").unwrap(),
            services(&x, true),
            service_capabilities(false),
            service_capabilities(true),
            scopes(&["onvif://www.onvif.org/name/cam".into()]),
            hostname("cam", true),
            network_interfaces(&[iface]),
            profiles(&ps, &src, None),
            profile_response(&ps[1], &src, 2, None),
            video_sources(
                &src,
                "<tt:Imaging><tt:Brightness>128</tt:Brightness></tt:Imaging>",
            ),
            video_source_configurations(&src, 2, false),
            video_source_configurations(&src, 2, true),
            video_encoder_configurations(&ps),
            video_encoder_configuration(&ps[0]),
            video_encoder_configuration_options(&EncoderOptions {
                sizes: vec![(1280, 720), (640, 360)],
                fps: (1, 30),
                quality: (1, 100),
                gov_length: None,
            }),
            video_encoder_configuration(&Profile {
                token: "h264".into(),
                name: "h264".into(),
                h264: Some(H264 {
                    bitrate: 2000,
                    gov_length: 60,
                }),
                ..ps[0].clone()
            }),
            video_encoder_configuration_options(&EncoderOptions {
                sizes: vec![(1280, 720)],
                fps: (30, 30),
                quality: (50, 50),
                gov_length: Some((60, 60)),
            }),
            media_uri(false, "rtsp://192.0.2.10/stream?a=1&b=2"),
            media_uri(true, "http://192.0.2.10/snapshot.jpg"),
            empty("trt", "SetVideoEncoderConfiguration"),
            profiles(&ps, &src, Some(&audio)),
            audio_sources(Some(&audio)),
            audio_sources(None),
            audio_source_configurations("GetAudioSourceConfigurations", Some(&audio), 2),
            audio_source_configurations("GetAudioSourceConfiguration", Some(&audio), 2),
            audio_encoder_configurations(
                "GetCompatibleAudioEncoderConfigurations",
                Some(&audio),
                2,
            ),
            audio_encoder_configurations("GetAudioEncoderConfiguration", Some(&audio), 2),
            audio_source_configuration_options(),
            audio_encoder_configuration_options(&audio),
            empty("trt", "AddAudioEncoderConfiguration"),
            wsdl_url(),
            crate::imaging::imaging_settings(&imaging),
            crate::imaging::options(&imaging),
            crate::imaging::status(),
            crate::imaging::move_options(),
            crate::imaging::service_capabilities(),
            crate::imaging::set_imaging_settings(),
            capabilities(&x, "Imaging").unwrap(),
        ];
        for xml in &all {
            let d = Doc::parse(xml.as_bytes(), &Limits::default())
                .unwrap_or_else(|e| panic!("{e}: {xml}"));
            let body = d.child(0, ns::SOAP_ENV, "Body").unwrap();
            let answer = d.children(body).next().unwrap();
            assert!(d.elements[answer].name.ends_with("Response"), "{xml}");
        }
        assert!(capabilities(&x, "PTZ").is_none());
        assert!(all[0].contains("<tt:DateTimeType>Manual</tt:DateTimeType>"));
        assert!(
            all[0].contains("<tt:Year>2026</tt:Year><tt:Month>11</tt:Month><tt:Day>25</tt:Day>")
        );
        assert!(all[1].contains("rpi4_64 &amp; camera"));
        assert!(all[18].contains("<tt:Encoding>H264</tt:Encoding>"));
        assert!(all[18].contains("<tt:BitrateLimit>2000</tt:BitrateLimit></tt:RateControl><tt:H264><tt:GovLength>60</tt:GovLength><tt:H264Profile>Baseline</tt:H264Profile></tt:H264>"));
        assert!(
            all[19].contains(
                "<tt:H264ProfilesSupported>Baseline</tt:H264ProfilesSupported></tt:H264>"
            )
        );
        assert!(all[20].contains("stream?a=1&amp;b=2"));
        assert!(
            all[10]
                .contains("<tt:Encoding>JPEG</tt:Encoding><tt:Resolution><tt:Width>640</tt:Width>")
        );
    }
}
