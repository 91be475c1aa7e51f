//! The signals the daemon answers, as readiness on the event loop: SIGINT
//! and SIGTERM stop it, SIGUSR1 asks for the send latency. Their handlers
//! are removed with it (a server made and dropped again, as the fuzz target
//! does, leaves no handler and no descriptor behind).

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

pub struct Signals {
    stop: UnixStream,
    report: UnixStream,
    ids: Vec<signal_hook::SigId>,
}

impl Signals {
    pub fn new() -> io::Result<Signals> {
        let (stop, stop_writer) = UnixStream::pair()?;
        stop.set_nonblocking(true)?;
        let mut ids = Vec::new();
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            ids.push(signal_hook::low_level::pipe::register(
                sig,
                stop_writer.try_clone()?,
            )?);
        }
        let (report, report_writer) = UnixStream::pair()?;
        report.set_nonblocking(true)?;
        ids.push(signal_hook::low_level::pipe::register(
            signal_hook::consts::SIGUSR1,
            report_writer,
        )?);
        Ok(Signals { stop, report, ids })
    }

    pub fn register(&self, r: &Registry, stop: Token, report: Token) -> io::Result<()> {
        r.register(
            &mut SourceFd(&self.stop.as_raw_fd()),
            stop,
            Interest::READABLE,
        )?;
        r.register(
            &mut SourceFd(&self.report.as_raw_fd()),
            report,
            Interest::READABLE,
        )
    }

    /// Takes what SIGUSR1 wrote, so the next one is noticed.
    pub fn take_report(&self) {
        let mut buf = [0u8; 16];
        while matches!((&self.report).read(&mut buf), Ok(n) if n > 0) {}
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}
