//! Thin helpers over libcgroups' manager for a container's cgroup: pids, stats, freezing,
//! updates and removal. v1, v2 and hybrid layouts are all handled by libcgroups' detection.

use std::path::Path;

use libcgroups::common::{
    create_cgroup_manager, AnyCgroupManager, CgroupConfig, CgroupManager, ControllerOpt,
};
use libcontainer::container::Container;
use oci_spec::runtime::Spec;

use crate::error::{Error, Result};

/// The manager for a path.
pub fn manager(path: &Path, id: &str, systemd: bool) -> Result<AnyCgroupManager> {
    create_cgroup_manager(CgroupConfig {
        cgroup_path: path.to_path_buf(),
        systemd_cgroup: systemd,
        container_name: id.to_string(),
    })
    .map_err(|e| Error::from_libcontainer("cgroup", &e))
}

/// The manager for a container's cgroup (path from its saved config).
pub fn for_container(c: &Container) -> Result<AnyCgroupManager> {
    let cfg = c
        .spec()
        .map_err(|e| Error::from_libcontainer("read container config", &e))?;
    manager(&cfg.cgroup_path, c.id(), c.systemd())
}

/// Best-effort removal of a cgroup (kills what is left inside). Used when undoing a failed create.
pub fn remove(path: &Path, id: &str, systemd: bool) {
    if let Ok(m) = manager(path, id, systemd) {
        let _ = m.remove();
    }
}

/// Pids in the container's cgroup.
pub fn pids(c: &Container) -> Result<Vec<i32>> {
    let m = for_container(c)?;
    let mut p: Vec<i32> = m
        .get_all_pids()
        .map_err(|e| Error::from_libcontainer("list cgroup pids", &e))?
        .into_iter()
        .map(|p| p.as_raw())
        .collect();
    p.sort_unstable();
    p.dedup();
    Ok(p)
}

/// Apply `linux.resources.memory.disableOOMKiller`, which libcontainer 0.7 drops (it always
/// passes `disable_oom_killer: false` when it applies the spec's resources at create).
pub fn apply_disable_oom_killer(c: &Container, spec: &Spec) -> Result<()> {
    let Some(resources) = spec.linux().as_ref().and_then(|l| l.resources().as_ref()) else {
        return Ok(());
    };
    let wanted = resources
        .memory()
        .as_ref()
        .and_then(|m| m.disable_oom_killer())
        .unwrap_or(false);
    if !wanted {
        return Ok(());
    }
    for_container(c)?
        .apply(&ControllerOpt {
            resources,
            disable_oom_killer: true,
            oom_score_adj: None,
            freezer_state: None,
        })
        .map_err(|e| Error::from_libcontainer("disable the OOM killer", &e))
}
