//! At most one frame this often, on a fixed grid: what MJPEG's `?fps` and a
//! producer's rate (the sub-stream's 5 a second) take of the main stream.

use std::time::Duration;

use crate::clock::Mono;

#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// None: every frame.
    every: Option<Duration>,
    next_due: Mono,
}

impl Pace {
    pub fn new(every: Option<Duration>) -> Pace {
        Pace {
            every,
            next_due: Mono(0),
        }
    }

    pub fn set(&mut self, every: Option<Duration>) {
        self.every = every;
    }

    /// The next frame is due whenever it comes (a start, or a restart).
    pub fn restart(&mut self, at: Mono) {
        self.next_due = at;
    }

    /// Whether a frame captured at `captured` is one to take. Frames come
    /// a little early or late: one within a tenth of its interval before
    /// its slot counts for it.
    pub fn due(&self, captured: Mono) -> bool {
        self.every
            .is_none_or(|every| captured.add(every / 10) >= self.next_due)
    }

    /// After taking a frame captured at `captured`: its slot's successor.
    /// The slots stay n intervals after the first frame taken, so over a
    /// minute it takes the rate asked for to within a frame (moving each
    /// slot to the frame taken drifts by the tolerance: 5.6 a second for
    /// 5).
    pub fn advance(&mut self, captured: Mono) {
        if let Some(every) = self.every {
            self.next_due = self.next_due.add(every);
            // After a pause, from now on rather than a burst to catch up.
            if self.next_due <= captured {
                self.next_due = captured.add(every);
            }
        }
    }

    /// Whether to take a frame captured at `captured`; if so, the slot
    /// moves on.
    pub fn take(&mut self, captured: Mono) -> bool {
        if !self.due(captured) {
            return false;
        }
        self.advance(captured);
        true
    }
}
