//! Sending a shared frame: UDP in batches with sendmmsg, TCP interleaved in
//! as few writes as the socket takes. Both stop at EAGAIN and report how far
//! they got, so the event loop resumes when the socket is writable again.

use std::io::{self, IoSlice, Write};
use std::os::fd::AsFd;

use rustix::io::Errno;
use rustix::net::{MMsgHdr, SendAncillaryBuffer, SendFlags, SocketAddrAny, sendmmsg};

use super::frame::{Frame, RECORD_PREFIX};

/// Packets per sendmmsg call.
const BATCH: usize = 32;
/// Records per writev call when the RTP channel is not 0.
const RECORDS_PER_WRITE: usize = 256;

/// Sends RTP packets `from..` of `frame` to `addr`. Returns the index of the
/// first packet not sent: `frame.packets()` when all went out.
pub fn send_udp(
    socket: impl AsFd,
    addr: &SocketAddrAny,
    frame: &Frame,
    mut from: usize,
) -> io::Result<usize> {
    let n = frame.packets();
    while from < n {
        let count = (n - from).min(BATCH);
        let iov: [[IoSlice<'_>; 1]; BATCH] = std::array::from_fn(|i| {
            [IoSlice::new(if i < count {
                frame.packet(from + i)
            } else {
                &[]
            })]
        });
        let mut control: [SendAncillaryBuffer<'_, '_, '_>; BATCH] =
            std::array::from_fn(|_| Default::default());
        let mut i = 0;
        let mut msgs = control.each_mut().map(|c| {
            let m = MMsgHdr::new_with_addr(addr, &iov[i], c);
            i += 1;
            m
        });
        match sendmmsg(&socket, &mut msgs[..count], SendFlags::DONTWAIT) {
            Ok(sent) => from += sent,
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
    frame: &Frame,
    channel: u8,
    mut pos: usize,
) -> io::Result<usize> {
    let total = frame.wire().len();
    while pos < total {
        let r = if channel == 0 {
            stream.write(&frame.wire()[pos..])
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
    frame: &Frame,
    channel: u8,
    pos: usize,
) -> io::Result<usize> {
    let (first, start) = frame.record_at(pos);
    let last = (first + RECORDS_PER_WRITE).min(frame.packets());
    let mut prefixes = [[0u8; RECORD_PREFIX]; RECORDS_PER_WRITE];
    for (k, p) in prefixes.iter_mut().enumerate().take(last - first) {
        p.copy_from_slice(&frame.record(first + k)[..RECORD_PREFIX]);
        p[1] = channel;
    }
    let mut iov = [IoSlice::new(&[]); 2 * RECORDS_PER_WRITE];
    let mut n = 0;
    let mut skip = pos - start;
    for (k, prefix) in prefixes.iter().enumerate().take(last - first) {
        let body = &frame.record(first + k)[RECORD_PREFIX..];
        if skip < RECORD_PREFIX {
            iov[n] = IoSlice::new(&prefix[skip..]);
            iov[n + 1] = IoSlice::new(body);
        } else {
            iov[n] = IoSlice::new(&[]);
            iov[n + 1] = IoSlice::new(&body[skip - RECORD_PREFIX..]);
        }
        n += 2;
        skip = 0;
    }
    stream.write_vectored(&iov[..n])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Mono;
    use crate::server::frame::Pool;
    use camstream_rtp::Packetizer;

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

    #[test]
    fn interleaved_on_other_channels_survives_partial_writes() {
        let scan: Vec<u8> = (0..20_000u32).map(|i| (i % 200) as u8).collect();
        let j = crate::server::frame::tests::jpeg(640, 480, &scan, &[3; 64]);
        let f = Frame::build(
            &Pool::new(1),
            &mut Packetizer::new(1, 1, 1000).unwrap(),
            &j,
            0,
            Mono(0),
            Mono(0),
        );
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
