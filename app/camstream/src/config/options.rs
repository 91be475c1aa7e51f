//! The settings as given: the flags and the config file's keys, one struct
//! for both ([`Options`]), not yet checked; and the commands besides
//! serving.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use camstream_onvif::access::UserLevel;
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser};
use serde::Deserialize;

use crate::source::controls::{ControlSetting, Value};

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
                  --config), or password_hash (a yescrypt hash, as Raspberry\n                 \
                  Pi Imager gives it: checked at the first sign-in over HTTP,\n                 \
                  then the digests are learnt), and user_level: \"user\"\n                 \
                  (watches), \"operator\" (also changes the encoders over\n                 \
                  ONVIF) or \"administrator\" (the default); with no user,\n                 \
                  only this machine's clients may stream, unless\n                 \
                  anonymous = true\n  \
                  [streams.sub]  the detection sub-stream (rtsp://CAMERA/sub, ONVIF's second\n                 \
                  profile): width, height, fps, codec (\"jpeg\" with quality, or\n                 \
                  \"h264\" with bitrate, gop, encoder as below), or\n                 \
                  enabled = false\n  \
                  [streams.h264] the main stream in H.264 (rtsp://CAMERA/h264), encoded\n                 \
                  while someone watches: bitrate (kbit/s), gop (frames between\n                 \
                  key frames), encoder (\"auto\": the kernel's hardware encoder\n                 \
                  if there is one, else \"software\"; or a device), or\n                 \
                  enabled = false\n  \
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

    /// The settings given as flags (by key), so that an error about one
    /// can say it came from a flag rather than the file.
    #[arg(skip)]
    #[serde(skip)]
    pub flags: Vec<String>,

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

    /// Encoder of the JPEG camstream makes of raw camera frames: auto (the kernel's hardware JPEG encoder if there is one, as on the Pi 3, 4 and Zero 2 W; else software), software (libjpeg-turbo) or a device such as /dev/video31 (`camstream encoders` lists them) [default: auto]
    #[arg(long, value_name = "ENCODER")]
    pub encoder: Option<String>,

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

    #[arg(long, value_name = "COUNT", help = concat!("Connections at once that authenticated as one user, both ports; past it the user's idle ones (no session, no stream) are answered 503 and closed [default: ", default!(max_connections_per_user), "]"))]
    pub max_connections_per_user: Option<u32>,

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
    /// `md5` and `sha256`, the lines `camstream passwd NAME` prints, and
    /// `user_level`. With none, only this machine's clients may stream,
    /// unless `anonymous`.
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

    #[arg(long, value_name = "BOOL", help = concat!("WebRTC: the H.264 stream to browsers and players that ask with WHEP (POST to /whep/h264 on the HTTP port) [default: ", default!(webrtc), "]"))]
    pub webrtc: Option<bool>,

    #[arg(long, value_name = "PORT", help = concat!("Port WebRTC's media uses, UDP and TCP (where UDP does not pass); 0 picks a free one (set one to forward it through a NAT) [default: ", default!(webrtc_port), "]"))]
    pub webrtc_port: Option<u16>,

    /// An address (ADDRESS:PORT) WebRTC offers besides the camera's own, for browsers that reach it through a NAT or port forwarding (repeatable; in the file: a list)
    #[arg(long = "webrtc-candidate", value_name = "ADDRESS:PORT")]
    pub webrtc_candidates: Option<Vec<SocketAddr>>,

    /// Streams besides the main one, in the file only: `[streams.sub]`, the
    /// detection sub-stream (rtsp://CAMERA/sub, ONVIF's second profile).
    #[arg(skip)]
    pub streams: Option<StreamsOptions>,

    /// Motion detection, in the file only: `[motion]`.
    #[arg(skip)]
    pub motion: Option<MotionOptions>,

    /// MQTT (Home Assistant's discovery), in the file only: `[mqtt]`.
    #[arg(skip)]
    pub mqtt: Option<MqttOptions>,

    /// Sound, in the file only: `[audio]`.
    #[arg(skip)]
    pub audio: Option<AudioOptions>,
}

/// `[audio]`: where sound comes from, and what RTSP clients get of it.
#[derive(Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AudioOptions {
    /// "none" (the default), "auto" (a USB sound card first), an ALSA
    /// capture device's name, or "test": a tone each second.
    pub device: Option<String>,
    /// "pcmu" (the default), "opus" or "aac".
    pub codec: Option<String>,
    /// Opus's or AAC's bit rate in kbit/s.
    pub bitrate: Option<u32>,
}

/// `[mqtt]`: the broker motion is published to, and as whom.
#[derive(Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MqttOptions {
    pub enabled: Option<bool>,
    /// HOST or HOST:PORT (1883 by default).
    pub broker: Option<String>,
    pub user: Option<String>,
    pub password: Option<String>,
    /// The camera's topics start with this (`camstream/HOSTNAME`).
    pub topic: Option<String>,
    pub discovery_prefix: Option<String>,
}

/// `[motion]`: whether the camera looks for motion, how sensitively, for
/// how long, and where not (`ignore`: `[x, y, width, height]` lists in
/// fractions of the picture).
#[derive(Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MotionOptions {
    pub enabled: Option<bool>,
    pub sensitivity: Option<u8>,
    pub min_area: Option<f32>,
    pub min_duration: Option<f32>,
    pub hold: Option<f32>,
    pub fps: Option<u32>,
    pub ignore: Option<Vec<Vec<f32>>>,
}

#[derive(Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StreamsOptions {
    pub sub: Option<SubOptions>,
    pub h264: Option<H264Options>,
}

/// `[streams.h264]`: the H.264 stream's bit rate (kbit/s) and key frame
/// interval (frames), or `enabled = false`.
#[derive(Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct H264Options {
    pub enabled: Option<bool>,
    pub bitrate: Option<u32>,
    pub gop: Option<u32>,
    pub encoder: Option<String>,
}

/// `[streams.sub]`: its size, rate and codec ("jpeg" with a quality, or
/// "h264" with the keys of `[streams.h264]`), or `enabled = false`.
#[derive(Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SubOptions {
    pub enabled: Option<bool>,
    pub width: Option<u16>,
    pub height: Option<u16>,
    pub fps: Option<u32>,
    pub codec: Option<String>,
    pub quality: Option<u8>,
    /// With codec = "h264", as `[streams.h264]`'s.
    pub bitrate: Option<u32>,
    pub gop: Option<u32>,
    pub encoder: Option<String>,
}

/// A user's password digests, H(name:camstream:password), lower-case hex,
/// or a crypt(3) password hash instead (Raspberry Pi Imager's: the digests
/// are learnt at the first sign-in); and, for a user who uses ONVIF, the
/// password itself (ONVIF's UsernameToken digest cannot be checked from a
/// stored digest); and what the user may do (ONVIF's user level; none:
/// administrator).
#[derive(Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(try_from = "UserTable")]
pub struct UserHashes {
    pub md5: Option<String>,
    pub sha256: Option<String>,
    pub password_hash: Option<String>,
    pub onvif_password: Option<String>,
    pub user_level: Option<UserLevel>,
}

/// A `[users.NAME]` table as written; [`UserHashes`] once it names one
/// form of the password (its mistakes said at the table's line).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UserTable {
    md5: Option<String>,
    sha256: Option<String>,
    password_hash: Option<String>,
    onvif_password: Option<String>,
    #[serde(default, deserialize_with = "user_level")]
    user_level: Option<UserLevel>,
}

impl TryFrom<UserTable> for UserHashes {
    type Error = &'static str;

    fn try_from(t: UserTable) -> Result<UserHashes, &'static str> {
        match (&t.md5, &t.sha256, &t.password_hash) {
            (Some(_), Some(_), None) | (None, None, Some(_)) => Ok(UserHashes {
                md5: t.md5,
                sha256: t.sha256,
                password_hash: t.password_hash,
                onvif_password: t.onvif_password,
                user_level: t.user_level,
            }),
            (Some(_), None, None) => Err("missing field `sha256`"),
            (None, Some(_), None) => Err("missing field `md5`"),
            (None, None, None) => Err("missing fields `md5` and `sha256` (or `password_hash`)"),
            _ => Err("password_hash and md5/sha256 both given: a user has one or the other"),
        }
    }
}

/// `user_level = "operator"`: one of ONVIF's levels, by name.
fn user_level<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<UserLevel>, D::Error> {
    let name = String::deserialize(d)?;
    name.parse()
        .map(Some)
        .map_err(|_| serde::de::Error::unknown_variant(&name, &UserLevel::NAMES))
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
    /// List the kernel's hardware (memory-to-memory) encoders camstream can
    /// use for H.264 and JPEG; with --try, encode a moving test picture on
    /// each and report speed, size and whether the result checks out
    Encoders {
        /// Encode on each encoder found (exit status 1 if one fails)
        #[arg(long = "try")]
        trial: bool,
        /// Picture size for --try
        #[arg(long, default_value = "1280x720", value_name = "WxH")]
        size: String,
        /// Frames to encode with --try
        #[arg(long, default_value_t = 30)]
        frames: u32,
        /// With --try: write the frames sent (input.yu12, planar 4:2:0)
        /// and each encoder's output (videoN.FOURCC) into DIR
        #[arg(long, value_name = "DIR")]
        save: Option<PathBuf>,
        /// With --try: encode this YU12 camera's frames (e.g. /dev/video0)
        /// instead, handing each encoder the camera's own buffers where it
        /// can read them, as the daemon does; --save writes the frames
        /// sent to each as videoN.FOURCC.yu12
        #[arg(long, value_name = "CAMERA")]
        from: Option<PathBuf>,
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
        /// What the user may do, as ONVIF's user levels: user (watch),
        /// operator (also change the encoders, which every viewer sees),
        /// administrator (everything) [default: the level the user has in
        /// the file, else administrator]
        #[arg(long, value_name = "LEVEL")]
        user_level: Option<UserLevel>,
    },
    /// Apply Raspberry Pi Imager's settings (its rpi-preseed.toml): the
    /// host name, SSH keys and Wi-Fi into the camera's settings; prints
    /// what was done and what the camera does not take. A bad value stops
    /// it before anything is written (exit status 1)
    Preseed {
        /// The file Imager wrote, e.g. /boot/firmware/rpi-preseed.toml
        file: PathBuf,
        /// The camera's settings directory
        #[arg(long, default_value = "/data/etc", value_name = "DIR")]
        data: PathBuf,
    },
    /// Receive one frame from an RTSP server (RTP over TCP: a JPEG, or an
    /// H.264 IDR picture) and decode it; exit status 0 if that works within
    /// the timeout, 1 at once on an answer trying again would not change
    /// (no such stream, a refused password)
    Check {
        /// Stream to check (rtsp://USER:PASSWORD@HOST:PORT/PATH if it asks for one) [default: this device's, from the config: rtsp://127.0.0.1:RTSP_PORT/PATH, answering a password request with a configured user's stored digests]
        url: Option<String>,
        /// Give up after this many seconds (a server still starting, or
        /// busy, is tried again until then)
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
    /// The command line's settings, each flag given noted.
    pub fn from_command_line() -> Options {
        let matches = Options::command().get_matches();
        let mut o = Options::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        o.flags = matches
            .ids()
            .map(|id| id.as_str())
            .filter(|id| matches.value_source(id) == Some(ValueSource::CommandLine))
            .map(str::to_owned)
            .collect();
        o
    }

    /// Fills every field not set here from `other`. Controls add up: the
    /// file's first, then the flags', so a flag wins over the file.
    pub(super) fn or(self, other: Options) -> Options {
        let controls = match (other.controls, self.controls) {
            (Some(mut a), Some(b)) => {
                a.extend(b);
                Some(a)
            }
            (a, b) => b.or(a),
        };
        Options {
            flags: self.flags,
            command: self.command.or(other.command),
            controls,
            buffers: self.buffers.or(other.buffers),
            format: self.format.or(other.format),
            encoder: self.encoder.or(other.encoder),
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
            max_connections_per_user: self
                .max_connections_per_user
                .or(other.max_connections_per_user),
            request_timeout: self.request_timeout.or(other.request_timeout),
            idle_timeout: self.idle_timeout.or(other.idle_timeout),
            user: self.user.or(other.user),
            log_level: self.log_level.or(other.log_level),
            users: self.users.or(other.users),
            basic_auth: self.basic_auth.or(other.basic_auth),
            nonce_lifetime: self.nonce_lifetime.or(other.nonce_lifetime),
            anonymous: self.anonymous.or(other.anonymous),
            onvif: self.onvif.or(other.onvif),
            webrtc: self.webrtc.or(other.webrtc),
            webrtc_port: self.webrtc_port.or(other.webrtc_port),
            webrtc_candidates: self.webrtc_candidates.or(other.webrtc_candidates),
            streams: self.streams.or(other.streams),
            motion: self.motion.or(other.motion),
            mqtt: self.mqtt.or(other.mqtt),
            audio: self.audio.or(other.audio),
        }
    }
}
