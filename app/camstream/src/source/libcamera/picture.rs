//! Picture settings on a libcamera camera: its controls as the settings
//! the page and ONVIF know ([`OFFERED`]'s names, whole numbers), set while
//! it streams. Pure: the mapping both ways, tested without a camera; the
//! capture thread hands what is set to the camera's next request.
//!
//! libcamera's floats (Brightness -1 to 1, Contrast 0 to 32, the gains)
//! are counted in hundredths; ExposureTime's microseconds in V4L2's
//! 100 us (exposure_time_absolute); AeEnable is auto_exposure's menu, as
//! a USB webcam's (Manual Mode, Auto Mode); ColourGains' two values are
//! red_balance and blue_balance. Flips (horizontal_flip, vertical_flip;
//! both for 180 degrees) are the camera's orientation, which libcamera
//! takes only when the camera is configured: a change reopens it.
// Used by the libcamera source; tested in every build.
#![cfg_attr(not(feature = "libcamera"), allow(dead_code))]

use std::collections::HashMap;

use super::controls::Resolved;
use super::describe::ControlDesc;
use crate::source::controls::{ControlSetting, Value};
use crate::source::picture::{Kind, OFFERED, Setting};

/// How a setting's whole number stands for the control's value.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    /// A float in hundredths.
    Hundredths,
    /// Microseconds in 100 us.
    HundredMicros,
    /// A boolean as true or false.
    Bool,
    /// A boolean as auto_exposure's menu.
    AutoMenu,
    /// A whole number as it is (ColourTemperature's kelvin).
    Same,
}

/// Each offered setting a libcamera control stands for: the setting, the
/// control, which of its values, in what unit.
const MAP: [(&str, &str, usize, Unit); 11] = [
    ("brightness", "Brightness", 0, Unit::Hundredths),
    ("contrast", "Contrast", 0, Unit::Hundredths),
    ("saturation", "Saturation", 0, Unit::Hundredths),
    ("sharpness", "Sharpness", 0, Unit::Hundredths),
    ("auto_exposure", "AeEnable", 0, Unit::AutoMenu),
    (
        "exposure_time_absolute",
        "ExposureTime",
        0,
        Unit::HundredMicros,
    ),
    ("analogue_gain", "AnalogueGain", 0, Unit::Hundredths),
    ("white_balance_automatic", "AwbEnable", 0, Unit::Bool),
    (
        "white_balance_temperature",
        "ColourTemperature",
        0,
        Unit::Same,
    ),
    ("red_balance", "ColourGains", 0, Unit::Hundredths),
    ("blue_balance", "ColourGains", 1, Unit::Hundredths),
];

/// auto_exposure's items, as a UVC webcam's name theirs (ONVIF's Imaging
/// maps them to its exposure modes).
const MANUAL: &str = "Manual Mode";
const AUTO: &str = "Auto Mode";

/// A control's number as the setting's.
fn to_setting(unit: Unit, x: f64) -> i64 {
    match unit {
        Unit::Hundredths => (x * 100.0).round() as i64,
        Unit::HundredMicros => (x / 100.0).round() as i64,
        Unit::Bool | Unit::AutoMenu => i64::from(x != 0.0),
        Unit::Same => x.round() as i64,
    }
}

/// A setting's number as the control's.
fn to_control(unit: Unit, v: i64) -> f64 {
    match unit {
        Unit::Hundredths => v as f64 / 100.0,
        Unit::HundredMicros => v as f64 * 100.0,
        Unit::Bool | Unit::AutoMenu => f64::from(u8::from(v != 0)),
        Unit::Same => v as f64,
    }
}

/// A number of libcamera's text (a control's minimum, maximum or default,
/// as `cam --list-controls` prints them): a scalar, or an array's first.
fn number(text: &str) -> Option<f64> {
    let t = text.trim().trim_start_matches('[').trim();
    let first = t.split([',', ' ', ']']).next()?;
    match first {
        "true" => Some(1.0),
        "false" => Some(0.0),
        n => n.parse().ok(),
    }
}

/// The controls' values now: what was set, else each control's default.
pub type Values = HashMap<u32, Vec<f64>>;

/// Flips as the shim takes and says them (shim.cpp's CS_LC_HFLIP and
/// CS_LC_VFLIP).
pub const HFLIP: u32 = 1;
pub const VFLIP: u32 = 2;

/// The camera's orientation: whether it can flip, and the flips it makes
/// ([`HFLIP`], [`VFLIP`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flips {
    pub can: bool,
    pub now: u32,
}

const FLIPS: [(&str, u32); 2] = [("horizontal_flip", HFLIP), ("vertical_flip", VFLIP)];

/// What a change comes to: controls to set, and the flips to make.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub controls: Vec<Resolved>,
    pub flips: u32,
}

/// The flips kept settings ask for (set when the camera opens; one it
/// cannot make is logged then).
pub fn kept_flips(saved: &[ControlSetting]) -> u32 {
    let mut flips = 0;
    for s in saved {
        if let Some((_, bit)) = FLIPS.iter().find(|(n, _)| *n == s.name) {
            match s.value {
                Value::Bool(true) | Value::Int(1) => flips |= bit,
                _ => flips &= !bit,
            }
        }
    }
    flips
}

/// The control, value index and unit a setting stands for.
fn mapped(setting: &str) -> Option<(&'static str, usize, Unit)> {
    MAP.into_iter()
        .find(|(n, ..)| *n == setting)
        .map(|(_, control, i, unit)| (control, i, unit))
}

/// The offered settings the camera has, in [`OFFERED`]'s order, at the
/// values `now` (a control not in it is at its default).
pub fn settings(have: &[ControlDesc], now: &Values, flips: Flips) -> Vec<Setting> {
    let value_of = |c: &ControlDesc, i: usize| -> Option<f64> {
        now.get(&c.id)
            .and_then(|v| v.get(i).copied())
            .or_else(|| number(&c.default))
    };
    let enabled = |name: &str| {
        have.iter()
            .find(|c| c.name == name)
            .and_then(|c| value_of(c, 0))
            .is_some_and(|v| v != 0.0)
    };
    let mut out = Vec::new();
    for name in OFFERED {
        if let Some((_, bit)) = FLIPS.iter().find(|(n, _)| *n == name) {
            if flips.can {
                out.push(Setting {
                    name,
                    kind: Kind::Bool,
                    default: 0,
                    value: i64::from(flips.now & bit != 0),
                    inactive: false,
                });
            }
            continue;
        }
        let Some((control, i, unit)) = mapped(name) else {
            continue;
        };
        let Some(c) = have.iter().find(|c| c.name == control) else {
            continue;
        };
        let kind = match unit {
            Unit::Bool => Kind::Bool,
            Unit::AutoMenu => Kind::Menu(vec![(0, MANUAL.into()), (1, AUTO.into())]),
            _ => {
                let (Some(lo), Some(hi)) = (number(&c.min), number(&c.max)) else {
                    continue;
                };
                // Within the control's range: rounded inwards.
                let (min, max) = match unit {
                    Unit::Hundredths => ((lo * 100.0).ceil() as i64, (hi * 100.0).floor() as i64),
                    Unit::HundredMicros => {
                        ((lo / 100.0).ceil() as i64, (hi / 100.0).floor() as i64)
                    }
                    _ => (lo.ceil() as i64, hi.floor() as i64),
                };
                if min >= max {
                    continue;
                }
                Kind::Int { min, max, step: 1 }
            }
        };
        // ColourGains has no default of its own: unity gains.
        let default =
            number(&c.default).unwrap_or(if unit == Unit::Hundredths { 1.0 } else { 0.0 });
        let inactive = match control {
            "ExposureTime" | "AnalogueGain" => enabled("AeEnable"),
            "ColourGains" | "ColourTemperature" => enabled("AwbEnable"),
            _ => false,
        };
        out.push(Setting {
            name,
            kind,
            default: to_setting(unit, default),
            value: to_setting(unit, value_of(c, i).unwrap_or(default)),
            inactive,
        });
    }
    out
}

/// `changes` as the controls to set and the flips to make, every one
/// checked first: a setting the camera has not, or a value out of its
/// range, refuses them all. ColourGains takes both gains: the one not
/// changed keeps its value.
pub fn resolve(
    changes: &[ControlSetting],
    have: &[ControlDesc],
    now: &Values,
    flips: Flips,
) -> Result<Change, String> {
    let offered = settings(have, now, flips);
    let mut out: Vec<Resolved> = Vec::new();
    let mut flipped = flips.now;
    for change in changes {
        let Some(s) = offered.iter().find(|s| s.name == change.name) else {
            return Err(format!("{}: this camera has no such setting", change.name));
        };
        if let Some((_, bit)) = FLIPS.iter().find(|(n, _)| *n == s.name) {
            match change.value {
                Value::Bool(true) | Value::Int(1) => flipped |= bit,
                Value::Bool(false) | Value::Int(0) => flipped &= !bit,
                _ => return Err(format!("{}: use true or false", s.name)),
            }
            continue;
        }
        let Some((control, i, unit)) = mapped(s.name) else {
            continue;
        };
        let Some(c) = have.iter().find(|c| c.name == control) else {
            continue;
        };
        let v = match (&s.kind, &change.value) {
            (Kind::Bool, Value::Bool(b)) => i64::from(*b),
            (Kind::Bool, Value::Int(i @ (0 | 1))) => *i,
            (Kind::Menu(items), Value::Text(t)) => items
                .iter()
                .find(|(_, n)| n.eq_ignore_ascii_case(t))
                .map(|(v, _)| *v)
                .ok_or_else(|| format!("{}: use {MANUAL:?} or {AUTO:?}", s.name))?,
            (Kind::Menu(_), Value::Int(i @ (0 | 1))) => *i,
            (Kind::Int { min, max, .. }, Value::Int(i)) if (min..=max).contains(&i) => *i,
            (Kind::Int { min, max, .. }, Value::Int(i)) => {
                return Err(format!("{} = {i}: out of range ({min}..={max})", s.name));
            }
            _ => {
                return Err(format!(
                    "{} = {}: not a value it takes",
                    s.name, change.value
                ));
            }
        };
        let x = to_control(unit, v);
        let r = match out.iter_mut().find(|r| r.id == c.id) {
            Some(r) => r,
            None => {
                // Every value of the control, as it is now: the one changed
                // goes in its place.
                let mut values: Vec<f64> = now.get(&c.id).cloned().unwrap_or_default();
                if control == "ColourGains" && values.len() < 2 {
                    values = offered
                        .iter()
                        .filter(|s| s.name == "red_balance" || s.name == "blue_balance")
                        .map(|s| to_control(Unit::Hundredths, s.value))
                        .collect();
                }
                if values.is_empty() {
                    values.push(x);
                }
                out.push(Resolved {
                    id: c.id,
                    name: c.name.clone(),
                    values,
                });
                out.last_mut().ok_or("no control")?
            }
        };
        match r.values.get_mut(i) {
            Some(slot) => *slot = x,
            None => {
                return Err(format!(
                    "{}: the camera's {} has no such value",
                    s.name, c.name
                ));
            }
        }
    }
    Ok(Change {
        controls: out,
        flips: flipped,
    })
}

/// Kept settings (camstream.picture.toml) as controls, each alone: one the
/// camera refuses is logged and skipped, as V4L2 cameras' are. Flips are
/// [`kept_flips`]'.
pub fn kept(saved: &[ControlSetting], have: &[ControlDesc], now: &Values) -> Vec<Resolved> {
    let mut out: Vec<Resolved> = Vec::new();
    let mut now = now.clone();
    for s in saved {
        if FLIPS.iter().any(|(n, _)| *n == s.name) {
            continue;
        }
        match resolve(std::slice::from_ref(s), have, &now, Flips::default()) {
            Ok(change) => {
                for r in change.controls {
                    now.insert(r.id, r.values.clone());
                    out.retain(|o| o.id != r.id);
                    out.push(r);
                }
            }
            Err(e) => log::warn!("kept picture setting skipped: {e}"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::libcamera::describe::imx708;

    use ControlDesc as C;

    fn ctl(name: &str, id: u32, kind: &str, min: &str, max: &str, default: &str) -> ControlDesc {
        C::listed(name, id, kind, min, max, default)
    }

    /// The controls of a change that moves no flip.
    fn controls(
        changes: &[ControlSetting],
        have: &[ControlDesc],
        now: &Values,
    ) -> Result<Vec<Resolved>, String> {
        resolve(changes, have, now, Flips::default()).map(|c| c.controls)
    }

    fn vimc() -> Vec<ControlDesc> {
        vec![
            ctl(
                "Brightness",
                9,
                "float",
                "-1.000000",
                "1.000000",
                "0.000000",
            ),
            ctl("Contrast", 10, "float", "0.000000", "2.000000", "1.000000"),
            ctl(
                "Saturation",
                11,
                "float",
                "0.000000",
                "2.000000",
                "1.000000",
            ),
        ]
    }

    fn set(name: &str, value: Value) -> ControlSetting {
        ControlSetting {
            name: name.into(),
            value,
        }
    }

    #[test]
    fn controls_as_settings_in_the_pages_order() {
        let s = settings(&imx708(), &Values::new(), Flips::default());
        let names: Vec<&str> = s.iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "brightness",
                "contrast",
                "auto_exposure",
                "exposure_time_absolute",
                "analogue_gain",
                "white_balance_automatic",
                "red_balance",
                "blue_balance"
            ]
        );
        let b = &s[0];
        assert_eq!(
            b.kind,
            Kind::Int {
                min: -100,
                max: 100,
                step: 1
            }
        );
        assert_eq!((b.default, b.value, b.inactive), (0, 0, false));
        // Microseconds in 100 us, inwards; inactive while AeEnable is on.
        let e = &s[3];
        assert_eq!(
            e.kind,
            Kind::Int {
                min: 1,
                max: 1_120_154,
                step: 1
            }
        );
        assert_eq!((e.default, e.inactive), (200, true));
        assert_eq!(
            s[4].kind,
            Kind::Int {
                min: 113,
                max: 1600,
                step: 1
            }
        );
        assert_eq!(
            s[2].kind,
            Kind::Menu(vec![(0, MANUAL.into()), (1, AUTO.into())])
        );
        assert_eq!(s[2].value, 1);
        // ColourGains: unity without a default, inactive under AWB.
        assert_eq!((s[6].value, s[7].value, s[6].inactive), (100, 100, true));
        // What was set shows, and lifts the inactivity it decides.
        let now = Values::from([(1, vec![0.0]), (15, vec![1.5, 2.25]), (9, vec![0.5])]);
        let s = settings(&imx708(), &now, Flips::default());
        assert_eq!(s[0].value, 50);
        assert_eq!((s[2].value, s[3].inactive), (0, false));
        assert_eq!((s[6].value, s[7].value, s[6].inactive), (150, 225, true));
    }

    #[test]
    fn settings_become_controls_all_or_none() {
        let now = Values::new();
        let r = controls(
            &[
                set("brightness", Value::Int(50)),
                set("contrast", Value::Int(150)),
            ],
            &vimc(),
            &now,
        )
        .unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].name.as_str(), r[0].values.as_slice()),
            ("Brightness", &[0.5][..])
        );
        assert_eq!(r[1].values, [1.5]);
        // One out of range refuses both.
        let e = controls(
            &[
                set("brightness", Value::Int(50)),
                set("contrast", Value::Int(300)),
            ],
            &vimc(),
            &now,
        )
        .unwrap_err();
        assert_eq!(e, "contrast = 300: out of range (0..=200)");
        let e = controls(&[set("sharpness", Value::Int(1))], &vimc(), &now).unwrap_err();
        assert_eq!(e, "sharpness: this camera has no such setting");
        // A gain changed alone keeps the other's value.
        let now = Values::from([(15, vec![1.5, 2.25])]);
        let r = controls(&[set("blue_balance", Value::Int(300))], &imx708(), &now).unwrap();
        assert_eq!(r[0].values, [1.5, 3.0]);
        let r = controls(
            &[
                set("red_balance", Value::Int(120)),
                set("blue_balance", Value::Int(80)),
            ],
            &imx708(),
            &Values::new(),
        )
        .unwrap();
        assert_eq!((r.len(), r[0].values.as_slice()), (1, &[1.2, 0.8][..]));
        // The menu by name, exposure in 100 us.
        let r = controls(
            &[
                set("auto_exposure", Value::Text("manual mode".into())),
                set("exposure_time_absolute", Value::Int(333)),
            ],
            &imx708(),
            &Values::new(),
        )
        .unwrap();
        assert_eq!((r[0].values[0], r[1].values[0]), (0.0, 33_300.0));
        assert!(
            controls(
                &[set("auto_exposure", Value::Text("on".into()))],
                &imx708(),
                &now
            )
            .is_err()
        );
    }

    #[test]
    fn flips_where_the_camera_can() {
        let none = settings(&vimc(), &Values::new(), Flips::default());
        assert!(none.iter().all(|s| !s.name.ends_with("_flip")));
        let flips = Flips {
            can: true,
            now: VFLIP,
        };
        let s = settings(&vimc(), &Values::new(), flips);
        let f: Vec<(&str, i64)> = s
            .iter()
            .filter(|s| s.name.ends_with("_flip"))
            .map(|s| (s.name, s.value))
            .collect();
        assert_eq!(f, [("horizontal_flip", 0), ("vertical_flip", 1)]);
        let c = resolve(
            &[
                set("horizontal_flip", Value::Bool(true)),
                set("brightness", Value::Int(10)),
            ],
            &vimc(),
            &Values::new(),
            flips,
        )
        .unwrap();
        assert_eq!((c.flips, c.controls.len()), (HFLIP | VFLIP, 1));
        let e = resolve(
            &[set("vertical_flip", Value::Bool(false))],
            &vimc(),
            &Values::new(),
            Flips::default(),
        );
        assert_eq!(
            e.unwrap_err(),
            "vertical_flip: this camera has no such setting"
        );
        let saved = [
            set("horizontal_flip", Value::Bool(true)),
            set("vertical_flip", Value::Bool(true)),
            set("vertical_flip", Value::Bool(false)),
        ];
        assert_eq!(kept_flips(&saved), HFLIP);
        assert!(kept(&saved, &vimc(), &Values::new()).is_empty());
    }

    #[test]
    fn kept_settings_skip_what_the_camera_refuses() {
        let saved = [
            set("brightness", Value::Int(20)),
            set("horizontal_flip", Value::Bool(true)),
            set("contrast", Value::Int(999)),
            set("brightness", Value::Int(30)),
        ];
        let r = kept(&saved, &vimc(), &Values::new());
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].values, [0.3]);
    }
}
