//! WS-Discovery on UDP 3702: the multicast group joined on every IPv4
//! address the camera has, as addresses come and go (rtnetlink tells when;
//! getifaddrs says what there is); Probes answered with ProbeMatches giving
//! the device service at the address the prober reaches, only to a prober
//! on the subnet the answer leaves by and within AnswerBudget's rate; Hello
//! when an address appears, Bye at a clean stop.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket as StdUdp};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use camstream_onvif::discovery::{AnswerBudget, Endpoint, NotProbe, Probe, message_id, on_link};
use mio::net::UdpSocket;
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

use crate::random::random_fill;
use super::DEVICE_PATH;
use crate::clock::Mono;
use crate::config::Config;

pub const PORT: u16 = 3702;
const GROUP: Ipv4Addr = Ipv4Addr::new(239, 255, 255, 250);

pub struct Discovery {
    socket: UdpSocket,
    netlink: OwnedFd,
    /// Addresses the group is joined on.
    joined: Vec<Ipv4Addr>,
    /// The camera's addresses with their prefix lengths.
    subnets: Vec<(Ipv4Addr, u8)>,
    budget: AnswerBudget,
    endpoint: Endpoint,
    http_port: u16,
    message_number: u64,
    random: fn(&mut [u8]),
}

/// The addresses to be found at, with their prefix lengths.
fn addresses() -> Vec<(Ipv4Addr, u8)> {
    let mut out: Vec<(Ipv4Addr, u8)> = Vec::new();
    for i in super::super::ifaces::ipv4() {
        if !out.iter().any(|&(a, _)| a == i.addr) {
            out.push((i.addr, i.prefix));
        }
    }
    out
}

/// A netlink socket told of IPv4 address changes (RTMGRP_IPV4_IFADDR).
fn address_watch() -> io::Result<OwnedFd> {
    // SAFETY: a socket(2) call; its descriptor is owned from here on.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: a zeroed sockaddr_nl with family and groups set is a valid
    // address for bind(2), given with its size.
    let rc = unsafe {
        let mut sa: libc::sockaddr_nl = std::mem::zeroed();
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = libc::RTMGRP_IPV4_IFADDR as u32;
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(owned)
}

/// WS-Discovery where NVRs can reach the camera: not when ONVIF or HTTP
/// is off, nor when it listens on loopback alone (as the tests' cameras
/// do). Without it the camera still streams: NVRs can be given its address.
pub fn start(cfg: &Config, r: &Registry, udp: Token, netlink: Token) -> Option<Discovery> {
    if !cfg.onvif || cfg.http_port == 0 || cfg.listen.is_loopback() {
        return None;
    }
    match Discovery::open(
        super::endpoint(),
        cfg.http_port,
        r,
        udp,
        netlink,
        random_fill,
    ) {
        Ok(d) => Some(d),
        Err(e) => {
            log::warn!("WS-Discovery off: {e}");
            None
        }
    }
}

impl Discovery {
    pub fn open(
        endpoint: Endpoint,
        http_port: u16,
        registry: &Registry,
        udp: Token,
        netlink: Token,
        random: fn(&mut [u8]),
    ) -> io::Result<Discovery> {
        let std = {
            let s = socket2_bind()?;
            s.set_nonblocking(true)?;
            s
        };
        let mut socket = UdpSocket::from_std(std);
        rustix::net::sockopt::set_ip_multicast_loop(&socket, false)?;
        rustix::net::sockopt::set_ip_multicast_ttl(&socket, 1)?;
        registry.register(&mut socket, udp, Interest::READABLE)?;
        let nl = address_watch()?;
        registry.register(&mut SourceFd(&nl.as_raw_fd()), netlink, Interest::READABLE)?;
        let mut d = Discovery {
            socket,
            netlink: nl,
            joined: Vec::new(),
            subnets: Vec::new(),
            budget: AnswerBudget::default(),
            endpoint,
            http_port,
            message_number: 0,
            random,
        };
        d.refresh();
        Ok(d)
    }

    fn xaddr(&self, ip: Ipv4Addr) -> String {
        match self.http_port {
            80 => format!("http://{ip}{DEVICE_PATH}"),
            p => format!("http://{ip}:{p}{DEVICE_PATH}"),
        }
    }

    fn next_id(&mut self) -> (String, u64) {
        let mut b = [0u8; 16];
        (self.random)(&mut b);
        self.message_number += 1;
        (message_id(b), self.message_number)
    }

    /// Joins the group on new addresses and says Hello there; forgets
    /// addresses gone.
    fn refresh(&mut self) {
        self.subnets = addresses();
        let now: Vec<Ipv4Addr> = self.subnets.iter().map(|&(a, _)| a).collect();
        self.joined.retain(|ip| now.contains(ip));
        let mut changed = false;
        for ip in now {
            if self.joined.contains(&ip) {
                continue;
            }
            match rustix::net::sockopt::set_ip_add_membership(&self.socket, &GROUP, &ip) {
                // In use: the interface has another address that joined.
                Ok(()) | Err(rustix::io::Errno::ADDRINUSE) => {}
                Err(e) => {
                    log::warn!("WS-Discovery: cannot join {GROUP} on {ip}: {e}");
                    continue;
                }
            }
            self.joined.push(ip);
            changed = true;
            log::info!("WS-Discovery: announcing {}", self.xaddr(ip));
        }
        if changed {
            self.endpoint.metadata_version += 1;
            for ip in self.joined.clone() {
                self.multicast(ip, true);
            }
        }
    }

    /// Hello or Bye, out of the interface with address `ip`.
    fn multicast(&mut self, ip: Ipv4Addr, hello: bool) {
        self.endpoint.xaddrs = vec![self.xaddr(ip)];
        let (id, n) = self.next_id();
        let msg = if hello {
            self.endpoint.hello(&id, n)
        } else {
            self.endpoint.bye(&id, n)
        };
        let sent = rustix::net::sockopt::set_ip_multicast_if(&self.socket, &ip)
            .map_err(io::Error::from)
            .and_then(|()| {
                self.socket.send_to(
                    msg.as_bytes(),
                    SocketAddr::V4(SocketAddrV4::new(GROUP, PORT)),
                )
            });
        if let Err(e) = sent {
            log::debug!(
                "WS-Discovery: {} on {ip}: {e}",
                if hello { "Hello" } else { "Bye" }
            );
        }
    }

    /// Address changes: what they are does not matter, getifaddrs says
    /// what is there now.
    pub fn netlink_readable(&mut self) {
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: recv(2) into a buffer of the length given.
            let n = unsafe {
                libc::recv(
                    self.netlink.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                )
            };
            if n <= 0 {
                break;
            }
        }
        self.refresh();
    }

    pub fn udp_readable(&mut self) {
        let mut buf = [0u8; 8192];
        loop {
            let (n, from) = match self.socket.recv_from(&mut buf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::debug!("WS-Discovery: {e}");
                    return;
                }
            };
            let probe = match Probe::parse(buf.get(..n).unwrap_or_default()) {
                Ok(p) => p,
                Err(NotProbe::Other) => continue,
                Err(NotProbe::Unreadable(why)) => {
                    log::debug!("WS-Discovery: {from}: {why}");
                    continue;
                }
            };
            if !probe.matches(&self.endpoint.scopes) {
                continue;
            }
            // The address the prober reaches: the one the kernel would send
            // from to it; answered only if the prober is on its subnet.
            let Some(local) = local_address_towards(from) else {
                continue;
            };
            let SocketAddr::V4(from4) = from else {
                continue;
            };
            let on_subnet =
                |&(a, prefix): &(Ipv4Addr, u8)| a == local && on_link(*from4.ip(), a, prefix);
            if !self.subnets.iter().any(on_subnet) {
                log::debug!(
                    "WS-Discovery: {from} probed from outside {local}'s subnet; not answered"
                );
                continue;
            }
            if !self.budget.allow(*from4.ip(), Mono::now().0 / 1_000_000) {
                log::debug!("WS-Discovery: {from} probed; over the answer rate, not answered");
                continue;
            }
            self.endpoint.xaddrs = vec![self.xaddr(local)];
            let (id, n) = self.next_id();
            let answer = self.endpoint.probe_matches(&probe, &id, n);
            if let Err(e) = self.socket.send_to(answer.as_bytes(), from) {
                log::debug!("WS-Discovery: ProbeMatches to {from}: {e}");
            } else {
                log::debug!(
                    "WS-Discovery: {from} probed; answered with {}",
                    self.xaddr(local)
                );
            }
        }
    }

    /// Bye on every address, at a clean stop.
    pub fn bye(&mut self) {
        for ip in self.joined.clone() {
            self.multicast(ip, false);
        }
    }
}

fn local_address_towards(peer: SocketAddr) -> Option<Ipv4Addr> {
    let s = StdUdp::bind("0.0.0.0:0").ok()?;
    s.connect(peer).ok()?;
    match s.local_addr().ok()? {
        SocketAddr::V4(a) => Some(*a.ip()),
        SocketAddr::V6(_) => None,
    }
}

/// UDP 0.0.0.0:3702 with SO_REUSEADDR (other WS-Discovery listeners on the
/// machine, such as a client being tested, may share the port). Bound
/// without it first, so that a port already taken is known and said.
fn socket2_bind() -> io::Result<StdUdp> {
    use rustix::net::{AddressFamily, SocketType, bind, socket, sockopt};
    let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT);
    let fd = socket(AddressFamily::INET, SocketType::DGRAM, None)?;
    let fd = match bind(&fd, &any) {
        Ok(()) => fd,
        Err(rustix::io::Errno::ADDRINUSE) => {
            let fd = socket(AddressFamily::INET, SocketType::DGRAM, None)?;
            sockopt::set_socket_reuseaddr(&fd, true)?;
            bind(&fd, &any).map_err(|e| {
                io::Error::new(
                    io::Error::from(e).kind(),
                    format!("another program holds UDP {PORT} and does not share it"),
                )
            })?;
            log::warn!(
                "WS-Discovery: another program already listens on UDP {PORT} on this machine \
                 (another camstream?): both get the multicast Probes, but datagrams sent to \
                 this machine's address reach only one of them, and two camstreams announce \
                 the same endpoint (made from /etc/machine-id), so an NVR may list one camera \
                 for both; set onvif = false on all but one"
            );
            fd
        }
        Err(e) => return Err(e.into()),
    };
    // Set once bound: a later listener may still share the port (Linux
    // checks the bound socket's flag when the next one binds).
    sockopt::set_socket_reuseaddr(&fd, true)?;
    Ok(StdUdp::from(fd))
}
