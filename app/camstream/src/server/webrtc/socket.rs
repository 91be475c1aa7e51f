//! WebRTC's one UDP socket. ICE matches a check against the candidate it
//! was sent to, so each datagram comes with the local address it arrived
//! at: the bound one, or, bound to every address (0.0.0.0), the one the
//! kernel says (IP_PKTINFO).

use std::io;
use std::mem::{MaybeUninit, size_of};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;

use mio::net::UdpSocket;

pub struct Socket {
    pub udp: UdpSocket,
    /// The address bound (its port is every candidate's on the camera).
    pub addr: SocketAddr,
    /// Bound to 0.0.0.0: each datagram's destination is asked of the kernel.
    pktinfo: bool,
}

impl Socket {
    pub fn bind(addr: SocketAddr) -> io::Result<Socket> {
        let udp = UdpSocket::bind(addr)?;
        let addr = udp.local_addr()?;
        let pktinfo = addr.ip() == IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        if pktinfo {
            let on: libc::c_int = 1;
            // SAFETY: a valid descriptor and a c_int option value of its size.
            let r = unsafe {
                libc::setsockopt(
                    udp.as_raw_fd(),
                    libc::IPPROTO_IP,
                    libc::IP_PKTINFO,
                    (&raw const on).cast(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Socket { udp, addr, pktinfo })
    }

    /// One datagram into `buf`: its length, sender and the local address it
    /// was sent to.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, SocketAddr)> {
        if !self.pktinfo {
            let (n, from) = self.udp.recv_from(buf)?;
            return Ok((n, from, self.addr));
        }
        let mut from = MaybeUninit::<libc::sockaddr_in>::zeroed();
        // Room for one in_pktinfo message, aligned as cmsghdr needs.
        let mut control = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: a zeroed msghdr is a valid empty one; its pointers are
        // set below to buffers that outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = from.as_mut_ptr().cast();
        msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of::<[u64; 8]>() as _;
        // SAFETY: msg points at a name, one iovec over `buf` and a control
        // buffer, all valid for the sizes given.
        let n = unsafe { libc::recvmsg(self.udp.as_raw_fd(), &raw mut msg, libc::MSG_DONTWAIT) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: recvmsg filled the name (an IPv4 socket's sender is a
        // sockaddr_in).
        let from = unsafe { from.assume_init() };
        let sender = SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::from(u32::from_be(from.sin_addr.s_addr)),
            u16::from_be(from.sin_port),
        ));
        let mut local = self.addr;
        // SAFETY: the CMSG macros walk the control buffer recvmsg filled,
        // within msg_controllen; an IP_PKTINFO message holds an in_pktinfo.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_PKTINFO {
                    let info: libc::in_pktinfo =
                        std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    let ip = Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr));
                    local = SocketAddr::new(IpAddr::V4(ip), self.addr.port());
                }
                c = libc::CMSG_NXTHDR(&raw const msg, c);
            }
        }
        Ok((n as usize, sender, local))
    }
}

/// linux/udp.h's option: the size each datagram of a sendmsg is cut to
/// (glibc's headers, and the libc crate for them, do not name it).
const UDP_SEGMENT: libc::c_int = 103;
/// At most this many datagrams in one send (the kernel takes up to 64 on
/// older kernels) and this many bytes (one IP datagram's limit, less its
/// headers).
const GSO_SEGMENTS: u16 = 64;
const GSO_BYTES: usize = 65_000;

/// Datagrams to one address sent in one `sendmsg` with `UDP_SEGMENT`
/// (Linux's UDP GSO, 4.18 on): each the size of the first, the last one
/// perhaps shorter, which is what a frame's packets to one viewer are. One
/// system call and one trip down the IP stack a frame instead of one a
/// packet: that trip was half of the event loop's time with 30 viewers.
/// The receiver gets the datagrams as if sent one by one. Where the kernel
/// refuses it, the datagrams go one by one from then on.
#[derive(Default)]
pub struct Gso {
    to: Option<SocketAddr>,
    size: usize,
    buf: Vec<u8>,
    count: u16,
    /// A shorter datagram ended the batch.
    closed: bool,
    off: bool,
}

impl Socket {
    /// `data` to `to`, batched with the datagrams before it where it can be:
    /// sent by [`Socket::flush`] or by the next datagram that cannot join.
    pub fn send(&self, gso: &mut Gso, to: SocketAddr, data: &[u8]) {
        if gso.off {
            self.send_one(to, data);
            return;
        }
        let joins = gso.to == Some(to)
            && !gso.closed
            && data.len() <= gso.size
            && gso.count < GSO_SEGMENTS
            && gso.buf.len() + data.len() <= GSO_BYTES;
        if !joins {
            self.flush(gso);
            gso.to = Some(to);
            gso.size = data.len();
        }
        gso.buf.extend_from_slice(data);
        gso.count += 1;
        gso.closed = data.len() < gso.size;
    }

    /// Sends what `gso` holds.
    pub fn flush(&self, gso: &mut Gso) {
        let Some(to) = gso.to.take() else {
            return;
        };
        if gso.count == 1 {
            self.send_one(to, &gso.buf);
        } else if let Err(e) = self.send_segments(to, &gso.buf, gso.size) {
            match e.raw_os_error() {
                // Not this kernel's or this device's: one by one, from now on.
                Some(libc::EIO | libc::EINVAL | libc::ENOPROTOOPT | libc::EOPNOTSUPP) => {
                    log::info!("WebRTC: no UDP segmentation offload here ({e}): one datagram a send");
                    gso.off = true;
                    for d in gso.buf.chunks(gso.size) {
                        self.send_one(to, d);
                    }
                }
                _ => note_send_error(to, &e),
            }
        }
        gso.buf.clear();
        gso.count = 0;
        gso.closed = false;
    }

    /// One datagram, on its own.
    pub fn send_one(&self, to: SocketAddr, data: &[u8]) {
        if let Err(e) = self.udp.send_to(data, to) {
            note_send_error(to, &e);
        }
    }

    fn send_segments(&self, to: SocketAddr, data: &[u8], size: usize) -> io::Result<()> {
        let (mut name, name_len) = sockaddr(to);
        let mut iov = libc::iovec {
            iov_base: data.as_ptr().cast_mut().cast(),
            iov_len: data.len(),
        };
        // Room for one u16 control message, aligned as cmsghdr needs.
        let mut control = [0u64; 4];
        // SAFETY: a zeroed msghdr is a valid empty one; its pointers are
        // set below to buffers that outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&raw mut name).cast();
        msg.msg_namelen = name_len;
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is arithmetic on its argument.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) } as _;
        let segment = size as u16;
        // SAFETY: the control buffer holds one cmsghdr and a u16 (checked by
        // CMSG_SPACE against its size above); sendmsg reads only what msg
        // points at, valid for the sizes given; the socket does not block.
        let n = unsafe {
            let c = libc::CMSG_FIRSTHDR(&raw const msg);
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), segment);
            libc::sendmsg(self.udp.as_raw_fd(), &raw const msg, libc::MSG_DONTWAIT)
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// A full socket buffer drops the packet, as the network would.
pub fn note_send_error(to: SocketAddr, e: &io::Error) {
    if e.kind() != io::ErrorKind::WouldBlock {
        log::debug!("WebRTC: send to {to}: {e}");
    }
}

/// `to` as the C library's socket address.
fn sockaddr(to: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: a zeroed sockaddr_storage is valid; it is large and aligned
    // enough for either family written into it.
    let mut out: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match to {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: see above.
            unsafe { std::ptr::write((&raw mut out).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: see above.
            unsafe { std::ptr::write((&raw mut out).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (out, len as libc::socklen_t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_to_every_address_each_datagram_says_where_it_went() {
        let s = Socket::bind("0.0.0.0:0".parse().unwrap()).unwrap();
        let to = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), s.addr.port());
        let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        client.send_to(b"check", to).unwrap();
        let mut buf = [0u8; 64];
        let got = loop {
            match s.recv(&mut buf) {
                Ok(r) => break r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(got, (5, client.local_addr().unwrap(), to));
        assert_eq!(&buf[..5], b"check");
    }

    /// A frame's packets to two viewers, interleaved with a short RTCP
    /// packet: each viewer gets its datagrams whole, in order, as sent.
    #[test]
    fn batched_datagrams_arrive_one_by_one() {
        let s = Socket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let packet = |n: u8, len: usize| vec![n; len];
        let mut gso = Gso::default();
        let (to_a, to_b) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let sent_a = [packet(1, 1200), packet(2, 1200), packet(3, 1200), packet(4, 500), packet(5, 1200)];
        let sent_b = [packet(6, 1200), packet(7, 80), packet(8, 1200)];
        for d in &sent_a {
            s.send(&mut gso, to_a, d);
        }
        s.send(&mut gso, to_b, &sent_b[0]);
        s.send(&mut gso, to_b, &sent_b[1]);
        s.send(&mut gso, to_b, &sent_b[2]);
        s.flush(&mut gso);
        for (r, sent) in [(&a, &sent_a[..]), (&b, &sent_b[..])] {
            r.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 2048];
            for d in sent {
                let n = r.recv(&mut buf).unwrap();
                assert_eq!(&buf[..n], &d[..]);
            }
        }
        assert!(!gso.off, "this kernel sends UDP segments");
    }
}
