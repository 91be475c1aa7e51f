//! The daemon's own server, on loopback, driven by sequences of connect,
//! send and close over several connections from three addresses: RTSP
//! requests with and without credentials, RTSP-over-HTTP GETs and POSTs
//! (their requests base64, as clients send them), interleaved RTCP, HTTP
//! and ONVIF requests, and raw bytes. Every RTSP request carries a CSeq no
//! one can guess, so whoever receives its answer is known; the target fails
//! when an answer reaches any connection but the one that sent the request,
//! or the GET of the one tunnel whose POST carried it (same cookie, same
//! address, the only POST that tunnel ever had), and when the server's
//! tables stop agreeing with each other (`Server::audit`) after any step.
#![no_main]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::time::Duration;

use base64::Engine;
use camstream::config::{self, Options};
use camstream::server::Server;
use camstream::source::StreamInfo;
use camstream_rtsp::auth::User;
use clap::Parser;
use libfuzzer_sys::fuzz_target;

const USERS: [(&str, &str); 2] = [("viewer", "a long passphrase"), ("nvr", "another-one")];
const MAX_CLIENTS: usize = 24;

struct Client {
    sock: TcpStream,
    ip: u8,
    http: bool,
    open: bool,
    received: Vec<u8>,
    /// How much of `received` was looked at.
    scanned: usize,
    /// Sent a tunnel GET (HTTP port) or POST with this cookie.
    get_cookie: Option<u8>,
    post_cookie: Option<u8>,
    /// The POST whose requests were answered on this tunnel GET.
    paired_post: Option<usize>,
    sessions: Vec<String>,
}

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

/// A port free on loopback (0 would turn HTTP off), kept while binding it
/// works: each run's server binds it again (the listener reuses addresses).
fn free_port(taken: bool) -> u16 {
    static PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let port = PORT.load(std::sync::atomic::Ordering::Relaxed);
    if port != 0 && !taken {
        return port;
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = l.local_addr().expect("bound").port();
    PORT.store(port, std::sync::atomic::Ordering::Relaxed);
    port
}

fn server() -> Server {
    let mut taken = false;
    loop {
        match bind(free_port(taken)) {
            Ok(s) => return s,
            // Another program took the port meanwhile.
            Err(e) if !taken => {
                eprintln!("binding again: {e:#}");
                taken = true;
            }
            Err(e) => panic!("cannot bind on loopback: {e:#}"),
        }
    }
}

fn bind(http_port: u16) -> anyhow::Result<Server> {
    let http = http_port.to_string();
    let opts = Options::try_parse_from([
        "camstream",
        "--listen",
        "127.0.0.1",
        "--rtsp-port",
        "0",
        "--http-port",
        &http,
        "--max-clients",
        "2",
        "--max-connections-per-ip",
        "8",
    ])?;
    let mut cfg = config::Config::from_options(opts)?;
    cfg.users = USERS
        .iter()
        .map(|(n, p)| User::from_password(n, config::REALM, p))
        .collect();
    // Credentials the target can write without a challenge first.
    cfg.basic_auth = true;
    // No worker thread per iteration (WebRTC's answerer is one; its offers
    // are the whep_offer target's).
    cfg.sub = None;
    cfg.webrtc = false;
    Server::bind(
        cfg,
        StreamInfo {
            width: 64,
            height: 48,
            fps: 30,
        },
    )
}

fn connect(to: SocketAddr, ip: u8) -> Option<TcpStream> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    s.bind(&SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, ip), 0).into())
        .ok()?;
    s.connect(&to.into()).ok()?;
    let s: TcpStream = s.into();
    s.set_nonblocking(true).ok()?;
    Some(s)
}

fn basic(user: usize) -> String {
    let (n, p) = USERS[user % 2];
    let p = if user >= 2 { "wrong" } else { p };
    format!(
        "Authorization: Basic {}\r\n",
        base64::engine::general_purpose::STANDARD.encode(format!("{n}:{p}"))
    )
}

/// A random CSeq of nine digits: raw bytes never hold such a run (see
/// `scrub`), so an answer's CSeq names the request's sender.
fn tag() -> u32 {
    let mut b = [0u8; 4];
    getrandom(&mut b);
    100_000_000 + u32::from_ne_bytes(b) % 900_000_000
}

fn getrandom(buf: &mut [u8]) {
    // SAFETY: the kernel writes at most buf.len() bytes into buf.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    assert_eq!(n, buf.len() as isize);
}

/// Breaks every run of nine digits, so raw bytes cannot claim a tag.
fn scrub(bytes: &[u8]) -> Vec<u8> {
    let mut run = 0;
    bytes
        .iter()
        .map(|&b| {
            run = if b.is_ascii_digit() { run + 1 } else { 0 };
            if run >= 8 {
                run = 0;
                b' '
            } else {
                b
            }
        })
        .collect()
}

struct World {
    server: Server,
    events: mio::Events,
    rtsp: SocketAddr,
    http: SocketAddr,
    clients: Vec<Client>,
    tags: HashMap<u32, usize>,
}

impl World {
    /// Lets the server handle what was sent, then reads what came back.
    fn pump(&mut self) {
        let mut quiet = 0;
        for _ in 0..32 {
            self.server
                .turn(&mut self.events, Duration::ZERO)
                .expect("the event loop goes on");
            if self.events.is_empty() {
                quiet += 1;
                if quiet == 2 {
                    break;
                }
            } else {
                quiet = 0;
            }
        }
        if let Err(e) = self.server.audit() {
            panic!("the server's tables disagree: {e}");
        }
        let mut buf = [0u8; 65536];
        for c in self.clients.iter_mut().filter(|c| c.open) {
            loop {
                match c.sock.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => c.received.extend_from_slice(&buf[..n]),
                }
            }
        }
        self.check();
    }

    /// Every answer reached its request's sender, or that sender's tunnel.
    fn check(&mut self) {
        for i in 0..self.clients.len() {
            let (answers, sessions) = {
                let c = &self.clients[i];
                scan(&c.received[c.scanned..])
            };
            let c = &mut self.clients[i];
            c.scanned = c.received.len();
            c.sessions.extend(sessions);
            for cseq in answers {
                let Some(&from) = self.tags.get(&cseq) else {
                    panic!("client {i} got an answer to CSeq {cseq}, which no one sent");
                };
                if from == i {
                    continue;
                }
                let (get, post) = (&self.clients[i], &self.clients[from]);
                let joined = get.get_cookie.is_some()
                    && get.get_cookie == post.post_cookie
                    && get.ip == post.ip
                    && get.paired_post.is_none_or(|p| p == from);
                assert!(
                    joined,
                    "client {i} got the answer to client {from}'s request (CSeq {cseq})"
                );
                self.clients[i].paired_post = Some(from);
                // Its sessions are the POST's to name too.
                let s = self.clients[i].sessions.clone();
                self.clients[from].sessions.extend(s);
            }
        }
    }

    fn send(&mut self, i: usize, bytes: &[u8]) {
        let c = &mut self.clients[i];
        let wire = if c.post_cookie.is_some() {
            base64::engine::general_purpose::STANDARD
                .encode(bytes)
                .into_bytes()
        } else {
            bytes.to_vec()
        };
        let _ = c.sock.write_all(&wire);
    }
}

/// The CSeqs of RTSP answers and the session ids they give.
fn scan(bytes: &[u8]) -> (Vec<u32>, Vec<String>) {
    let text = String::from_utf8_lossy(bytes);
    let mut cseqs = Vec::new();
    let mut sessions = Vec::new();
    for line in text.split("\r\n") {
        if let Some(v) = line.strip_prefix("CSeq: ") {
            if let Ok(n) = v.trim().parse::<u32>() {
                if n >= 100_000_000 {
                    cseqs.push(n);
                }
            }
        } else if let Some(v) = line.strip_prefix("Session: ") {
            sessions.push(v.split(';').next().unwrap_or("").trim().to_owned());
        }
    }
    (cseqs, sessions)
}

const METHODS: [&str; 8] = [
    "OPTIONS",
    "DESCRIBE",
    "SETUP",
    "SETUP",
    "PLAY",
    "PAUSE",
    "TEARDOWN",
    "GET_PARAMETER",
];

const ANY_METHOD: [&str; 11] = [
    "OPTIONS",
    "DESCRIBE",
    "SETUP",
    "PLAY",
    "PAUSE",
    "TEARDOWN",
    "GET_PARAMETER",
    "SET_PARAMETER",
    "ANNOUNCE",
    "RECORD",
    "REDIRECT",
];

const TARGETS: [&str; 9] = [
    "*",
    "rtsp://127.0.0.1:PORT/stream",
    "rtsp://127.0.0.1:PORT/stream/",
    "rtsp://127.0.0.1:PORT/stream/trackID=0",
    "rtsp://127.0.0.1:PORT/stream/trackID=1",
    "rtsp://127.0.0.1:PORT/nothing",
    "rtsp://127.0.0.1:PORT/",
    "/stream",
    "rtsp://user@127.0.0.1:PORT/stream?x=1",
];

const TRANSPORTS: [&str; 4] = [
    "RTP/AVP/TCP;unicast;interleaved=2-3",
    "RTP/AVP/TCP;unicast;interleaved=7-6",
    "RTP/AVP/TCP;unicast;interleaved=255",
    "RTP/AVP;multicast;client_port=0-1",
];

fuzz_target!(|data: &[u8]| {
    let server = server();
    let rtsp = server.rtsp_addr().expect("bound");
    let http = server.http_addr().expect("bound");
    let mut w = World {
        server,
        events: mio::Events::with_capacity(256),
        rtsp,
        http,
        clients: Vec::new(),
        tags: HashMap::new(),
    };
    let mut input = Input(data);
    while let Some(op) = input.byte() {
        let arg = input.byte().unwrap_or(0);
        let pick = |n: usize| {
            if n == 0 {
                None
            } else {
                Some(usize::from(arg) % n)
            }
        };
        // Op 8 came after the seeds were made: `% 9` leaves their ops (0-7)
        // as they were.
        match op % 9 {
            0 => {
                if w.clients.len() >= MAX_CLIENTS {
                    continue;
                }
                let http = arg & 1 == 1;
                let ip = 1 + (arg >> 1) % 3;
                let Some(sock) = connect(if http { w.http } else { w.rtsp }, ip) else {
                    continue;
                };
                w.clients.push(Client {
                    sock,
                    ip,
                    http,
                    open: true,
                    received: Vec::new(),
                    scanned: 0,
                    get_cookie: None,
                    post_cookie: None,
                    paired_post: None,
                    sessions: Vec::new(),
                });
            }
            1 => {
                let Some(i) = pick(w.clients.len()) else {
                    continue;
                };
                let how = input.byte().unwrap_or(0);
                let method = METHODS[usize::from(how) % METHODS.len()];
                let cseq = tag();
                w.tags.insert(cseq, i);
                let path = if method == "SETUP" {
                    "stream/trackID=0"
                } else {
                    "stream"
                };
                let port = w.rtsp.port();
                let mut req =
                    format!("{method} rtsp://127.0.0.1:{port}/{path} RTSP/1.0\r\nCSeq: {cseq}\r\n");
                if how & 0x18 != 0 {
                    req.push_str(&basic(usize::from(how >> 3 & 3) - 1));
                }
                let c = &w.clients[i];
                if !c.sessions.is_empty() && how & 0x20 != 0 {
                    let s = &c.sessions[usize::from(how >> 6) % c.sessions.len()];
                    req.push_str(&format!("Session: {s}\r\n"));
                }
                if method == "SETUP" {
                    if how & 1 == 1 {
                        req.push_str("Transport: RTP/AVP/TCP;unicast;interleaved=0-1\r\n");
                    } else {
                        let p = 50000 + 2 * u16::from(how >> 5 & 3);
                        req.push_str(&format!(
                            "Transport: RTP/AVP;unicast;client_port={p}-{}\r\n",
                            p + 1
                        ));
                    }
                }
                req.push_str("\r\n");
                w.send(i, req.as_bytes());
            }
            2 | 3 => {
                let Some(i) = pick(w.clients.len()) else {
                    continue;
                };
                let k = input.byte().unwrap_or(0);
                let cookie = k % 3;
                let auth = if k & 0x30 != 0 {
                    basic(usize::from(k >> 4 & 3) - 1)
                } else {
                    String::new()
                };
                let c = &mut w.clients[i];
                let head = if op % 8 == 2 {
                    if c.http {
                        c.get_cookie.get_or_insert(cookie);
                    }
                    format!(
                        "GET /stream HTTP/1.0\r\nx-sessioncookie: c{cookie}\r\nAccept: application/x-rtsp-tunnelled\r\n{auth}\r\n"
                    )
                } else {
                    format!(
                        "POST /stream HTTP/1.0\r\nx-sessioncookie: c{cookie}\r\nContent-Type: application/x-rtsp-tunnelled\r\nContent-Length: 32767\r\n{auth}\r\n"
                    )
                };
                let _ = c.sock.write_all(head.as_bytes());
                // From now on its body is base64 (if the server took it).
                if op % 8 == 3 && c.http {
                    c.post_cookie.get_or_insert(cookie);
                }
            }
            4 => {
                let Some(i) = pick(w.clients.len()) else {
                    continue;
                };
                let channel = input.byte().unwrap_or(1) & 3;
                // An RR without report blocks, then a BYE.
                let mut rtcp = vec![b'$', channel, 0, 16];
                rtcp.extend_from_slice(&[0x80, 201, 0, 1, 1, 2, 3, 4, 0x81, 203, 0, 1, 1, 2, 3, 4]);
                w.send(i, &rtcp);
            }
            5 => {
                let Some(i) = pick(w.clients.len()) else {
                    continue;
                };
                let k = input.byte().unwrap_or(0);
                let auth = if k & 0x30 != 0 {
                    basic(usize::from(k >> 4 & 3) - 1)
                } else {
                    String::new()
                };
                let req = match k % 4 {
                    0 => format!("GET /snapshot.jpg HTTP/1.1\r\n{auth}\r\n"),
                    1 => format!("GET /metrics HTTP/1.1\r\n{auth}\r\n"),
                    2 => format!(
                        "POST /onvif/device_service HTTP/1.1\r\nContent-Length: 0\r\n{auth}\r\n"
                    ),
                    _ => format!("GET / HTTP/1.1\r\n{auth}\r\n"),
                };
                let _ = w.clients[i].sock.write_all(req.as_bytes());
            }
            6 => {
                let Some(i) = pick(w.clients.len()) else {
                    continue;
                };
                let n = usize::from(input.byte().unwrap_or(0) % 64);
                let raw = scrub(input.bytes(n));
                let _ = w.clients[i].sock.write_all(&raw);
            }
            7 => {
                let Some(i) = pick(w.clients.len()) else {
                    continue;
                };
                let c = &mut w.clients[i];
                let _ = c.sock.shutdown(std::net::Shutdown::Both);
                c.open = false;
            }
            _ => {
                // Any method to any target, with a transport a client might
                // offer or botch: the paths that expected a URI or a
                // session to be there.
                let Some(i) = pick(w.clients.len()) else {
                    continue;
                };
                let how = input.byte().unwrap_or(0);
                let what = input.byte().unwrap_or(0);
                let method = ANY_METHOD[usize::from(how) % ANY_METHOD.len()];
                let port = w.rtsp.port();
                let target = TARGETS[usize::from(what) % TARGETS.len()].replace("PORT", &port.to_string());
                let cseq = tag();
                w.tags.insert(cseq, i);
                let mut req = format!("{method} {target} RTSP/1.0\r\nCSeq: {cseq}\r\n");
                if how & 0x80 != 0 {
                    req.push_str(&basic(usize::from(how >> 4 & 1)));
                }
                let c = &w.clients[i];
                if !c.sessions.is_empty() && how & 0x40 != 0 {
                    let s = &c.sessions[usize::from(what >> 4) % c.sessions.len()];
                    req.push_str(&format!("Session: {s}\r\n"));
                }
                if what & 0x08 != 0 {
                    let t = TRANSPORTS[usize::from(how >> 2 & 3)];
                    req.push_str(&format!("Transport: {t}\r\n"));
                }
                req.push_str("\r\n");
                w.send(i, req.as_bytes());
            }
        }
        w.pump();
    }
});
