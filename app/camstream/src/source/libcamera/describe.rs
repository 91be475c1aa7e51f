//! What libcamera says of its cameras, as shim.cpp writes it (tab-separated
//! lines: `camera ID`, `model NAME`, `location WHERE`, `array WxH`,
//! `mode FORMAT WxH`, `output FORMAT MIN MAX`, `control NAME ID TYPE MIN MAX
//! DEFAULT`), read into plain values. Pure: tested without a camera.
// Used by the libcamera source; tested in every build.
#![cfg_attr(not(feature = "libcamera"), allow(dead_code))]

use std::fmt::Write;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CameraDesc {
    pub id: String,
    pub model: String,
    /// front, back, external (a USB camera), or empty if libcamera does not say.
    pub location: String,
    pub array: String,
    /// Sensor modes: raw format and size.
    pub modes: Vec<(String, String)>,
    /// Processed formats camstream takes: format, smallest and largest size.
    pub outputs: Vec<(String, String, String)>,
    pub controls: Vec<ControlDesc>,
}

impl CameraDesc {
    /// USB cameras are also libcamera cameras (its uvcvideo pipeline), but
    /// camstream reads them straight through V4L2, keeping their MJPEG.
    pub fn is_external(&self) -> bool {
        self.location == "external"
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ControlDesc {
    pub name: String,
    pub id: u32,
    /// bool, byte, int32, int64, float, string, rectangle, size or other.
    pub kind: String,
    pub min: String,
    pub max: String,
    pub default: String,
}

/// The controls libcamera 0.7's rpi/vc4 pipeline gives an IMX708 (Camera
/// Module 3), as `cam --list-controls` prints them (a subset), for tests.
#[cfg(test)]
pub fn imx708() -> Vec<ControlDesc> {
    let c = ControlDesc::listed;
    vec![
        c("AeEnable", 1, "bool", "false", "true", "true"),
        c("ExposureTime", 6, "int32", "26", "112015443", "20000"),
        c(
            "AnalogueGain",
            7,
            "float",
            "1.122807",
            "16.000000",
            "1.000000",
        ),
        c("AwbEnable", 12, "bool", "false", "true", "true"),
        c("AwbMode", 13, "int32", "0", "7", "0"),
        c("ColourGains", 15, "float", "0.000000", "32.000000", ""),
        c(
            "Brightness",
            9,
            "float",
            "-1.000000",
            "1.000000",
            "0.000000",
        ),
        c("Contrast", 10, "float", "0.000000", "32.000000", "1.000000"),
        c("AfMode", 40, "int32", "0", "2", "0"),
        c(
            "LensPosition",
            45,
            "float",
            "0.000000",
            "15.000000",
            "1.000000",
        ),
        c(
            "ScalerCrop",
            22,
            "rectangle",
            "(0, 0)/64x64",
            "(0, 0)/4608x2592",
            "",
        ),
        c(
            "FrameDurationLimits",
            25,
            "int64",
            "[ 33333, 33333 ]",
            "[ 120000, 120000 ]",
            "",
        ),
    ]
}

#[cfg(test)]
impl ControlDesc {
    /// A control as `cam --list-controls` prints it, for tests.
    pub fn listed(name: &str, id: u32, kind: &str, min: &str, max: &str, default: &str) -> Self {
        ControlDesc {
            name: name.into(),
            id,
            kind: kind.into(),
            min: min.into(),
            max: max.into(),
            default: default.into(),
        }
    }
}

pub fn parse(text: &str) -> Vec<CameraDesc> {
    let mut cams: Vec<CameraDesc> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f[0] == "camera" && f.len() == 2 {
            cams.push(CameraDesc {
                id: f[1].to_string(),
                ..CameraDesc::default()
            });
            continue;
        }
        let Some(c) = cams.last_mut() else { continue };
        match (f[0], f.len()) {
            ("model", 2) => c.model = f[1].to_string(),
            ("location", 2) => c.location = f[1].to_string(),
            ("array", 2) => c.array = f[1].to_string(),
            ("mode", 3) => c.modes.push((f[1].to_string(), f[2].to_string())),
            ("output", 4) => c.outputs.push((f[1].into(), f[2].into(), f[3].into())),
            ("control", 7) => {
                if let Ok(id) = f[2].parse() {
                    c.controls.push(ControlDesc {
                        name: f[1].to_string(),
                        id,
                        kind: f[3].to_string(),
                        min: f[4].to_string(),
                        max: f[5].to_string(),
                        default: f[6].to_string(),
                    });
                }
            }
            _ => {}
        }
    }
    cams
}

/// `camstream probe`'s section for libcamera cameras.
pub fn report(version: &str, cams: &[CameraDesc]) -> String {
    let mut s = String::new();
    if cams.is_empty() {
        let _ = writeln!(s, "libcamera {version}: no cameras\n");
        return s;
    }
    for c in cams {
        let _ = writeln!(
            s,
            "libcamera:{} ({}{}{}), libcamera {version}",
            c.id,
            if c.model.is_empty() {
                "unnamed"
            } else {
                &c.model
            },
            if c.location.is_empty() { "" } else { ", " },
            c.location
        );
        if c.is_external() {
            let _ = writeln!(
                s,
                "  a USB camera: source = \"auto\" reads it through V4L2 (below)"
            );
        }
        if !c.array.is_empty() {
            let _ = writeln!(s, "  pixel array: {}", c.array);
        }
        if !c.modes.is_empty() {
            let _ = writeln!(s, "  sensor modes:");
            for (f, size) in &c.modes {
                let _ = writeln!(s, "    {f} {size}");
            }
        }
        let _ = writeln!(s, "  streams camstream takes:");
        if c.outputs.is_empty() {
            let _ = writeln!(s, "    none (no YUV420, NV12, BGR888 or RGB888)");
        }
        for (f, lo, hi) in &c.outputs {
            let _ = writeln!(s, "    {f} {lo} to {hi}");
        }
        let _ = writeln!(s, "  controls:");
        for k in &c.controls {
            let _ = writeln!(
                s,
                "    {} ({}): {} to {}, default {}",
                k.name, k.kind, k.min, k.max, k.default
            );
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As shim.cpp described vimc's camera under libcamera 0.0.3.
    pub const VIMC: &str = "camera\tplatform/vimc.0 Sensor B\nmodel\tSensor B\nlocation\t\n\
        array\t4096x2160\noutput\tBGR888\t48x48\t4096x2160\noutput\tRGB888\t48x48\t4096x2160\n\
        control\tBrightness\t9\tfloat\t-1.000000\t1.000000\t0.000000\n\
        control\tContrast\t10\tfloat\t0.000000\t2.000000\t1.000000\n\
        control\tSaturation\t12\tfloat\t0.000000\t2.000000\t1.000000\n";

    #[test]
    fn parses_what_the_shim_writes() {
        let cams = parse(&format!(
            "{VIMC}camera\tusb-1\nlocation\texternal\nbogus line\n"
        ));
        assert_eq!(cams.len(), 2);
        let v = &cams[0];
        assert_eq!(v.id, "platform/vimc.0 Sensor B");
        assert_eq!(v.model, "Sensor B");
        assert!(!v.is_external());
        assert_eq!(
            v.outputs[0],
            ("BGR888".into(), "48x48".into(), "4096x2160".into())
        );
        assert_eq!(v.controls.len(), 3);
        assert_eq!(v.controls[0].id, 9);
        assert_eq!(v.controls[0].kind, "float");
        assert!(cams[1].is_external());
        let r = report("v0.0.3", &cams);
        assert!(
            r.contains("libcamera:platform/vimc.0 Sensor B (Sensor B), libcamera v0.0.3"),
            "{r}"
        );
        assert!(
            r.contains("    Brightness (float): -1.000000 to 1.000000, default 0.000000"),
            "{r}"
        );
        assert!(r.contains("libcamera:usb-1 (unnamed, external)"), "{r}");
        assert_eq!(report("v0.7.0", &[]), "libcamera v0.7.0: no cameras\n\n");
    }
}
