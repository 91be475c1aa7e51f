//! The camera's IPv4 interfaces, as getifaddrs and /sys give them: for
//! WS-Discovery's group memberships, ONVIF's GetNetworkInterfaces and
//! WebRTC's host candidates.

use std::net::Ipv4Addr;

pub struct Iface {
    pub name: String,
    pub addr: Ipv4Addr,
    pub prefix: u8,
}

/// IPv4 addresses of interfaces that are up, loopback left out.
pub fn ipv4() -> Vec<Iface> {
    let mut out = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list it allocated, read
    // here only while it lives and freed once below; each sockaddr is read
    // as sockaddr_in only when its family says AF_INET.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return out;
        }
        let mut cur = list;
        while !cur.is_null() {
            let ifa = &*cur;
            cur = ifa.ifa_next;
            let up = ifa.ifa_flags & libc::IFF_UP as u32 != 0;
            if !up
                || ifa.ifa_addr.is_null()
                || i32::from((*ifa.ifa_addr).sa_family) != libc::AF_INET
            {
                continue;
            }
            let v4 = |sa: *const libc::sockaddr| {
                Ipv4Addr::from(u32::from_be(
                    (*(sa as *const libc::sockaddr_in)).sin_addr.s_addr,
                ))
            };
            let addr = v4(ifa.ifa_addr);
            if addr.is_loopback() {
                continue;
            }
            let prefix = if ifa.ifa_netmask.is_null() {
                32
            } else {
                u32::from(v4(ifa.ifa_netmask)).count_ones() as u8
            };
            let name = std::ffi::CStr::from_ptr(ifa.ifa_name)
                .to_string_lossy()
                .into_owned();
            out.push(Iface { name, addr, prefix });
        }
        libc::freeifaddrs(list);
    }
    out
}

/// What GetNetworkInterfaces says of each: MAC and MTU from /sys, DHCP when
/// the image's udhcpc runs for it (its pid file).
pub fn described() -> Vec<camstream_onvif::responses::Interface> {
    let sys = |name: &str, what: &str| {
        std::fs::read_to_string(format!("/sys/class/net/{name}/{what}"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    let mut out: Vec<camstream_onvif::responses::Interface> = Vec::new();
    for i in ipv4() {
        // One entry per interface: its first address.
        if out.iter().any(|o| o.name == i.name) {
            continue;
        }
        out.push(camstream_onvif::responses::Interface {
            mac: sys(&i.name, "address"),
            mtu: sys(&i.name, "mtu").parse().unwrap_or(1500),
            dhcp: std::path::Path::new(&format!("/run/udhcpc.{}.pid", i.name)).exists(),
            ipv4: Some((i.addr.to_string(), i.prefix)),
            name: i.name,
        });
    }
    out
}
