//! WS-Security UsernameToken (OASIS Username Token Profile 1.0), as ONVIF
//! clients send it: PasswordDigest = Base64(SHA-1(nonce + created +
//! password)), with the nonce and the time it was made. The digest needs
//! the password itself, so only users given one for ONVIF can use it.
//! A token is taken once: the nonces of accepted tokens are remembered
//! for as long as their Created stays acceptable, within a fixed count per
//! user; past it, that user's new tokens are refused, not old ones
//! forgotten.

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha1::{Digest, Sha1};
use subtle::ConstantTimeEq;

use crate::ns;
use crate::xml::Doc;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsernameToken {
    pub username: String,
    pub password: Password,
    /// The nonce's bytes (sent base64-encoded).
    pub nonce: Vec<u8>,
    /// Created, as sent (the digest covers these exact characters).
    pub created: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Password {
    /// SHA-1 digest, decoded from base64 (20 bytes when well-formed).
    Digest(Vec<u8>),
    /// The password in the clear (PasswordText).
    Text(String),
}

/// Why a token is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Malformed(&'static str),
    /// Created too far from the camera's clock.
    Stale,
    Replayed,
    /// The user's memory of nonces is full of ones still in the window.
    TooMany,
    WrongPassword,
    /// PasswordText where the camera takes only digests.
    Cleartext,
}

impl UsernameToken {
    /// The UsernameToken in a SOAP Header (`header`: its element index), if
    /// there is a Security element holding one.
    pub fn from_header(doc: &Doc, header: usize) -> Result<Option<UsernameToken>, Refusal> {
        let Some(sec) = doc.child(header, ns::WSSE, "Security") else {
            return Ok(None);
        };
        let Some(tok) = doc.child(sec, ns::WSSE, "UsernameToken") else {
            return Ok(None);
        };
        let text = |ns: &str, name: &str| doc.child(tok, ns, name).and_then(|i| doc.get(i));
        let username = text(ns::WSSE, "Username")
            .ok_or(Refusal::Malformed("UsernameToken without Username"))?
            .text
            .clone();
        let pw = text(ns::WSSE, "Password").ok_or(Refusal::Malformed("no Password"))?;
        let nonce = match text(ns::WSSE, "Nonce") {
            Some(n) => STANDARD
                .decode(n.text.as_bytes())
                .map_err(|_| Refusal::Malformed("Nonce is not base64"))?,
            None => Vec::new(),
        };
        let created = text(ns::WSU, "Created")
            .map(|c| c.text.clone())
            .unwrap_or_default();
        let password = match pw.attr("Type") {
            None | Some(ns::PASSWORD_TEXT) => Password::Text(pw.text.clone()),
            Some(ns::PASSWORD_DIGEST) => {
                if nonce.is_empty() || created.is_empty() {
                    return Err(Refusal::Malformed("a digest needs Nonce and Created"));
                }
                Password::Digest(
                    STANDARD
                        .decode(pw.text.as_bytes())
                        .map_err(|_| Refusal::Malformed("Password digest is not base64"))?,
                )
            }
            Some(_) => return Err(Refusal::Malformed("unknown Password Type")),
        };
        Ok(Some(UsernameToken {
            username,
            password,
            nonce,
            created,
        }))
    }

    /// Whether the token was made with `password`; constant time for the
    /// digest's comparison.
    pub fn matches(&self, password: &str) -> bool {
        match &self.password {
            Password::Digest(d) => {
                let mut h = Sha1::new();
                h.update(&self.nonce);
                h.update(self.created.as_bytes());
                h.update(password.as_bytes());
                bool::from(h.finalize().as_slice().ct_eq(d))
            }
            Password::Text(t) => bool::from(t.as_bytes().ct_eq(password.as_bytes())),
        }
    }
}

/// Seconds since 1970 of an xs:dateTime as ONVIF clients send it:
/// `YYYY-MM-DDTHH:MM:SS`, optional fraction, then `Z` or `+HH:MM`/`-HH:MM`
/// (none: taken as UTC).
pub fn parse_created(s: &str) -> Option<i64> {
    let &[
        _,
        _,
        _,
        _,
        b'-',
        _,
        _,
        b'-',
        _,
        _,
        b'T' | b't',
        _,
        _,
        b':',
        _,
        _,
        b':',
        _,
        _,
        ..,
    ] = s.as_bytes()
    else {
        return None;
    };
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let d = s.get(r)?;
        if !d.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        d.parse().ok()
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = s.get(19..)?;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        rest = frac.get(n..)?;
    }
    let offset = match rest {
        "" | "Z" | "z" => 0,
        _ if rest.len() == 6 && rest.as_bytes().get(3) == Some(&b':') => {
            let sign = match rest.as_bytes().first() {
                Some(b'+') => 1,
                Some(b'-') => -1,
                _ => return None,
            };
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            if oh > 23 || om > 59 {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    Some(days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Which tokens are taken, and the nonces already used.
///
/// Created must lie within `skew` of the camera's clock, whether that clock
/// is synchronised or not: clients take the camera's time from
/// GetSystemDateAndTime (which needs no user) and shift their Created by
/// the difference, as ONVIF's Core specification asks. No accepted token
/// moves the window, so a client whose clock is far off cannot lock others
/// out. A nonce is kept for as long as its Created stays in the window, so
/// a replay is refused for as long as the token could be taken at all.
pub struct Gate {
    /// How far Created may be from the camera's clock, either way.
    pub skew: i64,
    /// Nonces kept per user at most.
    per_user: usize,
    /// Per user: a fixed-size hash of each accepted token's nonce, with the
    /// token's Created.
    seen: HashMap<String, HashMap<NonceHash, i64>>,
}

/// SHA-1 of a nonce, cut to 16 bytes: what is kept of it, whatever the
/// nonce's length (clients send 16 to 24 bytes; nothing bounds it but the
/// request's size). Two nonces colliding needs about 2^64 of them.
type NonceHash = [u8; 16];

fn nonce_hash(nonce: &[u8]) -> NonceHash {
    let mut h = [0u8; 16];
    for (h, d) in h.iter_mut().zip(Sha1::digest(nonce)) {
        *h = d;
    }
    h
}

impl Gate {
    pub fn new(skew: i64, per_user: usize) -> Gate {
        Gate {
            skew,
            per_user,
            seen: HashMap::new(),
        }
    }

    /// Checks `token` against `password` at `now` (seconds since 1970 on
    /// the camera's clock); takes its nonce when it is good.
    pub fn check(
        &mut self,
        token: &UsernameToken,
        password: &str,
        now: i64,
    ) -> Result<(), Refusal> {
        let Password::Digest(_) = token.password else {
            return Err(Refusal::Cleartext);
        };
        let created = parse_created(&token.created).ok_or(Refusal::Malformed("bad Created"))?;
        if created.abs_diff(now) > self.skew.unsigned_abs() {
            return Err(Refusal::Stale);
        }
        if !token.matches(password) {
            return Err(Refusal::WrongPassword);
        }
        // Only a user who holds the password gets this far: the nonces kept
        // are bounded per user, and a user's full memory slows that user
        // alone.
        let skew = self.skew;
        let seen = self.seen.entry(token.username.clone()).or_default();
        let key = nonce_hash(&token.nonce);
        if seen.contains_key(&key) {
            return Err(Refusal::Replayed);
        }
        if seen.len() >= self.per_user {
            // Forget what has left the window: an older Created can no
            // longer be taken. One ahead of it is there because the clock
            // was set back: forgotten too, rather than lock the user out
            // until the clock has caught up.
            seen.retain(|_, c| c.abs_diff(now) <= skew.unsigned_abs());
            if seen.len() >= self.per_user {
                return Err(Refusal::TooMany);
            }
        }
        seen.insert(key, created);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token as zeep (onvif-zeep-async's SOAP library) makes it.
    fn token(password: &str, nonce: &[u8], created: &str) -> UsernameToken {
        let mut h = Sha1::new();
        h.update(nonce);
        h.update(created.as_bytes());
        h.update(password.as_bytes());
        UsernameToken {
            username: "admin".into(),
            password: Password::Digest(h.finalize().to_vec()),
            nonce: nonce.to_vec(),
            created: created.into(),
        }
    }

    #[test]
    fn created_times() {
        assert_eq!(parse_created("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_created("2026-11-25T07:30:00Z"), Some(1_795_591_800));
        assert_eq!(
            parse_created("2026-11-25T08:30:00.123+01:00"),
            Some(1_795_591_800)
        );
        assert_eq!(parse_created("2026-11-25T07:30:00"), Some(1_795_591_800));
        for bad in [
            "",
            "2026-11-25 07:30:00Z",
            "2026-13-25T07:30:00Z",
            "2026-11-25T07:30:00.Z",
            "2026-11-25T07:30:00+0100",
            "２０２６-11-25T07:30:00Z",
        ] {
            assert_eq!(parse_created(bad), None, "{bad}");
        }
    }

    #[test]
    fn digest_replay_and_clock() {
        let now = parse_created("2026-11-25T07:30:00Z").unwrap();
        let mut gate = Gate::new(300, 4);
        let t = token("secret", b"n1", "2026-11-25T07:29:00Z");
        assert_eq!(gate.check(&t, "wrong", now), Err(Refusal::WrongPassword));
        assert_eq!(gate.check(&t, "secret", now), Ok(()));
        assert_eq!(gate.check(&t, "secret", now), Err(Refusal::Replayed));
        // Replayed for as long as its Created is in the window.
        assert_eq!(gate.check(&t, "secret", now + 240), Err(Refusal::Replayed));
        assert_eq!(gate.check(&t, "secret", now + 241), Err(Refusal::Stale));
        let old = token("secret", b"n2", "2026-11-25T07:00:00Z");
        assert_eq!(gate.check(&old, "secret", now), Err(Refusal::Stale));
        let text = UsernameToken {
            password: Password::Text("secret".into()),
            ..t.clone()
        };
        assert!(text.matches("secret"));
        assert_eq!(gate.check(&text, "secret", now), Err(Refusal::Cleartext));
    }

    #[test]
    fn a_token_far_ahead_moves_nothing() {
        // A camera without a synchronised clock (a board without NTP boots
        // in 1970): the window is the same. A client an hour ahead, or in
        // year 9999, with the right password, is refused, and a client that
        // took the camera's time still gets in.
        let now = 10;
        let mut gate = Gate::new(300, 4);
        for (nonce, created) in [
            (b"n1", "1970-01-01T01:00:10Z"),
            (b"n2", "9999-12-31T23:59:59Z"),
        ] {
            let t = token("secret", nonce, created);
            assert_eq!(gate.check(&t, "secret", now), Err(Refusal::Stale));
        }
        let t = token("secret", b"n3", "1970-01-01T00:00:12Z");
        assert_eq!(gate.check(&t, "secret", now), Ok(()));
        let t = token("secret", b"n4", "1970-01-01T00:00:02Z");
        assert_eq!(gate.check(&t, "secret", now), Ok(()));
    }

    #[test]
    fn a_full_memory_refuses_its_user_rather_than_forget() {
        let now = 1_000_000;
        let created = "1970-01-12T13:46:40Z";
        let mut gate = Gate::new(300, 4);
        let first = token("p", b"first", created);
        assert_eq!(gate.check(&first, "p", now), Ok(()));
        for i in 0..3u8 {
            assert_eq!(gate.check(&token("p", &[i], created), "p", now), Ok(()));
        }
        for i in 3..100u8 {
            let t = token("p", &[i], created);
            assert_eq!(gate.check(&t, "p", now), Err(Refusal::TooMany));
        }
        assert_eq!(gate.check(&first, "p", now), Err(Refusal::Replayed));
        // Another user is not slowed.
        let other = UsernameToken {
            username: "viewer".into(),
            ..token("v", b"first", created)
        };
        assert_eq!(gate.check(&other, "v", now), Ok(()));
        // Once the first four leave the window, the user gets in again.
        let later = token("p", b"later", "1970-01-12T13:52:00Z");
        assert_eq!(gate.check(&later, "p", now + 320), Ok(()));
        assert_eq!(gate.seen["admin"].len(), 1);
    }
}
