//! The network way out of a shadow sandbox: an HTTP(S) proxy that only reaches allowed hosts.
//!
//! The sandbox has its own network namespace with nothing but `lo`: no route, no resolver, so
//! UDP, DNS and raw sockets get nowhere. `shadow run --allow-host` then puts one listening
//! socket into that namespace (`127.0.0.1:3128`, made from the host side) and serves it with
//! this proxy, which runs outside the sandbox: it resolves names and connects in the host's
//! namespace, for CONNECT tunnels and plain `http://` requests to allowed hosts only, answers
//! everything else with 403 and the reason, and reports every decision (with byte counts) to a
//! sink — the session's audit log.

pub mod rules;
pub mod server;

pub use rules::{Allowlist, Decision, HostRule, RuleError};
pub use server::{Event, Options, Proxy, Stats};

/// Where the proxy listens inside the sandbox (squid's customary port).
pub const SANDBOX_ADDR: &str = "127.0.0.1:3128";

/// The environment that points the sandbox's programs at the proxy at `url`
/// (`http://127.0.0.1:3128`), both spellings, as curl, Python, Go, npm and Node read them.
/// `NO_PROXY` keeps the sandbox's own loopback direct, except the loopback hosts a rule allows
/// on the host side (those must go through the proxy to leave the sandbox's namespace).
pub fn proxy_env(url: &str, allow: &Allowlist) -> Vec<(String, String)> {
    let through = allow.routes_loopback();
    let no_proxy: Vec<&str> = ["localhost", "127.0.0.1", "::1"]
        .into_iter()
        .filter(|h| !through.contains(h))
        .collect();
    let no_proxy = no_proxy.join(",");
    let mut v = Vec::new();
    for (k, val) in [
        ("HTTP_PROXY", url),
        ("HTTPS_PROXY", url),
        ("ALL_PROXY", url),
        ("NO_PROXY", no_proxy.as_str()),
    ] {
        v.push((k.to_string(), val.to_string()));
        v.push((k.to_ascii_lowercase(), val.to_string()));
    }
    // Node's built-in fetch ignores the variables above unless asked (Node ≥ 22.21 / 24).
    v.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_is_exact() {
        let a = Allowlist::parse(&["127.0.0.1:8080", "x.org"]).unwrap();
        let env = proxy_env("http://127.0.0.1:3128", &a);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("HTTPS_PROXY"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("http_proxy"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("NO_PROXY"), Some("localhost,::1"));
        assert_eq!(get("no_proxy"), Some("localhost,::1"));
        assert_eq!(get("NODE_USE_ENV_PROXY"), Some("1"));
        assert_eq!(env.len(), 9);
        let none = proxy_env("http://p", &Allowlist::default());
        assert_eq!(
            none.iter().find(|(n, _)| n == "NO_PROXY").unwrap().1,
            "localhost,127.0.0.1,::1"
        );
    }
}
