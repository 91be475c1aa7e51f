//! Response heads and short text answers, written into a buffer: the
//! status line with its reason phrase, Server, the caller's headers,
//! Content-Length when known, Connection: close when closing.

use std::io::Write;

const SERVER: &str = concat!("camstream/", env!("CARGO_PKG_VERSION"));

/// The reason phrase of an HTTP status (RFC 9110 and IANA's registry;
/// empty for a code registered nowhere).
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// Writes a response head: status line, Server, the given headers,
/// Content-Length if known, Connection: close if closing.
pub fn write_head(
    out: &mut Vec<u8>,
    status: u16,
    headers: &[(&str, &str)],
    length: Option<usize>,
    close: bool,
) {
    let _ = write!(
        out,
        "HTTP/1.1 {status} {}\r\nServer: {SERVER}\r\n",
        reason(status)
    );
    for (k, v) in headers {
        let _ = write!(out, "{k}: {v}\r\n");
    }
    if let Some(n) = length {
        let _ = write!(out, "Content-Length: {n}\r\n");
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// A short plain-text answer (errors): the reason, for a person reading it.
pub fn write_text(out: &mut Vec<u8>, status: u16, text: &str, head_only: bool, close: bool) {
    let body = format!("{status} {}: {text}\n", reason(status));
    write_head(
        out,
        status,
        &[
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Cache-Control", "no-store"),
        ],
        Some(body.len()),
        close,
    );
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every status of RFC 9110 §15 a server sends has its phrase; the
    /// codes between have none.
    #[test]
    fn every_standard_status_has_its_phrase() {
        let standard = [
            100, 101, 200, 201, 202, 203, 204, 205, 206, 300, 301, 302, 303, 304, 307, 308, 400,
            401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417,
            421, 422, 426, 500, 501, 502, 503, 504, 505,
        ];
        for s in standard {
            assert!(!reason(s).is_empty(), "{s}");
        }
        assert_eq!(reason(411), "Length Required");
        assert_eq!(reason(299), "");
    }

    #[test]
    fn a_text_answer_is_whole() {
        let mut out = Vec::new();
        write_text(&mut out, 409, "taken", false, true);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 409 Conflict\r\nServer: camstream/"));
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains("\r\nConnection: close"));
        assert!(head.contains(&format!("\r\nContent-Length: {}", body.len())));
        assert_eq!(body, "409 Conflict: taken\n");
    }
}
