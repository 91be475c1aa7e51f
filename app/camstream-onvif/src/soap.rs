//! A SOAP 1.2 request to an ONVIF service: the operation (the Body's first
//! element), its parameters, the WS-Addressing MessageID and the
//! UsernameToken; and the SOAP faults ONVIF's Core specification names for
//! what goes wrong (section 5.11: generic faults).

use std::fmt::Write;

use crate::ns;
use crate::wsse::{Refusal, UsernameToken};
use crate::xml::{Doc, Limits, XmlError, escape};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Device,
    Media,
    Events,
    Imaging,
    Other,
}

#[derive(Debug)]
pub struct Request {
    pub doc: Doc,
    /// The operation's element.
    pub op: usize,
    pub service: Service,
    pub message_id: Option<String>,
    /// The header's UsernameToken, or why it could not be read.
    pub token: Result<Option<UsernameToken>, Refusal>,
}

impl Request {
    pub fn parse(bytes: &[u8], limits: &Limits) -> Result<Request, Fault> {
        let doc = Doc::parse(bytes, limits).map_err(|e| match e {
            XmlError::Malformed(_)
            | XmlError::Empty
            | XmlError::Doctype
            | XmlError::Forbidden(_) => Fault::well_formed(&e),
            _ => Fault::sender(&["ter:InvalidArgs"], &e.to_string()),
        })?;
        let root = doc.root();
        if root.name != "Envelope" || (root.ns != ns::SOAP_ENV && root.ns != ns::SOAP11_ENV) {
            return Err(Fault::sender(&["ter:WellFormed"], "not a SOAP envelope"));
        }
        if root.ns != ns::SOAP_ENV {
            return Err(Fault {
                code: Code::VersionMismatch,
                subcodes: &[],
                reason: "SOAP 1.2 only (ONVIF's binding)".into(),
            });
        }
        // SOAP 1.2 gives an Envelope one Header and one Body: with two, the
        // operation and the token checked could come from different ones.
        for part in ["Header", "Body"] {
            let n = doc
                .children(0)
                .filter(|&i| doc.get(i).is_some_and(|e| e.is(ns::SOAP_ENV, part)))
                .count();
            if n > 1 {
                return Err(Fault::sender(
                    &["ter:WellFormed"],
                    &format!("{n} {part} elements (SOAP allows one)"),
                ));
            }
        }
        let body = doc
            .child(0, ns::SOAP_ENV, "Body")
            .ok_or_else(|| Fault::sender(&["ter:WellFormed"], "no Body"))?;
        let op = doc
            .children(body)
            .next()
            .ok_or_else(|| Fault::sender(&["ter:WellFormed"], "an empty Body"))?;
        let service = match doc.get(op).map_or("", |e| e.ns.as_str()) {
            ns::DEVICE => Service::Device,
            ns::MEDIA => Service::Media,
            ns::EVENTS => Service::Events,
            ns::IMAGING => Service::Imaging,
            _ => Service::Other,
        };
        let header = doc.child(0, ns::SOAP_ENV, "Header");
        let message_id = header.and_then(|h| {
            doc.children(h)
                .find(|&i| {
                    doc.get(i).is_some_and(|e| {
                        e.name == "MessageID" && (e.ns == ns::WSA || e.ns == ns::WSA_2004)
                    })
                })
                .map(|i| doc.text(i).to_owned())
        });
        let token = match header {
            Some(h) => UsernameToken::from_header(&doc, h),
            None => Ok(None),
        };
        Ok(Request {
            doc,
            op,
            service,
            message_id,
            token,
        })
    }

    /// The operation's name (its local name: GetProfiles, GetStreamUri...).
    pub fn operation(&self) -> &str {
        self.doc.get(self.op).map_or("", |e| e.name.as_str())
    }

    /// A parameter's text, by the local names leading to it from the
    /// operation (["StreamSetup", "Transport", "Protocol"]).
    pub fn arg(&self, path: &[&str]) -> Option<&str> {
        self.doc.path(self.op, path).map(|i| self.doc.text(i))
    }

    /// An attribute of a parameter (["Configuration"], "token").
    pub fn arg_attr(&self, path: &[&str], attr: &str) -> Option<&str> {
        self.doc
            .path(self.op, path)
            .and_then(|i| self.doc.get(i)?.attr(attr))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    VersionMismatch,
    Sender,
    Receiver,
}

/// A SOAP fault: the code, ONVIF's subcodes (most general first), the
/// reason in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub code: Code,
    pub subcodes: &'static [&'static str],
    pub reason: String,
}

/// A fault's reason is cut to this many bytes: it may quote what the
/// client sent (a prefix, an operation's name, the parser's words), which
/// goes back in part, never whole.
const REASON_MAX: usize = 200;

fn bounded(reason: &str) -> String {
    if reason.len() <= REASON_MAX {
        return reason.into();
    }
    let mut end = REASON_MAX;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &reason[..end])
}

impl Fault {
    pub fn sender(subcodes: &'static [&'static str], reason: &str) -> Fault {
        Fault {
            code: Code::Sender,
            subcodes,
            reason: bounded(reason),
        }
    }

    pub fn receiver(subcodes: &'static [&'static str], reason: &str) -> Fault {
        Fault {
            code: Code::Receiver,
            subcodes,
            reason: bounded(reason),
        }
    }

    fn well_formed(e: &XmlError) -> Fault {
        Fault::sender(&["ter:WellFormed"], &e.to_string())
    }

    pub fn not_authorized() -> Fault {
        Fault::sender(
            &["ter:NotAuthorized"],
            "the action requires authorization and the sender is not authorized",
        )
    }

    pub fn action_not_supported(op: &str) -> Fault {
        Fault::receiver(
            &["ter:ActionNotSupported"],
            &format!("{op} is not supported by this device"),
        )
    }

    pub fn invalid_arg_val(detail: &'static str, reason: &str) -> Fault {
        // Each detail has its own static pair (the fault's subcode chain).
        let subcodes: &'static [&'static str] = match detail {
            "ter:NoProfile" => &["ter:InvalidArgVal", "ter:NoProfile"],
            "ter:NoConfig" => &["ter:InvalidArgVal", "ter:NoConfig"],
            "ter:NoSource" => &["ter:InvalidArgVal", "ter:NoSource"],
            "ter:ConfigModify" => &["ter:InvalidArgVal", "ter:ConfigModify"],
            "ter:InvalidStreamSetup" => &["ter:InvalidArgVal", "ter:InvalidStreamSetup"],
            _ => &["ter:InvalidArgVal"],
        };
        Fault::sender(subcodes, reason)
    }

    /// The HTTP status ONVIF's Core specification gives this fault (5.11:
    /// 400 for the sender's faults, 500 for the receiver's; a refused
    /// authorization is 400 with NotAuthorized, and the HTTP layer answers
    /// 401 when it asks for HTTP Digest).
    pub fn http_status(&self) -> u16 {
        match self.code {
            Code::Receiver => 500,
            Code::Sender | Code::VersionMismatch => 400,
        }
    }

    pub fn envelope(&self) -> String {
        let code = match self.code {
            Code::VersionMismatch => "env:VersionMismatch",
            Code::Sender => "env:Sender",
            Code::Receiver => "env:Receiver",
        };
        let mut s = String::with_capacity(512);
        let _ = write!(
            s,
            r#"<?xml version="1.0" encoding="UTF-8"?><env:Envelope xmlns:env="{}" xmlns:ter="{}" xmlns:wsnt="{}"><env:Body><env:Fault><env:Code><env:Value>{code}</env:Value>"#,
            ns::SOAP_ENV,
            ns::ERROR,
            ns::WSNT
        );
        for sub in self.subcodes {
            let _ = write!(s, "<env:Subcode><env:Value>{sub}</env:Value>");
        }
        for _ in self.subcodes {
            s.push_str("</env:Subcode>");
        }
        let _ = write!(
            s,
            r#"</env:Code><env:Reason><env:Text xml:lang="en">{}</env:Text></env:Reason></env:Fault></env:Body></env:Envelope>"#,
            escape(&self.reason)
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wsse::Password;

    /// Requests recorded from onvif-zeep-async 4.3.0 (Home Assistant's ONVIF
    /// library; zeep 4.3.3), user admin, password "secret-pass".
    fn recorded(op: &str) -> Vec<u8> {
        let path = format!(
            "{}/../../tests/testdata/onvif/onvif-zeep-async-4.3.0-{op}.http",
            env!("CARGO_MANIFEST_DIR")
        );
        let all = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let body = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        all[body..].to_vec()
    }

    #[test]
    fn recorded_requests() {
        let l = Limits::default();
        for (op, service) in [
            ("GetSystemDateAndTime", Service::Device),
            ("GetDeviceInformation", Service::Device),
            ("GetCapabilities", Service::Device),
            ("GetServices", Service::Device),
            ("GetScopes", Service::Device),
            ("GetHostname", Service::Device),
            ("GetNetworkInterfaces", Service::Device),
            ("GetProfiles", Service::Media),
            ("GetStreamUri", Service::Media),
            ("GetSnapshotUri", Service::Media),
            ("GetVideoEncoderConfigurationOptions", Service::Media),
        ] {
            let r = Request::parse(&recorded(op), &l).unwrap();
            assert_eq!((r.operation(), r.service), (op, service));
            let t = r.token.unwrap().unwrap();
            assert_eq!(t.username, "admin");
            assert!(t.matches("secret-pass"), "{op}");
            assert!(!t.matches("secret-pas"), "{op}");
        }
        let r = Request::parse(&recorded("GetStreamUri"), &l).unwrap();
        assert_eq!(r.arg(&["ProfileToken"]), Some("main"));
        assert_eq!(r.arg(&["StreamSetup", "Stream"]), Some("RTP-Unicast"));
        assert_eq!(
            r.arg(&["StreamSetup", "Transport", "Protocol"]),
            Some("RTSP")
        );
        let r = Request::parse(&recorded("GetCapabilities"), &l).unwrap();
        assert_eq!(r.arg(&["Category"]), Some("All"));
        let t = r.token.unwrap().unwrap();
        assert!(matches!(t.password, Password::Digest(ref d) if d.len() == 20));
        assert_eq!(t.nonce.len(), 16);
    }

    #[test]
    fn faults() {
        let l = Limits::default();
        let e = Request::parse(b"<a", &l).unwrap_err();
        assert_eq!(
            (e.code, e.subcodes),
            (Code::Sender, &["ter:WellFormed"][..])
        );
        let soap11 = r#"<e:Envelope xmlns:e="http://schemas.xmlsoap.org/soap/envelope/"><e:Body/></e:Envelope>"#;
        assert_eq!(
            Request::parse(soap11.as_bytes(), &l).unwrap_err().code,
            Code::VersionMismatch
        );
        let empty = r#"<e:Envelope xmlns:e="http://www.w3.org/2003/05/soap-envelope"><e:Body/></e:Envelope>"#;
        assert_eq!(
            Request::parse(empty.as_bytes(), &l).unwrap_err().reason,
            "an empty Body"
        );
        // Issue 51: two Bodies (or Headers), and NUL in a text.
        let env = |inner: &str| {
            format!(
                r#"<e:Envelope xmlns:e="http://www.w3.org/2003/05/soap-envelope">{inner}</e:Envelope>"#
            )
        };
        let two = env("<e:Body><GetProfiles/></e:Body><e:Body><GetUsers/></e:Body>");
        let e = Request::parse(two.as_bytes(), &l).unwrap_err();
        assert_eq!(
            (e.subcodes, e.reason.as_str()),
            (&["ter:WellFormed"][..], "2 Body elements (SOAP allows one)")
        );
        let two = env("<e:Header/><e:Header/><e:Body><GetProfiles/></e:Body>");
        let e = Request::parse(two.as_bytes(), &l).unwrap_err();
        assert_eq!(e.reason, "2 Header elements (SOAP allows one)");
        let nul = env("<e:Body><GetProfiles>a\0b</GetProfiles></e:Body>");
        let e = Request::parse(nul.as_bytes(), &l).unwrap_err();
        assert_eq!(
            (e.subcodes, e.reason.as_str()),
            (
                &["ter:WellFormed"][..],
                "character U+0000 (not allowed in XML)"
            )
        );
        let f = Fault::invalid_arg_val("ter:NoProfile", "no profile <x>");
        let xml = f.envelope();
        assert!(xml.contains("<env:Value>env:Sender</env:Value><env:Subcode><env:Value>ter:InvalidArgVal</env:Value><env:Subcode><env:Value>ter:NoProfile</env:Value></env:Subcode></env:Subcode>"), "{xml}");
        assert!(xml.contains("no profile &lt;x&gt;"));
        // The fault is itself well-formed SOAP.
        let back = Doc::parse(xml.as_bytes(), &l).unwrap();
        assert!(back.root().is(ns::SOAP_ENV, "Envelope"));
        assert_eq!(Fault::action_not_supported("X").http_status(), 500);
        // What the client sent is quoted in part only: the fuzzer's find
        // was a 4 KiB undeclared prefix (of bytes not UTF-8) echoed whole,
        // past what a text may hold.
        let mut long = b"<".to_vec();
        long.extend(std::iter::repeat_n(0xffu8, 5000));
        long.extend(b":x/>");
        let e = Request::parse(&long, &l).unwrap_err();
        assert!(
            e.reason
                .starts_with("not well-formed XML: undeclared namespace prefix")
        );
        assert!(e.reason.len() <= REASON_MAX + 3, "{}", e.reason.len());
        assert!(Doc::parse(e.envelope().as_bytes(), &l).is_ok());
        let op = "\u{e9}".repeat(300);
        assert!(
            Fault::action_not_supported(&op)
                .reason
                .ends_with("\u{e9}...")
        );
    }
}
