//! Agent profiles: what a sandbox may read, write, reach and call, per agent.
//!
//! - [`schema`]: the TOML file format (with `extends`), parsed with positions for errors;
//! - [`registry`]: where profiles come from (shipped, user, project) and how `extends` resolves;
//! - [`seccomp`]: deny groups turned into `linux.seccomp`.
//!
//! The result, [`Profile`], is plain data; `shadow run` turns it into the bundle.

pub mod registry;
pub mod schema;
pub mod seccomp;

pub use registry::{Registry, Source};
pub use schema::{NetMode, Profile};

/// Annotation carrying a profile's environment deny patterns (a JSON list of `NAME`,
/// `PREFIX*`, `*SUFFIX`), which shadow-runtime's executor applies to every process it starts
/// in the container, an `exec`'s included.
pub const ENV_DENY_ANNOTATION: &str = "run.shadow.env-deny";

/// Whether variable `name` matches `pattern` (`NAME`, `PREFIX*` or `*SUFFIX`).
pub fn env_pattern_matches(pattern: &str, name: &str) -> bool {
    if let Some(prefix) = pattern.strip_suffix('*') {
        name.starts_with(prefix)
    } else if let Some(suffix) = pattern.strip_prefix('*') {
        name.ends_with(suffix)
    } else {
        pattern == name
    }
}

/// An error in a profile file, with its position when it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// `FILE:LINE:COL: message` (or `FILE: message`, or just the message).
    pub msg: String,
}

impl Error {
    pub(crate) fn new(msg: impl Into<String>) -> Error {
        Error { msg: msg.into() }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Error {}
