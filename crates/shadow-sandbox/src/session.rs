//! The per-user session store.
//!
//! ```text
//! <store>/sessions/<id>/meta.json
//!                      /upper/        overlay upper: the session's changes
//!                      /work/         overlay work dir (same filesystem)
//!                      /bundle/config.json
//!                      /bundle/rootfs/ skeleton root
//! ```
//!
//! The store is per user (`$XDG_DATA_HOME/shadow`, `/var/lib/shadow` for
//! root, `$SHADOW_STORE` overrides) and mode 0700. Threat: other local
//! users reading the captured changes (which may contain secrets the agent
//! wrote) or planting changes that a later `shadow apply` would copy into
//! the project.
//!
//! No global lock: sessions are created by an atomic rename of a fully
//! built directory, so several sessions of one project (or many projects)
//! can be created concurrently, and a reader never sees a half-made one.

use std::ffi::OsString;
use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use oci_spec::runtime::Spec;
use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::hostview::UserInfo;
use crate::spec::ResourceLimits;

/// Environment variable that overrides the store location.
pub const STORE_ENV: &str = "SHADOW_STORE";

/// Store of root.
pub const ROOT_STORE: &str = "/var/lib/shadow";

/// Version of the meta.json layout.
pub const META_VERSION: u32 = 1;

const MAX_ID_LEN: usize = 64;
const TMP_PREFIX: &str = ".tmp-";
const TRASH_PREFIX: &str = ".trash-";
const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// Rejects anything but `[a-z0-9-]{1,64}` not starting with `-`. Threat:
/// an id like `../../x` from the command line turning `load`/`remove` into
/// reads or deletions outside the store.
pub fn validate_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && !id.starts_with('-')
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidId(id.to_string()))
    }
}

/// `YYYYMMDD-HHMMSS-xxxxxx` (UTC, 30 random bits in base32): sorts by
/// creation time, and the charset is safe in paths, cgroup names and
/// container ids.
pub fn format_session_id(now: DateTime<Utc>, random: u32) -> String {
    let mut suffix = String::with_capacity(6);
    for i in 0..6 {
        suffix.push(BASE32[((random >> (5 * i)) & 31) as usize] as char);
    }
    format!("{}-{suffix}", now.format("%Y%m%d-%H%M%S"))
}

fn random_u32() -> Result<u32> {
    let mut b = [0u8; 4];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .ctx(|| "cannot read /dev/urandom".into())?;
    Ok(u32::from_ne_bytes(b))
}

/// A new session id for now.
pub fn new_session_id() -> Result<String> {
    Ok(format_session_id(Utc::now(), random_u32()?))
}

fn timestamp(t: DateTime<Utc>) -> String {
    // Fixed width, so timestamps compare correctly as strings.
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Resolves the store root: `$SHADOW_STORE`, else `/var/lib/shadow` for
/// root, else `$XDG_DATA_HOME/shadow` (if absolute), else
/// `~/.local/share/shadow`. Relative `SHADOW_STORE` values are ignored.
pub fn resolve_store_root(
    shadow_store: Option<OsString>,
    xdg_data_home: Option<OsString>,
    user: &UserInfo,
) -> PathBuf {
    let abs = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(p) = abs(shadow_store) {
        return p;
    }
    if user.is_root() {
        return PathBuf::from(ROOT_STORE);
    }
    match abs(xdg_data_home) {
        Some(x) => x.join("shadow"),
        None => user.home.join(".local/share/shadow"),
    }
}

/// Lifecycle state recorded in meta.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionState {
    /// The supervisor is (or was, if it crashed) running the command.
    Running,
    /// The command exited (see `exit_status`).
    Exited,
    /// Killed because it ran past its time limit.
    TimedOut,
    /// The sandbox could not be started or the supervisor failed.
    Failed,
}

/// A process identified by pid *and* start time. Threat: pid reuse: after
/// the supervisor dies its pid may belong to an unrelated process, which a
/// bare pid check would take for a running session (and e.g. refuse to
/// discard it, or signal the wrong process).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRef {
    /// Pid in the store owner's pid namespace.
    pub pid: u32,
    /// Field 22 of `/proc/PID/stat` (clock ticks since boot).
    pub start_time: u64,
}

/// Extracts the start time (field 22) from a `/proc/PID/stat` line. The
/// command name (field 2) may contain spaces and parentheses, so fields are
/// counted after the last `)`.
pub fn parse_stat_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // rest starts at field 3 (state); field 22 is the 20th from there.
    rest.split_whitespace().nth(19)?.parse().ok()
}

impl ProcessRef {
    /// The process `pid` as it is now, `None` if there is none.
    pub fn of(pid: u32) -> Option<ProcessRef> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        Some(ProcessRef {
            pid,
            start_time: parse_stat_start_time(&stat)?,
        })
    }

    /// The calling process.
    pub fn current() -> Result<ProcessRef> {
        ProcessRef::of(std::process::id()).ok_or_else(|| Error::Io {
            context: "cannot read /proc/self/stat".into(),
            source: std::io::Error::from(ErrorKind::NotFound),
        })
    }

    /// Whether this very process (same pid, same start time) still exists
    /// and is not a zombie.
    pub fn is_alive(&self) -> bool {
        let Ok(stat) = fs::read_to_string(format!("/proc/{}/stat", self.pid)) else {
            return false;
        };
        let zombie = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|s| s == "Z" || s == "X");
        !zombie && parse_stat_start_time(&stat) == Some(self.start_time)
    }
}

/// Contents of `meta.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// Layout version ([`META_VERSION`]).
    pub version: u32,
    /// Session id.
    pub id: String,
    /// Absolute, canonical project directory.
    pub project: PathBuf,
    /// argv of the sandboxed command.
    pub command: Vec<String>,
    /// Profile name.
    pub profile: String,
    /// Start, RFC 3339 UTC with microseconds.
    pub started_at: String,
    /// End, when known.
    pub ended_at: Option<String>,
    /// Exit status of the command (128+N for signal N), when known.
    pub exit_status: Option<i32>,
    /// Lifecycle state.
    pub state: SessionState,
    /// Absolute path of the overlay upper dir.
    pub upper: PathBuf,
    /// The supervising shadow process.
    pub supervisor: Option<ProcessRef>,
    /// Resource limits the session ran with.
    pub limits: ResourceLimits,
    /// Set when an engine (Docker, Podman, containerd) started the container and
    /// shadow-runtime captured it: the engine's container id. Such a session is finished by
    /// the runtime's `delete`, not by a shadow process (`supervisor` is the container's init).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

impl SessionMeta {
    /// Marks the session ended now.
    pub fn finish(&mut self, state: SessionState, exit_status: Option<i32>) {
        self.state = state;
        self.exit_status = exit_status;
        self.ended_at = Some(timestamp(Utc::now()));
    }
}

/// What `create` needs.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// Project directory (canonicalized by `create`; must exist).
    pub project: PathBuf,
    /// argv.
    pub command: Vec<String>,
    /// Profile name.
    pub profile: String,
    /// Limits used.
    pub limits: ResourceLimits,
    /// Supervisor; `None` means the calling process.
    pub supervisor: Option<ProcessRef>,
    /// The engine's container id, for a captured engine container.
    pub engine: Option<String>,
}

/// A session on disk.
#[derive(Debug, Clone)]
pub struct Session {
    /// `<store>/sessions/<id>`.
    pub dir: PathBuf,
    /// Its meta.json.
    pub meta: SessionMeta,
}

impl Session {
    /// Session id.
    pub fn id(&self) -> &str {
        &self.meta.id
    }
    /// `meta.json`.
    pub fn meta_path(&self) -> PathBuf {
        self.dir.join("meta.json")
    }
    /// Overlay upper dir.
    pub fn upper_dir(&self) -> PathBuf {
        self.dir.join("upper")
    }
    /// Overlay work dir.
    pub fn work_dir(&self) -> PathBuf {
        self.dir.join("work")
    }
    /// OCI bundle dir.
    pub fn bundle_dir(&self) -> PathBuf {
        self.dir.join("bundle")
    }
    /// Bundle `config.json`.
    pub fn config_path(&self) -> PathBuf {
        self.bundle_dir().join("config.json")
    }
    /// Rootfs skeleton dir.
    pub fn rootfs_dir(&self) -> PathBuf {
        self.bundle_dir().join("rootfs")
    }

    /// Whether the session is running: state `running` and its supervisor
    /// (same pid and start time) alive. A `running` session whose
    /// supervisor is gone crashed and counts as not running.
    pub fn is_running(&self) -> bool {
        self.meta.state == SessionState::Running
            && self.meta.supervisor.is_some_and(|s| s.is_alive())
    }

    /// Errors with "session X's project /p no longer exists" when the
    /// project directory is gone.
    pub fn check_project(&self) -> Result<()> {
        if self.meta.project.is_dir() {
            Ok(())
        } else {
            Err(Error::ProjectGone {
                id: self.meta.id.clone(),
                project: self.meta.project.clone(),
            })
        }
    }

    /// Writes the bundle's config.json atomically (a temporary file renamed over it: readers,
    /// such as an engine's `delete` of a captured container, never see half of it). Not synced:
    /// a bundle only matters while its container runs, and a crash ends that (the session's
    /// state is in meta.json, which is synced); two fsyncs were a tenth of a millisecond each
    /// of every start.
    pub fn write_config(&self, spec: &Spec) -> Result<()> {
        let json = serde_json::to_vec_pretty(spec)
            .map_err(|e| Error::InvalidInput(format!("cannot serialize spec: {e}")))?;
        replace(&self.config_path(), &json, false)
    }
}

fn mkdir_private(path: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .mode(0o700)
        .create(path)
        .ctx(|| format!("cannot create {}", path.display()))
}

fn fsync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .ctx(|| format!("cannot sync {}", dir.display()))
}

/// Writes `path` via a unique temp file in the same dir + fsync + rename +
/// dir fsync: a crash leaves either the old or the new content, never a
/// truncated file.
fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    replace(path, data, true)
}

/// Writes `path` via a unique temp file in the same dir + rename, so that a
/// reader never sees half of it; with `sync`, the file and then the directory
/// are fsynced too (durable, not only atomic).
fn replace(path: &Path, data: &[u8], sync: bool) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp-{:08x}", random_u32()?));
    let res = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .ctx(|| format!("cannot create {}", tmp.display()))?;
        f.write_all(data)
            .and_then(|()| if sync { f.sync_all() } else { Ok(()) })
            .ctx(|| format!("cannot write {}", tmp.display()))?;
        fs::rename(&tmp, path).ctx(|| format!("cannot replace {}", path.display()))
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res?;
    if sync {
        fsync_dir(dir)?;
    }
    Ok(())
}

/// Removes a tree, first giving directories u+rwx: the kernel creates the
/// overlay's `work/work` with mode 000, which `remove_dir_all` cannot enter.
/// Symlinks are removed, never followed.
fn remove_tree(path: &Path) -> std::io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    if !meta.is_dir() {
        return fs::remove_file(path);
    }
    if meta.mode() & 0o700 != 0o700 {
        fs::set_permissions(path, fs::Permissions::from_mode(meta.mode() | 0o700))?;
    }
    for entry in fs::read_dir(path)? {
        remove_tree(&entry?.path())?;
    }
    fs::remove_dir(path)
}

/// How old a marker in `running/` without a session must be to be removed: far longer than
/// creating a session takes (the marker comes first).
pub const STALE_MARKER: std::time::Duration = std::time::Duration::from_secs(60);

/// This boot's id (`/proc/sys/kernel/random/boot_id`), or a constant where it cannot be read.
fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The session store.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// Opens (creating, mode 0700) the store at `root`.
    pub fn open(root: impl Into<PathBuf>) -> Result<Store> {
        let root = root.into();
        if !root.is_absolute() {
            return Err(Error::InvalidInput(format!(
                "store path {} must be absolute",
                root.display()
            )));
        }
        fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(root.join("sessions"))
            .ctx(|| format!("cannot create store {}", root.display()))?;
        // A pre-existing, looser sessions dir (made by hand, or an old
        // version) is tightened: it is the one that guards every session.
        let sessions = root.join("sessions");
        let meta = fs::metadata(&sessions).ctx(|| format!("cannot stat {}", sessions.display()))?;
        if meta.mode() & 0o077 != 0 {
            fs::set_permissions(&sessions, fs::Permissions::from_mode(0o700))
                .ctx(|| format!("cannot chmod {}", sessions.display()))?;
        }
        Ok(Store { root })
    }

    /// Opens the store of `user` from the environment (see
    /// [`resolve_store_root`]).
    pub fn open_default(user: &UserInfo) -> Result<Store> {
        Store::open(resolve_store_root(
            std::env::var_os(STORE_ENV),
            std::env::var_os("XDG_DATA_HOME"),
            user,
        ))
    }

    /// Store root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn sessions(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// `running/`: one empty file per session whose state is `running`, so that finding the
    /// sessions a crash interrupted (which every command does) costs what is running, not
    /// every session ever kept. A marker is made before its session exists and removed after
    /// its state leaves `running`. The markers are not synced: a reboot (the crash the reaper
    /// exists for) changes the boot id recorded in `running/.indexed`, and the first listing
    /// after it scans every session again; so does the first listing of a store made by an
    /// older shadow.
    fn running_dir(&self) -> PathBuf {
        self.root.join("running")
    }

    /// The sessions that may be in state `running`: those with a marker in `running/` (see
    /// [`Store::running_dir`]), or all sessions in that state after a reboot. Markers whose
    /// session has finished are removed here, and so are those whose session does not exist
    /// after [`STALE_MARKER`] (younger ones may belong to a session being created).
    pub fn maybe_running(&self) -> Result<Vec<Session>> {
        let dir = self.running_dir();
        let stamp = dir.join(".indexed");
        let boot = boot_id();
        if fs::read_to_string(&stamp).ok().as_deref() != Some(boot.as_str()) {
            let running: Vec<Session> = self
                .list(None)?
                .into_iter()
                .filter(|s| s.meta.state == SessionState::Running)
                .collect();
            for s in &running {
                self.mark_running(s.id())?;
            }
            // Made only once every marker is: a scan cut short is redone next time.
            fs::write(&stamp, &boot).ctx(|| format!("cannot write {}", stamp.display()))?;
            return Ok(running);
        }
        let names: Vec<String> = fs::read_dir(&dir)
            .ctx(|| format!("cannot read {}", dir.display()))?
            .filter_map(|e| e.ok()?.file_name().to_str().map(str::to_string))
            .filter(|n| validate_id(n).is_ok())
            .collect();
        let mut out = Vec::new();
        for name in names {
            match self.load(&name) {
                Ok(s) if s.meta.state == SessionState::Running => out.push(s),
                Ok(_) => self.unmark_running(&name),
                Err(Error::NoSession(_)) => {
                    let old = fs::metadata(dir.join(&name))
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age > STALE_MARKER);
                    if old {
                        self.unmark_running(&name);
                    }
                }
                Err(e) => tracing::warn!("skipping session {name}: {e}"),
            }
        }
        out.sort_by(|a, b| (&a.meta.started_at, &a.meta.id).cmp(&(&b.meta.started_at, &b.meta.id)));
        Ok(out)
    }

    fn mark_running(&self, id: &str) -> Result<()> {
        let dir = self.running_dir();
        if let Err(e) = fs::DirBuilder::new().mode(0o700).create(&dir) {
            if e.kind() != ErrorKind::AlreadyExists {
                return Err(e).ctx(|| format!("cannot create {}", dir.display()));
            }
        }
        fs::File::create(dir.join(id))
            .map(drop)
            .ctx(|| format!("cannot create {}", dir.join(id).display()))
    }

    fn unmark_running(&self, id: &str) {
        let _ = fs::remove_file(self.running_dir().join(id));
    }

    /// Creates a session: builds `.tmp-<id>` fully (meta.json, upper/,
    /// work/, bundle/rootfs/), then renames it into place. Retries with a
    /// fresh id on the (2^-30 per second) chance of a collision.
    pub fn create(&self, new: &NewSession) -> Result<Session> {
        let project =
            fs::canonicalize(&new.project).ctx(|| format!("project {}", new.project.display()))?;
        if !project.is_dir() {
            return Err(Error::InvalidInput(format!(
                "project {} is not a directory",
                project.display()
            )));
        }
        let supervisor = match new.supervisor {
            Some(s) => s,
            None => ProcessRef::current()?,
        };
        let sessions = self.sessions();
        for _ in 0..8 {
            let id = new_session_id()?;
            let dir = sessions.join(&id);
            if fs::symlink_metadata(&dir).is_ok() {
                continue;
            }
            let tmp = sessions.join(format!("{TMP_PREFIX}{id}"));
            let meta = SessionMeta {
                version: META_VERSION,
                id: id.clone(),
                project: project.clone(),
                command: new.command.clone(),
                profile: new.profile.clone(),
                started_at: timestamp(Utc::now()),
                ended_at: None,
                exit_status: None,
                state: SessionState::Running,
                upper: dir.join("upper"),
                supervisor: Some(supervisor),
                limits: new.limits,
                engine: new.engine.clone(),
            };
            let build = || -> Result<()> {
                // Marked first: a crash before the rename leaves only a stale marker.
                self.mark_running(&id)?;
                mkdir_private(&tmp)?;
                for sub in ["upper", "work", "bundle"] {
                    mkdir_private(&tmp.join(sub))?;
                }
                // The container's `/`: 0755 like a real root (bundle/ above
                // it is 0700, which is what keeps other users out).
                fs::DirBuilder::new()
                    .mode(0o755)
                    .create(tmp.join("bundle/rootfs"))
                    .ctx(|| format!("cannot create {}", tmp.display()))?;
                // Also syncs tmp/, whose subdirectories were made above.
                write_meta(&tmp.join("meta.json"), &meta)
            };
            if let Err(e) = build() {
                let _ = remove_tree(&tmp);
                self.unmark_running(&id);
                return Err(e);
            }
            match fs::rename(&tmp, &dir) {
                Ok(()) => {
                    fsync_dir(&sessions)?;
                    return Ok(Session { dir, meta });
                }
                // The id was taken between our check and the rename.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc_errno::EEXIST) | Some(libc_errno::ENOTEMPTY)
                    ) =>
                {
                    // The marker may be the other session's: the next listing sorts it out.
                    let _ = remove_tree(&tmp);
                }
                Err(e) => {
                    let _ = remove_tree(&tmp);
                    self.unmark_running(&id);
                    return Err(e).ctx(|| format!("cannot create {}", dir.display()));
                }
            }
        }
        Err(Error::InvalidInput(
            "could not find a free session id".into(),
        ))
    }

    /// Loads a session by id.
    pub fn load(&self, id: &str) -> Result<Session> {
        validate_id(id)?;
        let dir = self.sessions().join(id);
        let path = dir.join("meta.json");
        let text = match fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(Error::NoSession(id.to_string()))
            }
            Err(e) => return Err(e).ctx(|| format!("cannot read {}", path.display())),
        };
        let meta: SessionMeta =
            serde_json::from_slice(&text).map_err(|source| Error::CorruptMeta {
                path: path.clone(),
                source,
            })?;
        if meta.id != id {
            return Err(Error::InvalidInput(format!(
                "{} records id '{}'",
                path.display(),
                meta.id
            )));
        }
        Ok(Session { dir, meta })
    }

    /// All sessions (of `project` when given, compared after
    /// canonicalization), oldest first. Unreadable sessions are skipped
    /// with a warning.
    pub fn list(&self, project: Option<&Path>) -> Result<Vec<Session>> {
        let project = project.map(|p| fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()));
        let sessions = self.sessions();
        let mut out = Vec::new();
        for entry in
            fs::read_dir(&sessions).ctx(|| format!("cannot read {}", sessions.display()))?
        {
            let entry = entry.ctx(|| format!("cannot read {}", sessions.display()))?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if validate_id(&name).is_err() {
                continue; // .tmp-*, .trash-*, strays
            }
            match self.load(&name) {
                Ok(s) => {
                    if project.as_ref().is_none_or(|p| &s.meta.project == p) {
                        out.push(s);
                    }
                }
                Err(e) => tracing::warn!("skipping session {name}: {e}"),
            }
        }
        out.sort_by(|a, b| (&a.meta.started_at, &a.meta.id).cmp(&(&b.meta.started_at, &b.meta.id)));
        Ok(out)
    }

    /// The most recently started session of `project`.
    pub fn newest_for_project(&self, project: &Path) -> Result<Session> {
        self.list(Some(project))?
            .pop()
            .ok_or_else(|| Error::NoSessionsForProject(project.to_path_buf()))
    }

    /// Read-modify-write of meta.json, written atomically. Meant for the
    /// session's own supervisor (the only writer while it runs).
    pub fn update_meta(&self, id: &str, f: impl FnOnce(&mut SessionMeta)) -> Result<Session> {
        let mut s = self.load(id)?;
        f(&mut s.meta);
        s.meta.id = id.to_string();
        write_meta(&s.meta_path(), &s.meta)?;
        if s.meta.state == SessionState::Running {
            self.mark_running(id)?;
        } else {
            self.unmark_running(id);
        }
        Ok(s)
    }

    /// Discards a session: nothing to unmount (the overlay lived in the
    /// container's mount namespace), just the directory. It is first
    /// renamed to `.trash-*` so a concurrent `list` never sees half of it.
    /// Refuses while the session is running.
    pub fn remove(&self, id: &str) -> Result<()> {
        let s = self.load(id)?;
        if s.is_running() {
            return Err(Error::StillRunning {
                id: id.to_string(),
                pid: s.meta.supervisor.map(|p| p.pid).unwrap_or(0),
            });
        }
        // A `--disk` image still there (a run that could not copy it out): unmount it first,
        // so that removing the tree never descends into a mounted file system.
        if let Some(d) = crate::disk::Disk::existing(&s.dir) {
            d.remove()
                .ctx(|| format!("cannot remove the disk image of session {id}"))?;
        }
        let trash = self
            .sessions()
            .join(format!("{TRASH_PREFIX}{id}-{:08x}", random_u32()?));
        fs::rename(&s.dir, &trash).ctx(|| format!("cannot remove {}", s.dir.display()))?;
        self.unmark_running(id);
        remove_tree(&trash).ctx(|| format!("cannot remove {}", trash.display()))
    }
}

fn write_meta(path: &Path, meta: &SessionMeta) -> Result<()> {
    let mut json = serde_json::to_vec_pretty(meta)
        .map_err(|e| Error::InvalidInput(format!("cannot serialize meta: {e}")))?;
    json.push(b'\n');
    write_atomic(path, &json)
}

/// The two errno values we match (avoids a libc dependency for two numbers).
mod libc_errno {
    pub const EEXIST: i32 = nix::errno::Errno::EEXIST as i32;
    pub const ENOTEMPTY: i32 = nix::errno::Errno::ENOTEMPTY as i32;
}

#[cfg(test)]
mod tests;
