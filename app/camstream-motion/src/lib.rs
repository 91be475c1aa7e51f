//! Motion in a camera's picture, without I/O and without allocating per
//! picture: a small luma picture in (the main stream's JPEG read to its DC
//! coefficients alone, an eighth of its size), averaged
//! into a grid of cells and compared with a running background of the
//! same grid; motion when enough cells changed for long enough, its end
//! when none did for a while. [`Detector::feed`] says when motion starts
//! and stops.
//!
//! Why cells: a cell's mean hides sensor noise and JPEG's blocks that a
//! pixel-by-pixel difference would count; the whole picture's change is
//! taken out first, so an exposure step is not motion.

mod detector;
mod settings;

pub use detector::{Detector, Event, Grid};
pub use settings::{Rect, Settings, SettingsError};
