//! Where profiles come from, in order of precedence: the project (`.shadow/profiles/NAME.toml`),
//! the user (`~/.config/shadow/profiles/NAME.toml`), then the ones shipped in `profiles/`
//! (compiled into the binary, so an installed `shadow` needs no data files).
//!
//! `extends = "X"` resolves X through the same layers; a file that extends its own name (a user
//! tightening the shipped `default`) gets the next layer down.

use std::path::{Path, PathBuf};

use crate::schema::{self, Profile, ProfileFile};
use crate::Error;

/// The shipped profiles: name and TOML text.
pub const BUILTIN: &[(&str, &str)] = &[
    ("default", include_str!("../../../profiles/default.toml")),
    (
        "claude-code",
        include_str!("../../../profiles/claude-code.toml"),
    ),
    ("codex", include_str!("../../../profiles/codex.toml")),
    ("aider", include_str!("../../../profiles/aider.toml")),
    (
        "openhands",
        include_str!("../../../profiles/openhands.toml"),
    ),
    (
        "gemini-cli",
        include_str!("../../../profiles/gemini-cli.toml"),
    ),
    ("opencode", include_str!("../../../profiles/opencode.toml")),
];

/// Where a profile was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `.shadow/profiles/` of the project.
    Project(PathBuf),
    /// The user's config directory.
    User(PathBuf),
    /// Shipped with shadow.
    Builtin,
}

impl Source {
    fn layer(&self) -> u8 {
        match self {
            Source::Project(_) => 0,
            Source::User(_) => 1,
            Source::Builtin => 2,
        }
    }

    /// For messages and `profiles list`.
    pub fn describe(&self, name: &str) -> String {
        match self {
            Source::Project(p) | Source::User(p) => p.display().to_string(),
            Source::Builtin => format!("builtin:{name}"),
        }
    }
}

/// The profile directories to search.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    /// `<project>/.shadow/profiles`.
    pub project_dir: Option<PathBuf>,
    /// `~/.config/shadow/profiles`.
    pub user_dir: Option<PathBuf>,
}

/// Maximum `extends` depth. Threat: none; a cycle or a runaway chain is a mistake to report.
const MAX_DEPTH: usize = 16;

impl Registry {
    /// The standard directories for `project` and a user whose config home is `config_home`
    /// (`$XDG_CONFIG_HOME` or `~/.config`).
    pub fn new(project: Option<&Path>, config_home: Option<&Path>) -> Registry {
        Registry {
            project_dir: project.map(|p| p.join(".shadow/profiles")),
            user_dir: config_home.map(|c| c.join("shadow/profiles")),
        }
    }

    /// Finds `name` at layer `min_layer` or below; returns its source and text.
    fn find(&self, name: &str, min_layer: u8) -> Result<Option<(Source, String)>, Error> {
        let file = format!("{name}.toml");
        let dirs = [
            self.project_dir
                .as_ref()
                .map(|d| Source::Project(d.join(&file))),
            self.user_dir.as_ref().map(|d| Source::User(d.join(&file))),
        ];
        for src in dirs.into_iter().flatten() {
            if src.layer() < min_layer {
                continue;
            }
            let (Source::Project(p) | Source::User(p)) = &src else {
                continue;
            };
            match std::fs::read_to_string(p) {
                Ok(text) => return Ok(Some((src, text))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::new(format!("{}: {e}", p.display()))),
            }
        }
        Ok(BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| (Source::Builtin, t.to_string())))
    }

    /// Resolves profile `name` (after `extends`).
    pub fn resolve(&self, name: &str) -> Result<Profile, Error> {
        if !schema::valid_name(name) {
            return Err(Error::new(format!(
                "invalid profile name {name:?} (lower-case letters, digits and `-`)"
            )));
        }
        let Some((src, text)) = self.find(name, 0)? else {
            return Err(Error::new(format!(
                "unknown profile {name:?} (`shadow profiles list` shows the available ones)"
            )));
        };
        self.resolve_file(name, &src, &text)
    }

    /// Resolves a profile given as a file (for `shadow profiles check` and `--profile FILE`).
    pub fn resolve_path(&self, path: &Path) -> Result<Profile, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("profile")
            .to_string();
        self.resolve_file(&name, &Source::User(path.to_path_buf()), &text)
    }

    fn resolve_file(&self, name: &str, src: &Source, text: &str) -> Result<Profile, Error> {
        let mut chain: Vec<(String, Source, ProfileFile)> = Vec::new();
        let (mut name, mut src, mut text) = (name.to_string(), src.clone(), text.to_string());
        loop {
            let file = schema::parse(&src.describe(&name), &text)?;
            let parent = file.extends.clone();
            chain.push((name.clone(), src.clone(), file));
            let Some(parent) = parent else { break };
            if chain.len() >= MAX_DEPTH {
                return Err(Error::new(format!(
                    "{}: extends chain deeper than {MAX_DEPTH}",
                    chain[0].1.describe(&chain[0].0)
                )));
            }
            // Extending one's own name means the same name one layer down.
            let min_layer = if parent == name { src.layer() + 1 } else { 0 };
            if chain
                .iter()
                .any(|(n, s, _)| *n == parent && s.layer() >= min_layer && parent != name)
            {
                return Err(Error::new(format!(
                    "{}: extends cycle through {parent:?}",
                    chain[0].1.describe(&chain[0].0)
                )));
            }
            let Some((psrc, ptext)) = self.find(&parent, min_layer)? else {
                return Err(Error::new(format!(
                    "{}: extends unknown profile {parent:?}",
                    src.describe(&name)
                )));
            };
            name = parent;
            src = psrc;
            text = ptext;
        }
        let mut p = Profile::default();
        let mut sources = Vec::new();
        for (n, s, f) in chain.iter().rev() {
            p = schema::merge(&p, f);
            sources.push(s.describe(n));
        }
        p.name = chain[0].0.clone();
        p.sources = sources;
        Ok(p)
    }

    /// Every profile name visible, with the source that wins.
    pub fn list(&self) -> Vec<(String, Source)> {
        let mut names: Vec<String> = BUILTIN.iter().map(|(n, _)| n.to_string()).collect();
        for d in [&self.project_dir, &self.user_dir].into_iter().flatten() {
            if let Ok(rd) = std::fs::read_dir(d) {
                for e in rd.flatten() {
                    let p = e.path();
                    if p.extension().is_some_and(|x| x == "toml") {
                        if let Some(n) = p.file_stem().and_then(|s| s.to_str()) {
                            if schema::valid_name(n) && !names.iter().any(|x| x == n) {
                                names.push(n.to_string());
                            }
                        }
                    }
                }
            }
        }
        names.sort();
        names
            .into_iter()
            .filter_map(|n| match self.find(&n, 0) {
                Ok(Some((s, _))) => Some((n, s)),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NetMode;

    #[test]
    fn every_shipped_profile_resolves() {
        let r = Registry::default();
        for (name, _) in BUILTIN {
            let p = r.resolve(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(p.name, *name);
            // Every profile keeps the default's protections.
            assert!(p.filesystem.deny.iter().any(|d| d == "~/.aws"), "{name}");
            assert_eq!(p.seccomp.deny.len(), crate::seccomp::ALL.len(), "{name}");
        }
        let p = r.resolve("claude-code").unwrap();
        assert_eq!(p.sources, vec!["builtin:default", "builtin:claude-code"]);
        assert!(p.filesystem.read_write.contains(&"~/.claude".to_string()));
    }

    #[test]
    fn user_and_project_layers_and_self_extension() {
        let d = tempfile::tempdir().unwrap();
        let user = d.path().join("cfg");
        let proj = d.path().join("proj");
        std::fs::create_dir_all(user.join("shadow/profiles")).unwrap();
        std::fs::create_dir_all(proj.join(".shadow/profiles")).unwrap();
        std::fs::write(
            user.join("shadow/profiles/default.toml"),
            "extends = \"default\"\n[resources]\npids = 77\n",
        )
        .unwrap();
        std::fs::write(
            proj.join(".shadow/profiles/mine.toml"),
            "extends = \"default\"\n[network]\nmode = \"on\"\n",
        )
        .unwrap();
        std::fs::write(
            proj.join(".shadow/profiles/loop.toml"),
            "extends = \"loop2\"\n",
        )
        .unwrap();
        std::fs::write(
            proj.join(".shadow/profiles/loop2.toml"),
            "extends = \"loop\"\n",
        )
        .unwrap();
        let r = Registry::new(Some(&proj), Some(&user));
        let p = r.resolve("mine").unwrap();
        assert_eq!(p.resources.pids, Some(77));
        assert_eq!(p.network.mode, NetMode::On);
        assert_eq!(p.sources.len(), 3);
        let e = r.resolve("loop").unwrap_err();
        assert!(e.msg.contains("extends cycle"), "{e}");
        assert!(r
            .resolve("nope")
            .unwrap_err()
            .msg
            .starts_with("unknown profile \"nope\""));
        let names: Vec<String> = r.list().into_iter().map(|(n, _)| n).collect();
        assert!(names.contains(&"mine".to_string()) && names.contains(&"codex".to_string()));
    }
}
