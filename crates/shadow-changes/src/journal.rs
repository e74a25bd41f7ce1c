//! The apply journal: crash safety, locking and recovery.
//!
//! Layout of a journal directory (one per project):
//!
//! ```text
//! lock                 flock(2)ed exclusively (non-blocking) by apply/rollback/recover
//! pending.tmp/         a journal being written; the project is untouched yet
//! pending/             committed journal of an apply in progress (or crashed)
//!   journal.json       every target: state before, backup extent, state after
//!   backups.pack       original content of regular files, concatenated
//! applied/<id>/        completed applies, newest last (same layout)
//! rolling-back/        a rollback in progress (or crashed)
//! *.done/              finished directories being deleted
//! ```
//!
//! Protocol: backups and `journal.json` are written and fsynced in
//! `pending.tmp/`, which is renamed to `pending/` (the commit point; the
//! journal directory is fsynced). Only then is the project touched:
//! deletions first; then every file is written to a temporary file in its
//! target directory; one `syncfs(2)` of the project's file system makes all
//! of them durable *before* any is renamed over its target (the same
//! guarantee as an fsync per file, batched: a per-file fsync measured ~5 ms
//! on the development VM, i.e. seconds for a thousand files); then the
//! renames; then a second `syncfs` makes the renames and every touched
//! directory durable. Finally `pending/` is renamed to `applied/<id>/` —
//! the apply is complete exactly when that rename is durable.
//!
//! [`recover`] (to be called at every start of shadow) undoes an
//! interrupted apply: it restores every journaled path to its recorded
//! before-state, idempotently, so a crash during recovery is recovered by
//! the next call. An interrupted rollback is finished the same way. The
//! project is therefore always either exactly as before an apply or
//! exactly as after it.
//!
//! Threats: crashes and power loss at any point (journal before writes,
//! fsync before rename, idempotent undo), and concurrent shadow processes
//! (a non-blocking exclusive flock; the second gets [`Error::Locked`]
//! instead of waiting or interleaving).
//!
//! # Test hook
//!
//! `SHADOW_APPLY_CRASH_AFTER=N` makes [`crate::apply()`] call
//! `std::process::abort()` right after its N-th file system mutation
//! (journal writes included). It exists only so integration tests can
//! simulate a crash at every step; do not set it otherwise.

use std::cell::Cell;
use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FlockOperation, Mode};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use crate::base::{current_state, EntryState};
use crate::error::{Error, IoContext, Result};
use crate::safefs::{self, chown_best_effort, open_nofollow, remove_if_exists, write_tmp, Root};

pub(crate) const LOCK: &str = "lock";
pub(crate) const PREPARING: &str = "pending.tmp";
pub(crate) const PENDING: &str = "pending";
pub(crate) const APPLIED: &str = "applied";
pub(crate) const ROLLING_BACK: &str = "rolling-back";
pub(crate) const JOURNAL_FILE: &str = "journal.json";
pub(crate) const BACKUPS: &str = "backups.pack";

/// Name of the crash test hook variable.
pub const CRASH_ENV: &str = "SHADOW_APPLY_CRASH_AFTER";

/// Counts file system mutations; aborts the process at the configured one.
#[derive(Debug, Default)]
pub(crate) struct Mutator {
    count: Cell<usize>,
    crash_after: Option<usize>,
}

impl Mutator {
    pub(crate) fn from_env() -> Self {
        Mutator {
            count: Cell::new(0),
            crash_after: std::env::var(CRASH_ENV).ok().and_then(|v| v.parse().ok()),
        }
    }

    pub(crate) fn tick(&self) {
        let n = self.count.get() + 1;
        self.count.set(n);
        if self.crash_after == Some(n) {
            std::process::abort();
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.count.get()
    }
}

/// One journaled target.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct JournalEntry {
    pub path: PathBuf,
    pub tmp: String,
    pub before: EntryState,
    pub owner: Option<(u32, u32)>,
    /// `(offset, length)` of the original content in `backups.pack`.
    pub backup: Option<(u64, u64)>,
    pub after: EntryState,
}

/// A journal document.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Journal {
    pub version: u32,
    pub id: String,
    pub project: PathBuf,
    pub entries: Vec<JournalEntry>,
}

impl Journal {
    pub(crate) fn load(dir: &Path) -> Result<Self> {
        let p = dir.join(JOURNAL_FILE);
        let s = std::fs::read_to_string(&p).ctx("read", &p)?;
        serde_json::from_str(&s).map_err(|e| Error::Journal {
            path: p,
            msg: e.to_string(),
        })
    }
}

/// fsync a directory by path.
pub(crate) fn fsync_dir(path: &Path) -> Result<()> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .ctx("fsync directory", path)
}

/// Write `contents` to `path` via a fsynced temporary file and rename,
/// then fsync the parent directory.
pub(crate) fn write_json_atomic(path: &Path, contents: &str) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = File::create(&tmp).ctx("create", &tmp)?;
    f.write_all(contents.as_bytes()).ctx("write", &tmp)?;
    f.sync_all().ctx("fsync", &tmp)?;
    std::fs::rename(&tmp, path).ctx("rename", path)?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fsync_dir(parent)?;
    }
    Ok(())
}

/// Held while an apply, rollback or recover runs.
#[derive(Debug)]
pub(crate) struct LockGuard {
    _file: File,
}

/// Take the journal lock without waiting.
pub(crate) fn lock(journal_dir: &Path) -> Result<LockGuard> {
    std::fs::create_dir_all(journal_dir).ctx("create directory", journal_dir)?;
    let p = journal_dir.join(LOCK);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .ctx("open", &p)?;
    // An flock belongs to the open file description, which a child forked by any thread of
    // this process shares until it execs (even with O_CLOEXEC). Such a child holds the lock
    // for a moment only, so a busy lock is retried briefly before it is reported: a real
    // concurrent apply holds it far longer and still gets `Locked`.
    let mut tries = 0;
    loop {
        match rustix::fs::flock(&f, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(LockGuard { _file: f }),
            Err(Errno::WOULDBLOCK) if tries < LOCK_RETRIES => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(Errno::WOULDBLOCK) => return Err(Error::Locked { path: p }),
            Err(e) => return Err(Error::io("flock", &p, e)),
        }
    }
}

/// How many times (10 ms apart) a busy journal lock is retried before [`Error::Locked`].
const LOCK_RETRIES: u32 = 20;

/// Remove a finished journal directory crash-safely: rename it to
/// `<name>.done` first so that a half-deleted directory is never mistaken
/// for a live journal.
pub(crate) fn discard(journal_dir: &Path, dir: &Path) -> Result<()> {
    let name = dir.file_name().unwrap_or(OsStr::new("x"));
    let mut done = name.to_owned();
    done.push(".done");
    let done = journal_dir.join(done);
    std::fs::rename(dir, &done).ctx("rename", dir)?;
    fsync_dir(journal_dir)?;
    std::fs::remove_dir_all(&done).ctx("remove", &done)?;
    Ok(())
}

fn sweep_done(journal_dir: &Path) -> Result<()> {
    let rd = match std::fs::read_dir(journal_dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("read directory", journal_dir, e)),
    };
    for e in rd {
        let e = e.ctx("read directory", journal_dir)?;
        if e.file_name().as_bytes().ends_with(b".done") {
            std::fs::remove_dir_all(e.path()).ctx("remove", e.path())?;
        }
    }
    Ok(())
}

fn remove_entry(root: &Root, rel: &Path, is_dir: bool, m: &Mutator) -> Result<()> {
    let (dir, name) = root.parent(rel)?;
    let flags = if is_dir {
        AtFlags::REMOVEDIR
    } else {
        AtFlags::empty()
    };
    match rustix::fs::unlinkat(&dir, name, flags) {
        Ok(()) => {
            m.tick();
            Ok(())
        }
        Err(Errno::NOENT) => Ok(()),
        Err(Errno::NOTEMPTY) | Err(Errno::EXIST) => Err(Error::Conflict {
            path: root.show(rel),
            msg: "directory is not empty (it contains files that are not part of the change)"
                .into(),
        }),
        Err(e) => Err(Error::io("remove", root.show(rel), e)),
    }
}

/// Stage `content` as the temporary file `tmp` next to `rel` (not yet
/// durable, not yet in place: see [`commit_staged`]).
pub(crate) fn stage_file(
    root: &Root,
    rel: &Path,
    tmp: &str,
    content: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
    m: &Mutator,
) -> Result<()> {
    let (dir, _) = root.parent(rel)?;
    write_tmp(&dir, OsStr::new(tmp), content, mode, owner)
        .ctx("write temporary file", root.show(rel))?;
    m.tick();
    Ok(())
}

/// Stage a symlink to `target` as `tmp` next to `rel`.
pub(crate) fn stage_symlink(
    root: &Root,
    rel: &Path,
    tmp: &str,
    target: &Path,
    owner: Option<(u32, u32)>,
    m: &Mutator,
) -> Result<()> {
    let (dir, _) = root.parent(rel)?;
    let tmp = OsStr::new(tmp);
    remove_if_exists(&dir, tmp).ctx("remove", root.show(rel))?;
    rustix::fs::symlinkat(target, &dir, tmp).ctx("symlink", root.show(rel))?;
    m.tick();
    if let Some((uid, gid)) = owner {
        let _ = rustix::fs::chownat(
            &dir,
            tmp,
            Some(rustix::fs::Uid::from_raw(uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
            AtFlags::SYMLINK_NOFOLLOW,
        );
    }
    Ok(())
}

/// Atomically rename the staged `tmp` over `rel`.
pub(crate) fn commit_staged(root: &Root, rel: &Path, tmp: &str, m: &Mutator) -> Result<()> {
    let (dir, name) = root.parent(rel)?;
    rustix::fs::renameat(&dir, OsStr::new(tmp), &dir, name).ctx("rename", root.show(rel))?;
    m.tick();
    Ok(())
}

/// Make `rel` a directory with `mode` (creating it if absent).
pub(crate) fn put_dir(
    root: &Root,
    rel: &Path,
    mode: u32,
    owner: Option<(u32, u32)>,
    m: &Mutator,
) -> Result<()> {
    let (dir, name) = root.parent(rel)?;
    match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o700)) {
        Ok(()) => m.tick(),
        Err(Errno::EXIST) => {}
        Err(e) => return Err(Error::io("mkdir", root.show(rel), e)),
    }
    let f = rustix::fs::openat(
        &dir,
        name,
        rustix::fs::OFlags::RDONLY
            | rustix::fs::OFlags::DIRECTORY
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ctx("open directory", root.show(rel))?;
    if let Some((uid, gid)) = owner {
        chown_best_effort(&f, uid, gid);
    }
    rustix::fs::fchmod(&f, Mode::from_raw_mode(mode & 0o777)).ctx("chmod", root.show(rel))?;
    m.tick();
    Ok(())
}

/// Change the mode of the existing file or directory `rel`, which must be
/// of type `expect_dir`.
pub(crate) fn put_mode(
    root: &Root,
    rel: &Path,
    mode: u32,
    expect_dir: bool,
    m: &Mutator,
) -> Result<()> {
    let (dir, name) = root.parent(rel)?;
    let f = open_nofollow(&dir, name).ctx("open", root.show(rel))?;
    let md = f.metadata().ctx("fstat", root.show(rel))?;
    if md.is_dir() != expect_dir || !(md.is_dir() || md.is_file()) {
        return Err(Error::Conflict {
            path: root.show(rel),
            msg: "file type changed underneath the apply".into(),
        });
    }
    rustix::fs::fchmod(&f, Mode::from_raw_mode(mode)).ctx("chmod", root.show(rel))?;
    m.tick();
    Ok(())
}

/// Whether the current state of `rel` equals `want` (ownership ignored).
pub(crate) fn state_matches(root: &Root, rel: &Path, want: &EntryState) -> Result<bool> {
    use std::os::unix::fs::MetadataExt;
    if let EntryState::File { size, mode, .. } = want {
        // Cheap metadata check first; hash only when it could match.
        match root.probe(rel)? {
            Some(md) if md.is_file() && md.size() == *size && md.mode() & 0o7777 == *mode => {}
            _ => return Ok(false),
        }
    }
    Ok(current_state(root, rel)?.0 == *want)
}

/// Read the original content of `e` from the backup pack.
fn read_backup(txn: &Path, e: &JournalEntry, pack: &mut Option<File>) -> Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let bp = txn.join(BACKUPS);
    let (offset, len) = e.backup.ok_or_else(|| Error::Journal {
        path: txn.join(JOURNAL_FILE),
        msg: format!("no backup for {}", e.path.display()),
    })?;
    if pack.is_none() {
        *pack = Some(File::open(&bp).ctx("open backup", &bp)?);
    }
    let f = pack.as_mut().expect("just opened");
    f.seek(SeekFrom::Start(offset)).ctx("seek backup", &bp)?;
    let mut content = vec![0u8; usize::try_from(len).unwrap_or(0)];
    f.read_exact(&mut content).ctx("read backup", &bp)?;
    Ok(content)
}

/// Restore every entry of `j` to its before-state. Idempotent, so a crash
/// during an undo is repaired by running it again.
pub(crate) fn undo(root: &Root, txn: &Path, j: &Journal, m: &Mutator) -> Result<()> {
    // 1. Temporary files a crashed apply may have left behind.
    for e in &j.entries {
        match root.parent(&e.path) {
            Ok((dir, _)) => {
                if remove_if_exists(&dir, OsStr::new(&e.tmp)).ctx("remove", root.show(&e.path))? {
                    m.tick();
                }
            }
            Err(err) if safefs::is_absent(&err) => {}
            Err(err) => return Err(err),
        }
    }
    // 2. Deepest first: remove whatever has the wrong type (or should not exist).
    for e in j.entries.iter().rev() {
        let Some(md) = root.probe(&e.path)? else {
            continue;
        };
        let cur = crate::model::FileType::of(md.file_type());
        if e.before.file_type() != Some(cur) {
            remove_entry(root, &e.path, md.is_dir(), m)?;
        }
    }
    // 3. Parents first: directories directly, files and symlinks staged.
    let mut pack = None;
    let mut staged = Vec::new();
    for e in &j.entries {
        if matches!(e.before, EntryState::Absent) || state_matches(root, &e.path, &e.before)? {
            continue;
        }
        match &e.before {
            EntryState::Absent => {}
            EntryState::File { mode, sha256, .. } => {
                let content = read_backup(txn, e, &mut pack)?;
                if crate::model::sha256_hex(&content) != *sha256 {
                    return Err(Error::Journal {
                        path: txn.join(BACKUPS),
                        msg: format!(
                            "backup of {} does not match its recorded hash",
                            e.path.display()
                        ),
                    });
                }
                stage_file(root, &e.path, &e.tmp, &content, *mode, e.owner, m)?;
                staged.push(e);
            }
            EntryState::Symlink { target } => {
                stage_symlink(root, &e.path, &e.tmp, target, e.owner, m)?;
                staged.push(e);
            }
            EntryState::Dir { mode } => {
                put_dir(root, &e.path, *mode, e.owner, m)?;
                if mode & 0o7000 != 0 {
                    put_mode(root, &e.path, *mode, true, m)?;
                }
            }
            EntryState::Other { .. } => {
                return Err(Error::Journal {
                    path: txn.join(JOURNAL_FILE),
                    msg: format!("cannot restore special file {}", e.path.display()),
                })
            }
        }
    }
    // 4. Staged content durable, then renamed into place, then durable again.
    root.sync_fs()?;
    for e in staged {
        commit_staged(root, &e.path, &e.tmp, m)?;
        if let EntryState::File { mode, .. } = e.before {
            // Restore setuid/setgid/sticky bits the original had.
            if mode & 0o7000 != 0 {
                put_mode(root, &e.path, mode, false, m)?;
            }
        }
    }
    root.sync_fs()
}

/// What [`recover`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoverOutcome {
    /// Nothing was interrupted.
    Clean,
    /// An interrupted apply was undone; the project is as before it.
    UndidApply {
        /// Journal id of the apply.
        id: String,
        /// Paths restored.
        paths: Vec<PathBuf>,
    },
    /// An interrupted rollback was finished; the project is as before the
    /// rolled-back apply.
    FinishedRollback {
        /// Journal id of the rolled-back apply.
        id: String,
    },
}

/// Finish or undo whatever an interrupted apply or rollback left in
/// `journal_dir`. Call at every start of shadow. Safe to call when nothing
/// is pending, and safe to re-run after a crash during recovery.
pub fn recover(journal_dir: &Path) -> Result<RecoverOutcome> {
    if !journal_dir.exists() {
        return Ok(RecoverOutcome::Clean);
    }
    let _lock = lock(journal_dir)?;
    recover_locked(journal_dir)
}

pub(crate) fn recover_locked(journal_dir: &Path) -> Result<RecoverOutcome> {
    sweep_done(journal_dir)?;
    let preparing = journal_dir.join(PREPARING);
    if preparing.exists() {
        // Never committed: the project was not touched.
        std::fs::remove_dir_all(&preparing).ctx("remove", &preparing)?;
        fsync_dir(journal_dir)?;
    }
    let m = Mutator::default();
    let pending = journal_dir.join(PENDING);
    if pending.exists() {
        let j = Journal::load(&pending)?;
        let root = Root::open(&j.project)?;
        undo(&root, &pending, &j, &m)?;
        discard(journal_dir, &pending)?;
        return Ok(RecoverOutcome::UndidApply {
            id: j.id,
            paths: j.entries.into_iter().map(|e| e.path).collect(),
        });
    }
    let rb = journal_dir.join(ROLLING_BACK);
    if rb.exists() {
        let j = Journal::load(&rb)?;
        let root = Root::open(&j.project)?;
        undo(&root, &rb, &j, &m)?;
        discard(journal_dir, &rb)?;
        return Ok(RecoverOutcome::FinishedRollback { id: j.id });
    }
    Ok(RecoverOutcome::Clean)
}
