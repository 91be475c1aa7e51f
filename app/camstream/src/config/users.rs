//! Who may stream: the `[users.NAME]` tables of password digests, checked;
//! and `camstream passwd`'s edit of the file, which keeps every other line
//! as written.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use camstream_onvif::access::UserLevel;
use camstream_rtsp::auth::User;

use super::crypt;
use super::file::parse_file;
use super::{Config, Options, UserHashes};

/// The realm users' digests are made with (part of every stored digest, so
/// fixed: changing it would lock every user out).
pub const REALM: &str = "camstream";

/// A user name the config and the Authorization header can carry.
pub fn valid_user_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.contains([':', '"', '\\'])
        && !name.chars().any(char::is_control)
}

/// Whether `md5` and `sha256` are digests as `camstream passwd` writes
/// them: 32 and 64 hex digits.
pub(super) fn digests_well_formed(md5: &str, sha256: &str) -> bool {
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    hex(md5, 32) && hex(sha256, 64)
}

/// A user known by a crypt(3) password hash (`password_hash`), with the
/// digests learnt at an earlier sign-in if they were kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashedUser {
    pub name: String,
    pub hash: String,
    pub learnt: Option<User>,
}

/// The users `[users.NAME]` tables give, checked: those with digests, and
/// those with a password hash.
pub(super) fn from_table(
    table: Option<BTreeMap<String, UserHashes>>,
) -> Result<(Vec<User>, Vec<HashedUser>)> {
    let mut users = Vec::new();
    let mut hashed = Vec::new();
    for (name, h) in table.unwrap_or_default() {
        if !valid_user_name(&name) {
            bail!(
                "users.{name:?}: a user name has 1-64 characters, none of them ':', '\"', '\\' or control"
            );
        }
        if h.onvif_password.as_deref().is_some_and(str::is_empty) {
            bail!(
                "users.{name}: onvif_password is empty (set it with `camstream passwd {name} --onvif`)"
            );
        }
        match (h.md5, h.sha256, h.password_hash) {
            (Some(md5), Some(sha256), None) => {
                if !digests_well_formed(&md5, &sha256) {
                    bail!(
                        "users.{name}: md5 must be 32 and sha256 64 hex digits (as `camstream passwd {name}` prints them)"
                    );
                }
                users.push(User {
                    name,
                    md5: md5.to_ascii_lowercase(),
                    sha256: sha256.to_ascii_lowercase(),
                });
            }
            (None, None, Some(hash)) => {
                if let Err(why) = crypt::check(&hash) {
                    return Err(super::bad(
                        &format!("users.{name}.password_hash"),
                        format!("{hash:?}"),
                        why,
                    ));
                }
                hashed.push(HashedUser {
                    name,
                    hash,
                    learnt: None,
                });
            }
            // UserHashes' deserializer takes no other combination.
            _ => bail!("users.{name}: md5 and sha256, or password_hash alone"),
        }
    }
    Ok((users, hashed))
}

/// A config file's text with `user`'s table set (added, or replacing the one
/// there); comments and every other line stay as written.
/// `level`: the user's level, set; None keeps the one the table has (none:
/// administrator).
pub fn with_user(
    text: &str,
    user: &User,
    onvif_password: Option<&str>,
    level: Option<UserLevel>,
) -> Result<String> {
    // A password kept for ONVIF is the old one's: replaced or dropped; so
    // is a password hash the digests now stand for.
    let mut set = vec![("md5", user.md5.as_str()), ("sha256", user.sha256.as_str())];
    let mut drop = vec!["password_hash"];
    match onvif_password {
        Some(p) => set.push(("onvif_password", p)),
        None => drop.push("onvif_password"),
    }
    with_table(text, &user.name, &set, &drop, level)
}

/// As [`with_user`], for a user known by a crypt(3) password hash
/// (Raspberry Pi Imager's): its digests are learnt at its first sign-in.
pub fn with_hashed_user(
    text: &str,
    name: &str,
    hash: &str,
    level: Option<UserLevel>,
) -> Result<String> {
    with_table(
        text,
        name,
        &[("password_hash", hash)],
        &["md5", "sha256", "onvif_password"],
        level,
    )
}

fn with_table(
    text: &str,
    name: &str,
    set: &[(&str, &str)],
    drop: &[&str],
    level: Option<UserLevel>,
) -> Result<String> {
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    let empty = text.trim().is_empty();
    let users = doc.entry("users").or_insert_with(|| {
        let mut t = toml_edit::Table::new();
        // [users.NAME] headers only, no bare [users].
        t.set_implicit(true);
        toml_edit::Item::Table(t)
    });
    let Some(users) = users.as_table_like_mut() else {
        bail!("users is not a table of [users.NAME] tables");
    };
    if let Some(t) = users.get_mut(name).and_then(|t| t.as_table_like_mut()) {
        // Where it is, with its comments.
        for (key, value) in set {
            set_value(t, key, value);
        }
        for key in drop {
            t.remove(key);
        }
        if let Some(level) = level {
            set_value(t, "user_level", &level.to_string());
        }
    } else {
        let mut t = toml_edit::Table::new();
        for (key, value) in set {
            t[*key] = toml_edit::value(*value);
        }
        if let Some(level) = level {
            t["user_level"] = toml_edit::value(level.to_string());
        }
        // A new table goes last, after the comments that end the file (the
        // commented defaults): a setting uncommented there later must not
        // land inside it.
        let mut end = doc.trailing().as_str().unwrap_or("").trim_end().to_string();
        if !end.is_empty() {
            end.push_str("\n\n");
        } else if !empty {
            end.push('\n');
        }
        t.decor_mut().set_prefix(end);
        doc.set_trailing("");
        let users = doc["users"].as_table_like_mut().expect("checked above");
        users.insert(name, toml_edit::Item::Table(t));
    }
    let mut out = doc.to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    // What is written must load: a daemon that cannot start shows nothing.
    let opts: Options = toml::from_str(&out).map_err(|e| anyhow::anyhow!("{e}"))?;
    Config::from_options(opts)?;
    Ok(out)
}

/// Sets a key of a user's table where it is: the comments before it and
/// after its value stay (inserted anew, they would go).
fn set_value(t: &mut dyn toml_edit::TableLike, key: &str, text: &str) {
    let mut new = toml_edit::value(text);
    match t.get_mut(key) {
        Some(item) => {
            if let (Some(old), Some(v)) = (item.as_value(), new.as_value_mut()) {
                *v.decor_mut() = old.decor().clone();
            }
            *item = new;
        }
        None => {
            t.insert(key, new);
        }
    }
}

/// Sets `user` in the config file at `path` (created if missing): written
/// beside it with the old file's owner and mode, synced, then renamed over
/// it, so a power cut leaves the old file or the new one. A file that holds
/// a password kept for ONVIF is its owner's alone (at most 0600), whatever
/// the old one's mode.
pub fn set_user(
    path: &Path,
    user: &User,
    onvif_password: Option<&str>,
    level: Option<UserLevel>,
) -> Result<()> {
    rewrite(path, |text| with_user(text, user, onvif_password, level))
}

/// As [`set_user`], for a user known by a password hash
/// ([`with_hashed_user`]).
pub fn set_hashed_user(
    path: &Path,
    name: &str,
    hash: &str,
    level: Option<UserLevel>,
) -> Result<()> {
    rewrite(path, |text| with_hashed_user(text, name, hash, level))
}

fn rewrite(path: &Path, edit: impl FnOnce(&str) -> Result<String>) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot read config {}", path.display())),
    };
    // Its mistakes as the daemon would say them (the file's line, the key).
    parse_file(path, &text)?;
    let out = edit(&text).with_context(|| format!("config {}", path.display()))?;
    // This user's or another's (the edit checked that it parses).
    let holds_password = toml::from_str::<Options>(&out)
        .ok()
        .and_then(|o| o.users)
        .is_some_and(|u| u.values().any(|h| h.onvif_password.is_some()));
    // A new file is its owner's alone; an old one's mode is kept.
    let mask = if holds_password { 0o600 } else { 0o7777 };
    crate::replace::replace_file(path, out.as_bytes(), |old| {
        old.map_or(0o600, |m| m.mode() & mask)
    })
    .with_context(|| format!("cannot write config {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::parse;

    #[test]
    fn users_from_the_file() {
        let u = camstream_rtsp::auth::User::from_password("admin", REALM, "pw");
        let text = format!(
            "[users.\"admin\"]\nmd5 = \"{}\"\nsha256 = \"{}\"\n",
            u.md5,
            u.sha256.to_uppercase()
        );
        let c = Config::from_options(parse(&text).unwrap()).unwrap();
        assert_eq!(c.users, vec![u.clone()]);
        assert!(!c.basic_auth);
        let short = format!("[users.admin]\nmd5 = \"{}\"\nsha256 = \"abc\"\n", u.md5);
        let e = Config::from_options(parse(&short).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("sha256 64 hex digits"), "{e}");
        let colon = format!(
            "[users.\"a:b\"]\nmd5 = \"{}\"\nsha256 = \"{}\"\n",
            u.md5, u.sha256
        );
        assert!(Config::from_options(parse(&colon).unwrap()).is_err());
        let e = Config::from_options(parse("basic_auth = true").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs users"), "{e}");
    }

    #[test]
    fn passwd_sets_a_user_and_keeps_the_rest() {
        let alice = User::from_password("alice", REALM, "one");
        let text = "# a comment\nfps = 15 # why 15\n\n[controls]\nbrightness = 100\n";
        let out = with_user(text, &alice, None, None).unwrap();
        assert!(out.starts_with(text), "{out}");
        let c = Config::from_options(parse(&out).unwrap()).unwrap();
        assert_eq!((c.source.fps, c.users.clone()), (15, vec![alice.clone()]));
        assert_eq!(c.source.controls.len(), 1);
        // Again with another password and a name TOML must quote: one table
        // per user, the new digests.
        let alice2 = User::from_password("alice", REALM, "two");
        let bob = User::from_password("bob smith", REALM, "three");
        let out = with_user(
            &with_user(&out, &alice2, None, None).unwrap(),
            &bob,
            None,
            None,
        )
        .unwrap();
        assert_eq!(out.matches("[users.").count(), 2, "{out}");
        assert!(out.contains("[users.\"bob smith\"]"), "{out}");
        let c = Config::from_options(parse(&out).unwrap()).unwrap();
        assert_eq!(c.users, vec![alice2.clone(), bob.clone()]);
        assert!(!out.contains("one") && !out.contains("two"));
        // After the comments that end a file, where uncommenting a default
        // must not put it inside the user's table.
        let out = with_user("fps = 15\n# defaults\n#fps = 30\n", &alice, None, None).unwrap();
        assert!(
            out.starts_with("fps = 15\n# defaults\n#fps = 30\n\n[users.alice]\n"),
            "{out}"
        );
        // Users written as inline tables: updated and added in that form.
        let inline = format!(
            "users = {{ alice = {{ md5 = \"{}\", sha256 = \"{}\" }} }}\n",
            alice.md5, alice.sha256
        );
        let out = with_user(
            &with_user(&inline, &bob, None, None).unwrap(),
            &alice2,
            None,
            None,
        )
        .unwrap();
        let c = Config::from_options(parse(&out).unwrap()).unwrap();
        assert_eq!(c.users, vec![alice2.clone(), bob.clone()], "{out}");
        // From nothing; and a file that is not a config is left alone.
        assert!(
            with_user("", &alice, None, None)
                .unwrap()
                .starts_with("[users.alice]\n")
        );
        assert!(with_user("users = 3\n", &alice, None, None).is_err());
        assert!(with_user("fps = 1000\n", &alice, None, None).is_err());
    }

    #[test]
    fn passwd_keeps_the_password_for_onvif_only_when_asked() {
        let alice = User::from_password("alice", REALM, "one");
        let out = with_user("", &alice, Some("one"), None).unwrap();
        let c = Config::from_options(parse(&out).unwrap()).unwrap();
        assert!(c.onvif);
        assert_eq!(
            c.onvif_passwords,
            vec![("alice".to_owned(), "one".to_owned())]
        );
        assert_eq!(c.users, vec![alice]);
        // A new password without --onvif: the old one is not kept.
        let alice2 = User::from_password("alice", REALM, "two");
        let out = with_user(&out, &alice2, None, None).unwrap();
        assert!(!out.contains("onvif_password"), "{out}");
        let c = Config::from_options(parse(&out).unwrap()).unwrap();
        assert!(c.onvif_passwords.is_empty());
        let out = with_user(&out, &alice2, Some("two"), None).unwrap();
        let c = Config::from_options(parse(&format!("onvif = false\n{out}")).unwrap()).unwrap();
        assert_eq!((c.onvif, c.onvif_passwords.len()), (false, 1));
        let empty = out.replace("onvif_password = \"two\"", "onvif_password = \"\"");
        let e = Config::from_options(parse(&empty).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("onvif_password is empty"), "{e}");
    }

    #[test]
    fn user_levels() {
        let alice = User::from_password("alice", REALM, "one");
        let bob = User::from_password("bob", REALM, "two");
        // None given: administrator, as every user was before levels.
        let out = with_user("", &alice, None, None).unwrap();
        let out = with_user(&out, &bob, None, Some(UserLevel::User)).unwrap();
        assert_eq!(out.matches("user_level").count(), 1, "{out}");
        let c = Config::from_options(parse(&out).unwrap()).unwrap();
        assert_eq!(c.user_level("alice"), Some(UserLevel::Administrator));
        assert_eq!(c.user_level("bob"), Some(UserLevel::User));
        assert_eq!(c.user_level("carol"), None);
        // A new password keeps the level; a new level replaces it.
        let out = with_user(&out, &bob, None, None).unwrap();
        assert!(out.contains("user_level = \"user\""), "{out}");
        let out = with_user(&out, &bob, None, Some(UserLevel::Operator)).unwrap();
        let c = Config::from_options(parse(&out).unwrap()).unwrap();
        assert_eq!(c.user_level("bob"), Some(UserLevel::Operator));
        assert_eq!(out.matches("user_level").count(), 1, "{out}");
        // The comments in the user's table stay where they were.
        let commented = out
            .replace("[users.bob]\n", "[users.bob]\n# the door's screen\n")
            .replace("\"operator\"", "\"operator\" # for now");
        let again = with_user(&commented, &bob, Some("pw"), Some(UserLevel::User)).unwrap();
        assert!(
            again.contains("[users.bob]\n# the door's screen\nmd5 = "),
            "{again}"
        );
        assert!(
            again.contains("user_level = \"user\" # for now\n"),
            "{again}"
        );
        let e = parse(&out.replace("\"operator\"", "\"Boss\""))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "unknown variant `Boss`, expected one of `administrator`, `operator`, `user`"
            ),
            "{e}"
        );
    }
}
