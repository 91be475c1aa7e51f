//! Cutting a connection's input into RTSP messages (RFC 2326 §4): requests
//! and `$`-framed interleaved data, parsed by `rtsp-types`, under the limits
//! a camera must keep against anyone who connects: a request's size and its
//! number of header lines.

use rtsp_types::{Message, ParseError};

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of one message (head and body); the caller's input buffer
    /// need never hold more.
    pub max_size: usize,
    /// Header lines of one request or response.
    pub max_headers: usize,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Fault {
    Malformed,
    TooLarge,
    TooManyHeaders,
}

impl Fault {
    pub fn describe(self) -> &'static str {
        match self {
            Fault::Malformed => "malformed request",
            Fault::TooLarge => "request too large",
            Fault::TooManyHeaders => "too many header lines",
        }
    }
}

/// Input that is not a message: answer 400 (with its CSeq if it had one);
/// then skip `skip` bytes and go on, or, without `skip`, close (where the
/// next message starts cannot be known).
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    pub fault: Fault,
    pub cseq: Option<String>,
    pub skip: Option<usize>,
}

#[derive(Debug)]
pub enum Framed {
    /// A message and the bytes it took.
    Message(Message<Vec<u8>>, usize),
    /// Nothing whole yet: read more.
    Incomplete,
    Refused(Refused),
}

/// The first message in `buf`.
pub fn next(buf: &[u8], limits: &Limits) -> Framed {
    let head_end = if buf.first() == Some(&b'$') {
        None // interleaved data: four bytes of header, no lines
    } else {
        let end = find(buf, b"\r\n\r\n").map(|p| p + 4);
        let head = buf.get(..end.unwrap_or(buf.len())).unwrap_or(buf);
        // Lines after the request line; an unfinished head counts too, so a
        // client cannot hold many lines back by never ending it.
        let ends = head.iter().filter(|&&b| b == b'\n').count();
        let headers = ends.saturating_sub(if end.is_some() { 2 } else { 1 });
        if headers > limits.max_headers {
            return refuse(head, Fault::TooManyHeaders, None);
        }
        end
    };
    match Message::<Vec<u8>>::parse(buf) {
        Ok((msg, used)) => Framed::Message(msg, used),
        Err(ParseError::Incomplete(_)) if buf.len() >= limits.max_size => {
            refuse(head_of(buf, head_end), Fault::TooLarge, None)
        }
        Err(ParseError::Incomplete(_)) => Framed::Incomplete,
        Err(ParseError::Error) => {
            let head = head_of(buf, head_end);
            // A complete head without a body can be skipped; with a body
            // (or no end) the rest of the stream cannot be trusted.
            let skip = head_end.filter(|_| header(head, "content-length").is_none());
            refuse(head, Fault::Malformed, skip)
        }
    }
}

fn refuse(head: &[u8], fault: Fault, skip: Option<usize>) -> Framed {
    // Echoed only if it is what a CSeq is (found by fuzzing: an empty one).
    let cseq = header(head, "cseq")
        .filter(|c| !c.is_empty() && c.len() <= 32 && c.bytes().all(|b| b.is_ascii_digit()));
    Framed::Refused(Refused { fault, cseq, skip })
}

/// The head of a message whose head ends at `end` (the whole buffer when
/// its end is not known).
fn head_of(buf: &[u8], end: Option<usize>) -> &[u8] {
    end.and_then(|e| buf.get(..e)).unwrap_or(buf)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A header's value in a raw head that `rtsp-types` refused, found by name
/// (case-insensitive), trimmed.
fn header(head: &[u8], name: &str) -> Option<String> {
    head.split(|&b| b == b'\n').skip(1).find_map(|line| {
        let colon = line.iter().position(|&b| b == b':')?;
        let (name_part, value) = line.split_at(colon);
        if !name_part.trim_ascii().eq_ignore_ascii_case(name.as_bytes()) {
            return None;
        }
        std::str::from_utf8(value.get(1..).unwrap_or_default().trim_ascii())
            .ok()
            .map(str::to_owned)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_size: 1024,
        max_headers: 8,
    };

    fn refused(buf: &[u8]) -> Refused {
        match next(buf, &LIMITS) {
            Framed::Refused(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn requests_and_data_pipelined() {
        let mut buf = b"OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n".to_vec();
        buf.extend_from_slice(b"$\x01\x00\x02ab");
        buf.extend_from_slice(b"OPTIONS * RTSP/1.0\r\nCSeq: 2\r\n");
        let Framed::Message(Message::Request(_), used) = next(&buf, &LIMITS) else {
            panic!()
        };
        let buf = &buf[used..];
        let Framed::Message(Message::Data(d), used) = next(buf, &LIMITS) else {
            panic!()
        };
        assert_eq!((d.channel_id(), d.as_slice()), (1, &b"ab"[..]));
        assert!(matches!(next(&buf[used..], &LIMITS), Framed::Incomplete));
    }

    #[test]
    fn garbage_with_an_end_is_skipped_with_its_cseq() {
        let r = refused(b"HELLO\r\nCSeq: 7\r\n\r\nOPTIONS * RTSP/1.0\r\n");
        assert_eq!(
            r,
            Refused {
                fault: Fault::Malformed,
                cseq: Some("7".into()),
                skip: Some(18)
            }
        );
        // A body of unknown meaning: where the next message starts is not known.
        let r = refused(b"HELLO\r\nContent-Length: 3\r\n\r\nabc");
        assert_eq!(r.skip, None);
        // A CSeq that is not a number is not echoed.
        assert_eq!(
            refused(b"HELLO\r\nCSeq: 1\r\nX\r\n\r\n").cseq,
            Some("1".into())
        );
        assert_eq!(refused(b"HELLO\r\nCSeq: \x01\r\n\r\n").cseq, None);
        assert_eq!(refused(b"HELLO\r\nCSeq: \r\n\r\n").cseq, None);
    }

    #[test]
    fn limits() {
        let mut many = b"OPTIONS * RTSP/1.0\r\nCSeq: 3\r\n".to_vec();
        for _ in 0..8 {
            many.extend_from_slice(b"X: y\r\n");
        }
        // Nine header lines, not finished yet: refused already.
        let r = refused(&many);
        assert_eq!(
            (r.fault, r.cseq.as_deref(), r.skip),
            (Fault::TooManyHeaders, Some("3"), None)
        );
        many.truncate(many.len() - 6);
        many.extend_from_slice(b"\r\n");
        assert!(matches!(next(&many, &LIMITS), Framed::Message(..)));

        let mut big = b"OPTIONS * RTSP/1.0\r\nCSeq: 4\r\nX: ".to_vec();
        big.resize(LIMITS.max_size - 1, b'a');
        assert!(matches!(next(&big, &LIMITS), Framed::Incomplete));
        big.push(b'a');
        let r = refused(&big);
        assert_eq!(
            (r.fault, r.cseq.as_deref(), r.skip),
            (Fault::TooLarge, Some("4"), None)
        );
    }
}
