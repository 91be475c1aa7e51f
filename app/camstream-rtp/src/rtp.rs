//! RTP fixed header (RFC 3550 section 5.1).

/// Size of the fixed RTP header without CSRCs or extension.
pub const HEADER_LEN: usize = 12;

/// Static payload type of JPEG (RFC 3551).
pub const PAYLOAD_TYPE_JPEG: u8 = 26;

/// RTP clock rate of JPEG video (RFC 2435).
pub const JPEG_CLOCK_RATE: u32 = 90_000;

/// The fields of an RTP header a sender chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub marker: bool,
    pub payload_type: u8,
    pub sequence: u16,
    pub timestamp: u32,
    pub ssrc: u32,
}

impl Header {
    /// Writes the 12-byte fixed header (version 2, no padding, extension or CSRC).
    pub fn write(&self, out: &mut [u8; HEADER_LEN]) {
        out[0] = 0x80;
        out[1] = (u8::from(self.marker) << 7) | (self.payload_type & 0x7f);
        out[2..4].copy_from_slice(&self.sequence.to_be_bytes());
        out[4..8].copy_from_slice(&self.timestamp.to_be_bytes());
        out[8..12].copy_from_slice(&self.ssrc.to_be_bytes());
    }
}

/// Largest MTU: an RTP packet must fit the 16-bit length of TCP
/// interleaving.
pub const MAX_MTU: usize = 65_535;

/// An MTU a payload format cannot use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MtuError {
    pub mtu: usize,
    /// The smallest the format takes (room for its largest headers).
    pub min: usize,
}

impl core::fmt::Display for MtuError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "MTU {} is outside {}..={MAX_MTU}", self.mtu, self.min)
    }
}

impl core::error::Error for MtuError {}

/// One RTP stream as its sender numbers it: SSRC, the next sequence number,
/// the MTU (the RTP header and payload, not UDP/IP or TCP framing).
#[derive(Debug, Clone)]
pub struct Sender {
    ssrc: u32,
    sequence: u16,
    mtu: usize,
}

impl Sender {
    /// SSRC and initial sequence should be random (RFC 3550 5.1); `min_mtu`
    /// is the payload format's smallest.
    pub fn new(
        ssrc: u32,
        initial_sequence: u16,
        mtu: usize,
        min_mtu: usize,
    ) -> Result<Sender, MtuError> {
        if !(min_mtu..=MAX_MTU).contains(&mtu) {
            return Err(MtuError { mtu, min: min_mtu });
        }
        Ok(Sender {
            ssrc,
            sequence: initial_sequence,
            mtu,
        })
    }

    pub fn ssrc(&self) -> u32 {
        self.ssrc
    }

    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// Sequence number the next packet will carry.
    pub fn next_sequence(&self) -> u16 {
        self.sequence
    }

    /// Writes the next packet's fixed header at the start of `out`.
    pub fn header(&mut self, out: &mut [u8], marker: bool, payload_type: u8, timestamp: u32) {
        Header {
            marker,
            payload_type,
            sequence: self.sequence,
            timestamp,
            ssrc: self.ssrc,
        }
        .write(
            (&mut out[..HEADER_LEN])
                .try_into()
                .expect("HEADER_LEN bytes"),
        );
        self.sequence = self.sequence.wrapping_add(1);
    }
}

/// One RTP packet to send: its headers (the fixed RTP header, then what
/// the payload format puts before the payload) held inline in `N` bytes,
/// the payload borrowed from the frame. A payload format's packetizer makes
/// them without allocating.
#[derive(Clone)]
pub struct OutgoingPacket<'a, const N: usize> {
    header: [u8; N],
    header_len: usize,
    pub payload: &'a [u8],
}

impl<const N: usize> core::fmt::Debug for OutgoingPacket<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OutgoingPacket")
            .field("header", &self.header())
            .field("payload_len", &self.payload.len())
            .finish()
    }
}

impl<'a, const N: usize> OutgoingPacket<'a, N> {
    /// `header_len` bytes of `header` (the RTP header written at its
    /// start) before `payload`.
    pub fn new(header: [u8; N], header_len: usize, payload: &'a [u8]) -> Self {
        debug_assert!((HEADER_LEN..=N).contains(&header_len));
        OutgoingPacket {
            header,
            header_len,
            payload,
        }
    }

    /// The RTP header and the payload format's headers.
    pub fn header(&self) -> &[u8] {
        &self.header[..self.header_len]
    }

    /// Length of the RTP packet.
    pub fn len(&self) -> usize {
        self.header_len + self.payload.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// RTP payload length (what an RTCP octet count adds up).
    pub fn payload_len(&self) -> usize {
        self.len() - HEADER_LEN
    }

    pub fn marker(&self) -> bool {
        self.header[1] & 0x80 != 0
    }

    pub fn sequence(&self) -> u16 {
        u16::from_be_bytes([self.header[2], self.header[3]])
    }

    /// Copies the whole packet into `out`, which must hold
    /// [`OutgoingPacket::len`] bytes.
    pub fn write_to(&self, out: &mut [u8]) {
        out[..self.header_len].copy_from_slice(self.header());
        out[self.header_len..self.len()].copy_from_slice(self.payload);
    }
}

/// A received RTP packet, borrowing its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IncomingPacket<'a> {
    pub header: Header,
    pub payload: &'a [u8],
}

/// Why bytes are not an RTP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketError {
    TooShort,
    Version,
    /// CSRC list, extension or padding run past the end.
    Length,
}

impl core::fmt::Display for PacketError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            PacketError::TooShort => "RTP packet shorter than its fixed header",
            PacketError::Version => "RTP version is not 2",
            PacketError::Length => "RTP CSRC list, extension or padding overruns the packet",
        })
    }
}

impl core::error::Error for PacketError {}

impl<'a> IncomingPacket<'a> {
    /// Parses a packet, skipping CSRCs and header extension, removing padding.
    pub fn parse(data: &'a [u8]) -> Result<Self, PacketError> {
        if data.len() < HEADER_LEN {
            return Err(PacketError::TooShort);
        }
        if data[0] >> 6 != 2 {
            return Err(PacketError::Version);
        }
        let padding = data[0] & 0x20 != 0;
        let extension = data[0] & 0x10 != 0;
        let csrcs = usize::from(data[0] & 0x0f);
        let mut start = HEADER_LEN + 4 * csrcs;
        if extension {
            if data.len() < start + 4 {
                return Err(PacketError::Length);
            }
            let words = usize::from(u16::from_be_bytes([data[start + 2], data[start + 3]]));
            start += 4 + 4 * words;
        }
        let mut end = data.len();
        if padding {
            let pad = usize::from(data[end - 1]);
            if pad == 0 || pad > end {
                return Err(PacketError::Length);
            }
            end -= pad;
        }
        if start > end {
            return Err(PacketError::Length);
        }
        Ok(IncomingPacket {
            header: Header {
                marker: data[1] & 0x80 != 0,
                payload_type: data[1] & 0x7f,
                sequence: u16::from_be_bytes([data[2], data[3]]),
                timestamp: u32::from_be_bytes([data[4], data[5], data[6], data[7]]),
                ssrc: u32::from_be_bytes([data[8], data[9], data[10], data[11]]),
            },
            payload: &data[start..end],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = Header {
            marker: true,
            payload_type: 26,
            sequence: 0xfffe,
            timestamp: 0x1234_5678,
            ssrc: 0xdead_beef,
        };
        let mut buf = [0u8; 16];
        h.write((&mut buf[..12]).try_into().unwrap());
        buf[12..].copy_from_slice(b"data");
        let p = IncomingPacket::parse(&buf).unwrap();
        assert_eq!(p.header, h);
        assert_eq!(p.payload, b"data");
    }

    #[test]
    fn csrc_extension_padding() {
        // 1 CSRC, a one-word extension, 2 bytes of padding.
        let mut buf = [0u8; 12 + 4 + 8 + 3 + 2];
        buf[0] = 0x80 | 0x20 | 0x10 | 1;
        buf[16 + 3] = 1;
        buf[24..27].copy_from_slice(b"abc");
        buf[28] = 2;
        let p = IncomingPacket::parse(&buf).unwrap();
        assert_eq!(p.payload, b"abc");
        assert_eq!(IncomingPacket::parse(&buf[..20]), Err(PacketError::Length));
        assert_eq!(
            IncomingPacket::parse(&[0x40; 12]),
            Err(PacketError::Version)
        );
    }
}
