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

/// Annotation carrying a profile's environment rule ([`EnvDeny`] as JSON), which
/// shadow-runtime's executor applies to every process it starts in the container, an `exec`'s
/// included.
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

/// Which variables a profile keeps out: its deny patterns, except the names its allow list
/// gives outright (a profile naming `ANTHROPIC_AUTH_TOKEN` wins over the default's `*_TOKEN`),
/// the same rule `shadow run` applies.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EnvDeny {
    /// Patterns (`NAME`, `PREFIX*`, `*SUFFIX`).
    pub deny: Vec<String>,
    /// Exact names that are kept even when a pattern matches.
    pub except: Vec<String>,
}

impl EnvDeny {
    /// The rule of profile `p`.
    pub fn of(p: &Profile) -> EnvDeny {
        EnvDeny {
            deny: p.environment.deny.clone(),
            except: p
                .environment
                .allow
                .iter()
                .filter(|a| !a.contains('*'))
                .cloned()
                .collect(),
        }
    }

    /// Whether `name` is kept out.
    pub fn denies(&self, name: &str) -> bool {
        self.deny.iter().any(|d| env_pattern_matches(d, name))
            && !self.except.iter().any(|a| a == name)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_patterns() {
        assert!(env_pattern_matches("*_TOKEN", "GITHUB_TOKEN"));
        assert!(env_pattern_matches("AWS_*", "AWS_KEY"));
        assert!(env_pattern_matches("SSH_AUTH_SOCK", "SSH_AUTH_SOCK"));
        assert!(!env_pattern_matches("*_TOKEN", "TOKENS"));
        let r = EnvDeny {
            deny: vec!["*_TOKEN".into()],
            except: vec!["ANTHROPIC_AUTH_TOKEN".into()],
        };
        assert!(r.denies("GITHUB_TOKEN"));
        assert!(!r.denies("ANTHROPIC_AUTH_TOKEN"));
        assert!(!r.denies("PATH"));
    }
}
