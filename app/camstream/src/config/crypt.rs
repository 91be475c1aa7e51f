//! Password hashes as crypt(3) writes them, the form Raspberry Pi Imager
//! leaves for the user it sets: yescrypt (`$y$`), what Imager and Debian's
//! mkpasswd write today. Checked when the config is read (a hash this
//! camera cannot check, or one that would take more memory than a Pi
//! should spend on a sign-in, stops start-up), verified at a sign-in.

use yescrypt::password_hash::PasswordVerifier;

/// Most memory one check may take: yescrypt's default (N=4096 blocks of
/// r=32, 16 MiB) four times over.
const MAX_MEMORY: u64 = 64 << 20;

/// Whether `hash` is one this camera can check within its limits; else why not.
pub fn check(hash: &str) -> Result<(), String> {
    let Some(rest) = hash.strip_prefix("$y$") else {
        return Err(
            "not a yescrypt hash ($y$...: what Raspberry Pi Imager and mkpasswd write)".into(),
        );
    };
    let fields: Vec<&str> = rest.split('$').collect();
    let [params, salt, digest] = fields[..] else {
        return Err("a yescrypt hash has the form $y$PARAMS$SALT$HASH".into());
    };
    if salt.is_empty() || digest.is_empty() {
        return Err("a yescrypt hash has the form $y$PARAMS$SALT$HASH".into());
    }
    // The short form crypt(3) writes by default ("j", N, r): one thread,
    // no extra passes; the long one (t, p, g) could ask for any time.
    let p: yescrypt::Params = params
        .parse()
        .ok()
        .filter(|_| params.len() == 3 && params.starts_with('j'))
        .ok_or_else(|| {
            format!("yescrypt parameters {params:?} are not crypt(3)'s short form (as \"jB5\")")
        })?;
    let memory = 128 * p.n() * u64::from(p.r());
    if memory > MAX_MEMORY {
        return Err(format!(
            "yescrypt parameters {params:?} ask for {} MiB per sign-in: at most {} MiB",
            memory >> 20,
            MAX_MEMORY >> 20
        ));
    }
    Ok(())
}

/// Whether `password` is the one `hash` was made from. Slow by design
/// (tens of milliseconds on a PC, more on a Pi, 16 MiB at Imager's
/// settings): never on the event loop.
pub fn verify(hash: &str, password: &str) -> bool {
    check(hash).is_ok()
        && yescrypt::Yescrypt::default()
            .verify_password(password.as_bytes(), hash)
            .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made by Raspberry Pi Imager 2.0.11.1 for "Correct horse 7"
    /// (tests/testdata/rpi-imager/rpi-imager-2.0.11.1-rpi-preseed.toml).
    const IMAGER: &str =
        "$y$jB5$moIJ2dp95xWKdB4BoYoRE/$d/e2JkVv/IKtmuzuSVMED9PeAJq2yB30KUQ/j9tQuA8";

    #[test]
    fn imagers_hash_checks_its_password() {
        assert_eq!(check(IMAGER), Ok(()));
        assert!(verify(IMAGER, "Correct horse 7"));
        assert!(!verify(IMAGER, "Correct horse 8"));
        assert!(!verify(IMAGER, ""));
    }

    #[test]
    fn hashes_it_cannot_check_are_refused() {
        let e = check("$6$salt$abc").unwrap_err();
        assert!(e.contains("not a yescrypt hash"), "{e}");
        assert!(check("$y$jB5$moIJ2dp95xWKdB4BoYoRE/").is_err());
        assert!(check("$y$jB5$$abc").is_err());
        assert!(check("$y$!!$salt$abc").is_err());
        // N = 2^30 blocks of r = 8: 1 TiB per check.
        let e = check("$y$jR5$moIJ2dp95xWKdB4BoYoRE/$d/e2").unwrap_err();
        assert!(e.contains("MiB"), "{e}");
        assert!(!verify("$y$jR5$moIJ2dp95xWKdB4BoYoRE/$d/e2", "x"));
    }
}
