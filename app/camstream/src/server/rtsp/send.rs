//! Sending a shared frame: UDP in batches with sendmmsg (and GSO where the
//! kernel and route allow), TCP interleaved in
//! as few writes as the socket takes. Both stop at EAGAIN and report how far
//! they got, so the event loop resumes when the socket is writable again.

use std::io::{self, IoSlice, Write};
use std::os::fd::{AsFd, AsRawFd};

use rustix::io::Errno;
use rustix::net::{MMsgHdr, SendAncillaryBuffer, SendFlags, SocketAddrAny, sendmmsg};

use crate::fanout::{RECORD_PREFIX, SharedFrame};

/// Datagrams (or GSO batches) per sendmmsg call.
const BATCH: usize = 32;
/// Packets per sendmmsg call.
const IOV: usize = 256;
/// Segments in one GSO send (UDP_MAX_SEGMENTS: 64 before Linux 6.9).
const GSO_MAX_SEGMENTS: usize = 64;
/// Bytes in one GSO send: it is one IP datagram until segmented, so below
/// 64 KiB with the IPv4 or IPv6 and UDP headers.
const GSO_MAX_BYTES: usize = 65_000;
/// Records per writev call when the RTP channel is not 0.
const RECORDS_PER_WRITE: usize = 256;

/// Turns on UDP generic segmentation offload (Linux 4.18+) with `segment`
/// bytes per datagram: a send of several `segment`-sized packets (the last
/// may be shorter) leaves as that many datagrams, cut by the kernel or the
/// NIC, so a 1080p frame costs a few kernel traversals instead of ~150.
/// Every datagram on the socket must then be at most `segment` bytes.
pub fn set_gso(socket: impl AsFd, segment: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(segment).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: a valid descriptor and a c_int option value of the given size.
    let r = unsafe {
        libc::setsockopt(
            socket.as_fd().as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            (&raw const value).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether a send error means the route cannot take GSO sends (a device
/// without checksum offload: EIO; a segment above the route's MTU: EINVAL),
/// so the caller turns GSO off and sends packet by packet.
pub fn gso_refused(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL))
}

/// Sends RTP packets `from..` of `frame` to `addr`. With `gso` (the segment
/// size set by [`set_gso`]) a run of full-sized packets goes in one message.
/// Returns the index of the first packet not sent: `frame.packets()` when
/// all went out.
pub fn send_udp(
    socket: impl AsFd,
    addr: &SocketAddrAny,
    frame: &SharedFrame,
    mut from: usize,
    gso: Option<usize>,
) -> io::Result<usize> {
    let n = frame.packets();
    while from < n {
        let mut iov = [IoSlice::new(&[]); IOV];
        // Each message's first packet and packet count.
        let mut runs = [(0usize, 0usize); BATCH];
        let (mut count, mut slices, mut p) = (0, 0, from);
        while p < n && count < BATCH && slices < IOV {
            let (start, mut bytes) = (slices, 0);
            // `slices` is below IOV at first: the loop runs at least once.
            while let Some(slot) = iov.get_mut(slices) {
                let packet = frame.packet(p);
                *slot = IoSlice::new(packet);
                slices += 1;
                p += 1;
                bytes += packet.len();
                let Some(segment) = gso else { break };
                debug_assert!(packet.len() <= segment);
                // A shorter packet can only end a message: the kernel cuts
                // at every `segment` bytes.
                if packet.len() != segment
                    || p == n
                    || slices == IOV
                    || slices - start == GSO_MAX_SEGMENTS
                    || bytes + segment > GSO_MAX_BYTES
                {
                    break;
                }
            }
            if let Some(run) = runs.get_mut(count) {
                *run = (start, slices - start);
            }
            count += 1;
        }
        let mut control: [SendAncillaryBuffer<'_, '_, '_>; BATCH] =
            std::array::from_fn(|_| Default::default());
        let mut k = 0;
        let mut msgs = control.each_mut().map(|c| {
            let (start, len) = runs.get(k).copied().unwrap_or_default();
            k += 1;
            MMsgHdr::new_with_addr(addr, iov.get(start..start + len).unwrap_or_default(), c)
        });
        let batch = msgs.get_mut(..count).unwrap_or_default();
        match sendmmsg(&socket, batch, SendFlags::DONTWAIT) {
            Ok(sent) => from += runs.iter().take(sent).map(|r| r.1).sum::<usize>(),
            Err(Errno::AGAIN) => return Ok(from),
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(from)
}

/// Writes `frame`'s interleaved records from byte `pos` with RTP on
/// `channel`. Returns the new position: `frame.wire().len()` when done.
pub fn write_interleaved(
    stream: &mut impl Write,
    frame: &SharedFrame,
    channel: u8,
    mut pos: usize,
) -> io::Result<usize> {
    let total = frame.wire().len();
    while pos < total {
        let r = if channel == 0 {
            stream.write(frame.wire().get(pos..).unwrap_or_default())
        } else {
            write_records(stream, frame, channel, pos)
        };
        match r {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => pos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(pos),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(pos)
}

/// One writev of records with their channel byte replaced.
fn write_records(
    stream: &mut impl Write,
    frame: &SharedFrame,
    channel: u8,
    pos: usize,
) -> io::Result<usize> {
    let (first, start) = frame.record_at(pos);
    let last = (first + RECORDS_PER_WRITE).min(frame.packets());
    let mut prefixes = [[0u8; RECORD_PREFIX]; RECORDS_PER_WRITE];
    for (k, p) in prefixes.iter_mut().enumerate().take(last - first) {
        for (d, s) in p.iter_mut().zip(frame.record(first + k)) {
            *d = *s;
        }
        p[1] = channel;
    }
    let mut iov = [IoSlice::new(&[]); 2 * RECORDS_PER_WRITE];
    let mut n = 0;
    let mut skip = pos - start;
    let records = prefixes.iter().enumerate().take(last - first);
    for ((k, prefix), pair) in records.zip(iov.chunks_exact_mut(2)) {
        let body = frame
            .record(first + k)
            .get(RECORD_PREFIX..)
            .unwrap_or_default();
        let (head, body) = match skip.checked_sub(RECORD_PREFIX) {
            None => (prefix.get(skip..).unwrap_or_default(), body),
            Some(into_body) => (&[][..], body.get(into_body..).unwrap_or_default()),
        };
        if let [h, b] = pair {
            *h = IoSlice::new(head);
            *b = IoSlice::new(body);
        }
        n += 2;
        skip = 0;
    }
    stream.write_vectored(iov.get(..n).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Mono;
    use crate::fanout::frame::Pool;
    use crate::codec::{Codec, Packetizer, Unit};

    /// A writer that takes at most `chunk` bytes per call.
    struct Dribble {
        out: Vec<u8>,
        chunk: usize,
    }

    impl Write for Dribble {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.chunk);
            self.out.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let mut left = self.chunk;
            for b in bufs {
                let n = b.len().min(left);
                self.out.extend_from_slice(&b[..n]);
                left -= n;
                if left == 0 {
                    break;
                }
            }
            Ok(self.chunk - left)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Every packet arrives as its own datagram, in order, with and
    /// without GSO, across several messages and sendmmsg calls.
    #[test]
    fn udp_packets_leave_one_datagram_each() {
        use std::net::UdpSocket;
        use std::time::Duration;
        let scan: Vec<u8> = (0..40_000u32).map(|i| (i % 200) as u8).collect();
        let j = crate::fanout::frame::tests::jpeg(640, 480, &scan, &[3; 64]);
        let mtu = 400;
        let f = SharedFrame::build(
            &Pool::new(1),
            &mut Packetizer::new(Codec::Jpeg, 1, 1, mtu).unwrap(),
            &Unit::Jpeg(&j),
            0,
            Mono(0),
            Mono(0),
        )
        .unwrap();
        assert!(f.packets() > GSO_MAX_SEGMENTS + 1);
        for gso in [None, Some(mtu)] {
            let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
            rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
            if let Some(segment) = gso {
                set_gso(&tx, segment).unwrap();
            }
            let to = SocketAddrAny::from(rx.local_addr().unwrap());
            // The whole frame, then from the middle as after EAGAIN.
            let mut buf = [0u8; 2048];
            for from in [0, 7] {
                assert_eq!(send_udp(&tx, &to, &f, from, gso).unwrap(), f.packets());
                for i in from..f.packets() {
                    let len = rx.recv(&mut buf).unwrap();
                    assert_eq!(&buf[..len], f.packet(i), "{gso:?}, packet {i}");
                }
            }
            rx.set_nonblocking(true).unwrap();
            assert!(rx.recv(&mut buf).is_err(), "{gso:?}: a datagram too many");
        }
    }

    #[test]
    fn interleaved_on_other_channels_survives_partial_writes() {
        let scan: Vec<u8> = (0..20_000u32).map(|i| (i % 200) as u8).collect();
        let j = crate::fanout::frame::tests::jpeg(640, 480, &scan, &[3; 64]);
        let f = SharedFrame::build(
            &Pool::new(1),
            &mut Packetizer::new(Codec::Jpeg, 1, 1, 1000).unwrap(),
            &Unit::Jpeg(&j),
            0,
            Mono(0),
            Mono(0),
        )
        .unwrap();
        for chunk in [1, 3, 7, 1000, 100_000] {
            let mut w = Dribble {
                out: Vec::new(),
                chunk,
            };
            assert_eq!(write_interleaved(&mut w, &f, 4, 0).unwrap(), f.wire().len());
            let mut expect = f.wire().to_vec();
            for i in 0..f.packets() {
                let (_, start) =
                    f.record_at(f.record(i).as_ptr() as usize - f.wire().as_ptr() as usize);
                expect[start + 1] = 4;
            }
            assert_eq!(w.out, expect, "chunk {chunk}");
        }
    }
}
