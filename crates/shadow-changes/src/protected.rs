//! Protected paths: changes that are never applied unless the caller
//! explicitly includes them.
//!
//! Threat: an agent that cannot escape the sandbox can still plant code
//! that runs *outside* it later — a git hook or `core.fsmonitor`/`core.pager`
//! in `.git/config`, a CI workflow that runs with repository secrets, an
//! `.envrc` that direnv executes, a shell rc file — or tamper with secrets
//! in `.env` files. Such changes are flagged `protected` in the change set
//! and skipped by apply unless `include_protected` is set.
//!
//! # Rules
//!
//! A path (relative to the project root, `/`-separated) is protected when
//! **it or any of its ancestor directories** matches one of the globs.
//! Globs use [`globset`] syntax with `literal_separator`: `*` and `?` never
//! match `/`, `**/` matches zero or more leading directories, a pattern
//! without `**/` is anchored at the project root. The default set
//! ([`ProtectedRules::default`], also [`DEFAULT_PATTERNS`]) is:
//!
//! | pattern | protects |
//! | --- | --- |
//! | `**/.git` | every `.git` directory or file (submodules too) and everything under it: hooks, config, refs, objects |
//! | `.github/workflows` | GitHub Actions workflows and everything under them |
//! | `.gitlab-ci.yml` | GitLab CI |
//! | `.circleci` | CircleCI configuration directory |
//! | `.buildkite` | Buildkite pipelines directory |
//! | `Jenkinsfile` | Jenkins |
//! | `.travis.yml` | Travis CI |
//! | `azure-pipelines.yml` | Azure Pipelines |
//! | `**/.env*` | `.env`, `.env.local`, `.env.production`, `.envrc`, ... at any depth |
//! | `**/.bashrc`, `**/.bash_profile`, `**/.bash_login`, `**/.bash_logout`, `**/.profile`, `**/.zshrc`, `**/.zprofile`, `**/.zshenv`, `**/.inputrc` | shell start-up files at any depth |
//! | `**/.config/fish/config.fish` | fish start-up file at any depth |
//!
//! Because ancestors are matched too, `.github/workflows/ci.yml` and
//! `.git/hooks/pre-commit` are protected by the directory patterns.

use std::path::Path;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::error::{Error, Result};

/// The default protected globs (see the module documentation).
pub const DEFAULT_PATTERNS: &[&str] = &[
    "**/.git",
    ".github/workflows",
    ".gitlab-ci.yml",
    ".circleci",
    ".buildkite",
    "Jenkinsfile",
    ".travis.yml",
    "azure-pipelines.yml",
    "**/.env*",
    "**/.bashrc",
    "**/.bash_profile",
    "**/.bash_login",
    "**/.bash_logout",
    "**/.profile",
    "**/.zshrc",
    "**/.zprofile",
    "**/.zshenv",
    "**/.inputrc",
    "**/.config/fish/config.fish",
];

/// A compiled set of protected-path globs.
#[derive(Debug, Clone)]
pub struct ProtectedRules {
    patterns: Vec<String>,
    set: GlobSet,
}

impl ProtectedRules {
    /// Compile `patterns` (see the module docs for the syntax).
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self> {
        let mut b = GlobSetBuilder::new();
        let mut kept = Vec::new();
        for p in patterns {
            let p = p.as_ref();
            // `dir/**` and `dir/` mean the same as `dir` under the
            // ancestor rule; accept them for convenience.
            let norm = p.trim_end_matches('/');
            let norm = norm.strip_suffix("/**").unwrap_or(norm);
            let glob = GlobBuilder::new(norm)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| Error::Glob {
                    pattern: p.to_string(),
                    msg: e.kind().to_string(),
                })?;
            b.add(glob);
            kept.push(p.to_string());
        }
        let set = b.build().map_err(|e| Error::Glob {
            pattern: kept.join(" "),
            msg: e.to_string(),
        })?;
        Ok(ProtectedRules {
            patterns: kept,
            set,
        })
    }

    /// A rule set that protects nothing.
    pub fn none() -> Self {
        Self::new::<&str>(&[]).expect("empty glob set compiles")
    }

    /// The patterns this set was built from.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether `rel` (relative to the project root) is protected.
    pub fn is_protected(&self, rel: &Path) -> bool {
        rel.ancestors()
            .filter(|a| !a.as_os_str().is_empty())
            .any(|a| self.set.is_match(a))
    }
}

impl Default for ProtectedRules {
    fn default() -> Self {
        Self::new(DEFAULT_PATTERNS).expect("default protected globs compile")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_rules() {
        let r = ProtectedRules::default();
        for p in [
            ".git",
            ".git/config",
            ".git/hooks/pre-commit",
            "vendor/lib/.git/config",
            ".github/workflows/ci.yml",
            ".gitlab-ci.yml",
            ".circleci/config.yml",
            ".buildkite/pipeline.yml",
            "Jenkinsfile",
            ".travis.yml",
            "azure-pipelines.yml",
            ".env",
            ".env.local",
            "app/.env.production",
            ".envrc",
            ".bashrc",
            "home/u/.zshrc",
            ".profile",
            ".bash_logout",
            ".inputrc",
            ".config/fish/config.fish",
            "x/.config/fish/config.fish",
        ] {
            assert!(r.is_protected(Path::new(p)), "{p} should be protected");
        }
        for p in [
            "src/main.rs",
            ".github/CODEOWNERS",
            ".gitignore",
            "docs/Jenkinsfile",
            "environment.md",
            "my.bashrc",
            ".config/fish/functions/x.fish",
        ] {
            assert!(!r.is_protected(Path::new(p)), "{p} should not be protected");
        }
    }

    #[test]
    fn custom_rules_and_bad_glob() {
        let r = ProtectedRules::new(&["secrets/**", "*.pem"]).unwrap();
        assert!(r.is_protected(Path::new("secrets/a/b")));
        assert!(r.is_protected(Path::new("key.pem")));
        assert!(!r.is_protected(Path::new("sub/key.pem")));
        let e = ProtectedRules::new(&["a[b"]).unwrap_err().to_string();
        assert!(e.starts_with("a[b: invalid protected-path glob"), "{e}");
        assert!(!ProtectedRules::none().is_protected(Path::new(".git/config")));
    }
}
