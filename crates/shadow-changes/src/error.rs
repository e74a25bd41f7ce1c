//! The crate's error type: one variant per failure, each printing as one
//! line that names the path concerned.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while scanning, rendering, applying,
/// recovering or rolling back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A system call failed.
    #[error("{}: {op}: {source}", path.display())]
    Io {
        /// Path concerned.
        path: PathBuf,
        /// What was being done (`open`, `rename`, ...).
        op: &'static str,
        /// Underlying error.
        #[source]
        source: io::Error,
    },
    /// A relative path contained `..`, `.`, a root or was empty.
    #[error("{}: not a plain relative path inside the project", path.display())]
    InvalidPath {
        /// The offending path.
        path: PathBuf,
    },
    /// A component of the path is a symbolic link (or would leave the root).
    #[error("{}: refusing to follow a symbolic link or leave the project while resolving this path", path.display())]
    SymlinkInPath {
        /// The path being resolved.
        path: PathBuf,
    },
    /// The upper layer contains a device node, fifo or socket.
    #[error("{}: refusing to apply a {kind} from the session (only regular files, symlinks and directories are applied)", path.display())]
    SpecialFile {
        /// The path in the change set.
        path: PathBuf,
        /// Human readable file type.
        kind: &'static str,
    },
    /// A symlink from the session points outside the project.
    #[error("{}: symlink target {} resolves outside the project; refusing (use force to apply it anyway)", path.display(), target.display())]
    SymlinkEscape {
        /// The symlink's path.
        path: PathBuf,
        /// Its target.
        target: PathBuf,
    },
    /// The project changed since the session's base was recorded.
    #[error(
        "project changed since the session started; drifted paths: {} (use force to apply anyway)",
        join(paths)
    )]
    Drift {
        /// Every drifted path.
        paths: Vec<PathBuf>,
    },
    /// The base record has no entry for a path that is being applied.
    #[error("{}: no base record entry for this path (use force to apply anyway)", path.display())]
    MissingBase {
        /// The path.
        path: PathBuf,
    },
    /// Another apply, recover or rollback holds the journal lock.
    #[error("{}: another shadow apply/rollback/recover is running on this project (lock is held)", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// An interrupted apply or rollback must be recovered first.
    #[error("{}: an interrupted apply or rollback was found; run recover first", path.display())]
    PendingJournal {
        /// The journal directory.
        path: PathBuf,
    },
    /// The journal is unreadable.
    #[error("{}: corrupt journal: {msg}", path.display())]
    Journal {
        /// The journal file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// A JSON document (base record, selection, journal) failed to parse.
    #[error("{}: invalid JSON: {msg}", path.display())]
    Json {
        /// The file (or `<memory>`).
        path: PathBuf,
        /// The parser's message.
        msg: String,
    },
    /// Nothing has been applied that could be rolled back.
    #[error("{}: no completed apply to roll back", path.display())]
    NothingToRollBack {
        /// The journal directory.
        path: PathBuf,
    },
    /// The project changed after the apply that is being rolled back.
    #[error("project changed since the last apply; refusing to roll back: {} (use force to roll back anyway)", join(paths))]
    ChangedSinceApply {
        /// Every path that differs from what the apply wrote.
        paths: Vec<PathBuf>,
    },
    /// A selection cannot be applied to this change set.
    #[error("{}: invalid selection: {msg}", path.display())]
    Selection {
        /// The path in the change set.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// A protected-path glob did not parse.
    #[error("{pattern}: invalid protected-path glob: {msg}")]
    Glob {
        /// The pattern.
        pattern: String,
        /// The parser's message.
        msg: String,
    },
    /// The upper layer uses an overlayfs feature this crate cannot interpret.
    #[error("{}: unsupported overlayfs feature in the upper layer: {what}", path.display())]
    UnsupportedOverlay {
        /// The path in the upper layer.
        path: PathBuf,
        /// Which feature.
        what: &'static str,
    },
    /// A path in the project is in a state the operation cannot handle.
    #[error("{}: {msg}", path.display())]
    Conflict {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
}

fn join(paths: &[PathBuf]) -> String {
    let mut s = String::new();
    for (i, p) in paths.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{}", p.display());
    }
    s
}

impl Error {
    pub(crate) fn io(
        op: &'static str,
        path: impl AsRef<Path>,
        source: impl Into<io::Error>,
    ) -> Self {
        Error::Io {
            path: path.as_ref().to_path_buf(),
            op,
            source: source.into(),
        }
    }
}

/// Attach an operation name and a path to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn ctx(self, op: &'static str, path: impl AsRef<Path>) -> Result<T>;
}

impl<T, E: Into<io::Error>> IoContext<T> for std::result::Result<T, E> {
    fn ctx(self, op: &'static str, path: impl AsRef<Path>) -> Result<T> {
        self.map_err(|e| Error::io(op, path, e))
    }
}
