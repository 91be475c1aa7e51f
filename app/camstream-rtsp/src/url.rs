//! An rtsp:// URL as a client uses it: where to connect, and the user and
//! password it may carry (which never go on the wire in the URL itself).

use std::fmt;

#[derive(Debug, PartialEq, Eq)]
pub struct Target {
    /// The URL without user and password: what requests name.
    pub url: String,
    /// Host name or address, IPv6 without its brackets.
    pub host: String,
    pub port: u16,
    /// `user:password@`, percent-decoded.
    pub credentials: Option<(String, String)>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct UrlError(String);

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UrlError {}

/// Parses `url`; the port defaults to RTSP's 554.
pub fn parse(url: &str) -> Result<Target, UrlError> {
    let mut u = rtsp_types::Url::parse(url).map_err(|e| UrlError(format!("bad URL {url}: {e}")))?;
    if u.scheme() != "rtsp" {
        return Err(UrlError(format!("{url} is not an rtsp:// URL")));
    }
    let host = u
        .host_str()
        .ok_or_else(|| UrlError(format!("no host in {url}")))?
        .trim_matches(['[', ']'])
        .to_owned();
    let port = u.port().unwrap_or(554);
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let credentials = u
        .password()
        .map(|password| (decode(u.username()), decode(password)));
    let _ = u.set_username("");
    let _ = u.set_password(None);
    Ok(Target {
        url: u.to_string(),
        host,
        port,
        credentials,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_ports_and_credentials() {
        let t = parse("rtsp://viewer:a%20long%20pass@cam.local/stream").unwrap();
        assert_eq!(
            t,
            Target {
                url: "rtsp://cam.local/stream".into(),
                host: "cam.local".into(),
                port: 554,
                credentials: Some(("viewer".into(), "a long pass".into())),
            }
        );
        let t = parse("rtsp://[::1]:8554/stream").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.credentials),
            ("::1", 8554, None)
        );
        assert_eq!(t.url, "rtsp://[::1]:8554/stream");
        assert!(
            parse("http://cam/stream")
                .unwrap_err()
                .to_string()
                .contains("not an rtsp://")
        );
        assert!(parse("cam/stream").is_err());
    }
}
