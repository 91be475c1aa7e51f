//! camstream-load: N RTSP clients in one process and one thread, for
//! benchmarks (scripts/bench). Each client does DESCRIBE, SETUP (RTP over
//! TCP interleaved, or UDP) and PLAY, then checks every RTP packet: payload
//! type 26, sequence numbers without gaps, RFC 2435 fragment offsets that
//! join up from 0 to the packet with the marker bit. A frame counts only if
//! all of its packets came in order. Reports frames/s per client, bytes and
//! the spacing of frame arrivals over a measuring window after a warm-up.

mod client;
mod stats;

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use mio::{Events, Poll};

use client::{Client, Target};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    Tcp,
    Udp,
}

#[derive(Parser, Debug)]
#[command(version, about)]
struct Options {
    /// rtsp://HOST:PORT/PATH (IPv4 or IPv6 literal, or localhost)
    url: String,
    /// Sessions to open
    #[arg(long, default_value_t = 1)]
    clients: usize,
    /// RTP over the RTSP connection (tcp) or over UDP
    #[arg(long, value_enum, default_value_t = Transport::Tcp)]
    transport: Transport,
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
    let mut poll = Poll::new()?;
    let mut clients = Vec::with_capacity(opts.clients);
    for id in 0..opts.clients {
        clients.push(
            Client::connect(id, &target, opts.transport, poll.registry())
                .with_context(|| format!("client {id}"))?,
        );
    }
    let start = Instant::now();
    let setup_deadline = start + Duration::from_secs_f64(opts.setup_timeout);
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; 65536];
    // Phases: setting up, warming up, measuring.
    let mut all_playing: Option<Instant> = None;
    let mut window: Option<(Instant, Instant)> = None;
    let mut announced = false;
    loop {
        poll.poll(&mut events, Some(Duration::from_millis(100)))?;
        let now = Instant::now();
        for ev in events.iter() {
            let t = ev.token().0;
            let c = &mut clients[t / 2];
            if t % 2 == 0 {
                c.on_control(ev, &target, &mut buf, now, poll.registry());
            } else {
                c.on_udp(&mut buf, now);
            }
        }
        for c in &mut clients {
            c.keepalive(now, &target);
        }
        if all_playing.is_none() {
            let settled = clients.iter().all(|c| c.playing() || c.failed());
            if settled || now >= setup_deadline {
                all_playing = Some(now);
                let begin = now + Duration::from_secs_f64(opts.warmup);
                window = Some((begin, begin + Duration::from_secs_f64(opts.seconds)));
                for c in &mut clients {
                    c.give_up_setup(now.duration_since(start));
                    c.measure_from(begin, begin + Duration::from_secs_f64(opts.seconds));
                }
            }
        }
        if let Some((begin, end)) = window {
            // Told on stderr as it happens, so a harness can sample the
            // server over exactly this window.
            if !announced && now >= begin {
                eprintln!("camstream-load: measuring");
                announced = true;
            }
            if now >= end {
                eprintln!("camstream-load: measured");
                break;
            }
        }
    }
    for c in &mut clients {
        c.teardown(&target);
    }
    let (begin, end) = window.expect("set before leaving the loop");
    let report = stats::Report::new(
        &clients,
        opts.transport,
        end.duration_since(begin),
        opts.fps,
        all_playing.expect("set with window").duration_since(start),
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
