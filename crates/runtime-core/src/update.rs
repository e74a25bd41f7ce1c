//! `update`: change a running container's cgroup limits.

use libcgroups::common::{CgroupManager, ControllerOpt};
use oci_spec::runtime::{
    LinuxCpuBuilder, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResources, LinuxResourcesBuilder,
};

use crate::error::{Error, Result};
use crate::lock::ContainerLock;
use crate::{cgroups, container, root, Globals};

/// Flag overrides of `update` (applied on top of `--resources`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdateFlags {
    /// Memory limit in bytes (-1: unlimited).
    pub memory: Option<i64>,
    /// Memory+swap limit in bytes.
    pub memory_swap: Option<i64>,
    /// Maximum number of pids (-1 or 0: unlimited).
    pub pids_limit: Option<i64>,
    /// CFS quota in microseconds.
    pub cpu_quota: Option<i64>,
    /// CFS period in microseconds.
    pub cpu_period: Option<u64>,
    /// CPU shares.
    pub cpu_shares: Option<u64>,
    /// Allowed CPUs, e.g. `0-1`.
    pub cpuset_cpus: Option<String>,
    /// Allowed memory nodes.
    pub cpuset_mems: Option<String>,
}

/// Parse a size: bytes, or with a `k`/`m`/`g`/`t` suffix (optionally followed by `b`), or -1.
pub fn parse_size(s: &str) -> Result<i64> {
    let bad = || {
        Error::invalid(format!(
            "invalid size {s:?} (examples: 1048576, 512m, 2g, -1)"
        ))
    };
    if s == "-1" {
        return Ok(-1);
    }
    let lower = s.to_ascii_lowercase();
    let t = lower.strip_suffix('b').unwrap_or(&lower);
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1i64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        Some('t') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let n: i64 = num.parse().map_err(|_| bad())?;
    if n < 0 {
        return Err(bad());
    }
    n.checked_mul(mult).ok_or_else(bad)
}

/// The resources to apply: `base` (from `--resources`) with the flags on top. Pure.
pub fn merge(base: Option<LinuxResources>, f: &UpdateFlags) -> Result<LinuxResources> {
    let mut r = base.unwrap_or_else(|| LinuxResourcesBuilder::default().build().expect("empty"));
    if f.memory.is_some() || f.memory_swap.is_some() {
        let mut m = r
            .memory()
            .unwrap_or_else(|| LinuxMemoryBuilder::default().build().expect("empty"));
        if let Some(v) = f.memory {
            m.set_limit(Some(v));
        }
        if let Some(v) = f.memory_swap {
            m.set_swap(Some(v));
        }
        r.set_memory(Some(m));
    }
    if let Some(v) = f.pids_limit {
        r.set_pids(Some(
            LinuxPidsBuilder::default()
                .limit(v)
                .build()
                .map_err(|e| Error::invalid(e.to_string()))?,
        ));
    }
    if f.cpu_quota.is_some()
        || f.cpu_period.is_some()
        || f.cpu_shares.is_some()
        || f.cpuset_cpus.is_some()
        || f.cpuset_mems.is_some()
    {
        let mut c = r
            .cpu()
            .clone()
            .unwrap_or_else(|| LinuxCpuBuilder::default().build().expect("empty"));
        if let Some(v) = f.cpu_quota {
            c.set_quota(Some(v));
        }
        if let Some(v) = f.cpu_period {
            c.set_period(Some(v));
        }
        if let Some(v) = f.cpu_shares {
            c.set_shares(Some(v));
        }
        if let Some(v) = &f.cpuset_cpus {
            c.set_cpus(Some(v.clone()));
        }
        if let Some(v) = &f.cpuset_mems {
            c.set_mems(Some(v.clone()));
        }
        r.set_cpu(Some(c));
    }
    Ok(r)
}

/// Parse `--resources` JSON (a `LinuxResources` object), naming field and position on error.
pub fn parse_resources(data: &[u8], source: &str) -> Result<LinuxResources> {
    let de = &mut serde_json::Deserializer::from_slice(data);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        Error::invalid(format!("{source}: field `{field}`: {}", e.into_inner()))
    })
}

/// Apply `resources` to container `id`.
pub fn update(g: &Globals, id: &str, resources: &LinuxResources) -> Result<()> {
    let root = root::existing(&g.root)?;
    let _lock = ContainerLock::acquire_existing(&root, id)?;
    let c = container::load(&root, id)?;
    if c.status() == libcontainer::container::ContainerStatus::Stopped {
        return Err(Error::new(
            crate::error::ErrorKind::NotRunning,
            format!("container \"{id}\" is not running: container not running"),
        ));
    }
    let m = cgroups::for_container(&c)?;
    m.apply(&ControllerOpt {
        resources,
        disable_oom_killer: false,
        oom_score_adj: None,
        freezer_state: None,
    })
    .map_err(|e| Error::from_libcontainer(format!("update container {id}"), &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size("512m").unwrap(), 512 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("64kb").unwrap(), 64 << 10);
        assert_eq!(parse_size("-1").unwrap(), -1);
        for b in ["", "m", "1x", "-5", "1.5g"] {
            assert!(parse_size(b).is_err(), "{b}");
        }
    }

    #[test]
    fn flags_override_resources_json() {
        let base = parse_resources(
            br#"{"memory":{"limit":1000,"reservation":10},"pids":{"limit":5}}"#,
            "-",
        )
        .unwrap();
        let f = UpdateFlags {
            memory: Some(2000),
            cpu_quota: Some(50000),
            cpu_period: Some(100000),
            ..Default::default()
        };
        let r = merge(Some(base), &f).unwrap();
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "memory": {"limit": 2000, "reservation": 10},
                "pids": {"limit": 5},
                "cpu": {"quota": 50000, "period": 100000}
            })
        );
    }

    #[test]
    fn bad_resources_json_names_field() {
        let e = parse_resources(br#"{"memory":{"limit":"lots"}}"#, "stdin").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("stdin: field `memory.limit`: invalid type"),
            "{e}"
        );
    }
}
