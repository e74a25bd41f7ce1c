//! One error type for every command, whose `Display` is the single line a user (or an engine that
//! forwards our `--log-format json` output) sees.
//!
//! The texts deliberately contain the phrases runc uses where clients match on them:
//! containerd and Docker look for `does not exist` / `not found`, `container not running`,
//! `no such process`.

use std::fmt;

/// What went wrong, coarsely, so callers (and tests) can branch without parsing text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The container (or session, file) named does not exist.
    NotFound,
    /// A container with that id exists already.
    AlreadyExists,
    /// Bad command-line or spec input.
    InvalidInput,
    /// The operation needs a running container.
    NotRunning,
    /// The container is in a state that forbids the operation.
    InvalidState,
    /// The spec asks for something this runtime/kernel cannot enforce: refused, not weakened.
    Unsupported,
    /// Another command holds the container's lock.
    Busy,
    /// I/O or a failure inside libcontainer.
    Runtime,
}

/// A runtime error: a kind and one line of text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    msg: String,
}

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Build an error of `kind` with text `msg`.
    pub fn new(kind: ErrorKind, msg: impl Into<String>) -> Self {
        Self {
            kind,
            msg: msg.into(),
        }
    }

    /// Shorthand for [`ErrorKind::InvalidInput`].
    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, msg)
    }

    /// Shorthand for [`ErrorKind::Runtime`].
    pub fn runtime(msg: impl Into<String>) -> Self {
        Self::new(ErrorKind::Runtime, msg)
    }

    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The error's text.
    pub fn message(&self) -> &str {
        &self.msg
    }

    /// Prefix the message with context, keeping the kind.
    pub fn context(self, ctx: impl fmt::Display) -> Self {
        Self {
            kind: self.kind,
            msg: format!("{ctx}: {}", self.msg),
        }
    }

    /// Wrap an I/O error with what we were doing.
    pub fn io(what: impl fmt::Display, err: std::io::Error) -> Self {
        Self::runtime(format!("{what}: {err}"))
    }

    /// Wrap a libcontainer error, flattening its source chain into one line (libcontainer's
    /// top-level messages alone, e.g. "failed to create container", say too little).
    pub fn from_libcontainer(what: impl fmt::Display, err: &dyn std::error::Error) -> Self {
        Self::runtime(format!("{what}: {}", chain(err)))
    }
}

/// `a: b: c` for an error and its sources, without repeating a source already in the text.
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        let s = e.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = e.source();
    }
    out
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("failed to create container")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn chain_flattens_sources_once() {
        let e = Outer(std::io::Error::from_raw_os_error(libc::ENOENT));
        assert_eq!(
            chain(&e),
            "failed to create container: No such file or directory (os error 2)"
        );
    }

    #[test]
    fn context_keeps_kind() {
        let e = Error::new(ErrorKind::NotFound, "container \"x\" does not exist").context("kill");
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert_eq!(e.to_string(), "kill: container \"x\" does not exist");
    }
}
