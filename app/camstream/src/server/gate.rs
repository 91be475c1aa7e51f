//! Who may watch, one rule for RTSP, HTTP and ONVIF: with users, each
//! request names one by Digest (SHA-256 or MD5; Basic only with
//! basic_auth); without, only this machine's clients are served, unless
//! `anonymous` (a fresh camera is not an open one).

use std::net::SocketAddr;

use camstream_rtsp::auth::{Auth, User, Verdict};
use rtsp_types::Url;

use crate::clock::Mono;
use crate::config::{self, Config};

pub struct Gate {
    /// Who may stream, if the config names users.
    auth: Option<Auth>,
    anonymous: bool,
}

/// Seconds of the monotonic clock: what nonces carry.
fn now() -> u64 {
    Mono::now().0 / 1_000_000_000
}

impl Gate {
    /// `key`: random bytes the nonces are signed with.
    pub fn new(cfg: &Config, key: [u8; 32]) -> Gate {
        let hashed = &cfg.hashed_users;
        Gate {
            auth: (!cfg.users.is_empty() || !hashed.is_empty()).then(|| {
                Auth::new(
                    config::REALM,
                    cfg.users.clone(),
                    cfg.basic_auth,
                    key,
                    u64::from(cfg.nonce_lifetime),
                )
                .with_hashed(
                    hashed.iter().filter_map(|h| h.learnt.clone()).collect(),
                    hashed
                        .iter()
                        .filter(|h| h.learnt.is_none())
                        .map(|h| h.name.clone())
                        .collect(),
                )
            }),
            anonymous: cfg.anonymous,
        }
    }

    /// Whether a client at `peer` may be served at all: with users, anyone
    /// who names one; without, this machine's clients, or anyone if
    /// anonymous.
    pub fn open_to(&self, peer: SocketAddr) -> bool {
        self.auth.is_some() || self.anonymous || peer.ip().to_canonical().is_loopback()
    }

    /// The verdict on a request's Authorization `header`, None when no
    /// users are set. `presentation`: the stream the request belongs to,
    /// which Digest's uri may name instead of the request's own.
    pub fn check<'a>(
        &'a self,
        method: &str,
        uri: Option<&Url>,
        presentation: Option<&str>,
        header: Option<&str>,
    ) -> Option<Verdict<'a>> {
        let auth = self.auth.as_ref()?;
        Some(auth.check(method, uri, presentation, header, now()))
    }

    /// A user known by a password hash whose password matched it.
    pub fn learn(&mut self, user: User) {
        if let Some(a) = &mut self.auth {
            a.learn(user);
        }
    }

    /// The WWW-Authenticate values of a 401 for a person's client (the
    /// page): Basic alone while a user is known by a password hash only.
    pub fn sign_in_challenges(&self, stale: bool) -> Vec<String> {
        self.auth
            .as_ref()
            .map_or_else(Vec::new, |a| a.sign_in_challenges(now(), stale))
    }

    /// The WWW-Authenticate values of a 401 (none without users).
    pub fn challenges(&self, stale: bool) -> Vec<String> {
        self.auth
            .as_ref()
            .map_or_else(Vec::new, |a| a.challenges(now(), stale))
    }
}
