//! Machine-readable change report for agents.
//!
//! One [`JsonEntry`] per change (directories included, unlike the text
//! formats), with modes as git-style octal strings (`"100644"`) so they read
//! the same as in the diff.

use serde::{Deserialize, Serialize};

use crate::model::{ChangeKind, ChangeSet, FileType};

/// Top-level JSON document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JsonReport {
    /// Format version (currently 1).
    pub version: u32,
    /// One entry per change, sorted by path.
    pub entries: Vec<JsonEntry>,
    /// Totals over `entries`.
    pub totals: JsonTotals,
}

/// Totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JsonTotals {
    /// Number of entries.
    pub changes: usize,
    /// Sum of insertions.
    pub insertions: u64,
    /// Sum of deletions.
    pub deletions: u64,
    /// Number of protected entries.
    pub protected: usize,
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JsonEntry {
    /// Path relative to the project (lossy UTF-8).
    pub path: String,
    /// `added`, `modified`, `deleted`, `type_changed` or `mode_changed`.
    pub kind: ChangeKind,
    /// `--name-status` letter, if git would list it.
    pub status: Option<char>,
    /// Type before.
    pub old_type: Option<FileType>,
    /// Type after.
    pub new_type: Option<FileType>,
    /// Git-style mode before (`"100644"`).
    pub old_mode: Option<String>,
    /// Git-style mode after.
    pub new_mode: Option<String>,
    /// Binary content on either side.
    pub binary: bool,
    /// Lines added.
    pub insertions: u64,
    /// Lines removed.
    pub deletions: u64,
    /// Matches a protected-path rule (not applied unless included).
    pub protected: bool,
    /// SHA-256 of the new content (files) or target (symlinks).
    pub sha256: Option<String>,
    /// Symlink target before.
    pub old_symlink_target: Option<String>,
    /// Symlink target after.
    pub new_symlink_target: Option<String>,
}

/// Build the report.
pub fn report(cs: &ChangeSet) -> JsonReport {
    let entries: Vec<JsonEntry> = cs
        .changes
        .iter()
        .map(|c| JsonEntry {
            path: c.path.to_string_lossy().into_owned(),
            kind: c.kind,
            status: crate::stat::status_letter(c),
            old_type: c.old_type(),
            new_type: c.new_type(),
            old_mode: c.old.as_ref().map(|e| e.git_mode()),
            new_mode: c.new.as_ref().map(|e| e.git_mode()),
            binary: c.binary,
            insertions: c.insertions,
            deletions: c.deletions,
            protected: c.protected,
            sha256: c.new_sha256.clone(),
            old_symlink_target: c
                .old
                .as_ref()
                .and_then(|e| e.symlink_target.as_ref())
                .map(|t| t.to_string_lossy().into_owned()),
            new_symlink_target: c
                .new
                .as_ref()
                .and_then(|e| e.symlink_target.as_ref())
                .map(|t| t.to_string_lossy().into_owned()),
        })
        .collect();
    let totals = JsonTotals {
        changes: entries.len(),
        insertions: entries.iter().map(|e| e.insertions).sum(),
        deletions: entries.iter().map(|e| e.deletions).sum(),
        protected: entries.iter().filter(|e| e.protected).count(),
    };
    JsonReport {
        version: 1,
        entries,
        totals,
    }
}

/// The report as pretty-printed JSON.
pub fn render_json(cs: &ChangeSet) -> String {
    serde_json::to_string_pretty(&report(cs)).expect("report serialises")
}

/// The change summary an audit log keeps (paths, kinds, content hashes): what `shadow run` and
/// shadow-runtime's capture of engine containers both record.
pub fn audit_summary(cs: &ChangeSet) -> serde_json::Value {
    let entries: Vec<serde_json::Value> = report(cs)
        .entries
        .iter()
        .map(|e| serde_json::json!({"path": e.path, "kind": e.kind, "sha256": e.sha256}))
        .collect();
    serde_json::json!({"count": entries.len(), "files": entries})
}
