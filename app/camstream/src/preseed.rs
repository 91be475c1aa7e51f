//! What Raspberry Pi Imager's OS customisation leaves on the boot partition
//! (`rpi-preseed.toml`, its `init_format` "rpi-preseed", Imager 2.0.11 and
//! later) made the camera's own settings: the host name, SSH keys, Wi-Fi,
//! and the user, who becomes a camstream user (level "user") known by
//! Imager's password hash until its first sign-in (docs/SECURITY.md).
//! Data, not a script: read with the TOML parser the config uses, checked
//! whole before anything is written (`camstream preseed`, run by the
//! image's S03preseed at the first boot). The field names follow rpi-imager's
//! `CustomisationGenerator::generateRpiPreseedToml`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

type Other = BTreeMap<String, toml::Value>;

#[derive(Deserialize, Default)]
struct File {
    system: Option<System>,
    user: Option<User>,
    ssh: Option<Ssh>,
    wlan: Option<Wlan>,
    locale: Option<Locale>,
    #[serde(flatten)]
    other: Other,
}

#[derive(Deserialize)]
struct System {
    hostname: Option<String>,
    #[serde(flatten)]
    other: Other,
}

#[derive(Deserialize)]
struct User {
    name: Option<String>,
    password: Option<String>,
    password_encrypted: Option<bool>,
    #[serde(flatten)]
    other: Other,
}

#[derive(Deserialize)]
struct Ssh {
    enabled: Option<bool>,
    password_authentication: Option<bool>,
    #[serde(default)]
    authorized_keys: Vec<String>,
    #[serde(flatten)]
    other: Other,
}

#[derive(Deserialize)]
struct Wlan {
    ssid: Option<String>,
    ssid_hex: Option<String>,
    password: Option<String>,
    password_encrypted: Option<bool>,
    hidden: Option<bool>,
    country: Option<String>,
    #[serde(flatten)]
    other: Other,
}

#[derive(Deserialize)]
struct Locale {
    keymap: Option<String>,
    timezone: Option<String>,
    #[serde(flatten)]
    other: Other,
}

/// What the file asks for, checked: what the camera takes, and a line for
/// each thing it does not.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub hostname: Option<String>,
    pub ssh_keys: Vec<String>,
    /// The network as wpa_supplicant takes it, and the country.
    pub wifi: Option<(String, Option<String>)>,
    /// The camstream user and its password, as Imager gave it.
    pub user: Option<(String, Password)>,
    pub not_applied: Vec<String>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Password {
    /// crypt(3)'s (yescrypt): the digests are learnt at the first sign-in.
    Hash(String),
    /// In the clear (password_encrypted = false): digests made at once.
    Clear(String),
}

/// Checks the whole file; an error names the field and what it may be.
pub fn plan(text: &str) -> Result<Plan> {
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map_or(1, |s| text[..s.start].matches('\n').count() + 1);
        anyhow::anyhow!("line {line}: {}", e.message())
    })?;
    let mut p = Plan::default();
    let mut not_applied = Vec::new();
    ignored(&mut not_applied, "", &file.other);
    if let Some(s) = file.system {
        ignored(&mut not_applied, "system", &s.other);
        if let Some(h) = s.hostname {
            if !valid_hostname(&h) {
                bail!(
                    "system.hostname = {h:?}: must be 1-63 letters, digits and '-', not starting or ending with '-'"
                );
            }
            p.hostname = Some(h);
        }
    }
    if let Some(u) = file.user {
        for key in u.other.keys() {
            // Unix groups and sudo: the camera has one login, root's.
            if !matches!(key.as_str(), "groups" | "passwordless_sudo") {
                not_applied.push(format!("user.{key}: not a setting this camera has"));
            }
        }
        match (u.name, u.password) {
            (Some(name), _) if !crate::config::valid_user_name(&name) => bail!(
                "user.name = {name:?}: a user name has 1-64 characters, none of them ':', '\"', '\\' or control"
            ),
            (Some(name), Some(password)) => {
                let password = if u.password_encrypted.unwrap_or(false) {
                    if let Err(why) = crate::config::crypt::check(&password) {
                        bail!("user.password: {why}");
                    }
                    Password::Hash(password)
                } else if password.is_empty() {
                    bail!("user.password: empty");
                } else {
                    Password::Clear(password)
                };
                p.user = Some((name, password));
            }
            (Some(name), None) => not_applied.push(format!(
                "user {name:?} without a password: not a camstream user (set one with camstream-password.txt, README)"
            )),
            (None, Some(_)) => bail!("user.password without user.name"),
            (None, None) => {}
        }
    }
    if let Some(s) = file.ssh {
        ignored(&mut not_applied, "ssh", &s.other);
        for k in &s.authorized_keys {
            let k = k.trim();
            if !valid_key(k) {
                bail!(
                    "ssh.authorized_keys: {:?} is not an OpenSSH public key line",
                    shorten(k)
                );
            }
            p.ssh_keys.push(k.to_string());
        }
        if s.enabled == Some(false) {
            p.ssh_keys.clear();
            not_applied.push("ssh.enabled = false: the keys are not added".into());
        }
        if s.password_authentication == Some(true) {
            not_applied.push("ssh.password_authentication = true: SSH takes keys only".into());
        }
        if s.enabled == Some(true) && p.ssh_keys.is_empty() {
            not_applied.push(
                "ssh.enabled = true without a key: SSH stays off (it takes keys only)".into(),
            );
        }
    }
    if let Some(w) = file.wlan {
        ignored(&mut not_applied, "wlan", &w.other);
        p.wifi = Some(wifi(&w)?);
    }
    if let Some(l) = file.locale {
        ignored(&mut not_applied, "locale", &l.other);
        if let Some(k) = l.keymap {
            not_applied.push(format!("locale.keymap = {k:?}: the camera has no keyboard"));
        }
        if let Some(tz) = l.timezone {
            not_applied.push(format!(
                "locale.timezone = {tz:?}: the camera keeps UTC (its clock, logs and test pattern)"
            ));
        }
    }
    p.not_applied = not_applied;
    Ok(p)
}

/// A line for each key of a section the camera has no use for.
fn ignored(notes: &mut Vec<String>, section: &str, other: &Other) {
    for key in other.keys() {
        let name = match section {
            "" => key.clone(),
            _ => format!("{section}.{key}"),
        };
        if name != "config_version" {
            notes.push(format!("{name}: not a setting this camera has"));
        }
    }
}

/// A network block for wpa_supplicant: the SSID always as hex (any octets
/// pass), the PSK as Imager derived it (64 hex digits) or the passphrase.
fn wifi(w: &Wlan) -> Result<(String, Option<String>)> {
    let ssid = match (&w.ssid, &w.ssid_hex) {
        (Some(s), None) if !s.is_empty() && s.len() <= 32 => hex(s.as_bytes()),
        (None, Some(h)) if is_hex(h) && h.len() % 2 == 0 && (2..=64).contains(&h.len()) => {
            h.to_ascii_lowercase()
        }
        (Some(_), Some(_)) => bail!("wlan: ssid and ssid_hex both given: one network has one name"),
        _ => bail!("wlan.ssid: must be 1-32 bytes (or ssid_hex, their hex)"),
    };
    let mut block = format!("network={{\n\tssid={ssid}\n");
    if w.hidden == Some(true) {
        block.push_str("\tscan_ssid=1\n");
    }
    match (&w.password, w.password_encrypted.unwrap_or(false)) {
        (None, _) => block.push_str("\tkey_mgmt=NONE\n"),
        (Some(psk), true) => {
            if psk.len() != 64 || !is_hex(psk) {
                bail!(
                    "wlan.password: with password_encrypted = true it must be the 64 hex digits of the PSK"
                );
            }
            let _ = writeln!(
                block,
                "\tkey_mgmt=WPA-PSK\n\tpsk={}",
                psk.to_ascii_lowercase()
            );
        }
        (Some(pass), false) => {
            if !(8..=63).contains(&pass.len()) || !pass.bytes().all(|b| (0x20..0x7f).contains(&b)) {
                bail!("wlan.password: a passphrase is 8-63 printable ASCII characters");
            }
            let _ = writeln!(block, "\tkey_mgmt=WPA-PSK\n\tpsk=\"{pass}\"");
        }
    }
    block.push_str("}\n");
    let country = match &w.country {
        Some(c) if c.len() == 2 && c.bytes().all(|b| b.is_ascii_alphabetic()) => {
            Some(c.to_ascii_uppercase())
        }
        Some(c) => {
            bail!("wlan.country = {c:?}: must be a two-letter country code (ISO 3166), e.g. \"GB\"")
        }
        None => None,
    };
    Ok((block, country))
}

fn valid_hostname(h: &str) -> bool {
    (1..=63).contains(&h.len())
        && h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !h.starts_with('-')
        && !h.ends_with('-')
}

/// `TYPE BASE64 [COMMENT]` on one line, TYPE one OpenSSH names.
fn valid_key(k: &str) -> bool {
    let mut parts = k.split_ascii_whitespace();
    let kind = parts.next().unwrap_or("");
    let body = parts.next().unwrap_or("");
    !k.contains(['\n', '\r'])
        && (kind.starts_with("ssh-") || kind.starts_with("ecdsa-sha2-") || kind.starts_with("sk-"))
        && body.len() >= 16
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
}

fn shorten(s: &str) -> String {
    s.chars().take(40).collect()
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Where the plan goes: the camera's settings on the data partition.
pub struct Targets {
    /// The camera's network settings (`hostname = ...`), and the image's
    /// copy it is made from at first boot.
    pub network_conf: PathBuf,
    pub network_default: PathBuf,
    pub authorized_keys: PathBuf,
    pub wpa_supplicant: PathBuf,
    /// camstream's config, and the image's copy it is made from.
    pub config: PathBuf,
    pub config_default: PathBuf,
}

impl Targets {
    pub fn under(data_etc: &Path) -> Targets {
        Targets {
            network_conf: data_etc.join("network.conf"),
            network_default: PathBuf::from("/etc/network.conf"),
            authorized_keys: data_etc.join("ssh/authorized_keys"),
            wpa_supplicant: data_etc.join("wpa_supplicant.conf"),
            config: data_etc.join("camstream.toml"),
            config_default: PathBuf::from(crate::config::DEFAULT_CONFIG),
        }
    }
}

/// Writes the plan's settings, each file whole or not at all; returns a
/// line for each thing done.
pub fn apply(p: &Plan, t: &Targets) -> Result<Vec<String>> {
    let mut done = Vec::new();
    if let Some(h) = &p.hostname {
        let conf = std::fs::read_to_string(&t.network_conf)
            .or_else(|_| std::fs::read_to_string(&t.network_default))
            .unwrap_or_default();
        write_atomic(
            &t.network_conf,
            set_key(&conf, "hostname", h).as_bytes(),
            0o644,
        )?;
        done.push(format!("hostname {h} (in {})", t.network_conf.display()));
    }
    if !p.ssh_keys.is_empty() {
        let old = std::fs::read_to_string(&t.authorized_keys).unwrap_or_default();
        let mut keys = old.clone();
        if !keys.is_empty() && !keys.ends_with('\n') {
            keys.push('\n');
        }
        let mut added = 0;
        for k in &p.ssh_keys {
            if !old.lines().any(|l| l.trim() == k) {
                keys.push_str(k);
                keys.push('\n');
                added += 1;
            }
        }
        if let Some(dir) = t.authorized_keys.parent() {
            use std::os::unix::fs::PermissionsExt;
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .with_context(|| format!("{}: chmod", dir.display()))?;
        }
        write_atomic(&t.authorized_keys, keys.as_bytes(), 0o600)?;
        done.push(format!(
            "{added} SSH key(s) added to {} (root's)",
            t.authorized_keys.display()
        ));
    }
    if let Some((block, country)) = &p.wifi {
        let mut conf = std::fs::read_to_string(&t.wpa_supplicant).unwrap_or_default();
        if conf.is_empty() {
            conf.push_str("# Wi-Fi, from Raspberry Pi Imager's settings (rpi-preseed.toml)\n");
        }
        if let Some(c) = country {
            conf = set_key(&conf, "country", c);
        }
        if !conf.ends_with('\n') {
            conf.push('\n');
        }
        // Once: the same file applied again adds nothing.
        if !conf.contains(block.as_str()) {
            conf.push_str(block);
        }
        write_atomic(&t.wpa_supplicant, conf.as_bytes(), 0o600)?;
        done.push(format!(
            "Wi-Fi network added to {}",
            t.wpa_supplicant.display()
        ));
    }
    if let Some((name, password)) = &p.user {
        // The image's commented config first, as S50camstream seeds it.
        if !t.config.exists() {
            let seed = std::fs::read_to_string(&t.config_default).unwrap_or_default();
            write_atomic(&t.config, seed.as_bytes(), 0o640)?;
        }
        let level = Some(camstream_onvif::access::UserLevel::User);
        match password {
            Password::Hash(hash) => {
                crate::config::set_hashed_user(&t.config, name, hash, level)?;
            }
            Password::Clear(clear) => {
                let user =
                    camstream_rtsp::auth::User::from_password(name, crate::config::REALM, clear);
                crate::config::set_user(&t.config, &user, None, level)?;
            }
        }
        done.push(format!(
            "camstream user {name:?} (level user) in {}",
            t.config.display()
        ));
    }
    Ok(done)
}

/// `KEY = VALUE` (network.conf's form; `KEY=VALUE`, wpa_supplicant's, for
/// country) set in `text`: its first line for KEY replaced, or one added
/// at the top (wpa_supplicant wants global settings before networks).
fn set_key(text: &str, key: &str, value: &str) -> String {
    let sep = if key == "country" { "=" } else { " = " };
    let is_key = |l: &str| {
        l.trim_start()
            .strip_prefix(key)
            .is_some_and(|r| r.trim_start().starts_with('='))
    };
    let mut out = String::new();
    let mut set = false;
    for l in text.lines() {
        if !set && is_key(l) {
            let _ = writeln!(out, "{key}{sep}{value}");
            set = true;
        } else {
            out.push_str(l);
            out.push('\n');
        }
    }
    if !set {
        out = format!("{key}{sep}{value}\n{out}");
    }
    out
}

fn write_atomic(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::replace::replace_file(path, data, |_| mode)
        .with_context(|| format!("{}: cannot write", path.display()))
}
#[cfg(test)]
mod tests {
    use super::*;

    /// What Imager 2.0.11.1 writes (tests/testdata/rpi-imager: made with
    /// its own generator).
    const IMAGER: &str =
        include_str!("../../../tests/testdata/rpi-imager/rpi-imager-2.0.11.1-rpi-preseed.toml");

    #[test]
    fn imagers_file() {
        let p = plan(IMAGER).unwrap();
        assert_eq!(p.hostname.as_deref(), Some("cam-garden"));
        assert_eq!(p.ssh_keys.len(), 1);
        assert!(p.ssh_keys[0].starts_with("ssh-ed25519 AAAA"));
        let (block, country) = p.wifi.clone().unwrap();
        // "Garden Wi-Fi" as hex; the PSK Imager derived.
        assert!(
            block.contains("\tssid=47617264656e2057692d4669\n"),
            "{block}"
        );
        assert!(
            block.contains(
                "\tpsk=ea114401cc10e72a143cd33f5af994e28869d962392e8c6a1e755bde98b9cdf4\n"
            )
        );
        assert_eq!(country.as_deref(), Some("GB"));
        let notes = p.not_applied.join("\n");
        assert_eq!(
            p.user,
            Some((
                "alice".to_string(),
                Password::Hash(
                    "$y$jB5$moIJ2dp95xWKdB4BoYoRE/$d/e2JkVv/IKtmuzuSVMED9PeAJq2yB30KUQ/j9tQuA8"
                        .into()
                )
            ))
        );
        assert!(
            notes.contains("locale.timezone = \"Europe/London\""),
            "{notes}"
        );
        assert!(notes.contains("locale.keymap"), "{notes}");
        assert_eq!(p.not_applied.len(), 2, "{notes}");
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        let err = |t: &str| plan(t).unwrap_err().to_string();
        assert!(err("[system]\nhostname = \"-x\"").starts_with("system.hostname = \"-x\""));
        assert!(err("[ssh]\nauthorized_keys = [\"rm -rf /\"]").starts_with("ssh.authorized_keys"));
        assert!(err("[wlan]\nssid = \"a\"\npassword = \"short\"").contains("8-63"));
        assert!(
            err("[wlan]\nssid = \"a\"\npassword = \"zz\"\npassword_encrypted = true")
                .contains("64 hex")
        );
        assert!(err("[wlan]\nssid = \"a\"\ncountry = \"GBR\"").contains("two-letter"));
        assert!(err("[wlan]\nssid = \"\"").contains("1-32 bytes"));
        assert_eq!(err("\n[system\n"), "line 2: unclosed table, expected `]`");
        // A passphrase cannot end the quoted string or the line.
        assert!(err("[wlan]\nssid = \"a\"\npassword = \"12345678\\n\"").contains("printable"));
        // Other types than the field's.
        assert!(!err("[system]\nhostname = 4").is_empty());
        // A hash the camera cannot check (sha512crypt), or none.
        assert!(
            err("[user]\nname = \"a\"\npassword = \"$6$s$h\"\npassword_encrypted = true")
                .starts_with("user.password: not a yescrypt hash")
        );
        assert!(err("[user]\nname = \"a:b\"\npassword = \"x\"").starts_with("user.name"));
        assert!(err("[user]\npassword = \"x\"").contains("without user.name"));
    }

    #[test]
    fn an_open_hidden_network_and_unknown_sections() {
        let p =
            plan("[wlan]\nssid_hex = \"C3A9\"\nhidden = true\n[interfaces]\ni2c = true\n").unwrap();
        let (block, country) = p.wifi.unwrap();
        assert_eq!(
            block,
            "network={\n\tssid=c3a9\n\tscan_ssid=1\n\tkey_mgmt=NONE\n}\n"
        );
        assert_eq!(country, None);
        assert_eq!(p.not_applied, ["interfaces: not a setting this camera has"]);
    }

    #[test]
    fn applied_to_files() {
        let dir = std::env::temp_dir().join(format!("camstream-preseed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut t = Targets::under(&dir);
        t.network_default = dir.join("default.conf");
        t.config_default = dir.join("default.toml");
        std::fs::write(&t.config_default, "# the image's config\nfps = 15\n").unwrap();
        std::fs::write(
            &t.network_default,
            "# comment\nhostname =\ninterface = eth0\n",
        )
        .unwrap();
        let p = plan(IMAGER).unwrap();
        apply(&p, &t).unwrap();
        // Twice: a key is added once, the network file made again.
        apply(&p, &t).unwrap();
        let conf = std::fs::read_to_string(&t.network_conf).unwrap();
        assert_eq!(conf, "# comment\nhostname = cam-garden\ninterface = eth0\n");
        let keys = std::fs::read_to_string(&t.authorized_keys).unwrap();
        assert_eq!(keys.lines().count(), 1);
        let wpa = std::fs::read_to_string(&t.wpa_supplicant).unwrap();
        assert!(wpa.starts_with("country=GB\n"), "{wpa}");
        assert_eq!(wpa.matches("country=").count(), 1);
        assert_eq!(wpa.matches("network={").count(), 1);
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            (mode(&t.authorized_keys), mode(&t.wpa_supplicant)),
            (0o600, 0o600)
        );
        assert_eq!(mode(t.authorized_keys.parent().unwrap()), 0o700);
        // The user in the image's config, known by Imager's hash, level user.
        let cfg = std::fs::read_to_string(&t.config).unwrap();
        assert!(
            cfg.starts_with(
                "# the image's config\nfps = 15\n\n[users.alice]\npassword_hash = \"$y$jB5$"
            ),
            "{cfg}"
        );
        assert!(cfg.contains("user_level = \"user\""), "{cfg}");
        let c = crate::config::Config::from_options(toml::from_str(&cfg).unwrap()).unwrap();
        assert_eq!((c.users.len(), c.hashed_users.len()), (0, 1));
        // A password in the clear becomes digests at once.
        let clear = plan("[user]\nname = \"alice\"\npassword = \"pw\"\n").unwrap();
        apply(&clear, &t).unwrap();
        let c = crate::config::Config::from_options(
            toml::from_str(&std::fs::read_to_string(&t.config).unwrap()).unwrap(),
        )
        .unwrap();
        assert_eq!(
            (c.users.clone(), c.hashed_users.len()),
            (
                vec![camstream_rtsp::auth::User::from_password(
                    "alice",
                    crate::config::REALM,
                    "pw"
                )],
                0
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
