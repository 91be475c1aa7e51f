//! Log lines to stderr: `camstream: LEVEL: message`. Init systems and
//! syslog add time stamps; the daemon adds nothing they already provide.
//!
//! Most lines say what a client did, and a client can make as many as it
//! sends requests (docs/SECURITY.md). So lines are budgeted: past the
//! budget they are counted, not written, and a flood cannot push
//! everything else out of syslog's buffer (warnings and errors pass: each
//! kind is rare or limited where it is made). And a line is written only
//! when that cannot block: on the board stderr is a pipe to `logger`, and
//! a reader that falls behind must not stop the event loop, which writes
//! these lines. Errors are written even then: no client's bytes make them.

use std::io::Write;
use std::sync::Mutex;
use std::time::Instant;

/// Lines a second, on average, and how many may come at once.
const LINES_PER_SECOND: u32 = 50;
const BURST: u32 = 500;

/// A token bucket of lines, and the lines it refused since the last one
/// written.
struct Budget {
    tokens: f64,
    at: Option<Instant>,
    left_out: u64,
}

impl Budget {
    const fn new() -> Budget {
        Budget {
            tokens: BURST as f64,
            at: None,
            left_out: 0,
        }
    }

    /// Whether a line may be written at `now`; if so, how many were left
    /// out before it.
    fn take(&mut self, now: Instant) -> Option<u64> {
        if let Some(at) = self.at {
            let refill =
                now.saturating_duration_since(at).as_secs_f64() * f64::from(LINES_PER_SECOND);
            self.tokens = (self.tokens + refill).min(f64::from(BURST));
        }
        self.at = Some(now);
        if self.tokens < 1.0 {
            self.left_out += 1;
            return None;
        }
        self.tokens -= 1.0;
        Some(std::mem::take(&mut self.left_out))
    }
}

/// A line's longest, in bytes: under a pipe's page (4096).
const MAX_LINE: usize = 2048;

/// Whether `fd` takes a write now without blocking (a pipe: at least a
/// page of room).
fn writable(fd: libc::c_int) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one pollfd, owned here, for the call's duration; no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    // An error (or stderr closed) is not a reason to drop lines: the
    // write finds out.
    n != 0
        && (n < 0
            || p.revents & libc::POLLOUT != 0
            || p.revents & (libc::POLLERR | libc::POLLNVAL | libc::POLLHUP) != 0)
}

struct Stderr {
    budget: Mutex<Budget>,
}

impl log::Log for Stderr {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &log::Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let Ok(mut budget) = self.budget.lock() else {
            return;
        };
        // Warnings and errors pass: each kind is rare or limited where it
        // is made (refused connections every 10 s, a frame refused once a
        // minute), and tests and people wait for them.
        let left_out = if r.level() > log::Level::Warn {
            match budget.take(Instant::now()) {
                Some(n) => n,
                None => return,
            }
        } else {
            std::mem::take(&mut budget.left_out)
        };
        let level = r.level().as_str().to_ascii_lowercase();
        let mut line = String::new();
        if left_out > 0 {
            line = format!(
                "camstream: warn: {left_out} log lines left out (more than {LINES_PER_SECOND} a second, or stderr full)\n"
            );
        }
        line += &format!("camstream: {level}: {}", r.args());
        // Under a pipe's page: a write that poll says has room then fits
        // whole, and lines from threads do not interleave.
        if line.len() > MAX_LINE {
            let mut cut = MAX_LINE;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push_str("...");
        }
        line.push('\n');
        // Errors are written even if that waits: they are few, and what
        // the daemon says last before it stops.
        if r.level() == log::Level::Error || writable(libc::STDERR_FILENO) {
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        } else {
            budget.left_out += 1 + left_out;
        }
    }

    fn flush(&self) {}
}

pub fn init(level: log::LevelFilter) {
    static LOGGER: Stderr = Stderr {
        budget: Mutex::new(Budget::new()),
    };
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// How long an empty budget takes to fill.
    const REFILL: Duration = Duration::from_secs((BURST / LINES_PER_SECOND) as u64);

    #[test]
    fn a_burst_passes_then_the_rate_then_the_count_of_those_left_out() {
        let t0 = Instant::now();
        let mut b = Budget::new();
        for _ in 0..BURST {
            assert_eq!(b.take(t0), Some(0));
        }
        for _ in 0..1000 {
            assert_eq!(b.take(t0), None);
        }
        // One line's worth of time later, one line, with the count.
        let t1 = t0 + Duration::from_secs(1) / LINES_PER_SECOND;
        assert_eq!(b.take(t1), Some(1000));
        assert_eq!(b.take(t1), None);
        // A quiet spell gives the whole burst back, and no more.
        let t2 = t1 + REFILL * 3;
        assert_eq!(b.take(t2), Some(1));
        for _ in 1..BURST {
            assert_eq!(b.take(t2), Some(0));
        }
        assert_eq!(b.take(t2), None);
    }

    #[test]
    fn a_steady_rate_under_the_budget_loses_nothing() {
        let t0 = Instant::now();
        let mut b = Budget::new();
        for i in 0..10_000u32 {
            let t = t0 + Duration::from_secs(1) * i / (LINES_PER_SECOND - 1);
            assert_eq!(b.take(t), Some(0), "line {i}");
        }
    }
}
