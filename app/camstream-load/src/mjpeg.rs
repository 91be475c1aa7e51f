//! One HTTP MJPEG client: GET, then the multipart/x-mixed-replace parts
//! as camstream, ustreamer and go2rtc send them (each with Content-Length;
//! go2rtc's in HTTP/1.1 chunks).
//! A part counts as a frame if it is a whole JPEG file (SOI first, EOI
//! last); JPEG bodies are checked where they lie in the read buffer, never
//! copied, so one process can take hundreds of streams.

use std::io::{self, Read, Write};
use std::time::Instant;

use anyhow::{Result, anyhow, bail};
use mio::event::Event;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use crate::client::{Target, write_pending};
use crate::stats::{Tally, Verdict};

/// Longest response or part head taken.
const HEAD_MAX: usize = 8192;

enum Step {
    Connecting,
    /// Waiting for the response's head.
    Response,
    /// Waiting for a boundary line and a part's headers.
    PartHead,
    /// Inside a part's body: bytes left, its first two bytes, its last two.
    Body {
        left: usize,
        seen: usize,
        first: [u8; 2],
        last: [u8; 2],
    },
}

/// Where a chunked body (Transfer-Encoding: chunked) has got to.
enum Chunk {
    /// Not chunked.
    No,
    /// Gathering a chunk-size line.
    Size,
    /// Bytes of chunk data left.
    Data(usize),
    /// The CRLF after a chunk's data: bytes of it left.
    End(usize),
}

/// Longest chunk-size line taken (the size and any extension).
const CHUNK_LINE_MAX: usize = 256;

pub struct Client {
    sock: TcpStream,
    pub error: Option<String>,
    out: Vec<u8>,
    parser: Parser,
}

/// The response as it comes in, without I/O.
pub struct Parser {
    step: Step,
    chunk: Chunk,
    /// "--" and the boundary the response named.
    delimiter: Vec<u8>,
    /// A head being gathered (the response's, or a part's).
    head: Vec<u8>,
    /// A chunk-size line being gathered (a part's head may span chunks).
    chunk_line: Vec<u8>,
    pub tally: Tally,
}

impl Client {
    pub fn connect(id: usize, target: &Target, registry: &Registry) -> Result<Client> {
        let mut sock = TcpStream::connect(target.addr)?;
        registry.register(
            &mut sock,
            Token(2 * id),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        Ok(Client {
            sock,
            error: None,
            out: Vec::new(),
            parser: Parser {
                step: Step::Connecting,
                ..Parser::new()
            },
        })
    }

    pub fn tally(&self) -> &Tally {
        &self.parser.tally
    }

    pub fn tally_mut(&mut self) -> &mut Tally {
        &mut self.parser.tally
    }

    pub fn playing(&self) -> bool {
        self.error.is_none() && self.parser.streaming()
    }

    pub fn give_up_setup(&mut self, after: std::time::Duration) {
        if !self.playing() {
            let step = match self.parser.step {
                Step::Connecting => "connecting",
                _ => "the response",
            };
            self.fail(format!(
                "{step} not done {:.1} s after the start",
                after.as_secs_f64()
            ));
        }
    }

    fn fail(&mut self, why: String) {
        if self.error.is_none() {
            self.error = Some(why);
        }
    }

    fn flush(&mut self) {
        if let Err(e) = write_pending(&mut self.sock, &mut self.out) {
            self.fail(format!("write: {e}"));
        }
    }

    pub fn on_event(&mut self, ev: &Event, target: &Target, buf: &mut [u8], now: Instant) {
        if self.error.is_some() {
            return;
        }
        if matches!(self.parser.step, Step::Connecting) && ev.is_writable() {
            if let Err(e) = self.sock.peer_addr() {
                return self.fail(format!("connect: {e}"));
            }
            self.parser.step = Step::Response;
            let _ = write!(
                self.out,
                "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: camstream-load\r\nAccept: */*\r\n\r\n",
                target.path, target.host
            );
        }
        if ev.is_writable() {
            self.flush();
        }
        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
            loop {
                match self.sock.read(buf) {
                    Ok(0) => return self.fail("the server closed the connection".into()),
                    Ok(n) => {
                        if let Err(e) = self.parser.input(&buf[..n], now) {
                            return self.fail(format!("{e:#}"));
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return self.fail(format!("read: {e}")),
                }
            }
        }
    }
}

impl Parser {
    /// A parser for the answer to a request just sent.
    pub fn new() -> Parser {
        Parser {
            step: Step::Response,
            chunk: Chunk::No,
            delimiter: Vec::new(),
            head: Vec::with_capacity(HEAD_MAX),
            chunk_line: Vec::new(),
            tally: Tally::default(),
        }
    }

    /// The response was 200 with a multipart body.
    pub fn streaming(&self) -> bool {
        matches!(self.step, Step::PartHead | Step::Body { .. })
    }

    /// Takes what was read: the response's head, then its body, taken out
    /// of its chunks if it comes in them.
    pub fn input(&mut self, mut data: &[u8], now: Instant) -> Result<()> {
        while !data.is_empty() {
            if matches!(self.step, Step::Response) {
                let Some(rest) = self.gather(data)? else {
                    return Ok(());
                };
                let head = std::mem::take(&mut self.head);
                let r = self.response(&head);
                self.head = head;
                self.head.clear();
                r?;
                data = rest;
                continue;
            }
            match self.chunk {
                Chunk::No => return self.take(data, now),
                Chunk::Data(left) => {
                    let n = data.len().min(left);
                    self.take(&data[..n], now)?;
                    self.chunk = if n == left {
                        Chunk::End(2)
                    } else {
                        Chunk::Data(left - n)
                    };
                    data = &data[n..];
                }
                Chunk::End(left) => {
                    let n = data.len().min(left);
                    self.chunk = if n == left {
                        Chunk::Size
                    } else {
                        Chunk::End(left - n)
                    };
                    data = &data[n..];
                }
                Chunk::Size => {
                    let Some(i) = data.iter().position(|&b| b == b'\n') else {
                        self.chunk_line.extend_from_slice(data);
                        if self.chunk_line.len() > CHUNK_LINE_MAX {
                            bail!("a chunk-size line of over {CHUNK_LINE_MAX} bytes");
                        }
                        return Ok(());
                    };
                    self.chunk_line.extend_from_slice(&data[..i]);
                    data = &data[i + 1..];
                    let line = std::str::from_utf8(&self.chunk_line)?;
                    let size = line.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(size, 16)
                        .map_err(|_| anyhow!("bad chunk size {line:?}"))?;
                    self.chunk_line.clear();
                    if size == 0 {
                        bail!("the stream ended");
                    }
                    self.chunk = Chunk::Data(size);
                }
            }
        }
        Ok(())
    }

    /// Gathers a head up to its blank line; returns what follows it, or
    /// None while it is not whole.
    fn gather<'d>(&mut self, data: &'d [u8]) -> Result<Option<&'d [u8]>> {
        let before = self.head.len();
        let take = data.len().min(HEAD_MAX.saturating_sub(before));
        self.head.extend_from_slice(&data[..take]);
        // Only where the blank line can newly be.
        let from = before.saturating_sub(3);
        match find(&self.head[from..], b"\r\n\r\n") {
            Some(i) => {
                let end = from + i + 4;
                self.head.truncate(end);
                Ok(Some(&data[end - before..]))
            }
            None if self.head.len() >= HEAD_MAX => bail!("a head of over {HEAD_MAX} bytes"),
            None => Ok(None),
        }
    }

    /// Takes the multipart body: part heads are gathered, JPEG data only
    /// looked at.
    fn take(&mut self, mut data: &[u8], now: Instant) -> Result<()> {
        while !data.is_empty() {
            match &mut self.step {
                Step::Connecting => bail!("data before the request was sent"),
                Step::Body {
                    left,
                    seen,
                    first,
                    last,
                } => {
                    let n = data.len().min(*left);
                    let chunk = &data[..n];
                    for (i, &b) in chunk.iter().take(2usize.saturating_sub(*seen)).enumerate() {
                        first[*seen + i] = b;
                    }
                    *last = match chunk {
                        [.., a, b] => [*a, *b],
                        [b] => [last[1], *b],
                        [] => *last,
                    };
                    *seen += n;
                    *left -= n;
                    data = &data[n..];
                    if *left == 0 {
                        let whole = *first == [0xff, 0xd8] && *last == [0xff, 0xd9];
                        let verdict = if whole {
                            Verdict::Frame
                        } else {
                            Verdict::NotJpeg
                        };
                        let len = *seen;
                        self.step = Step::PartHead;
                        self.tally.count(verdict, 0, len, now);
                    }
                }
                Step::Response => bail!("the body before the head"),
                Step::PartHead => {
                    let Some(rest) = self.gather(data)? else {
                        return Ok(());
                    };
                    data = rest;
                    let head = std::mem::take(&mut self.head);
                    let r = self.part(&head, now);
                    self.head = head;
                    self.head.clear();
                    r?;
                }
            }
        }
        Ok(())
    }

    fn response(&mut self, head: &[u8]) -> Result<()> {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        resp.parse(head)?;
        if resp.code != Some(200) {
            bail!(
                "answered {} {}",
                resp.code.unwrap_or(0),
                resp.reason.unwrap_or("")
            );
        }
        let ctype = header(resp.headers, "content-type")
            .ok_or_else(|| anyhow!("no Content-Type in the response"))?;
        let boundary = ctype
            .split(';')
            .find_map(|p| p.trim().strip_prefix("boundary="))
            .ok_or_else(|| anyhow!("no boundary in Content-Type: {ctype}"))?
            .trim_matches('"');
        // Some servers put the dashes into the parameter as well.
        let boundary = boundary.strip_prefix("--").unwrap_or(boundary);
        self.delimiter = format!("--{boundary}").into_bytes();
        let chunked = header(resp.headers, "transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        self.chunk = if chunked { Chunk::Size } else { Chunk::No };
        self.step = Step::PartHead;
        Ok(())
    }

    fn part(&mut self, head: &[u8], now: Instant) -> Result<()> {
        // CRLFs that end the previous part, then the delimiter line.
        let start = head
            .iter()
            .position(|&b| b != b'\r' && b != b'\n')
            .unwrap_or(0);
        let rest = &head[start..];
        if !rest.starts_with(&self.delimiter) {
            bail!(
                "expected the boundary, got {:?}",
                String::from_utf8_lossy(&rest[..rest.len().min(40)])
            );
        }
        let line_end = find(rest, b"\r\n").ok_or_else(|| anyhow!("no line end"))? + 2;
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let httparse::Status::Complete((_, headers)) =
            httparse::parse_headers(&rest[line_end..], &mut headers)?
        else {
            bail!("incomplete part headers");
        };
        let len: usize = header(headers, "content-length")
            .ok_or_else(|| anyhow!("a part without Content-Length"))?
            .trim()
            .parse()?;
        self.tally.overhead(head.len(), now);
        self.step = Step::Body {
            left: len,
            seen: 0,
            first: [0; 2],
            last: [0; 2],
        };
        if len == 0 {
            bail!("an empty part");
        }
        Ok(())
    }
}

fn header<'a>(headers: &[httparse::Header<'a>], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .and_then(|h| std::str::from_utf8(h.value).ok())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Responses recorded with `curl --raw -i` from each server streaming a
    /// 160x120 clip, cut after four whole parts: go2rtc's comes in HTTP/1.1
    /// chunks, camstream's does not.
    const RECORDED: [(&str, &[u8]); 2] = [
        (
            "go2rtc",
            include_bytes!("../testdata/go2rtc-1.9.14-stream-mjpeg-160x120.http"),
        ),
        (
            "camstream",
            include_bytes!("../testdata/camstream-0.1.0-stream-mjpg-160x120.http"),
        ),
    ];

    fn parse(pieces: &[&[u8]]) -> Result<Parser> {
        let mut p = Parser::new();
        let now = Instant::now();
        for piece in pieces {
            p.input(piece, now)?;
        }
        Ok(p)
    }

    #[test]
    fn recorded_streams_in_any_pieces() {
        for (name, data) in RECORDED {
            let whole = parse(&[data]).unwrap();
            assert!(whole.streaming(), "{name}");
            assert_eq!(
                (whole.tally.total.frames, whole.tally.total.not_jpeg),
                (4, 0),
                "{name}"
            );
            if name == "camstream" {
                // Counted: part heads and bodies; not the response's head,
                // nor the CRLF that ends the last part (the next head's).
                let head = find(data, b"\r\n\r\n").unwrap() + 4;
                assert_eq!(whole.tally.total.bytes as usize, data.len() - head - 2);
            }
            for cut in (1..data.len()).step_by(7) {
                for cut2 in [cut + 1, cut + 1000, data.len()] {
                    let cut2 = cut2.min(data.len());
                    let p = parse(&[&data[..cut], &data[cut..cut2], &data[cut2..]]).unwrap();
                    assert_eq!(p.tally.total.frames, 4, "{name} cut at {cut}, {cut2}");
                }
            }
        }
    }

    #[test]
    fn part_heads_across_chunks() {
        // camstream's recording sent again in 50-byte HTTP/1.1 chunks, so
        // that part heads and chunk-size lines interleave.
        let (_, data) = RECORDED[1];
        let head = find(data, b"\r\n\r\n").unwrap() + 4;
        let mut chunked = data[..head - 2].to_vec();
        chunked.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
        for c in data[head..].chunks(50) {
            chunked.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
            chunked.extend_from_slice(c);
            chunked.extend_from_slice(b"\r\n");
        }
        for cut in (1..chunked.len()).step_by(13) {
            let p = parse(&[&chunked[..cut], &chunked[cut..]]).unwrap();
            assert_eq!(
                (p.tally.total.frames, p.tally.total.not_jpeg),
                (4, 0),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn a_part_that_is_not_a_jpeg_file_is_counted_as_such() {
        let (_, data) = RECORDED[1];
        let mut data = data.to_vec();
        // The second part's SOI.
        let second = find(&data[100..], &[0xff, 0xd8]).unwrap() + 100;
        let second = find(&data[second + 2..], &[0xff, 0xd8]).unwrap() + second + 2;
        data[second + 1] = 0;
        let p = parse(&[&data]).unwrap();
        assert_eq!((p.tally.total.frames, p.tally.total.not_jpeg), (3, 1));
    }

    #[test]
    fn refusals_and_broken_streams_are_errors() {
        let e = parse(&[b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"]).err();
        assert_eq!(e.unwrap().to_string(), "answered 404 Not Found");
        let e = parse(&[b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\n\r\n"]).err();
        assert!(e.unwrap().to_string().contains("no boundary"));
        let e = parse(&[
            b"HTTP/1.1 200 OK\r\nContent-Type: multipart/x-mixed-replace;boundary=b\r\n\r\n",
            b"--x\r\nContent-Length: 3\r\n\r\n",
        ])
        .err();
        assert!(e.unwrap().to_string().contains("expected the boundary"));
        let e = parse(&[
            b"HTTP/1.1 200 OK\r\nContent-Type: multipart/x-mixed-replace;boundary=b\r\n\r\n",
            b"--b\r\nContent-Type: image/jpeg\r\n\r\n",
        ])
        .err();
        assert!(e.unwrap().to_string().contains("without Content-Length"));
        let e = parse(&[b"HTTP/1.1 200 OK\r\n", &[b'x'; HEAD_MAX]]).err();
        assert!(e.unwrap().to_string().contains("a head of over"));
        let e = parse(&[
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n",
            b"Content-Type: multipart/x-mixed-replace; boundary=frame\r\n\r\nzz\r\n",
        ])
        .err();
        assert!(e.unwrap().to_string().contains("bad chunk size"));
    }
}
