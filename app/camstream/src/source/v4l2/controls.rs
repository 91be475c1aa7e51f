//! Camera controls from the config: names as `v4l2-ctl --list-ctrls` prints
//! them (the driver's name, lower case, words joined by `_`), values as
//! numbers, booleans or menu item names. Pure, so it is tested without a
//! camera.

use std::fmt::Write;

use super::device::Control;
use super::sys::*;
use crate::source::controls::{ControlSetting, Value};
use anyhow::{Result, bail};

/// The name `v4l2-ctl` gives a control: "White Balance, Automatic" ->
/// `white_balance_automatic`.
pub fn key(name: &str) -> String {
    let mut out = String::new();
    let mut gap = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            if gap && !out.is_empty() {
                out.push('_');
            }
            gap = false;
            out.push(c.to_ascii_lowercase());
        } else {
            gap = true;
        }
    }
    out
}

fn kind_name(kind: u32) -> &'static str {
    match kind {
        V4L2_CTRL_TYPE_INTEGER => "int",
        V4L2_CTRL_TYPE_BOOLEAN => "bool",
        V4L2_CTRL_TYPE_MENU => "menu",
        V4L2_CTRL_TYPE_INTEGER_MENU => "intmenu",
        V4L2_CTRL_TYPE_BUTTON => "button",
        V4L2_CTRL_TYPE_INTEGER64 => "int64",
        V4L2_CTRL_TYPE_STRING => "str",
        V4L2_CTRL_TYPE_BITMASK => "bitmask",
        _ => "other",
    }
}

/// One line per control, as `camstream probe` and error messages print them.
pub fn describe(c: &Control, current: Option<i64>) -> String {
    let mut s = format!("{:<32} {:<7}", key(&c.name), kind_name(c.kind));
    match c.kind {
        V4L2_CTRL_TYPE_MENU | V4L2_CTRL_TYPE_INTEGER_MENU => {
            let items: Vec<String> = c.menu.iter().map(|(i, n)| format!("{i}={n}")).collect();
            let _ = write!(s, " {}", items.join(", "));
        }
        V4L2_CTRL_TYPE_BOOLEAN => {}
        _ => {
            let _ = write!(s, " min={} max={} step={}", c.min, c.max, c.step);
        }
    }
    let _ = write!(s, " default={}", c.default);
    if let Some(v) = current {
        let _ = write!(s, " value={v}");
    }
    if c.flags & V4L2_CTRL_FLAG_READ_ONLY != 0 {
        s.push_str(" (read-only)");
    }
    if c.flags & V4L2_CTRL_FLAG_INACTIVE != 0 {
        s.push_str(" (inactive)");
    }
    s
}

/// Resolves settings against the device's controls: which control, which
/// raw value. Errors name the setting and list what the device has.
/// Automatic modes come first, so that `auto_exposure = "Manual Mode"` is in
/// effect before `exposure_time_absolute` is written.
pub fn resolve<'c>(
    settings: &[ControlSetting],
    controls: &'c [Control],
) -> Result<Vec<(&'c Control, i64)>> {
    let mut out: Vec<(&Control, i64)> = Vec::new();
    for s in settings {
        let want = key(&s.name);
        let Some(c) = controls.iter().find(|c| key(&c.name) == want) else {
            let names: Vec<String> = controls.iter().map(|c| key(&c.name)).collect();
            bail!(
                "control {:?}: the camera has no such control; it has: {}",
                s.name,
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            );
        };
        let v = value_for(c, &s.value)
            .map_err(|why| anyhow::anyhow!("control {} = {}: {why}", key(&c.name), s.value))?;
        out.retain(|(o, _)| o.id != c.id);
        out.push((c, v));
    }
    out.sort_by_key(|(c, _)| !key(&c.name).contains("auto"));
    Ok(out)
}

fn value_for(c: &Control, v: &Value) -> Result<i64, String> {
    if c.flags & V4L2_CTRL_FLAG_READ_ONLY != 0 {
        return Err("read-only".into());
    }
    let n = match (c.kind, v) {
        (V4L2_CTRL_TYPE_BOOLEAN, Value::Bool(b)) => i64::from(*b),
        (V4L2_CTRL_TYPE_BOOLEAN, Value::Int(i @ (0 | 1))) => *i,
        (V4L2_CTRL_TYPE_BOOLEAN, _) => return Err("use true or false".into()),
        (V4L2_CTRL_TYPE_MENU | V4L2_CTRL_TYPE_INTEGER_MENU, Value::Text(t)) => c
            .menu
            .iter()
            .find(|(_, n)| key(n) == key(t))
            .map(|(i, _)| i64::from(*i))
            .ok_or_else(|| format!("not a menu item; items: {}", menu_list(c)))?,
        (V4L2_CTRL_TYPE_MENU | V4L2_CTRL_TYPE_INTEGER_MENU, Value::Int(i)) => {
            if !c.menu.iter().any(|(m, _)| i64::from(*m) == *i) {
                return Err(format!("not a menu item; items: {}", menu_list(c)));
            }
            *i
        }
        (V4L2_CTRL_TYPE_MENU | V4L2_CTRL_TYPE_INTEGER_MENU, _) => {
            return Err(format!(
                "use an item's number or name; items: {}",
                menu_list(c)
            ));
        }
        (V4L2_CTRL_TYPE_INTEGER | V4L2_CTRL_TYPE_INTEGER64, Value::Int(i)) => {
            if *i < c.min || *i > c.max {
                return Err(format!("out of range ({}..={})", c.min, c.max));
            }
            if c.step > 1 && (*i - c.min) % c.step != 0 {
                return Err(format!("must be {} plus a multiple of {}", c.min, c.step));
            }
            *i
        }
        (V4L2_CTRL_TYPE_INTEGER | V4L2_CTRL_TYPE_INTEGER64, _) => {
            return Err("use a number".into());
        }
        _ => {
            return Err(format!(
                "{} controls cannot be set from the config",
                kind_name(c.kind)
            ));
        }
    };
    Ok(n)
}

fn menu_list(c: &Control) -> String {
    let items: Vec<String> = c.menu.iter().map(|(i, n)| format!("{i} ({n})")).collect();
    items.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctrl(id: u32, name: &str, kind: u32, min: i64, max: i64, menu: &[&str]) -> Control {
        Control {
            id,
            name: name.into(),
            kind,
            min,
            max,
            step: 1,
            default: min,
            flags: 0,
            menu: menu
                .iter()
                .enumerate()
                .filter(|(_, n)| !n.is_empty())
                .map(|(i, n)| (i as u32, n.to_string()))
                .collect(),
        }
    }

    /// What uvcvideo reports for a Logitech C920 on Linux 6.1.
    fn c920() -> Vec<Control> {
        vec![
            ctrl(
                0x0098_0900,
                "Brightness",
                V4L2_CTRL_TYPE_INTEGER,
                0,
                255,
                &[],
            ),
            ctrl(0x0098_0901, "Contrast", V4L2_CTRL_TYPE_INTEGER, 0, 255, &[]),
            ctrl(
                0x0098_090c,
                "White Balance, Automatic",
                V4L2_CTRL_TYPE_BOOLEAN,
                0,
                1,
                &[],
            ),
            ctrl(
                0x0098_0918,
                "Power Line Frequency",
                V4L2_CTRL_TYPE_MENU,
                0,
                2,
                &["Disabled", "50 Hz", "60 Hz"],
            ),
            ctrl(
                0x009a_0901,
                "Auto Exposure",
                V4L2_CTRL_TYPE_MENU,
                0,
                3,
                &["", "Manual Mode", "", "Aperture Priority Mode"],
            ),
            ctrl(
                0x009a_0902,
                "Exposure Time, Absolute",
                V4L2_CTRL_TYPE_INTEGER,
                3,
                2047,
                &[],
            ),
        ]
    }

    fn set(s: &str) -> ControlSetting {
        s.parse().unwrap()
    }

    #[test]
    fn names_like_v4l2_ctl() {
        assert_eq!(key("White Balance, Automatic"), "white_balance_automatic");
        assert_eq!(key("Exposure Time, Absolute"), "exposure_time_absolute");
        assert_eq!(key("  Power Line Frequency "), "power_line_frequency");
        assert_eq!(key("50 Hz"), "50_hz");
    }

    #[test]
    fn values_resolve_and_auto_modes_go_first() {
        let c = c920();
        let r = resolve(
            &[
                set("exposure_time_absolute=250"),
                set("auto_exposure=Manual Mode"),
                set("power_line_frequency=50 Hz"),
                set("white_balance_automatic=false"),
                set("brightness=100"),
                set("brightness=120"),
            ],
            &c,
        )
        .unwrap();
        let got: Vec<(String, i64)> = r.iter().map(|(c, v)| (key(&c.name), *v)).collect();
        assert_eq!(
            got,
            [
                ("auto_exposure".to_string(), 1),
                ("white_balance_automatic".to_string(), 0),
                ("exposure_time_absolute".to_string(), 250),
                ("power_line_frequency".to_string(), 1),
                ("brightness".to_string(), 120),
            ]
        );
    }

    #[test]
    fn clear_errors() {
        let c = c920();
        let e = resolve(&[set("sharpness=3")], &c).unwrap_err().to_string();
        assert!(e.starts_with("control \"sharpness\": the camera has no such control; it has: brightness, contrast, white_balance_automatic, power_line_frequency, auto_exposure, exposure_time_absolute"), "{e}");
        let e = resolve(&[set("brightness=300")], &c)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "control brightness = 300: out of range (0..=255)");
        let e = resolve(&[set("auto_exposure=2")], &c)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not a menu item; items: 1 (Manual Mode), 3 (Aperture Priority Mode)"),
            "{e}"
        );
        let e = resolve(&[set("brightness=high")], &c)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("use a number"), "{e}");
        assert!(
            resolve(&[set("sharpness=3")], &[])
                .unwrap_err()
                .to_string()
                .ends_with("it has: none")
        );
    }
}
