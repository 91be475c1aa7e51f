//! multipart/x-mixed-replace as ustreamer sends it, which browsers, FFmpeg,
//! GStreamer's multipartdemux, OctoPrint and Home Assistant all read: each
//! part with its Content-Type and Content-Length, so a reader need not scan
//! the JPEG for the boundary.

/// The boundary, in the response's Content-Type and before each part.
pub const BOUNDARY: &str = "camstreamframe";

/// Content-Type of the stream's response.
pub const CONTENT_TYPE: &str = "multipart/x-mixed-replace;boundary=camstreamframe";

/// Longest part header [`part_header`] writes.
pub const MAX_PART_HEADER: usize = 160;

/// Writes the header of a part holding `len` bytes of JPEG captured at
/// `timestamp` (seconds.micros, as ustreamer's X-Timestamp) into `out`;
/// returns its length. Ends with the blank line; the part's own CRLF comes
/// before the next boundary.
pub fn part_header(out: &mut [u8; MAX_PART_HEADER], len: usize, timestamp_us: u64) -> usize {
    use std::io::Write;
    let mut w = &mut out[..];
    let room = w.len();
    // 160 bytes hold the longest: 20-digit length and timestamp.
    write!(
        w,
        "--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len}\r\nX-Timestamp: {}.{:06}\r\n\r\n",
        timestamp_us / 1_000_000,
        timestamp_us % 1_000_000
    )
    .expect("a part header fits in MAX_PART_HEADER bytes");
    room - w.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_header_fits() {
        let mut b = [0u8; MAX_PART_HEADER];
        let n = part_header(&mut b, usize::MAX, u64::MAX);
        assert!(n <= MAX_PART_HEADER);
        let n = part_header(&mut b, 1234, 5_000_042);
        assert_eq!(
            &b[..n],
            b"--camstreamframe\r\nContent-Type: image/jpeg\r\nContent-Length: 1234\r\nX-Timestamp: 5.000042\r\n\r\n"
        );
    }
}
