//! Host probes: the only place that looks at the machine. Each probe returns
//! plain data that [`crate::spec::build_spec`] takes, so the builder stays
//! pure and tests can feed it fixed host views.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};

/// Kind of a top-level entry of `/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A directory: bind-mounted read-only unless excluded.
    Dir,
    /// A symlink (merged /usr: `/bin -> usr/bin`): recreated in the skeleton.
    Symlink {
        /// The link target, verbatim.
        target: PathBuf,
    },
    /// Anything else (a stray regular file at `/`, a socket…): not exposed.
    Other,
}

/// One top-level entry of `/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostEntry {
    /// File name (no slash), e.g. `usr`.
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
}

impl HostEntry {
    /// A directory entry.
    pub fn dir(name: &str) -> Self {
        HostEntry {
            name: name.to_string(),
            kind: EntryKind::Dir,
        }
    }

    /// A symlink entry.
    pub fn symlink(name: &str, target: &str) -> Self {
        HostEntry {
            name: name.to_string(),
            kind: EntryKind::Symlink {
                target: PathBuf::from(target),
            },
        }
    }
}

/// What the spec builder needs to know about the host filesystem.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostView {
    /// Top-level entries of `/`, sorted by name.
    pub entries: Vec<HostEntry>,
    /// Kind of `/var/run` (`None`: absent). On Debian it is a symlink to
    /// `/run`, which the fresh `/run` tmpfs already covers; a real directory
    /// needs its own tmpfs, or host daemon sockets (`/var/run/docker.sock`)
    /// would be reachable through the read-only `/var` bind.
    pub var_run: Option<EntryKind>,
    /// Existing `/etc/ssh/ssh_host_*_key` files (private host keys). Masked
    /// one by one because `maskedPaths` takes no globs.
    pub ssh_host_keys: Vec<PathBuf>,
}

fn entry_kind(path: &Path) -> std::io::Result<EntryKind> {
    let meta = fs::symlink_metadata(path)?;
    Ok(if meta.file_type().is_symlink() {
        EntryKind::Symlink {
            target: fs::read_link(path)?,
        }
    } else if meta.is_dir() {
        EntryKind::Dir
    } else {
        EntryKind::Other
    })
}

/// Probes the host's `/`.
pub fn probe_host_view() -> Result<HostView> {
    probe_host_view_at(Path::new("/"))
}

/// Probes a directory as if it were `/` (tests use a temp dir).
pub fn probe_host_view_at(root: &Path) -> Result<HostView> {
    let mut entries = Vec::new();
    let dir = fs::read_dir(root).ctx(|| format!("cannot read {}", root.display()))?;
    for entry in dir {
        let entry = entry.ctx(|| format!("cannot read {}", root.display()))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            // A non-UTF-8 top-level name cannot go into a JSON spec: not exposed.
            continue;
        };
        let kind = entry_kind(&entry.path()).ctx(|| format!("cannot stat /{name}"))?;
        entries.push(HostEntry { name, kind });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));

    let var_run = entry_kind(&root.join("var/run")).ok();

    let mut ssh_host_keys = Vec::new();
    if let Ok(dir) = fs::read_dir(root.join("etc/ssh")) {
        for entry in dir.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with("ssh_host_") && name.ends_with("_key") {
                ssh_host_keys.push(PathBuf::from("/etc/ssh").join(name));
            }
        }
    }
    ssh_host_keys.sort();
    Ok(HostView {
        entries,
        var_run,
        ssh_host_keys,
    })
}

/// The invoking user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserInfo {
    /// Real uid.
    pub uid: u32,
    /// Real gid.
    pub gid: u32,
    /// Home directory (absolute).
    pub home: PathBuf,
    /// Login name.
    pub username: String,
}

impl UserInfo {
    /// Whether this is the superuser.
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }
}

/// Probes the invoking user: real uid/gid, `$HOME` (falls back to the passwd
/// entry), name from the passwd entry (falls back to `$USER`, then the uid).
pub fn probe_user() -> Result<UserInfo> {
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    let pw = nix::unistd::User::from_uid(uid).ok().flatten();
    user_info_from(
        uid.as_raw(),
        gid.as_raw(),
        std::env::var_os("HOME").map(PathBuf::from),
        std::env::var("USER").ok(),
        pw.map(|u| (u.name, u.dir)),
    )
}

/// Pure part of [`probe_user`].
pub fn user_info_from(
    uid: u32,
    gid: u32,
    env_home: Option<PathBuf>,
    env_user: Option<String>,
    passwd: Option<(String, PathBuf)>,
) -> Result<UserInfo> {
    let env_home = env_home.filter(|h| h.is_absolute() && h != Path::new("/"));
    let home = env_home
        .or_else(|| passwd.as_ref().map(|(_, d)| d.clone()))
        .filter(|h| h.is_absolute())
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "cannot determine the home directory of uid {uid} (set HOME)"
            ))
        })?;
    let username = passwd
        .map(|(n, _)| n)
        .or(env_user)
        .unwrap_or_else(|| uid.to_string());
    Ok(UserInfo {
        uid,
        gid,
        home,
        username,
    })
}

/// Hard rlimits of the invoking process: the sandbox cannot raise above them
/// (raising needs CAP_SYS_RESOURCE in the initial user namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostLimits {
    /// Hard RLIMIT_NOFILE.
    pub nofile_hard: u64,
    /// Hard RLIMIT_NPROC.
    pub nproc_hard: u64,
}

impl Default for HostLimits {
    fn default() -> Self {
        HostLimits {
            nofile_hard: u64::MAX,
            nproc_hard: u64::MAX,
        }
    }
}

/// Probes the hard rlimits (unlimited where the probe fails).
pub fn probe_host_limits() -> HostLimits {
    use nix::sys::resource::{getrlimit, Resource};
    let hard = |r| getrlimit(r).map(|(_, h)| h).unwrap_or(u64::MAX);
    HostLimits {
        nofile_hard: hard(Resource::RLIMIT_NOFILE),
        nproc_hard: hard(Resource::RLIMIT_NPROC),
    }
}

/// Total RAM in bytes, from `/proc/meminfo`.
pub fn total_ram_bytes() -> Result<u64> {
    let text = fs::read_to_string("/proc/meminfo").ctx(|| "cannot read /proc/meminfo".into())?;
    parse_meminfo_total(&text)
        .ok_or_else(|| Error::InvalidInput("/proc/meminfo has no MemTotal line".into()))
}

/// Parses `MemTotal:  24683584 kB` into bytes.
pub fn parse_meminfo_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut parts = line["MemTotal:".len()..].split_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") | None => n.checked_mul(1024),
        _ => None,
    }
}

/// Whether resource limits can be enforced with cgroups for this user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "reason")]
pub enum CgroupAccess {
    /// The runtime can create a cgroup for the session.
    Usable,
    /// It cannot; the builder falls back to rlimits. The reason is for
    /// `shadow doctor`.
    Unavailable(String),
}

impl CgroupAccess {
    /// `true` for [`CgroupAccess::Usable`].
    pub fn is_usable(&self) -> bool {
        matches!(self, CgroupAccess::Usable)
    }
}

/// Probes cgroup usability. Root: always (v1, hybrid or v2). Rootless: only
/// on a pure cgroup v2 hierarchy where our own cgroup is delegated to us
/// (owned by our uid) with the memory and pids controllers available; a
/// rootless runtime cannot create v1 cgroups at all.
pub fn probe_cgroups(user: &UserInfo) -> CgroupAccess {
    if user.is_root() {
        return CgroupAccess::Usable;
    }
    let is_v2 = nix::sys::statfs::statfs("/sys/fs/cgroup")
        .map(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
        .unwrap_or(false);
    if !is_v2 {
        return CgroupAccess::Unavailable(
            "/sys/fs/cgroup is not a cgroup v2 hierarchy (v1/hybrid needs root)".into(),
        );
    }
    let own = fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("0::").map(str::to_string))
        })
        .unwrap_or_default();
    let dir = Path::new("/sys/fs/cgroup").join(own.trim_start_matches('/'));
    let owner = fs::metadata(&dir).map(|m| m.uid()).ok();
    let controllers = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    rootless_cgroup_access(user.uid, &dir, owner, &controllers)
}

/// Pure part of [`probe_cgroups`] for the rootless v2 case.
pub fn rootless_cgroup_access(
    uid: u32,
    dir: &Path,
    owner: Option<u32>,
    controllers: &str,
) -> CgroupAccess {
    if owner != Some(uid) {
        return CgroupAccess::Unavailable(format!(
            "cgroup {} is not delegated to uid {uid}",
            dir.display()
        ));
    }
    let have: Vec<&str> = controllers.split_whitespace().collect();
    let missing: Vec<&str> = ["memory", "pids"]
        .into_iter()
        .filter(|c| !have.contains(c))
        .collect();
    if missing.is_empty() {
        CgroupAccess::Usable
    } else {
        CgroupAccess::Unavailable(format!(
            "controllers {} not delegated in {}",
            missing.join(","),
            dir.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo() {
        let t = "MemTotal:       24683584 kB\nMemFree:        1 kB\n";
        assert_eq!(parse_meminfo_total(t), Some(24683584 * 1024));
        assert_eq!(parse_meminfo_total("MemFree: 1 kB"), None);
        assert!(total_ram_bytes().unwrap() > 0);
    }

    #[test]
    fn user_info() {
        let pw = Some(("alice".to_string(), PathBuf::from("/home/alice")));
        let u = user_info_from(1000, 1000, None, None, pw.clone()).unwrap();
        assert_eq!(u.home, PathBuf::from("/home/alice"));
        assert_eq!(u.username, "alice");
        let u = user_info_from(1000, 1000, Some("/srv/a".into()), None, pw).unwrap();
        assert_eq!(u.home, PathBuf::from("/srv/a"), "$HOME wins");
        let u = user_info_from(7, 7, Some("/h".into()), Some("bob".into()), None).unwrap();
        assert_eq!(u.username, "bob");
        assert!(user_info_from(7, 7, Some("rel".into()), None, None).is_err());
        assert!(probe_user().is_ok());
    }

    #[test]
    fn probe_tempdir_root() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        fs::create_dir_all(r.join("usr/bin")).unwrap();
        fs::create_dir_all(r.join("etc/ssh")).unwrap();
        fs::create_dir_all(r.join("var")).unwrap();
        std::os::unix::fs::symlink("usr/bin", r.join("bin")).unwrap();
        std::os::unix::fs::symlink("/run", r.join("var/run")).unwrap();
        fs::write(r.join("container_info.json"), "{}").unwrap();
        for f in [
            "ssh_host_ed25519_key",
            "ssh_host_ed25519_key.pub",
            "ssh_config",
        ] {
            fs::write(r.join("etc/ssh").join(f), "").unwrap();
        }
        let v = probe_host_view_at(r).unwrap();
        assert_eq!(
            v.entries,
            vec![
                HostEntry::symlink("bin", "usr/bin"),
                HostEntry {
                    name: "container_info.json".into(),
                    kind: EntryKind::Other
                },
                HostEntry::dir("etc"),
                HostEntry::dir("usr"),
                HostEntry::dir("var"),
            ]
        );
        assert_eq!(
            v.var_run,
            Some(EntryKind::Symlink {
                target: "/run".into()
            })
        );
        assert_eq!(
            v.ssh_host_keys,
            vec![PathBuf::from("/etc/ssh/ssh_host_ed25519_key")]
        );
        assert!(probe_host_view()
            .unwrap()
            .entries
            .iter()
            .any(|e| e.name == "usr"));
    }

    #[test]
    fn cgroups() {
        let d = Path::new("/sys/fs/cgroup/user.slice");
        assert!(rootless_cgroup_access(1000, d, Some(1000), "cpu memory pids").is_usable());
        assert!(!rootless_cgroup_access(1000, d, Some(0), "cpu memory pids").is_usable());
        assert!(!rootless_cgroup_access(1000, d, Some(1000), "cpu memory").is_usable());
        let root = UserInfo {
            uid: 0,
            gid: 0,
            home: "/root".into(),
            username: "root".into(),
        };
        assert!(probe_cgroups(&root).is_usable());
        let nobody = UserInfo { uid: 65534, ..root };
        // This machine is hybrid v1: rootless cannot use it.
        let _ = probe_cgroups(&nobody);
    }

    #[test]
    fn limits() {
        let l = probe_host_limits();
        assert!(l.nofile_hard > 0 && l.nproc_hard > 0);
    }
}
