//! The per-session root filesystem skeleton: an empty directory tree with
//! the host's top-level symlinks and a mountpoint for every mount at `/`.
//!
//! Why a skeleton instead of binding `/` itself: binding `/` would bring
//! along everything we exclude (`/home`, `/root`, `/run`, the store…), each
//! of which would then have to be covered. With a skeleton, what is not
//! mounted does not exist.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::{symlink, DirBuilderExt, PermissionsExt};
use std::path::Path;

use crate::error::{Error, IoContext, Result};
use crate::hostview::{EntryKind, HostView};

/// Mountpoints the spec always mounts something fresh on.
pub const FRESH_MOUNTPOINTS: &[&str] = &["proc", "sys", "dev", "run", "tmp"];

fn mkdir(path: &Path) -> Result<()> {
    match fs::DirBuilder::new().mode(0o755).create(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) => Err(e).ctx(|| format!("cannot create {}", path.display())),
    }
}

/// Creates the skeleton in `dir` (created if missing): one empty directory
/// per host top-level directory (bound or excluded alike: they are
/// mountpoints, or simply empty), the [`FRESH_MOUNTPOINTS`], and the
/// host's top-level symlinks verbatim (merged /usr: `bin -> usr/bin`).
/// Idempotent; fails if an existing entry has the wrong kind.
pub fn prepare_skeleton(dir: &Path, host: &HostView) -> Result<()> {
    mkdir(dir)?;
    for e in &host.entries {
        if e.name.is_empty() || e.name.contains('/') || e.name == "." || e.name == ".." {
            return Err(Error::InvalidInput(format!(
                "bad top-level entry name {:?}",
                e.name
            )));
        }
        let path = dir.join(&e.name);
        match &e.kind {
            EntryKind::Dir => mkdir(&path)?,
            EntryKind::Symlink { target } => match symlink(target, &path) {
                Ok(()) => {}
                Err(err) if err.kind() == ErrorKind::AlreadyExists => {
                    let existing = fs::read_link(&path).ok();
                    if existing.as_deref() != Some(target.as_path()) {
                        return Err(err).ctx(|| format!("cannot create {}", path.display()));
                    }
                }
                Err(err) => return Err(err).ctx(|| format!("cannot create {}", path.display())),
            },
            EntryKind::Other => {}
        }
    }
    for m in FRESH_MOUNTPOINTS {
        let path = dir.join(m);
        if fs::symlink_metadata(&path).is_err() {
            mkdir(&path)?;
        }
    }
    // Some runtimes (runc) give a tmpfs the mode of its mountpoint rather
    // than its `mode=` option, so the mountpoint carries the intended one.
    let tmp = dir.join("tmp");
    if fs::symlink_metadata(&tmp).is_ok_and(|m| m.is_dir()) {
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o1777))
            .ctx(|| format!("cannot chmod {}", tmp.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostview::HostEntry;
    use std::path::PathBuf;

    fn host() -> HostView {
        HostView {
            entries: vec![
                HostEntry::symlink("bin", "usr/bin"),
                HostEntry::dir("etc"),
                HostEntry::dir("home"),
                HostEntry::symlink("lib", "usr/lib"),
                HostEntry::symlink("lib64", "usr/lib64"),
                HostEntry::dir("proc"),
                HostEntry::symlink("sbin", "usr/sbin"),
                HostEntry {
                    name: "stray.json".into(),
                    kind: EntryKind::Other,
                },
                HostEntry::dir("usr"),
                HostEntry::dir("var"),
            ],
            var_run: None,
            ssh_host_keys: vec![],
        }
    }

    #[test]
    fn creates_symlinks_and_mountpoints() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("rootfs");
        prepare_skeleton(&dir, &host()).unwrap();
        // Idempotent.
        prepare_skeleton(&dir, &host()).unwrap();
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "bin", "dev", "etc", "home", "lib", "lib64", "proc", "run", "sbin", "sys", "tmp",
                "usr", "var"
            ]
        );
        assert_eq!(
            fs::read_link(dir.join("bin")).unwrap(),
            PathBuf::from("usr/bin")
        );
        assert_eq!(
            fs::read_link(dir.join("lib64")).unwrap(),
            PathBuf::from("usr/lib64")
        );
        assert_eq!(
            fs::metadata(dir.join("tmp")).unwrap().permissions().mode() & 0o7777,
            0o1777
        );
        for d in ["etc", "usr", "var", "proc", "dev"] {
            let m = fs::symlink_metadata(dir.join(d)).unwrap();
            assert!(m.is_dir(), "{d}");
            assert_eq!(
                fs::read_dir(dir.join(d)).unwrap().count(),
                0,
                "{d} is empty"
            );
            assert_eq!(m.permissions().mode() & 0o777, 0o755);
        }
    }

    #[test]
    fn conflicting_entry_fails() {
        let t = tempfile::tempdir().unwrap();
        symlink("elsewhere", t.path().join("bin")).unwrap();
        let err = prepare_skeleton(t.path(), &host()).unwrap_err();
        assert!(err.to_string().contains("bin"), "{err}");
        let bad = HostView {
            entries: vec![HostEntry::dir("..")],
            ..Default::default()
        };
        assert!(prepare_skeleton(t.path(), &bad).is_err());
    }
}
