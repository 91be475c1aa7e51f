//! The digests of users set from a password hash (Raspberry Pi Imager's),
//! learnt at their first sign-in and kept beside the config file
//! (camstream.toml: camstream.digests.toml), so that Digest clients (VLC,
//! NVRs) sign in with the same password after a restart too.
//!
//! The daemon writes it as the unprivileged user it runs as, so a line is
//! taken only for a user the config itself sets from the same hash: the
//! daemon can never add a user, and a new hash (a new password from
//! Imager) makes the old digests void. A file cut short by a power cut is
//! ignored, with a line in the log: the user signs in once more.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use camstream_rtsp::auth::User;
use serde::Deserialize;

use super::users::{HashedUser, digests_well_formed};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    password_hash: String,
    md5: String,
    sha256: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// None yet: the empty file the image's start script makes.
    #[serde(default)]
    users: BTreeMap<String, Entry>,
}

/// Where the digests of the users of config file `config` are kept.
pub fn path_for(config: &Path) -> PathBuf {
    config.with_extension("digests.toml")
}

/// Gives each of `hashed` the digests `text` keeps for it, if they were
/// learnt from the hash the config has now.
pub fn apply(text: &str, hashed: &mut [HashedUser]) -> Result<(), String> {
    let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
    for h in hashed.iter_mut() {
        let Some(e) = file.users.get(&h.name) else {
            continue;
        };
        if e.password_hash == h.hash && digests_well_formed(&e.md5, &e.sha256) {
            h.learnt = Some(User {
                name: h.name.clone(),
                md5: e.md5.to_ascii_lowercase(),
                sha256: e.sha256.to_ascii_lowercase(),
            });
        }
    }
    Ok(())
}

/// Reads `path` into `hashed` (see [`apply`]); a file missing is no
/// digests learnt yet, one that cannot be read is logged and ignored.
pub fn read(path: &Path, hashed: &mut [HashedUser]) {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            if let Err(e) = apply(&text, hashed) {
                log::warn!(
                    "{}: {e}; ignored (users set from a password hash sign in again)",
                    path.display()
                );
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => log::warn!("{}: {e}; ignored", path.display()),
    }
}

/// The file's text for the users of `hashed` that have digests.
pub fn text(hashed: &[HashedUser]) -> String {
    let mut doc = toml_edit::DocumentMut::new();
    doc.decor_mut().set_prefix(
        "# Written by camstream: the digests of users set from a password hash,\n\
         # learnt at their first sign-in. Taken only while camstream.toml sets\n\
         # the user from the same hash.\n",
    );
    let mut users = toml_edit::Table::new();
    users.set_implicit(true);
    for h in hashed {
        if let Some(u) = &h.learnt {
            let mut t = toml_edit::Table::new();
            t["password_hash"] = toml_edit::value(&h.hash);
            t["md5"] = toml_edit::value(&u.md5);
            t["sha256"] = toml_edit::value(&u.sha256);
            users.insert(&h.name, toml_edit::Item::Table(t));
        }
    }
    doc["users"] = toml_edit::Item::Table(users);
    doc.to_string()
}

/// Writes the digests `hashed` has to `path` (see [`write_kept`]).
pub fn write(path: &Path, hashed: &[HashedUser]) -> std::io::Result<()> {
    write_kept(path, &text(hashed))
}

/// Writes a file the daemon keeps beside the config (the digests, the
/// picture settings): in place, as the daemon may own the file but not its
/// directory; synced; created its owner's alone.
pub fn write_kept(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashed(hash: &str) -> Vec<HashedUser> {
        vec![HashedUser {
            name: "alice".into(),
            hash: hash.into(),
            learnt: None,
        }]
    }

    #[test]
    fn digests_are_kept_for_the_same_hash_only() {
        let mut h = hashed("$y$jB5$a$b");
        let alice = User::from_password("alice", super::super::REALM, "pw");
        h[0].learnt = Some(alice.clone());
        let text = text(&h);
        let mut again = hashed("$y$jB5$a$b");
        apply(&text, &mut again).unwrap();
        assert_eq!(again[0].learnt, Some(alice));
        // A new hash in the config (a new password from Imager): void.
        let mut other = hashed("$y$jB5$c$d");
        apply(&text, &mut other).unwrap();
        assert_eq!(other[0].learnt, None);
        // A user the config does not set from a hash is not added.
        let mut none: Vec<HashedUser> = Vec::new();
        apply(&text, &mut none).unwrap();
        assert!(none.is_empty());
        // Cut short by a power cut: an error, nothing learnt.
        let mut cut = hashed("$y$jB5$a$b");
        assert!(apply(&text[..text.len() - 20], &mut cut).is_err());
        assert_eq!(cut[0].learnt, None);
    }
}
