//! Settings: a TOML file (`/etc/camstream.toml` on the target) overridden by
//! command-line flags of the same names. One struct describes both, so
//! `--help`, the file format and the defaults cannot drift apart.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use camstream_rtp::packetize::{MAX_MTU, MIN_MTU};
use clap::Parser;
use serde::Deserialize;

use crate::source::controls::{ControlSetting, Value};
use crate::source::{self, SourceSpec};
use camstream_rtsp::auth::User;

/// Where the daemon looks for its settings when `--config` is not given.
pub const DEFAULT_CONFIG: &str = "/etc/camstream.toml";

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
    (buffers) => { 4 };
    (rtsp_port) => { 8554 };
    (http_port) => { 8080 };
    (mtu) => { 1400 };
    (max_clients) => { 32 };
    (client_queue) => { 3 };
    (session_timeout) => { 60 };
    (rtcp_interval) => { 5 };
    (max_request_size) => { 8192 };
    (max_connections_per_ip) => { 16 };
    (request_timeout) => { 10 };
    (idle_timeout) => { 60 };
    (basic_auth) => { false };
    (nonce_lifetime) => { 600 };
    (anonymous) => { false };
    (onvif) => { true };
    (path) => { "stream" };
    (log_level) => { "info" };
    (source) => { "testpattern" };
    (listen) => { "0.0.0.0" };
}

/// Every setting. In the file, keys are the flag names with `_` for `-`.
#[derive(Parser, Deserialize, Debug, Default, Clone)]
#[command(
    name = "camstream",
    version,
    about = "RTSP server for cameras: MJPEG as RFC 2435 RTP/JPEG to VLC, FFmpeg, GStreamer and NVRs",
    after_help = "Settings come from the config file, then from flags, then from built-in defaults.\n\
                  The file uses the flag names as keys, with '_' for '-', e.g. rtsp_port = 554.\n\
                  Sections of the file:\n  \
                  [users.NAME]   who may stream: the password's digests, as\n                 \
                  `camstream passwd NAME` prints them (and sets them with\n                 \
                  --config); with no user, only this machine's clients may\n                 \
                  stream, unless anonymous = true\n  \
                  [streams.sub]  the detection sub-stream (rtsp://CAMERA/sub, ONVIF's second\n                 \
                  profile): width, height, fps, quality, or enabled = false\n  \
                  [controls]     camera controls, NAME = VALUE (as --control)"
)]
#[serde(deny_unknown_fields)]
pub struct Options {
    #[command(subcommand)]
    #[serde(skip)]
    pub command: Option<Command>,

    /// Config file (TOML) [default: /etc/camstream.toml, if it exists]
    #[arg(long, value_name = "FILE", global = true)]
    #[serde(skip)]
    pub config: Option<PathBuf>,

    #[arg(long, value_name = "SOURCE", help = concat!("Frame source: auto (a libcamera camera, else the first V4L2 one), libcamera:auto, libcamera:ID, v4l2:/dev/videoN, v4l2:auto, testpattern, or file:PATH (a concatenated MJPEG stream, looped) [default: ", default!(source), "]"))]
    pub source: Option<String>,

    #[arg(long, help = concat!("Width in pixels, even (a camera gives the nearest size it has; frames are cropped to a multiple of 8) [default: ", default!(width), "]"))]
    pub width: Option<u32>,

    #[arg(long, help = concat!("Height in pixels, even (a camera gives the nearest size it has; frames are cropped to a multiple of 8) [default: ", default!(height), "]"))]
    pub height: Option<u32>,

    #[arg(long, help = concat!("Frames per second, 1-120 (a camera gives the nearest rate it has) [default: ", default!(fps), "]"))]
    pub fps: Option<u32>,

    #[arg(long, help = concat!("Quality of the JPEG camstream encodes (test pattern, raw camera formats, frames it must re-encode), 1-100 [default: ", default!(quality), "]"))]
    pub quality: Option<u32>,

    /// Camera pixel format, as `camstream probe` lists it: MJPG, JPEG, YU12, NV12, YUYV, UYVY, RGB3 or BGR3 [default: MJPEG if the camera has it at the size and rate, else the cheapest raw one]
    #[arg(long, value_name = "FOURCC")]
    pub format: Option<String>,

    #[arg(long, value_name = "COUNT", help = concat!("Camera buffers the driver fills while frames are sent, 2-32 [default: ", default!(buffers), "]"))]
    pub buffers: Option<u32>,

    /// Camera control, as `camstream probe` lists them, e.g. --control brightness=128 (repeatable; in the file: a [controls] table)
    #[arg(long = "control", value_name = "NAME=VALUE")]
    #[serde(default, deserialize_with = "controls_table")]
    pub controls: Option<Vec<ControlSetting>>,

    #[arg(long, value_name = "ADDRESS", help = concat!("Address to listen on [default: ", default!(listen), "]"))]
    pub listen: Option<IpAddr>,

    #[arg(long, value_name = "PORT", help = concat!("RTSP port [default: ", default!(rtsp_port), "]"))]
    pub rtsp_port: Option<u16>,

    #[arg(long, value_name = "PORT", help = concat!("HTTP port: snapshot, MJPEG stream, RTSP over HTTP, metrics and the status page; 0 turns HTTP off [default: ", default!(http_port), "]"))]
    pub http_port: Option<u16>,

    #[arg(long, value_name = "PORT", help = concat!("UDP port for RTP (even; RTCP uses the next one); 0 picks a free pair [default: ", default!(rtp_port), "]"))]
    pub rtp_port: Option<u16>,

    #[arg(long, help = concat!("Stream path: rtsp://HOST:PORT/PATH [default: ", default!(path), "]"))]
    pub path: Option<String>,

    #[arg(long, help = concat!("Largest RTP packet (header and payload) in bytes [default: ", default!(mtu), "]"))]
    pub mtu: Option<u32>,

    #[arg(long, help = concat!("Most RTSP sessions at once; more are refused with 453 [default: ", default!(max_clients), "]"))]
    pub max_clients: Option<u32>,

    #[arg(long, value_name = "FRAMES", help = concat!("Frames queued per client; a slower client loses whole frames [default: ", default!(client_queue), "]"))]
    pub client_queue: Option<u32>,

    #[arg(long, value_name = "SECONDS", help = concat!("Seconds without a request or RTCP before a session expires [default: ", default!(session_timeout), "]"))]
    pub session_timeout: Option<u32>,

    #[arg(long, value_name = "SECONDS", help = concat!("Seconds between RTCP sender reports [default: ", default!(rtcp_interval), "]"))]
    pub rtcp_interval: Option<u32>,

    #[arg(long, value_name = "BYTES", help = concat!("Largest RTSP request in bytes; larger ones get 400 [default: ", default!(max_request_size), "]"))]
    pub max_request_size: Option<u32>,

    #[arg(long, value_name = "COUNT", help = concat!("Connections at once from one address; more are answered 503 and closed [default: ", default!(max_connections_per_ip), "]"))]
    pub max_connections_per_ip: Option<u32>,

    #[arg(long, value_name = "SECONDS", help = concat!("Seconds a request may take to arrive once it has begun; slower ones get 408 and the connection closes [default: ", default!(request_timeout), "]"))]
    pub request_timeout: Option<u32>,

    #[arg(long, value_name = "SECONDS", help = concat!("Seconds a connection without a session may stay silent before it is closed [default: ", default!(idle_timeout), "]"))]
    pub idle_timeout: Option<u32>,

    /// Started as root: become this user once the ports are bound and the camera is open (its groups, e.g. video, give access to the camera) [default: none: stay as started]
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,

    #[arg(long, value_name = "LEVEL", help = concat!("Log level: error, warn, info, debug or trace [default: ", default!(log_level), "]"))]
    pub log_level: Option<String>,

    /// Users allowed to stream, in the file only: `[users.NAME]` tables with
    /// `md5` and `sha256`, the lines `camstream passwd NAME` prints. With none,
    /// only this machine's clients may stream, unless `anonymous`.
    #[arg(skip)]
    pub users: Option<std::collections::BTreeMap<String, UserHashes>>,

    #[arg(long, value_name = "BOOL", help = concat!("Also take Basic authentication (the password crosses the network in the clear; for clients without Digest) [default: ", default!(basic_auth), "]"))]
    pub basic_auth: Option<bool>,

    #[arg(long, value_name = "SECONDS", help = concat!("Seconds a Digest nonce stays valid; after that clients are asked to retry with a new one (stale=true) [default: ", default!(nonce_lifetime), "]"))]
    pub nonce_lifetime: Option<u32>,

    #[arg(long, value_name = "BOOL", help = concat!("Without users, let clients on other machines stream without a password too (a network you trust) [default: ", default!(anonymous), ": without users, only this machine's clients (127.0.0.1, ::1)]"))]
    pub anonymous: Option<bool>,

    #[arg(long, value_name = "BOOL", help = concat!("ONVIF: device and media services on the HTTP port and WS-Discovery on UDP 3702, for NVRs to find and add the camera [default: ", default!(onvif), "]"))]
    pub onvif: Option<bool>,

    /// Streams besides the main one, in the file only: `[streams.sub]`, the
    /// detection sub-stream (rtsp://CAMERA/sub, ONVIF's second profile).
    #[arg(skip)]
    pub streams: Option<StreamsOptions>,
}

#[derive(Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StreamsOptions {
    pub sub: Option<SubOptions>,
}

/// `[streams.sub]`: its size, rate and quality, or `enabled = false`.
#[derive(Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SubOptions {
    pub enabled: Option<bool>,
    pub width: Option<u16>,
    pub height: Option<u16>,
    pub fps: Option<u32>,
    pub quality: Option<u8>,
}

/// The detection sub-stream's settings (it is made from the main stream's
/// frames).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubSettings {
    pub width: u16,
    pub height: u16,
    pub fps: u32,
    pub quality: u8,
}

/// A user's password digests, H(name:camstream:password), lower-case hex;
/// and, for a user who uses ONVIF, the password itself (ONVIF's
/// UsernameToken digest cannot be checked from a stored digest).
#[derive(Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UserHashes {
    pub md5: String,
    pub sha256: String,
    pub onvif_password: Option<String>,
}

/// Commands besides serving.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum Command {
    /// List libcamera's cameras (sensor modes, streams, controls), then V4L2
    /// devices with their formats, sizes, frame rates and controls
    Probe {
        /// Only this device, e.g. /dev/video0
        device: Option<PathBuf>,
    },
    /// Read a password from standard input and print the config lines that
    /// let user NAME stream with it (its digests; the password is not kept);
    /// with --config, set them in that file instead
    Passwd {
        /// User name (no ':' or '"')
        name: String,
        /// Also keep the password itself, for ONVIF clients (their
        /// UsernameToken digest needs it); without this, any kept for the
        /// user is removed
        #[arg(long)]
        onvif: bool,
    },
    /// Receive one frame from an RTSP server (RTP over TCP) and decode it;
    /// exit status 0 if that works within the timeout
    Check {
        /// Stream to check (rtsp://USER:PASSWORD@HOST:PORT/PATH if it asks for one) [default: this device's, from the config: rtsp://127.0.0.1:RTSP_PORT/PATH, answering a password request with a configured user's stored digests]
        url: Option<String>,
        /// Give up after this many seconds
        #[arg(long, default_value_t = 30)]
        timeout: u64,
    },
}

/// `[controls]` in the file: `brightness = 128`, `auto_exposure = "Manual Mode"`.
fn controls_table<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<ControlSetting>>, D::Error> {
    let table: std::collections::BTreeMap<String, Value> = Deserialize::deserialize(d)?;
    Ok(Some(
        table
            .into_iter()
            .map(|(name, value)| ControlSetting { name, value })
            .collect(),
    ))
}

impl Options {
    /// Fills every field not set here from `other`. Controls add up: the
    /// file's first, then the flags', so a flag wins over the file.
    fn or(self, other: Options) -> Options {
        let controls = match (other.controls, self.controls) {
            (Some(mut a), Some(b)) => {
                a.extend(b);
                Some(a)
            }
            (a, b) => b.or(a),
        };
        Options {
            command: self.command.or(other.command),
            controls,
            buffers: self.buffers.or(other.buffers),
            format: self.format.or(other.format),
            config: self.config.or(other.config),
            source: self.source.or(other.source),
            width: self.width.or(other.width),
            height: self.height.or(other.height),
            fps: self.fps.or(other.fps),
            quality: self.quality.or(other.quality),
            listen: self.listen.or(other.listen),
            rtsp_port: self.rtsp_port.or(other.rtsp_port),
            http_port: self.http_port.or(other.http_port),
            rtp_port: self.rtp_port.or(other.rtp_port),
            path: self.path.or(other.path),
            mtu: self.mtu.or(other.mtu),
            max_clients: self.max_clients.or(other.max_clients),
            client_queue: self.client_queue.or(other.client_queue),
            session_timeout: self.session_timeout.or(other.session_timeout),
            rtcp_interval: self.rtcp_interval.or(other.rtcp_interval),
            max_request_size: self.max_request_size.or(other.max_request_size),
            max_connections_per_ip: self.max_connections_per_ip.or(other.max_connections_per_ip),
            request_timeout: self.request_timeout.or(other.request_timeout),
            idle_timeout: self.idle_timeout.or(other.idle_timeout),
            user: self.user.or(other.user),
            log_level: self.log_level.or(other.log_level),
            users: self.users.or(other.users),
            basic_auth: self.basic_auth.or(other.basic_auth),
            nonce_lifetime: self.nonce_lifetime.or(other.nonce_lifetime),
            anonymous: self.anonymous.or(other.anonymous),
            onvif: self.onvif.or(other.onvif),
            streams: self.streams.or(other.streams),
        }
    }
}

/// The validated settings the daemon runs with.
#[derive(Debug, Clone)]
pub struct Config {
    pub source: SourceSpec,
    pub width: u16,
    pub height: u16,
    pub fps: u32,
    pub quality: u8,
    pub buffers: u32,
    /// A pixel format the camera must use (fourcc), if the user chose one.
    pub format: Option<u32>,
    pub controls: Vec<ControlSetting>,
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
    pub request_timeout: u32,
    pub idle_timeout: u32,
    pub user: Option<String>,
    pub log_level: log::LevelFilter,
    /// Who may stream; empty: this machine's clients, or anyone if
    /// `anonymous`.
    pub users: Vec<User>,
    pub basic_auth: bool,
    pub nonce_lifetime: u32,
    pub anonymous: bool,
    pub onvif: bool,
    /// None: `[streams.sub]` says enabled = false.
    pub sub: Option<SubSettings>,
    /// The users given a password for ONVIF (`camstream passwd --onvif`):
    /// name, password.
    pub onvif_passwords: Vec<(String, String)>,
}

/// The realm users' digests are made with (part of every stored digest, so
/// fixed: changing it would lock every user out).
pub const REALM: &str = "camstream";

/// A user name the config and the Authorization header can carry.
pub fn valid_user_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.contains([':', '"', '\\'])
        && !name.chars().any(char::is_control)
}

fn users(table: Option<std::collections::BTreeMap<String, UserHashes>>) -> Result<Vec<User>> {
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    table
        .unwrap_or_default()
        .into_iter()
        .map(|(name, h)| {
            if !valid_user_name(&name) {
                bail!("users.{name:?}: a user name has 1-64 characters, none of them ':', '\"', '\\' or control");
            }
            if !hex(&h.md5, 32) || !hex(&h.sha256, 64) {
                bail!("users.{name}: md5 must be 32 and sha256 64 hex digits (as `camstream passwd {name}` prints them)");
            }
            if h.onvif_password.as_deref().is_some_and(str::is_empty) {
                bail!("users.{name}: onvif_password is empty (set it with `camstream passwd {name} --onvif`)");
            }
            Ok(User { name, md5: h.md5.to_ascii_lowercase(), sha256: h.sha256.to_ascii_lowercase() })
        })
        .collect()
}

fn sub_settings(o: SubOptions, main_fps: u32) -> Result<Option<SubSettings>> {
    if o.enabled == Some(false) {
        return Ok(None);
    }
    let width = in_range("streams.sub.width", o.width.unwrap_or(640), 16, 8192)?;
    let height = in_range("streams.sub.height", o.height.unwrap_or(360), 16, 8192)?;
    if width % 2 != 0 || height % 2 != 0 {
        bail!("streams.sub: width and height must be even (got {width}x{height})");
    }
    // At most the main stream's rate: its frames are what it is made of.
    let fps = in_range("streams.sub.fps", o.fps.unwrap_or(5).min(main_fps), 1, 120)?;
    let quality = in_range("streams.sub.quality", o.quality.unwrap_or(70), 1, 100)?;
    Ok(Some(SubSettings {
        width,
        height,
        fps,
        quality,
    }))
}

fn in_range<T: PartialOrd + std::fmt::Display + Copy>(name: &str, v: T, lo: T, hi: T) -> Result<T> {
    if v < lo || v > hi {
        bail!("{name} = {v} is out of range ({lo}..={hi})");
    }
    Ok(v)
}

impl Config {
    /// Reads the config file (the one named by `--config`, else the default
    /// one if present) and applies the flags over it.
    pub fn load(cli: Options) -> Result<Config> {
        let file = match &cli.config {
            Some(path) => Some(read_file(path)?),
            None if Path::new(DEFAULT_CONFIG).exists() => {
                Some(read_file(Path::new(DEFAULT_CONFIG))?)
            }
            None => None,
        };
        let opts = match file {
            Some(file) => cli.or(file),
            None => cli,
        };
        Config::from_options(opts)
    }

    /// What the source is opened with.
    pub fn source_settings(&self) -> source::Settings {
        source::Settings {
            width: self.width,
            height: self.height,
            fps: self.fps,
            quality: self.quality,
            buffers: self.buffers,
            format: self.format,
            controls: self.controls.clone(),
        }
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
        if width % 2 != 0 || height % 2 != 0 {
            bail!("width and height must be even (got {width}x{height})");
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
            bail!("path = {path:?}: use letters, digits, '-', '_', '.' and '/' between names");
        }
        let rtp_port = o.rtp_port.unwrap_or(default!(rtp_port));
        if rtp_port % 2 != 0 || rtp_port == u16::MAX - 1 {
            bail!("rtp_port = {rtp_port}: must be even (RTCP uses the next port), or 0");
        }
        let level = o.log_level.unwrap_or_else(|| default!(log_level).into());
        let log_level = level
            .parse()
            .ok()
            .filter(|l| *l != log::LevelFilter::Off)
            .with_context(|| {
                format!("log_level = {level:?}: use error, warn, info, debug or trace")
            })?;
        let fps = ranged!(fps, 1, 120)?;
        Ok(Config {
            source: SourceSpec::parse(o.source.as_deref().unwrap_or(default!(source)))?,
            width: width as u16,
            height: height as u16,
            fps,
            quality: ranged!(quality, 1, 100)? as u8,
            buffers: ranged!(buffers, 2, 32)?,
            format: o
                .format
                .as_deref()
                .map(source::v4l2::parse_format)
                .transpose()?,
            controls: o.controls.unwrap_or_default(),
            listen: o
                .listen
                .unwrap_or(default!(listen).parse().expect("an address")),
            rtsp_port: o.rtsp_port.unwrap_or(default!(rtsp_port)),
            http_port: o.http_port.unwrap_or(default!(http_port)),
            rtp_port,
            path,
            mtu: ranged!(mtu, MIN_MTU as u32, MAX_MTU as u32)? as usize,
            max_clients: ranged!(max_clients, 1, 100_000)? as usize,
            client_queue: ranged!(client_queue, 1, 64)? as usize,
            session_timeout: ranged!(session_timeout, 5, 3600)?,
            rtcp_interval: ranged!(rtcp_interval, 1, 60)?,
            max_request_size: ranged!(max_request_size, 1024, 1 << 20)? as usize,
            max_connections_per_ip: ranged!(max_connections_per_ip, 1, 100_000)? as usize,
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
            users: {
                let u = users(o.users)?;
                if u.is_empty() && o.basic_auth == Some(true) {
                    bail!("basic_auth = true needs users (see `camstream passwd`)");
                }
                u
            },
            basic_auth: o.basic_auth.unwrap_or(default!(basic_auth)),
            nonce_lifetime: ranged!(nonce_lifetime, 30, 86_400)?,
            anonymous: o.anonymous.unwrap_or(default!(anonymous)),
            onvif: o.onvif.unwrap_or(default!(onvif)),
            sub: sub_settings(
                o.streams.clone().and_then(|s| s.sub).unwrap_or_default(),
                fps,
            )?,
        })
    }
}

fn read_file(path: &Path) -> Result<Options> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    parse_file(path, &text)
}

/// A config file's settings. An error is one line: file, line and column,
/// the key it is about (unless the message names it already), and what is
/// wrong there.
fn parse_file(path: &Path, text: &str) -> Result<Options> {
    toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        let line = text[..at].matches('\n').count() + 1;
        let column = at - text[..at].rfind('\n').map_or(0, |i| i + 1) + 1;
        let key = e
            .span()
            .and_then(|s| key_at(text, s))
            .filter(|k| !e.message().contains(&format!("`{k}`")))
            .map_or(String::new(), |k| format!("{k}: "));
        anyhow::anyhow!(
            "config {}:{line}:{column}: {key}{}",
            path.display(),
            e.message()
        )
    })
}

/// The dotted name of the key that a span of a config's text (a TOML
/// error's) is about: the innermost key whose name or value holds it.
fn key_at(text: &str, span: std::ops::Range<usize>) -> Option<String> {
    use toml::de::{DeTable, DeValue};
    fn find(table: &DeTable, at: &std::ops::Range<usize>) -> Option<Vec<String>> {
        let holds = |s: std::ops::Range<usize>| s.start <= at.start && at.end <= s.end;
        for (k, v) in table {
            let name = k.get_ref().to_string();
            // A table's own span is its header only: look inside each.
            if let DeValue::Table(t) = v.get_ref() {
                if let Some(mut inner) = find(t, at) {
                    inner.insert(0, name);
                    return Some(inner);
                }
            }
            if holds(k.span()) || holds(v.span()) {
                return Some(vec![name]);
            }
        }
        None
    }
    let dotted = |path: Vec<String>| {
        let bare = |k: &str| {
            !k.is_empty()
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        let keys: Vec<String> = path
            .into_iter()
            .map(|k| if bare(&k) { k } else { format!("{k:?}") })
            .collect();
        keys.join(".")
    };
    // A key: renamed, the parse keeps it where it was given (the first of
    // a key given twice is all it keeps otherwise).
    const STAND_IN: &str = "camstream-key-at-fault";
    let written = text.get(span.clone())?;
    let key_like = written
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        || (written.len() >= 2
            && (written.starts_with('"') && written.ends_with('"')
                || written.starts_with('\'') && written.ends_with('\''))
            && !written.contains('\n'));
    if key_like {
        let renamed = format!("{}{STAND_IN}{}", &text[..span.start], &text[span.end..]);
        let at = span.start..span.start + STAND_IN.len();
        if let Some(mut path) = find(DeTable::parse_recoverable(&renamed).0.get_ref(), &at) {
            if let Some(last) = path.last_mut().filter(|k| *k == STAND_IN) {
                *last = written.trim_matches(['"', '\'']).to_string();
                return Some(dotted(path));
            }
        }
    }
    // A value, or a table's header.
    find(DeTable::parse_recoverable(text).0.get_ref(), &span).map(dotted)
}

/// A config file's text with `user`'s table set (added, or replacing the one
/// there); comments and every other line stay as written.
pub fn with_user(text: &str, user: &User, onvif_password: Option<&str>) -> Result<String> {
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    let empty = text.trim().is_empty();
    let users = doc.entry("users").or_insert_with(|| {
        let mut t = toml_edit::Table::new();
        // [users.NAME] headers only, no bare [users].
        t.set_implicit(true);
        toml_edit::Item::Table(t)
    });
    let Some(users) = users.as_table_like_mut() else {
        bail!("users is not a table of [users.NAME] tables");
    };
    if let Some(t) = users
        .get_mut(&user.name)
        .and_then(|t| t.as_table_like_mut())
    {
        // Where it is, with its comments.
        t.insert("md5", toml_edit::value(&user.md5));
        t.insert("sha256", toml_edit::value(&user.sha256));
        // A password kept for ONVIF is the old one's: replaced or dropped.
        match onvif_password {
            Some(p) => {
                t.insert("onvif_password", toml_edit::value(p));
            }
            None => {
                t.remove("onvif_password");
            }
        }
    } else {
        let mut t = toml_edit::Table::new();
        t["md5"] = toml_edit::value(&user.md5);
        t["sha256"] = toml_edit::value(&user.sha256);
        if let Some(p) = onvif_password {
            t["onvif_password"] = toml_edit::value(p);
        }
        // A new table goes last, after the comments that end the file (the
        // commented defaults): a setting uncommented there later must not
        // land inside it.
        let mut end = doc.trailing().as_str().unwrap_or("").trim_end().to_string();
        if !end.is_empty() {
            end.push_str("\n\n");
        } else if !empty {
            end.push('\n');
        }
        t.decor_mut().set_prefix(end);
        doc.set_trailing("");
        let users = doc["users"].as_table_like_mut().expect("checked above");
        users.insert(&user.name, toml_edit::Item::Table(t));
    }
    let mut out = doc.to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    // What is written must load: a daemon that cannot start shows nothing.
    let opts: Options = toml::from_str(&out).map_err(|e| anyhow::anyhow!("{e}"))?;
    Config::from_options(opts)?;
    Ok(out)
}

/// Sets `user` in the config file at `path` (created if missing): written
/// beside it with the old file's owner and mode, synced, then renamed over
/// it, so a power cut leaves the old file or the new one. A file that holds
/// a password kept for ONVIF is its owner's alone (at most 0600), whatever
/// the old one's mode.
pub fn set_user(path: &Path, user: &User, onvif_password: Option<&str>) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot read config {}", path.display())),
    };
    // Its mistakes as the daemon would say them (the file's line, the key).
    parse_file(path, &text)?;
    let out = with_user(&text, user, onvif_password)
        .with_context(|| format!("config {}", path.display()))?;
    // This user's or another's (with_user checked that it parses).
    let holds_password = toml::from_str::<Options>(&out)
        .ok()
        .and_then(|o| o.users)
        .is_some_and(|u| u.values().any(|h| h.onvif_password.is_some()));
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    let write = || -> std::io::Result<()> {
        // A leftover of an interrupted run may be anyone's to read: a new
        // file (0600 until the mode below is set), never that one.
        match std::fs::remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        if let Ok(old) = std::fs::metadata(path) {
            std::os::unix::fs::fchown(&f, Some(old.uid()), Some(old.gid()))?;
            let mode = old.mode() & if holds_password { 0o600 } else { 0o7777 };
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.write_all(out.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        std::fs::File::open(dir.unwrap_or(Path::new(".")))?.sync_all()
    };
    write().with_context(|| format!("cannot write config {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<Options> {
        toml::from_str(toml_text).map_err(|e| anyhow::anyhow!("{e}"))
    }

    #[test]
    fn defaults() {
        let c = Config::from_options(Options::default()).unwrap();
        assert_eq!(
            (c.width, c.height, c.fps, c.rtsp_port, c.mtu),
            (1280, 720, 30, 8554, 1400)
        );
        assert_eq!(c.path, "stream");
        assert!(matches!(c.source, SourceSpec::TestPattern));
    }

    #[test]
    fn flags_override_the_file() {
        let file = parse("rtsp_port = 554\nfps = 15\nsource = \"file:/a.mjpeg\"").unwrap();
        let cli = Options::try_parse_from(["camstream", "--fps", "25"]).unwrap();
        let c = Config::from_options(cli.or(file)).unwrap();
        assert_eq!((c.rtsp_port, c.fps), (554, 25));
        assert!(matches!(c.source, SourceSpec::File(ref p) if p == Path::new("/a.mjpeg")));
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
            c.source,
            SourceSpec::V4l2(crate::source::v4l2::DeviceSpec::Auto)
        ));
        let got: Vec<(&str, &Value)> = c
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
        assert_eq!(c.buffers, 4);
        assert_eq!(c.format, None);
        let c = Config::from_options(parse("format = \"YUYV\"").unwrap()).unwrap();
        assert_eq!(c.format, Some(u32::from_le_bytes(*b"YUYV")));
        assert!(Config::from_options(parse("format = \"H264\"").unwrap()).is_err());
        assert!(Config::from_options(parse("buffers = 1").unwrap()).is_err());
        let o = parse("source = \"v4l2:/dev/video2\"").unwrap();
        let c = Config::from_options(o).unwrap();
        assert!(
            matches!(c.source, SourceSpec::V4l2(crate::source::v4l2::DeviceSpec::Path(ref p)) if p == Path::new("/dev/video2"))
        );
        assert!(Config::from_options(parse("source = \"v4l2:\"").unwrap()).is_err());
    }

    #[test]
    fn users_from_the_file() {
        let u = camstream_rtsp::auth::User::from_password("admin", REALM, "pw");
        let text = format!(
            "[users.\"admin\"]\nmd5 = \"{}\"\nsha256 = \"{}\"\n",
            u.md5,
            u.sha256.to_uppercase()
        );
        let c = Config::from_options(parse(&text).unwrap()).unwrap();
        assert_eq!(c.users, vec![u.clone()]);
        assert!(!c.basic_auth);
        let short = format!("[users.admin]\nmd5 = \"{}\"\nsha256 = \"abc\"\n", u.md5);
        let e = Config::from_options(parse(&short).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("sha256 64 hex digits"), "{e}");
        let colon = format!(
            "[users.\"a:b\"]\nmd5 = \"{}\"\nsha256 = \"{}\"\n",
            u.md5, u.sha256
        );
        assert!(Config::from_options(parse(&colon).unwrap()).is_err());
        let e = Config::from_options(parse("basic_auth = true").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs users"), "{e}");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        let e = parse("rtsp_prot = 1").unwrap_err().to_string();
        let dir =
            std::env::temp_dir().join(format!("camstream-config-test-{}", std::process::id()));
        std::fs::write(&dir, "fps = 10\nrtsp_prot = 1\n").unwrap();
        let one_line = read_file(&dir).unwrap_err().to_string();
        std::fs::remove_file(&dir).unwrap();
        assert!(one_line.ends_with(":2:1: unknown field `rtsp_prot`, expected one of `source`, `width`, `height`, `fps`, `quality`, `format`, `buffers`, `controls`, `listen`, `rtsp_port`, `http_port`, `rtp_port`, `path`, `mtu`, `max_clients`, `client_queue`, `session_timeout`, `rtcp_interval`, `max_request_size`, `max_connections_per_ip`, `request_timeout`, `idle_timeout`, `user`, `log_level`, `users`, `basic_auth`, `nonce_lifetime`, `anonymous`, `onvif`, `streams`"), "{one_line}");
        assert!(!one_line.contains('\n'));
        assert!(e.contains("unknown field `rtsp_prot`"), "{e}");
        let e = parse("fps = \"fast\"").unwrap_err().to_string();
        assert!(e.contains("invalid type"), "{e}");
        let o = parse("fps = 500").unwrap();
        let e = Config::from_options(o).unwrap_err().to_string();
        assert!(e.contains("fps = 500 is out of range"), "{e}");
        let o = parse("rtp_port = 5001").unwrap();
        assert!(Config::from_options(o).is_err());
        let o = parse("path = \"../x\"").unwrap();
        assert!(Config::from_options(o).is_err());
        let o = parse("source = \"webcam\"").unwrap();
        assert!(Config::from_options(o).is_err());
    }

    #[test]
    fn file_errors_name_the_key() {
        let error = |text: &str| {
            parse_file(Path::new("c.toml"), text)
                .unwrap_err()
                .to_string()
        };
        for (text, want) in [
            (
                "fps = -1",
                "c.toml:1:7: fps: invalid value: integer `-1`, expected u32",
            ),
            ("fps = 1\nfps = 2", "c.toml:2:1: fps: duplicate key"),
            (
                "[controls]\nbrightness = 1\nbrightness = 2",
                "c.toml:3:1: controls.brightness: duplicate key",
            ),
            (
                "[users.\"bob smith\"]\nmd5 = 1",
                "c.toml:2:7: users.\"bob smith\".md5: invalid type: integer `1`, expected a string",
            ),
            (
                "users = { a = { md5 = \"1\" }, a = { md5 = \"2\" } }",
                "c.toml:1:30: users.a: duplicate key",
            ),
            (
                "[users.a]\nmd5 = \"1\"\n[users.a]",
                "c.toml:3:8: users.a: duplicate key",
            ),
            (
                "streams = { sub = { fps = 1, fps = 2 } }",
                "c.toml:1:30: streams.sub.fps: duplicate key",
            ),
            // Named by the message already.
            (
                "rtsp_prot = 1",
                "c.toml:1:1: unknown field `rtsp_prot`, expected one of",
            ),
        ] {
            let e = error(text);
            assert!(e.starts_with(&format!("config {want}")), "{text:?}: {e}");
        }
    }

    #[test]
    fn passwd_sets_a_user_and_keeps_the_rest() {
        let alice = User::from_password("alice", REALM, "one");
        let text = "# a comment\nfps = 15 # why 15\n\n[controls]\nbrightness = 100\n";
        let out = with_user(text, &alice, None).unwrap();
        assert!(out.starts_with(text), "{out}");
        let c = Config::from_options(parse(&out).unwrap()).unwrap();
        assert_eq!((c.fps, c.users.clone()), (15, vec![alice.clone()]));
        assert_eq!(c.controls.len(), 1);
        // Again with another password and a name TOML must quote: one table
        // per user, the new digests.
        let alice2 = User::from_password("alice", REALM, "two");
        let bob = User::from_password("bob smith", REALM, "three");
        let out = with_user(&with_user(&out, &alice2, None).unwrap(), &bob, None).unwrap();
        assert_eq!(out.matches("[users.").count(), 2, "{out}");
        assert!(out.contains("[users.\"bob smith\"]"), "{out}");
        let c = Config::from_options(parse(&out).unwrap()).unwrap();
        assert_eq!(c.users, vec![alice2.clone(), bob.clone()]);
        assert!(!out.contains("one") && !out.contains("two"));
        // After the comments that end a file, where uncommenting a default
        // must not put it inside the user's table.
        let out = with_user("fps = 15\n# defaults\n#fps = 30\n", &alice, None).unwrap();
        assert!(
            out.starts_with("fps = 15\n# defaults\n#fps = 30\n\n[users.alice]\n"),
            "{out}"
        );
        // Users written as inline tables: updated and added in that form.
        let inline = format!(
            "users = {{ alice = {{ md5 = \"{}\", sha256 = \"{}\" }} }}\n",
            alice.md5, alice.sha256
        );
        let out = with_user(&with_user(&inline, &bob, None).unwrap(), &alice2, None).unwrap();
        let c = Config::from_options(parse(&out).unwrap()).unwrap();
        assert_eq!(c.users, vec![alice2.clone(), bob.clone()], "{out}");
        // From nothing; and a file that is not a config is left alone.
        assert!(
            with_user("", &alice, None)
                .unwrap()
                .starts_with("[users.alice]\n")
        );
        assert!(with_user("users = 3\n", &alice, None).is_err());
        assert!(with_user("fps = 1000\n", &alice, None).is_err());
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
                quality: 70
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
        assert!(parse("[streams.main]\nwidth = 1\n").is_err());
    }

    #[test]
    fn passwd_keeps_the_password_for_onvif_only_when_asked() {
        let alice = User::from_password("alice", REALM, "one");
        let out = with_user("", &alice, Some("one")).unwrap();
        let c = Config::from_options(parse(&out).unwrap()).unwrap();
        assert!(c.onvif);
        assert_eq!(
            c.onvif_passwords,
            vec![("alice".to_owned(), "one".to_owned())]
        );
        assert_eq!(c.users, vec![alice]);
        // A new password without --onvif: the old one is not kept.
        let alice2 = User::from_password("alice", REALM, "two");
        let out = with_user(&out, &alice2, None).unwrap();
        assert!(!out.contains("onvif_password"), "{out}");
        let c = Config::from_options(parse(&out).unwrap()).unwrap();
        assert!(c.onvif_passwords.is_empty());
        let out = with_user(&out, &alice2, Some("two")).unwrap();
        let c = Config::from_options(parse(&format!("onvif = false\n{out}")).unwrap()).unwrap();
        assert_eq!((c.onvif, c.onvif_passwords.len()), (false, 1));
        let empty = out.replace("onvif_password = \"two\"", "onvif_password = \"\"");
        let e = Config::from_options(parse(&empty).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("onvif_password is empty"), "{e}");
    }
}
