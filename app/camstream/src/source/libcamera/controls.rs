//! `[controls]` for libcamera cameras: libcamera's control names
//! (`ExposureTime`, or `exposure_time`: case and `_` do not matter), values
//! as booleans, numbers, lists of numbers (`ScalerCrop = [0, 0, 1640, 1232]`,
//! `FrameDurationLimits = [33333, 33333]`) or, for libcamera's enumerated
//! controls, the value's name (`AwbMode = "daylight"`). Pure, so it is
//! tested without a camera; the shim converts the numbers to the control's
//! own type.
// Used by the libcamera source; tested in every build.
#![cfg_attr(not(feature = "libcamera"), allow(dead_code))]

use anyhow::{Result, bail};

use super::describe::ControlDesc;
use crate::source::controls::{ControlSetting, Value};

/// Names of the values of libcamera's enumerated controls (control_ids.yaml,
/// unchanged from 0.0.3 to 0.7), without their prefixes.
const ENUMS: &[(&str, &[&str])] = &[
    (
        "AwbMode",
        &[
            "auto",
            "incandescent",
            "tungsten",
            "fluorescent",
            "indoor",
            "daylight",
            "cloudy",
            "custom",
        ],
    ),
    ("AfMode", &["manual", "auto", "continuous"]),
    ("AfRange", &["normal", "macro", "full"]),
    ("AfSpeed", &["normal", "fast"]),
    ("AeExposureMode", &["normal", "short", "long", "custom"]),
    (
        "AeMeteringMode",
        &["centre_weighted", "spot", "matrix", "custom"],
    ),
    (
        "AeConstraintMode",
        &["normal", "highlight", "shadows", "custom"],
    ),
];

/// Lower case, letters and digits only: `ExposureTime` = `exposure_time`.
fn fold(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// One control to set: its id, name and values.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub id: u32,
    pub name: String,
    pub values: Vec<f64>,
}

/// Matches `settings` to the camera's controls; an unknown name lists the
/// controls the camera has.
pub fn resolve(settings: &[ControlSetting], have: &[ControlDesc]) -> Result<Vec<Resolved>> {
    let mut out: Vec<Resolved> = Vec::new();
    for s in settings {
        let Some(c) = have.iter().find(|c| fold(&c.name) == fold(&s.name)) else {
            let names: Vec<&str> = have.iter().map(|c| c.name.as_str()).collect();
            bail!(
                "[controls] {}: this camera has no such control; it has {}",
                s.name,
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            );
        };
        let values = values_for(c, &s.value)
            .map_err(|why| anyhow::anyhow!("[controls] {} = {}: {why}", c.name, s.value))?;
        // A later setting of the same control wins (flags after the file).
        out.retain(|r| r.id != c.id);
        out.push(Resolved {
            id: c.id,
            name: c.name.clone(),
            values,
        });
    }
    Ok(out)
}

fn values_for(c: &ControlDesc, v: &Value) -> Result<Vec<f64>, String> {
    let number = |x: f64| -> Result<f64, String> {
        if c.kind != "float" && x.fract() != 0.0 {
            return Err("use a whole number".into());
        }
        // libcamera gives ranges for scalars only; arrays show as lists.
        if let (Ok(lo), Ok(hi)) = (c.min.parse::<f64>(), c.max.parse::<f64>()) {
            if lo < hi && (x < lo || x > hi) {
                return Err(format!("out of range ({} to {})", c.min, c.max));
            }
        }
        Ok(x)
    };
    match (c.kind.as_str(), v) {
        ("bool", Value::Bool(b)) => Ok(vec![f64::from(u8::from(*b))]),
        ("bool", Value::Int(i @ (0 | 1))) => Ok(vec![*i as f64]),
        ("bool", _) => Err("use true or false".into()),
        ("rectangle", Value::List(l)) if l.len() == 4 => {
            if l.iter().any(|x| x.fract() != 0.0) || l[2] < 0.0 || l[3] < 0.0 {
                return Err("use [x, y, width, height] in whole pixels".into());
            }
            Ok(l.clone())
        }
        ("rectangle", _) => Err("use [x, y, width, height]".into()),
        ("byte" | "int32" | "int64" | "float", Value::Int(i)) => Ok(vec![number(*i as f64)?]),
        ("float", Value::Float(x)) => Ok(vec![number(*x)?]),
        ("byte" | "int32" | "int64", Value::Float(_)) => Err("use a whole number".into()),
        ("byte" | "int32" | "int64" | "float", Value::List(l)) if !l.is_empty() => l
            .iter()
            .map(|x| {
                if c.kind != "float" && x.fract() != 0.0 {
                    Err("use whole numbers".to_string())
                } else {
                    Ok(*x)
                }
            })
            .collect(),
        ("int32", Value::Text(t)) => {
            let Some((_, names)) = ENUMS.iter().find(|(n, _)| *n == c.name) else {
                return Err("use a number".into());
            };
            names
                .iter()
                .position(|n| fold(n) == fold(t))
                .map(|i| vec![i as f64])
                .ok_or_else(|| format!("use one of {}", names.join(", ")))
        }
        ("byte" | "int32" | "int64" | "float", _) => Err("use a number".into()),
        (kind, _) => Err(format!("{kind} controls cannot be set from the config")),
    }
}

/// FrameDurationLimits (microseconds) for `fps`, unless the config sets it.
pub fn frame_duration(fps: u32, have: &[ControlDesc], set: &[Resolved]) -> Option<Resolved> {
    let c = have.iter().find(|c| c.name == "FrameDurationLimits")?;
    if set.iter().any(|r| r.id == c.id) {
        return None;
    }
    let us = (1_000_000.0 / f64::from(fps.max(1))).round();
    Some(Resolved {
        id: c.id,
        name: c.name.clone(),
        values: vec![us, us],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::libcamera::describe::imx708;

    fn set(name: &str, value: Value) -> ControlSetting {
        ControlSetting {
            name: name.into(),
            value,
        }
    }

    #[test]
    fn names_values_and_enums() {
        let r = resolve(
            &[
                set("exposure_time", Value::Int(10_000)),
                set("AeEnable", Value::Bool(false)),
                set("AnalogueGain", Value::Float(2.5)),
                set("AwbMode", Value::Text("Daylight".into())),
                set("af_mode", Value::Text("continuous".into())),
                set("ScalerCrop", Value::List(vec![0.0, 0.0, 2304.0, 1296.0])),
                set("FrameDurationLimits", Value::List(vec![66666.0, 66666.0])),
                set("ExposureTime", Value::Int(20_000)),
            ],
            &imx708(),
        )
        .unwrap();
        let got: Vec<(&str, &[f64])> = r.iter().map(|r| (r.name.as_str(), &r.values[..])).collect();
        assert_eq!(
            got,
            [
                ("AeEnable", &[0.0][..]),
                ("AnalogueGain", &[2.5]),
                ("AwbMode", &[5.0]),
                ("AfMode", &[2.0]),
                ("ScalerCrop", &[0.0, 0.0, 2304.0, 1296.0]),
                ("FrameDurationLimits", &[66666.0, 66666.0]),
                ("ExposureTime", &[20_000.0]),
            ]
        );
        // The config set it: fps does not.
        assert_eq!(frame_duration(30, &imx708(), &r), None);
        assert_eq!(
            frame_duration(30, &imx708(), &[]).unwrap().values,
            [33333.0, 33333.0]
        );
        assert_eq!(frame_duration(30, &imx708()[..2], &[]), None);
    }

    #[test]
    fn clear_errors() {
        let err =
            |name: &str, v: Value| resolve(&[set(name, v)], &imx708()).unwrap_err().to_string();
        assert_eq!(
            err("Sharpness", Value::Float(1.0)),
            "[controls] Sharpness: this camera has no such control; it has AeEnable, ExposureTime, \
             AnalogueGain, AwbEnable, AwbMode, ColourGains, Brightness, Contrast, AfMode, LensPosition, ScalerCrop, \
             FrameDurationLimits"
        );
        assert_eq!(
            err("ExposureTime", Value::Int(5)),
            "[controls] ExposureTime = 5: out of range (26 to 112015443)"
        );
        assert_eq!(
            err("ExposureTime", Value::Float(100.5)),
            "[controls] ExposureTime = 100.5: use a whole number"
        );
        assert_eq!(
            err("AeEnable", Value::Int(3)),
            "[controls] AeEnable = 3: use true or false"
        );
        assert_eq!(
            err("AwbMode", Value::Text("sunny".into())),
            "[controls] AwbMode = \"sunny\": use one of auto, incandescent, tungsten, fluorescent, indoor, daylight, cloudy, custom"
        );
        assert_eq!(
            err("ScalerCrop", Value::Int(1)),
            "[controls] ScalerCrop = 1: use [x, y, width, height]"
        );
        assert_eq!(
            err("Brightness", Value::Float(1.5)),
            "[controls] Brightness = 1.5: out of range (-1.000000 to 1.000000)"
        );
        assert_eq!(
            err("LensPosition", Value::Text("far".into())),
            "[controls] LensPosition = \"far\": use a number"
        );
        assert!(
            resolve(&[set("x", Value::Int(1))], &[])
                .unwrap_err()
                .to_string()
                .ends_with("it has none")
        );
    }
}
