//! Picture settings: the camera controls a person sets while it streams
//! (the status page's form through `POST /picture`, ONVIF's Imaging
//! service), offered only where the camera has them, kept on the data
//! partition (camstream.picture.toml beside camstream.toml) and set
//! again at every start and replug. Pure: the JSON the page reads and
//! sends, and the file's text; the camera's side is the source's
//! ([`Controls`], from [`super::FrameSource::picture`]).

use serde_json::Value as Json;

use super::controls::{ControlSetting, Value};

/// The controls offered as picture settings, by the names `v4l2-ctl`
/// prints (as `[controls]` takes them), in the page's order. Others stay
/// in camstream.toml's `[controls]`.
pub const OFFERED: [&str; 14] = [
    "brightness",
    "contrast",
    "saturation",
    "sharpness",
    "auto_exposure",
    "exposure_time_absolute",
    "analogue_gain",
    "white_balance_automatic",
    "white_balance_temperature",
    "red_balance",
    "blue_balance",
    "power_line_frequency",
    "horizontal_flip",
    "vertical_flip",
];

/// What values a setting takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Int {
        min: i64,
        max: i64,
        step: i64,
    },
    Bool,
    /// Its items: the value each stands for and its name.
    Menu(Vec<(i64, String)>),
}

/// One picture setting as the camera has it now.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// One of [`OFFERED`].
    pub name: &'static str,
    pub kind: Kind,
    pub default: i64,
    pub value: i64,
    /// Another setting decides it now (an exposure time while exposure is
    /// automatic): shown, but the camera may not take a new value.
    pub inactive: bool,
}

/// A camera's picture settings as the picture thread (server::picture)
/// reads and sets them: a camera may take its time to answer (a UVC
/// webcam's answer comes over USB, in up to seconds), and no viewer may
/// wait for it, so the event loop never does.
pub trait Controls: Send + Sync {
    /// The settings as last read or set: no asking the camera, for what
    /// the loop answers at once (which settings there are, their ranges).
    fn known(&self) -> Vec<Setting>;
    /// Reads the settings from the camera (and knows them).
    fn read(&self) -> Vec<Setting>;
    /// Sets `changes`, all or none: a value the camera refuses changes
    /// nothing and says why.
    fn set(&self, changes: &[ControlSetting]) -> Result<(), String>;
}

impl Setting {
    /// A raw value as the config writes it: a menu item by its name.
    pub fn config_value(&self, raw: i64) -> Value {
        match &self.kind {
            Kind::Bool => Value::Bool(raw != 0),
            Kind::Int { .. } => Value::Int(raw),
            Kind::Menu(items) => items
                .iter()
                .find(|(v, _)| *v == raw)
                .map_or(Value::Int(raw), |(_, n)| Value::Text(n.clone())),
        }
    }
}

/// GET /picture's answer (and POST's): every setting the camera has, with
/// what it takes, its default and its value.
pub fn json(settings: &[Setting]) -> String {
    let list: Vec<Json> = settings
        .iter()
        .map(|s| {
            let mut o = serde_json::Map::new();
            o.insert("name".into(), s.name.into());
            let v = |raw: i64| -> Json {
                match s.config_value(raw) {
                    Value::Bool(b) => b.into(),
                    Value::Text(t) => t.into(),
                    _ => raw.into(),
                }
            };
            match &s.kind {
                Kind::Int { min, max, step } => {
                    o.insert("type".into(), "int".into());
                    o.insert("min".into(), (*min).into());
                    o.insert("max".into(), (*max).into());
                    o.insert("step".into(), (*step).into());
                }
                Kind::Bool => {
                    o.insert("type".into(), "bool".into());
                }
                Kind::Menu(items) => {
                    o.insert("type".into(), "menu".into());
                    let names: Vec<Json> = items.iter().map(|(_, n)| n.as_str().into()).collect();
                    o.insert("items".into(), names.into());
                }
            }
            o.insert("default".into(), v(s.default));
            o.insert("value".into(), v(s.value));
            o.insert("inactive".into(), s.inactive.into());
            Json::Object(o)
        })
        .collect();
    serde_json::json!({ "settings": list }).to_string()
}

/// POST /picture's body: one JSON object of settings to change, by name
/// (`{"brightness": 140, "horizontal_flip": true, "power_line_frequency":
/// "50 Hz"}`). Only offered settings, each at most once.
pub fn parse_json(body: &[u8]) -> Result<Vec<ControlSetting>, String> {
    let doc: Json = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let Json::Object(map) = doc else {
        return Err("send a JSON object of settings, e.g. {\"brightness\": 140}".into());
    };
    if map.is_empty() {
        return Err("no settings to change".into());
    }
    let mut out = Vec::with_capacity(map.len());
    for (name, v) in map {
        if !OFFERED.contains(&name.as_str()) {
            return Err(format!(
                "{name:?} is not a picture setting; they are {}",
                OFFERED.join(", ")
            ));
        }
        let value = match v {
            Json::Bool(b) => Value::Bool(b),
            Json::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => return Err(format!("{name}: a whole number")),
            },
            Json::String(s) if s.len() <= 64 => Value::Text(s),
            _ => {
                return Err(format!(
                    "{name}: a number, true or false, or a menu item's name"
                ));
            }
        };
        out.push(ControlSetting { name, value });
    }
    Ok(out)
}

/// `saved` with `changes` in it: a later value of a setting replaces the
/// earlier, in place.
pub fn merge(saved: &mut Vec<ControlSetting>, changes: &[ControlSetting]) {
    for c in changes {
        match saved.iter_mut().find(|s| s.name == c.name) {
            Some(s) => s.value = c.value.clone(),
            None => saved.push(c.clone()),
        }
    }
}

/// The file's text (`[controls]`, as camstream.toml writes controls).
pub fn file_text(saved: &[ControlSetting]) -> String {
    let mut doc = toml_edit::DocumentMut::new();
    doc.decor_mut().set_prefix(
        "# Written by camstream: the picture settings set from the status page or\n\
         # ONVIF, set after camstream.toml's [controls] at each start.\n",
    );
    let mut t = toml_edit::Table::new();
    for s in saved {
        let v = match &s.value {
            Value::Bool(b) => toml_edit::value(*b),
            Value::Int(i) => toml_edit::value(*i),
            Value::Float(f) => toml_edit::value(*f),
            Value::Text(x) => toml_edit::value(x.as_str()),
            Value::List(l) => toml_edit::value(l.iter().copied().collect::<toml_edit::Array>()),
        };
        t.insert(&s.name, v);
    }
    doc["controls"] = toml_edit::Item::Table(t);
    doc.to_string()
}

/// The settings a file keeps. A name not offered is refused, so that the
/// daemon, which writes the file, can set nothing else.
pub fn read_text(text: &str) -> Result<Vec<ControlSetting>, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[serde(default)]
        controls: toml::Table,
    }
    let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (name, v) in file.controls {
        if !OFFERED.contains(&name.as_str()) {
            return Err(format!("{name:?} is not a picture setting"));
        }
        let value = match v {
            toml::Value::Boolean(b) => Value::Bool(b),
            toml::Value::Integer(i) => Value::Int(i),
            toml::Value::String(s) => Value::Text(s),
            other => {
                return Err(format!(
                    "{name} = {}: not a picture setting's value",
                    other.type_str()
                ));
            }
        };
        out.push(ControlSetting { name, value });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brightness() -> Setting {
        Setting {
            name: "brightness",
            kind: Kind::Int {
                min: 0,
                max: 255,
                step: 1,
            },
            default: 128,
            value: 200,
            inactive: false,
        }
    }

    #[test]
    fn json_says_what_each_setting_takes() {
        let plf = Setting {
            name: "power_line_frequency",
            kind: Kind::Menu(vec![(0, "Disabled".into()), (1, "50 Hz".into())]),
            default: 1,
            value: 0,
            inactive: false,
        };
        let flip = Setting {
            name: "horizontal_flip",
            kind: Kind::Bool,
            default: 0,
            value: 1,
            inactive: false,
        };
        let v: Json = serde_json::from_str(&json(&[brightness(), plf, flip])).unwrap();
        let s = &v["settings"];
        assert_eq!(s[0]["type"], "int");
        assert_eq!(s[0]["max"], 255);
        assert_eq!(s[0]["value"], 200);
        assert_eq!(s[1]["items"][1], "50 Hz");
        assert_eq!(s[1]["value"], "Disabled");
        assert_eq!(s[1]["default"], "50 Hz");
        assert_eq!(s[2]["value"], true);
    }

    #[test]
    fn a_body_names_offered_settings_only() {
        let c = parse_json(
            br#"{"brightness": 140, "horizontal_flip": true, "power_line_frequency": "60 Hz"}"#,
        )
        .unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].value, Value::Int(140));
        let e = parse_json(br#"{"brightness": 1, "exposure_dynamic_framerate": 1}"#).unwrap_err();
        assert!(e.contains("not a picture setting"), "{e}");
        assert!(parse_json(b"[1]").unwrap_err().contains("JSON object"));
        assert!(parse_json(b"{}").unwrap_err().contains("no settings"));
        assert!(
            parse_json(br#"{"brightness": 1.5}"#)
                .unwrap_err()
                .contains("whole")
        );
        assert!(parse_json(br#"{"brightness": null}"#).is_err());
        assert!(
            parse_json(b"{\"brightness\": 1")
                .unwrap_err()
                .starts_with("not JSON")
        );
    }

    #[test]
    fn the_file_keeps_what_was_merged() {
        let mut saved = Vec::new();
        merge(
            &mut saved,
            &parse_json(br#"{"brightness": 140, "horizontal_flip": true}"#).unwrap(),
        );
        merge(&mut saved, &parse_json(br#"{"brightness": 90}"#).unwrap());
        assert_eq!(saved.len(), 2);
        let text = file_text(&saved);
        assert!(text.contains("brightness = 90\n"), "{text}");
        assert_eq!(read_text(&text).unwrap(), saved);
        assert!(read_text("[controls]\nzoom_absolute = 3\n").is_err());
        assert!(read_text("[users]\n").is_err());
        assert_eq!(read_text("").unwrap(), vec![]);
    }
}
