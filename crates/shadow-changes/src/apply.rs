//! Applying a (selected part of a) change set to the real project.
//!
//! Order of work, and the threat each step defends against:
//!
//! 1. **Lock** the journal directory (non-blocking flock) — concurrent
//!    applies/rollbacks would interleave writes and journals.
//! 2. **Plan** from the change set and the selection: protected paths are
//!    skipped unless `include_protected` (hooks, CI, rc files run code
//!    outside the sandbox); new parent directories of accepted paths are
//!    added; a directory deletion is dropped if something below it is
//!    kept.
//! 3. **Read sources** from the upper layer through [`crate::safefs`] with
//!    `O_NOFOLLOW`: device nodes, fifos and sockets are refused (an agent
//!    could otherwise plant `/dev/sda`-like nodes in the project); setuid,
//!    setgid and sticky bits are stripped (`mode & 0o777`, no privilege
//!    escalation via a planted setuid binary); content is always copied,
//!    never hard-linked (a hard link would let the session store and the
//!    project share an inode). Symlinks whose target is absolute or climbs
//!    out of the project with `..` are refused unless forced.
//! 4. **Drift check** against the caller's [`BaseRecord`]: every target
//!    whose current state differs from the base is named in
//!    [`Error::Drift`] unless forced (do not clobber the user's edits).
//! 5. **Journal** the before-state of every target with backups, fsynced,
//!    then commit it (see [`crate::journal`]) — crash safety.
//! 6. **Write**: deletions deepest-first, then creations parents-first.
//!    Every parent is resolved with `openat2(RESOLVE_BENEATH |
//!    RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` from the project root's
//!    fd and every write is a `*at()` call on that dirfd, so a symlink
//!    planted in the project (`sub -> /tmp/outside`) cannot redirect a
//!    write outside it. Files are written to a temporary file in the
//!    target directory; one `syncfs` makes them all durable before any is
//!    renamed over its target; a second `syncfs` after the renames makes
//!    the touched directories durable. On any error the journal is used to
//!    undo what was done.
//! 7. **Complete**: the journal moves to `applied/<id>` for [`crate::rollback()`].

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::base::{current_state, BaseRecord, EntryState};
use crate::error::{Error, IoContext, Result};
use crate::journal::{
    self, commit_staged, fsync_dir, put_dir, put_mode, stage_file, stage_symlink, undo, Journal,
    JournalEntry, Mutator, APPLIED, BACKUPS, JOURNAL_FILE, PENDING, PREPARING, ROLLING_BACK,
};
use crate::model::{sha256_hex, Change, ChangeKind, ChangeSet, FileType};
use crate::safefs::Root;
use crate::selection::{merge_hunks, FileSelection, Selection};

/// Switches for [`apply`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ApplyOptions {
    /// Apply despite base drift and escaping symlink targets.
    pub force: bool,
    /// Apply changes to protected paths too.
    pub include_protected: bool,
}

/// Everything [`apply`] needs.
#[derive(Debug, Clone, Copy)]
pub struct ApplyRequest<'a> {
    /// The real project directory to modify.
    pub project: &'a Path,
    /// The lower layer as the session saw it (base for hunk selections).
    pub lower_view: &'a Path,
    /// The session's upper layer (source of new content).
    pub upper: &'a Path,
    /// The scanned change set.
    pub changes: &'a ChangeSet,
    /// Review decisions; `None` applies everything.
    pub selection: Option<&'a Selection>,
    /// Base record from session end, for drift detection.
    pub base: &'a BaseRecord,
    /// Journal directory for this project.
    pub journal_dir: &'a Path,
    /// Switches.
    pub options: ApplyOptions,
}

/// What [`apply`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApplyReport {
    /// Journal id (name under `applied/`).
    pub id: String,
    /// Paths written, created, chmodded or deleted.
    pub applied: Vec<PathBuf>,
    /// Protected paths left alone.
    pub skipped_protected: Vec<PathBuf>,
    /// Paths rejected by the selection (or kept because something below
    /// them was rejected).
    pub rejected: Vec<PathBuf>,
    /// Number of file system mutations performed (journal included).
    pub mutations: usize,
}

/// The desired end state of one target.
#[derive(Debug)]
enum Target {
    Absent,
    File { content: Vec<u8>, mode: u32 },
    Mode { mode: u32, dir: bool },
    Symlink { target: PathBuf },
    Dir { mode: u32 },
}

impl Target {
    fn file_type(&self) -> Option<FileType> {
        match self {
            Target::Absent => None,
            Target::File { .. } => Some(FileType::File),
            Target::Mode { dir: true, .. } | Target::Dir { .. } => Some(FileType::Dir),
            Target::Mode { dir: false, .. } => Some(FileType::File),
            Target::Symlink { .. } => Some(FileType::Symlink),
        }
    }
}

/// Does `target`, as the target of a symlink at `link`, leave the root?
pub fn symlink_escapes(link: &Path, target: &Path) -> bool {
    if target.as_os_str().is_empty() {
        return true;
    }
    let mut depth = link.components().count().saturating_sub(1);
    for c in target.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                if depth == 0 {
                    return true;
                }
                depth -= 1;
            }
            Component::RootDir | Component::Prefix(_) => return true,
        }
    }
    false
}

fn new_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{nanos:020}-{}", std::process::id())
}

/// Decide which changes are applied. Returns accepted changes in path
/// order plus the report's skip lists.
fn plan<'c>(
    cs: &'c ChangeSet,
    sel: Option<&Selection>,
    opts: &ApplyOptions,
    report: &mut ApplyReport,
) -> Result<Vec<(&'c Change, FileSelection)>> {
    let mut accepted: BTreeMap<&Path, (&Change, FileSelection)> = BTreeMap::new();
    let by_path: BTreeMap<&Path, &Change> =
        cs.changes.iter().map(|c| (c.path.as_path(), c)).collect();
    for c in &cs.changes {
        if !journalable(&c.path) {
            return Err(Error::InvalidPath {
                path: c.path.clone(),
            });
        }
        let fs = sel.map_or(FileSelection::Accept, |s| s.for_path(&c.path));
        if c.protected && !opts.include_protected {
            report.skipped_protected.push(c.path.clone());
            continue;
        }
        if fs == FileSelection::Reject {
            report.rejected.push(c.path.clone());
            continue;
        }
        if let FileSelection::Hunks { .. } = fs {
            let text_mod = c.kind == ChangeKind::Modified
                && !c.binary
                && c.old_type() == Some(FileType::File)
                && c.new_type() == Some(FileType::File);
            if !text_mod {
                return Err(Error::Selection {
                    path: c.path.clone(),
                    msg: "hunk selection is only possible for modified text files".into(),
                });
            }
        }
        accepted.insert(&c.path, (c, fs));
    }
    // New parent directories of accepted paths come along.
    let keys: Vec<&Path> = accepted.keys().copied().collect();
    for p in keys {
        let c = accepted[p].0;
        if c.new.is_none() {
            continue;
        }
        for anc in p.ancestors().skip(1).filter(|a| !a.as_os_str().is_empty()) {
            let Some(ac) = by_path.get(anc) else { continue };
            if accepted.contains_key(anc) {
                continue;
            }
            if ac.new_type() != Some(FileType::Dir) {
                continue;
            }
            if ac.kind == ChangeKind::Added {
                accepted.insert(anc, (ac, FileSelection::Accept));
                report.rejected.retain(|r| r != anc);
                report.skipped_protected.retain(|r| r != anc);
            } else if ac.kind == ChangeKind::TypeChanged {
                return Err(Error::Selection {
                    path: p.to_path_buf(),
                    msg: format!(
                        "accepting this path requires accepting the type change of {}",
                        anc.display()
                    ),
                });
            }
        }
    }
    // Directory removals need everything below them removed too.
    let keys: Vec<&Path> = accepted.keys().rev().copied().collect();
    for p in keys {
        let c = accepted[p].0;
        if c.old_type() != Some(FileType::Dir) || c.new_type() == Some(FileType::Dir) {
            continue;
        }
        // Changes are sorted by path bytes, so everything below `p` (paths
        // starting with "p/") is one contiguous run.
        let mut prefix = p.as_os_str().as_bytes().to_vec();
        prefix.push(b'/');
        let start = cs
            .changes
            .partition_point(|d| d.path.as_os_str().as_bytes() < prefix.as_slice());
        let kept_below = cs.changes[start..]
            .iter()
            .take_while(|d| d.path.as_os_str().as_bytes().starts_with(&prefix))
            .any(|d| !accepted.contains_key(d.path.as_path()));
        if kept_below {
            if c.kind == ChangeKind::Deleted {
                accepted.remove(p);
                report.rejected.push(p.to_path_buf());
            } else {
                return Err(Error::Selection {
                    path: p.to_path_buf(),
                    msg: "replacing this directory requires accepting every change below it".into(),
                });
            }
        }
    }
    report.rejected.sort();
    Ok(accepted.into_values().collect())
}

/// Apply the change set (or the selected part of it) to the project.
pub fn apply(req: &ApplyRequest<'_>) -> Result<ApplyReport> {
    let m = Mutator::from_env();
    let _lock = journal::lock(req.journal_dir)?;
    let jd = req.journal_dir;
    for name in [PENDING, ROLLING_BACK] {
        if jd.join(name).exists() {
            return Err(Error::PendingJournal {
                path: jd.to_path_buf(),
            });
        }
    }
    let preparing = jd.join(PREPARING);
    if preparing.exists() {
        std::fs::remove_dir_all(&preparing).ctx("remove", &preparing)?;
    }
    let project = std::fs::canonicalize(req.project).ctx("resolve project", req.project)?;
    let root = Root::open(&project)?;
    let upper = Root::open(req.upper)?;
    let lower = Root::open(req.lower_view)?;
    let opts = req.options;
    let mut report = ApplyReport {
        id: new_id(),
        ..ApplyReport::default()
    };
    let accepted = plan(req.changes, req.selection, &opts, &mut report)?;

    // Sources and targets.
    let mut targets: Vec<(&Change, Target)> = Vec::with_capacity(accepted.len());
    let mut escapes = Vec::new();
    for (c, fs) in accepted {
        let Some(new) = &c.new else {
            targets.push((c, Target::Absent));
            continue;
        };
        if !new.file_type.is_applicable() {
            return Err(Error::SpecialFile {
                path: upper.show(&c.path),
                kind: new.file_type.name(),
            });
        }
        let t = match new.file_type {
            FileType::Dir if c.old_type() == Some(FileType::Dir) => Target::Mode {
                mode: new.mode & 0o777,
                dir: true,
            },
            FileType::Dir => Target::Dir {
                mode: new.mode & 0o777,
            },
            FileType::Symlink => {
                let target = upper.read_link(&c.path)?;
                if symlink_escapes(&c.path, &target) && !opts.force {
                    escapes.push(Error::SymlinkEscape {
                        path: c.path.clone(),
                        target: target.clone(),
                    });
                }
                Target::Symlink { target }
            }
            _ if c.kind == ChangeKind::ModeChanged => Target::Mode {
                mode: new.mode & 0o777,
                dir: false,
            },
            _ => {
                let (content, md) = upper.read_file(&c.path)?;
                let mode = md.mode() & 0o777;
                let content = match &fs {
                    FileSelection::Hunks { accepted, total } => {
                        let (base, _) = lower.read_file(&c.path)?;
                        let (Ok(old), Ok(new)) =
                            (std::str::from_utf8(&base), std::str::from_utf8(&content))
                        else {
                            return Err(Error::Selection {
                                path: c.path.clone(),
                                msg: "hunk selection on a file that is not UTF-8 text".into(),
                            });
                        };
                        let n = crate::diff::hunks(old, new).len();
                        if n != *total || accepted.iter().any(|i| *i >= n) {
                            return Err(Error::Selection {
                                path: c.path.clone(),
                                msg: format!(
                                    "the diff now has {n} hunks but the selection was made for {total}"
                                ),
                            });
                        }
                        merge_hunks(old, new, accepted).into_bytes()
                    }
                    _ => content,
                };
                Target::File { content, mode }
            }
        };
        targets.push((c, t));
    }
    if let Some(e) = escapes.into_iter().next() {
        return Err(e);
    }

    // Current states, drift check, backups (in memory until journaled).
    let mut befores = Vec::with_capacity(targets.len());
    let mut drift = Vec::new();
    for (c, t) in &mut targets {
        let (state, content, owner) = current_state(&root, &c.path)?;
        if let EntryState::Other { file_type, .. } = &state {
            return Err(Error::SpecialFile {
                path: root.show(&c.path),
                kind: file_type.name(),
            });
        }
        if !opts.force && req.base.get(&c.path) != Some(&state) {
            drift.push(c.path.clone());
        }
        // A mode change onto something that is no longer the same file
        // (only possible when forced) writes the session's content.
        if let Target::Mode { mode, dir: false } = *t {
            if state.file_type() != Some(FileType::File) {
                let (content, _) = upper.read_file(&c.path)?;
                *t = Target::File { content, mode };
            }
        }
        if let Target::Mode { mode, dir: true } = *t {
            if state.file_type() != Some(FileType::Dir) {
                *t = Target::Dir { mode };
            }
        }
        befores.push((state, content, owner));
    }
    if !drift.is_empty() {
        return Err(Error::Drift { paths: drift });
    }
    if targets.is_empty() {
        return Ok(report);
    }

    // Journal.
    std::fs::create_dir_all(&preparing).ctx("create directory", &preparing)?;
    m.tick();
    let pack_path = preparing.join(BACKUPS);
    let mut pack =
        std::io::BufWriter::new(std::fs::File::create(&pack_path).ctx("create", &pack_path)?);
    let mut offset = 0u64;
    let mut entries = Vec::with_capacity(targets.len());
    for (i, ((c, t), (before, content, owner))) in targets.iter().zip(befores).enumerate() {
        let backup = match &content {
            Some(bytes) => {
                std::io::Write::write_all(&mut pack, bytes).ctx("write", &pack_path)?;
                m.tick();
                let extent = (offset, bytes.len() as u64);
                offset += bytes.len() as u64;
                Some(extent)
            }
            None => None,
        };
        let after = match t {
            Target::Absent => EntryState::Absent,
            Target::File { content, mode } => EntryState::File {
                size: content.len() as u64,
                mode: *mode,
                sha256: sha256_hex(content),
            },
            Target::Mode { mode, dir: true } | Target::Dir { mode } => {
                EntryState::Dir { mode: *mode }
            }
            Target::Mode { mode, dir: false } => match &before {
                EntryState::File { size, sha256, .. } => EntryState::File {
                    size: *size,
                    mode: *mode,
                    sha256: sha256.clone(),
                },
                _ => unreachable!("mode targets on non-files were turned into writes"),
            },
            Target::Symlink { target } => EntryState::Symlink {
                target: target.clone(),
            },
        };
        entries.push(JournalEntry {
            path: c.path.clone(),
            tmp: crate::safefs::tmp_name(&report.id, i)
                .to_string_lossy()
                .into_owned(),
            before,
            owner,
            backup,
            after,
        });
    }
    let j = Journal {
        version: 1,
        id: report.id.clone(),
        project: project.clone(),
        entries,
    };
    let pack = pack
        .into_inner()
        .map_err(|e| Error::io("write", &pack_path, e.into_error()))?;
    pack.sync_all().ctx("fsync", &pack_path)?;
    drop(pack);
    let json = serde_json::to_string(&j).expect("journal serialises");
    let jp = preparing.join(JOURNAL_FILE);
    {
        let mut f = std::fs::File::create(&jp).ctx("create", &jp)?;
        std::io::Write::write_all(&mut f, json.as_bytes()).ctx("write", &jp)?;
        f.sync_all().ctx("fsync", &jp)?;
        m.tick();
    }
    fsync_dir(&preparing)?;
    let pending = jd.join(PENDING);
    std::fs::rename(&preparing, &pending).ctx("rename", &preparing)?;
    m.tick();
    fsync_dir(jd)?;

    // Project writes; undo on failure.
    if let Err(e) = execute(&root, &targets, &j, &m) {
        return match undo(&root, &pending, &j, &m) {
            Ok(()) => {
                journal::discard(jd, &pending)?;
                Err(e)
            }
            // Leave `pending/` for recover; report the original error.
            Err(_) => Err(e),
        };
    }

    // Complete.
    let applied_dir = jd.join(APPLIED);
    std::fs::create_dir_all(&applied_dir).ctx("create directory", &applied_dir)?;
    let done = applied_dir.join(&report.id);
    std::fs::rename(&pending, &done).ctx("rename", &pending)?;
    m.tick();
    fsync_dir(&applied_dir)?;
    fsync_dir(jd)?;
    report.applied = targets.iter().map(|(c, _)| c.path.clone()).collect();
    report.mutations = m.count();
    Ok(report)
}

fn parent_of(rel: &Path) -> PathBuf {
    rel.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn execute(root: &Root, targets: &[(&Change, Target)], j: &Journal, m: &Mutator) -> Result<()> {
    let chown = rustix::process::geteuid().is_root();
    // Deletions and the old side of type changes, deepest first.
    for ((c, t), e) in targets.iter().zip(&j.entries).rev() {
        let Some(cur) = e.before.file_type() else {
            continue;
        };
        if t.file_type() == Some(cur) {
            continue;
        }
        let (dir, name) = root.parent(&c.path)?;
        let flags = if cur == FileType::Dir {
            rustix::fs::AtFlags::REMOVEDIR
        } else {
            rustix::fs::AtFlags::empty()
        };
        rustix::fs::unlinkat(&dir, name, flags).map_err(|err| {
            if err == rustix::io::Errno::NOTEMPTY {
                Error::Conflict {
                    path: root.show(&c.path),
                    msg:
                        "directory is not empty (it contains files that are not part of the change)"
                            .into(),
                }
            } else {
                Error::io("remove", root.show(&c.path), err)
            }
        })?;
        m.tick();
    }
    // Parents first: directories and modes directly; files and symlinks
    // staged as temporary files next to their targets.
    let mut staged = Vec::new();
    for ((c, t), e) in targets.iter().zip(&j.entries) {
        // Keep the owner of what is replaced; new entries get the owner of
        // their directory (only meaningful, and only tried, as root).
        let owner = if !chown {
            None
        } else if e.owner.is_some() && e.before.file_type() == t.file_type() {
            e.owner
        } else {
            let parent = parent_of(&c.path);
            let md = if parent.as_os_str().is_empty() {
                std::fs::metadata(root.path()).ok()
            } else {
                root.probe(&parent).ok().flatten()
            };
            md.map(|md| (md.uid(), md.gid()))
        };
        match t {
            Target::Absent => {}
            Target::File { content, mode } => {
                stage_file(root, &c.path, &e.tmp, content, *mode, owner, m)?;
                staged.push((c, e));
            }
            Target::Symlink { target } => {
                stage_symlink(root, &c.path, &e.tmp, target, owner, m)?;
                staged.push((c, e));
            }
            Target::Dir { mode } => put_dir(root, &c.path, *mode, owner, m)?,
            Target::Mode { mode, dir } => put_mode(root, &c.path, *mode, *dir, m)?,
        }
    }
    // Every staged file durable before any rename (one syncfs instead of an
    // fsync per file), then the renames, then durable again (this covers
    // every touched directory).
    root.sync_fs()?;
    for (c, e) in staged {
        commit_staged(root, &c.path, &e.tmp, m)?;
    }
    root.sync_fs()
}

/// Whether `path`'s bytes are valid as a journal path (UTF-8; the journal
/// is JSON).
pub(crate) fn journalable(path: &Path) -> bool {
    std::str::from_utf8(path.as_os_str().as_bytes()).is_ok()
}
