//! A file replaced whole or not at all: what the camera's settings files
//! (the config, the settings Imager left) are written with.

use std::fs::Metadata;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// `data` becomes the file at `path`: written beside it (`PATH.new`, with
/// the old file's owner and the mode `mode` gives from the old file's
/// metadata, or None when there was none), synced, renamed over it, its
/// directory synced; a power cut leaves the old file or the new one. The
/// copy is its owner's alone (0600) until its mode is set, and a leftover
/// of an interrupted run, which may be anyone's to read, is never reused.
pub fn replace_file(
    path: &Path,
    data: &[u8],
    mode: impl FnOnce(Option<&Metadata>) -> u32,
) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    let old = std::fs::metadata(path).ok();
    if let Some(old) = &old {
        std::os::unix::fs::fchown(&f, Some(old.uid()), Some(old.gid()))?;
    }
    f.set_permissions(std::fs::Permissions::from_mode(mode(old.as_ref())))?;
    f.write_all(data)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    std::fs::File::open(dir.unwrap_or(Path::new(".")))?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leftover_copy_is_not_reused() {
        let dir = std::env::temp_dir().join(format!("camstream-replace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("secret");
        let leftover = dir.join("secret.new");
        std::fs::write(&leftover, "old").unwrap();
        std::fs::set_permissions(&leftover, std::fs::Permissions::from_mode(0o644)).unwrap();
        replace_file(&path, b"psk", |old| {
            assert!(old.is_none());
            0o600
        })
        .unwrap();
        let m = std::fs::metadata(&path).unwrap();
        assert_eq!(
            (m.mode() & 0o777, std::fs::read(&path).unwrap()),
            (0o600, b"psk".to_vec())
        );
        assert!(!leftover.exists());
        // The old file's mode, as the caller makes it.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        replace_file(&path, b"new", |old| old.unwrap().mode() & 0o777).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o640);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
