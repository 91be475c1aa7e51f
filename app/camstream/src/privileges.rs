//! Giving up root once what needs it is done: the ports are bound (554 is
//! below 1024) and the camera is open. The daemon then runs as `user` with
//! that user's groups (`video` for the camera's device nodes, which come
//! and go when it is unplugged) and no capabilities; it cannot regain them
//! (no_new_privs, and setuid from root clears every capability).
//!
//! The account is read from /etc/passwd and /etc/group directly: the daemon
//! is linked statically, and glibc's name service would want shared
//! libraries the image does not have.

use std::fs;

use anyhow::{Context, Result, bail};

#[derive(Debug, PartialEq, Eq)]
pub struct Account {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups: those that list the user, and its own.
    pub groups: Vec<u32>,
}

/// `name`'s account from the text of /etc/passwd and /etc/group.
pub fn account(name: &str, passwd: &str, group: &str) -> Result<Account> {
    let (uid, gid) = passwd
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() >= 4 && f[0] == name)
                .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
        })
        .next()
        .with_context(|| format!("user = {name:?}: no such user in /etc/passwd"))?;
    if uid == 0 {
        bail!("user = {name:?} is root: name an unprivileged user");
    }
    let mut groups = vec![gid];
    for l in group.lines() {
        let f: Vec<&str> = l.split(':').collect();
        if f.len() >= 4 && f[3].split(',').any(|m| m.trim() == name) {
            if let Ok(g) = f[2].parse::<u32>() {
                if !groups.contains(&g) {
                    groups.push(g);
                }
            }
        }
    }
    Ok(Account { uid, gid, groups })
}

/// Becomes `name` if running as root; otherwise there is nothing to give up.
pub fn drop_to(name: &str) -> Result<()> {
    // SAFETY: no arguments, no memory touched; it cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        log::debug!("user = {name:?}: not started as root, staying as started");
        return Ok(());
    }
    let a = account(
        name,
        &fs::read_to_string("/etc/passwd").context("/etc/passwd")?,
        &fs::read_to_string("/etc/group").unwrap_or_default(),
    )?;
    // Groups first, then the group, then the user: each step needs root.
    // glibc's setgid/setuid apply to every thread of the process.
    // SAFETY: setgroups reads `a.groups`, whose pointer and length come from
    // one Vec; the other calls take integers only.
    unsafe {
        if libc::setgroups(a.groups.len(), a.groups.as_ptr()) != 0 {
            bail!("setgroups: {}", std::io::Error::last_os_error());
        }
        if libc::setgid(a.gid) != 0 {
            bail!("setgid({}): {}", a.gid, std::io::Error::last_os_error());
        }
        if libc::setuid(a.uid) != 0 {
            bail!("setuid({}): {}", a.uid, std::io::Error::last_os_error());
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            bail!("no_new_privs: {}", std::io::Error::last_os_error());
        }
        // Make sure: root must be out of reach now.
        if libc::setuid(0) == 0 {
            bail!("could become root again after dropping to {name:?}");
        }
    }
    log::info!(
        "running as {name} (uid {}, gid {}, groups {:?})",
        a.uid,
        a.gid,
        a.groups
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
        camstream:x:101:101:camstream daemon:/nonexistent:/bin/false\n";
    const GROUP: &str =
        "root:x:0:\nvideo:x:44:camstream,other\ncamstream:x:101:\naudio:x:29:other\n";

    #[test]
    fn account_and_groups() {
        assert_eq!(
            account("camstream", PASSWD, GROUP).unwrap(),
            Account {
                uid: 101,
                gid: 101,
                groups: vec![101, 44]
            }
        );
        assert!(account("root", PASSWD, GROUP).is_err());
        let e = account("nobody", PASSWD, GROUP).unwrap_err().to_string();
        assert!(e.contains("no such user"), "{e}");
    }
}
