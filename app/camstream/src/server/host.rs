//! What the camera calls itself: its host name (RTCP's CNAME, ONVIF's
//! device information and scopes).

pub fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}
