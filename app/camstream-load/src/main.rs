//! camstream-load: N RTSP or MJPEG clients in one process and one thread,
//! for benchmarks (scripts/bench). Given an rtsp:// URL, each client does
//! DESCRIBE, SETUP (RTP over TCP interleaved, or UDP) and PLAY, then checks
//! every RTP packet: the SDP's payload type, sequence numbers without gaps;
//! for RTP/JPEG, RFC 2435 fragment offsets that join up from 0 to the
//! packet with the marker bit; for H.264 (RFC 6184), the access unit's
//! packets up to its marker bit, none lost. A frame counts only if all of
//! its packets came in order. Given an
//! http:// URL, each client GETs a multipart MJPEG stream and counts the
//! parts that are whole JPEG files. Reports frames/s per client, bytes and
//! the spacing of frame arrivals over a measuring window after a warm-up,
//! and what watched processes (--watch) used over that window. An rtsp://
//! URL's `user:password@` is answered with Digest when the server asks.

mod client;
mod frames;
mod mjpeg;
mod stats;
mod watch;

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use mio::{Events, Poll};

use client::Target;
use stats::Tally;
use watch::Watch;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    Tcp,
    Udp,
}

/// One client of either kind.
pub enum Session {
    Rtsp(client::Client),
    Mjpeg(mjpeg::Client),
}

impl Session {
    pub fn playing(&self) -> bool {
        match self {
            Session::Rtsp(c) => c.playing(),
            Session::Mjpeg(c) => c.playing(),
        }
    }

    pub fn error(&self) -> Option<&str> {
        match self {
            Session::Rtsp(c) => c.error.as_deref(),
            Session::Mjpeg(c) => c.error.as_deref(),
        }
    }

    pub fn tally(&self) -> &Tally {
        match self {
            Session::Rtsp(c) => &c.tally,
            Session::Mjpeg(c) => c.tally(),
        }
    }

    /// RTP timestamps of the first and the latest whole frame (RTSP only).
    pub fn frame_span(&self) -> Option<(u32, u32)> {
        match self {
            Session::Rtsp(c) => c.frame_span(),
            Session::Mjpeg(_) => None,
        }
    }
}

#[derive(Parser, Debug)]
#[command(version, about)]
struct Options {
    /// rtsp://HOST:PORT/PATH, or http://HOST:PORT/PATH for a multipart
    /// MJPEG stream (IPv4 or IPv6 literal, or localhost)
    url: String,
    /// Clients to start
    #[arg(long, default_value_t = 1)]
    clients: usize,
    /// RTP over the RTSP connection (tcp) or over UDP (RTSP only)
    #[arg(long, value_enum, default_value_t = Transport::Tcp)]
    transport: Transport,
    /// NAME=PID: report that process's CPU time and memory over the window
    /// (repeatable; this process's own are reported as "load")
    #[arg(long, value_name = "NAME=PID")]
    watch: Vec<String>,
    /// Seconds after every session is playing before measuring
    #[arg(long, default_value_t = 3.0)]
    warmup: f64,
    /// Seconds to measure
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Frame rate the server sends, for the share of frames received
    #[arg(long, default_value_t = 30.0)]
    fps: f64,
    /// Give up on sessions not playing this many seconds after the start
    #[arg(long, default_value_t = 30.0)]
    setup_timeout: f64,
    /// Print the result as one JSON object
    #[arg(long)]
    json: bool,
}

fn main() {
    if let Err(e) = run(Options::parse()) {
        eprintln!("camstream-load: error: {e:#}");
        std::process::exit(1);
    }
}

fn run(opts: Options) -> Result<()> {
    if opts.clients == 0 {
        bail!("--clients must be at least 1");
    }
    raise_fd_limit(opts.clients * 3 + 64)?;
    let target = Target::parse(&opts.url)?;
    if target.http && opts.transport != Transport::Tcp {
        bail!("--transport is for RTSP: an http:// URL is MJPEG over TCP");
    }
    let label = match (target.http, opts.transport) {
        (true, _) => "mjpeg",
        (false, Transport::Tcp) => "tcp",
        (false, Transport::Udp) => "udp",
    };
    let mut watches = opts
        .watch
        .iter()
        .map(|w| Watch::parse(w))
        .collect::<Result<Vec<_>>>()?;
    watches.push(Watch::new("load", None));
    let mut poll = Poll::new()?;
    let mut clients = Vec::with_capacity(opts.clients);
    for id in 0..opts.clients {
        let c = if target.http {
            mjpeg::Client::connect(id, &target, poll.registry()).map(Session::Mjpeg)
        } else {
            client::Client::connect(id, &target, opts.transport, poll.registry()).map(Session::Rtsp)
        };
        clients.push(c.with_context(|| format!("client {id}"))?);
    }
    let start = Instant::now();
    let setup_deadline = start + Duration::from_secs_f64(opts.setup_timeout);
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; 65536];
    // Phases: setting up, warming up, measuring.
    let mut all_playing: Option<Instant> = None;
    let mut window: Option<(Instant, Instant)> = None;
    let mut announced = false;
    let mut used = Vec::new();
    loop {
        poll.poll(&mut events, Some(Duration::from_millis(100)))?;
        let now = Instant::now();
        for ev in events.iter() {
            let t = ev.token().0;
            match &mut clients[t / 2] {
                Session::Rtsp(c) if t % 2 == 0 => {
                    c.on_control(ev, &target, &mut buf, now, poll.registry())
                }
                Session::Rtsp(c) => c.on_udp(&mut buf, now),
                Session::Mjpeg(c) => c.on_event(ev, &target, &mut buf, now),
            }
        }
        for c in &mut clients {
            if let Session::Rtsp(c) = c {
                c.keepalive(now, &target);
            }
        }
        if all_playing.is_none() {
            let settled = clients.iter().all(|c| c.playing() || c.error().is_some());
            if settled || now >= setup_deadline {
                all_playing = Some(now);
                let begin = now + Duration::from_secs_f64(opts.warmup);
                let end = begin + Duration::from_secs_f64(opts.seconds);
                window = Some((begin, end));
                let after = now.duration_since(start);
                for c in &mut clients {
                    match c {
                        Session::Rtsp(c) => {
                            c.give_up_setup(after);
                            c.tally.measure_from(begin, end);
                        }
                        Session::Mjpeg(c) => {
                            c.give_up_setup(after);
                            c.tally_mut().measure_from(begin, end);
                        }
                    }
                }
            }
        }
        if let Some((begin, end)) = window {
            // Told on stderr as it happens, so a harness can sample the
            // server over exactly this window.
            if !announced && now >= begin {
                for w in &mut watches {
                    w.begin(now)?;
                }
                eprintln!("camstream-load: measuring");
                announced = true;
            }
            for w in &mut watches {
                w.tick(now);
            }
            if now >= end {
                for w in &mut watches {
                    used.push((w.name.clone(), w.finish(now)?));
                }
                eprintln!("camstream-load: measured");
                break;
            }
        }
    }
    for c in &mut clients {
        if let Session::Rtsp(c) = c {
            c.teardown(&target);
        }
    }
    let (begin, end) = window.expect("set before leaving the loop");
    let report = stats::Report::new(
        &clients,
        label,
        end.duration_since(begin),
        opts.fps,
        all_playing.expect("set with window").duration_since(start),
        used,
    );
    if opts.json {
        println!("{}", report.json());
    } else {
        print!("{}", report.text());
    }
    Ok(())
}

/// A thousand sessions need a few thousand descriptors (TCP, or RTP + RTCP
/// sockets and the RTSP connection for UDP).
fn raise_fd_limit(want: usize) -> Result<()> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut lim = getrlimit(Resource::Nofile);
    let want = want as u64;
    if lim.current.is_some_and(|c| c >= want) {
        return Ok(());
    }
    if lim.maximum.is_some_and(|m| m < want) {
        bail!(
            "{want} file descriptors needed, the hard limit is {}",
            lim.maximum.unwrap_or(0)
        );
    }
    lim.current = Some(want);
    setrlimit(Resource::Nofile, lim).context("raising the file descriptor limit")?;
    Ok(())
}
