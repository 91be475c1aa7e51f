//! ONVIF's Imaging service (ver20): the camera's picture settings as
//! ImagingSettings20 (brightness, colour saturation, contrast, sharpness,
//! exposure, white balance), their options, and SetImagingSettings read
//! from a request. What the camera has is the daemon's to say; a setting
//! it lacks is left out of the answers and refused in a change.

use std::fmt::Write;

use crate::ns;
use crate::responses::envelope;
use crate::soap::{Fault, Request};
use crate::xml::{XML_SPACE, xs_float};

/// A value and the range it may take (the camera's own units, but for
/// ExposureTime: microseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    pub value: f64,
    pub min: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Auto,
    Manual,
}

impl Mode {
    fn text(self) -> &'static str {
        match self {
            Mode::Auto => "AUTO",
            Mode::Manual => "MANUAL",
        }
    }

    fn parse(s: &str) -> Option<Mode> {
        match s.trim_matches(XML_SPACE) {
            "AUTO" => Some(Mode::Auto),
            "MANUAL" => Some(Mode::Manual),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Exposure {
    /// The modes the camera offers.
    pub modes: Vec<Mode>,
    pub mode: Mode,
    /// Microseconds, where the camera takes a time.
    pub time: Option<Level>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WhiteBalance {
    pub modes: Vec<Mode>,
    pub mode: Mode,
}

/// The picture settings a camera has, as ONVIF names them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Imaging {
    pub brightness: Option<Level>,
    pub color_saturation: Option<Level>,
    pub contrast: Option<Level>,
    pub sharpness: Option<Level>,
    pub exposure: Option<Exposure>,
    pub white_balance: Option<WhiteBalance>,
}

/// What a SetImagingSettings asks to change (what it leaves out stays).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    pub brightness: Option<f64>,
    pub color_saturation: Option<f64>,
    pub contrast: Option<f64>,
    pub sharpness: Option<f64>,
    pub exposure_mode: Option<Mode>,
    /// Microseconds.
    pub exposure_time: Option<f64>,
    pub white_balance_mode: Option<Mode>,
}

const TIMG: &str = ns::IMAGING;

fn settings_invalid(why: &str) -> Fault {
    Fault {
        subcodes: &["ter:InvalidArgVal", "ter:SettingsInvalid"],
        ..Fault::sender(&[], why)
    }
}

/// The VideoSourceToken a request names ("" when it names none).
pub fn source_token(soap: &Request) -> &str {
    soap.arg(&["VideoSourceToken"]).unwrap_or("")
}

/// SetImagingSettings' ImagingSettings, checked against what the camera
/// has: a setting it lacks, a value out of its range or a mode it does
/// not offer is ter:SettingsInvalid, and nothing is changed.
pub fn parse_set(soap: &Request, has: &Imaging) -> Result<Change, Fault> {
    let level = |name: &str, have: Option<Level>| -> Result<Option<f64>, Fault> {
        let Some(text) = soap.arg(&["ImagingSettings", name]) else {
            return Ok(None);
        };
        let v = xs_float(text)
            .ok_or_else(|| settings_invalid(&format!("{name} is not an xs:float")))?;
        let have = have.ok_or_else(|| settings_invalid(&format!("this camera has no {name}")))?;
        if v < have.min || v > have.max {
            return Err(settings_invalid(&format!(
                "{name} {v} is outside {} to {}",
                have.min, have.max
            )));
        }
        Ok(Some(v))
    };
    let mode = |path: &[&str], modes: Option<&[Mode]>, what: &str| -> Result<Option<Mode>, Fault> {
        let Some(text) = soap.arg(path) else {
            return Ok(None);
        };
        let m = Mode::parse(text)
            .ok_or_else(|| settings_invalid(&format!("{what} Mode is AUTO or MANUAL")))?;
        if !modes.is_some_and(|ms| ms.contains(&m)) {
            return Err(settings_invalid(&format!(
                "this camera has no {what} mode {}",
                m.text()
            )));
        }
        Ok(Some(m))
    };
    let exposure = has.exposure.as_ref();
    let change = Change {
        brightness: level("Brightness", has.brightness)?,
        color_saturation: level("ColorSaturation", has.color_saturation)?,
        contrast: level("Contrast", has.contrast)?,
        sharpness: level("Sharpness", has.sharpness)?,
        exposure_mode: mode(
            &["ImagingSettings", "Exposure", "Mode"],
            exposure.map(|e| e.modes.as_slice()),
            "Exposure",
        )?,
        exposure_time: match soap.arg(&["ImagingSettings", "Exposure", "ExposureTime"]) {
            None => None,
            Some(text) => {
                let v = xs_float(text)
                    .ok_or_else(|| settings_invalid("ExposureTime is not an xs:float"))?;
                let have = exposure
                    .and_then(|e| e.time)
                    .ok_or_else(|| settings_invalid("this camera has no ExposureTime"))?;
                if v < have.min || v > have.max {
                    return Err(settings_invalid(&format!(
                        "ExposureTime {v} is outside {} to {} us",
                        have.min, have.max
                    )));
                }
                Some(v)
            }
        },
        white_balance_mode: mode(
            &["ImagingSettings", "WhiteBalance", "Mode"],
            has.white_balance.as_ref().map(|w| w.modes.as_slice()),
            "WhiteBalance",
        )?,
    };
    if change == Change::default() {
        return Err(settings_invalid("no setting this camera has"));
    }
    Ok(change)
}

/// The ImagingSettings20 elements (schema order), with `prefix` for the
/// element namespace.
fn settings_elements(i: &Imaging) -> String {
    let mut s = String::new();
    for (name, l) in [
        ("Brightness", i.brightness),
        ("ColorSaturation", i.color_saturation),
        ("Contrast", i.contrast),
    ] {
        if let Some(l) = l {
            let _ = write!(s, "<tt:{name}>{}</tt:{name}>", l.value);
        }
    }
    if let Some(e) = &i.exposure {
        let _ = write!(s, "<tt:Exposure><tt:Mode>{}</tt:Mode>", e.mode.text());
        if let Some(t) = e.time {
            let _ = write!(s, "<tt:ExposureTime>{}</tt:ExposureTime>", t.value);
        }
        s.push_str("</tt:Exposure>");
    }
    if let Some(l) = i.sharpness {
        let _ = write!(s, "<tt:Sharpness>{}</tt:Sharpness>", l.value);
    }
    if let Some(w) = &i.white_balance {
        let _ = write!(
            s,
            "<tt:WhiteBalance><tt:Mode>{}</tt:Mode></tt:WhiteBalance>",
            w.mode.text()
        );
    }
    s
}

/// GetVideoSources' Imaging (the ver10 ImagingSettings): the levels only,
/// as its Exposure and WhiteBalance need values the camera does not have
/// (a window, gains).
pub fn video_source_imaging(i: &Imaging) -> String {
    let mut s = String::new();
    for (name, l) in [
        ("Brightness", i.brightness),
        ("ColorSaturation", i.color_saturation),
        ("Contrast", i.contrast),
        ("Sharpness", i.sharpness),
    ] {
        if let Some(l) = l {
            let _ = write!(s, "<tt:{name}>{}</tt:{name}>", l.value);
        }
    }
    if s.is_empty() {
        return s;
    }
    format!("<tt:Imaging>{s}</tt:Imaging>")
}

fn response(op: &str, inner: &str) -> String {
    envelope(&format!(
        r#"<timg:{op}Response xmlns:timg="{TIMG}">{inner}</timg:{op}Response>"#
    ))
}

pub fn imaging_settings(i: &Imaging) -> String {
    response(
        "GetImagingSettings",
        &format!(
            "<timg:ImagingSettings>{}</timg:ImagingSettings>",
            settings_elements(i)
        ),
    )
}

pub fn set_imaging_settings() -> String {
    response("SetImagingSettings", "")
}

/// GetOptions: each setting's range, the modes offered.
pub fn options(i: &Imaging) -> String {
    let range = |name: &str, l: Option<Level>| {
        l.map(|l| {
            format!(
                "<tt:{name}><tt:Min>{}</tt:Min><tt:Max>{}</tt:Max></tt:{name}>",
                l.min, l.max
            )
        })
        .unwrap_or_default()
    };
    let mut s = String::new();
    s.push_str(&range("Brightness", i.brightness));
    s.push_str(&range("ColorSaturation", i.color_saturation));
    s.push_str(&range("Contrast", i.contrast));
    if let Some(e) = &i.exposure {
        s.push_str("<tt:Exposure>");
        for m in &e.modes {
            let _ = write!(s, "<tt:Mode>{}</tt:Mode>", m.text());
        }
        s.push_str(&range("ExposureTime", e.time));
        s.push_str("</tt:Exposure>");
    }
    s.push_str(&range("Sharpness", i.sharpness));
    if let Some(w) = &i.white_balance {
        s.push_str("<tt:WhiteBalance>");
        for m in &w.modes {
            let _ = write!(s, "<tt:Mode>{}</tt:Mode>", m.text());
        }
        s.push_str("</tt:WhiteBalance>");
    }
    response(
        "GetOptions",
        &format!("<timg:ImagingOptions>{s}</timg:ImagingOptions>"),
    )
}

/// GetStatus: no focus to report (the status's one part).
pub fn status() -> String {
    response("GetStatus", "<timg:Status/>")
}

/// GetMoveOptions: no focus to move.
pub fn move_options() -> String {
    response("GetMoveOptions", "<timg:MoveOptions/>")
}

pub fn service_capabilities_element() -> String {
    format!(
        r#"<timg:Capabilities xmlns:timg="{TIMG}" ImageStabilization="false" Presets="false" AdaptablePreset="false"/>"#
    )
}

pub fn service_capabilities() -> String {
    response("GetServiceCapabilities", &service_capabilities_element())
}

/// The source token in a fault's words, bounded and escaped by the fault.
pub fn no_source(token: &str) -> Fault {
    Fault::invalid_arg_val("ter:NoSource", &format!("no video source {token:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xml::Limits;

    fn vivid() -> Imaging {
        let l = |v| {
            Some(Level {
                value: v,
                min: 0.0,
                max: 255.0,
            })
        };
        Imaging {
            brightness: l(128.0),
            color_saturation: l(128.0),
            contrast: l(128.0),
            ..Imaging::default()
        }
    }

    fn set(body: &str) -> Request {
        let xml = format!(
            r#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:timg="{TIMG}" xmlns:tt="http://www.onvif.org/ver10/schema"><s:Body><timg:SetImagingSettings><timg:VideoSourceToken>camera</timg:VideoSourceToken><timg:ImagingSettings>{body}</timg:ImagingSettings></timg:SetImagingSettings></s:Body></s:Envelope>"#
        );
        Request::parse(xml.as_bytes(), &Limits::default()).unwrap()
    }

    #[test]
    fn a_change_is_checked_against_what_the_camera_has() {
        let c = parse_set(
            &set("<tt:Brightness>200</tt:Brightness><tt:Contrast> 10.0 </tt:Contrast>"),
            &vivid(),
        )
        .unwrap();
        assert_eq!(c.brightness, Some(200.0));
        assert_eq!(c.contrast, Some(10.0));
        assert_eq!(source_token(&set("")), "camera");
        for (body, why) in [
            ("<tt:Brightness>300</tt:Brightness>", "outside 0 to 255"),
            ("<tt:Brightness>NaN</tt:Brightness>", "not an xs:float"),
            ("<tt:Sharpness>3</tt:Sharpness>", "no Sharpness"),
            (
                "<tt:Exposure><tt:Mode>MANUAL</tt:Mode></tt:Exposure>",
                "no Exposure mode MANUAL",
            ),
            (
                "<tt:WhiteBalance><tt:Mode>OFF</tt:Mode></tt:WhiteBalance>",
                "AUTO or MANUAL",
            ),
            ("", "no setting"),
        ] {
            let f = parse_set(&set(body), &vivid()).unwrap_err();
            assert!(f.reason.contains(why), "{body}: {}", f.reason);
            assert_eq!(f.subcodes, &["ter:InvalidArgVal", "ter:SettingsInvalid"]);
        }
        let mut uvc = vivid();
        uvc.exposure = Some(Exposure {
            modes: vec![Mode::Auto, Mode::Manual],
            mode: Mode::Auto,
            time: Some(Level {
                value: 15600.0,
                min: 300.0,
                max: 500_000.0,
            }),
        });
        let c = parse_set(
            &set("<tt:Exposure><tt:Mode>MANUAL</tt:Mode><tt:ExposureTime>20000</tt:ExposureTime></tt:Exposure>"),
            &uvc,
        )
        .unwrap();
        assert_eq!(
            (c.exposure_mode, c.exposure_time),
            (Some(Mode::Manual), Some(20000.0))
        );
    }

    #[test]
    fn answers_follow_the_schema_order() {
        let mut i = vivid();
        i.sharpness = Some(Level {
            value: 3.0,
            min: 0.0,
            max: 7.0,
        });
        i.exposure = Some(Exposure {
            modes: vec![Mode::Auto],
            mode: Mode::Auto,
            time: None,
        });
        i.white_balance = Some(WhiteBalance {
            modes: vec![Mode::Auto, Mode::Manual],
            mode: Mode::Manual,
        });
        let s = imaging_settings(&i);
        let order = [
            "Brightness>",
            "ColorSaturation>",
            "Contrast>",
            "Exposure>",
            "Sharpness>",
            "WhiteBalance>",
        ];
        let at: Vec<usize> = order.iter().map(|o| s.find(o).unwrap()).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{s}");
        let o = options(&i);
        assert!(
            o.contains("<tt:Brightness><tt:Min>0</tt:Min><tt:Max>255</tt:Max></tt:Brightness>"),
            "{o}"
        );
        assert!(o.contains(
            "<tt:WhiteBalance><tt:Mode>AUTO</tt:Mode><tt:Mode>MANUAL</tt:Mode></tt:WhiteBalance>"
        ));
        assert_eq!(video_source_imaging(&Imaging::default()), "");
        assert!(video_source_imaging(&i).ends_with("<tt:Sharpness>3</tt:Sharpness></tt:Imaging>"));
    }
}
