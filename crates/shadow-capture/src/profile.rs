//! An agent profile applied to an engine container's spec (annotation `run.shadow.profile`,
//! or `--shadow-profile` from the runtime's registration): pure, spec in, spec out.
//!
//! A profile is written for `shadow run`'s view of the host; for a container it means:
//! - **seccomp**: the profile's deny groups as a second filter stacked on the engine's
//!   ([`shadow_profile::seccomp::STACKED_ANNOTATION`]), and `noNewPrivileges` (also what lets
//!   the executor install it);
//! - **Landlock**: read and execute everywhere, every right on what the container may already
//!   write (a writable rootfs, writable mounts, `/dev`, `/proc`), the profile's `deny` paths
//!   carved out (`~/…` under the container's `$HOME`, project paths under the captured path),
//!   and its TCP and scope rules;
//! - **cgroups**: its memory, pids and CPU limits, or the spec's own where those are lower;
//! - **environment**: variables matching its deny patterns removed;
//! - **network**: `off` and host lists need a container without a way out (only `lo`):
//!   anything else is refused, since the proxy that lists hosts lives in `shadow run`.
//!
//! Not mapped (they name host paths of `shadow run`'s sandbox): `read_only`, `read_write`, and
//! project globs such as `**/.env` (the files they match are not known here).

use std::path::{Path, PathBuf};

use oci_spec::runtime::{
    LinuxCpuBuilder, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResources, Spec,
};
use shadow_profile::{NetMode, Profile};

use crate::Error;

/// Annotation naming the profile that was applied (informational; set by the runtime).
pub const APPLIED_ANNOTATION: &str = "run.shadow.profile-applied";

/// What the container's network namespace can reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetView {
    /// No network namespace of its own: the host's network.
    Host,
    /// A namespace with no interface but `lo` (Docker and Podman `--network none`).
    LoopbackOnly,
    /// A namespace with other interfaces (a bridge, a CNI network).
    Connected,
}

/// Applies `p` to `spec`; `capture` is the captured path, if any. Returns what was done, one
/// line each (for the log).
pub fn apply(
    spec: &mut Spec,
    p: &Profile,
    capture: Option<&Path>,
    net: NetView,
) -> Result<Vec<String>, Error> {
    let ann = spec.annotations().clone().unwrap_or_default();
    for own in [
        shadow_landlock::ANNOTATION,
        shadow_profile::seccomp::STACKED_ANNOTATION,
        shadow_profile::ENV_DENY_ANNOTATION,
        APPLIED_ANNOTATION,
    ] {
        if ann.contains_key(own) {
            return Err(Error(format!(
                "profile {:?}: the spec already sets {own}; a profile and a hand-written policy cannot both apply",
                p.name
            )));
        }
    }
    match (p.network.mode, net) {
        (NetMode::On, _) | (_, NetView::LoopbackOnly) => {}
        (mode, view) => {
            return Err(Error(format!(
                "profile {:?} allows {}, but the container {}: run it with --network none",
                p.name,
                if mode == NetMode::Off {
                    "no network"
                } else {
                    "only listed hosts (through shadow run's proxy)"
                },
                if view == NetView::Host {
                    "shares the host's network"
                } else {
                    "has a network interface besides lo"
                }
            )))
        }
    }
    // Hooks that run inside the container before the executor would escape every rule here.
    if let Some(h) = spec.hooks() {
        let inside = h.create_container().as_ref().is_some_and(|v| !v.is_empty())
            || h.start_container().as_ref().is_some_and(|v| !v.is_empty());
        if inside {
            return Err(Error(format!(
                "profile {:?}: the spec has createContainer or startContainer hooks, which run inside the container before the profile applies",
                p.name
            )));
        }
    }
    let mut done = Vec::new();
    let mut ann = ann;

    if let Some(filter) = shadow_profile::seccomp::build(&p.seccomp.deny) {
        let json = serde_json::to_string(&filter).map_err(|e| Error(e.to_string()))?;
        ann.insert(
            shadow_profile::seccomp::STACKED_ANNOTATION.to_string(),
            json,
        );
        done.push(format!(
            "seccomp: {} deny group(s) stacked on the container's filter",
            p.seccomp.deny.len()
        ));
    }
    let mut process = spec.process().clone().unwrap_or_default();
    process.set_no_new_privileges(Some(true));

    let home = process
        .env()
        .iter()
        .flatten()
        .find_map(|e| e.strip_prefix("HOME="))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"));
    let policy = landlock_policy(spec, p, &home, capture);
    ann.insert(shadow_landlock::ANNOTATION.to_string(), policy.to_json());
    done.push(format!(
        "landlock: {} writable tree(s), {} denied path(s)",
        policy.read_write.len(),
        policy.deny.len()
    ));

    let env_rule = shadow_profile::EnvDeny::of(p);
    if !env_rule.deny.is_empty() {
        let json = serde_json::to_string(&env_rule).map_err(|e| Error(e.to_string()))?;
        ann.insert(shadow_profile::ENV_DENY_ANNOTATION.to_string(), json);
    }
    if let Some(env) = process.env().clone() {
        let (kept, dropped): (Vec<String>, Vec<String>) = env.into_iter().partition(|e| {
            let name = e.split('=').next().unwrap_or_default();
            !env_rule.denies(name)
        });
        if !dropped.is_empty() {
            let names: Vec<&str> = dropped
                .iter()
                .map(|e| e.split('=').next().unwrap_or_default())
                .collect();
            done.push(format!("environment: removed {}", names.join(", ")));
        }
        process.set_env(Some(kept));
    }
    spec.set_process(Some(process));

    let mut linux = spec.linux().clone().unwrap_or_default();
    let mut r = linux.resources().clone().unwrap_or_default();
    if let Some(line) = limit(&mut r, p) {
        done.push(line);
    }
    linux.set_resources(Some(r));
    spec.set_linux(Some(linux));

    ann.insert(APPLIED_ANNOTATION.to_string(), p.name.clone());
    spec.set_annotations(Some(ann));
    Ok(done)
}

/// The profile's limits, or the spec's where lower.
fn limit(r: &mut LinuxResources, p: &Profile) -> Option<String> {
    let mut what = Vec::new();
    if let Some(m) = p
        .resources
        .memory
        .as_deref()
        .and_then(shadow_profile::schema::parse_size)
    {
        let have = r
            .memory()
            .as_ref()
            .and_then(|m| m.limit())
            .filter(|l| *l > 0);
        let want = have.map_or(m as i64, |h| h.min(m as i64));
        let mut mem = r
            .memory()
            .unwrap_or_else(|| LinuxMemoryBuilder::default().build().expect("no fields"));
        mem.set_limit(Some(want));
        // No swap beyond the limit (as `shadow run`): a runaway is stopped, not paged out.
        mem.set_swap(Some(want));
        r.set_memory(Some(mem));
        what.push(format!("memory {want}"));
    }
    if let Some(n) = p.resources.pids {
        let have = r.pids().as_ref().map(|p| p.limit()).filter(|l| *l > 0);
        let want = have.map_or(n as i64, |h| h.min(n as i64));
        r.set_pids(Some(
            LinuxPidsBuilder::default()
                .limit(want)
                .build()
                .expect("limit set"),
        ));
        what.push(format!("pids {want}"));
    }
    if let Some(c) = p.resources.cpus {
        let period: u64 = 100_000;
        let quota = (c * period as f64) as i64;
        let mut cpu = r
            .cpu()
            .clone()
            .unwrap_or_else(|| LinuxCpuBuilder::default().build().expect("no fields"));
        let lower = cpu.quota().filter(|q| *q > 0).is_some_and(|q| {
            let p = cpu.period().unwrap_or(period).max(1);
            (q as f64 / p as f64) <= c
        });
        if !lower {
            cpu.set_quota(Some(quota));
            cpu.set_period(Some(period));
        }
        r.set_cpu(Some(cpu));
        what.push(format!("cpus {c}"));
    }
    (!what.is_empty()).then(|| format!("cgroups: {}", what.join(", ")))
}

/// Read and execute everywhere; every right where the container can already write.
fn landlock_policy(
    spec: &Spec,
    p: &Profile,
    home: &Path,
    capture: Option<&Path>,
) -> shadow_landlock::Policy {
    let mut rw: Vec<PathBuf> = Vec::new();
    let root_rw = !spec
        .root()
        .as_ref()
        .and_then(|r| r.readonly())
        .unwrap_or(false);
    if root_rw {
        rw.push(PathBuf::from("/"));
    } else {
        for d in ["/dev", "/proc"] {
            rw.push(PathBuf::from(d));
        }
        for m in spec.mounts().iter().flatten() {
            let ro = m
                .options()
                .iter()
                .flatten()
                .any(|o| o == "ro" || o == "rro");
            let kind = m.typ().as_deref().unwrap_or("bind");
            let writable_kind = matches!(kind, "bind" | "tmpfs" | "overlay" | "devpts" | "mqueue");
            if !ro && writable_kind && !rw.iter().any(|w| m.destination().starts_with(w)) {
                rw.push(m.destination().clone());
            }
        }
    }
    let mut deny = Vec::new();
    for d in &p.filesystem.deny {
        if d.contains(['*', '?', '[']) {
            continue;
        }
        let path = if let Some(rest) = d.strip_prefix("~/") {
            home.join(rest)
        } else if d.starts_with('/') {
            PathBuf::from(d)
        } else if let Some(c) = capture {
            c.join(d)
        } else {
            continue;
        };
        deny.push(path);
    }
    shadow_landlock::Policy {
        version: shadow_landlock::VERSION,
        read_only: vec![PathBuf::from("/")],
        read_write: rw,
        deny,
        tcp_connect: p.landlock.tcp_connect.clone(),
        tcp_bind: p.landlock.tcp_bind.clone(),
        scope_signals: p
            .landlock
            .scope
            .contains(&shadow_profile::schema::ScopeName::Signal),
        scope_abstract_unix: p
            .landlock
            .scope
            .contains(&shadow_profile::schema::ScopeName::AbstractUnixSocket),
        best_effort: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::{MountBuilder, ProcessBuilder, RootBuilder};

    fn default_profile() -> Profile {
        shadow_profile::Registry::default()
            .resolve("default")
            .unwrap()
    }

    fn podman_like() -> Spec {
        let mut s = Spec::default();
        s.set_root(Some(
            RootBuilder::default()
                .path("rootfs")
                .readonly(true)
                .build()
                .unwrap(),
        ));
        s.set_mounts(Some(vec![
            MountBuilder::default()
                .destination("/proc")
                .typ("proc")
                .build()
                .unwrap(),
            MountBuilder::default()
                .destination("/tmp")
                .typ("tmpfs")
                .options(vec!["nosuid".to_string()])
                .build()
                .unwrap(),
            MountBuilder::default()
                .destination("/etc/hosts")
                .typ("bind")
                .source("/x/hosts")
                .options(vec!["rbind".to_string(), "ro".to_string()])
                .build()
                .unwrap(),
            MountBuilder::default()
                .destination("/work")
                .typ("bind")
                .source("/p")
                .options(vec!["rbind".to_string(), "rw".to_string()])
                .build()
                .unwrap(),
        ]));
        s.set_process(Some(
            ProcessBuilder::default()
                .args(vec!["sh".to_string()])
                .env(vec![
                    "PATH=/bin".to_string(),
                    "HOME=/home/agent".to_string(),
                    "GITHUB_TOKEN=x".to_string(),
                ])
                .build()
                .unwrap(),
        ));
        s
    }

    #[test]
    fn the_default_profile_on_a_read_only_container() {
        let mut s = podman_like();
        let done = apply(
            &mut s,
            &default_profile(),
            Some(Path::new("/work")),
            NetView::LoopbackOnly,
        )
        .unwrap();
        let ann = s.annotations().clone().unwrap();
        assert_eq!(ann[APPLIED_ANNOTATION], "default");
        let pol = shadow_landlock::Policy::from_json(&ann[shadow_landlock::ANNOTATION]).unwrap();
        assert_eq!(pol.read_only, [PathBuf::from("/")]);
        assert_eq!(
            pol.read_write,
            ["/dev", "/proc", "/tmp", "/work"].map(PathBuf::from)
        );
        assert!(pol.deny.contains(&PathBuf::from("/home/agent/.ssh")));
        assert!(pol.deny.contains(&PathBuf::from("/etc/shadow")));
        assert!(!pol.deny.iter().any(|d| d.to_string_lossy().contains('*')));
        assert!(pol.scope_signals && pol.scope_abstract_unix);
        let filter: oci_spec::runtime::LinuxSeccomp =
            serde_json::from_str(&ann[shadow_profile::seccomp::STACKED_ANNOTATION]).unwrap();
        assert_eq!(
            filter,
            shadow_profile::seccomp::build(&default_profile().seccomp.deny).unwrap()
        );
        let proc = s.process().as_ref().unwrap();
        assert_eq!(proc.no_new_privileges(), Some(true));
        assert_eq!(
            proc.env().as_ref().unwrap(),
            &["PATH=/bin".to_string(), "HOME=/home/agent".to_string()]
        );
        let r = s.linux().as_ref().unwrap().resources().as_ref().unwrap();
        assert_eq!(r.pids().as_ref().unwrap().limit(), 1024);
        assert_eq!(
            done,
            [
                "seccomp: 12 deny group(s) stacked on the container's filter",
                "landlock: 4 writable tree(s), 21 denied path(s)",
                "environment: removed GITHUB_TOKEN",
                "cgroups: pids 1024",
            ]
        );
    }

    #[test]
    fn a_writable_rootfs_is_writable_and_lower_limits_stay() {
        let mut s = podman_like();
        s.set_root(Some(
            RootBuilder::default()
                .path("rootfs")
                .readonly(false)
                .build()
                .unwrap(),
        ));
        let mut linux = oci_spec::runtime::Linux::default();
        linux.set_resources(Some(LinuxResources::default()));
        s.set_linux(Some(linux));
        let mut r = LinuxResources::default();
        r.set_pids(Some(LinuxPidsBuilder::default().limit(50).build().unwrap()));
        s.linux_mut().as_mut().unwrap().set_resources(Some(r));
        apply(&mut s, &default_profile(), None, NetView::LoopbackOnly).unwrap();
        let ann = s.annotations().clone().unwrap();
        let pol = shadow_landlock::Policy::from_json(&ann[shadow_landlock::ANNOTATION]).unwrap();
        assert_eq!(pol.read_write, [PathBuf::from("/")]);
        let r = s.linux().as_ref().unwrap().resources().as_ref().unwrap();
        assert_eq!(r.pids().as_ref().unwrap().limit(), 50);
    }

    #[test]
    fn network_and_conflicts_are_refused() {
        let mut s = podman_like();
        let e = apply(&mut s, &default_profile(), None, NetView::Host).unwrap_err();
        assert_eq!(
            e.0,
            "profile \"default\" allows no network, but the container shares the host's network: run it with --network none"
        );
        let e = apply(&mut s, &default_profile(), None, NetView::Connected).unwrap_err();
        assert!(e
            .0
            .ends_with("has a network interface besides lo: run it with --network none"));
        let mut ann = std::collections::HashMap::new();
        ann.insert(shadow_landlock::ANNOTATION.to_string(), "{}".to_string());
        s.set_annotations(Some(ann));
        let e = apply(&mut s, &default_profile(), None, NetView::LoopbackOnly).unwrap_err();
        assert!(e.0.contains("already sets run.shadow.landlock"), "{e}");
    }

    #[test]
    fn memory_and_cpu_limits_take_the_lower() {
        let mut p = default_profile();
        p.resources.memory = Some("1g".into());
        p.resources.cpus = Some(1.5);
        let mut s = podman_like();
        let mut r = LinuxResources::default();
        r.set_memory(Some(
            LinuxMemoryBuilder::default()
                .limit(256 << 20)
                .build()
                .unwrap(),
        ));
        let mut linux = oci_spec::runtime::Linux::default();
        linux.set_resources(Some(r));
        s.set_linux(Some(linux));
        apply(&mut s, &p, None, NetView::LoopbackOnly).unwrap();
        let r = s.linux().as_ref().unwrap().resources().as_ref().unwrap();
        assert_eq!(r.memory().unwrap().limit(), Some(256 << 20));
        let cpu = r.cpu().as_ref().unwrap();
        assert_eq!((cpu.quota(), cpu.period()), (Some(150_000), Some(100_000)));
    }
}
