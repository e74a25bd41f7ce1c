//! The runtime's state root (`--root`): where each container's state directory lives.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::unistd::{access, AccessFlags};

use crate::error::{Error, Result};

/// The default root: `/run/shadow-runtime` for root, `$XDG_RUNTIME_DIR/shadow-runtime` for a
/// non-root user (falling back to `/tmp/shadow-runtime-<uid>` as runc does when the variable is
/// unset). See [`default_root_for`] for root inside a user namespace (rootless Podman).
pub fn default_root() -> PathBuf {
    let uid = nix::unistd::geteuid();
    default_root_for(
        uid.as_raw(),
        in_user_namespace(),
        std::env::var_os("XDG_RUNTIME_DIR").as_deref(),
        std::env::var_os("USER").as_deref(),
    )
}

/// The decision behind [`default_root`], as runc makes it. Uid 0 *inside a user namespace*
/// (rootless Podman runs the runtime as root of its own user namespace, passing no `--root`)
/// cannot write `/run`: it uses `$XDG_RUNTIME_DIR` when the unprivileged user set it, i.e.
/// unless `USER` says the caller really is root.
pub fn default_root_for(
    euid: u32,
    in_userns: bool,
    xdg_runtime_dir: Option<&std::ffi::OsStr>,
    user: Option<&std::ffi::OsStr>,
) -> PathBuf {
    let xdg = xdg_runtime_dir.filter(|d| !d.is_empty());
    let honour_xdg = match xdg {
        None => false,
        Some(_) if euid != 0 => true,
        Some(_) => in_userns && user.is_none_or(|u| u != "root"),
    };
    match xdg {
        Some(d) if honour_xdg => Path::new(d).join("shadow-runtime"),
        _ if euid == 0 => PathBuf::from("/run/shadow-runtime"),
        _ => PathBuf::from(format!("/tmp/shadow-runtime-{euid}")),
    }
}

/// Whether this process runs in a user namespace other than the initial one (its uid map is
/// not the identity over the whole range).
pub fn in_user_namespace() -> bool {
    match fs::read_to_string("/proc/self/uid_map") {
        Ok(m) => {
            let f: Vec<&str> = m.split_whitespace().collect();
            f != ["0", "0", "4294967295"]
        }
        Err(_) => false,
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
    fn default_roots() {
        use std::ffi::OsStr;
        let x = Some(OsStr::new("/run/user/1000"));
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(
            default_root_for(0, false, x, Some(OsStr::new("root"))),
            p("/run/shadow-runtime")
        );
        assert_eq!(
            default_root_for(0, false, x, None),
            p("/run/shadow-runtime")
        );
        assert_eq!(
            default_root_for(1000, false, x, None),
            p("/run/user/1000/shadow-runtime")
        );
        assert_eq!(
            default_root_for(1000, false, None, None),
            p("/tmp/shadow-runtime-1000")
        );
        // Root of rootless Podman's user namespace, started by user alice.
        assert_eq!(
            default_root_for(0, true, x, Some(OsStr::new("alice"))),
            p("/run/user/1000/shadow-runtime")
        );
        assert_eq!(
            default_root_for(0, true, x, None),
            p("/run/user/1000/shadow-runtime")
        );
        // Real root in a user namespace (USER=root) keeps /run.
        assert_eq!(
            default_root_for(0, true, x, Some(OsStr::new("root"))),
            p("/run/shadow-runtime")
        );
        assert_eq!(
            default_root_for(0, true, Some(OsStr::new("")), None),
            p("/run/shadow-runtime")
        );
    }

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
