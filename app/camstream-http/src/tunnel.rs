//! The POST side of an RTSP-over-HTTP tunnel (Apple's QuickTime scheme,
//! which live555, FFmpeg and GStreamer follow): RTSP requests base64-encoded,
//! each on its own or all as one stream, split across reads anywhere. The
//! decoder keeps the characters of an unfinished quantum between reads.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// A byte that is not base64 (nor the whitespace some clients put between
/// encoded requests): the stream cannot be trusted from there.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct BadBase64 {
    /// The offending byte and its offset in the input of that call.
    pub byte: u8,
    pub offset: usize,
}

impl std::fmt::Display for BadBase64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tunnelled data is not base64 (byte 0x{:02x} at offset {})",
            self.byte, self.offset
        )
    }
}

impl std::error::Error for BadBase64 {}

#[derive(Debug, Default)]
pub struct Decoder {
    quantum: [u8; 4],
    have: usize,
}

impl Decoder {
    /// Decodes `input`, appending to `out`. After an error, what came before
    /// the bad byte is in `out` and the decoder must not be used again.
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), BadBase64> {
        for (offset, &byte) in input.iter().enumerate() {
            if byte.is_ascii_whitespace() {
                continue;
            }
            let valid = byte.is_ascii_alphanumeric()
                || byte == b'+'
                || byte == b'/'
                || (byte == b'=' && self.have >= 2);
            if !valid {
                return Err(BadBase64 { byte, offset });
            }
            // `have` is below 4 here: it goes back to 0 when it reaches 4.
            if let Some(slot) = self.quantum.get_mut(self.have) {
                *slot = byte;
            }
            self.have += 1;
            if self.have >= 4 {
                self.have = 0;
                let mut bytes = [0u8; 3];
                // `=` at position 2 must be followed by `=`; other mistakes
                // (bits left over) are refused here.
                let n = STANDARD
                    .decode_slice(self.quantum, &mut bytes)
                    .map_err(|_| BadBase64 { byte, offset })?;
                out.extend_from_slice(bytes.get(..n).unwrap_or_default());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Result<Vec<u8>, BadBase64> {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        for c in chunks {
            d.decode(c, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn requests_split_anywhere() {
        let a = STANDARD.encode("OPTIONS rtsp://cam/stream RTSP/1.0\r\nCSeq: 1\r\n\r\n");
        let b = STANDARD.encode("DESCRIBE rtsp://cam/stream RTSP/1.0\r\nCSeq: 2\r\n\r\n");
        let whole = format!("{a}{b}");
        let expect = b"OPTIONS rtsp://cam/stream RTSP/1.0\r\nCSeq: 1\r\n\r\nDESCRIBE rtsp://cam/stream RTSP/1.0\r\nCSeq: 2\r\n\r\n";
        for cut in 0..whole.len() {
            let (x, y) = whole.as_bytes().split_at(cut);
            assert_eq!(all(&[x, y]).unwrap(), expect);
        }
        let spaced = format!("{a}\r\n{b}\r\n");
        assert_eq!(all(&[spaced.as_bytes()]).unwrap(), expect);
    }

    #[test]
    fn not_base64() {
        assert_eq!(
            all(&[b"T1BU", b"SU9O!"]),
            Err(BadBase64 {
                byte: b'!',
                offset: 4
            })
        );
        assert!(all(&[b"=AAA"]).is_err());
        assert!(all(&[b"A===", b"AA=A"]).is_err());
        assert_eq!(all(&[b"QQ==", b"Qg=="]).unwrap(), b"AB");
    }
}
