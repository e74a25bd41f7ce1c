//! A resolved profile turned into the pieces of a sandbox: environment, mounts to add or mask,
//! the seccomp filter, the Landlock policy, limits. Pure functions over plain data (the one
//! file-system walk, for project deny globs, is [`project_glob_matches`]).

use std::path::{Path, PathBuf};

use shadow_landlock::Policy;
use shadow_profile::schema::ScopeName;
use shadow_profile::{NetMode, Profile};
use shadow_sandbox::spec::{ETC_SECRET_PATHS, HOME_CREDENTIAL_PATHS};

use crate::Failure;

/// Where a profile path points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// An absolute path (host path = sandbox path).
    Path(PathBuf),
    /// A project-relative glob.
    Glob(String),
}

/// `~/x`, `/x` or project-relative `x` as an absolute path (or a glob).
pub fn place(raw: &str, home: &Path, project: &Path) -> Place {
    if raw == "~" {
        return Place::Path(home.to_path_buf());
    }
    if raw.contains(['*', '?', '[']) {
        return Place::Glob(raw.to_string());
    }
    if let Some(rest) = raw.strip_prefix("~/") {
        Place::Path(home.join(rest))
    } else if raw.starts_with('/') {
        Place::Path(PathBuf::from(raw))
    } else {
        Place::Path(project.join(raw))
    }
}

fn paths(raws: &[String], home: &Path, project: &Path) -> (Vec<PathBuf>, Vec<String>) {
    let mut p = Vec::new();
    let mut g = Vec::new();
    for r in raws {
        match place(r, home, project) {
            Place::Path(x) => p.push(x),
            Place::Glob(x) => g.push(x),
        }
    }
    (p, g)
}

/// What a profile's file-system section means for one run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FsPlan {
    /// Host paths bind-mounted read-only (existing, outside the project and home tmpfs view).
    pub extra_ro: Vec<PathBuf>,
    /// Paths with Landlock read-write (under the home tmpfs, /tmp or the project).
    pub landlock_rw: Vec<PathBuf>,
    /// Paths masked and denied by Landlock.
    pub denied: Vec<PathBuf>,
    /// Project-relative deny globs.
    pub deny_globs: Vec<String>,
}

/// The file-system plan; refuses a read-write path that would write to the host.
pub fn fs_plan(
    p: &Profile,
    home: &Path,
    project: &Path,
    exists: &dyn Fn(&Path) -> bool,
) -> Result<FsPlan, Failure> {
    let (ro, _) = paths(&p.filesystem.read_only, home, project);
    let (rw, _) = paths(&p.filesystem.read_write, home, project);
    let (deny, deny_globs) = paths(&p.filesystem.deny, home, project);
    let mut plan = FsPlan {
        deny_globs,
        ..Default::default()
    };
    for r in rw {
        // Threat: a profile turning the sandbox into a writer of the host. Writable places are
        // the overlay, the fresh $HOME and /tmp only: there, rw is a Landlock grant.
        if !(r.starts_with(home) || r.starts_with("/tmp") || r.starts_with(project)) {
            return Err(Failure::new(format!(
                "profile {}: read_write path {} is outside the project overlay, $HOME and /tmp; shadow never lets a sandbox write to the host",
                p.name,
                r.display()
            )));
        }
        plan.landlock_rw.push(r);
    }
    for r in ro {
        // Inside the project it is visible already (and copy-on-write); elsewhere, bind it
        // read-only when the host has it.
        if !r.starts_with(project) && exists(&r) && !deny.iter().any(|d| r.starts_with(d)) {
            plan.extra_ro.push(r);
        }
    }
    plan.denied = deny;
    Ok(plan)
}

/// Project files matching the deny globs (to be masked). Walks the project once; `.git` is
/// walked too (a glob may name something in it).
pub fn project_glob_matches(project: &Path, globs: &[String]) -> Result<Vec<PathBuf>, Failure> {
    if globs.is_empty() {
        return Ok(Vec::new());
    }
    let mut b = globset::GlobSetBuilder::new();
    for g in globs {
        b.add(globset::Glob::new(g).map_err(|e| Failure::new(format!("glob {g:?}: {e}")))?);
    }
    let set = b.build().map_err(|e| Failure::new(e.to_string()))?;
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(project)
        .follow_links(false)
        .into_iter()
        .flatten()
    {
        if let Ok(rel) = e.path().strip_prefix(project) {
            if !rel.as_os_str().is_empty() && set.is_match(rel) && !e.path_is_symlink() {
                out.push(e.path().to_path_buf());
            }
        }
    }
    Ok(out)
}

/// Environment: allowlist additions and the deny filter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvPlan {
    /// Extra names/prefixes for the allowlist.
    pub allow: Vec<String>,
    /// Deny patterns (`NAME`, `PREFIX*`, `*SUFFIX`).
    pub deny: Vec<String>,
    /// Values to set.
    pub set: Vec<(String, String)>,
}

/// Whether `name` is denied: a deny pattern matches it and it is not allowed by its exact name
/// (a profile naming `ANTHROPIC_AUTH_TOKEN` outright wins over the default's `*_TOKEN`).
pub fn env_denied(plan: &EnvPlan, name: &str, exact_allow: &[String]) -> bool {
    plan.deny
        .iter()
        .any(|d| shadow_profile::env_pattern_matches(d, name))
        && !exact_allow.iter().any(|a| a == name)
}

/// The environment plan of a profile.
pub fn env_plan(p: &Profile) -> EnvPlan {
    EnvPlan {
        allow: p.environment.allow.clone(),
        deny: p.environment.deny.clone(),
        set: p
            .environment
            .set
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

/// The Landlock policy of a sandbox: `/` readable, the writable places writable, the secrets
/// and the profile's denials carved out.
pub fn landlock_policy(
    p: &Profile,
    fs: &FsPlan,
    home: &Path,
    project: &Path,
    store: &Path,
    best_effort: bool,
) -> Policy {
    let mut rw: Vec<PathBuf> = vec![
        project.to_path_buf(),
        home.to_path_buf(),
        "/tmp".into(),
        "/dev".into(),
        "/proc".into(),
        "/run".into(),
    ];
    for r in &fs.landlock_rw {
        if !rw.iter().any(|x| r.starts_with(x)) {
            rw.push(r.clone());
        }
    }
    let mut deny: Vec<PathBuf> = ETC_SECRET_PATHS.iter().map(PathBuf::from).collect();
    deny.extend(HOME_CREDENTIAL_PATHS.iter().map(|c| home.join(c)));
    deny.push(store.to_path_buf());
    for d in &fs.denied {
        if !deny.contains(d) {
            deny.push(d.clone());
        }
    }
    Policy {
        version: shadow_landlock::VERSION,
        read_only: vec!["/".into()],
        read_write: rw,
        deny,
        tcp_connect: p.landlock.tcp_connect.clone(),
        tcp_bind: p.landlock.tcp_bind.clone(),
        scope_signals: p.landlock.scope.contains(&ScopeName::Signal),
        scope_abstract_unix: p.landlock.scope.contains(&ScopeName::AbstractUnixSocket),
        best_effort,
    }
}

/// The sandbox's network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// Its own namespace with only `lo`.
    None,
    /// The host's network namespace.
    Host,
    /// Only `lo`, plus shadow's proxy on it, which reaches these hosts only.
    Proxy(shadow_netproxy::Allowlist),
}

/// The network a run gets: `--allow-network` / `--network host` > `--network none` > the
/// profile's mode, where `--allow-host` rules (added to a `hosts` profile's own) turn any mode
/// into the proxy.
pub fn network(
    p: &Profile,
    allow_network: bool,
    no_network: bool,
    allow_host: &[String],
) -> Result<Network, Failure> {
    if allow_network {
        return Ok(Network::Host);
    }
    if no_network {
        return Ok(Network::None);
    }
    let mut cli = shadow_netproxy::Allowlist::parse(allow_host)
        .map_err(|e| Failure::new(format!("--allow-host: {e}")))?;
    match p.network.mode {
        NetMode::On if cli.rules.is_empty() => return Ok(Network::Host),
        NetMode::Off if cli.rules.is_empty() => return Ok(Network::None),
        NetMode::Hosts => {
            let own = profile_hosts(p)?;
            cli.rules.extend(own.rules);
        }
        _ => {}
    }
    Ok(Network::Proxy(cli))
}

/// A profile's `network.hosts`, parsed.
pub fn profile_hosts(p: &Profile) -> Result<shadow_netproxy::Allowlist, Failure> {
    shadow_netproxy::Allowlist::parse(&p.network.hosts)
        .map_err(|e| Failure::new(format!("profile {}: network.hosts: {e}", p.name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use shadow_profile::Registry;

    fn claude() -> Profile {
        Registry::default().resolve("claude-code").unwrap()
    }

    #[test]
    fn places() {
        let h = Path::new("/home/u");
        let pr = Path::new("/src/p");
        assert_eq!(place("~/.aws", h, pr), Place::Path("/home/u/.aws".into()));
        assert_eq!(place("/etc/x", h, pr), Place::Path("/etc/x".into()));
        assert_eq!(
            place("secrets/k", h, pr),
            Place::Path("/src/p/secrets/k".into())
        );
        assert_eq!(place("**/.env", h, pr), Place::Glob("**/.env".into()));
    }

    #[test]
    fn read_write_outside_the_sandbox_is_refused() {
        let mut p = claude();
        let h = Path::new("/home/u");
        let pr = Path::new("/src/p");
        let plan = fs_plan(&p, h, pr, &|_| true).unwrap();
        assert!(plan.landlock_rw.contains(&PathBuf::from("/home/u/.claude")));
        assert_eq!(plan.extra_ro, vec![PathBuf::from("/home/u/.gitconfig")]);
        assert_eq!(plan.deny_globs, vec!["**/.env", "**/.env.*"]);
        p.filesystem.read_write.push("/var/lib/x".into());
        let e = fs_plan(&p, h, pr, &|_| true).unwrap_err();
        assert_eq!(e.msg, "profile claude-code: read_write path /var/lib/x is outside the project overlay, $HOME and /tmp; shadow never lets a sandbox write to the host");
    }

    #[test]
    fn env_deny_patterns_and_exact_allows() {
        let p = claude();
        let plan = env_plan(&p);
        assert!(env_denied(&plan, "GITHUB_TOKEN", &p.environment.allow));
        assert!(!env_denied(
            &plan,
            "ANTHROPIC_AUTH_TOKEN",
            &p.environment.allow
        ));
        assert!(env_denied(
            &plan,
            "AWS_SECRET_ACCESS_KEY",
            &p.environment.allow
        ));
        assert!(!env_denied(&plan, "PATH", &p.environment.allow));
    }

    #[test]
    fn landlock_policy_of_claude_code() {
        let p = claude();
        let h = Path::new("/home/u");
        let pr = Path::new("/src/p");
        let fs = fs_plan(&p, h, pr, &|_| false).unwrap();
        let pol = landlock_policy(&p, &fs, h, pr, Path::new("/var/lib/shadow"), false);
        assert_eq!(pol.read_only, vec![PathBuf::from("/")]);
        assert_eq!(
            pol.read_write[..3],
            [PathBuf::from("/src/p"), "/home/u".into(), "/tmp".into()]
        );
        assert!(pol.deny.contains(&PathBuf::from("/home/u/.aws")));
        assert!(pol.deny.contains(&PathBuf::from("/var/lib/shadow")));
        assert_eq!(pol.tcp_connect, Some(vec![443]));
        assert!(pol.scope_signals && pol.scope_abstract_unix);
    }

    #[test]
    fn network_precedence() {
        let hosts = |n: &Network| match n {
            Network::Proxy(a) => a.rules.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            _ => panic!("not a proxy: {n:?}"),
        };
        let c = claude();
        assert_eq!(
            hosts(&network(&c, false, false, &[]).unwrap()),
            [
                "api.anthropic.com:443",
                "statsig.anthropic.com:443",
                "sentry.io:443"
            ]
        );
        let extra = ["127.0.0.1:8080".to_string()];
        assert_eq!(
            hosts(&network(&c, false, false, &extra).unwrap())[0],
            "127.0.0.1:8080"
        );
        assert_eq!(network(&c, true, false, &extra).unwrap(), Network::Host);
        assert_eq!(network(&c, false, true, &[]).unwrap(), Network::None);
        let d = Registry::default().resolve("default").unwrap();
        assert_eq!(network(&d, false, false, &[]).unwrap(), Network::None);
        assert_eq!(
            hosts(&network(&d, false, false, &extra).unwrap()),
            ["127.0.0.1:8080"]
        );
        let e = network(&d, false, false, &["*".to_string()]).unwrap_err();
        assert!(
            e.msg.starts_with("--allow-host: allowed host \"*\""),
            "{}",
            e.msg
        );
    }
}
