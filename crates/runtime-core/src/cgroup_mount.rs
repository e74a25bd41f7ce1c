//! Read-only cgroup mounts, as the spec asks, on v1 and hybrid hosts.
//!
//! Threat: every engine's spec mounts the cgroup filesystem read-only
//! (`{"type": "cgroup", "destination": "/sys/fs/cgroup", "options": [..., "ro"]}`), because a
//! container that can write its own cgroup can lift its own limits (`pids.max`, `memory.limit_in_bytes`)
//! and make sub-cgroups the runtime cannot delete. On a v1 or hybrid host libcontainer 0.7 ignores
//! the spec's options for that mount: it builds `/sys/fs/cgroup` from a tmpfs and one **read-write**
//! bind per hierarchy (and binds the process's own cgroup of named hierarchies such as
//! `name=systemd`, i.e. the host's root of that hierarchy when the runtime sits there).
//! Reproduced here: a container with the default capabilities raised its `pids.max` from 50 to 77,
//! left a sub-cgroup behind that made `delete` fail, and created a directory in the host's
//! `name=systemd` tree. runc mounts them all read-only.
//!
//! Defence: after libcontainer has created the container (its init waits for `start`; nothing
//! of the container has run), the runtime enters the container's mount namespace on a short-lived
//! thread and sets `MOUNT_ATTR_RDONLY` (and `nosuid`/`nodev`/`noexec` as asked) with
//! `mount_setattr` on every cgroup or cgroup2 mount at the destination or directly below it (one
//! per v1 hierarchy); the destination is resolved below the container's root (`RESOLVE_IN_ROOT`).
//! Other mounts there keep their options. If that fails, or finds no cgroup mount at all, `create`
//! fails: the protection the spec asked for is never silently missing. The cgroup v2 path of
//! libcontainer honours `ro` already; there the call changes nothing.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use oci_spec::runtime::Spec;

use crate::error::{Error, Result};
use crate::mount_attr::{
    MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY,
};

/// Destinations of the spec's cgroup mounts that must be read-only (the last of `ro`/`rw` in
/// the options wins, as in mount(8)), with the mount attributes to set on them: read-only, and
/// `nosuid`/`nodev`/`noexec` where the options ask for them (libcontainer's v1 binds drop them).
pub fn readonly_destinations(spec: &Spec) -> Vec<(PathBuf, u64)> {
    spec.mounts()
        .iter()
        .flatten()
        .filter(|m| matches!(m.typ().as_deref(), Some("cgroup") | Some("cgroup2")))
        .filter_map(|m| {
            let opts = m.options().clone().unwrap_or_default();
            let ro = opts
                .iter()
                .rev()
                .find(|o| *o == "ro" || *o == "rw")
                .is_some_and(|o| o == "ro");
            if !ro {
                return None;
            }
            let has = |name: &str| opts.iter().any(|o| o == name);
            let mut attrs = MOUNT_ATTR_RDONLY;
            if has("nosuid") {
                attrs |= MOUNT_ATTR_NOSUID;
            }
            if has("nodev") {
                attrs |= MOUNT_ATTR_NODEV;
            }
            if has("noexec") {
                attrs |= MOUNT_ATTR_NOEXEC;
            }
            Some((m.destination().clone(), attrs))
        })
        .collect()
}

const CGROUP_SUPER_MAGIC: u32 = 0x0027_E0EB;
const CGROUP2_SUPER_MAGIC: u32 = 0x6367_7270;

/// True if `fd` is the root of a cgroup or cgroup2 mount. Errors when the kernel cannot say
/// whether it is a mount root (`STATX_ATTR_MOUNT_ROOT`, 5.8+): never a silent "no".
fn is_cgroup_mount_root(fd: &OwnedFd) -> std::io::Result<bool> {
    use rustix::fs::{statx, AtFlags, StatxAttributes, StatxFlags};
    let fs = rustix::fs::fstatfs(fd)?.f_type as u32;
    if fs != CGROUP_SUPER_MAGIC && fs != CGROUP2_SUPER_MAGIC {
        return Ok(false);
    }
    let st = statx(fd, "", AtFlags::EMPTY_PATH, StatxFlags::empty())?;
    if !st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT) {
        return Err(std::io::Error::other(
            "the kernel does not report mount roots (statx STATX_ATTR_MOUNT_ROOT)",
        ));
    }
    Ok(st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT))
}

fn open_below(
    dir: RawFd,
    name: &Path,
    resolve: nix::fcntl::ResolveFlag,
) -> std::io::Result<OwnedFd> {
    use nix::fcntl::{openat2, OFlag, OpenHow};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
        .resolve(resolve);
    let fd = openat2(dir, name, how).map_err(std::io::Error::from)?;
    // SAFETY: openat2 just returned this fd; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Set `attrs` on the cgroup mounts at `dest` (a container path, resolved below the container's
/// root directory `root`) and directly below it (v1: one per hierarchy); the caller is in the
/// container's mount namespace. Only cgroup and cgroup2 mount roots are changed, one by one: a
/// mount of the spec's own below the destination (a tmpfs asked read-write) keeps its options,
/// and libcontainer's tmpfs under the v1 hierarchies stays as runc leaves its own (writable).
/// Returns how many mounts were changed.
fn make_cgroup_mounts_readonly(root: &File, dest: &Path, attrs: u64) -> std::io::Result<usize> {
    use nix::fcntl::ResolveFlag;
    let rel = dest.strip_prefix("/").unwrap_or(dest);
    let top = open_below(
        root.as_raw_fd(),
        rel,
        ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS,
    )?;
    let mut changed = 0;
    if is_cgroup_mount_root(&top)? {
        crate::mount_attr::set(top.as_raw_fd(), attrs)?;
        changed += 1;
    }
    // The directory's entries, read through a real open of the same directory ("." below the
    // O_PATH fd; /proc/self is not ours in the container's mount namespace).
    let dirfd = rustix::fs::openat(
        &top,
        ".",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(&dirfd)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        // Comount symlinks (cpu -> cpu,cpuacct) are not directories; nothing is followed.
        if entry.file_type() == rustix::fs::FileType::Directory && name != b"." && name != b".." {
            use std::os::unix::ffi::OsStrExt;
            names.push(std::ffi::OsStr::from_bytes(name).to_os_string());
        }
    }
    for name in names {
        let child = open_below(
            top.as_raw_fd(),
            Path::new(&name),
            ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS,
        )?;
        if is_cgroup_mount_root(&child)? {
            crate::mount_attr::set(child.as_raw_fd(), attrs)?;
            changed += 1;
        }
    }
    Ok(changed)
}

/// Make the spec's read-only cgroup mounts read-only in the mount namespace of process `pid`
/// (the created container's init). Needs root (entering another mount namespace).
pub fn enforce(pid: i32, spec: &Spec) -> Result<()> {
    let dests = readonly_destinations(spec);
    if dests.is_empty() {
        return Ok(());
    }
    let ns = File::open(format!("/proc/{pid}/ns/mnt"))
        .map_err(|e| Error::io(format!("open mount namespace of {pid}"), e))?;
    // The init's root, not the namespace's: with --no-pivot the container's root is a chroot.
    let root = File::open(format!("/proc/{pid}/root"))
        .map_err(|e| Error::io(format!("open the root directory of {pid}"), e))?;
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("mntns".into())
            .spawn_scoped(
                s,
                move || -> std::result::Result<(), (PathBuf, std::io::Error)> {
                    // setns(CLONE_NEWNS) refuses a caller that shares its root and cwd with other
                    // threads: this thread gets its own first. It ends right after.
                    // SAFETY: unshare and setns act on this thread only, with an fd we own.
                    unsafe {
                        if libc::unshare(libc::CLONE_FS) != 0
                            || libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNS) != 0
                        {
                            return Err((PathBuf::from("/"), std::io::Error::last_os_error()));
                        }
                    }
                    for (d, attrs) in &dests {
                        // The spec mounted a cgroup filesystem here: finding none would leave
                        // whatever is there as it is.
                        match make_cgroup_mounts_readonly(&root, d, *attrs) {
                            Ok(0) => {
                                return Err((
                                    d.clone(),
                                    std::io::Error::other("no cgroup mount found there"),
                                ))
                            }
                            Ok(_) => {}
                            Err(e) => return Err((d.clone(), e)),
                        }
                    }
                    Ok(())
                },
            )
            .map_err(|e| Error::io("spawn thread", e))?;
        handle
            .join()
            .map_err(|_| Error::runtime("mount namespace thread panicked"))?
            .map_err(|(d, e)| {
                Error::io(
                    format!(
                        "make the cgroup mount {} read-only, as the spec asks",
                        d.display()
                    ),
                    e,
                )
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(mounts: serde_json::Value) -> Spec {
        serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "root": {"path": "rootfs"},
            "mounts": mounts
        }))
        .unwrap()
    }

    #[test]
    fn only_cgroup_mounts_that_end_read_only() {
        let s = spec(serde_json::json!([
            {"destination": "/proc", "type": "proc", "source": "proc", "options": ["ro"]},
            {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
             "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]},
            {"destination": "/rw", "type": "cgroup", "source": "cgroup", "options": ["ro", "rw"]},
            {"destination": "/plain", "type": "cgroup", "source": "cgroup"},
            {"destination": "/v2", "type": "cgroup2", "source": "cgroup2", "options": ["rw", "ro"]}
        ]));
        assert_eq!(
            readonly_destinations(&s),
            [
                (
                    PathBuf::from("/sys/fs/cgroup"),
                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC
                ),
                (PathBuf::from("/v2"), MOUNT_ATTR_RDONLY)
            ]
        );
        assert!(readonly_destinations(&spec(serde_json::json!([]))).is_empty());
    }
}
