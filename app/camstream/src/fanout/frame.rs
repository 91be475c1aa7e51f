//! A frame made once for every client: its RTP packets laid out as RTSP
//! interleaved records (`$`, channel 0, length, packet), so a TCP client is
//! sent one contiguous byte range and a UDP client gets each packet as a
//! slice of it; and for JPEG the file HTTP clients get, rebuilt from the
//! packets as an RTP/JPEG receiver rebuilds it, the first time one asks
//! (most frames only ever go out over RTP: no file is made for them, and
//! a pooled frame holds half the memory). Frames are shared by
//! reference count and a pool keeps them: once the last client is done, the
//! frame (its reference count and its buffers) carries a later one, so a
//! frame costs no allocation and memory depends on the queue depth, not on
//! the number of clients.

use std::cell::{Cell, OnceCell, RefCell};
use std::rc::Rc;

use camstream_rtp::IncomingPacket;

use crate::clock::Mono;
use crate::codec::{Packetizer, Records, Unit};

/// Bytes before each RTP packet in the wire layout: `$`, channel, length.
pub const RECORD_PREFIX: usize = 4;

#[derive(Default)]
struct Buffers {
    wire: Vec<u8>,
    /// Start of each record in `wire`, then `wire.len()`.
    records: Vec<u32>,
    /// The frame as a file, written with its packets: an H.264 access
    /// unit in Annex B, audio as HTTP plays it.
    file: Vec<u8>,
    /// A JPEG frame's file (RFC 2435 Appendix B headers), made from the
    /// packets when first asked for.
    jpeg: OnceCell<Vec<u8>>,
    /// `jpeg`'s buffer while no file is made, kept for its capacity.
    spare: Cell<Vec<u8>>,
}

impl Records for Buffers {
    /// Each packet as an interleaved record.
    fn packet(&mut self, header: &[u8], payload: &[u8]) {
        self.records.push(self.wire.len() as u32);
        self.wire.extend_from_slice(&[b'$', 0]);
        self.wire
            .extend_from_slice(&((header.len() + payload.len()) as u16).to_be_bytes());
        self.wire.extend_from_slice(header);
        self.wire.extend_from_slice(payload);
    }

    fn file(&mut self) -> &mut Vec<u8> {
        &mut self.file
    }
}

/// What a frame says of itself beyond its bytes.
struct Head {
    first_sequence: u16,
    timestamp: u32,
    captured: Mono,
    entered: Mono,
}

/// The frames of one stream: each is reused once only the pool holds it.
pub struct Pool {
    frames: RefCell<Vec<Rc<SharedFrame>>>,
    keep: usize,
}

impl Pool {
    pub fn new(keep: usize) -> Rc<Pool> {
        Rc::new(Pool {
            frames: RefCell::new(Vec::with_capacity(keep)),
            keep,
        })
    }
}

pub struct SharedFrame {
    bufs: Buffers,
    /// A JPEG frame's width and height (its payload headers say 0 above
    /// 2040); None for other codecs.
    jpeg_size: Option<(u16, u16)>,
    pub timestamp: u32,
    pub first_sequence: u16,
    pub captured: Mono,
    /// When the source handed it to the server (send latency starts here).
    pub entered: Mono,
    /// RTP payload bytes (what RTCP octet counts add up).
    pub payload_octets: u32,
    /// A client can start decoding here: every JPEG frame, an H.264 IDR
    /// picture.
    pub key: bool,
}

impl SharedFrame {
    /// Packetizes `unit` (and writes a JPEG's file) into a pooled frame no
    /// client holds any more, or a new one (kept if the pool has room);
    /// None if it is not `packetizer`'s codec.
    pub fn build(
        pool: &Pool,
        packetizer: &mut Packetizer,
        unit: &Unit<'_>,
        timestamp: u32,
        captured: Mono,
        entered: Mono,
    ) -> Option<Rc<SharedFrame>> {
        if !packetizer.takes(unit) {
            return None;
        }
        let head = Head {
            first_sequence: packetizer.next_sequence(),
            timestamp,
            captured,
            entered,
        };
        let jpeg_size = match unit {
            Unit::Jpeg(j) => Some((j.width, j.height)),
            _ => None,
        };
        Some(Self::fill(pool, head, jpeg_size, |bufs| {
            let made = packetizer.write(unit, timestamp, bufs);
            bufs.records.push(bufs.wire.len() as u32);
            made
        }))
    }

    /// A frame no client holds (or a new one, kept if the pool has room),
    /// emptied and filled by `write`, which says whether it is a key frame
    /// and gives the payload octets.
    fn fill(
        pool: &Pool,
        head: Head,
        jpeg_size: Option<(u16, u16)>,
        write: impl FnOnce(&mut Buffers) -> (bool, u32),
    ) -> Rc<SharedFrame> {
        let mut frames = pool.frames.borrow_mut();
        let empty = || {
            Rc::new(SharedFrame {
                bufs: Buffers::default(),
                jpeg_size: None,
                timestamp: 0,
                first_sequence: 0,
                captured: Mono(0),
                entered: Mono(0),
                payload_octets: 0,
                key: false,
            })
        };
        let mut shared = match frames.iter_mut().position(|f| Rc::get_mut(f).is_some()) {
            Some(i) => frames.swap_remove(i),
            None => empty(),
        };
        // Never held elsewhere: taken because no client held it, or new.
        if Rc::get_mut(&mut shared).is_none() {
            shared = empty();
        }
        let Some(frame) = Rc::get_mut(&mut shared) else {
            return shared;
        };
        let bufs = &mut frame.bufs;
        bufs.wire.clear();
        bufs.records.clear();
        bufs.file.clear();
        if let Some(jpeg) = bufs.jpeg.take() {
            bufs.spare.set(jpeg);
        }
        frame.jpeg_size = jpeg_size;
        (frame.key, frame.payload_octets) = write(bufs);
        frame.first_sequence = head.first_sequence;
        frame.timestamp = head.timestamp;
        frame.captured = head.captured;
        frame.entered = head.entered;
        // Within the capacity reserved: no allocation.
        if frames.len() < pool.keep {
            frames.push(shared.clone());
        }
        shared
    }

    pub fn packets(&self) -> usize {
        self.bufs.records.len().saturating_sub(1)
    }

    /// The interleaved records for RTP channel 0.
    pub fn wire(&self) -> &[u8] {
        &self.bufs.wire
    }

    /// The frame as a file: a JPEG file, made from the packets the first
    /// time it is asked for (a copy of the scan, on the event loop: about
    /// as much work as sending it once); audio's as the packetizer wrote it.
    pub fn jpeg(&self) -> &[u8] {
        let Some((width, height)) = self.jpeg_size else {
            return &self.bufs.file;
        };
        self.bufs.jpeg.get_or_init(|| {
            let mut file = self.bufs.spare.take();
            file.clear();
            let payloads = (0..self.packets())
                .filter_map(|i| IncomingPacket::parse(self.packet(i)).ok().map(|p| p.payload));
            // The packetizer's own packets: they always make a file.
            let made = camstream_rtp::jfif::write_file_from_payloads(&mut file, width, height, payloads);
            debug_assert!(made.is_some(), "a JPEG frame's packets made no file");
            file
        })
    }

    /// An H.264 frame's access unit in Annex B, parameter sets before an
    /// IDR picture.
    #[cfg_attr(not(feature = "webrtc"), allow(dead_code))]
    pub fn annex_b(&self) -> &[u8] {
        &self.bufs.file
    }

    /// Record `i`: prefix and RTP packet.
    pub fn record(&self, i: usize) -> &[u8] {
        let r = &self.bufs.records;
        match (r.get(i), r.get(i + 1)) {
            (Some(&start), Some(&end)) => self.bufs.wire.get(start as usize..end as usize),
            _ => None,
        }
        .unwrap_or_default()
    }

    /// RTP packet `i`.
    pub fn packet(&self, i: usize) -> &[u8] {
        self.record(i).get(RECORD_PREFIX..).unwrap_or_default()
    }

    /// The record holding byte `pos` of [`SharedFrame::wire`], and where it starts.
    pub fn record_at(&self, pos: usize) -> (usize, usize) {
        let r = &self.bufs.records;
        let i = r
            .partition_point(|&start| start as usize <= pos)
            .saturating_sub(1);
        (i, r.get(i).map_or(0, |&start| start as usize))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::codec::Codec;
    use camstream_rtp::Jpeg;
    use camstream_rtp::jpeg::{QuantTable, Subsampling};

    /// A parsed frame of the given size around `scan`, both tables `table`.
    pub(crate) fn jpeg<'a>(
        width: u16,
        height: u16,
        scan: &'a [u8],
        table: &'a [u8; 64],
    ) -> Jpeg<'a> {
        Jpeg {
            width,
            height,
            subsampling: Subsampling::Yuv420,
            restart_interval: 0,
            quant_tables: [QuantTable { data: table }, QuantTable { data: table }],
            scan,
            len: 0,
        }
    }

    #[test]
    fn layout_and_pooling() {
        let scan = vec![7u8; 5000];
        let j = jpeg(64, 64, &scan, &[1; 64]);
        let pool = Pool::new(2);
        let mut p = Packetizer::new(Codec::Jpeg, 5, 100, 1400).unwrap();
        let j = Unit::Jpeg(&j);
        let f = SharedFrame::build(&pool, &mut p, &j, 42, Mono(0), Mono(0)).unwrap();
        assert_eq!(f.first_sequence, 100);
        assert_eq!(f.packets(), 4);
        let mut total = 0;
        for i in 0..f.packets() {
            let r = f.record(i);
            assert_eq!(r[0], b'$');
            assert_eq!(usize::from(u16::from_be_bytes([r[2], r[3]])), r.len() - 4);
            assert_eq!(
                u16::from_be_bytes([f.packet(i)[2], f.packet(i)[3]]),
                100 + i as u16
            );
            let (idx, start) = f.record_at(total + 1);
            assert_eq!((idx, start), (i, total));
            total += r.len();
        }
        assert_eq!(total, f.wire().len());
        assert_eq!(f.payload_octets as usize, 5000 + 4 * 8 + 4 + 128);
        let file = camstream_rtp::jpeg::parse(f.jpeg()).unwrap();
        assert_eq!((file.width, file.height, file.scan), (64, 64, &scan[..]));
        // A frame a client holds is not reused; one only the pool holds is,
        // whole (the same allocation), with the new frame's contents.
        let held = Rc::as_ptr(&f);
        let f2 = SharedFrame::build(&pool, &mut p, &j, 43, Mono(0), Mono(0)).unwrap();
        assert_ne!(Rc::as_ptr(&f2), held);
        assert_eq!(pool.frames.borrow().len(), 2);
        drop(f);
        let f3 = SharedFrame::build(&pool, &mut p, &j, 44, Mono(7), Mono(8)).unwrap();
        assert_eq!(Rc::as_ptr(&f3), held);
        assert_eq!((f3.timestamp, f3.first_sequence), (44, 108));
        assert_eq!((f3.captured, f3.entered), (Mono(7), Mono(8)));
        assert_eq!(f3.packets(), 4);
        // Past the pool's size, frames are made and freed as before.
        let f4 = SharedFrame::build(&pool, &mut p, &j, 45, Mono(0), Mono(0)).unwrap();
        assert_eq!(pool.frames.borrow().len(), 2);
        drop((f2, f3, f4));
    }

    #[test]
    fn a_jpeg_file_is_made_when_asked_for_and_its_buffer_kept() {
        let (a, b) = (vec![7u8; 9000], vec![9u8; 8000]);
        let (ja, jb) = (jpeg(3840, 2160, &a, &[1; 64]), jpeg(3840, 2160, &b, &[2; 64]));
        let pool = Pool::new(1);
        let mut p = Packetizer::new(Codec::Jpeg, 5, 100, 1400).unwrap();
        let f = SharedFrame::build(&pool, &mut p, &Unit::Jpeg(&ja), 1, Mono(0), Mono(0)).unwrap();
        assert!(f.bufs.jpeg.get().is_none(), "made before anyone asked");
        let mut want = Vec::new();
        camstream_rtp::jfif::write_file(&mut want, &ja);
        assert_eq!(f.jpeg(), &want[..]);
        let made = f.jpeg().as_ptr();
        drop(f);
        // The pooled frame carries the next one: its file is made again,
        // in the same buffer.
        let f = SharedFrame::build(&pool, &mut p, &Unit::Jpeg(&jb), 2, Mono(0), Mono(0)).unwrap();
        assert!(f.bufs.jpeg.get().is_none());
        want.clear();
        camstream_rtp::jfif::write_file(&mut want, &jb);
        assert_eq!(f.jpeg(), &want[..]);
        assert_eq!(f.jpeg().as_ptr(), made);
    }
}
