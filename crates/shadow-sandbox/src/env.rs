//! Environment of the sandboxed process: an allowlist, never a denylist.
//!
//! Threat: the host environment of a developer is full of credentials
//! (`GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`, `SSH_AUTH_SOCK` pointing at an
//! agent that can sign with every key, `DOCKER_HOST`, `KUBECONFIG`, …). A
//! denylist always misses one, so only variables on the allowlist (or named
//! explicitly by the user with `--env NAME`) are passed through.

use std::collections::BTreeMap;

/// Host variables passed through by default. An entry ending in `*` matches
/// every name with that prefix (only used for `LC_*`).
///
/// `HOME` is on the list for completeness, but callers set it explicitly to
/// the user's home path (which is a fresh tmpfs inside the sandbox).
pub const DEFAULT_ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "COLORTERM",
    "NO_COLOR",
    "EDITOR",
    "VISUAL",
    "PAGER",
];

/// PATH used when the host has none (same as runc's default).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn allowed(name: &str, allow: &[String]) -> bool {
    allow.iter().any(|pattern| match pattern.strip_suffix('*') {
        // A bare "*" would pass every secret: only explicit prefixes count.
        Some(prefix) => !prefix.is_empty() && name.starts_with(prefix),
        None => pattern == name,
    })
}

/// Builds the process environment (`NAME=VALUE` strings, sorted by name).
///
/// * `host_env`: the invoking process's environment.
/// * `allow`: names (or `PREFIX*` patterns) to take from `host_env`; usually
///   [`DEFAULT_ENV_ALLOWLIST`] plus every `--env NAME`.
/// * `set`: variables set to a given value (`--env NAME=VALUE`, `HOME`); they
///   win over host values.
///
/// Names that are empty or contain `=` or NUL are dropped (they cannot be
/// represented in `environ`). When no `PATH` results, [`DEFAULT_PATH`] is used.
pub fn build_env(
    host_env: &[(String, String)],
    allow: &[String],
    set: &[(String, String)],
) -> Vec<String> {
    let valid = |name: &str, value: &str| {
        !name.is_empty() && !name.contains('=') && !name.contains('\0') && !value.contains('\0')
    };
    let mut out: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, value) in host_env {
        if valid(name, value) && allowed(name, allow) {
            out.insert(name, value);
        }
    }
    for (name, value) in set {
        if valid(name, value) {
            out.insert(name, value);
        }
    }
    out.entry("PATH").or_insert(DEFAULT_PATH);
    out.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// [`DEFAULT_ENV_ALLOWLIST`] as owned strings, plus `extra` names.
pub fn default_allowlist_with(extra: &[String]) -> Vec<String> {
    DEFAULT_ENV_ALLOWLIST
        .iter()
        .map(|s| s.to_string())
        .chain(extra.iter().cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn host() -> Vec<(String, String)> {
        kv(&[
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/alice"),
            ("USER", "alice"),
            ("TERM", "xterm-256color"),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C.UTF-8"),
            ("LC_TIME", "de_DE.UTF-8"),
            ("SSH_AUTH_SOCK", "/run/user/1000/ssh-agent.sock"),
            ("GITHUB_TOKEN", "ghp_secret"),
            ("ANTHROPIC_API_KEY", "sk-secret"),
            ("AWS_ACCESS_KEY_ID", "AKIA"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
            ("DOCKER_HOST", "unix:///run/docker.sock"),
            ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus"),
            ("XDG_RUNTIME_DIR", "/run/user/1000"),
            ("LD_PRELOAD", "/evil.so"),
        ])
    }

    #[test]
    fn allowlist_drops_secrets() {
        let env = build_env(&host(), &default_allowlist_with(&[]), &[]);
        assert_eq!(
            env,
            vec![
                "HOME=/home/alice",
                "LANG=C.UTF-8",
                "LC_ALL=C.UTF-8",
                "LC_TIME=de_DE.UTF-8",
                "PATH=/usr/bin:/bin",
                "TERM=xterm-256color",
                "USER=alice",
            ]
        );
        for secret in [
            "SSH_AUTH_SOCK",
            "TOKEN",
            "AWS_",
            "API_KEY",
            "DOCKER",
            "DBUS",
            "LD_",
        ] {
            assert!(!env.iter().any(|e| e.contains(secret)), "{secret} leaked");
        }
    }

    #[test]
    fn explicit_names_and_values() {
        let allow = default_allowlist_with(&["ANTHROPIC_API_KEY".into()]);
        let set = kv(&[("HOME", "/home/alice"), ("FOO", "bar"), ("TERM", "dumb")]);
        let env = build_env(&host(), &allow, &set);
        assert!(env.contains(&"ANTHROPIC_API_KEY=sk-secret".to_string()));
        assert!(env.contains(&"FOO=bar".to_string()));
        assert!(env.contains(&"TERM=dumb".to_string()), "set wins over host");
        assert!(!env.iter().any(|e| e.starts_with("GITHUB_TOKEN=")));
        // Naming a variable the host does not have adds nothing.
        let env = build_env(&host(), &["NOPE".into()], &[]);
        assert_eq!(env, vec![format!("PATH={DEFAULT_PATH}")]);
    }

    #[test]
    fn bare_star_and_bad_names_are_ignored() {
        let env = build_env(&host(), &["*".into()], &kv(&[("A=B", "x"), ("", "y")]));
        assert_eq!(env, vec![format!("PATH={DEFAULT_PATH}")]);
    }
}
