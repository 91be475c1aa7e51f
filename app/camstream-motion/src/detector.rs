//! The detector: a grid of cells against a running background, and the
//! state of motion over time.

use crate::settings::{Settings, SettingsError};

/// Cells across the picture; down, as many as keep them square (at most
/// as many).
const COLS: usize = 32;
/// About this many samples across a row: a larger picture is sampled every
/// few pixels (a cell's mean needs no more).
const SAMPLES_ACROSS: usize = 160;
/// The background follows each cell by half the difference a picture: it
/// is the last few pictures, so what moves differs from it and what stops
/// (a car parking, the test pattern's box) is background again within a
/// second at 5 pictures/s. Slower change than a cell's threshold a picture
/// (dusk, a shadow's turn) is never motion.
const FOLLOW: i32 = 2;
/// Means and background carry 4 bits below a level of brightness.
const FRAC: u32 = 4;

/// Motion started or stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Started,
    Stopped,
}

/// The grid a picture of a size is cut into, and what each cell ignores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    pub width: usize,
    pub height: usize,
    pub cols: usize,
    pub rows: usize,
    /// Sample every `step` pixels each way.
    step: usize,
    /// Each sampled column's and row's cell.
    col_of: Vec<u8>,
    row_of: Vec<u8>,
    /// Samples in each cell.
    samples: Vec<u32>,
    /// Cells looked at (not in a region to ignore).
    looked: Vec<bool>,
    looked_count: u32,
}

impl Grid {
    fn new(width: usize, height: usize, settings: &Settings) -> Grid {
        let cols = COLS.min(width);
        let rows = ((height * cols + width / 2) / width).clamp(1, COLS.min(height));
        let step = (width / SAMPLES_ACROSS).max(1);
        let col_of: Vec<u8> = (0..width)
            .step_by(step)
            .map(|x| (x * cols / width) as u8)
            .collect();
        let row_of: Vec<u8> = (0..height)
            .step_by(step)
            .map(|y| (y * rows / height) as u8)
            .collect();
        let mut samples = vec![0u32; cols * rows];
        for &r in &row_of {
            for &c in &col_of {
                samples[usize::from(r) * cols + usize::from(c)] += 1;
            }
        }
        let looked: Vec<bool> = (0..cols * rows)
            .map(|i| {
                // A cell's centre, in fractions of the picture.
                let (cx, cy) = (
                    ((i % cols) as f32 + 0.5) / cols as f32,
                    ((i / cols) as f32 + 0.5) / rows as f32,
                );
                !settings
                    .ignore
                    .iter()
                    .any(|r| cx >= r.x && cx < r.x + r.w && cy >= r.y && cy < r.y + r.h)
            })
            .collect();
        let looked_count = looked.iter().filter(|&&l| l).count() as u32;
        Grid {
            width,
            height,
            cols,
            rows,
            step,
            col_of,
            row_of,
            samples,
            looked,
            looked_count,
        }
    }
}

pub struct Detector {
    settings: Settings,
    grid: Option<Grid>,
    /// Each cell's sum of samples, then its mean (<< FRAC).
    sums: Vec<u32>,
    background: Vec<i32>,
    /// The last picture's changed cells.
    changed: u32,
    moving: bool,
    /// When the change now going on started, and when it was last seen.
    run_start: Option<u64>,
    last_change: Option<u64>,
}

impl Detector {
    pub fn new(settings: Settings) -> Result<Detector, SettingsError> {
        settings.check()?;
        Ok(Detector {
            settings,
            grid: None,
            sums: Vec::new(),
            background: Vec::new(),
            changed: 0,
            moving: false,
            run_start: None,
            last_change: None,
        })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Whether there is motion now.
    pub fn moving(&self) -> bool {
        self.moving
    }

    /// The share of the looked-at cells the last picture changed, 0-1.
    pub fn level(&self) -> f32 {
        match &self.grid {
            Some(g) if g.looked_count > 0 => self.changed as f32 / g.looked_count as f32,
            _ => 0.0,
        }
    }

    pub fn grid(&self) -> Option<&Grid> {
        self.grid.as_ref()
    }

    /// One picture's luma plane (`width` x `height`, rows `stride` bytes
    /// apart), taken at `t_ms` (any clock that does not go back): whether
    /// motion started or stopped with it. A picture of another size starts
    /// the background afresh (and allocates, once).
    pub fn feed(
        &mut self,
        luma: &[u8],
        width: usize,
        height: usize,
        stride: usize,
        t_ms: u64,
    ) -> Option<Event> {
        if width == 0 || height == 0 || stride < width || luma.len() < stride * (height - 1) + width
        {
            return None;
        }
        if self
            .grid
            .as_ref()
            .is_none_or(|g| (g.width, g.height) != (width, height))
        {
            let grid = Grid::new(width, height, &self.settings);
            self.sums = vec![0; grid.cols * grid.rows];
            self.background.clear();
            self.grid = Some(grid);
        }
        let grid = self.grid.as_ref()?;
        self.sums.fill(0);
        for (yi, &row) in grid.row_of.iter().enumerate() {
            let line = &luma[yi * grid.step * stride..][..width];
            let cells = &mut self.sums[usize::from(row) * grid.cols..][..grid.cols];
            for (&col, &px) in grid.col_of.iter().zip(line.iter().step_by(grid.step)) {
                cells[usize::from(col)] += u32::from(px);
            }
        }
        for (s, &n) in self.sums.iter_mut().zip(&grid.samples) {
            *s = (*s << FRAC) / n.max(1);
        }
        if self.background.is_empty() {
            self.background.extend(self.sums.iter().map(|&m| m as i32));
            return None;
        }
        // The whole picture's change (an exposure step, a cloud) first.
        let (mut total, mut n) = (0i64, 0i64);
        for ((&m, &b), &l) in self.sums.iter().zip(&self.background).zip(&grid.looked) {
            if l {
                total += i64::from(m as i32 - b);
                n += 1;
            }
        }
        let global = if n > 0 { (total / n) as i32 } else { 0 };
        let threshold = (self.settings.threshold() << FRAC) as i32;
        let mut changed = 0;
        for ((&m, b), &l) in self
            .sums
            .iter()
            .zip(self.background.iter_mut())
            .zip(&grid.looked)
        {
            let d = m as i32 - *b;
            let moved = l && (d - global).abs() > threshold;
            changed += u32::from(moved);
            *b += d / FOLLOW;
        }
        self.changed = changed;
        let motion = changed > 0
            && changed as f32 * 100.0 >= self.settings.min_area * grid.looked_count as f32;
        self.step(motion, t_ms)
    }

    /// Motion over time: it starts once change has gone on for
    /// min_duration, and stops once there was none for hold.
    fn step(&mut self, motion: bool, t: u64) -> Option<Event> {
        if motion {
            let start = *self.run_start.get_or_insert(t);
            self.last_change = Some(t);
            if !self.moving && t.saturating_sub(start) >= u64::from(self.settings.min_duration_ms) {
                self.moving = true;
                return Some(Event::Started);
            }
            return None;
        }
        let quiet_for = t.saturating_sub(self.last_change.unwrap_or(t));
        if quiet_for >= u64::from(self.settings.hold_ms) || (!self.moving && quiet_for > 1000) {
            // A run of change that did not last long enough is forgotten
            // after a second without change.
            self.run_start = None;
            if self.moving {
                self.moving = false;
                return Some(Event::Stopped);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Rect;

    const W: usize = 320;
    const H: usize = 180;

    /// A grey picture with a square 100 levels brighter, of `side` at (x, y).
    fn picture(x: usize, y: usize, side: usize, grey: u8) -> Vec<u8> {
        let mut p = vec![grey; W * H];
        for row in y..(y + side).min(H) {
            for col in x..(x + side).min(W) {
                p[row * W + col] = grey.saturating_add(100);
            }
        }
        p
    }

    fn settings() -> Settings {
        Settings {
            min_duration_ms: 400,
            hold_ms: 2000,
            ..Settings::default()
        }
    }

    /// Pictures 200 ms apart from t = 0: the events, with their times.
    fn run(d: &mut Detector, pictures: impl IntoIterator<Item = Vec<u8>>) -> Vec<(u64, Event)> {
        pictures
            .into_iter()
            .enumerate()
            .filter_map(|(i, p)| {
                d.feed(&p, W, H, W, i as u64 * 200)
                    .map(|e| (i as u64 * 200, e))
            })
            .collect()
    }

    #[test]
    fn a_moving_square_starts_motion_and_its_stop_ends_it() {
        let mut d = Detector::new(settings()).unwrap();
        // Still for 2 s, moving for 3 s, still again for 4 s.
        let still = (0..10).map(|_| picture(20, 20, 40, 60));
        let moving = (0..15).map(|i| picture(20 + i * 12, 20, 40, 60));
        let stopped = (0..20).map(|_| picture(20 + 14 * 12, 20, 40, 60));
        let events = run(&mut d, still.chain(moving).chain(stopped));
        // The square moves from 2.2 s: motion at 2.6 s (min_duration); it
        // stops at 4.8 s, the background has it a picture or two later, and
        // motion ends 2 s (hold) after that.
        assert_eq!(events[0], (2600, Event::Started));
        assert_eq!(events[1].1, Event::Stopped);
        assert!((6800..=7400).contains(&events[1].0), "{events:?}");
        assert_eq!(events.len(), 2);
    }

    #[test]
    fn a_step_of_exposure_is_not_motion() {
        let mut d = Detector::new(settings()).unwrap();
        let pictures = (0..30).map(|i| picture(100, 50, 40, if i < 10 { 60 } else { 120 }));
        assert_eq!(run(&mut d, pictures), vec![]);
    }

    #[test]
    fn a_short_change_is_not_motion() {
        let mut d = Detector::new(Settings {
            min_duration_ms: 1000,
            ..settings()
        })
        .unwrap();
        // One picture with the square elsewhere: change for the three
        // pictures the background takes to settle, 400 ms.
        let pictures = (0..20).map(|i| picture(if i == 10 { 200 } else { 20 }, 20, 40, 60));
        assert_eq!(run(&mut d, pictures), vec![]);
    }

    #[test]
    fn motion_in_an_ignored_region_is_not_seen() {
        let ignore = vec![Rect {
            x: 0.0,
            y: 0.0,
            w: 1.0,
            h: 0.5,
        }];
        let mut d = Detector::new(Settings {
            ignore,
            ..settings()
        })
        .unwrap();
        let pictures = (0..30).map(|i| picture(20 + i * 8, 10, 30, 60));
        assert_eq!(run(&mut d, pictures), vec![]);
        // The same motion in the lower half is seen.
        let mut d = Detector::new(Settings {
            ignore: vec![Rect {
                x: 0.0,
                y: 0.0,
                w: 1.0,
                h: 0.5,
            }],
            ..settings()
        })
        .unwrap();
        let pictures = (0..30).map(|i| picture(20 + i * 8, 120, 30, 60));
        assert_eq!(run(&mut d, pictures).first(), Some(&(600, Event::Started)));
    }

    #[test]
    fn what_stays_becomes_background() {
        let mut d = Detector::new(Settings {
            hold_ms: 1000,
            ..settings()
        })
        .unwrap();
        // A square appears and stays: motion, then none once it is
        // background.
        let pictures = (0..200).map(|i| {
            if i < 5 {
                picture(0, 0, 1, 60)
            } else {
                picture(100, 50, 60, 60)
            }
        });
        let events = run(&mut d, pictures);
        assert_eq!(events.first().map(|e| e.1), Some(Event::Started));
        assert_eq!(events.last().map(|e| e.1), Some(Event::Stopped));
        assert!(!d.moving());
    }

    #[test]
    fn a_new_size_starts_afresh_and_bad_input_is_ignored() {
        let mut d = Detector::new(settings()).unwrap();
        assert_eq!(d.feed(&[0; 10], W, H, W, 0), None);
        assert_eq!(d.feed(&picture(0, 0, 10, 60), W, H, W, 0), None);
        let small = vec![60u8; 64 * 36];
        assert_eq!(d.feed(&small, 64, 36, 64, 200), None);
        assert_eq!(d.grid().map(|g| (g.cols, g.rows)), Some((32, 18)));
        assert_eq!(d.level(), 0.0);
    }

    #[test]
    fn grids_keep_cells_square() {
        let s = Settings::default();
        let g = |w, h| {
            let g = Grid::new(w, h, &s);
            (g.cols, g.rows, g.step)
        };
        assert_eq!(g(640, 360), (32, 18, 4));
        assert_eq!(g(240, 135), (32, 18, 1));
        assert_eq!(g(80, 64), (32, 26, 1));
        assert_eq!(g(16, 8), (16, 8, 1));
        assert_eq!(g(1920, 1080), (32, 18, 12));
    }
}
