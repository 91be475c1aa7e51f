//! RTSP authentication, as RTSP borrows it from HTTP: Digest with MD5
//! (RFC 2617) and SHA-256 (RFC 7616), Basic (RFC 7617) only when enabled,
//! or for users set from a password hash (Raspberry Pi Imager's): such a
//! user is known by name alone until a Basic sign-in's password is checked
//! against the hash (by the caller, off the event loop) and learnt here.
//!
//! No I/O and no clock of its own: the server passes the request's method,
//! its Authorization header and the time, and gets a verdict and the
//! WWW-Authenticate values back. Users are kept as their HA1 digests
//! (H(user ":" realm ":" password) per algorithm), never as passwords.
//!
//! Nonces are stateless: the time they were made and an HMAC of it under a
//! key drawn at start, so any number of clients costs no memory, a nonce
//! from before a restart is refused, and an expired one that came with the
//! right password is told apart (`stale=true`: the client retries on its
//! own without asking its user again).

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use md5::Md5;
use rtsp_types::Url;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Md5,
    Sha256,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Md5 => "MD5",
            Algorithm::Sha256 => "SHA-256",
        }
    }

    fn parse(s: &str) -> Option<Algorithm> {
        if s.eq_ignore_ascii_case("MD5") {
            Some(Algorithm::Md5)
        } else if s.eq_ignore_ascii_case("SHA-256") {
            Some(Algorithm::Sha256)
        } else {
            None // "-sess" variants and others: not offered, not taken
        }
    }

    /// Lower-case hex of H(parts joined by ':').
    pub fn hex(self, parts: &[&[u8]]) -> String {
        fn run<D: Digest>(parts: &[&[u8]]) -> String {
            let mut d = D::new();
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    d.update(b":");
                }
                d.update(p);
            }
            to_hex(&d.finalize())
        }
        match self {
            Algorithm::Md5 => run::<Md5>(parts),
            Algorithm::Sha256 => run::<Sha256>(parts),
        }
    }
}

fn to_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        for nibble in [b >> 4, b & 15] {
            s.push(char::from(
                HEX.get(usize::from(nibble)).copied().unwrap_or(b'0'),
            ));
        }
    }
    s
}

/// A user as the config file keeps one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    /// H(name:realm:password) with MD5, lower-case hex.
    pub md5: String,
    /// The same with SHA-256.
    pub sha256: String,
}

impl User {
    pub fn from_password(name: &str, realm: &str, password: &str) -> User {
        let parts: [&[u8]; 3] = [name.as_bytes(), realm.as_bytes(), password.as_bytes()];
        User {
            name: name.to_string(),
            md5: Algorithm::Md5.hex(&parts),
            sha256: Algorithm::Sha256.hex(&parts),
        }
    }

    fn ha1(&self, a: Algorithm) -> &str {
        match a {
            Algorithm::Md5 => &self.md5,
            Algorithm::Sha256 => &self.sha256,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// The request comes from this user.
    User(&'a str),
    /// The right password with a nonce that has expired: answer 401 with
    /// `stale=true` (or let a keep-alive of this user's session through).
    Expired(&'a str),
    /// Answer 401 with fresh challenges (no credentials, wrong ones, an
    /// unknown user, a nonce this server did not make).
    Challenge,
    /// Answer 400: an Authorization header that cannot be read.
    Malformed(&'static str),
    /// Basic credentials for a user known only by a password hash: the
    /// caller checks `password` against it (a slow hash: off the event
    /// loop) and, if it matches, [`Auth::learn`]s the user.
    Verify { name: &'a str, password: String },
}

pub struct Auth {
    realm: String,
    users: Vec<User>,
    basic: bool,
    /// Users set from a password hash: Basic is taken from them, enabled
    /// or not (their first sign-in must be Basic, and browsers keep
    /// sending what worked).
    basic_users: Vec<String>,
    /// Those of them not learnt yet: known by name only.
    pending: Vec<String>,
    key: [u8; 32],
    nonce_lifetime: u64,
}

type HmacSha256 = Hmac<Sha256>;

/// Longest Authorization header value looked at (a Digest one is ~400 bytes).
const MAX_HEADER: usize = 4096;

impl Auth {
    /// `key`: random, drawn once per start; `nonce_lifetime` in seconds of
    /// the clock later passed as `now`.
    pub fn new(
        realm: &str,
        users: Vec<User>,
        basic: bool,
        key: [u8; 32],
        nonce_lifetime: u64,
    ) -> Auth {
        Auth {
            realm: realm.to_string(),
            users,
            basic,
            basic_users: Vec::new(),
            pending: Vec::new(),
            key,
            nonce_lifetime,
        }
    }

    /// Users set from a password hash: `learnt` (with their digests, as
    /// kept from an earlier sign-in) and `pending` (by name).
    pub fn with_hashed(mut self, learnt: Vec<User>, pending: Vec<String>) -> Auth {
        self.basic_users = learnt
            .iter()
            .map(|u| u.name.clone())
            .chain(pending.iter().cloned())
            .collect();
        self.users.extend(learnt);
        self.pending = pending;
        self
    }

    /// A pending user whose password matched its hash: known by its
    /// digests from now on, for Digest as for Basic.
    pub fn learn(&mut self, user: User) {
        if let Some(i) = self.pending.iter().position(|n| *n == user.name) {
            self.pending.swap_remove(i);
            self.users.push(user);
        }
    }

    /// Whether a user is known only by a password hash still.
    #[cfg(test)]
    pub fn is_pending(&self, name: &str) -> bool {
        self.pending.iter().any(|n| n == name)
    }

    #[cfg(test)]
    pub fn realm(&self) -> &str {
        &self.realm
    }

    fn mac(&self, stamp: &[u8; 8]) -> [u8; 16] {
        // HMAC pads a key shorter than SHA-256's 64-byte block with zeros:
        // padded here, it takes the block-sized key type, which cannot fail.
        let mut block = [0u8; 64];
        for (b, k) in block.iter_mut().zip(self.key) {
            *b = k;
        }
        let mut m = <HmacSha256 as hmac::digest::KeyInit>::new(&block.into());
        m.update(stamp);
        let full = m.finalize().into_bytes();
        let mut out = [0u8; 16];
        for (o, f) in out.iter_mut().zip(full) {
            *o = f;
        }
        out
    }

    pub fn nonce(&self, now: u64) -> String {
        let stamp = now.to_be_bytes();
        let mut raw = [0u8; 24];
        let (head, tail) = raw.split_at_mut(8);
        head.copy_from_slice(&stamp);
        tail.copy_from_slice(&self.mac(&stamp));
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// When `nonce` was made, if this server made it.
    fn nonce_time(&self, nonce: &str) -> Option<u64> {
        let mut raw = [0u8; 24];
        match URL_SAFE_NO_PAD.decode_slice(nonce.as_bytes(), &mut raw) {
            Ok(24) => {}
            _ => return None,
        }
        let (head, tail) = raw.split_at(8);
        let stamp: [u8; 8] = head.try_into().ok()?;
        bool::from(self.mac(&stamp).ct_eq(tail)).then(|| u64::from_be_bytes(stamp))
    }

    /// The WWW-Authenticate values of a 401, best first: SHA-256 Digest,
    /// then MD5 Digest (one nonce for both: clients that read only one
    /// challenge, or ignore `algorithm`, still get through with MD5), then
    /// Basic if enabled. FFmpeg and live555 take the last Digest challenge
    /// and know only MD5; RFC 7616 clients take the first they support.
    pub fn challenges(&self, now: u64, stale: bool) -> Vec<String> {
        let nonce = self.nonce(now);
        let stale = if stale { ", stale=true" } else { "" };
        let mut v: Vec<String> = [Algorithm::Sha256, Algorithm::Md5]
            .iter()
            .map(|a| {
                // realm, nonce, stale first and in this order: live555
                // (VLC) reads challenges with a fixed sscanf pattern.
                format!(
                    "Digest realm=\"{}\", nonce=\"{nonce}\"{stale}, algorithm={}, qop=\"auth\"",
                    self.realm,
                    a.name()
                )
            })
            .collect();
        if self.basic || !self.basic_users.is_empty() {
            v.push(format!("Basic realm=\"{}\"", self.realm));
        }
        v
    }

    /// The challenges for a person's client (a browser): while a user is
    /// known only by a password hash, Basic alone, as a browser offered
    /// Digest too would answer with Digest, which no hash can check.
    pub fn sign_in_challenges(&self, now: u64, stale: bool) -> Vec<String> {
        if self.pending.is_empty() {
            self.challenges(now, stale)
        } else {
            vec![format!("Basic realm=\"{}\"", self.realm)]
        }
    }

    /// Checks a request's Authorization header (`None`: there was none);
    /// `request` is its request URI (`None`: `*`), `presentation` the path
    /// (no slashes around it) of the presentation that URI belongs to, if it
    /// names one or one of its streams.
    pub fn check(
        &self,
        method: &str,
        request: Option<&Url>,
        presentation: Option<&str>,
        authorization: Option<&str>,
        now: u64,
    ) -> Verdict<'_> {
        let Some(h) = authorization else {
            return Verdict::Challenge;
        };
        if h.len() > MAX_HEADER {
            return Verdict::Malformed("Authorization header too long");
        }
        let h = h.trim();
        let (scheme, rest) = h.split_once(' ').unwrap_or((h, ""));
        if scheme.eq_ignore_ascii_case("Digest") {
            match Params::parse(rest) {
                Some(p) => self.digest(method, request, presentation, &p, now),
                None => Verdict::Malformed("unreadable Digest parameters"),
            }
        } else if scheme.eq_ignore_ascii_case("Basic") {
            if self.basic || !self.basic_users.is_empty() {
                self.basic(rest.trim())
            } else {
                Verdict::Challenge
            }
        } else {
            Verdict::Challenge
        }
    }

    fn basic(&self, token: &str) -> Verdict<'_> {
        let Ok(raw) = STANDARD.decode(token) else {
            return Verdict::Malformed("Basic credentials are not base64");
        };
        let Ok(text) = std::str::from_utf8(&raw) else {
            return Verdict::Challenge;
        };
        let Some((name, password)) = text.split_once(':') else {
            return Verdict::Malformed("Basic credentials without ':'");
        };
        if let Some(name) = self.pending.iter().find(|n| *n == name) {
            return Verdict::Verify {
                name,
                password: password.to_string(),
            };
        }
        // While a user is pending, a browser is offered Basic alone: every
        // user's Basic is taken then.
        let Some(user) = self.users.iter().find(|u| {
            u.name == name
                && (self.basic || !self.pending.is_empty() || self.basic_users.contains(&u.name))
        }) else {
            return Verdict::Challenge;
        };
        let ha1 =
            Algorithm::Sha256.hex(&[name.as_bytes(), self.realm.as_bytes(), password.as_bytes()]);
        if bool::from(ha1.as_bytes().ct_eq(user.sha256.as_bytes())) {
            Verdict::User(&user.name)
        } else {
            Verdict::Challenge
        }
    }

    fn digest(
        &self,
        method: &str,
        request: Option<&Url>,
        presentation: Option<&str>,
        p: &Params<'_>,
        now: u64,
    ) -> Verdict<'_> {
        let (Some(name), Some(realm), Some(nonce), Some(uri), Some(response)) = (
            p.get("username"),
            p.get("realm"),
            p.get("nonce"),
            p.get("uri"),
            p.get("response"),
        ) else {
            return Verdict::Malformed(
                "Digest credentials without username, realm, nonce, uri or response",
            );
        };
        // RFC 7616 §3.4.6: a response made for another resource is not
        // taken for this one (a captured PLAY of one stream, say).
        if !names_resource(uri, request, presentation) {
            return Verdict::Malformed(
                "Digest uri names neither the request's URI nor its presentation",
            );
        }
        // RFC 7616's userhash (the name hashed) is not offered, so not taken.
        if realm != self.realm
            || p.get("userhash")
                .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            return Verdict::Challenge;
        }
        let Some(algorithm) = Algorithm::parse(p.get("algorithm").unwrap_or("MD5")) else {
            return Verdict::Challenge;
        };
        let Some(user) = self.users.iter().find(|u| u.name == name) else {
            return Verdict::Challenge;
        };
        let Some(made) = self.nonce_time(nonce) else {
            return Verdict::Challenge;
        };
        let ha2 = algorithm.hex(&[method.as_bytes(), uri.as_bytes()]);
        let ha1 = user.ha1(algorithm).as_bytes();
        let expected = match p.get("qop") {
            None => algorithm.hex(&[ha1, nonce.as_bytes(), ha2.as_bytes()]),
            Some(q) if q.eq_ignore_ascii_case("auth") => {
                let (Some(nc), Some(cnonce)) = (p.get("nc"), p.get("cnonce")) else {
                    return Verdict::Malformed("Digest qop=auth without nc or cnonce");
                };
                algorithm.hex(&[
                    ha1,
                    nonce.as_bytes(),
                    nc.as_bytes(),
                    cnonce.as_bytes(),
                    q.as_bytes(),
                    ha2.as_bytes(),
                ])
            }
            Some(_) => return Verdict::Challenge, // auth-int: not offered
        };
        if !bool::from(
            expected
                .as_bytes()
                .ct_eq(response.to_ascii_lowercase().as_bytes()),
        ) {
            return Verdict::Challenge;
        }
        if now.saturating_sub(made) > self.nonce_lifetime || made > now {
            Verdict::Expired(&user.name)
        } else {
            Verdict::User(&user.name)
        }
    }
}

/// Whether a Digest `uri` names the request's resource or the presentation
/// it belongs to. Most clients copy the request line; live555 (VLC) names
/// the presentation's base URL in every request after DESCRIBE, its SETUP
/// of a stream included. A path alone (as HTTP clients send it) or the
/// camera under another host name (behind NAT or a proxy) name the same
/// resource. The response still binds method, nonce and password.
fn names_resource(uri: &str, request: Option<&Url>, presentation: Option<&str>) -> bool {
    let Some(r) = request else {
        return uri == "*";
    };
    if uri == r.as_str() {
        return true;
    }
    let Ok(u) = r.join(uri) else {
        return false;
    };
    (u.path() == r.path() && u.query() == r.query())
        || presentation.is_some_and(|p| u.query().is_none() && u.path().trim_matches('/') == p)
}

/// The client's side, for the health check on the device itself, which has
/// the stored digests but no password: the Authorization value answering
/// the first Digest challenge (of a 401's WWW-Authenticate values) whose
/// algorithm it knows, with qop=auth when offered.
pub fn answer(
    challenges: &[&str],
    user: &User,
    method: &str,
    uri: &str,
    cnonce: &str,
) -> Option<String> {
    challenges.iter().flat_map(|v| split_challenges(v)).find_map(|c| {
        let c = c.trim();
        let (scheme, rest) = c.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("Digest") {
            return None;
        }
        let p = Params::parse(rest)?;
        let algorithm = Algorithm::parse(p.get("algorithm").unwrap_or("MD5"))?;
        let (realm, nonce) = (p.get("realm")?, p.get("nonce")?);
        let quoted = |v: &str| !v.contains(['"', '\\', '\r', '\n']);
        if !quoted(realm) || !quoted(nonce) {
            return None;
        }
        let ha1 = user.ha1(algorithm).as_bytes();
        let ha2 = algorithm.hex(&[method.as_bytes(), uri.as_bytes()]);
        let auth_qop = p
            .get("qop")
            .is_some_and(|q| q.split(',').any(|q| q.trim().eq_ignore_ascii_case("auth")));
        let name = &user.name;
        let alg = algorithm.name();
        Some(if auth_qop {
            let nc = "00000001";
            let response = algorithm.hex(&[
                ha1,
                nonce.as_bytes(),
                nc.as_bytes(),
                cnonce.as_bytes(),
                b"auth",
                ha2.as_bytes(),
            ]);
            format!(
                "Digest username=\"{name}\", realm=\"{realm}\", nonce=\"{nonce}\", uri=\"{uri}\", \
                 algorithm={alg}, qop=auth, nc={nc}, cnonce=\"{cnonce}\", response=\"{response}\""
            )
        } else {
            let response = algorithm.hex(&[ha1, nonce.as_bytes(), ha2.as_bytes()]);
            format!(
                "Digest username=\"{name}\", realm=\"{realm}\", nonce=\"{nonce}\", uri=\"{uri}\", \
                 algorithm={alg}, response=\"{response}\""
            )
        })
    })
}

/// The realm of the first Digest challenge among a 401's WWW-Authenticate
/// values: a client that has the password itself (camstream-load) makes
/// the user's digests for it with [`User::from_password`], then [`answer`]s.
pub fn digest_realm(challenges: &[&str]) -> Option<String> {
    challenges
        .iter()
        .flat_map(|v| split_challenges(v))
        .find_map(|c| {
            let (scheme, rest) = c.trim().split_once(' ')?;
            if !scheme.eq_ignore_ascii_case("Digest") {
                return None;
            }
            Params::parse(rest)?.get("realm").map(str::to_owned)
        })
}

/// The challenges in one WWW-Authenticate value: parsers that join repeated
/// headers with ", " (as `rtsp-types` does) leave several in one. A new one
/// starts after a comma outside quotes where a scheme and a space follow,
/// not a parameter's `name=`.
fn split_challenges(v: &str) -> impl Iterator<Item = &str> {
    let b = v.as_bytes();
    let mut starts = vec![0];
    let mut quoted = false;
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'\\' if quoted => i += 1,
            b'"' => quoted = !quoted,
            b',' if !quoted => {
                let rest = v.get(i + 1..).unwrap_or_default().trim_start();
                let token = rest
                    .bytes()
                    .take_while(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+.^_`|~-".contains(c))
                    .count();
                if token > 0 && rest.as_bytes().get(token) == Some(&b' ') {
                    let after = rest.get(token..).unwrap_or_default().trim_start();
                    if !after.starts_with('=') {
                        starts.push(i + 1);
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    let ends: Vec<usize> = starts
        .iter()
        .skip(1)
        .map(|&s| s - 1)
        .chain([v.len()])
        .collect();
    starts
        .into_iter()
        .zip(ends)
        .map(move |(s, e)| v.get(s..e).unwrap_or_default().trim())
}

/// The auth-params of a credentials header (RFC 7235 §2.1): `name=token`
/// or `name="quoted string"`, comma-separated. At most 16 are kept.
struct Params<'a> {
    items: [(&'a str, std::borrow::Cow<'a, str>); 16],
    len: usize,
}

impl<'a> Params<'a> {
    fn parse(s: &'a str) -> Option<Params<'a>> {
        let mut p = Params {
            items: std::array::from_fn(|_| ("", std::borrow::Cow::Borrowed(""))),
            len: 0,
        };
        let mut rest = s.trim_start();
        while !rest.is_empty() {
            let eq = rest.find('=')?;
            let (name, after) = rest.split_at(eq);
            let name = name.trim();
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
            {
                return None;
            }
            rest = after.get(1..).unwrap_or_default().trim_start();
            let value;
            if let Some(q) = rest.strip_prefix('"') {
                let (v, after) = unquote(q)?;
                value = v;
                rest = after;
            } else {
                let (v, after) = rest.split_at(rest.find(',').unwrap_or(rest.len()));
                value = std::borrow::Cow::Borrowed(v.trim_end());
                rest = after;
            }
            // Beyond 16: refused.
            *p.items.get_mut(p.len)? = (name, value);
            p.len += 1;
            rest = rest.trim_start();
            match rest.strip_prefix(',') {
                Some(r) => rest = r.trim_start(),
                None if rest.is_empty() => {}
                None => return None,
            }
        }
        Some(p)
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.items
            .iter()
            .take(self.len)
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_ref())
    }
}

/// A quoted-string's content (after its opening quote) and what follows it.
fn unquote(s: &str) -> Option<(std::borrow::Cow<'_, str>, &str)> {
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut escaped = false;
    while let Some(&c) = bytes.get(i) {
        match c {
            b'"' => {
                // `i` is at an ASCII quote: a char boundary either side.
                let (inner, after) = s.split_at(i);
                let v = if escaped {
                    let mut out = String::with_capacity(inner.len());
                    let mut chars = inner.chars();
                    while let Some(c) = chars.next() {
                        out.push(if c == '\\' { chars.next()? } else { c });
                    }
                    std::borrow::Cow::Owned(out)
                } else {
                    std::borrow::Cow::Borrowed(inner)
                };
                return Some((v, after.get(1..).unwrap_or_default()));
            }
            b'\\' => {
                escaped = true;
                i += 2;
            }
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The presentation rtsp://cam/stream, as the server passes it.
    const PRESENTATION: Option<&str> = Some("stream");

    fn auth(basic: bool) -> Auth {
        Auth::new(
            "camstream",
            vec![User::from_password("admin", "camstream", "s3cret")],
            basic,
            [7; 32],
            300,
        )
    }

    fn url() -> Url {
        Url::parse("rtsp://cam/stream").unwrap()
    }

    fn digest_header(
        a: &Auth,
        alg: Option<Algorithm>,
        password: &str,
        nonce: &str,
        method: &str,
    ) -> String {
        let uri = "rtsp://cam/stream";
        let algo = alg.unwrap_or(Algorithm::Md5);
        let ha1 = algo.hex(&[b"admin", a.realm().as_bytes(), password.as_bytes()]);
        let ha2 = algo.hex(&[method.as_bytes(), uri.as_bytes()]);
        let resp = algo.hex(&[
            ha1.as_bytes(),
            nonce.as_bytes(),
            b"00000001",
            b"0a4f113b",
            b"auth",
            ha2.as_bytes(),
        ]);
        let alg = alg
            .map(|a| format!(", algorithm={}", a.name()))
            .unwrap_or_default();
        format!(
            "Digest username=\"admin\", realm=\"camstream\", nonce=\"{nonce}\", uri=\"{uri}\", \
             response=\"{resp}\", qop=auth, nc=00000001, cnonce=\"0a4f113b\"{alg}"
        )
    }

    // RFC 2617 §3.5 (its password is "Circle Of Life").
    #[test]
    fn rfc2617_example() {
        let h = Algorithm::Md5.hex(&[b"Mufasa", b"testrealm@host.com", b"Circle Of Life"]);
        let ha2 = Algorithm::Md5.hex(&[b"GET", b"/dir/index.html"]);
        let r = Algorithm::Md5.hex(&[
            h.as_bytes(),
            b"dcd98b7102dd2f0e8b11d0f600bfb0c093",
            b"00000001",
            b"0a4f113b",
            b"auth",
            ha2.as_bytes(),
        ]);
        assert_eq!(r, "6629fae49393a05397450978507c4ef1");
    }

    // RFC 7616 §3.9.1, both algorithms (password "Circle of Life", errata 4495).
    #[test]
    fn rfc7616_example() {
        let nonce = b"7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v";
        let cnonce = b"f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ";
        for (a, want) in [
            (Algorithm::Md5, "8ca523f5e9506fed4657c9700eebdbec"),
            (
                Algorithm::Sha256,
                "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1",
            ),
        ] {
            let ha1 = a.hex(&[b"Mufasa", b"http-auth@example.org", b"Circle of Life"]);
            let ha2 = a.hex(&[b"GET", b"/dir/index.html"]);
            let r = a.hex(&[
                ha1.as_bytes(),
                nonce,
                b"00000001",
                cnonce,
                b"auth",
                ha2.as_bytes(),
            ]);
            assert_eq!(r, want, "{a:?}");
        }
    }

    #[test]
    fn digest_with_either_algorithm_and_without_qop() {
        let a = auth(false);
        let nonce = a.nonce(1000);
        for alg in [None, Some(Algorithm::Md5), Some(Algorithm::Sha256)] {
            let h = digest_header(&a, alg, "s3cret", &nonce, "DESCRIBE");
            assert_eq!(
                a.check("DESCRIBE", Some(&url()), PRESENTATION, Some(&h), 1010),
                Verdict::User("admin"),
                "{h}"
            );
            // The response covers the method.
            assert_eq!(
                a.check("SETUP", Some(&url()), PRESENTATION, Some(&h), 1010),
                Verdict::Challenge
            );
        }
        // RFC 2069 style, no qop: H(HA1:nonce:HA2).
        let ha1 = Algorithm::Md5.hex(&[b"admin", b"camstream", b"s3cret"]);
        let ha2 = Algorithm::Md5.hex(&[b"OPTIONS", b"*"]);
        let r = Algorithm::Md5.hex(&[ha1.as_bytes(), nonce.as_bytes(), ha2.as_bytes()]);
        let h = format!(
            "Digest username=\"admin\", realm=\"camstream\", nonce=\"{nonce}\", uri=\"*\", response=\"{r}\""
        );
        assert_eq!(
            a.check("OPTIONS", None, None, Some(&h), 1000),
            Verdict::User("admin")
        );
    }

    #[test]
    fn wrong_password_unknown_user_foreign_nonce_are_challenged() {
        let a = auth(false);
        let nonce = a.nonce(1000);
        let wrong = digest_header(&a, None, "guess", &nonce, "PLAY");
        assert_eq!(
            a.check("PLAY", Some(&url()), PRESENTATION, Some(&wrong), 1000),
            Verdict::Challenge
        );
        let other = Auth::new("camstream", vec![], false, [8; 32], 300);
        let right_but_foreign = digest_header(&a, None, "s3cret", &other.nonce(1000), "PLAY");
        assert_eq!(
            a.check(
                "PLAY",
                Some(&url()),
                PRESENTATION,
                Some(&right_but_foreign),
                1000
            ),
            Verdict::Challenge
        );
        let unknown =
            digest_header(&a, None, "s3cret", &nonce, "PLAY").replace("\"admin\"", "\"root\"");
        assert_eq!(
            a.check("PLAY", Some(&url()), PRESENTATION, Some(&unknown), 1000),
            Verdict::Challenge
        );
        assert_eq!(
            a.check("PLAY", Some(&url()), PRESENTATION, None, 1000),
            Verdict::Challenge
        );
    }

    #[test]
    fn an_expired_nonce_with_the_right_password_is_stale() {
        let a = auth(false);
        let nonce = a.nonce(1000);
        let h = digest_header(&a, Some(Algorithm::Sha256), "s3cret", &nonce, "PLAY");
        assert_eq!(
            a.check("PLAY", Some(&url()), PRESENTATION, Some(&h), 1300),
            Verdict::User("admin")
        );
        assert_eq!(
            a.check("PLAY", Some(&url()), PRESENTATION, Some(&h), 1301),
            Verdict::Expired("admin")
        );
        let wrong = digest_header(&a, None, "guess", &nonce, "PLAY");
        assert_eq!(
            a.check("PLAY", Some(&url()), PRESENTATION, Some(&wrong), 5000),
            Verdict::Challenge
        );
        // As live555 reads it: realm, nonce, stale.
        for c in a.challenges(5000, true) {
            assert!(c.starts_with("Digest realm=\"camstream\", nonce=\""), "{c}");
            assert!(
                c.split("\", ").nth(2).unwrap().starts_with("stale=true,"),
                "{c}"
            );
        }
    }

    #[test]
    fn basic_only_when_enabled() {
        let h = format!("Basic {}", STANDARD.encode("admin:s3cret"));
        assert_eq!(
            auth(false).check("DESCRIBE", Some(&url()), PRESENTATION, Some(&h), 0),
            Verdict::Challenge
        );
        assert_eq!(
            auth(true).check("DESCRIBE", Some(&url()), PRESENTATION, Some(&h), 0),
            Verdict::User("admin")
        );
        let wrong = format!("Basic {}", STANDARD.encode("admin:guess"));
        assert_eq!(
            auth(true).check("DESCRIBE", Some(&url()), PRESENTATION, Some(&wrong), 0),
            Verdict::Challenge
        );
        assert!(matches!(
            auth(true).check("DESCRIBE", Some(&url()), PRESENTATION, Some("Basic !!"), 0),
            Verdict::Malformed(_)
        ));
        assert!(
            !auth(false)
                .challenges(0, false)
                .iter()
                .any(|c| c.starts_with("Basic"))
        );
        assert_eq!(
            auth(true).challenges(0, false).last().unwrap(),
            "Basic realm=\"camstream\""
        );
    }

    #[test]
    fn a_user_set_from_a_hash_signs_in_by_basic_once() {
        let mut a = auth(false).with_hashed(Vec::new(), vec!["alice".into()]);
        let h = format!("Basic {}", STANDARD.encode("alice:Correct horse 7"));
        // Known by name: the password goes to the caller to check.
        assert_eq!(
            a.check("GET", Some(&url()), None, Some(&h), 0),
            Verdict::Verify {
                name: "alice",
                password: "Correct horse 7".into()
            }
        );
        // A browser is offered Basic alone; RTSP clients Digest as well.
        assert_eq!(
            a.sign_in_challenges(0, false),
            vec!["Basic realm=\"camstream\"".to_string()]
        );
        assert_eq!(a.challenges(0, false).len(), 3);
        // Every user's Basic is taken while a browser is offered Basic
        // alone; not after.
        let admin = format!("Basic {}", STANDARD.encode("admin:s3cret"));
        assert_eq!(
            a.check("GET", Some(&url()), None, Some(&admin), 0),
            Verdict::User("admin")
        );
        a.learn(User::from_password("alice", "camstream", "Correct horse 7"));
        assert!(!a.is_pending("alice"));
        assert_eq!(
            a.check("GET", Some(&url()), None, Some(&h), 0),
            Verdict::User("alice")
        );
        let wrong = format!("Basic {}", STANDARD.encode("alice:guess"));
        assert_eq!(
            a.check("GET", Some(&url()), None, Some(&wrong), 0),
            Verdict::Challenge
        );
        assert_eq!(a.sign_in_challenges(0, false).len(), 3);
        assert_eq!(
            a.check("GET", Some(&url()), None, Some(&admin), 0),
            Verdict::Challenge
        );
    }

    #[test]
    fn challenges_offer_sha256_first_and_one_nonce() {
        let a = auth(false);
        let c = a.challenges(42, false);
        assert_eq!(c.len(), 2);
        assert!(
            c[0].contains("algorithm=SHA-256") && c[1].contains("algorithm=MD5"),
            "{c:?}"
        );
        let nonce = |s: &str| {
            s.split("nonce=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .to_string()
        };
        assert_eq!(nonce(&c[0]), nonce(&c[1]));
        assert_eq!(a.nonce_time(&nonce(&c[0])), Some(42));
    }

    #[test]
    fn params_parse_quoting_and_refuse_garbage() {
        let p = Params::parse(r#"username="a\"b", realm=x , nc=00000001,qop="auth""#).unwrap();
        assert_eq!(p.get("USERNAME"), Some("a\"b"));
        assert_eq!(p.get("realm"), Some("x"));
        assert_eq!(p.get("qop"), Some("auth"));
        for bad in [
            r#"username="unterminated"#,
            "=x",
            "a b=c",
            r#"a="x" b="y""#,
            "a=\"\\",
        ] {
            assert!(Params::parse(bad).is_none(), "{bad}");
        }
        let many = (0..17)
            .map(|i| format!("k{i}=v"))
            .collect::<Vec<_>>()
            .join(",");
        assert!(Params::parse(&many).is_none());
        let a = auth(false);
        assert!(matches!(
            a.check(
                "PLAY",
                Some(&url()),
                PRESENTATION,
                Some("Digest username=\"x"),
                0
            ),
            Verdict::Malformed(_)
        ));
        assert!(matches!(
            a.check(
                "PLAY",
                Some(&url()),
                PRESENTATION,
                Some(&"x".repeat(5000)),
                0
            ),
            Verdict::Malformed(_)
        ));
        assert_eq!(
            a.check("PLAY", Some(&url()), PRESENTATION, Some("Bearer abc"), 0),
            Verdict::Challenge
        );
    }

    /// An MD5 Digest header without qop (RFC 2069's form, as live555 sends
    /// it) for `method` with this `uri` and the password s3cret.
    fn rfc2069_header(a: &Auth, method: &str, uri: &str) -> String {
        let ha1 = Algorithm::Md5.hex(&[b"admin", b"camstream", b"s3cret"]);
        let ha2 = Algorithm::Md5.hex(&[method.as_bytes(), uri.as_bytes()]);
        let nonce = a.nonce(1000);
        let r = Algorithm::Md5.hex(&[ha1.as_bytes(), nonce.as_bytes(), ha2.as_bytes()]);
        format!(
            "Digest username=\"admin\", realm=\"camstream\", nonce=\"{nonce}\", uri=\"{uri}\", response=\"{r}\""
        )
    }

    #[test]
    fn the_digest_uri_must_name_the_requested_resource() {
        let a = auth(false);
        let h = digest_header(&a, None, "s3cret", &a.nonce(1000), "PLAY");
        let req = |u: &str, presentation| {
            a.check(
                "PLAY",
                Some(&Url::parse(u).unwrap()),
                presentation,
                Some(&h),
                1000,
            )
        };
        // The same resource, under another host name or port.
        assert_eq!(
            req("rtsp://cam/stream", PRESENTATION),
            Verdict::User("admin")
        );
        assert_eq!(req("rtsp://cam/stream", None), Verdict::User("admin"));
        assert_eq!(
            req("rtsp://192.0.2.7:8554/stream", PRESENTATION),
            Verdict::User("admin")
        );
        // The presentation, for a request of it or of its stream.
        for within in ["rtsp://cam/stream/", "rtsp://cam/stream/trackID=0"] {
            assert_eq!(
                req(within, PRESENTATION),
                Verdict::User("admin"),
                "{within}"
            );
        }
        // Another resource: 400, as RFC 7616 §3.4.6 says.
        for (other, presentation) in [
            ("rtsp://cam/other", None),
            ("rtsp://cam/stream/", None),
            ("rtsp://cam/stream/trackID=0", None),
            ("rtsp://cam/stream?x", None),
        ] {
            assert!(
                matches!(req(other, presentation), Verdict::Malformed(_)),
                "{other}"
            );
        }
        assert!(matches!(
            a.check("PLAY", None, None, Some(&h), 1000),
            Verdict::Malformed(_)
        ));
        // A path alone, as HTTP clients send it.
        let h = rfc2069_header(&a, "PLAY", "/stream");
        assert_eq!(
            a.check("PLAY", Some(&url()), PRESENTATION, Some(&h), 1000),
            Verdict::User("admin")
        );
    }

    /// live555 (VLC) answers every request after DESCRIBE with the
    /// presentation's base URL (Content-Base) as its uri, SETUP of the
    /// stream included: rtsp://127.0.0.1:8654/stream/ in a real exchange
    /// (tests/testdata/rtsp/live555-*-digest.rtsp).
    #[test]
    fn the_presentations_url_is_taken_for_its_streams() {
        let a = auth(false);
        let base = "rtsp://127.0.0.1:8654/stream/";
        let setup = Url::parse("rtsp://127.0.0.1:8654/stream/trackID=0").unwrap();
        let h = rfc2069_header(&a, "SETUP", base);
        assert_eq!(
            a.check("SETUP", Some(&setup), PRESENTATION, Some(&h), 1000),
            Verdict::User("admin")
        );
        // Without the slash, and as a path alone.
        for uri in ["rtsp://127.0.0.1:8654/stream", "/stream/", "/stream"] {
            let h = rfc2069_header(&a, "SETUP", uri);
            assert_eq!(
                a.check("SETUP", Some(&setup), PRESENTATION, Some(&h), 1000),
                Verdict::User("admin"),
                "{uri}"
            );
        }
        // The response still binds the method and the password.
        let h = rfc2069_header(&a, "PLAY", base);
        assert_eq!(
            a.check("SETUP", Some(&setup), PRESENTATION, Some(&h), 1000),
            Verdict::Challenge
        );
        // Another presentation, or the stream of one, is not this one.
        for uri in [
            "rtsp://127.0.0.1:8654/other/",
            "rtsp://127.0.0.1:8654/stream/trackID=1",
            "rtsp://127.0.0.1:8654/stream/x/",
            "rtsp://127.0.0.1:8654/stream/?q",
        ] {
            let h = rfc2069_header(&a, "SETUP", uri);
            assert!(
                matches!(
                    a.check("SETUP", Some(&setup), PRESENTATION, Some(&h), 1000),
                    Verdict::Malformed(_)
                ),
                "{uri}"
            );
        }
    }

    #[test]
    fn the_health_checks_answer_passes() {
        let a = auth(false);
        let user = User::from_password("admin", "camstream", "s3cret");
        let ch = a.challenges(100, false);
        let ch: Vec<&str> = ch.iter().map(String::as_str).collect();
        let h = answer(&ch, &user, "DESCRIBE", "rtsp://127.0.0.1/stream", "c0ffee").unwrap();
        assert!(h.contains("algorithm=SHA-256"), "{h}");
        assert_eq!(
            a.check("DESCRIBE", Some(&url()), PRESENTATION, Some(&h), 101),
            Verdict::User("admin")
        );
        assert_eq!(
            a.check("PLAY", Some(&url()), PRESENTATION, Some(&h), 101),
            Verdict::Challenge
        );
        // MD5 only, without qop, as RFC 2069 servers ask.
        let md5 = format!("Digest realm=\"camstream\", nonce=\"{}\"", a.nonce(100));
        let h = answer(
            &["Basic realm=\"x\"", &md5],
            &user,
            "PLAY",
            "rtsp://cam/stream",
            "x",
        )
        .unwrap();
        assert!(!h.contains("qop"), "{h}");
        assert_eq!(
            a.check("PLAY", Some(&url()), PRESENTATION, Some(&h), 100),
            Verdict::User("admin")
        );
        assert_eq!(
            answer(&["Basic realm=\"x\""], &user, "PLAY", "u", "c"),
            None
        );
        // A client with the password: the realm from the challenge.
        assert_eq!(digest_realm(&ch).as_deref(), Some("camstream"));
        assert_eq!(
            digest_realm(&["Basic realm=\"x\", Digest realm=\"other\", nonce=\"n\""]).as_deref(),
            Some("other")
        );
        assert_eq!(digest_realm(&["Basic realm=\"x\""]), None);
        // All of them in one value, as when repeated headers are joined.
        let joined = a.challenges(100, false).join(", ");
        assert_eq!(split_challenges(&joined).count(), 2);
        let h = answer(&[joined.as_str()], &user, "PLAY", "rtsp://cam/stream", "x").unwrap();
        assert_eq!(
            a.check("PLAY", Some(&url()), PRESENTATION, Some(&h), 100),
            Verdict::User("admin")
        );
    }
}
