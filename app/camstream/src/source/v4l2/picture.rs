//! Picture settings on a V4L2 camera: its controls among
//! [`crate::source::picture::OFFERED`], read and set through the device.

use std::sync::Mutex;

use super::controls::{key, resolve};
use super::device::{Control, Device};
use super::sys::*;
use crate::source::controls::ControlSetting;
use crate::source::picture::{Controls, Kind, OFFERED, Setting};

/// An open camera's picture settings, through a descriptor of their own.
pub struct Camera {
    dev: Device,
    known: Mutex<Vec<Setting>>,
}

impl Camera {
    /// At open, where the capture's own ioctls are.
    pub fn new(dev: &Device) -> std::io::Result<Camera> {
        let dev = dev.try_clone()?;
        let known = Mutex::new(settings(&dev));
        Ok(Camera { dev, known })
    }

    fn know(&self, now: &[Setting]) {
        now.clone_into(&mut self.known.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

impl Controls for Camera {
    fn known(&self) -> Vec<Setting> {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn read(&self) -> Vec<Setting> {
        let now = settings(&self.dev);
        self.know(&now);
        now
    }

    fn set(&self, changes: &[ControlSetting]) -> Result<(), String> {
        let r = set(&self.dev, changes);
        // Known as they are now: some set, or put back.
        self.read();
        r
    }
}

/// The offered controls the camera has, with their values now.
pub fn settings(dev: &Device) -> Vec<Setting> {
    let Ok(all) = dev.controls() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for name in OFFERED {
        let Some(c) = all.iter().find(|c| key(&c.name) == name) else {
            continue;
        };
        if c.flags & V4L2_CTRL_FLAG_READ_ONLY != 0 {
            continue;
        }
        let kind = match c.kind {
            V4L2_CTRL_TYPE_BOOLEAN => Kind::Bool,
            V4L2_CTRL_TYPE_INTEGER | V4L2_CTRL_TYPE_INTEGER64 => Kind::Int {
                min: c.min,
                max: c.max,
                step: c.step.max(1),
            },
            V4L2_CTRL_TYPE_MENU => Kind::Menu(
                c.menu
                    .iter()
                    .map(|(i, n)| (i64::from(*i), n.clone()))
                    .collect(),
            ),
            _ => continue,
        };
        let Ok(value) = dev.get_control(c) else {
            continue;
        };
        out.push(Setting {
            name,
            kind,
            default: c.default,
            value,
            inactive: c.flags & V4L2_CTRL_FLAG_INACTIVE != 0,
        });
    }
    out
}

/// Sets `changes`, all or none: each is checked against the camera's
/// controls before any is set, and one the driver refuses puts back those
/// set before it.
pub fn set(dev: &Device, changes: &[ControlSetting]) -> Result<(), String> {
    if let Some(c) = changes.iter().find(|c| !OFFERED.contains(&c.name.as_str())) {
        return Err(format!("{:?} is not a picture setting", c.name));
    }
    let all = dev
        .controls()
        .map_err(|e| format!("listing the camera's controls: {e}"))?;
    let wanted = resolve(changes, &all).map_err(|e| format!("{e:#}"))?;
    let mut before: Vec<(&Control, i64)> = Vec::with_capacity(wanted.len());
    for (c, _) in &wanted {
        let v = dev
            .get_control(c)
            .map_err(|e| format!("reading {}: {e}", key(&c.name)))?;
        before.push((c, v));
    }
    for (i, (c, v)) in wanted.iter().enumerate() {
        if let Err(e) = dev.set_control(c, *v) {
            for (c, old) in before[..i].iter().rev() {
                let _ = dev.set_control(c, *old);
            }
            return Err(format!(
                "the camera refused {} = {v} ({e}); nothing was changed",
                key(&c.name)
            ));
        }
    }
    Ok(())
}

/// The settings kept from the page or ONVIF, set at open: one by one, so
/// that one the camera no longer takes (another camera plugged in) is
/// logged and the rest still set.
pub fn apply_kept(dev: &Device, kept: &[ControlSetting]) {
    for k in kept {
        if let Err(why) = set(dev, std::slice::from_ref(k)) {
            log::warn!(
                "{}: picture setting {} = {} not set: {why}",
                dev.path.display(),
                k.name,
                k.value
            );
        }
    }
}
