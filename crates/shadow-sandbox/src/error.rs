//! One error type for the crate. Every variant renders as a single line that
//! can be shown to the user as-is (`shadow: <message>`).

use std::path::PathBuf;

/// Errors of the spec builder, the host probes and the session store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `load`/`remove` of an id that has no session directory.
    #[error("no session '{0}'")]
    NoSession(String),

    /// `newest_for_project` found nothing.
    #[error("no sessions for project {}", .0.display())]
    NoSessionsForProject(PathBuf),

    /// The session's project directory was removed or moved since the session ran.
    #[error("session {id}'s project {} no longer exists", project.display())]
    ProjectGone {
        /// Session id.
        id: String,
        /// Project path recorded in the session's meta.json.
        project: PathBuf,
    },

    /// An id that is not of the safe charset (defeats `../` path traversal).
    #[error("invalid session id '{0}' (allowed: a-z, 0-9 and '-', at most 64 characters)")]
    InvalidId(String),

    /// Refusing to discard a session whose supervisor is still alive.
    #[error("session {id} is still running (pid {pid})")]
    StillRunning {
        /// Session id.
        id: String,
        /// Pid of the supervising shadow process.
        pid: u32,
    },

    /// meta.json exists but cannot be parsed.
    #[error("session metadata {} is corrupt: {source}", path.display())]
    CorruptMeta {
        /// Path of the meta.json.
        path: PathBuf,
        /// The parse error.
        source: serde_json::Error,
    },

    /// The sandbox input cannot produce a safe spec.
    #[error("invalid sandbox input: {0}")]
    InvalidInput(String),

    /// An I/O failure, with what we were doing.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. "cannot create /x".
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// Result alias of the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Adds a context line to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn ctx<F: FnOnce() -> String>(self, f: F) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx<F: FnOnce() -> String>(self, f: F) -> Result<T> {
        self.map_err(|source| Error::Io {
            context: f(),
            source,
        })
    }
}
