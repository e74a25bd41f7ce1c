//! `shadow`: run a command or agent against a copy-on-write overlay of the project, then look
//! at what it changed and decide what reaches the real project.
//!
//! Each verb is a module with a plain options struct and a function returning the exit status;
//! `main.rs` only parses the command line.
//!
//! - [`launch`]: `shadow run` (session, bundle, sandboxed run, change summary);
//! - [`inspect`]: `sessions`, `show`, `diff`;
//! - [`decide`]: `apply`, `apply --rollback`, `discard`;
//! - [`review`]: the interactive per-file, per-hunk review;
//! - [`doctor`]: host checks;
//! - [`profiles`]: `profiles list|show|check`; [`policy`]: a profile turned into sandbox pieces;
//! - [`audit`]: the hash-chained session log and `shadow log`;
//! - [`context`]: the store, the project, the session named on the command line.

pub mod audit;
pub mod context;
pub mod decide;
pub mod doctor;
pub mod inspect;
pub mod launch;
pub mod policy;
pub mod profiles;
pub mod review;
pub mod rootless;

/// A user-facing error: one line, printed as `shadow: <msg>`, exit status 1 (or `code`).
#[derive(Debug)]
pub struct Failure {
    /// The line.
    pub msg: String,
    /// Exit status.
    pub code: u8,
}

impl Failure {
    /// A failure with exit status 1.
    pub fn new(msg: impl Into<String>) -> Self {
        Self {
            msg: msg.into(),
            code: 1,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Failure {}

macro_rules! failure_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Failure {
            fn from(e: $t) -> Self {
                Failure::new(e.to_string())
            }
        }
    )*};
}
failure_from!(
    shadow_sandbox::Error,
    shadow_changes::Error,
    shadow_runtime_core::Error,
    std::io::Error,
    shadow_profile::Error
);

/// Result of a verb: its exit status.
pub type Outcome = Result<i32, Failure>;
