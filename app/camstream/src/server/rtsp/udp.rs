//! RTP over UDP: the one RTP/RTCP socket pair every UDP session shares, and
//! the sessions waiting for the RTP socket to take more (a full socket
//! buffer delays them; the first to wait is the first sent again).

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, SocketAddr};

use anyhow::{Context, Result, bail};
use mio::net::UdpSocket;

use crate::fanout::Fanout;
use super::send;
use super::session::{SessionId, Sessions, Transport};

pub struct Udp {
    pub rtp_socket: UdpSocket,
    pub rtcp_socket: UdpSocket,
    /// The RTP port (RTCP's is the next).
    pub port: u16,
    /// The GSO segment size set on `rtp_socket` (the MTU), if the kernel
    /// took it; turned off if a route refuses GSO sends.
    gso: Option<usize>,
    backlog: VecDeque<SessionId>,
    blocked: bool,
}

impl Udp {
    /// Binds the RTP/RTCP port pair: `port` and `port + 1`, or a free
    /// even/odd pair when `port` is 0.
    pub fn bind(ip: IpAddr, port: u16, mtu: usize) -> Result<Udp> {
        let (rtp_socket, rtcp_socket, port) = bind_pair(ip, port)?;
        // Room for a few 1080p frames; a full buffer only delays UDP sends.
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&rtp_socket, 1 << 20);
        let gso = match send::set_gso(&rtp_socket, mtu) {
            Ok(()) => Some(mtu),
            Err(e) => {
                log::info!("UDP segmentation offload not available ({e}): one datagram per send");
                None
            }
        };
        Ok(Udp {
            rtp_socket,
            rtcp_socket,
            port,
            gso,
            backlog: VecDeque::new(),
            blocked: false,
        })
    }

    /// Sends session `si`'s frames, or has it wait for the socket.
    pub fn flush_or_backlog(
        &mut self,
        sessions: &mut Sessions,
        si: SessionId,
        fanout: &mut Fanout,
        cname: &str,
    ) {
        if self.blocked || !self.flush(sessions, si, fanout, cname) {
            self.blocked = true;
            // The backlog is the one record of who waits (a few sessions:
            // max_clients at most).
            if sessions.get(si).is_some() && !self.backlog.contains(&si) {
                self.backlog.push_back(si);
            }
        }
    }

    /// Sends a UDP session's frames; false if the socket buffer is full.
    fn flush(&mut self, sessions: &mut Sessions, si: SessionId, fanout: &mut Fanout, cname: &str) -> bool {
        let Some(s) = sessions.get_mut(si) else {
            return true;
        };
        let Transport::Udp { rtp, rtcp } = &s.transport else {
            return true;
        };
        let rtcp = *rtcp;
        loop {
            if s.sending.is_none() && s.report_first {
                // The report for its first frame's instant, just before it.
                if let Some(f) = fanout.peek(s.subscription) {
                    s.report_first = false;
                    let mut report = [0u8; camstream_rtp::rtcp::MAX_COMPOUND_LEN];
                    let n = super::rtcp::sender_report(s, Some(f), false, fanout, cname, &mut report);
                    self.send_rtcp(rtcp, report.get(..n).unwrap_or_default());
                }
            }
            if s.sending.is_none() {
                match fanout.next(s.subscription) {
                    Some(f) => s.sending = Some((f, 0)),
                    None => return true,
                }
            }
            let Some((f, from)) = s.sending.as_mut() else {
                return true;
            };
            match send::send_udp(&self.rtp_socket, rtp, f, *from, self.gso) {
                Ok(n) if n == f.packets() => {
                    fanout.delivered(s.subscription, f, f.wire().len() - 4 * n);
                    s.sending = None;
                }
                Ok(n) => {
                    *from = n;
                    return false;
                }
                Err(e) if self.gso.is_some() && send::gso_refused(&e) => {
                    log::warn!(
                        "sending to {} with UDP segmentation offload: {e}; sending one datagram per packet from now on",
                        s.peer
                    );
                    self.gso = None;
                    if let Err(e) = send::set_gso(&self.rtp_socket, 0) {
                        log::error!("cannot turn UDP segmentation offload off: {e}");
                    }
                }
                Err(e) => {
                    if !s.warned_send_error {
                        log::warn!("session {}: sending to {}: {e}", s.id, s.peer);
                        s.warned_send_error = true;
                    }
                    fanout.lost(s.subscription);
                    s.sending = None;
                }
            }
        }
    }

    /// The RTP socket takes more: the waiting sessions, in turn.
    pub fn writable(&mut self, sessions: &mut Sessions, fanout: &mut Fanout, cname: &str) {
        self.blocked = false;
        while let Some(si) = self.backlog.pop_front() {
            if !self.flush(sessions, si, fanout, cname) {
                self.blocked = true;
                if sessions.get(si).is_some() {
                    self.backlog.push_front(si);
                }
                return;
            }
        }
    }

    /// A session that ended no longer waits.
    pub fn forget(&mut self, si: SessionId) {
        self.backlog.retain(|&k| k != si);
    }

    /// Clients may send NAT-opening packets to the RTP port; nothing to do.
    pub fn rtp_readable(&mut self) {
        let mut buf = [0u8; 2048];
        while self.rtp_socket.recv_from(&mut buf).is_ok() {}
    }

    /// The next RTCP datagram and where it came from.
    pub fn recv_rtcp(&self, buf: &mut [u8]) -> Option<(usize, SocketAddr)> {
        loop {
            match self.rtcp_socket.recv_from(buf) {
                Ok(r) => return Some(r),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }

    pub fn send_rtcp(&self, to: SocketAddr, packet: &[u8]) {
        let _ = self.rtcp_socket.send_to(packet, to);
    }

    pub fn audit(&self, sessions: &Sessions) -> Result<(), String> {
        match self.backlog.iter().find(|&&si| sessions.get(si).is_none()) {
            Some(si) => Err(format!("the UDP backlog holds a gone session {si:?}")),
            None => Ok(()),
        }
    }
}

fn bind_pair(ip: IpAddr, port: u16) -> Result<(UdpSocket, UdpSocket, u16)> {
    if port != 0 {
        let rtp = UdpSocket::bind(SocketAddr::new(ip, port))
            .with_context(|| format!("cannot bind UDP port {port} (rtp_port) on {ip}"))?;
        let rtcp = UdpSocket::bind(SocketAddr::new(ip, port + 1))
            .with_context(|| format!("cannot bind UDP port {} (rtp_port + 1) on {ip}", port + 1))?;
        return Ok((rtp, rtcp, port));
    }
    for _ in 0..64 {
        let rtp = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        let p = rtp.local_addr()?.port();
        if p % 2 != 0 || p == u16::MAX {
            continue;
        }
        if let Ok(rtcp) = UdpSocket::bind(SocketAddr::new(ip, p + 1)) {
            return Ok((rtp, rtcp, p));
        }
    }
    bail!("cannot find a free pair of UDP ports for RTP and RTCP on {ip}")
}
