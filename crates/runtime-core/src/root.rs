//! The runtime's state root (`--root`): where each container's state directory lives.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::unistd::{access, AccessFlags};

use crate::error::{Error, Result};

/// The default root: `/run/shadow-runtime` for root, `$XDG_RUNTIME_DIR/shadow-runtime` for a
/// non-root user (falling back to `/tmp/shadow-runtime-<uid>` as runc does when the variable is
/// unset).
pub fn default_root() -> PathBuf {
    let uid = nix::unistd::geteuid();
    if uid.is_root() {
        return PathBuf::from("/run/shadow-runtime");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => Path::new(&dir).join("shadow-runtime"),
        _ => PathBuf::from(format!("/tmp/shadow-runtime-{uid}")),
    }
}

/// Make sure `root` exists (mode 0700: container state includes the full spec, environment
/// included) and that we can write to it. Returns its absolute form.
///
/// A root that is not writable is reported here, once and clearly, instead of as a failure deep
/// inside container creation that may have left half a container behind.
pub fn prepare(root: &Path) -> Result<PathBuf> {
    let root = absolute(root)?;
    if !root.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&root)
            .map_err(|e| {
                Error::io(
                    format!("cannot create root directory {}", root.display()),
                    e,
                )
            })?;
    } else if !root.is_dir() {
        return Err(Error::invalid(format!(
            "root {} is not a directory",
            root.display()
        )));
    }
    if access(&root, AccessFlags::W_OK | AccessFlags::X_OK).is_err() {
        return Err(Error::invalid(format!(
            "root directory {} is not writable",
            root.display()
        )));
    }
    // Probe for real: a read-only mount passes access(2) for root.
    let probe = root.join(format!(".probe-{}", std::process::id()));
    match fs::File::create(&probe) {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
        }
        Err(e) => {
            return Err(Error::invalid(format!(
                "root directory {} is not writable: {e}",
                root.display()
            )))
        }
    }
    Ok(root)
}

/// Like [`prepare`] but for read-only commands: the root need not exist (no containers).
pub fn existing(root: &Path) -> Result<PathBuf> {
    absolute(root)
}

/// Absolute path without resolving symlinks (the path need not exist).
pub fn absolute(p: &Path) -> Result<PathBuf> {
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        let cwd =
            std::env::current_dir().map_err(|e| Error::io("cannot read current directory", e))?;
        Ok(cwd.join(p).components().collect())
    }
}

/// [`absolute`] of an optional path.
pub fn absolute_opt(p: Option<&Path>) -> Result<Option<PathBuf>> {
    p.map(absolute).transpose()
}

/// Restrict a freshly created directory to its owner.
pub fn chmod_private(p: &Path) -> Result<()> {
    fs::set_permissions(p, fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::io(format!("chmod {}", p.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepare_creates_and_probes() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path().join("a/b");
        assert_eq!(prepare(&r).unwrap(), r);
        assert!(r.is_dir());
        assert_eq!(
            fs::read_dir(&r).unwrap().count(),
            0,
            "probe file left behind"
        );
    }

    #[test]
    fn prepare_rejects_a_file() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f");
        fs::write(&f, "").unwrap();
        let e = prepare(&f).unwrap_err();
        assert!(e.to_string().contains("is not a directory"), "{e}");
    }
}
