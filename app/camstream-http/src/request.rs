//! Request heads (RFC 9112 §2-3) parsed by `httparse` without copying: the
//! method, the target split into path and query, and the few headers the
//! server acts on. Anything else in the head is read past.

/// Header lines one request may have; browsers send about fifteen.
pub const MAX_HEADERS: usize = 64;

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of one request head; the caller's input buffer need never
    /// hold more.
    pub max_size: usize,
}

/// A request head, borrowing from the input.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Head<'a> {
    pub method: &'a str,
    /// The request target as sent (origin form, or absolute form whose
    /// path and query are taken).
    pub target: &'a str,
    pub path: &'a str,
    pub query: Option<&'a str>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    pub authorization: Option<&'a str>,
    /// `Connection: close` (1.1), or 1.0 without `Connection: keep-alive`.
    pub close: bool,
    pub content_length: Option<u64>,
    pub chunked: bool,
    pub content_type: Option<&'a str>,
    /// The RTSP-over-HTTP tunnel's cookie pairing its GET and POST.
    pub session_cookie: Option<&'a str>,
    /// Host: how the client reached the camera (ONVIF's service addresses
    /// are given back in it, through NAT and port forwarding).
    pub host: Option<&'a str>,
}

impl Head<'_> {
    /// Whether the request comes with a body this server would have to read
    /// past to find the next request.
    pub fn has_body(&self) -> bool {
        self.chunked || self.content_length.is_some_and(|n| n > 0)
    }

    /// The value of query parameter `name` (`a=1&b=2`), undecoded.
    pub fn query_param(&self, name: &str) -> Option<&str> {
        self.query?
            .split('&')
            .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }
}

/// Why input is not a request the server takes; the connection is answered
/// with `status` and closed, as where the next request starts is unknown.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Fault {
    Malformed,
    TooLarge,
    TooManyHeaders,
    Version,
}

impl Fault {
    pub fn status(self) -> u16 {
        match self {
            Fault::Malformed => 400,
            Fault::TooLarge | Fault::TooManyHeaders => 431,
            Fault::Version => 505,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Fault::Malformed => "malformed request",
            Fault::TooLarge => "request head too large",
            Fault::TooManyHeaders => "too many header lines",
            Fault::Version => "not HTTP/1.0 or HTTP/1.1",
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Framed<'a> {
    /// A request head and the bytes it took (its body, if any, follows).
    Head(Head<'a>, usize),
    /// Nothing whole yet: read more.
    Incomplete,
    Refused(Fault),
}

/// The request head at the start of `buf`.
pub fn next<'a>(buf: &'a [u8], limits: &Limits) -> Framed<'a> {
    // RFC 9112 §2.2: empty lines before a request are ignored.
    let skip = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let used = match req.parse(buf.get(skip..).unwrap_or_default()) {
        Ok(httparse::Status::Complete(n)) => skip + n,
        Ok(httparse::Status::Partial) if buf.len() >= limits.max_size => {
            return Framed::Refused(Fault::TooLarge);
        }
        Ok(httparse::Status::Partial) => return Framed::Incomplete,
        Err(httparse::Error::TooManyHeaders) => return Framed::Refused(Fault::TooManyHeaders),
        Err(httparse::Error::Version) => return Framed::Refused(Fault::Version),
        Err(_) => return Framed::Refused(Fault::Malformed),
    };
    if used > limits.max_size {
        return Framed::Refused(Fault::TooLarge);
    }
    let (Some(method), Some(target), Some(minor_version)) = (req.method, req.path, req.version)
    else {
        return Framed::Refused(Fault::Malformed);
    };
    // Origin form (/path?query), or absolute form (http://host/path?query).
    let origin = match target.split_once("://") {
        Some((_, rest)) => rest.find('/').and_then(|p| rest.get(p..)).unwrap_or("/"),
        None => target,
    };
    if !(origin.starts_with('/') || (method == "OPTIONS" && origin == "*")) {
        return Framed::Refused(Fault::Malformed);
    }
    let (path, query) = match origin.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (origin, None),
    };
    let mut head = Head {
        method,
        target,
        path,
        query,
        minor_version,
        close: minor_version == 0,
        ..Head::default()
    };
    for h in req.headers.iter() {
        let Ok(value) = std::str::from_utf8(h.value) else {
            continue;
        };
        let value = value.trim();
        let name = h.name;
        if name.eq_ignore_ascii_case("authorization") {
            head.authorization = Some(value);
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    head.close = true;
                } else if token.eq_ignore_ascii_case("keep-alive") && minor_version == 0 {
                    head.close = false;
                }
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            match value.parse::<u64>() {
                // RFC 9112 §6.3: differing lengths make the framing unknowable.
                Ok(n) if head.content_length.is_none_or(|m| m == n) => {
                    head.content_length = Some(n);
                }
                _ => return Framed::Refused(Fault::Malformed),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            head.chunked = true;
        } else if name.eq_ignore_ascii_case("content-type") {
            head.content_type = Some(value);
        } else if name.eq_ignore_ascii_case("x-sessioncookie") {
            head.session_cookie = Some(value);
        } else if name.eq_ignore_ascii_case("host") {
            head.host = Some(value);
        }
    }
    Framed::Head(head, used)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits { max_size: 8192 };

    fn head(input: &[u8]) -> (Head<'_>, usize) {
        match next(input, &LIMITS) {
            Framed::Head(h, n) => (h, n),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn curl_and_pipelined_requests() {
        let two = b"GET /snapshot.jpg HTTP/1.1\r\nHost: cam\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\nHEAD /stream.mjpg?fps=5&x HTTP/1.1\r\nConnection: close\r\n\r\n";
        let (h, n) = head(two);
        assert_eq!(
            (h.method, h.path, h.query, h.close),
            ("GET", "/snapshot.jpg", None, false)
        );
        let (h, m) = head(&two[n..]);
        assert_eq!((h.method, h.path, h.close), ("HEAD", "/stream.mjpg", true));
        assert_eq!(
            (h.query_param("fps"), h.query_param("x"), h.query_param("y")),
            (Some("5"), Some(""), None)
        );
        assert_eq!(n + m, two.len());
    }

    #[test]
    fn http_1_0_closes_unless_kept_alive() {
        assert!(head(b"GET / HTTP/1.0\r\n\r\n").0.close);
        assert!(
            !head(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
                .0
                .close
        );
    }

    #[test]
    fn tunnel_post_as_live555_sends_it() {
        let (h, _) = head(b"POST /stream HTTP/1.0\r\nCSeq: 1\r\nUser-Agent: LibVLC/3.0.18 (LIVE555 Streaming Media v2022.10.01)\r\nx-sessioncookie: 6b1c3e6b9a0d1e1f2a3b4c5d\r\nContent-Type: application/x-rtsp-tunnelled\r\nPragma: no-cache\r\nCache-Control: no-cache\r\nContent-Length: 32767\r\nExpires: Sun, 9 Jan 1972 00:00:00 GMT\r\n\r\nT1BUSU9OUw==");
        assert_eq!(h.session_cookie, Some("6b1c3e6b9a0d1e1f2a3b4c5d"));
        assert_eq!(h.content_type, Some("application/x-rtsp-tunnelled"));
        assert_eq!(h.content_length, Some(32767));
    }

    #[test]
    fn absolute_form_and_leading_blank_lines() {
        let (h, n) = head(b"\r\n\r\nGET http://cam:8080/metrics HTTP/1.1\r\n\r\n");
        assert_eq!((h.path, n), ("/metrics", 44));
    }

    #[test]
    fn faults() {
        fn r(b: &[u8]) -> Framed<'_> {
            next(b, &LIMITS)
        }
        assert_eq!(r(b"GET / HTTP/1.1\r\nHost: a"), Framed::Incomplete);
        for (bytes, fault) in [
            (&b"GET /\x01 HTTP/1.1\r\n\r\n"[..], Fault::Malformed),
            (b"GET relative HTTP/1.1\r\n\r\n", Fault::Malformed),
            (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", Fault::Version),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                Fault::Malformed,
            ),
        ] {
            assert_eq!(r(bytes), Framed::Refused(fault), "{}", bytes.escape_ascii());
        }
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(r(&many), Framed::Refused(Fault::TooManyHeaders));
        let long = [b"GET / HTTP/1.1\r\nX: ".as_slice(), &[b'a'; 9000]].concat();
        assert_eq!(r(&long), Framed::Refused(Fault::TooLarge));
        assert_eq!(r(&long[..8000]), Framed::Incomplete);
    }
}
