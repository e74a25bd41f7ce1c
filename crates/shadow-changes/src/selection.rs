//! Per-file and per-hunk review decisions.
//!
//! A [`Selection`] is plain serde data, so `shadow review` can save it as
//! JSON and `shadow apply` can load it. Hunks are numbered as
//! [`crate::diff::hunks`] numbers them (the hunks the unified diff shows,
//! three lines of context); a hunk selection records how many hunks the
//! file had at review time so that a changed diff is refused instead of
//! being applied by stale indices.
//!
//! Applying a file with a hunk selection writes *base content + accepted
//! hunks* ([`merge_hunks`]); the file's new mode is applied along with it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use similar::TextDiff;

use crate::diff::CONTEXT;
use crate::error::{Error, IoContext, Result};

/// Decision for a whole file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Apply the change.
    Accept,
    /// Leave the project as it is.
    #[default]
    Reject,
}

/// Decision for one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum FileSelection {
    /// Apply the whole change.
    Accept,
    /// Skip the change.
    Reject,
    /// Apply only the listed hunks (text modifications only).
    Hunks {
        /// Accepted hunk indices (0-based).
        accepted: BTreeSet<usize>,
        /// Number of hunks the file had when the selection was made.
        total: usize,
    },
}

/// Review decisions for a change set.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Selection {
    /// Decision for paths not listed in `files`.
    #[serde(default)]
    pub default: Decision,
    /// Per-path decisions (paths relative to the project).
    #[serde(default)]
    pub files: BTreeMap<PathBuf, FileSelection>,
}

impl Selection {
    /// Accept everything not explicitly listed.
    pub fn accept_all() -> Self {
        Selection {
            default: Decision::Accept,
            files: BTreeMap::new(),
        }
    }

    /// Reject everything not explicitly listed.
    pub fn reject_all() -> Self {
        Selection::default()
    }

    /// Set the decision for one path (builder style).
    pub fn with(mut self, path: impl Into<PathBuf>, sel: FileSelection) -> Self {
        self.files.insert(path.into(), sel);
        self
    }

    /// The decision that applies to `path`.
    pub fn for_path(&self, path: &Path) -> FileSelection {
        self.files.get(path).cloned().unwrap_or(match self.default {
            Decision::Accept => FileSelection::Accept,
            Decision::Reject => FileSelection::Reject,
        })
    }

    /// Serialise as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("selection serialises")
    }

    /// Parse JSON.
    pub fn from_json(s: &str) -> Result<Self> {
        serde_json::from_str(s).map_err(|e| Error::Json {
            path: PathBuf::from("<selection>"),
            msg: e.to_string(),
        })
    }

    /// Write to a file (atomically: temp file + rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        crate::journal::write_json_atomic(path, &self.to_json())
    }

    /// Read from a file.
    pub fn load(path: &Path) -> Result<Self> {
        let s = std::fs::read_to_string(path).ctx("read", path)?;
        serde_json::from_str(&s).map_err(|e| Error::Json {
            path: path.to_path_buf(),
            msg: e.to_string(),
        })
    }
}

/// Base content with only the `accepted` hunks of the `old` → `new` diff
/// applied. Hunks are those of [`crate::diff::hunks`]; indices past the end
/// are ignored (callers validate the count).
pub fn merge_hunks(old: &str, new: &str, accepted: &BTreeSet<usize>) -> String {
    let diff = TextDiff::from_lines(old, new);
    let old_lines: Vec<&str> = diff.old_slices().to_vec();
    let new_lines: Vec<&str> = diff.new_slices().to_vec();
    let mut out = String::with_capacity(old.len().max(new.len()));
    let mut pos = 0usize; // next old line to copy
    for (i, group) in diff.grouped_ops(CONTEXT).iter().enumerate() {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let o = first.old_range().start..last.old_range().end;
        let n = first.new_range().start..last.new_range().end;
        for l in &old_lines[pos..o.start] {
            out.push_str(l);
        }
        let take = if accepted.contains(&i) {
            &new_lines[n]
        } else {
            &old_lines[o.clone()]
        };
        for l in take {
            out.push_str(l);
        }
        pos = o.end;
    }
    for l in &old_lines[pos..] {
        out.push_str(l);
    }
    out
}
