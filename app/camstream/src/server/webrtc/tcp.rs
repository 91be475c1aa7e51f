//! ICE-TCP (RFC 6544), passive: where UDP cannot pass (a firewall, a NAT
//! that forwards TCP only), the browser connects to the camera's TCP
//! candidate, and ICE, DTLS and SRTP travel over that connection, each
//! packet after its length (RFC 4571). A connection belongs to no session
//! until a session's ICE check arrives on it.

use std::io::{self, Read, Write};
use std::net::SocketAddr;

use crate::clock::Mono;
use crate::table::{Id, TOKEN_SLOTS, Table};

pub type TcpId = Id<TcpConn>;

/// From here on, the tokens of WebRTC's TCP connections (its sessions have
/// the range below).
pub const TOKENS: usize = TOKEN_SLOTS / 8 * 7;

pub fn token(id: TcpId) -> mio::Token {
    id.token(TOKENS)
}

pub fn of_token(t: mio::Token) -> Option<TcpId> {
    Id::from_token(t, TOKENS..TOKEN_SLOTS)
}

/// Connections from one address.
pub const PER_ADDRESS: usize = 4;
/// Largest packet taken: ICE, DTLS and RTCP from a browser are small.
const MAX_PACKET: usize = 4096;
/// Unsent bytes past which a connection's packets are dropped whole (a
/// browser that does not read; NACK and PLI recover what it lost).
const OUT_LIMIT: usize = 512 << 10;

pub struct TcpConn {
    pub stream: mio::net::TcpStream,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    pub opened: Mono,
    pub last_input: Mono,
    /// A session's ICE check came over it.
    pub matched: bool,
}

pub type TcpConns = Table<TcpConn>;

impl TcpConn {
    pub fn new(stream: mio::net::TcpStream, peer: SocketAddr, local: SocketAddr) -> TcpConn {
        let now = Mono::now();
        TcpConn {
            stream,
            peer,
            local,
            inbuf: Vec::new(),
            out: Vec::new(),
            opened: now,
            last_input: now,
            matched: false,
        }
    }

    /// Reads what the socket has: its whole packets, and whether more may
    /// be waiting (16 reads a turn: a sender that never pauses cannot keep
    /// the loop; edge-triggered readiness will not say so again). Err: the
    /// connection is over (closed, an error, a packet too large).
    pub fn read(&mut self) -> Result<(Vec<Vec<u8>>, bool), String> {
        let mut packets = Vec::new();
        let mut buf = [0u8; 4096];
        let mut more = true;
        for _ in 0..16 {
            match self.stream.read(&mut buf) {
                Ok(0) => return Err("closed by the browser".into()),
                Ok(n) => {
                    self.last_input = Mono::now();
                    self.inbuf.extend_from_slice(buf.get(..n).unwrap_or_default());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    more = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        }
        let mut used = 0;
        loop {
            let rest = self.inbuf.get(used..).unwrap_or_default();
            let (Some(&hi), Some(&lo)) = (rest.first(), rest.get(1)) else {
                break;
            };
            let len = usize::from(u16::from_be_bytes([hi, lo]));
            if len > MAX_PACKET {
                return Err(format!("a packet of {len} bytes"));
            }
            let Some(packet) = rest.get(2..2 + len) else {
                break;
            };
            packets.push(packet.to_vec());
            used += 2 + len;
        }
        self.inbuf.drain(..used);
        Ok((packets, more))
    }

    /// Queues one packet with its length and writes what the socket takes;
    /// false if it was dropped (the browser reads too slowly).
    pub fn send(&mut self, packet: &[u8]) -> io::Result<bool> {
        let Ok(len) = u16::try_from(packet.len()) else {
            return Ok(false);
        };
        if self.out.len() > OUT_LIMIT {
            self.flush()?;
            if self.out.len() > OUT_LIMIT {
                return Ok(false);
            }
        }
        self.out.extend_from_slice(&len.to_be_bytes());
        self.out.extend_from_slice(packet);
        self.flush()?;
        Ok(true)
    }

    /// Writes what is queued until the socket is full.
    pub fn flush(&mut self) -> io::Result<()> {
        let mut written = 0;
        while written < self.out.len() {
            match self.stream.write(self.out.get(written..).unwrap_or_default()) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.out.drain(..written);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_are_cut_at_their_lengths() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, peer) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let local = server.local_addr().unwrap();
        let mut c = TcpConn::new(mio::net::TcpStream::from_std(server), peer, local);
        // Two packets and the first byte of a third's length.
        client.write_all(&[0, 3, b'a', b'b', b'c', 0, 1, b'd', 0]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(c.read().unwrap(), (vec![b"abc".to_vec(), b"d".to_vec()], false));
        client.write_all(&[2, b'e', b'f']).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(c.read().unwrap(), (vec![b"ef".to_vec()], false));
        // Too large: the connection is over.
        client.write_all(&[0xff, 0xff]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(c.read().is_err());
        assert!(c.send(b"xyz").unwrap());
        let mut back = [0u8; 5];
        client.read_exact(&mut back).unwrap();
        assert_eq!(&back, &[0, 3, b'x', b'y', b'z']);
    }
}
