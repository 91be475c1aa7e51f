//! GET /: the status page, served from the binary (no framework, nothing
//! fetched from elsewhere). It shows the live picture (the MJPEG stream)
//! and reads /metrics every two seconds for the rest, so the page and
//! Prometheus see the same figures.

pub const PAGE: &str = include_str!("status.html");
