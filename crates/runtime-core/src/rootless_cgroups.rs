//! Rootless on a cgroup v1 or hybrid host, as rootless Podman runs the runtime: root of the
//! user's own user namespace, no `cgroupsPath`, no resources.
//!
//! An unprivileged user cannot create cgroups in a v1 hierarchy, and libcontainer's v1 manager
//! fails hard on that (runc instead ignores the error when nothing was asked of the cgroup). The
//! runtime then does for itself what `shadow run`'s rootless mode does: a private mount and
//! cgroup namespace of its own, with a *read-only* cgroup2 mount over `/sys/fs/cgroup`, so
//! libcontainer takes its v2 path, whose rootless mode leaves the container in its parent
//! cgroup. This changes only the creating runtime process's view (the container inherits it for
//! `/sys/fs/cgroup`), nothing of the host's.
//!
//! Fail closed: a spec that asks for limits (memory, CPU, pids, block I/O, huge pages) cannot
//! be enforced there and is refused, never run unlimited.

use std::path::Path;

use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC};
use nix::unistd::{access, AccessFlags};
use oci_spec::runtime::Spec;

use crate::error::{Error, Result};

/// What a host's cgroups allow this (rootless) process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `/sys/fs/cgroup` is cgroup2: libcontainer's rootless v2 path copes by itself.
    Unified,
    /// A v1 (or hybrid) hierarchy this process may write (delegated): nothing to do.
    V1Writable,
    /// A v1 (or hybrid) hierarchy this process cannot write.
    V1ReadOnly,
}

/// This host's layout, as seen by this process.
pub fn layout() -> Layout {
    let root = Path::new("/sys/fs/cgroup");
    if statfs(root).is_ok_and(|s| s.filesystem_type() == CGROUP2_SUPER_MAGIC) {
        return Layout::Unified;
    }
    let writable = ["pids", "memory", "cpu"].iter().any(|c| {
        let d = root.join(c);
        d.is_dir() && access(&d, AccessFlags::W_OK).is_ok()
    });
    if writable {
        Layout::V1Writable
    } else {
        Layout::V1ReadOnly
    }
}

/// The limits a spec asks for, by field name (empty: none). Device rules are not limits a
/// rootless container can be given or denied here: the user namespace already keeps it from
/// creating device nodes, as runc's rootless mode assumes.
pub fn requested_limits(spec: &Spec) -> Vec<&'static str> {
    let Some(r) = spec.linux().as_ref().and_then(|l| l.resources().as_ref()) else {
        return vec![];
    };
    let mut v = Vec::new();
    if r.memory().as_ref().is_some_and(|m| {
        m.limit().is_some()
            || m.reservation().is_some()
            || m.swap().is_some()
            || m.kernel().is_some()
    }) {
        v.push("memory");
    }
    if r.cpu().as_ref().is_some_and(|c| {
        c.shares().is_some()
            || c.quota().is_some()
            || c.period().is_some()
            || c.cpus().as_ref().is_some_and(|s| !s.is_empty())
            || c.mems().as_ref().is_some_and(|s| !s.is_empty())
    }) {
        v.push("cpu");
    }
    if r.pids().as_ref().is_some_and(|p| p.limit() > 0) {
        v.push("pids");
    }
    if r.block_io().as_ref().is_some_and(|b| {
        b.weight().is_some()
            || b.throttle_read_bps_device()
                .as_ref()
                .is_some_and(|d| !d.is_empty())
            || b.throttle_write_bps_device()
                .as_ref()
                .is_some_and(|d| !d.is_empty())
    }) {
        v.push("blockIO");
    }
    if r.hugepage_limits().as_ref().is_some_and(|h| !h.is_empty()) {
        v.push("hugepageLimits");
    }
    v
}

/// Before creating a container: if this process is rootless on a v1/hybrid host it cannot
/// write, refuse limits it cannot enforce, else switch to the read-only cgroup2 view. Returns
/// whether it switched.
pub fn prepare(spec: &Spec) -> Result<bool> {
    if !crate::net::rootless() || layout() != Layout::V1ReadOnly {
        return Ok(false);
    }
    let limits = requested_limits(spec);
    if !limits.is_empty() {
        return Err(Error::invalid(format!(
            "rootless on a cgroup v1 host: cannot enforce linux.resources ({}): refusing to run without them",
            limits.join(", ")
        )));
    }
    let fail = |what: &str, e: nix::Error| Error::invalid(format!("rootless cgroups: {what}: {e}"));
    unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWCGROUP)
        .map_err(|e| fail("new mount and cgroup namespaces", e))?;
    readonly_cgroup2_view().map_err(|(what, e)| fail(what, e))?;
    Ok(true)
}

/// In a mount and cgroup namespace of the caller's own (already entered): makes every mount
/// private, so nothing propagates back to the parent namespace, and mounts this cgroup
/// namespace's cgroup2 read-only over `/sys/fs/cgroup`. Shared with `shadow run`'s rootless
/// mode. On error: which step, and the errno.
pub fn readonly_cgroup2_view() -> std::result::Result<(), (&'static str, nix::Error)> {
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| ("make mounts private", e))?;
    mount(
        Some("cgroup2"),
        "/sys/fs/cgroup",
        Some("cgroup2"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| ("mount a read-only cgroup2 view", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::{
        LinuxBuilder, LinuxCpuBuilder, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResourcesBuilder,
    };

    fn with(r: oci_spec::runtime::LinuxResources) -> Spec {
        let mut s = Spec::default();
        s.set_linux(Some(LinuxBuilder::default().resources(r).build().unwrap()));
        s
    }

    #[test]
    fn limits_that_a_rootless_v1_host_cannot_enforce() {
        assert!(requested_limits(&Spec::default()).is_empty());
        assert!(
            requested_limits(&with(LinuxResourcesBuilder::default().build().unwrap())).is_empty()
        );
        let r = LinuxResourcesBuilder::default()
            .memory(
                LinuxMemoryBuilder::default()
                    .limit(64 << 20)
                    .build()
                    .unwrap(),
            )
            .pids(LinuxPidsBuilder::default().limit(100).build().unwrap())
            .cpu(LinuxCpuBuilder::default().quota(50_000).build().unwrap())
            .build()
            .unwrap();
        assert_eq!(requested_limits(&with(r)), ["memory", "cpu", "pids"]);
        // Podman's rootless v1 spec: `"resources": {}` with at most an empty cpu table.
        let r = LinuxResourcesBuilder::default()
            .cpu(LinuxCpuBuilder::default().build().unwrap())
            .build()
            .unwrap();
        assert!(requested_limits(&with(r)).is_empty());
    }
}
