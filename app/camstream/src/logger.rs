//! Log lines to stderr: `camstream: LEVEL: message`. Init systems and
//! syslog add time stamps; the daemon adds nothing they already provide.

use std::io::Write;

struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            let level = r.level().as_str().to_ascii_lowercase();
            // One write per line, so lines from threads do not interleave.
            let line = format!("camstream: {level}: {}\n", r.args());
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }

    fn flush(&self) {}
}

pub fn init(level: log::LevelFilter) {
    static LOGGER: Stderr = Stderr;
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}
