//! ONVIF's device and media services (Profile S) on the HTTP port: a POST's
//! body read whole, parsed and answered by camstream_onvif, behind the
//! same users as RTSP and HTTP (a UsernameToken for users given a password
//! for ONVIF, or HTTP Digest), the same no-default-password rule.

use camstream_onvif::responses::{self as resp, DeviceInfo, Profile, VideoSource, XAddrs};
use camstream_onvif::soap::{Fault, Request as Soap, Service};
use camstream_onvif::wsse::{Gate, Password, Refusal as TokenRefusal};
use camstream_onvif::xml::Limits;

pub mod discovery;
mod ifaces;

use super::Server;
use super::conn::ConnId;
use super::http::{Request, State, write_head, write_text};
use crate::clock::{Mono, wall_now};

/// The services' paths.
pub const DEVICE_PATH: &str = "/onvif/device_service";
pub const MEDIA_PATH: &str = "/onvif/media_service";
/// Largest SOAP request read (Profile S's largest is about 3 KB).
const MAX_BODY: usize = 64 << 10;
/// How far a token's Created may be from the camera's clock while that
/// clock is synchronised (docs/ONVIF.md: clock skew).
const SKEW: i64 = 300;
/// Nonces of accepted tokens remembered.
const NONCES: usize = 4096;
const SOAP_TYPE: &str = "application/soap+xml; charset=utf-8";

/// Operations ONVIF's Core specification serves without a user
/// (access class PRE_AUTH): a client needs the camera's time and its
/// services before it can make a token.
const PRE_AUTH: [&str; 7] = [
    "GetSystemDateAndTime",
    "GetServices",
    "GetServiceCapabilities",
    "GetCapabilities",
    "GetHostname",
    "GetWsdlUrl",
    "GetEndpointReference",
];

/// The camera as WS-Discovery announces it: an endpoint id that stays
/// across restarts (from /etc/machine-id, else the host name) and its
/// scopes.
pub fn endpoint() -> camstream_onvif::discovery::Endpoint {
    let seed = std::fs::read("/etc/machine-id").unwrap_or_else(|_| super::hostname().into_bytes());
    let mut instance = [0u8; 8];
    super::random_fill(&mut instance);
    camstream_onvif::discovery::Endpoint {
        address: camstream_onvif::discovery::endpoint_uuid(&seed),
        scopes: scopes(),
        xaddrs: Vec::new(),
        metadata_version: 0,
        instance_id: u64::from_ne_bytes(instance) >> 32,
    }
}

fn scopes() -> Vec<String> {
    use camstream_onvif::discovery::scope_segment;
    vec![
        "onvif://www.onvif.org/Profile/Streaming".into(),
        "onvif://www.onvif.org/type/video_encoder".into(),
        format!(
            "onvif://www.onvif.org/name/{}",
            scope_segment(&super::hostname())
        ),
        format!("onvif://www.onvif.org/hardware/{}", scope_segment(&board())),
    ]
}

/// The board camstream runs on, as its device tree names it ("Raspberry Pi
/// 4 Model B Rev 1.4"), else as its firmware tables do (a PC), else the
/// processor's architecture: what an NVR shows as the camera's hardware.
fn board() -> String {
    ["/proc/device-tree/model", "/sys/class/dmi/id/product_name"]
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .map(|b| {
            let s = String::from_utf8_lossy(&b);
            s.trim_matches(|c: char| c == '\0' || c.is_whitespace())
                .to_owned()
        })
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| std::env::consts::ARCH.into())
}

pub fn is_service(path: &str) -> bool {
    path == DEVICE_PATH || path == MEDIA_PATH
}

/// What the services keep between requests.
pub struct Onvif {
    gate: Gate,
}

impl Default for Onvif {
    fn default() -> Onvif {
        Onvif {
            gate: Gate::new(SKEW, NONCES),
        }
    }
}

/// Whether the kernel's clock is synchronised (adjtimex: not TIME_ERROR).
fn clock_synchronised() -> bool {
    // SAFETY: adjtimex with modes = 0 only reads the kernel's clock state
    // into the zeroed struct it is given.
    unsafe {
        let mut t: libc::timex = std::mem::zeroed();
        libc::adjtimex(&mut t) != libc::TIME_ERROR
    }
}

impl Server {
    /// A request for an ONVIF service's path: a POST whose body is read
    /// before it is answered.
    pub(super) fn onvif_start(&mut self, ci: ConnId, req: Request, close: bool) {
        let conn = &mut self.conns[ci];
        if req.method != "POST" {
            write_head(
                &mut conn.ctrl,
                405,
                &[("Allow", "POST"), ("Content-Length", "0")],
                None,
                close,
            );
            return;
        }
        let (status, why) = match (req.content_length, req.chunked) {
            (Some(n), false) if n as usize <= MAX_BODY => (0, ""),
            (Some(_), false) => (413, "a SOAP request over 64 KiB"),
            _ => (411, "a SOAP request needs Content-Length"),
        };
        if status != 0 {
            write_text(&mut conn.ctrl, status, why, false, true);
            conn.closing = Some(Mono::now());
            return;
        }
        let len = req.content_length.unwrap_or(0) as usize;
        // The body is part of the request: request_timeout runs until it
        // is all there.
        conn.request_started = (len > 0).then(Mono::now);
        if let Some(h) = conn.http_mut() {
            h.state = State::Soap {
                req: Box::new(req),
                len,
            };
        }
    }

    /// A whole SOAP request: parsed, let through or refused, answered.
    pub(super) fn onvif_request(&mut self, ci: ConnId, req: Request, body: &[u8]) {
        let peer = self.conns[ci].peer;
        // An empty body is how curl --digest (and other HTTP clients that
        // send a body only once they know the server's challenge) asks for
        // the challenge: the gate answers it before the body is looked at.
        if body.is_empty() && !self.http_authorized(ci, &req, false, req.close) {
            return;
        }
        let soap = match Soap::parse(body, &Limits::default()) {
            Ok(s) => s,
            Err(fault) => {
                log::info!("{peer}: ONVIF: {}", fault.reason);
                return self.soap_reply(ci, fault.http_status(), &fault.envelope(), req.close);
            }
        };
        let op = soap.operation().to_owned();
        if !PRE_AUTH.contains(&op.as_str()) && !self.onvif_authorized(ci, &req, &soap) {
            return;
        }
        let answer = if op == "SetVideoEncoderConfiguration" {
            self.set_encoder(&soap)
        } else {
            self.onvif_answer(&req, &soap)
        };
        let (status, xml) = match answer {
            Ok(xml) => (200, xml),
            Err(fault) => {
                log::debug!("{peer}: ONVIF {op}: {}", fault.reason);
                (fault.http_status(), fault.envelope())
            }
        };
        log::debug!("{peer}: ONVIF {op} -> {status}");
        self.soap_reply(ci, status, &xml, req.close);
    }

    fn soap_reply(&mut self, ci: ConnId, status: u16, xml: &str, close: bool) {
        let conn = &mut self.conns[ci];
        write_head(
            &mut conn.ctrl,
            status,
            &[("Content-Type", SOAP_TYPE)],
            Some(xml.len()),
            close,
        );
        conn.ctrl.extend_from_slice(xml.as_bytes());
    }

    /// The same rule as RTSP's and HTTP's, then the user: a UsernameToken
    /// from a user with a password kept for ONVIF, or HTTP Digest.
    /// Writes the refusal and returns false when the request may not go on.
    fn onvif_authorized(&mut self, ci: ConnId, req: &Request, soap: &Soap) -> bool {
        let peer = self.conns[ci].peer;
        if self.auth.is_none() {
            // No users: the camera's own clients, or anyone if anonymous
            // (http_authorized writes the 403 otherwise).
            return self.http_authorized(ci, req, false, req.close);
        }
        match &soap.token {
            Ok(Some(token)) => {
                let password = self
                    .cfg
                    .onvif_passwords
                    .iter()
                    .find(|(n, _)| *n == token.username)
                    .map(|(_, p)| p.clone());
                let verdict = match password {
                    None => {
                        Err("no password kept for ONVIF for this user (camstream passwd --onvif)")
                    }
                    // The password in the clear: taken as Basic is, only
                    // with basic_auth.
                    Some(p)
                        if matches!(token.password, Password::Text(_)) && self.cfg.basic_auth =>
                    {
                        if token.matches(&p) {
                            Ok(())
                        } else {
                            Err("wrong password")
                        }
                    }
                    Some(p) => {
                        let now = (wall_now().0 / 1_000_000_000) as i64;
                        let taken = self.onvif.gate.check(token, &p, now, clock_synchronised());
                        taken.map_err(|r| match r {
                            TokenRefusal::Malformed(why) => why,
                            TokenRefusal::Stale => {
                                "the token's Created is too far from the camera's clock"
                            }
                            TokenRefusal::Replayed => "the token was used before",
                            TokenRefusal::WrongPassword => "wrong password",
                            TokenRefusal::Cleartext => {
                                "a password in the clear (basic_auth is off)"
                            }
                        })
                    }
                };
                match verdict {
                    Ok(()) => true,
                    Err(why) => {
                        log::info!("{peer}: ONVIF user {:?} refused: {why}", token.username);
                        let f = Fault::not_authorized();
                        self.soap_reply(ci, 400, &f.envelope(), req.close);
                        false
                    }
                }
            }
            Err(r) => {
                log::info!("{peer}: ONVIF: unreadable UsernameToken: {r:?}");
                let f = Fault::not_authorized();
                self.soap_reply(ci, 400, &f.envelope(), req.close);
                false
            }
            // No token: HTTP Digest, or its challenge.
            Ok(None) => self.http_authorized(ci, req, false, req.close),
        }
    }

    /// What SetVideoEncoderConfiguration may choose: the main stream is
    /// the camera's as camstream.toml sets it (one size, rate and quality);
    /// the sub-stream any of a few sizes of the main stream's shape, any
    /// rate up to the main stream's, any quality.
    fn encoder_options(&self, p: &Profile) -> resp::EncoderOptions {
        if !p.settable {
            return resp::EncoderOptions {
                sizes: vec![(p.width, p.height)],
                fps: (p.fps, p.fps),
                quality: (p.quality, p.quality),
            };
        }
        let (mw, mh) = (
            u32::from(self.stream.info.width),
            u32::from(self.stream.info.height),
        );
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
            fps: (1, self.cfg.fps),
            quality: (1, 100),
        }
    }

    /// SetVideoEncoderConfiguration: the sub-stream takes any of its
    /// options; the main stream only what it has (ter:ConfigModify).
    fn set_encoder(&mut self, soap: &Soap) -> Result<String, Fault> {
        let bad = |why: &str| Fault::invalid_arg_val("ter:ConfigModify", why);
        let token = soap.arg_attr(&["Configuration"], "token").unwrap_or("");
        let num = |path: &[&str]| -> Result<Option<u32>, Fault> {
            soap.arg(path)
                .map(|v| {
                    v.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|f| f.is_finite() && *f >= 0.0 && *f <= 1e6)
                        .map(|f| f.round() as u32)
                        .ok_or_else(|| bad("a number is not one"))
                })
                .transpose()
        };
        if soap
            .arg(&["Configuration", "Encoding"])
            .is_some_and(|e| e != "JPEG")
        {
            return Err(bad("this camera encodes JPEG only"));
        }
        let w = num(&["Configuration", "Resolution", "Width"])?;
        let h = num(&["Configuration", "Resolution", "Height"])?;
        let q = num(&["Configuration", "Quality"])?;
        let fps = num(&["Configuration", "RateControl", "FrameRateLimit"])?;
        match (token, &mut self.sub) {
            ("sub", Some(sub)) => {
                let mut cfg = sub.cfg;
                let size = (
                    w.unwrap_or(u32::from(sub.stream.info.width)),
                    h.unwrap_or(u32::from(sub.stream.info.height)),
                );
                let cur = sub_profile(sub);
                let opts = self.encoder_options(&cur);
                if !opts.sizes.contains(&size) {
                    return Err(bad(
                        "not one of the sizes GetVideoEncoderConfigurationOptions lists",
                    ));
                }
                let fps = fps.unwrap_or(cfg.fps);
                if fps < opts.fps.0 || fps > opts.fps.1 {
                    return Err(bad("a frame rate outside FrameRateRange"));
                }
                let q = q.unwrap_or(u32::from(cfg.quality));
                if !(1..=100).contains(&q) {
                    return Err(bad("a quality outside QualityRange"));
                }
                cfg.width = size.0 as u16;
                cfg.height = size.1 as u16;
                cfg.fps = fps;
                cfg.quality = q as u8;
                let main = self.stream.info;
                let Some(sub) = &mut self.sub else {
                    unreachable!("matched above");
                };
                sub.reconfigure(cfg, &main)
                    .map_err(|e| Fault::receiver(&["ter:Action"], &format!("{e:#}")))?;
                Ok(resp::empty("trt", "SetVideoEncoderConfiguration"))
            }
            ("main", _) => {
                let same = w.is_none_or(|w| w == u32::from(self.stream.info.width))
                    && h.is_none_or(|h| h == u32::from(self.stream.info.height))
                    && fps.is_none_or(|f| f == self.cfg.fps)
                    && q.is_none_or(|q| q == u32::from(self.cfg.quality));
                if same {
                    Ok(resp::empty("trt", "SetVideoEncoderConfiguration"))
                } else {
                    Err(bad(
                        "the main stream's size, rate and quality are set in camstream.toml",
                    ))
                }
            }
            _ => Err(Fault::invalid_arg_val(
                "ter:NoConfig",
                "no such configuration",
            )),
        }
    }

    fn onvif_answer(&self, req: &Request, soap: &Soap) -> Result<String, Fault> {
        let host = req.host.clone().unwrap_or_else(|| "camera".to_owned());
        let x = XAddrs {
            device: format!("http://{host}{DEVICE_PATH}"),
            media: format!("http://{host}{MEDIA_PATH}"),
        };
        let op = soap.operation();
        let media = soap.service == Service::Media;
        let info = &self.stream.info;
        let src = VideoSource {
            token: "camera".into(),
            width: u32::from(info.width),
            height: u32::from(info.height),
            fps: f64::from(self.cfg.fps),
        };
        let main = Profile {
            token: "main".into(),
            name: "main".into(),
            width: u32::from(info.width),
            height: u32::from(info.height),
            fps: self.cfg.fps,
            quality: u32::from(self.cfg.quality),
            settable: false,
        };
        let mut profiles = vec![main];
        if let Some(sub) = &self.sub {
            profiles.push(sub_profile(sub));
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
            (false, "GetSystemDateAndTime") => resp::system_date_and_time(
                (wall_now().0 / 1_000_000_000) as i64,
                clock_synchronised(),
            ),
            (false, "GetDeviceInformation") => resp::device_information(&DeviceInfo {
                manufacturer: "camstream".into(),
                model: "camstream".into(),
                firmware_version: env!("CARGO_PKG_VERSION").into(),
                serial_number: super::hostname(),
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
            (false, "GetHostname") => resp::hostname(&super::hostname(), true),
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
            (true, "GetVideoEncoderConfigurations") => {
                resp::video_encoder_configurations(&profiles)
            }
            (true, "GetVideoEncoderConfiguration") => {
                let token = soap.arg(&["ConfigurationToken"]).unwrap_or("");
                let p = profiles.iter().find(|p| p.token == token).ok_or_else(|| {
                    Fault::invalid_arg_val("ter:NoConfig", "no such configuration")
                })?;
                resp::video_encoder_configuration(p)
            }
            (true, "GetStreamUri") => {
                let p = profile_arg()?;
                let port = match self.cfg.rtsp_port {
                    554 => String::new(),
                    p => format!(":{p}"),
                };
                let path = if p.token == "sub" {
                    super::sub::PATH
                } else {
                    self.cfg.path.as_str()
                };
                resp::media_uri(false, &format!("rtsp://{rtsp_host}{port}/{path}"))
            }
            (true, "GetVideoEncoderConfigurationOptions") => {
                let token = soap
                    .arg(&["ConfigurationToken"])
                    .or(soap.arg(&["ProfileToken"]))
                    .unwrap_or("main");
                let p = profiles.iter().find(|p| p.token == token).ok_or_else(|| {
                    Fault::invalid_arg_val("ter:NoConfig", "no such configuration")
                })?;
                resp::video_encoder_configuration_options(&self.encoder_options(p))
            }
            (true, "GetSnapshotUri") => {
                profile_arg()?;
                resp::media_uri(true, &format!("http://{host}/snapshot.jpg"))
            }
            _ => return Err(Fault::action_not_supported(op)),
        })
    }
}

/// The detection sub-stream as ONVIF's profile "sub", the one a client may
/// change.
fn sub_profile(sub: &super::sub::Sub) -> Profile {
    Profile {
        token: "sub".into(),
        name: "sub".into(),
        width: u32::from(sub.stream.info.width),
        height: u32::from(sub.stream.info.height),
        fps: sub.cfg.fps,
        quality: u32::from(sub.cfg.quality),
        settable: true,
    }
}
