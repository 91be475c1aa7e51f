//! WS-Discovery 1.0 (2005/04, the version ONVIF's Core specification uses)
//! for a Network Video Transmitter: a Probe read and matched against the
//! camera's types and scopes; ProbeMatches, Hello and Bye written. Message
//! ids and the camera's endpoint id come from the caller (random UUIDs).

use std::fmt::Write;
use std::net::Ipv4Addr;

use crate::ns;
use crate::xml::{Doc, Limits, escape};

const ACTION_PROBE: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery/Probe";
const ACTION_PROBE_MATCHES: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery/ProbeMatches";
const ACTION_HELLO: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery/Hello";
const ACTION_BYE: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery/Bye";
const ANONYMOUS: &str = "http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous";
/// The default scope matching rule (RFC 3986 prefix by segments).
const MATCH_RFC3986: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery/rfc3986";
const MATCH_STRCMP0: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery/strcmp0";

/// The types a camera offers, as (namespace, local name).
pub const TYPES: [(&str, &str); 2] = [
    (ns::NETWORK, "NetworkVideoTransmitter"),
    (ns::DEVICE, "Device"),
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub message_id: String,
    /// (namespace, local name); empty: any type.
    pub types: Vec<(String, String)>,
    /// Empty: any scope.
    pub scopes: Vec<String>,
    pub match_by: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotProbe {
    /// Not XML, not SOAP, or too big: ignored without an answer.
    Unreadable(String),
    /// Another WS-Discovery message (Hello, Bye, ProbeMatches from other
    /// devices, Resolve): not ours to answer.
    Other,
}

impl Probe {
    pub fn parse(bytes: &[u8]) -> Result<Probe, NotProbe> {
        // A datagram: far less room than a request over HTTP.
        let limits = Limits {
            max_bytes: 8192,
            max_depth: 16,
            max_elements: 64,
            max_text: 2048,
            max_attrs: 64,
            max_xmlns: 64,
        };
        let doc = Doc::parse(bytes, &limits).map_err(|e| NotProbe::Unreadable(e.to_string()))?;
        if !doc.root().is(ns::SOAP_ENV, "Envelope") {
            return Err(NotProbe::Unreadable("not a SOAP 1.2 envelope".into()));
        }
        let header = doc.child(0, ns::SOAP_ENV, "Header");
        let wsa = |name: &str| {
            header.and_then(|h| {
                doc.children(h)
                    .find(|&i| doc.get(i).is_some_and(|e| e.is(ns::WSA_2004, name)))
                    .map(|i| doc.text(i))
            })
        };
        let body = doc
            .child(0, ns::SOAP_ENV, "Body")
            .ok_or_else(|| NotProbe::Unreadable("no Body".into()))?;
        let Some(probe) = doc.child(body, ns::WSD, "Probe") else {
            return Err(NotProbe::Other);
        };
        if wsa("Action").is_some_and(|a| a != ACTION_PROBE) {
            return Err(NotProbe::Other);
        }
        let message_id = wsa("MessageID")
            .filter(|m| !m.is_empty())
            .ok_or_else(|| NotProbe::Unreadable("a Probe without MessageID".into()))?
            .to_owned();
        let mut types = Vec::new();
        if let Some(t) = doc.child(probe, ns::WSD, "Types") {
            for qname in doc.text(t).split_ascii_whitespace() {
                let (prefix, local) = qname.split_once(':').unwrap_or(("", qname));
                let uri = doc.resolve_prefix(t, prefix).ok_or_else(|| {
                    NotProbe::Unreadable(format!("type {qname}: undeclared prefix"))
                })?;
                types.push((uri.to_owned(), local.to_owned()));
            }
        }
        let scopes_el = doc.child(probe, ns::WSD, "Scopes").and_then(|s| doc.get(s));
        let (scopes, match_by) = match scopes_el {
            Some(s) => (
                s.text.split_ascii_whitespace().map(str::to_owned).collect(),
                s.attr("MatchBy").unwrap_or(MATCH_RFC3986).to_owned(),
            ),
            None => (Vec::new(), MATCH_RFC3986.to_owned()),
        };
        Ok(Probe {
            message_id,
            types,
            scopes,
            match_by,
        })
    }

    /// Whether a camera with `scopes` answers this Probe: every type asked
    /// for is one of TYPES, every scope asked for matches one of `scopes`.
    pub fn matches(&self, scopes: &[String]) -> bool {
        let types = self
            .types
            .iter()
            .all(|(n, l)| TYPES.iter().any(|(tn, tl)| n == tn && l == tl));
        let scopes_ok = self.scopes.iter().all(|want| {
            scopes.iter().any(|have| match self.match_by.as_str() {
                MATCH_STRCMP0 => have == want,
                MATCH_RFC3986 => rfc3986_match(want, have),
                // A rule we do not know matches nothing (WS-Discovery 5.1).
                _ => false,
            })
        });
        types && scopes_ok
    }
}

/// WS-Discovery's RFC 3986 rule: same scheme and authority (case
/// insensitive), and the probe's path segments a prefix of the scope's.
fn rfc3986_match(want: &str, have: &str) -> bool {
    let split = |s: &str| -> Option<(String, Vec<String>)> {
        let (scheme, rest) = s.split_once("://")?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let segments = path
            .split('/')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        Some((
            format!("{scheme}://{authority}").to_ascii_lowercase(),
            segments,
        ))
    };
    match (split(want), split(have)) {
        (Some((wa, ws)), Some((ha, hs))) => wa == ha && hs.starts_with(&ws),
        _ => want == have,
    }
}

/// `text` as one path segment of a scope URI: RFC 3986's unreserved
/// characters kept, every other byte percent-encoded, so a board named
/// "Raspberry Pi 4 Model B" stays one segment a Probe can match.
pub fn scope_segment(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// A name-based UUID (version 5, SHA-1) from `seed`: the camera's endpoint
/// address stays the same across restarts without being stored.
pub fn endpoint_uuid(seed: &[u8]) -> String {
    use sha1::{Digest, Sha1};
    // RFC 9562's namespace for URLs; the seed is the camera's identity.
    const NAMESPACE: [u8; 16] = [
        0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30,
        0xc8,
    ];
    let mut h = Sha1::new();
    h.update(NAMESPACE);
    h.update(seed);
    let mut b = [0u8; 16];
    for (b, h) in b.iter_mut().zip(h.finalize()) {
        *b = h;
    }
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    uuid_text(&b)
}

/// `urn:uuid:` and the UUID of these 16 bytes, as a random message id
/// (version 4) when they are random.
pub fn message_id(mut random: [u8; 16]) -> String {
    random[6] = (random[6] & 0x0f) | 0x40;
    random[8] = (random[8] & 0x3f) | 0x80;
    uuid_text(&random)
}

fn uuid_text(b: &[u8; 16]) -> String {
    let mut s = String::with_capacity(45);
    s.push_str("urn:uuid:");
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// The camera as WS-Discovery announces it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// urn:uuid:..., the same across restarts (kept by the caller).
    pub address: String,
    pub scopes: Vec<String>,
    /// Device service addresses, one per interface address.
    pub xaddrs: Vec<String>,
    /// Counts up when scopes or addresses change.
    pub metadata_version: u32,
    /// AppSequence InstanceId: changes every time the daemon starts.
    pub instance_id: u64,
}

impl Endpoint {
    fn head(
        &self,
        out: &mut String,
        action: &str,
        message_id: &str,
        to: &str,
        relates_to: Option<&str>,
        n: u64,
    ) {
        let _ = write!(
            out,
            r#"<?xml version="1.0" encoding="UTF-8"?><s:Envelope xmlns:s="{}" xmlns:a="{}" xmlns:d="{}" xmlns:dn="{}" xmlns:tds="{}"><s:Header><a:MessageID>{}</a:MessageID>"#,
            ns::SOAP_ENV,
            ns::WSA_2004,
            ns::WSD,
            ns::NETWORK,
            ns::DEVICE,
            escape(message_id)
        );
        if let Some(r) = relates_to {
            let _ = write!(out, "<a:RelatesTo>{}</a:RelatesTo>", escape(r));
        }
        let _ = write!(
            out,
            r#"<a:To>{to}</a:To><a:Action>{action}</a:Action><d:AppSequence InstanceId="{}" MessageNumber="{n}"/></s:Header><s:Body>"#,
            self.instance_id
        );
    }

    fn description(&self, out: &mut String) {
        let _ = write!(
            out,
            "<a:EndpointReference><a:Address>{}</a:Address></a:EndpointReference><d:Types>dn:NetworkVideoTransmitter tds:Device</d:Types><d:Scopes>{}</d:Scopes><d:XAddrs>{}</d:XAddrs><d:MetadataVersion>{}</d:MetadataVersion>",
            escape(&self.address),
            escape(&self.scopes.join(" ")),
            escape(&self.xaddrs.join(" ")),
            self.metadata_version
        );
    }

    /// The answer to `probe`, sent back to where it came from.
    pub fn probe_matches(&self, probe: &Probe, message_id: &str, n: u64) -> String {
        let mut s = String::with_capacity(1500);
        self.head(
            &mut s,
            ACTION_PROBE_MATCHES,
            message_id,
            ANONYMOUS,
            Some(&probe.message_id),
            n,
        );
        s.push_str("<d:ProbeMatches><d:ProbeMatch>");
        self.description(&mut s);
        s.push_str("</d:ProbeMatch></d:ProbeMatches></s:Body></s:Envelope>");
        s
    }

    /// Multicast when the camera starts or its addresses change.
    pub fn hello(&self, message_id: &str, n: u64) -> String {
        let mut s = String::with_capacity(1500);
        self.head(&mut s, ACTION_HELLO, message_id, ns::WSD_URN, None, n);
        s.push_str("<d:Hello>");
        self.description(&mut s);
        s.push_str("</d:Hello></s:Body></s:Envelope>");
        s
    }

    /// Multicast when the camera stops.
    pub fn bye(&self, message_id: &str, n: u64) -> String {
        let mut s = String::with_capacity(800);
        self.head(&mut s, ACTION_BYE, message_id, ns::WSD_URN, None, n);
        let _ = write!(
            s,
            "<d:Bye><a:EndpointReference><a:Address>{}</a:Address></a:EndpointReference></d:Bye></s:Body></s:Envelope>",
            escape(&self.address)
        );
        s
    }
}

/// Probes answered by everyone together in any second.
pub const ANSWERS_PER_SECOND: usize = 20;

/// Which Probes get an answer: one address at most once a second, all of
/// them at most ANSWERS_PER_SECOND. A ProbeMatches is twice a Probe's size
/// and UDP's source is whatever the sender writes: unbounded, the camera
/// would be a reflector. Holds the answers of the last second only, so at
/// most ANSWERS_PER_SECOND addresses.
#[derive(Default)]
pub struct AnswerBudget {
    /// (address, when in ms) of the answers of the last second.
    recent: Vec<(Ipv4Addr, u64)>,
}

impl AnswerBudget {
    /// Whether a Probe from `from` at `now_ms` (a monotonic clock) is
    /// answered; counts it if so.
    pub fn allow(&mut self, from: Ipv4Addr, now_ms: u64) -> bool {
        self.recent
            .retain(|&(_, t)| now_ms.saturating_sub(t) < 1000);
        if self.recent.len() >= ANSWERS_PER_SECOND || self.recent.iter().any(|&(a, _)| a == from) {
            return false;
        }
        self.recent.push((from, now_ms));
        true
    }
}

/// Whether `peer` is in the subnet of the camera's address `local`/`prefix`:
/// only there is an answer sent (a source from elsewhere is one a router
/// would carry the answer to: a spoofed victim's, likely).
pub fn on_link(peer: Ipv4Addr, local: Ipv4Addr, prefix: u8) -> bool {
    let mask = u32::MAX
        .checked_shl(32 - u32::from(prefix.min(32)))
        .unwrap_or(0);
    u32::from(peer) & mask == u32::from(local) & mask
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Probe multicast by python-wsdiscovery 2.1.2 looking for
    /// NetworkVideoTransmitter (its Types prefix is random).
    const PROBE: &[u8] =
        include_bytes!("../../../tests/testdata/onvif/wsdiscovery-2.1.2-probe.xml");

    fn camera() -> Endpoint {
        Endpoint {
            address: "urn:uuid:5f0e8c1a-2b3c-4d5e-8f90-a1b2c3d4e5f6".into(),
            scopes: vec![
                "onvif://www.onvif.org/Profile/Streaming".into(),
                "onvif://www.onvif.org/name/camstream".into(),
                "onvif://www.onvif.org/hardware/rpi4_64".into(),
            ],
            xaddrs: vec!["http://192.0.2.10/onvif/device_service".into()],
            metadata_version: 1,
            instance_id: 1_795_591_800,
        }
    }

    #[test]
    fn probe_types_and_scopes() {
        let p = Probe::parse(PROBE).unwrap();
        assert_eq!(
            p.message_id,
            "urn:uuid:1e37e0d8-0461-48fa-b43e-2643de876bb0"
        );
        assert_eq!(
            p.types,
            vec![(ns::NETWORK.to_owned(), "NetworkVideoTransmitter".to_owned())]
        );
        let cam = camera();
        assert!(p.matches(&cam.scopes));
        let mut other = p.clone();
        other.types = vec![("urn:printers".into(), "Printer".into())];
        assert!(!other.matches(&cam.scopes));
        let mut scoped = p.clone();
        scoped.scopes = vec!["onvif://www.onvif.org/Profile".into()];
        assert!(scoped.matches(&cam.scopes));
        scoped.scopes = vec!["onvif://www.onvif.org/Profile/G".into()];
        assert!(!scoped.matches(&cam.scopes));
        scoped.match_by = "urn:unknown".into();
        assert!(!scoped.matches(&cam.scopes));
        let hello = Probe::parse(cam.hello("urn:uuid:1", 1).as_bytes());
        assert_eq!(hello, Err(NotProbe::Other));
        assert!(matches!(
            Probe::parse(b"\x00\x01"),
            Err(NotProbe::Unreadable(_))
        ));
    }

    #[test]
    fn scope_segments() {
        assert_eq!(
            scope_segment("Raspberry Pi 4 Model B Rev 1.4"),
            "Raspberry%20Pi%204%20Model%20B%20Rev%201.4"
        );
        assert_eq!(scope_segment("camstream-3456"), "camstream-3456");
        assert_eq!(scope_segment("a/b?c#é"), "a%2Fb%3Fc%23%C3%A9");
        let scope = format!("onvif://www.onvif.org/hardware/{}", scope_segment("Pi 4/B"));
        assert!(rfc3986_match(&scope, &scope));
        assert!(!rfc3986_match(
            "onvif://www.onvif.org/hardware/Pi 4",
            &scope
        ));
    }

    #[test]
    fn uuids() {
        // As Python's uuid.uuid5(uuid.NAMESPACE_URL, "camera-1") makes it.
        let a = endpoint_uuid(b"camera-1");
        assert_eq!(a, "urn:uuid:76f3282b-c712-5abf-8a49-2a878e5837cf");
        assert_eq!(a, endpoint_uuid(b"camera-1"));
        assert_ne!(a, endpoint_uuid(b"camera-2"));
        assert!(a.starts_with("urn:uuid:") && a.len() == 45, "{a}");
        assert_eq!(&a[23..24], "5");
        assert!(matches!(&a[28..29], "8" | "9" | "a" | "b"), "{a}");
        assert_eq!(
            message_id([0; 16]),
            "urn:uuid:00000000-0000-4000-8000-000000000000"
        );
    }

    #[test]
    fn answers_are_well_formed_and_relate_to_the_probe() {
        let cam = camera();
        let p = Probe::parse(PROBE).unwrap();
        for (xml, body) in [
            (cam.probe_matches(&p, "urn:uuid:2", 2), "ProbeMatches"),
            (cam.hello("urn:uuid:3", 3), "Hello"),
            (cam.bye("urn:uuid:4", 4), "Bye"),
        ] {
            let d = Doc::parse(xml.as_bytes(), &Limits::default()).unwrap();
            let b = d.child(0, ns::SOAP_ENV, "Body").unwrap();
            assert!(d.child(b, ns::WSD, body).is_some(), "{xml}");
        }
        let m = cam.probe_matches(&p, "urn:uuid:2", 2);
        assert!(
            m.contains("<a:RelatesTo>urn:uuid:1e37e0d8-0461-48fa-b43e-2643de876bb0</a:RelatesTo>")
        );
        assert!(m.contains("<d:XAddrs>http://192.0.2.10/onvif/device_service</d:XAddrs>"));
    }

    #[test]
    fn answers_are_bounded_per_address_and_in_total() {
        let mut b = AnswerBudget::default();
        let a = Ipv4Addr::new(192, 0, 2, 2);
        assert!(b.allow(a, 0));
        assert!(!b.allow(a, 999), "twice in a second");
        assert!(b.allow(a, 1000));
        let others = (0..100u8).map(|n| Ipv4Addr::new(192, 0, 2, 100 + n));
        let answered = others.filter(|&o| b.allow(o, 1500)).count();
        assert_eq!(answered, ANSWERS_PER_SECOND - 1, "a second's total");
        assert!(b.recent.len() <= ANSWERS_PER_SECOND);
        assert!(b.allow(Ipv4Addr::new(192, 0, 2, 250), 2500));
    }

    #[test]
    fn only_the_subnet_is_answered() {
        let cam = Ipv4Addr::new(192, 0, 2, 1);
        assert!(on_link(Ipv4Addr::new(192, 0, 2, 200), cam, 24));
        assert!(!on_link(Ipv4Addr::new(198, 51, 100, 7), cam, 24));
        assert!(!on_link(Ipv4Addr::new(192, 0, 3, 2), cam, 24));
        assert!(on_link(Ipv4Addr::new(203, 0, 113, 9), cam, 0));
        assert!(!on_link(Ipv4Addr::new(192, 0, 2, 2), cam, 32));
    }
}
