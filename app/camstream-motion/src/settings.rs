//! What a user sets: how sensitive, what to ignore, how long.

use std::fmt;

/// A part of the picture, in fractions of its width and height (0 to 1)
/// from its top left corner: sizes of the picture change (the sub-stream's,
/// ONVIF's SetVideoEncoderConfiguration), fractions stay right.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    pub x: f32,
    pub y: f32,
    pub w: f32,
    pub h: f32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// 1 (only large, strong changes) to 100 (the faintest): the change of
    /// a cell's brightness that counts, 40 levels of 255 at 1, 4 at 100.
    pub sensitivity: u8,
    /// The share of the picture (the cells not ignored) that must change,
    /// in per cent.
    pub min_area: f32,
    /// How long change must last before it is motion (ms).
    pub min_duration_ms: u32,
    /// How long without change ends motion (ms).
    pub hold_ms: u32,
    /// Parts of the picture never looked at (a road, a tree, a clock).
    pub ignore: Vec<Rect>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            sensitivity: 50,
            min_area: 1.0,
            min_duration_ms: 500,
            hold_ms: 3000,
            ignore: Vec::new(),
        }
    }
}

/// A setting out of its range: which, and what it may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError(pub String);

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SettingsError {}

impl Settings {
    /// Each value in its range, or what is wrong.
    pub fn check(&self) -> Result<(), SettingsError> {
        let bad = |s: String| Err(SettingsError(s));
        if !(1..=100).contains(&self.sensitivity) {
            return bad(format!("sensitivity {} (1 to 100)", self.sensitivity));
        }
        if !(self.min_area > 0.0 && self.min_area <= 100.0) {
            return bad(format!(
                "min_area {} (more than 0, at most 100 per cent)",
                self.min_area
            ));
        }
        if self.min_duration_ms > 60_000 || self.hold_ms > 600_000 {
            return bad("min_duration at most 60 s, hold at most 600 s".into());
        }
        if self.ignore.len() > 16 {
            return bad(format!(
                "{} regions to ignore (at most 16)",
                self.ignore.len()
            ));
        }
        for r in &self.ignore {
            let inside = |v: f32| (0.0..=1.0).contains(&v);
            if !(inside(r.x)
                && inside(r.y)
                && r.w > 0.0
                && r.h > 0.0
                && inside(r.x + r.w)
                && inside(r.y + r.h))
            {
                return bad(format!(
                    "region to ignore [{}, {}, {}, {}]: x, y, width and height as fractions of the picture, inside it",
                    r.x, r.y, r.w, r.h
                ));
            }
        }
        Ok(())
    }

    /// The change of a cell's mean brightness (0-255) that counts.
    pub fn threshold(&self) -> u32 {
        let s = u32::from(self.sensitivity.clamp(1, 100));
        4 + (100 - s) * 36 / 99
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensitivity_maps_onto_a_brightness_step() {
        let at = |s| {
            Settings {
                sensitivity: s,
                ..Settings::default()
            }
            .threshold()
        };
        assert_eq!((at(1), at(50), at(100)), (40, 22, 4));
    }

    #[test]
    fn values_out_of_range_say_which() {
        let mut s = Settings {
            sensitivity: 0,
            ..Settings::default()
        };
        assert!(s.check().unwrap_err().0.starts_with("sensitivity 0"));
        s.sensitivity = 50;
        s.ignore.push(Rect {
            x: 0.5,
            y: 0.5,
            w: 0.6,
            h: 0.1,
        });
        assert!(s.check().unwrap_err().0.contains("inside it"));
        s.ignore[0].w = 0.5;
        assert_eq!(s.check(), Ok(()));
    }
}
