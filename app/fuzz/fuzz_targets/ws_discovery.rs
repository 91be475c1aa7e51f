//! Any datagram to the WS-Discovery port: no panic; a Probe that parses
//! gets a ProbeMatches that is well-formed and relates to that Probe's
//! MessageID exactly, however it was escaped.
#![no_main]

use camstream_onvif::discovery::{Endpoint, Probe};
use camstream_onvif::ns;
use camstream_onvif::xml::{Doc, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(probe) = Probe::parse(data) else {
        return;
    };
    let cam = Endpoint {
        address: "urn:uuid:5f0e8c1a-2b3c-4d5e-8f90-a1b2c3d4e5f6".into(),
        scopes: vec!["onvif://www.onvif.org/Profile/Streaming".into()],
        xaddrs: vec!["http://192.0.2.10/onvif/device_service".into()],
        metadata_version: 1,
        instance_id: 1,
    };
    let _ = probe.matches(&cam.scopes);
    let xml = cam.probe_matches(&probe, "urn:uuid:1", 1);
    let doc = Doc::parse(xml.as_bytes(), &Limits::default()).expect("ProbeMatches parses");
    let header = doc.child(0, ns::SOAP_ENV, "Header").expect("a Header");
    let relates = doc.child(header, ns::WSA_2004, "RelatesTo").expect("RelatesTo");
    assert_eq!(doc.elements[relates].text, probe.message_id);
});
