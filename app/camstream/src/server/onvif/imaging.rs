//! ONVIF's Imaging service over the camera's picture settings: the V4L2
//! controls [`crate::source::picture`] offers, named as ONVIF names them
//! (brightness, contrast, saturation and sharpness in the camera's own
//! range; exposure and white balance AUTO or MANUAL; the exposure time in
//! microseconds). Reading and changing them goes through the same path as
//! the page's (the picture thread): all or none, kept on the data
//! partition.

use camstream_onvif::imaging::{self as img, Exposure, Imaging, Level, Mode, WhiteBalance};
use camstream_onvif::soap::{Fault, Request as Soap};

use std::net::SocketAddr;
use std::sync::Arc;

use super::Context;
use crate::server::picture::Ask;
use crate::source::controls::{ControlSetting, Value};
use crate::source::picture::{Controls, Kind, Setting};

pub const PATH: &str = "/onvif/imaging_service";
/// The one video source's token (GetVideoSources).
pub const SOURCE: &str = "camera";

/// V4L2's exposure_time_absolute counts 100 us.
const EXPOSURE_UNIT_US: f64 = 100.0;

const AUTO_EXPOSURE: [&str; 2] = ["Auto Mode", "Aperture Priority Mode"];
const MANUAL_EXPOSURE: &str = "Manual Mode";

fn find<'s>(settings: &'s [Setting], name: &str) -> Option<&'s Setting> {
    settings.iter().find(|s| s.name == name)
}

fn level(s: &Setting, scale: f64) -> Option<Level> {
    match s.kind {
        Kind::Int { min, max, .. } => Some(Level {
            value: s.value as f64 * scale,
            min: min as f64 * scale,
            max: max as f64 * scale,
        }),
        _ => None,
    }
}

fn menu_name(s: &Setting, raw: i64) -> Option<&str> {
    match &s.kind {
        Kind::Menu(items) => items.iter().find(|(v, _)| *v == raw).map(|(_, n)| n.as_str()),
        _ => None,
    }
}

/// The camera's picture settings as ONVIF's.
pub fn imaging(settings: &[Setting]) -> Imaging {
    let lvl = |name| find(settings, name).and_then(|s| level(s, 1.0));
    let exposure = find(settings, "auto_exposure").and_then(|s| {
        let Kind::Menu(items) = &s.kind else {
            return None;
        };
        let has = |n: &str| items.iter().any(|(_, i)| i == n);
        let mut modes = Vec::new();
        if AUTO_EXPOSURE.iter().any(|n| has(n)) {
            modes.push(Mode::Auto);
        }
        if has(MANUAL_EXPOSURE) {
            modes.push(Mode::Manual);
        }
        (!modes.is_empty()).then(|| Exposure {
            modes,
            mode: if menu_name(s, s.value) == Some(MANUAL_EXPOSURE) {
                Mode::Manual
            } else {
                Mode::Auto
            },
            time: find(settings, "exposure_time_absolute")
                .and_then(|t| level(t, EXPOSURE_UNIT_US)),
        })
    });
    let white_balance = find(settings, "white_balance_automatic").map(|s| WhiteBalance {
        modes: vec![Mode::Auto, Mode::Manual],
        mode: if s.value != 0 { Mode::Auto } else { Mode::Manual },
    });
    Imaging {
        brightness: lvl("brightness"),
        color_saturation: lvl("saturation"),
        contrast: lvl("contrast"),
        sharpness: lvl("sharpness"),
        exposure,
        white_balance,
    }
}

/// A checked change as the camera's controls.
fn to_controls(change: &img::Change, settings: &[Setting]) -> Vec<ControlSetting> {
    let mut out = Vec::new();
    let mut put = |name: &str, value: Value| {
        out.push(ControlSetting {
            name: name.into(),
            value,
        })
    };
    for (name, v) in [
        ("brightness", change.brightness),
        ("saturation", change.color_saturation),
        ("contrast", change.contrast),
        ("sharpness", change.sharpness),
    ] {
        if let Some(v) = v {
            put(name, Value::Int(v.round() as i64));
        }
    }
    if let Some(m) = change.exposure_mode {
        let item = match m {
            Mode::Manual => Some(MANUAL_EXPOSURE),
            Mode::Auto => find(settings, "auto_exposure").and_then(|s| match &s.kind {
                Kind::Menu(items) => AUTO_EXPOSURE
                    .into_iter()
                    .find(|n| items.iter().any(|(_, i)| i == n)),
                _ => None,
            }),
        };
        if let Some(item) = item {
            put("auto_exposure", Value::Text(item.into()));
        }
    }
    if let Some(us) = change.exposure_time {
        put(
            "exposure_time_absolute",
            Value::Int((us / EXPOSURE_UNIT_US).round() as i64),
        );
    }
    if let Some(m) = change.white_balance_mode {
        put("white_balance_automatic", Value::Bool(m == Mode::Auto));
    }
    out
}

/// What a request comes to: an answer now, or a job for the picture
/// thread (server::picture), which reads and sets the camera off the loop.
pub enum Step {
    Xml(String),
    Ask(Arc<dyn Controls>, Ask),
}

/// The service's answer to `soap` (its path is [`PATH`]).
pub fn answer(soap: &Soap, ctx: &Context<'_>) -> Result<Step, Fault> {
    let op = soap.operation();
    if op == "GetServiceCapabilities" {
        return Ok(Step::Xml(img::service_capabilities()));
    }
    if !matches!(
        op,
        "GetImagingSettings" | "SetImagingSettings" | "GetOptions" | "GetStatus" | "GetMoveOptions"
    ) {
        return Err(Fault::action_not_supported(op));
    }
    let token = img::source_token(soap);
    if token != SOURCE {
        return Err(img::no_source(token));
    }
    // What settings there are and their ranges, as known: the camera is
    // asked only by the picture thread.
    let (controls, known) = ctx
        .source
        .and_then(|s| s.picture().ok())
        .map(|c| {
            let known = c.known();
            (c, known)
        })
        .filter(|(_, known)| !known.is_empty())
        .ok_or_else(|| {
            Fault::receiver(&["ter:ActionNotSupported"], "the camera is not there, or has no picture settings")
        })?;
    let now = imaging(&known);
    Ok(match op {
        "GetImagingSettings" => Step::Ask(controls, Ask::Read),
        "GetOptions" => Step::Xml(img::options(&now)),
        "GetStatus" => Step::Xml(img::status()),
        "GetMoveOptions" => Step::Xml(img::move_options()),
        _ => {
            let change = img::parse_set(soap, &now)?;
            Step::Ask(controls, Ask::Set(to_controls(&change, &known)))
        }
    })
}

/// The answer to a request whose job the picture thread has done.
pub fn finish(ask: &Ask, result: Result<Vec<Setting>, String>, peer: SocketAddr) -> Result<String, Fault> {
    match (ask, result) {
        (Ask::Read, Ok(settings)) => Ok(img::imaging_settings(&imaging(&settings))),
        (Ask::Set(wanted), Ok(_)) => {
            let said: Vec<String> = wanted.iter().map(|c| format!("{} = {}", c.name, c.value)).collect();
            log::info!("{peer}: picture: {} (ONVIF)", said.join(", "));
            Ok(img::set_imaging_settings())
        }
        (_, Err(why)) => {
            log::info!("{peer}: picture: refused: {why} (ONVIF)");
            Err(Fault {
                subcodes: &["ter:InvalidArgVal", "ter:SettingsInvalid"],
                ..Fault::sender(&[], &why)
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(name: &'static str, min: i64, max: i64, value: i64) -> Setting {
        Setting {
            name,
            kind: Kind::Int { min, max, step: 1 },
            default: value,
            value,
            inactive: false,
        }
    }

    /// A UVC webcam's (a Logitech C920's, as `v4l2-ctl --list-ctrls-menus`
    /// prints them): manual and aperture priority exposure only.
    fn c920() -> Vec<Setting> {
        vec![
            int("brightness", 0, 255, 128),
            int("sharpness", 0, 255, 128),
            Setting {
                name: "auto_exposure",
                kind: Kind::Menu(vec![
                    (1, "Manual Mode".into()),
                    (3, "Aperture Priority Mode".into()),
                ]),
                default: 3,
                value: 3,
                inactive: false,
            },
            int("exposure_time_absolute", 3, 2047, 250),
            Setting {
                name: "white_balance_automatic",
                kind: Kind::Bool,
                default: 1,
                value: 0,
                inactive: false,
            },
        ]
    }

    #[test]
    fn onvif_names_the_cameras_controls() {
        let i = imaging(&c920());
        assert_eq!(i.brightness.unwrap().max, 255.0);
        assert!(i.contrast.is_none());
        let e = i.exposure.unwrap();
        assert_eq!(e.modes, vec![Mode::Auto, Mode::Manual]);
        assert_eq!(e.mode, Mode::Auto);
        assert_eq!(e.time.unwrap().value, 25_000.0);
        assert_eq!(i.white_balance.unwrap().mode, Mode::Manual);
    }

    #[test]
    fn a_change_becomes_the_cameras_controls() {
        let change = img::Change {
            brightness: Some(99.6),
            exposure_mode: Some(Mode::Auto),
            exposure_time: Some(33_333.0),
            white_balance_mode: Some(Mode::Auto),
            ..Default::default()
        };
        let c: Vec<String> = to_controls(&change, &c920())
            .iter()
            .map(|c| format!("{} = {}", c.name, c.value))
            .collect();
        assert_eq!(
            c,
            [
                "brightness = 100",
                "auto_exposure = \"Aperture Priority Mode\"",
                "exposure_time_absolute = 333",
                "white_balance_automatic = true"
            ]
        );
    }
}
