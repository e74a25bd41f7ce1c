//! Read-only commands: `state`, `list`, `ps`.

use std::path::{Path, PathBuf};
use std::process::Command;

use libcontainer::container::{Container, ContainerStatus};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::{cgroups, container, prepare, root, Globals};

/// `state` output, as runc prints it (and as the runtime spec's state plus runc's extras).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StateView {
    /// Spec version of the state format.
    pub oci_version: String,
    /// Container id.
    pub id: String,
    /// Init pid (0 once stopped).
    pub pid: i32,
    /// creating, created, running, paused, stopped.
    pub status: String,
    /// Bundle directory.
    pub bundle: PathBuf,
    /// Absolute rootfs path.
    pub rootfs: PathBuf,
    /// Creation time, RFC 3339.
    pub created: String,
    /// User name (or uid) of the creator.
    pub owner: String,
    /// Spec annotations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<std::collections::HashMap<String, String>>,
}

fn owner_name(uid: Option<u32>) -> String {
    let Some(uid) = uid else { return String::new() };
    nix::unistd::User::from_uid(uid.into())
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string())
}

fn rootfs_of(root: &Path, c: &Container) -> PathBuf {
    prepare::spec_as_created(root, c)
        .ok()
        .and_then(|s| s.root().as_ref().map(|r| r.path().clone()))
        .map(|p| {
            if p.is_absolute() {
                p
            } else {
                c.bundle().join(p)
            }
        })
        .unwrap_or_default()
}

/// The state of a loaded container.
pub fn view(root: &Path, c: &Container) -> StateView {
    let status = c.status();
    StateView {
        oci_version: c.state.oci_version.clone(),
        id: c.id().to_string(),
        pid: match status {
            ContainerStatus::Stopped => 0,
            _ => c.pid().map(|p| p.as_raw()).unwrap_or(0),
        },
        status: container::status_word(status).to_string(),
        bundle: c.bundle().clone(),
        rootfs: rootfs_of(root, c),
        created: c
            .created()
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
            .unwrap_or_default(),
        owner: owner_name(c.state.creator),
        annotations: c.state.annotations.clone(),
    }
}

/// `state ID`.
pub fn state(g: &Globals, id: &str) -> Result<StateView> {
    let root = root::existing(&g.root)?;
    // Under the lock: libcontainer rewrites state.json in place (truncate + write), and a reader
    // racing pause/resume/kill would see an empty file.
    let _lock = crate::lock::ContainerLock::acquire_existing(&root, id)?;
    let c = container::load(&root, id)?;
    Ok(view(&root, &c))
}

/// `list`: every container's state, by id.
pub fn list(g: &Globals) -> Result<Vec<StateView>> {
    let root = root::existing(&g.root)?;
    let mut out = Vec::new();
    for id in container::ids(&root)? {
        // A container deleted while we list is simply not listed.
        if let Ok(c) = container::load_locked(&root, &id) {
            out.push(view(&root, &c));
        }
    }
    Ok(out)
}

/// `list` as runc's table.
pub fn list_table(states: &[StateView]) -> String {
    let mut rows = vec![[
        "ID".to_string(),
        "PID".into(),
        "STATUS".into(),
        "BUNDLE".into(),
        "CREATED".into(),
        "OWNER".into(),
    ]];
    for s in states {
        rows.push([
            s.id.clone(),
            s.pid.to_string(),
            s.status.clone(),
            s.bundle.display().to_string(),
            s.created.clone(),
            s.owner.clone(),
        ]);
    }
    table(&rows)
}

fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.len());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == N {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}   ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `ps ID`: the pids in the container's cgroup.
pub fn pids(g: &Globals, id: &str) -> Result<Vec<i32>> {
    let root = root::existing(&g.root)?;
    let c = container::load_locked(&root, id)?;
    if c.status() == ContainerStatus::Stopped {
        return Ok(Vec::new());
    }
    cgroups::pids(&c)
}

/// `ps ID [ps args]` table: runs `ps` (default `-ef`) on the host and keeps the header and the
/// lines whose PID column is one of the container's.
pub fn ps_table(pids: &[i32], ps_args: &[String]) -> Result<String> {
    let args: Vec<String> = if ps_args.is_empty() {
        vec!["-ef".into()]
    } else {
        ps_args.to_vec()
    };
    let out = Command::new("ps")
        .args(&args)
        .output()
        .map_err(|e| Error::io("run ps", e))?;
    if !out.status.success() {
        return Err(Error::runtime(format!(
            "ps {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    filter_ps(&String::from_utf8_lossy(&out.stdout), pids)
}

/// Keep the header and rows of `ps` output whose PID column is in `pids`.
pub fn filter_ps(text: &str, pids: &[i32]) -> Result<String> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let col = header
        .split_whitespace()
        .position(|h| h == "PID")
        .ok_or_else(|| Error::runtime("ps output has no PID column"))?;
    let mut out = format!("{header}\n");
    for l in lines {
        if let Some(Ok(pid)) = l.split_whitespace().nth(col).map(str::parse::<i32>) {
            if pids.contains(&pid) {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ps_filter_keeps_header_and_matching_rows() {
        let text = "UID PID PPID C STIME TTY TIME CMD\nroot 1 0 0 10:00 ? 00:00:01 init\nroot 42 1 0 10:00 ? 00:00:00 sh\nroot 420 1 0 10:00 ? 00:00:00 x\n";
        assert_eq!(
            filter_ps(text, &[42]).unwrap(),
            "UID PID PPID C STIME TTY TIME CMD\nroot 42 1 0 10:00 ? 00:00:00 sh\n"
        );
    }

    #[test]
    fn list_table_aligns() {
        let s = StateView {
            oci_version: "1.0.2".into(),
            id: "c1".into(),
            pid: 7,
            status: "running".into(),
            bundle: "/b".into(),
            rootfs: "/b/rootfs".into(),
            created: "T".into(),
            owner: "root".into(),
            annotations: None,
        };
        assert_eq!(
            list_table(&[s]),
            "ID   PID   STATUS    BUNDLE   CREATED   OWNER\nc1   7     running   /b       T         root\n"
        );
    }
}
