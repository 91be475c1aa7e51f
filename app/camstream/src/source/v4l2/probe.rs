//! `camstream probe`'s V4L2 section.

use std::path::Path;

use anyhow::{Result, anyhow, bail};

use super::controls;
use super::device::{self, Device};
use super::select::{self, fourcc_name};
use super::sys;

/// `camstream probe [DEVICE]`: what each capture device offers, like
/// `v4l2-ctl --list-formats-ext --list-ctrls`.
pub fn probe(device: Option<&Path>) -> Result<String> {
    use std::fmt::Write;
    let paths = match device {
        Some(p) => vec![p.to_path_buf()],
        None => device::list(),
    };
    if paths.is_empty() {
        bail!("no V4L2 devices (/dev/video*)");
    }
    let mut s = String::new();
    for path in &paths {
        let dev = match Device::open(path) {
            Ok(d) => d,
            Err(e) if device.is_some() => return Err(anyhow!("{}: {e}", path.display())),
            Err(e) => {
                let _ = writeln!(s, "{}: {e}\n", path.display());
                continue;
            }
        };
        let c = &dev.caps;
        let mut kinds = Vec::new();
        if c.can_capture() {
            kinds.push("video capture");
        }
        if c.device_caps & sys::V4L2_CAP_VIDEO_CAPTURE_MPLANE != 0 {
            kinds.push("multi-planar capture (unsupported)");
        }
        if c.can_stream() {
            kinds.push("streaming");
        }
        if kinds.is_empty() {
            kinds.push("no video capture");
        }
        let _ = writeln!(
            s,
            "{}: {} (driver {}, {}): {}",
            path.display(),
            c.card,
            c.driver,
            c.bus_info,
            kinds.join(", ")
        );
        if !c.can_capture() {
            s.push('\n');
            continue;
        }
        let _ = writeln!(s, "  formats:");
        for f in dev.formats((u32::MAX, u32::MAX)).unwrap_or_default() {
            let usable = if select::is_supported(f.fourcc) {
                ""
            } else {
                " (not used by camstream)"
            };
            let _ = writeln!(
                s,
                "    {} ({}){usable}",
                fourcc_name(f.fourcc),
                f.description
            );
            if let select::Sizes::Stepwise { min, max, step } = f.sizes {
                let _ = writeln!(
                    s,
                    "      {}x{} to {}x{}, steps {}x{}",
                    min.0, min.1, max.0, max.1, step.0, step.1
                );
                continue;
            }
            for ((w, h), rates) in &f.rates {
                let r = match rates {
                    device::Rates::Discrete(v) => {
                        let v: Vec<String> = v.iter().map(|f| format!("{f}")).collect();
                        format!("{} fps", v.join(", "))
                    }
                    device::Rates::Range { min, max } => format!("{min} to {max} fps"),
                    device::Rates::Unknown => "rates not listed".into(),
                };
                let _ = writeln!(s, "      {w}x{h}: {r}");
            }
        }
        let _ = writeln!(s, "  controls:");
        for ctl in dev.controls().unwrap_or_default() {
            let cur = dev.get_control(&ctl).ok();
            let _ = writeln!(s, "    {}", controls::describe(&ctl, cur));
        }
        s.push('\n');
    }
    Ok(s)
}
