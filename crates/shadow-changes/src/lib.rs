//! Turn a shadow session's overlayfs upper layer into a reviewable change
//! set, and apply it safely to the real project.
//!
//! * [`scan()`] — walk the upper layer into a [`ChangeSet`] ([`scan`](mod@scan)).
//! * [`render_diff`], [`render_stat`], [`render_name_status`],
//!   [`render_json`] — git-style output ([`diff`], [`stat`], [`json`]).
//! * [`ProtectedRules`] — paths never applied unless included ([`protected`]).
//! * [`Selection`] — per-file / per-hunk review decisions ([`selection`]).
//! * [`record_base`] — the lower layer's state at session end ([`base`]).
//! * [`apply()`] — journaled, crash-safe, symlink-proof apply ([`mod@apply`], [`safefs`],
//!   [`journal`]).
//! * [`recover`] — call at every start of shadow.
//! * [`rollback()`] — undo the most recent apply ([`mod@rollback`]).
//!
//! # Safe file system access
//!
//! All reads of the layers and all writes to the project resolve parents
//! with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)` from a directory fd and use `*at()` calls with
//! `O_NOFOLLOW`; see [`safefs`] for the threat list.

pub mod apply;
pub mod base;
pub mod diff;
pub mod error;
pub mod journal;
pub mod json;
pub mod model;
pub mod protected;
pub mod rollback;
pub mod safefs;
pub mod scan;
pub mod selection;
pub mod stat;

pub use apply::{apply, symlink_escapes, ApplyOptions, ApplyReport, ApplyRequest};
pub use base::{record_base, BaseRecord, EntryState};
pub use diff::{hunks, line_counts, render_change, render_diff, DiffOptions, Hunk};
pub use error::{Error, Result};
pub use journal::{recover, RecoverOutcome, CRASH_ENV};
pub use json::{audit_summary, render_json, report, JsonEntry, JsonReport};
pub use model::{Change, ChangeKind, ChangeSet, Entry, FileType};
pub use protected::{ProtectedRules, DEFAULT_PATTERNS};
pub use rollback::{applied_ids, rollback, RollbackOptions, RollbackReport};
pub use scan::{scan, scan_with};
pub use selection::{merge_hunks, Decision, FileSelection, Selection};
pub use stat::{render_name_status, render_stat, StatOptions};
