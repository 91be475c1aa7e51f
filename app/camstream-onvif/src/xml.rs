//! A whole XML message read into a flat list of elements under limits:
//! bytes, depth, element count, text length. quick-xml resolves
//! namespaces; a DOCTYPE is refused (so no entity of the sender's own is
//! ever expanded), as are entities beyond XML's five and character
//! references. SOAP requests and WS-Discovery messages are small: reading
//! them whole keeps the checks that follow plain lookups.
//!
//! The work is linear in the message's size (docs/SECURITY.md: one request
//! must not cost everyone frames): attributes are counted before their
//! names are compared (quick-xml's own duplicate check compares every pair),
//! and namespace declarations are capped for the whole message (each
//! element's name is looked up among all those in scope). The names are
//! resolved here rather than by quick-xml's NsReader, which reads every
//! attribute of an element for declarations before the cap could refuse
//! it.

use std::fmt;

use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

const XML_NS: &str = "http://www.w3.org/XML/1998/namespace";

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_bytes: usize,
    pub max_depth: usize,
    pub max_elements: usize,
    /// Longest text of one element, and longest attribute value.
    pub max_text: usize,
    /// Attributes of one element, namespace declarations included.
    pub max_attrs: usize,
    /// Namespace declarations in the whole message.
    pub max_xmlns: usize,
}

impl Default for Limits {
    /// Room for any Profile S request (the largest, SetVideoEncoderConfiguration
    /// with a UsernameToken, is under 3 KB) many times over.
    fn default() -> Limits {
        Limits {
            max_bytes: 64 << 10,
            max_depth: 32,
            max_elements: 512,
            max_text: 4096,
            // gSOAP's ONVIF clients declare some 40 namespaces on the
            // Envelope.
            max_attrs: 128,
            max_xmlns: 128,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XmlError {
    TooLarge(usize),
    TooDeep(usize),
    TooManyElements(usize),
    TextTooLong(usize),
    TooManyAttributes(usize),
    TooManyNamespaces(usize),
    /// A character XML 1.0 does not allow anywhere (NUL, other C0 controls).
    Forbidden(u8),
    Doctype,
    /// Not well-formed, with quick-xml's words.
    Malformed(String),
    Empty,
}

impl fmt::Display for XmlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            XmlError::TooLarge(n) => write!(f, "message over {n} bytes"),
            XmlError::TooDeep(n) => write!(f, "elements nested over {n} deep"),
            XmlError::TooManyElements(n) => write!(f, "over {n} elements"),
            XmlError::TextTooLong(n) => write!(f, "a text or attribute over {n} bytes"),
            XmlError::TooManyAttributes(n) => write!(f, "an element with over {n} attributes"),
            XmlError::TooManyNamespaces(n) => write!(f, "over {n} namespace declarations"),
            XmlError::Forbidden(c) => write!(f, "character U+{c:04X} (not allowed in XML)"),
            XmlError::Doctype => f.write_str("a DOCTYPE (not taken)"),
            XmlError::Malformed(e) => write!(f, "not well-formed XML: {e}"),
            XmlError::Empty => f.write_str("no root element"),
        }
    }
}

impl std::error::Error for XmlError {}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// Namespace URI ("" when none).
    pub ns: String,
    /// Local name.
    pub name: String,
    pub parent: Option<usize>,
    /// Attributes by local name (their namespaces are not needed here).
    pub attrs: Vec<(String, String)>,
    /// Its namespace declarations (prefix, "" for the default; URI), for
    /// QNames in text such as WS-Discovery's Types.
    pub xmlns: Vec<(String, String)>,
    /// Its own text (and CDATA), trimmed.
    pub text: String,
}

impl Element {
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn is(&self, ns: &str, name: &str) -> bool {
        self.ns == ns && self.name == name
    }
}

/// The elements in document order; the root is the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc {
    pub elements: Vec<Element>,
}

impl Doc {
    pub fn parse(bytes: &[u8], limits: &Limits) -> Result<Doc, XmlError> {
        if bytes.len() > limits.max_bytes {
            return Err(XmlError::TooLarge(limits.max_bytes));
        }
        // XML 1.0's Char: of the C0 controls only tab, LF and CR (quick-xml
        // passes the others through into text and values).
        if let Some(&c) = bytes
            .iter()
            .find(|&&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'))
        {
            return Err(XmlError::Forbidden(c));
        }
        let mut reader = Reader::from_reader(bytes);
        let config = reader.config_mut();
        config.trim_text(true);
        config.check_end_names = true;
        config.expand_empty_elements = false;
        let mut elements: Vec<Element> = Vec::new();
        let mut open: Vec<usize> = Vec::new();
        let mut buf = Vec::new();
        let mut xmlns_seen = 0;
        let mal = |e: &dyn fmt::Display| XmlError::Malformed(e.to_string());
        loop {
            buf.clear();
            let event = reader.read_event_into(&mut buf).map_err(|e| mal(&e))?;
            match event {
                Event::Start(ref e) | Event::Empty(ref e) => {
                    if open.len() >= limits.max_depth {
                        return Err(XmlError::TooDeep(limits.max_depth));
                    }
                    if elements.len() >= limits.max_elements {
                        return Err(XmlError::TooManyElements(limits.max_elements));
                    }
                    if open.is_empty() && !elements.is_empty() {
                        return Err(XmlError::Malformed("a second root element".into()));
                    }
                    let mut el = element(e, open.last().copied(), limits)?;
                    xmlns_seen += el.xmlns.len();
                    if xmlns_seen > limits.max_xmlns {
                        return Err(XmlError::TooManyNamespaces(limits.max_xmlns));
                    }
                    let name = e.name();
                    let prefix = name.prefix().map_or(&b""[..], |p| p.into_inner());
                    el.ns = resolve(&elements, &el, prefix)?;
                    elements.push(el);
                    if matches!(event, Event::Start(_)) {
                        open.push(elements.len() - 1);
                    }
                }
                Event::End(_) => {
                    open.pop();
                }
                Event::Text(t) => {
                    let text = t.unescape().map_err(|e| mal(&e))?;
                    append_text(&mut elements, &open, &text, limits)?;
                }
                Event::CData(c) => {
                    let text =
                        String::from_utf8(c.into_inner().into_owned()).map_err(|e| mal(&e))?;
                    append_text(&mut elements, &open, &text, limits)?;
                }
                Event::DocType(_) => return Err(XmlError::Doctype),
                Event::Decl(_) | Event::PI(_) | Event::Comment(_) => {}
                Event::Eof => break,
            }
        }
        if !open.is_empty() {
            return Err(XmlError::Malformed(
                "the document ends inside an element".into(),
            ));
        }
        if elements.is_empty() {
            return Err(XmlError::Empty);
        }
        Ok(Doc { elements })
    }

    #[expect(
        clippy::indexing_slicing,
        reason = "a Doc is made only by parse, which refuses a document without a root"
    )]
    pub fn root(&self) -> &Element {
        &self.elements[0]
    }

    /// Element `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&Element> {
        self.elements.get(i)
    }

    /// Element `i`'s text ("" when there is no such element).
    pub fn text(&self, i: usize) -> &str {
        self.get(i).map_or("", |e| e.text.as_str())
    }

    pub fn children(&self, parent: usize) -> impl Iterator<Item = usize> + '_ {
        self.elements
            .iter()
            .enumerate()
            .skip(parent + 1)
            .filter(move |(_, e)| e.parent == Some(parent))
            .map(|(i, _)| i)
    }

    /// The first child of `parent` with this namespace and name.
    pub fn child(&self, parent: usize, ns: &str, name: &str) -> Option<usize> {
        self.children(parent)
            .find(|&i| self.get(i).is_some_and(|e| e.is(ns, name)))
    }

    /// The namespace URI `prefix` stands for at element `at`.
    pub fn resolve_prefix(&self, at: usize, prefix: &str) -> Option<&str> {
        let mut cur = Some(at);
        while let Some(el) = cur.and_then(|i| self.get(i)) {
            if let Some((_, uri)) = el.xmlns.iter().find(|(p, _)| p == prefix) {
                return Some(uri);
            }
            cur = el.parent;
        }
        None
    }

    /// Follows children by local name only, whatever their namespace (a
    /// request's parameters: their namespace is the schema's or the
    /// service's, as the client's WSDL tool decided).
    pub fn path(&self, from: usize, names: &[&str]) -> Option<usize> {
        names.iter().try_fold(from, |at, name| {
            self.children(at)
                .find(|&i| self.get(i).is_some_and(|e| e.name == *name))
        })
    }
}

/// The namespace URI of an element's `prefix`: its own declarations, then
/// its ancestors' ("" when no default namespace is declared).
fn resolve(elements: &[Element], el: &Element, prefix: &[u8]) -> Result<String, XmlError> {
    let prefix = String::from_utf8_lossy(prefix);
    if prefix == "xml" {
        return Ok(XML_NS.into());
    }
    let mut cur = Some(el);
    while let Some(e) = cur {
        if let Some((_, uri)) = e.xmlns.iter().find(|(p, _)| *p == prefix) {
            return Ok(uri.clone());
        }
        cur = e.parent.and_then(|i| elements.get(i));
    }
    if prefix.is_empty() {
        return Ok(String::new());
    }
    Err(XmlError::Malformed(format!(
        "undeclared namespace prefix {prefix}"
    )))
}

fn element(
    e: &BytesStart<'_>,
    parent: Option<usize>,
    limits: &Limits,
) -> Result<Element, XmlError> {
    let mut attrs = Vec::new();
    let mut xmlns = Vec::new();
    // Counted first, then checked for duplicates by a set: quick-xml's
    // check (with_checks(true), its default) compares each attribute with
    // all before it, the square of their number.
    let mut keys = std::collections::HashSet::new();
    for (n, a) in e.attributes().with_checks(false).enumerate() {
        if n >= limits.max_attrs {
            return Err(XmlError::TooManyAttributes(limits.max_attrs));
        }
        let a = a.map_err(|e| XmlError::Malformed(e.to_string()))?;
        if !keys.insert(a.key.0) {
            return Err(XmlError::Malformed(format!(
                "attribute {} given twice",
                String::from_utf8_lossy(a.key.as_ref())
            )));
        }
        let value = a
            .unescape_value()
            .map_err(|e| XmlError::Malformed(e.to_string()))?;
        if value.len() > limits.max_text {
            return Err(XmlError::TextTooLong(limits.max_text));
        }
        let key = a.key.as_ref();
        let declared = key
            .strip_prefix(b"xmlns")
            .filter(|rest| rest.is_empty() || rest.starts_with(b":"));
        if let Some(rest) = declared {
            let prefix = rest.strip_prefix(b":").unwrap_or(rest);
            // Namespaces in XML 1.0, 3: xmlns is never declared, xml only
            // as its own URI.
            if prefix == b"xmlns" || (prefix == b"xml" && *value != *XML_NS) {
                return Err(XmlError::Malformed(format!(
                    "a declaration of the reserved prefix {}",
                    String::from_utf8_lossy(prefix)
                )));
            }
            xmlns.push((
                String::from_utf8_lossy(prefix).into_owned(),
                value.into_owned(),
            ));
            continue;
        }
        let name = a.key.local_name();
        let name = String::from_utf8_lossy(name.as_ref()).into_owned();
        attrs.push((name, value.into_owned()));
    }
    Ok(Element {
        ns: String::new(),
        name: String::from_utf8_lossy(e.local_name().as_ref()).into_owned(),
        parent,
        attrs,
        xmlns,
        text: String::new(),
    })
}

/// Text for an element or attribute value.
pub fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    quick_xml::escape::escape(s)
}

fn append_text(
    elements: &mut [Element],
    open: &[usize],
    text: &str,
    limits: &Limits,
) -> Result<(), XmlError> {
    let Some(&at) = open.last() else {
        // Text outside the root (whitespace is trimmed away before this).
        return Err(XmlError::Malformed("text outside the root element".into()));
    };
    let Some(el) = elements.get_mut(at) else {
        return Err(XmlError::Malformed("text outside any element".into()));
    };
    if el.text.len() + text.len() > limits.max_text {
        return Err(XmlError::TextTooLong(limits.max_text));
    }
    el.text.push_str(text);
    Ok(())
}

/// A finite xs:float, or None (INF and NaN are never a quality).
pub fn xs_float(v: &str) -> Option<f64> {
    let v = v.trim_matches(XML_SPACE);
    // Rust also takes "inf", "infinity" and "nan" in any case, which the
    // schema does not; a finite value is all a quality may be anyway.
    v.parse::<f32>()
        .ok()
        .filter(|f| f.is_finite())
        .map(f64::from)
}

/// XML's white space (a space, tab, carriage return, line feed).
pub const XML_SPACE: &[char] = &[' ', '\t', '\r', '\n'];

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Doc, XmlError> {
        Doc::parse(s.as_bytes(), &Limits::default())
    }

    #[test]
    fn namespaces_attributes_and_text() {
        let d = parse(
            r#"<?xml version="1.0"?><a:x xmlns:a="urn:a" xmlns="urn:d"><y k="v&amp;w">t &lt; u<![CDATA[<z>]]></y><a:e/></a:x>"#,
        )
        .unwrap();
        assert_eq!(d.elements.len(), 3);
        assert!(d.root().is("urn:a", "x"));
        let y = d.child(0, "urn:d", "y").unwrap();
        assert_eq!(d.elements[y].attr("k"), Some("v&w"));
        assert_eq!(d.elements[y].text, "t < u<z>");
        assert_eq!(d.path(0, &["e"]), Some(2));
        assert_eq!(d.path(0, &["y", "nothing"]), None);
        assert_eq!(d.resolve_prefix(y, "a"), Some("urn:a"));
        assert_eq!(d.resolve_prefix(y, ""), Some("urn:d"));
        assert_eq!(d.resolve_prefix(y, "q"), None);
    }

    #[test]
    fn limits_and_refusals() {
        let deep = "<a>".repeat(40) + &"</a>".repeat(40);
        assert_eq!(parse(&deep), Err(XmlError::TooDeep(32)));
        let many = format!("<a>{}</a>", "<b/>".repeat(600));
        assert_eq!(parse(&many), Err(XmlError::TooManyElements(512)));
        let long = format!("<a>{}</a>", "x".repeat(5000));
        assert_eq!(parse(&long), Err(XmlError::TextTooLong(4096)));
        let big = format!("<a>{}</a>", " ".repeat(70 << 10));
        assert_eq!(parse(&big), Err(XmlError::TooLarge(64 << 10)));
        let bomb = r#"<!DOCTYPE a [<!ENTITY x "xxxxxxxx">]><a>&x;</a>"#;
        assert_eq!(parse(bomb), Err(XmlError::Doctype));
        assert!(matches!(parse("<a>&x;</a>"), Err(XmlError::Malformed(_))));
        assert!(matches!(
            parse("<a><b></a></b>"),
            Err(XmlError::Malformed(_))
        ));
        assert!(matches!(parse("<a>"), Err(XmlError::Malformed(_))));
        assert!(matches!(parse("<p:a/>"), Err(XmlError::Malformed(_))));
        assert!(matches!(parse("<a/><b/>"), Err(XmlError::Malformed(_))));
        assert_eq!(parse("  "), Err(XmlError::Empty));
    }

    /// The shapes of issue 51's flood, each near the 64 KiB a request may
    /// have: refused at the cap, whatever else the message holds.
    #[test]
    fn attribute_and_namespace_floods() {
        let attrs: String = (0..7000).map(|i| format!(" a{i:x}=\"\"")).collect();
        assert!(attrs.len() < 64 << 10);
        let flood = format!("<a{attrs}/>");
        assert_eq!(parse(&flood), Err(XmlError::TooManyAttributes(128)));
        let xmlns: String = (0..4000).map(|i| format!(" xmlns:p{i}=\"u\"")).collect();
        assert_eq!(
            parse(&format!("<a{xmlns}/>")),
            Err(XmlError::TooManyAttributes(128))
        );
        // Spread over elements, under each one's cap.
        let spread: String = (0..40)
            .map(|e| {
                let decl: String = (0..10).map(|i| format!(" xmlns:p{e}x{i}=\"u\"")).collect();
                format!("<b{decl}/>")
            })
            .collect();
        assert_eq!(
            parse(&format!("<a>{spread}</a>")),
            Err(XmlError::TooManyNamespaces(128))
        );
        // At the caps, taken.
        let ok: String = (0..128).map(|i| format!(" a{i}=\"\"")).collect();
        assert_eq!(parse(&format!("<a{ok}/>")).unwrap().root().attrs.len(), 128);
        let ok: String = (0..128).map(|i| format!(" xmlns:p{i}=\"u\"")).collect();
        assert_eq!(parse(&format!("<a{ok}/>")).unwrap().root().xmlns.len(), 128);
    }

    #[test]
    fn duplicate_attributes_are_refused() {
        // quick-xml's own check is off (it is the square): this one counts.
        assert!(matches!(
            parse(r#"<a x="1" y="2" x="3"/>"#),
            Err(XmlError::Malformed(m)) if m.contains("x given twice")
        ));
        assert!(matches!(
            parse(r#"<a xmlns:p="u" xmlns:p="v"/>"#),
            Err(XmlError::Malformed(_))
        ));
        // Same local name, other prefixes: two attributes.
        assert!(parse(r#"<a xmlns:p="u" xmlns:q="v" p:x="1" q:x="2"/>"#).is_ok());
    }

    #[test]
    fn namespaces_resolved_here() {
        let d = parse(
            r#"<a xmlns="urn:d" xmlnsx="v"><p:b xmlns:p="urn:p"><c xmlns=""/><xml:d/></p:b></a>"#,
        )
        .unwrap();
        let ns: Vec<&str> = d.elements.iter().map(|e| e.ns.as_str()).collect();
        assert_eq!(ns, ["urn:d", "urn:p", "", XML_NS]);
        // Not a declaration: an attribute whose name begins with xmlns.
        assert_eq!(d.root().attr("xmlnsx"), Some("v"));
        assert_eq!(d.root().xmlns.len(), 1);
        assert!(matches!(
            parse(r#"<a><p:b xmlns:p="urn:p"/><p:c/></a>"#),
            Err(XmlError::Malformed(m)) if m == "undeclared namespace prefix p"
        ));
        assert!(matches!(
            parse(r#"<a xmlns:xmlns="urn:x"/>"#),
            Err(XmlError::Malformed(_))
        ));
        assert!(matches!(
            parse(r#"<a xmlns:xml="urn:x"/>"#),
            Err(XmlError::Malformed(_))
        ));
        assert!(parse(&format!(r#"<a xmlns:xml="{XML_NS}"/>"#)).is_ok());
    }

    #[test]
    fn control_characters_are_refused() {
        assert_eq!(parse("<a>x\0y</a>"), Err(XmlError::Forbidden(0)));
        assert_eq!(parse("<a k=\"\0\"/>"), Err(XmlError::Forbidden(0)));
        assert_eq!(parse("<a>\u{1b}</a>"), Err(XmlError::Forbidden(0x1b)));
        assert!(parse("<a>\tx\r\ny</a>").is_ok());
    }
}
