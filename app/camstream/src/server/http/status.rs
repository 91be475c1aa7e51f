//! GET /: the status page, served from the binary (no framework, nothing
//! fetched from elsewhere). It shows the live picture (the MJPEG stream)
//! and reads /metrics every two seconds for the rest, so the page and
//! Prometheus see the same figures.

use camstream_http::response::write_head;

const PAGE: &str = include_str!("status.html");

pub fn page(out: &mut Vec<u8>, head_only: bool, close: bool) {
    write_head(
        out,
        200,
        &[
            ("Content-Type", "text/html; charset=utf-8"),
            ("Cache-Control", "no-cache"),
            // Served from the binary with inline script and style; nothing
            // from elsewhere.
            (
                "Content-Security-Policy",
                "default-src 'self'; img-src 'self' data:; script-src 'unsafe-inline'; style-src 'unsafe-inline'",
            ),
        ],
        Some(PAGE.len()),
        close,
    );
    if !head_only {
        out.extend_from_slice(PAGE.as_bytes());
    }
}
