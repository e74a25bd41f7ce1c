//! The profile file format. Every table and key is closed (`deny_unknown_fields`): a typo is an
//! error with its line and column, never a silently ignored protection.
//!
//! ```toml
//! description = "…"
//! extends = "default"            # lists append to the parent's, scalars override
//! [filesystem]
//! read_only  = ["~/.gitconfig"]  # ~/…, /absolute, or project-relative
//! read_write = ["~/.claude"]
//! deny       = ["~/.aws", "**/.env"]   # globs: project-relative only
//! [environment]
//! allow = ["ANTHROPIC_API_KEY"]  # NAME or PREFIX*
//! deny  = ["*_TOKEN"]            # wins over allow
//! set   = { NAME = "value" }
//! [network]
//! mode  = "off"                  # off | on | hosts
//! hosts = ["api.anthropic.com:443"]
//! [seccomp]
//! deny = ["mount", "ptrace"]     # groups, see seccomp.rs
//! [landlock]
//! tcp_connect = [443]            # absent: not restricted
//! tcp_bind = []
//! scope = ["signal", "abstract-unix-socket"]
//! [resources]
//! memory = "4g"
//! pids = 1024
//! cpus = 2.0
//! timeout = 3600
//! [apply]
//! protected = [".github/**"]
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::seccomp::Group;
use crate::Error;

/// Network policy of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum NetMode {
    /// Loopback only.
    #[default]
    Off,
    /// The host's network.
    On,
    /// Only the listed hosts, through shadow's proxy.
    Hosts,
}

/// Landlock scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScopeName {
    /// No signals to processes outside the sandbox.
    Signal,
    /// No connections to abstract unix sockets outside the sandbox.
    AbstractUnixSocket,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    description: Option<String>,
    extends: Option<Spanned<String>>,
    #[serde(default)]
    filesystem: RawFs,
    #[serde(default)]
    environment: RawEnv,
    #[serde(default)]
    network: RawNet,
    #[serde(default)]
    seccomp: RawSeccomp,
    #[serde(default)]
    landlock: RawLandlock,
    #[serde(default)]
    resources: RawResources,
    #[serde(default)]
    apply: RawApply,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFs {
    #[serde(default)]
    read_only: Vec<Spanned<String>>,
    #[serde(default)]
    read_write: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnv {
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
    #[serde(default)]
    set: BTreeMap<String, Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNet {
    mode: Option<NetMode>,
    #[serde(default)]
    hosts: Vec<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeccomp {
    #[serde(default)]
    deny: Vec<Group>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLandlock {
    tcp_connect: Option<Vec<u16>>,
    tcp_bind: Option<Vec<u16>>,
    scope: Option<Vec<ScopeName>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResources {
    memory: Option<Spanned<String>>,
    pids: Option<u64>,
    cpus: Option<f64>,
    disk: Option<Spanned<String>>,
    timeout: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApply {
    #[serde(default)]
    protected: Vec<Spanned<String>>,
}

/// One parsed profile file, before `extends` is resolved.
#[derive(Debug, Clone, Default)]
pub struct ProfileFile {
    /// Name of the parent profile.
    pub extends: Option<String>,
    /// `network.mode` when the file sets it (a child that does not keeps the parent's).
    pub network_mode: Option<NetMode>,
    /// This file's own settings.
    pub own: Profile,
}

/// A resolved profile: plain data, serialisable as TOML for `shadow profiles show`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Profile {
    /// Profile name.
    pub name: String,
    /// One line about it.
    pub description: String,
    /// The files it was resolved from, parent first.
    pub sources: Vec<String>,
    /// File-system rules.
    pub filesystem: Filesystem,
    /// Environment rules.
    pub environment: Environment,
    /// Network rules.
    pub network: Network,
    /// Seccomp rules.
    pub seccomp: Seccomp,
    /// Landlock network and scope rules.
    pub landlock: Landlock,
    /// Resource limits.
    pub resources: Resources,
    /// Apply rules.
    pub apply: Apply,
}

/// File-system rules; paths as written (`~/…`, `/…`, project-relative, or a project glob).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Filesystem {
    /// Readable, not writable.
    pub read_only: Vec<String>,
    /// Readable and writable.
    pub read_write: Vec<String>,
    /// Neither.
    pub deny: Vec<String>,
}

/// Environment rules.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Environment {
    /// Host variables passed through (`NAME` or `PREFIX*`).
    pub allow: Vec<String>,
    /// Never passed, even when allowed (`NAME`, `PREFIX*` or `*SUFFIX`).
    pub deny: Vec<String>,
    /// Set to a value.
    pub set: BTreeMap<String, String>,
}

/// Network rules.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Network {
    /// Mode.
    pub mode: NetMode,
    /// `HOST[:PORT]`, wildcards as `*.example.com`.
    pub hosts: Vec<String>,
}

/// Seccomp rules.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Seccomp {
    /// Denied groups (sorted, unique).
    pub deny: Vec<Group>,
}

/// Landlock network and scope rules.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Landlock {
    /// TCP connect allowlist; `None`: not restricted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_connect: Option<Vec<u16>>,
    /// TCP bind allowlist; `None`: not restricted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_bind: Option<Vec<u16>>,
    /// Scopes.
    pub scope: Vec<ScopeName>,
}

/// Resource limits; sizes as written (`4g`).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Resources {
    /// Memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Tasks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
    /// CPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Upper-layer cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<String>,
    /// Seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
}

/// Apply rules.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Apply {
    /// Extra protected globs (left out by `shadow apply` unless asked).
    pub protected: Vec<String>,
}

/// 1-based line and column of byte offset `at` in `src`.
pub fn line_col(src: &str, at: usize) -> (usize, usize) {
    let at = at.min(src.len());
    let before = &src[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

struct Ctx<'a> {
    file: &'a str,
    src: &'a str,
}

impl Ctx<'_> {
    fn err<T>(&self, s: &Spanned<T>, msg: impl std::fmt::Display) -> Error {
        let (l, c) = line_col(self.src, s.span().start);
        Error::new(format!("{}:{l}:{c}: {msg}", self.file))
    }
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

fn check_path(cx: &Ctx, p: &Spanned<String>, globs_ok: bool) -> Result<String, Error> {
    let s = p.get_ref();
    if s.is_empty() || s.contains('\0') {
        return Err(cx.err(p, "empty path"));
    }
    let rest = s
        .strip_prefix("~/")
        .or_else(|| s.strip_prefix('/'))
        .unwrap_or(s);
    if s == "~" {
        return Ok(s.clone());
    }
    if rest.split('/').any(|c| c == "..") {
        return Err(cx.err(p, format!("path {s:?} must not contain `..`")));
    }
    if s.starts_with('~') && !s.starts_with("~/") {
        return Err(cx.err(
            p,
            format!("path {s:?}: only `~/…` is understood (not another user's home)"),
        ));
    }
    if is_glob(s) {
        if !globs_ok {
            return Err(cx.err(p, format!("path {s:?}: globs are only allowed in `deny`")));
        }
        if s.starts_with('/') || s.starts_with('~') {
            return Err(cx.err(
                p,
                format!("glob {s:?}: globs are project-relative (write it without `/` or `~/`)"),
            ));
        }
        globset::Glob::new(s).map_err(|e| cx.err(p, format!("glob {s:?}: {e}")))?;
    }
    Ok(s.clone())
}

fn check_env_name(cx: &Ctx, n: &Spanned<String>, wildcard_ok: bool) -> Result<String, Error> {
    let s = n.get_ref();
    let core = if wildcard_ok {
        s.strip_suffix('*')
            .or_else(|| s.strip_prefix('*'))
            .unwrap_or(s)
    } else {
        s
    };
    let ok = !core.is_empty() && core.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(s.clone())
    } else {
        Err(cx.err(
            n,
            format!("environment name {s:?}: letters, digits and `_` only (a `*` at one end in allow/deny)"),
        ))
    }
}

/// Parses a size as `shadow run --memory` does: a number with an optional k, m, g or t suffix.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let s = s.strip_suffix('b').unwrap_or(&s);
    let (num, mult) = match s.chars().last()? {
        'k' => (&s[..s.len() - 1], 1u64 << 10),
        'm' => (&s[..s.len() - 1], 1 << 20),
        'g' => (&s[..s.len() - 1], 1 << 30),
        't' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()?
        .checked_mul(mult)
        .filter(|n| *n > 0)
}

fn check_host(cx: &Ctx, h: &Spanned<String>) -> Result<String, Error> {
    let s = h.get_ref();
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (s.as_str(), None),
    };
    if let Some(p) = port {
        if p.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(cx.err(h, format!("host {s:?}: port must be 1-65535")));
        }
    }
    let name = host.strip_prefix("*.").unwrap_or(host);
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if ok {
        Ok(s.clone())
    } else {
        Err(cx.err(
            h,
            format!("host {s:?}: a DNS name or IP, optionally `*.` in front and `:PORT` after"),
        ))
    }
}

/// Parses one profile file. `file` names it in errors.
pub fn parse(file: &str, src: &str) -> Result<ProfileFile, Error> {
    let raw: RawFile = toml::from_str(src).map_err(|e| {
        let msg = e.message().trim().to_string();
        match e.span() {
            Some(sp) => {
                let (l, c) = line_col(src, sp.start);
                Error::new(format!("{file}:{l}:{c}: {msg}"))
            }
            None => Error::new(format!("{file}: {msg}")),
        }
    })?;
    let cx = Ctx { file, src };
    let paths = |v: &[Spanned<String>], globs: bool| -> Result<Vec<String>, Error> {
        v.iter().map(|p| check_path(&cx, p, globs)).collect()
    };
    let mut own = Profile {
        description: raw.description.unwrap_or_default(),
        ..Default::default()
    };
    own.filesystem.read_only = paths(&raw.filesystem.read_only, false)?;
    own.filesystem.read_write = paths(&raw.filesystem.read_write, false)?;
    own.filesystem.deny = paths(&raw.filesystem.deny, true)?;
    own.environment.allow = raw
        .environment
        .allow
        .iter()
        .map(|n| check_env_name(&cx, n, true))
        .collect::<Result<_, _>>()?;
    own.environment.deny = raw
        .environment
        .deny
        .iter()
        .map(|n| check_env_name(&cx, n, true))
        .collect::<Result<_, _>>()?;
    for (k, v) in &raw.environment.set {
        let name = Spanned::new(v.span(), k.clone());
        check_env_name(&cx, &name, false)?;
        if v.get_ref().contains('\0') {
            return Err(cx.err(v, "value contains NUL"));
        }
        own.environment.set.insert(k.clone(), v.get_ref().clone());
    }
    own.network.mode = raw.network.mode.unwrap_or_default();
    own.network.hosts = raw
        .network
        .hosts
        .iter()
        .map(|h| check_host(&cx, h))
        .collect::<Result<_, _>>()?;
    own.seccomp.deny = raw.seccomp.deny;
    own.landlock = Landlock {
        tcp_connect: raw.landlock.tcp_connect,
        tcp_bind: raw.landlock.tcp_bind,
        scope: raw.landlock.scope.unwrap_or_default(),
    };
    for s in [&raw.resources.memory, &raw.resources.disk]
        .into_iter()
        .flatten()
    {
        if parse_size(s.get_ref()).is_none() {
            return Err(cx.err(
                s,
                format!(
                    "size {:?}: a number with an optional k, m, g or t",
                    s.get_ref()
                ),
            ));
        }
    }
    if let Some(c) = raw.resources.cpus {
        if !(c.is_finite() && c > 0.0) {
            return Err(Error::new(format!(
                "{file}: resources.cpus must be a positive number"
            )));
        }
    }
    own.resources = Resources {
        memory: raw.resources.memory.map(|s| s.into_inner()),
        pids: raw.resources.pids,
        cpus: raw.resources.cpus,
        disk: raw.resources.disk.map(|s| s.into_inner()),
        timeout: raw.resources.timeout,
    };
    own.apply.protected = raw
        .apply
        .protected
        .iter()
        .map(|p| {
            globset::Glob::new(p.get_ref())
                .map(|_| p.get_ref().clone())
                .map_err(|e| cx.err(p, format!("glob {:?}: {e}", p.get_ref())))
        })
        .collect::<Result<_, _>>()?;
    let extends = match raw.extends {
        Some(e) => {
            if !valid_name(e.get_ref()) {
                return Err(cx.err(&e, format!("extends {:?}: not a profile name", e.get_ref())));
            }
            Some(e.into_inner())
        }
        None => None,
    };
    Ok(ProfileFile {
        extends,
        network_mode: raw.network.mode,
        own,
    })
}

/// Profile names: lower-case letters, digits and `-`.
pub fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn append<T: Clone + PartialEq>(base: &mut Vec<T>, more: &[T]) {
    for m in more {
        if !base.contains(m) {
            base.push(m.clone());
        }
    }
}

/// `child` over `parent`: lists append (deduplicated), scalars set in the child win.
pub fn merge(parent: &Profile, file: &ProfileFile) -> Profile {
    let child = &file.own;
    let mut p = parent.clone();
    if !child.description.is_empty() {
        p.description = child.description.clone();
    }
    append(&mut p.filesystem.read_only, &child.filesystem.read_only);
    append(&mut p.filesystem.read_write, &child.filesystem.read_write);
    append(&mut p.filesystem.deny, &child.filesystem.deny);
    append(&mut p.environment.allow, &child.environment.allow);
    append(&mut p.environment.deny, &child.environment.deny);
    p.environment.set.extend(
        child
            .environment
            .set
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    if let Some(m) = file.network_mode {
        p.network.mode = m;
    }
    append(&mut p.network.hosts, &child.network.hosts);
    append(&mut p.seccomp.deny, &child.seccomp.deny);
    p.seccomp.deny.sort();
    if child.landlock.tcp_connect.is_some() {
        p.landlock.tcp_connect = child.landlock.tcp_connect.clone();
    }
    if child.landlock.tcp_bind.is_some() {
        p.landlock.tcp_bind = child.landlock.tcp_bind.clone();
    }
    append(&mut p.landlock.scope, &child.landlock.scope);
    p.landlock.scope.sort();
    let r = &child.resources;
    let pr = &mut p.resources;
    pr.memory = r.memory.clone().or(pr.memory.take());
    pr.pids = r.pids.or(pr.pids);
    pr.cpus = r.cpus.or(pr.cpus);
    pr.disk = r.disk.clone().or(pr.disk.take());
    pr.timeout = r.timeout.or(pr.timeout);
    append(&mut p.apply.protected, &child.apply.protected);
    p
}

#[cfg(test)]
mod tests;
