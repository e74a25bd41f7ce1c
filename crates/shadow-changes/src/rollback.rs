//! Rolling back the most recent completed apply.
//!
//! The journal of a completed apply (`applied/<id>/`) holds, for every path
//! it touched, the state before (with backups of file contents) and the
//! state it wrote. Rollback first checks that every path is still in the
//! state the apply left it in — otherwise it refuses, naming the paths,
//! unless forced (threat: destroying edits made after the apply). It then
//! renames the journal to `rolling-back/` (so an interrupted rollback is
//! finished by [`crate::recover`]) and restores every before-state
//! byte for byte: contents, modes, deleted files recreated, created files
//! removed. All project access goes through [`crate::safefs`].

use std::path::{Path, PathBuf};

use crate::base::current_state;
use crate::error::{Error, IoContext, Result};
use crate::journal::{
    self, discard, fsync_dir, undo, Journal, Mutator, APPLIED, PENDING, ROLLING_BACK,
};
use crate::safefs::Root;

/// Switches for [`rollback`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RollbackOptions {
    /// Roll back even if the project changed since the apply.
    pub force: bool,
}

/// What [`rollback`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackReport {
    /// Journal id of the apply that was undone.
    pub id: String,
    /// Paths restored.
    pub restored: Vec<PathBuf>,
}

/// The ids of completed applies that can be rolled back, oldest first.
pub fn applied_ids(journal_dir: &Path) -> Result<Vec<String>> {
    let dir = journal_dir.join(APPLIED);
    let mut ids = Vec::new();
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ids),
        Err(e) => return Err(Error::io("read directory", &dir, e)),
    };
    for e in rd {
        let e = e.ctx("read directory", &dir)?;
        if let Some(name) = e.file_name().to_str() {
            ids.push(name.to_string());
        }
    }
    ids.sort();
    Ok(ids)
}

/// Undo the most recent completed apply recorded in `journal_dir`.
pub fn rollback(journal_dir: &Path, opts: RollbackOptions) -> Result<RollbackReport> {
    let _lock = journal::lock(journal_dir)?;
    for name in [PENDING, ROLLING_BACK] {
        if journal_dir.join(name).exists() {
            return Err(Error::PendingJournal {
                path: journal_dir.to_path_buf(),
            });
        }
    }
    let Some(id) = applied_ids(journal_dir)?.pop() else {
        return Err(Error::NothingToRollBack {
            path: journal_dir.to_path_buf(),
        });
    };
    let dir = journal_dir.join(APPLIED).join(&id);
    let j = Journal::load(&dir)?;
    let root = Root::open(&j.project)?;
    if !opts.force {
        let mut changed = Vec::new();
        for e in &j.entries {
            let same = match current_state(&root, &e.path) {
                Ok((s, _, _)) => s == e.after,
                Err(_) => false,
            };
            if !same {
                changed.push(e.path.clone());
            }
        }
        if !changed.is_empty() {
            return Err(Error::ChangedSinceApply { paths: changed });
        }
    }
    let rb = journal_dir.join(ROLLING_BACK);
    std::fs::rename(&dir, &rb).ctx("rename", &dir)?;
    fsync_dir(journal_dir)?;
    fsync_dir(&journal_dir.join(APPLIED))?;
    let m = Mutator::default();
    undo(&root, &rb, &j, &m)?;
    discard(journal_dir, &rb)?;
    Ok(RollbackReport {
        id: j.id,
        restored: j.entries.into_iter().map(|e| e.path).collect(),
    })
}
