//! Rootless runs: how an ordinary user gets a sandbox without sudo.
//!
//! shadow enters a user namespace of its own (the user mapped to root inside, like
//! `unshare -r`), with private mount and cgroup namespaces, and drives the runtime library from
//! there — the arrangement libcontainer supports for Podman's rootless mode. The sandbox's own
//! user namespace then nests inside ours (uid 0 → our uid 0 = the user).
//!
//! cgroups: an unprivileged user cannot create cgroups on a v1 or hybrid host, and libcontainer's
//! v1 manager fails hard on that. Inside our namespaces `/sys/fs/cgroup` is replaced by a
//! *read-only* cgroup2 mount of our own cgroup namespace, so libcontainer takes its v2 path,
//! whose rootless mode treats EROFS/EACCES as "leave the process in its parent cgroup". Limits
//! then come from rlimits (the sandbox spec's fallback), and `shadow run` says so.

use std::fs;

use nix::sched::{unshare, CloneFlags};

use crate::Failure;

/// Enter the rootless namespaces. Must be called while the process is single-threaded.
pub fn enter(uid: u32, gid: u32) -> Result<(), Failure> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        Failure::new(format!(
            "rootless: {what}: {e} (see `shadow doctor` for user namespace support)"
        ))
    };
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWCGROUP)
        .map_err(|e| fail("cannot create a user namespace", &e))?;
    fs::write("/proc/self/setgroups", "deny").map_err(|e| fail("write setgroups", &e))?;
    fs::write("/proc/self/uid_map", format!("0 {uid} 1")).map_err(|e| fail("write uid_map", &e))?;
    fs::write("/proc/self/gid_map", format!("0 {gid} 1")).map_err(|e| fail("write gid_map", &e))?;
    // Nothing we mount may propagate back to the host's mount namespace.
    shadow_runtime_core::rootless_cgroups::readonly_cgroup2_view()
        .map_err(|(what, e)| fail(what, &e))?;
    Ok(())
}
