//! Settings: a TOML file (`/etc/camstream.toml` on the target) overridden by
//! command-line flags of the same names. One struct describes both, so
//! `--help`, the file format and the defaults cannot drift apart.
//!
//! - [`options`]: the settings as given, flags and keys ([`Options`]), and
//!   the commands besides serving;
//! - [`file`]: reading the file, an error naming its line and key;
//! - [`users`]: who may stream, and `camstream passwd`'s edit of the file;
//! - here: the checked [`Config`] the daemon runs with.

/// The built-in defaults, each written once: `Config::from_options` falls
/// back to them and `--help` shows them (a macro, so that `concat!` can put
/// them into the help text).
#[rustfmt::skip]
macro_rules! default {
    (width) => { 1280 };
    (height) => { 720 };
    (rtp_port) => { 0 };
    (fps) => { 30 };
    (quality) => { 80 };
    // One being read while one fills and one waits: of raw frames only the
    // newest ready is encoded, so a fourth never carried a frame more under
    // QEMU's vivid (15 s, two clients, idle and CPU-bound), and cost 1.3 MiB
    // at 720p (docs/IMAGE.md, "Memory").
    (buffers) => { 3 };
    (rtsp_port) => { 8554 };
    (http_port) => { 8080 };
    (mtu) => { 1400 };
    (max_clients) => { 32 };
    (client_queue) => { 3 };
    (session_timeout) => { 60 };
    (rtcp_interval) => { 5 };
    (max_request_size) => { 8192 };
    (max_connections_per_ip) => { 16 };
    (max_connections_per_user) => { 32 };
    (request_timeout) => { 10 };
    (idle_timeout) => { 60 };
    (basic_auth) => { false };
    (nonce_lifetime) => { 600 };
    (anonymous) => { false };
    (onvif) => { true };
    (webrtc) => { true };
    (webrtc_port) => { 0 };
    (path) => { "stream" };
    (log_level) => { "info" };
    (source) => { "testpattern" };
    (listen) => { "0.0.0.0" };
}

pub mod crypt;
pub mod digests;
mod file;
mod options;
mod users;

use std::net::IpAddr;
use std::path::Path;

use anyhow::{Result, bail};
use camstream_onvif::access::UserLevel;
use camstream_rtp::packetize::{MAX_MTU, MIN_MTU};
use camstream_rtsp::auth::User;

use crate::source::v4l2::m2m::Choice;
use crate::source::{self, SourceSpec};

pub use file::DEFAULT_CONFIG;
pub use options::{
    AudioOptions, Command, H264Options, MotionOptions, MqttOptions, Options, StreamsOptions,
    SubOptions, UserHashes,
};
pub use users::{
    HashedUser, REALM, set_hashed_user, set_user, valid_user_name, with_hashed_user, with_user,
};

/// The validated settings the daemon runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// The source and what it is asked for: the main stream's size, rate
    /// and quality, a camera's buffers, format and controls.
    pub source: source::Settings,
    pub listen: IpAddr,
    pub rtsp_port: u16,
    /// 0: no HTTP listener.
    pub http_port: u16,
    pub rtp_port: u16,
    pub path: String,
    pub mtu: usize,
    pub max_clients: usize,
    pub client_queue: usize,
    pub session_timeout: u32,
    pub rtcp_interval: u32,
    pub max_request_size: usize,
    pub max_connections_per_ip: usize,
    /// Connections one user holds authenticated, both ports, before its
    /// idle ones are pushed out: one password cannot fill a port.
    pub max_connections_per_user: usize,
    pub request_timeout: u32,
    pub idle_timeout: u32,
    pub user: Option<String>,
    pub log_level: log::LevelFilter,
    /// Who may stream; empty: this machine's clients, or anyone if
    /// `anonymous`.
    pub users: Vec<User>,
    /// Users set from a password hash (Raspberry Pi Imager's), with the
    /// digests learnt at a sign-in where they were kept.
    pub hashed_users: Vec<HashedUser>,
    /// Where those digests are kept (beside the config file; none without
    /// one).
    pub digests_file: Option<std::path::PathBuf>,
    /// Where the picture settings set from the page or ONVIF are kept
    /// (beside the config file: camstream.picture.toml; none without one).
    pub picture_file: Option<std::path::PathBuf>,
    pub basic_auth: bool,
    pub nonce_lifetime: u32,
    pub anonymous: bool,
    pub onvif: bool,
    /// WebRTC (WHEP) on the HTTP port, its media on UDP `webrtc_port`
    /// (0: a free one), with `webrtc_candidates` offered besides the
    /// camera's own addresses.
    pub webrtc: bool,
    pub webrtc_port: u16,
    pub webrtc_candidates: Vec<std::net::SocketAddr>,
    /// None: `[streams.sub]` says enabled = false.
    pub sub: Option<SubSettings>,
    /// None: `[streams.h264]` says enabled = false.
    pub h264: Option<H264Settings>,
    /// `[motion]`: None unless enabled.
    pub motion: Option<MotionSettings>,
    /// `[mqtt]`: None unless enabled.
    pub mqtt: Option<MqttSettings>,
    /// `[audio]`: None without a device.
    pub audio: Option<AudioSettings>,
    /// The users given a password for ONVIF (`camstream passwd --onvif`):
    /// name, password.
    pub onvif_passwords: Vec<(String, String)>,
    /// Each user's level (ONVIF's): what the user may do besides watching.
    pub user_levels: Vec<(String, UserLevel)>,
}

/// The detection sub-stream's settings (it is made from the main stream's
/// frames).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubSettings {
    pub width: u16,
    pub height: u16,
    pub fps: u32,
    /// JPEG's quality (`codec = "jpeg"`).
    pub quality: u8,
    /// `codec = "h264"`: its bit rate, key frame interval and encoder;
    /// None: JPEG.
    pub h264: Option<H264Settings>,
}

fn sub_settings(o: SubOptions, main: (u32, u32, u32)) -> Result<Option<SubSettings>> {
    if o.enabled == Some(false) {
        return Ok(None);
    }
    // At most the main stream's size and rate: its frames are what it is
    // made of. The defaults shrink to fit; a value given is refused.
    let (main_w, main_h, main_fps) = main;
    let (main_w, main_h) = (main_w.min(8192) as u16, main_h.min(8192) as u16);
    let at_most = |what: &str, main: u16| {
        format!("must be from 16 to the main stream's {what}, {main}, and even")
    };
    let width = match o.width {
        Some(w) if w < 16 || w > main_w || w % 2 != 0 => {
            return Err(bad("streams.sub.width", w, at_most("width", main_w)));
        }
        Some(w) => w,
        None => 640.min(main_w),
    };
    let height = match o.height {
        Some(h) if h < 16 || h > main_h || h % 2 != 0 => {
            return Err(bad("streams.sub.height", h, at_most("height", main_h)));
        }
        Some(h) => h,
        None => 360.min(main_h),
    };
    let fps = match o.fps {
        Some(f) if f < 1 || f > main_fps => {
            return Err(bad(
                "streams.sub.fps",
                f,
                format!("must be from 1 to the main stream's rate, {main_fps}"),
            ));
        }
        Some(f) => f,
        None => 5.min(main_fps),
    };
    let h264 = match o.codec.as_deref().unwrap_or("jpeg") {
        "jpeg" => {
            if let Some((key, value)) = [
                ("bitrate", o.bitrate.map(|v| v.to_string())),
                ("gop", o.gop.map(|v| v.to_string())),
                ("encoder", o.encoder.as_ref().map(|v| format!("{v:?}"))),
            ]
            .into_iter()
            .find_map(|(k, v)| Some((k, v?)))
            {
                return Err(bad(
                    &format!("streams.sub.{key}"),
                    value,
                    "is for codec = \"h264\" (the sub-stream is JPEG)",
                ));
            }
            None
        }
        "h264" => {
            if let Some(q) = o.quality {
                return Err(bad(
                    "streams.sub.quality",
                    q,
                    "is for codec = \"jpeg\" (an H.264 sub-stream has a bitrate)",
                ));
            }
            // 500 kbit/s by default: ample for 640x360 at a few frames a
            // second, what an NVR's detection takes.
            let keys = H264Keys {
                bitrate: o.bitrate,
                gop: o.gop,
                encoder: o.encoder.clone(),
            };
            Some(h264_settings("streams.sub", keys, 500, fps)?)
        }
        other => {
            return Err(bad(
                "streams.sub.codec",
                format!("{other:?}"),
                "must be \"jpeg\" or \"h264\"",
            ));
        }
    };
    let quality = in_range("streams.sub.quality", o.quality.unwrap_or(70), 1, 100)?;
    Ok(Some(SubSettings {
        width,
        height,
        fps,
        quality,
        h264,
    }))
}

/// Motion detection: the detector's settings, and how many pictures a
/// second it looks at.
#[derive(Debug, Clone, PartialEq)]
pub struct MotionSettings {
    pub detector: camstream_motion::Settings,
    /// Pictures looked at a second; None: as many as the main stream's
    /// size allows (`media::motion::default_rate`).
    pub fps: Option<u32>,
}

fn motion_settings(o: MotionOptions, main_fps: u32) -> Result<Option<MotionSettings>> {
    if o.enabled != Some(true) {
        return Ok(None);
    }
    let seconds = |key: &str, v: Option<f32>, default: u32, max: f32| -> Result<u32> {
        match v {
            None => Ok(default),
            Some(s) if (0.0..=max).contains(&s) => Ok((s * 1000.0).round() as u32),
            Some(s) => Err(bad(key, s, format!("must be from 0 to {max} seconds"))),
        }
    };
    let ignore = o
        .ignore
        .unwrap_or_default()
        .into_iter()
        .map(|r| match r[..] {
            [x, y, w, h]
                if [x, y, x + w, y + h].iter().all(|v| (0.0..=1.0).contains(v))
                    && w > 0.0
                    && h > 0.0 =>
            {
                Ok(camstream_motion::Rect { x, y, w, h })
            }
            [..] if r.len() == 4 => Err(bad(
                "motion.ignore",
                format!("{r:?}"),
                "a region must be inside the picture: x, y, width and height are fractions of it (0 to 1)",
            )),
            _ => Err(bad(
                "motion.ignore",
                format!("{r:?}"),
                "each region is [x, y, width, height], fractions of the picture",
            )),
        })
        .collect::<Result<Vec<_>>>()?;
    let detector = camstream_motion::Settings {
        sensitivity: in_range("motion.sensitivity", o.sensitivity.unwrap_or(50), 1, 100)?,
        min_area: match o.min_area {
            None => 1.0,
            Some(a) if a > 0.0 && a <= 100.0 => a,
            Some(a) => {
                return Err(bad(
                    "motion.min_area",
                    a,
                    "must be more than 0 and at most 100 (per cent)",
                ));
            }
        },
        min_duration_ms: seconds("motion.min_duration", o.min_duration, 500, 60.0)?,
        hold_ms: seconds("motion.hold", o.hold, 3000, 600.0)?,
        ignore,
    };
    if detector.ignore.len() > 16 {
        return Err(bad(
            "motion.ignore",
            format!("{} regions", detector.ignore.len()),
            "at most 16",
        ));
    }
    // The detector's own check, which the above makes pass.
    detector
        .check()
        .map_err(|e| bad("motion", "", e.to_string()))?;
    let fps = o
        .fps
        .map(|f| in_range("motion.fps", f, 1, main_fps))
        .transpose()?;
    Ok(Some(MotionSettings { detector, fps }))
}

/// Where sound comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AudioDevice {
    /// A 1 kHz tone for the first 100 ms of each second of UTC, in step
    /// with the test pattern's clock strip: what tests measure lip sync by.
    Test,
    /// The machine's sound card: a USB one first, none when there is none
    /// (the `alsa` feature).
    Auto,
    /// An ALSA capture device by name (`plughw:CARD=Device,DEV=0`).
    Named(String),
}

impl AudioDevice {
    /// What the log calls it.
    pub fn name(&self) -> &str {
        match self {
            AudioDevice::Test => "the test tone",
            AudioDevice::Auto => "auto",
            AudioDevice::Named(name) => name,
        }
    }
}

/// Sound beside the picture: every RTSP presentation has it as its
/// second track, in `codec` unless a client asks for another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AudioSettings {
    pub device: AudioDevice,
    pub codec: AudioCodec,
    /// `codec`'s bit rate, bit/s (where it has one).
    pub bitrate: u32,
}

/// What RTSP clients get the sound as unless they ask for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioCodec {
    Opus,
    Pcmu,
    /// AAC-LC (RFC 3640), with the `aac` feature.
    Aac,
}

fn audio_settings(o: AudioOptions) -> Result<Option<AudioSettings>> {
    let device = match o.device.as_deref().unwrap_or("none") {
        "none" => return Ok(None),
        "test" => AudioDevice::Test,
        "auto" => AudioDevice::Auto,
        d if is_alsa_name(d) => AudioDevice::Named(d.to_owned()),
        d => {
            return Err(bad(
                "audio.device",
                d,
                "must be none, auto, test or an ALSA capture device (plughw:CARD=Device,DEV=0)",
            ));
        }
    };
    // "auto" finds no card in such a build (the log says why); a card
    // named is a mistake.
    if !cfg!(feature = "alsa") && matches!(device, AudioDevice::Named(_)) {
        return Err(bad(
            "audio.device",
            o.device.as_deref().unwrap_or_default(),
            "must be none, auto or test: this build captures from no sound card (its alsa feature is off)",
        ));
    }
    // G.711 by default: every NVR takes it, and ONVIF's Media service can
    // name it (Opus it cannot).
    let codec = match o.codec.as_deref().unwrap_or("pcmu") {
        "opus" => AudioCodec::Opus,
        "pcmu" => AudioCodec::Pcmu,
        "aac" => AudioCodec::Aac,
        c => return Err(bad("audio.codec", c, "must be pcmu, opus or aac")),
    };
    let default = default_audio_bitrate(codec) / 1000;
    let bitrate = in_range("audio.bitrate", o.bitrate.unwrap_or(default), 6, 128)? * 1000;
    Ok(Some(AudioSettings {
        device,
        codec,
        bitrate,
    }))
}

/// An encoding's bit rate (bit/s) where `audio.bitrate` does not set it:
/// Opus is good at 32 kbit/s, AAC-LC wants more (G.711's is fixed).
pub fn default_audio_bitrate(codec: AudioCodec) -> u32 {
    match codec {
        AudioCodec::Aac => 64_000,
        AudioCodec::Opus | AudioCodec::Pcmu => 32_000,
    }
}

/// An ALSA PCM name as `arecord -L` lists them: a plugin, then `:` and
/// its arguments (`hw:1,0`, `plughw:CARD=Device,DEV=0`, `dsnoop:Mic`).
fn is_alsa_name(d: &str) -> bool {
    d.len() <= 100
        && d.split_once(':').is_some_and(|(plugin, args)| {
            !plugin.is_empty()
                && plugin
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !args.is_empty()
                && args
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_=,.-".contains(&b))
        })
}

/// MQTT: where the broker is, as whom to sign in, and the topics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttSettings {
    pub host: String,
    pub port: u16,
    /// User and password, when the broker wants them.
    pub credentials: Option<(String, String)>,
    /// The camera's topics' start (None: camstream/HOSTNAME).
    pub topic: Option<String>,
    pub discovery_prefix: String,
}

fn mqtt_settings(o: MqttOptions, motion: bool) -> Result<Option<MqttSettings>> {
    if o.enabled != Some(true) {
        return Ok(None);
    }
    if !motion {
        return Err(bad(
            "mqtt.enabled",
            true,
            "MQTT publishes motion: it needs [motion] enabled = true",
        ));
    }
    let broker = o.broker.ok_or_else(|| {
        bad(
            "mqtt.broker",
            "",
            "the broker's HOST or HOST:PORT is needed",
        )
    })?;
    let (host, port) = match broker.rsplit_once(':') {
        // An IPv6 address has colons of its own: [::1]:1883.
        Some((h, p)) if !h.contains(':') || h.starts_with('[') => (
            h.trim_start_matches('[').trim_end_matches(']').to_owned(),
            p.parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| bad("mqtt.broker", &broker, "HOST:PORT, a port from 1 to 65535"))?,
        ),
        _ => (
            broker
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            1883,
        ),
    };
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == '/') {
        return Err(bad("mqtt.broker", &broker, "HOST or HOST:PORT"));
    }
    let credentials = match (o.user, o.password) {
        (None, None) => None,
        (Some(u), Some(p)) => Some((u, p)),
        _ => {
            return Err(bad(
                "mqtt.user",
                "",
                "user and password go together (or neither, for a broker that lets anyone in)",
            ));
        }
    };
    // MQTT's wildcards may not be in a topic that is published to.
    let topic_ok = |t: &str| !t.is_empty() && !t.contains(['+', '#', '\0']) && !t.ends_with('/');
    if let Some(t) = o.topic.as_deref().filter(|t| !topic_ok(t)) {
        return Err(bad(
            "mqtt.topic",
            t,
            "a topic without + or #, not ending in /",
        ));
    }
    let discovery_prefix = o.discovery_prefix.unwrap_or_else(|| "homeassistant".into());
    if !topic_ok(&discovery_prefix) {
        return Err(bad(
            "mqtt.discovery_prefix",
            &discovery_prefix,
            "a topic without + or #, not ending in /",
        ));
    }
    Ok(Some(MqttSettings {
        host,
        port,
        credentials,
        topic: o.topic,
        discovery_prefix,
    }))
}

/// The H.264 stream's settings (it is the main stream's frames, encoded
/// again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H264Settings {
    /// Bits per second the encoder aims at.
    pub bitrate: u32,
    /// Frames from one key frame (IDR picture) to the next.
    pub gop: u32,
    /// `[streams.h264] encoder`.
    pub encoder: Choice,
}

/// The H.264 stream's bit rate (kbit/s) and key frame interval (frames)
/// may be these, in camstream.toml and through ONVIF.
pub const H264_KBIT: (u32, u32) = (64, 100_000);
pub const H264_GOP: (u32, u32) = (1, 1000);

/// An H.264 stream's keys in camstream.toml: `[streams.h264]`'s, and the
/// sub-stream's with codec = "h264".
struct H264Keys {
    bitrate: Option<u32>,
    gop: Option<u32>,
    encoder: Option<String>,
}

/// An H.264 stream's settings from `[section]`'s keys: `kbit` and two
/// seconds of frames at `fps` by default.
fn h264_settings(section: &str, o: H264Keys, kbit: u32, fps: u32) -> Result<H264Settings> {
    let kbit = in_range(
        &format!("{section}.bitrate"),
        o.bitrate.unwrap_or(kbit),
        H264_KBIT.0,
        H264_KBIT.1,
    )?;
    // Two seconds by default: a client that joins is sent a key frame at
    // once anyway.
    let gop = in_range(
        &format!("{section}.gop"),
        o.gop.unwrap_or(2 * fps),
        H264_GOP.0,
        H264_GOP.1,
    )?;
    let encoder = Choice::parse(
        &format!("{section}.encoder"),
        o.encoder.as_deref().unwrap_or("auto"),
    )?;
    Ok(H264Settings {
        bitrate: kbit * 1000,
        gop,
        encoder,
    })
}

/// A setting's value the daemon cannot run with: its key (dotted, as the
/// file writes it), the value, and what it may be, in words.
/// [`Config::load`] adds where the value came from: a flag, or the file's
/// line.
#[derive(Debug)]
pub struct BadValue {
    pub key: String,
    pub value: String,
    pub allowed: String,
}

impl std::fmt::Display for BadValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} = {}: {}", self.key, self.value, self.allowed)
    }
}

impl std::error::Error for BadValue {}

fn bad(key: &str, value: impl std::fmt::Display, allowed: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadValue {
        key: key.to_owned(),
        value: value.to_string(),
        allowed: allowed.into(),
    })
}

fn in_range<T: PartialOrd + std::fmt::Display + Copy>(name: &str, v: T, lo: T, hi: T) -> Result<T> {
    if v < lo || v > hi {
        return Err(bad(name, v, format!("must be from {lo} to {hi}")));
    }
    Ok(v)
}

/// The picture settings kept in `path`: none if there is no such file;
/// one that cannot be read is logged and ignored (the camera starts with
/// camstream.toml's controls alone).
fn read_picture(path: &Path) -> Vec<crate::source::controls::ControlSetting> {
    match std::fs::read_to_string(path) {
        Ok(text) => crate::source::picture::read_text(&text).unwrap_or_else(|e| {
            log::warn!("{}: {e}; ignored", path.display());
            Vec::new()
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            log::warn!("{}: {e}; ignored", path.display());
            Vec::new()
        }
    }
}

impl Config {
    /// The level of the user `name` (None: no such user).
    pub fn user_level(&self, name: &str) -> Option<UserLevel> {
        self.user_levels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, l)| *l)
    }

    /// Reads the config file (the one named by `--config`, else the default
    /// one if present) and applies the flags over it. A value refused says
    /// where it came from: the flag, or the file's line and column.
    pub fn load(cli: Options) -> Result<Config> {
        Config::load_checked(cli, |_| Ok(()))
    }

    /// As [`Config::load`], for the daemon: the devices it names (encoders)
    /// must be there too. (The camera is waited for: it may be plugged in
    /// later.)
    pub fn load_to_serve(cli: Options) -> Result<Config> {
        Config::load_checked(cli, Config::devices_exist)
    }

    fn devices_exist(&self) -> Result<()> {
        let named = [
            ("encoder", Some(&self.source.encoder)),
            (
                "streams.h264.encoder",
                self.h264.as_ref().map(|h| &h.encoder),
            ),
            (
                "streams.sub.encoder",
                self.sub
                    .as_ref()
                    .and_then(|s| s.h264.as_ref())
                    .map(|h| &h.encoder),
            ),
        ];
        for (key, choice) in named {
            if let Some(Choice::Device(path)) = choice {
                if !path.exists() {
                    return Err(bad(
                        key,
                        format!("{:?}", path.display()),
                        "no such device (`camstream encoders` lists the kernel's encoders; \"auto\" takes one if there is one)",
                    ));
                }
            }
        }
        Ok(())
    }

    fn load_checked(cli: Options, check: fn(&Config) -> Result<()>) -> Result<Config> {
        let path = cli.config.clone().or_else(|| {
            Path::new(DEFAULT_CONFIG)
                .exists()
                .then(|| DEFAULT_CONFIG.into())
        });
        let file = path.as_deref().map(file::read_file).transpose()?;
        let flags = cli.flags.clone();
        let opts = match &file {
            Some((options, _)) => cli.or(options.clone()),
            None => cli,
        };
        Config::from_options(opts)
            .map(|mut c| {
                // The digests learnt for users set from a password hash.
                if let Some(path) = &path {
                    let kept = digests::path_for(path);
                    if !c.hashed_users.is_empty() {
                        digests::read(&kept, &mut c.hashed_users);
                    }
                    c.digests_file = Some(kept);
                    let kept = path.with_extension("picture.toml");
                    c.source.picture = read_picture(&kept);
                    c.picture_file = Some(kept);
                }
                c
            })
            .and_then(|c| check(&c).map(|()| c))
            .map_err(|e| {
                let Some(b) = e.downcast_ref::<BadValue>() else {
                    return e;
                };
                if flags.contains(&b.key) {
                    return anyhow::anyhow!(
                        "--{} {}: {} (a flag)",
                        b.key.replace('_', "-"),
                        b.value,
                        b.allowed
                    );
                }
                match (&path, &file) {
                    (Some(path), Some((_, text))) => match file::locate(text, &b.key) {
                        Some((line, column)) => {
                            anyhow::anyhow!("config {}:{line}:{column}: {b}", path.display())
                        }
                        None => e,
                    },
                    _ => e,
                }
            })
    }

    pub fn from_options(o: Options) -> Result<Config> {
        // A setting as given, else its default, checked against its range.
        macro_rules! ranged {
            ($key:ident, $lo:expr, $hi:expr) => {
                in_range(stringify!($key), o.$key.unwrap_or(default!($key)), $lo, $hi)
            };
        }
        let width = ranged!(width, 16, 8192)?;
        let height = ranged!(height, 16, 8192)?;
        if width % 2 != 0 {
            return Err(bad("width", width, "must be even"));
        }
        if height % 2 != 0 {
            return Err(bad("height", height, "must be even"));
        }
        let path = o.path.unwrap_or_else(|| default!(path).into());
        let path = path.trim_matches('/').to_string();
        if path.is_empty()
            || !path
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b))
            || path
                .split('/')
                .any(|s| s.is_empty() || s == "." || s == "..")
        {
            return Err(bad(
                "path",
                format!("{path:?}"),
                "use letters, digits, '-', '_', '.' and '/' between names",
            ));
        }
        // The sound's paths, whether or not [audio] is on (turning it on
        // must not take a stream's path from its clients).
        let sound = crate::media::audio::PATH;
        if path == sound || path.strip_prefix(sound).is_some_and(|p| p.starts_with('/')) {
            return Err(bad(
                "path",
                format!("{path:?}"),
                "\"audio\" and the paths under it are the sound's: use another",
            ));
        }
        let rtp_port = o.rtp_port.unwrap_or(default!(rtp_port));
        if rtp_port % 2 != 0 || rtp_port == u16::MAX - 1 {
            return Err(bad(
                "rtp_port",
                rtp_port,
                "must be even (RTCP uses the next port), or 0 (a free pair)",
            ));
        }
        let level = o.log_level.unwrap_or_else(|| default!(log_level).into());
        let log_level = level
            .parse()
            .ok()
            .filter(|l| *l != log::LevelFilter::Off)
            .ok_or_else(|| {
                bad(
                    "log_level",
                    format!("{level:?}"),
                    "must be error, warn, info, debug or trace",
                )
            })?;
        let rtsp_port = o.rtsp_port.unwrap_or(default!(rtsp_port));
        let http_port = o.http_port.unwrap_or(default!(http_port));
        if http_port == rtsp_port {
            return Err(bad(
                "http_port",
                http_port,
                "must differ from rtsp_port (or be 0: no HTTP)",
            ));
        }
        if let Some(c) = o
            .webrtc_candidates
            .iter()
            .flatten()
            .find(|c| c.port() == 0 || c.ip().is_unspecified())
        {
            return Err(bad(
                "webrtc_candidates",
                format!("{c:?}"),
                "each is an address and port a browser can reach the camera's webrtc_port at",
            ));
        }
        let fps = ranged!(fps, 1, 120)?;
        let (users, hashed_users) = users::from_table(o.users.clone())?;
        if users.is_empty() && hashed_users.is_empty() && o.basic_auth == Some(true) {
            bail!("basic_auth = true needs users (see `camstream passwd`)");
        }
        Ok(Config {
            source: source::Settings {
                spec: SourceSpec::parse(o.source.as_deref().unwrap_or(default!(source)))?,
                width: width as u16,
                height: height as u16,
                fps,
                quality: ranged!(quality, 1, 100)? as u8,
                encoder: Choice::parse("encoder", o.encoder.as_deref().unwrap_or("auto"))?,
                buffers: ranged!(buffers, 2, 32)?,
                format: o
                    .format
                    .as_deref()
                    .map(source::v4l2::parse_format)
                    .transpose()?,
                controls: o.controls.unwrap_or_default(),
                picture: Vec::new(),
            },
            listen: o
                .listen
                .unwrap_or(default!(listen).parse().expect("an address")),
            rtsp_port,
            http_port,
            rtp_port,
            path,
            mtu: ranged!(mtu, MIN_MTU as u32, MAX_MTU as u32)? as usize,
            max_clients: ranged!(max_clients, 1, 100_000)? as usize,
            client_queue: ranged!(client_queue, 1, 64)? as usize,
            session_timeout: ranged!(session_timeout, 5, 3600)?,
            rtcp_interval: ranged!(rtcp_interval, 1, 60)?,
            max_request_size: ranged!(max_request_size, 1024, 1 << 20)? as usize,
            max_connections_per_ip: ranged!(max_connections_per_ip, 1, 100_000)? as usize,
            max_connections_per_user: ranged!(max_connections_per_user, 1, 100_000)? as usize,
            request_timeout: ranged!(request_timeout, 1, 600)?,
            idle_timeout: ranged!(idle_timeout, 5, 3600)?,
            user: o.user.filter(|u| !u.is_empty()),
            log_level,
            onvif_passwords: o
                .users
                .iter()
                .flatten()
                .filter_map(|(n, h)| Some((n.clone(), h.onvif_password.clone()?)))
                .collect(),
            // No level: administrator, what every user could do before
            // levels were.
            user_levels: o
                .users
                .iter()
                .flatten()
                .map(|(n, h)| (n.clone(), h.user_level.unwrap_or(UserLevel::Administrator)))
                .collect(),
            users,
            hashed_users,
            digests_file: None,
            picture_file: None,
            basic_auth: o.basic_auth.unwrap_or(default!(basic_auth)),
            nonce_lifetime: ranged!(nonce_lifetime, 30, 86_400)?,
            anonymous: o.anonymous.unwrap_or(default!(anonymous)),
            onvif: o.onvif.unwrap_or(default!(onvif)),
            webrtc: o.webrtc.unwrap_or(default!(webrtc)),
            webrtc_port: o.webrtc_port.unwrap_or(default!(webrtc_port)),
            webrtc_candidates: o.webrtc_candidates.clone().unwrap_or_default(),
            sub: sub_settings(
                o.streams.clone().and_then(|s| s.sub).unwrap_or_default(),
                (width, height, fps),
            )?,
            h264: {
                let o = o.streams.clone().and_then(|s| s.h264).unwrap_or_default();
                match o.enabled {
                    Some(false) => None,
                    _ => {
                        let keys = H264Keys {
                            bitrate: o.bitrate,
                            gop: o.gop,
                            encoder: o.encoder,
                        };
                        Some(h264_settings("streams.h264", keys, 2000, fps)?)
                    }
                }
            },
            motion: motion_settings(o.motion.clone().unwrap_or_default(), fps)?,
            mqtt: mqtt_settings(
                o.mqtt.clone().unwrap_or_default(),
                o.motion.as_ref().is_some_and(|m| m.enabled == Some(true)),
            )?,
            audio: audio_settings(o.audio.clone().unwrap_or_default())?,
        })
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::source::controls::Value;
    use clap::Parser;
    use file::read_file;

    pub(super) fn parse(toml_text: &str) -> Result<Options> {
        toml::from_str(toml_text).map_err(|e| anyhow::anyhow!("{e}"))
    }

    #[test]
    fn defaults() {
        let c = Config::from_options(Options::default()).unwrap();
        assert_eq!(
            (
                c.source.width,
                c.source.height,
                c.source.fps,
                c.rtsp_port,
                c.mtu
            ),
            (1280, 720, 30, 8554, 1400)
        );
        assert_eq!(c.path, "stream");
        assert!(matches!(c.source.spec, SourceSpec::TestPattern));
    }

    #[test]
    fn flags_override_the_file() {
        let file = parse("rtsp_port = 554\nfps = 15\nsource = \"file:/a.mjpeg\"").unwrap();
        let cli = Options::try_parse_from(["camstream", "--fps", "25"]).unwrap();
        let c = Config::from_options(cli.or(file)).unwrap();
        assert_eq!((c.rtsp_port, c.source.fps), (554, 25));
        assert!(matches!(c.source.spec, SourceSpec::File(ref p) if p == Path::new("/a.mjpeg")));
    }

    #[test]
    fn controls_add_up_and_flags_come_last() {
        let file = parse(
            "source = \"v4l2:auto\"\n[controls]\nbrightness = 100\nwhite_balance_automatic = false\npower_line_frequency = \"50 Hz\"\n",
        )
        .unwrap();
        let cli = Options::try_parse_from(["camstream", "--control", "brightness=120"]).unwrap();
        let c = Config::from_options(cli.or(file)).unwrap();
        assert!(matches!(
            c.source.spec,
            SourceSpec::V4l2(crate::source::v4l2::DeviceSpec::Auto)
        ));
        let got: Vec<(&str, &Value)> = c
            .source
            .controls
            .iter()
            .map(|s| (s.name.as_str(), &s.value))
            .collect();
        assert_eq!(
            got,
            [
                ("brightness", &Value::Int(100)),
                ("power_line_frequency", &Value::Text("50 Hz".into())),
                ("white_balance_automatic", &Value::Bool(false)),
                ("brightness", &Value::Int(120)),
            ]
        );
        assert_eq!(c.source.buffers, 3);
        assert_eq!(c.source.format, None);
        let c = Config::from_options(parse("format = \"YUYV\"").unwrap()).unwrap();
        assert_eq!(c.source.format, Some(u32::from_le_bytes(*b"YUYV")));
        assert!(Config::from_options(parse("format = \"H264\"").unwrap()).is_err());
        assert!(Config::from_options(parse("buffers = 1").unwrap()).is_err());
        let o = parse("source = \"v4l2:/dev/video2\"").unwrap();
        let c = Config::from_options(o).unwrap();
        assert!(
            matches!(c.source.spec, SourceSpec::V4l2(crate::source::v4l2::DeviceSpec::Path(ref p)) if p == Path::new("/dev/video2"))
        );
        assert!(Config::from_options(parse("source = \"v4l2:\"").unwrap()).is_err());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        let e = parse("rtsp_prot = 1").unwrap_err().to_string();
        let dir =
            std::env::temp_dir().join(format!("camstream-config-test-{}", std::process::id()));
        std::fs::write(&dir, "fps = 10\nrtsp_prot = 1\n").unwrap();
        let one_line = read_file(&dir).unwrap_err().to_string();
        std::fs::remove_file(&dir).unwrap();
        assert!(one_line.ends_with(":2:1: unknown field `rtsp_prot`, expected one of `source`, `width`, `height`, `fps`, `quality`, `encoder`, `format`, `buffers`, `controls`, `listen`, `rtsp_port`, `http_port`, `rtp_port`, `path`, `mtu`, `max_clients`, `client_queue`, `session_timeout`, `rtcp_interval`, `max_request_size`, `max_connections_per_ip`, `max_connections_per_user`, `request_timeout`, `idle_timeout`, `user`, `log_level`, `users`, `basic_auth`, `nonce_lifetime`, `anonymous`, `onvif`, `webrtc`, `webrtc_port`, `webrtc_candidates`, `streams`, `motion`, `mqtt`, `audio`"), "{one_line}");
        assert!(!one_line.contains('\n'));
        assert!(e.contains("unknown field `rtsp_prot`"), "{e}");
        let e = parse("fps = \"fast\"").unwrap_err().to_string();
        assert!(e.contains("invalid type"), "{e}");
        let o = parse("fps = 500").unwrap();
        let e = Config::from_options(o).unwrap_err().to_string();
        assert_eq!(e, "fps = 500: must be from 1 to 120");
        let o = parse("rtp_port = 5001").unwrap();
        assert!(Config::from_options(o).is_err());
        let o = parse("path = \"../x\"").unwrap();
        assert!(Config::from_options(o).is_err());
        for sound in ["audio", "audio/opus"] {
            let o = parse(&format!("path = \"{sound}\"")).unwrap();
            assert!(Config::from_options(o).is_err(), "{sound}");
        }
        let o = parse("path = \"audiobook\"").unwrap();
        assert!(Config::from_options(o).is_ok());
        let o = parse("source = \"webcam\"").unwrap();
        assert!(Config::from_options(o).is_err());
    }

    #[test]
    fn audio_devices_by_kind_and_by_alsa_name() {
        let device = |d: &str| {
            Config::from_options(parse(&format!("[audio]\ndevice = {d:?}\n")).unwrap())
                .map(|c| c.audio.map(|a| a.device))
        };
        assert_eq!(device("none").unwrap(), None);
        assert_eq!(device("test").unwrap(), Some(AudioDevice::Test));
        let names = [
            "hw:1,0",
            "plughw:CARD=Device,DEV=0",
            "dsnoop:Mic",
            "plughw:Loopback,1",
        ];
        assert_eq!(device("auto").unwrap(), Some(AudioDevice::Auto));
        if cfg!(feature = "alsa") {
            for name in names {
                assert_eq!(device(name).unwrap(), Some(AudioDevice::Named(name.into())));
            }
        } else {
            for name in names {
                let e = device(name).unwrap_err().to_string();
                assert!(e.ends_with("(its alsa feature is off)"), "{e}");
            }
        }
        for bad in ["usb", "hw:", ":1", "hw:1;rm", "plughw:CARD=a b", "hw:1\n"] {
            let e = device(bad).unwrap_err().to_string();
            assert!(
                e.contains("must be none, auto, test or an ALSA"),
                "{bad}: {e}"
            );
        }
        let codec = Config::from_options(parse("[audio]\ndevice = \"test\"\n").unwrap())
            .unwrap()
            .audio
            .unwrap()
            .codec;
        assert_eq!(codec, AudioCodec::Pcmu);
    }

    #[test]
    fn mqtt_is_off_unless_enabled_and_needs_motion_and_a_broker() {
        let mqtt = |text: &str| Config::from_options(parse(text).unwrap()).map(|c| c.mqtt);
        assert_eq!(mqtt("[mqtt]\nbroker = \"x\"\n").unwrap(), None);
        let on = "[motion]\nenabled = true\n[mqtt]\nenabled = true\n";
        let m = mqtt(&format!("{on}broker = \"broker.lan\"\n"))
            .unwrap()
            .unwrap();
        assert_eq!(
            (m.host.as_str(), m.port, m.credentials, m.topic),
            ("broker.lan", 1883, None, None)
        );
        assert_eq!(m.discovery_prefix, "homeassistant");
        let m = mqtt(&format!(
            "{on}broker = \"[fd00::1]:8883\"\nuser = \"u\"\npassword = \"p\"\n"
        ))
        .unwrap()
        .unwrap();
        assert_eq!((m.host.as_str(), m.port), ("fd00::1", 8883));
        assert_eq!(m.credentials, Some(("u".into(), "p".into())));
        for (text, key) in [
            (
                "[mqtt]\nenabled = true\nbroker = \"b\"\n".to_owned(),
                "mqtt.enabled",
            ),
            (on.to_owned(), "mqtt.broker"),
            (format!("{on}broker = \"b:0\"\n"), "mqtt.broker"),
            (format!("{on}broker = \"b:x\"\n"), "mqtt.broker"),
            (format!("{on}broker = \"b\"\nuser = \"u\"\n"), "mqtt.user"),
            (
                format!("{on}broker = \"b\"\ntopic = \"cams/#\"\n"),
                "mqtt.topic",
            ),
            (
                format!("{on}broker = \"b\"\ndiscovery_prefix = \"ha/\"\n"),
                "mqtt.discovery_prefix",
            ),
        ] {
            let e = mqtt(&text).unwrap_err().to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }

    #[test]
    fn motion_is_off_unless_enabled_and_its_defaults() {
        assert_eq!(
            Config::from_options(parse("").unwrap()).unwrap().motion,
            None
        );
        let c =
            Config::from_options(parse("fps = 3\n[motion]\nenabled = true\n").unwrap()).unwrap();
        assert_eq!(
            c.motion,
            Some(MotionSettings {
                detector: camstream_motion::Settings::default(),
                fps: None,
            })
        );
        let c = Config::from_options(
            parse("[motion]\nenabled = true\nhold = 10\nignore = [[0.5, 0, 0.5, 1]]\n").unwrap(),
        )
        .unwrap()
        .motion
        .unwrap();
        assert_eq!(
            (c.detector.hold_ms, c.detector.ignore.len(), c.fps),
            (10_000, 1, None)
        );
    }

    #[test]
    fn the_sub_stream() {
        let c = Config::from_options(parse("").unwrap()).unwrap();
        assert_eq!(
            c.sub,
            Some(SubSettings {
                width: 640,
                height: 360,
                fps: 5,
                quality: 70,
                h264: None,
            })
        );
        let c = Config::from_options(
            parse("fps = 3\n[streams.sub]\nwidth = 320\nheight = 180\n").unwrap(),
        )
        .unwrap();
        assert_eq!(
            c.sub.map(|s| (s.width, s.height, s.fps)),
            Some((320, 180, 3))
        );
        let c = Config::from_options(parse("[streams.sub]\nenabled = false\n").unwrap()).unwrap();
        assert_eq!(c.sub, None);
        let e = Config::from_options(parse("[streams.sub]\nwidth = 321\n").unwrap()).unwrap_err();
        assert!(e.to_string().contains("even"), "{e}");
        assert!(parse("[streams.sub]\nsize = 1\n").is_err());
        // H.264: 500 kbit/s and two seconds of its frames by default.
        let c = Config::from_options(parse("[streams.sub]\ncodec = \"h264\"\n").unwrap()).unwrap();
        assert_eq!(
            c.sub.and_then(|s| s.h264),
            Some(H264Settings {
                bitrate: 500_000,
                gop: 10,
                encoder: Choice::Auto,
            })
        );
        let c = Config::from_options(
            parse(
                "[streams.sub]\ncodec = \"h264\"\nbitrate = 300\ngop = 4\nencoder = \"software\"\n",
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            c.sub
                .and_then(|s| s.h264)
                .map(|h| (h.bitrate, h.gop, h.encoder)),
            Some((300_000, 4, Choice::Software))
        );
        // Each codec's keys only with it, and no other codec.
        for (toml, want) in [
            (
                "bitrate = 300\n",
                "streams.sub.bitrate = 300: is for codec = \"h264\"",
            ),
            (
                "codec = \"jpeg\"\ngop = 4\n",
                "streams.sub.gop = 4: is for codec = \"h264\"",
            ),
            (
                "codec = \"h264\"\nquality = 50\n",
                "streams.sub.quality = 50: is for codec = \"jpeg\"",
            ),
            (
                "codec = \"h265\"\n",
                "streams.sub.codec = \"h265\": must be \"jpeg\" or \"h264\"",
            ),
            (
                "codec = \"h264\"\nbitrate = 1\n",
                "streams.sub.bitrate = 1: must be from 64 to 100000",
            ),
            (
                "codec = \"h264\"\nencoder = \"gpu\"\n",
                "streams.sub.encoder = \"gpu\"",
            ),
        ] {
            let e = Config::from_options(parse(&format!("[streams.sub]\n{toml}")).unwrap())
                .unwrap_err();
            assert!(e.to_string().contains(want), "{toml}: {e}");
        }
        assert!(parse("[streams.main]\nwidth = 1\n").is_err());
    }

    #[test]
    fn the_sub_stream_is_not_bigger_or_faster_than_the_main_one() {
        let e = |toml: &str| {
            Config::from_options(parse(toml).unwrap())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e("[streams.sub]\nwidth = 4000\n"),
            "streams.sub.width = 4000: must be from 16 to the main stream's width, 1280, and even"
        );
        assert_eq!(
            e("width = 320\nheight = 240\n[streams.sub]\nheight = 360\n"),
            "streams.sub.height = 360: must be from 16 to the main stream's height, 240, and even"
        );
        assert_eq!(
            e("fps = 10\n[streams.sub]\nfps = 15\n"),
            "streams.sub.fps = 15: must be from 1 to the main stream's rate, 10"
        );
        // Not given: the defaults shrink to fit.
        let c =
            Config::from_options(parse("width = 320\nheight = 240\nfps = 2\n").unwrap()).unwrap();
        let sub = c.sub.unwrap();
        assert_eq!((sub.width, sub.height, sub.fps), (320, 240, 2));
    }

    #[test]
    fn the_same_port_twice_is_refused() {
        let e = Config::from_options(parse("rtsp_port = 8080\n").unwrap()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "http_port = 8080: must differ from rtsp_port (or be 0: no HTTP)"
        );
        assert!(Config::from_options(parse("rtsp_port = 8080\nhttp_port = 0\n").unwrap()).is_ok());
    }

    #[test]
    fn a_bad_value_says_where_it_came_from() {
        let path =
            std::env::temp_dir().join(format!("camstream-origin-test-{}.toml", std::process::id()));
        std::fs::write(&path, "width = 1280\n\n[streams.sub]\nfps =  50\n").unwrap();
        let load = |flags: &[&str], fps: Option<u32>| {
            let cli = Options {
                config: Some(path.clone()),
                flags: flags.iter().map(|f| f.to_string()).collect(),
                fps,
                ..Options::default()
            };
            Config::load(cli).unwrap_err().to_string()
        };
        let in_file = load(&[], None);
        let by_flag = load(&["fps"], Some(500));
        let also_in_file = load(&["rtsp_port"], None);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            in_file,
            format!(
                "config {}:4:8: streams.sub.fps = 50: must be from 1 to the main stream's rate, 30",
                path.display()
            )
        );
        assert_eq!(by_flag, "--fps 500: must be from 1 to 120 (a flag)");
        assert!(
            also_in_file.contains(":4:8: streams.sub.fps"),
            "{also_in_file}"
        );
    }

    #[test]
    fn the_h264_stream() {
        // On by default: 2000 kbit/s, a key frame every two seconds.
        let c = Config::from_options(parse("fps = 15\n").unwrap()).unwrap();
        let want = H264Settings {
            bitrate: 2_000_000,
            gop: 30,
            encoder: Choice::Auto,
        };
        assert_eq!(c.h264, Some(want));
        let c = Config::from_options(parse("[streams.h264]\nbitrate = 500\ngop = 10\n").unwrap())
            .unwrap();
        assert_eq!(c.h264.map(|h| (h.bitrate, h.gop)), Some((500_000, 10)));
        let c = Config::from_options(parse("[streams.h264]\nenabled = false\n").unwrap()).unwrap();
        assert_eq!(c.h264, None);
        let e = Config::from_options(parse("[streams.h264]\nbitrate = 10\n").unwrap()).unwrap_err();
        assert!(
            e.to_string()
                .contains("streams.h264.bitrate = 10: must be from 64 to 100000"),
            "{e}"
        );
        let e = Config::from_options(parse("[streams.h264]\ngop = 0\n").unwrap()).unwrap_err();
        assert!(e.to_string().contains("streams.h264.gop = 0"), "{e}");
        assert!(parse("[streams.h264]\nprofile = \"high\"\n").is_err());
        let c =
            Config::from_options(parse("[streams.h264]\nencoder = \"/dev/video11\"\n").unwrap())
                .unwrap();
        assert_eq!(
            c.h264.map(|h| h.encoder),
            Some(Choice::Device("/dev/video11".into()))
        );
        let e = Config::from_options(parse("[streams.h264]\nencoder = \"gpu\"\n").unwrap())
            .unwrap_err();
        assert!(
            e.to_string().contains("streams.h264.encoder = \"gpu\""),
            "{e}"
        );
        // The main stream's JPEG of raw frames: its own key.
        let c = Config::from_options(parse("encoder = \"software\"\n").unwrap()).unwrap();
        assert_eq!(c.source.encoder, Choice::Software);
        let c = Config::from_options(parse("").unwrap()).unwrap();
        assert_eq!(c.source.encoder, Choice::Auto);
        let e = Config::from_options(parse("encoder = \"vpu\"\n").unwrap()).unwrap_err();
        assert!(
            e.to_string().contains("encoder = \"vpu\": use \"auto\""),
            "{e}"
        );
    }
}
