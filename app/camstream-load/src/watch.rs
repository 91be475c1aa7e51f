//! A process's CPU time and memory over the measuring window, read from
//! /proc as the window opens, every half second and as it closes: what
//! scripts/bench samples from outside on the host, done here where no
//! outside sampler runs (the QEMU guest).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

const EVERY: Duration = Duration::from_millis(500);

/// What a process used inside the window.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub cpu_s: f64,
    pub cpu_pct: f64,
    /// Median of the resident set (smaps_rollup's Rss) sampled over the window.
    pub rss_kib: u64,
    /// Its peak resident set since it started (VmHWM) as the window closed;
    /// the kernel's counter, which before Linux 6.2 lags as VmRSS does.
    pub hwm_kib: u64,
    /// Of the resident set as the window closed, what is mapped from V4L2
    /// devices: the camera's buffers, the driver's size (a server asking
    /// for more buffers shows more here, not more of its own memory).
    pub camera_kib: u64,
}

pub struct Watch {
    pub name: String,
    /// None: this process.
    pid: Option<u32>,
    start: Option<(Instant, f64)>,
    last: Option<Instant>,
    rss: Vec<u64>,
}

struct Sample {
    cpu_s: f64,
    rss_kib: u64,
    hwm_kib: u64,
}

impl Watch {
    /// NAME=PID, as given to --watch.
    pub fn parse(arg: &str) -> Result<Watch> {
        let Some((name, pid)) = arg.split_once('=') else {
            bail!("--watch takes NAME=PID, not {arg:?}");
        };
        let pid: u32 = pid
            .parse()
            .with_context(|| format!("--watch {arg}: not a process id"))?;
        let w = Watch::new(name, Some(pid));
        w.read().with_context(|| format!("--watch {arg}"))?;
        Ok(w)
    }

    pub fn new(name: &str, pid: Option<u32>) -> Watch {
        Watch {
            name: name.to_owned(),
            pid,
            start: None,
            last: None,
            rss: Vec::new(),
        }
    }

    fn read(&self) -> Result<Sample> {
        let dir = match self.pid {
            Some(p) => format!("/proc/{p}"),
            None => "/proc/self".to_owned(),
        };
        let stat = std::fs::read_to_string(format!("{dir}/stat"))?;
        // The command name may hold spaces and parentheses: fields count
        // from the last ')'. utime and stime are fields 14 and 15.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .context("no ')' in stat")?
            .1
            .split_whitespace()
            .collect();
        let ticks =
            |i: usize| -> Result<u64> { Ok(fields.get(i).context("short stat")?.parse::<u64>()?) };
        let hz = rustix::param::clock_ticks_per_second() as f64;
        let cpu_s = (ticks(11)? + ticks(12)?) as f64 / hz;
        let status = std::fs::read_to_string(format!("{dir}/status"))?;
        let kib = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        // Before Linux 6.2 VmRSS is summed from per-thread caches that
        // lag by up to 64 page faults each: a busy threaded server (ustreamer
        // in the guest's 6.1) read 0.8 MiB while 14 MiB of camera buffers
        // alone were resident. smaps_rollup walks the page tables.
        let rss_kib = std::fs::read_to_string(format!("{dir}/smaps_rollup"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Rss:"))
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.parse::<u64>().ok())
            })
            .unwrap_or_else(|| kib("VmRSS:"));
        Ok(Sample {
            cpu_s,
            rss_kib,
            hwm_kib: kib("VmHWM:"),
        })
    }

    pub fn begin(&mut self, now: Instant) -> Result<()> {
        let s = self.read().with_context(|| self.name.clone())?;
        self.start = Some((now, s.cpu_s));
        self.last = Some(now);
        self.rss.push(s.rss_kib);
        Ok(())
    }

    pub fn tick(&mut self, now: Instant) {
        if self.last.is_some_and(|t| now.duration_since(t) >= EVERY) {
            self.last = Some(now);
            if let Ok(s) = self.read() {
                self.rss.push(s.rss_kib);
            }
        }
    }

    /// Resident kilobytes of the /dev/video* mappings (smaps: a header line
    /// per mapping, its path last, then its figures).
    fn camera_kib(&self) -> u64 {
        let dir = self
            .pid
            .map_or("/proc/self".to_owned(), |p| format!("/proc/{p}"));
        let Ok(smaps) = std::fs::read_to_string(format!("{dir}/smaps")) else {
            return 0;
        };
        let mut camera = false;
        let mut kib = 0;
        for line in smaps.lines() {
            if let Some(rss) = line.strip_prefix("Rss:") {
                if camera {
                    kib += rss
                        .split_whitespace()
                        .next()
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0);
                }
            } else if line
                .split_whitespace()
                .next()
                .is_some_and(|f| !f.ends_with(':'))
            {
                // A mapping's header: range, perms, offset, device, inode, path.
                camera = line
                    .split_whitespace()
                    .nth(5)
                    .is_some_and(|p| p.starts_with("/dev/video"));
            }
        }
        kib
    }

    pub fn finish(&mut self, now: Instant) -> Result<Usage> {
        let s = self
            .read()
            .with_context(|| format!("{} at the window's end", self.name))?;
        let (t0, cpu0) = self.start.context("finish before begin")?;
        self.rss.push(s.rss_kib);
        self.rss.sort_unstable();
        let wall = now.duration_since(t0).as_secs_f64();
        Ok(Usage {
            camera_kib: self.camera_kib(),
            cpu_s: s.cpu_s - cpu0,
            cpu_pct: (s.cpu_s - cpu0) / wall * 100.0,
            rss_kib: self.rss[self.rss.len() / 2],
            hwm_kib: s.hwm_kib,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_set_follows_touched_memory() {
        let mut w = Watch::new("self", None);
        let t0 = Instant::now();
        w.begin(t0).unwrap();
        let before = w.rss[0];
        // 32 MiB written page by page: all of it resident.
        let mut v = vec![0u8; 32 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        let u = w.finish(Instant::now()).unwrap();
        assert!(
            std::hint::black_box(&v)
                .iter()
                .step_by(4096)
                .all(|&b| b == 1)
        );
        // Less a MiB: the other tests' threads share the process and may
        // free some meanwhile (38444 -> 71200 kB was seen).
        assert!(u.rss_kib >= before + 31 * 1024, "{before} -> {}", u.rss_kib);
        assert!(u.hwm_kib >= u.rss_kib / 2);
        assert_eq!(u.camera_kib, 0);
    }
}
