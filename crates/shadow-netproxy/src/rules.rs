//! `--allow-host HOST[:PORT]` rules: parsing, matching a request, and which resolved addresses
//! a rule may reach.
//!
//! Forms (case-insensitive, a trailing dot ignored):
//! - `example.com` — that host, ports 80 and 443;
//! - `example.com:8443` — that port only; `example.com:*` — any port;
//! - `*.example.com` — any subdomain (`api.example.com`, `a.b.example.com`), not `example.com`
//!   itself (list both to get both);
//! - `127.0.0.1:8080`, `[::1]:8080` — an address literal.
//!
//! Threat: an allowed *name* that resolves to the host's loopback, a link-local address (the
//! cloud metadata service at 169.254.169.254) or an unspecified/multicast address would let the
//! agent reach services the developer never listed (DNS rebinding). Such addresses are only
//! reachable through a rule that names them literally (or `localhost`).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// Which hosts a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// One host name (lower case, no trailing dot).
    Name(String),
    /// Any name ending in this suffix (stored with its leading dot: `.example.com`).
    Subdomains(String),
    /// An address literal.
    Ip(IpAddr),
}

/// Which ports a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ports {
    /// 80 and 443 (no port given).
    Web,
    /// `:*`.
    Any,
    /// One port.
    One(u16),
}

/// One allow rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    /// Hosts matched.
    pub host: HostPattern,
    /// Ports matched.
    pub ports: Ports,
}

/// Why a rule did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError(pub String);

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RuleError {}

/// Lower-case a host name and drop one trailing dot; `None` if it is not a plausible DNS name.
pub fn normalize_name(host: &str) -> Option<String> {
    let h = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let ok = !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    ok.then_some(h)
}

/// Parse a host as a client names it (`example.com`, `1.2.3.4`, `[::1]` or `::1`).
pub fn parse_host(host: &str) -> Option<HostPattern> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Some(HostPattern::Ip(ip));
    }
    normalize_name(host).map(HostPattern::Name)
}

impl FromStr for HostRule {
    type Err = RuleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| Err(RuleError(format!("allowed host {s:?}: {why}")));
        let s = s.trim();
        if s.is_empty() {
            return bad("empty");
        }
        if s.contains("://") || s.contains('/') {
            return bad("give a host, not a URL (HOST or HOST:PORT)");
        }
        // Split off a port: `[v6]:p`, `name:p`; a bare v6 literal has several colons.
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            match rest.split_once(']') {
                Some((h, "")) => (format!("[{h}]"), None),
                Some((h, p)) => match p.strip_prefix(':') {
                    Some(p) => (format!("[{h}]"), Some(p)),
                    None => return bad("expected :PORT after ]"),
                },
                None => return bad("unclosed ["),
            }
        } else if s.matches(':').count() == 1 {
            let (h, p) = s.split_once(':').unwrap_or((s, ""));
            (h.to_string(), Some(p))
        } else {
            (s.to_string(), None)
        };
        let ports = match port {
            None => Ports::Web,
            Some("*") => Ports::Any,
            Some(p) => match p.parse::<u16>() {
                Ok(0) | Err(_) => return bad("the port must be 1-65535 or *"),
                Ok(n) => Ports::One(n),
            },
        };
        let host = if host == "*" {
            return bad("* alone would allow everything: use --allow-network for that");
        } else if let Some(suffix) = host.strip_prefix("*.") {
            match normalize_name(suffix) {
                Some(n) if n.contains('.') => HostPattern::Subdomains(format!(".{n}")),
                Some(_) => return bad("a wildcard needs at least two labels after *."),
                None => return bad("not a host name"),
            }
        } else if host.contains('*') {
            return bad("a wildcard is only allowed as the first label (*.example.com)");
        } else {
            match parse_host(&host) {
                Some(h) => h,
                None => return bad("not a host name or address"),
            }
        };
        Ok(HostRule { host, ports })
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Name(n) => write!(f, "{n}")?,
            HostPattern::Subdomains(s) => write!(f, "*{s}")?,
            HostPattern::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]")?,
            HostPattern::Ip(ip) => write!(f, "{ip}")?,
        }
        match self.ports {
            Ports::Web => Ok(()),
            Ports::Any => write!(f, ":*"),
            Ports::One(p) => write!(f, ":{p}"),
        }
    }
}

impl HostRule {
    fn matches_host(&self, host: &HostPattern) -> bool {
        match (&self.host, host) {
            (HostPattern::Name(r), HostPattern::Name(h)) => r == h,
            (HostPattern::Subdomains(s), HostPattern::Name(h)) => h.ends_with(s.as_str()),
            (HostPattern::Ip(r), HostPattern::Ip(h)) => r == h,
            _ => false,
        }
    }

    fn matches_port(&self, port: u16) -> bool {
        match self.ports {
            Ports::Web => port == 80 || port == 443,
            Ports::Any => true,
            Ports::One(p) => p == port,
        }
    }

    /// Whether this rule names its target literally (an address or `localhost`), which is
    /// what it takes to reach a loopback or link-local address.
    pub fn is_literal(&self) -> bool {
        matches!(&self.host, HostPattern::Ip(_))
            || matches!(&self.host, HostPattern::Name(n) if n == "localhost")
    }
}

/// The outcome of matching a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Allowed?
    pub allowed: bool,
    /// The rule that allowed it.
    pub rule: Option<HostRule>,
    /// Why, in words (the text of a 403).
    pub reason: String,
}

/// The set of allow rules of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    /// Rules in the order given.
    pub rules: Vec<HostRule>,
}

impl Allowlist {
    /// Parse `HOST[:PORT]` items; the first bad one is the error.
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<Self, RuleError> {
        let rules = items
            .iter()
            .map(|s| s.as_ref().parse())
            .collect::<Result<Vec<HostRule>, _>>()?;
        Ok(Allowlist { rules })
    }

    /// Decide a request for `host` (as the client named it) and `port`.
    pub fn decide(&self, host: &str, port: u16) -> Decision {
        let Some(h) = parse_host(host) else {
            return Decision {
                allowed: false,
                rule: None,
                reason: format!("{host:?} is not a valid host name"),
            };
        };
        let mut host_seen = false;
        for r in &self.rules {
            if r.matches_host(&h) {
                host_seen = true;
                if r.matches_port(port) {
                    return Decision {
                        allowed: true,
                        rule: Some(r.clone()),
                        reason: format!("allowed by {r}"),
                    };
                }
            }
        }
        let reason = if host_seen {
            format!("port {port} of {host} is not in the session's allowed hosts")
        } else {
            format!("{host} is not in the session's allowed hosts")
        };
        Decision {
            allowed: false,
            rule: None,
            reason,
        }
    }

    /// Hosts that clients should not bypass the proxy for, even though they are usually in
    /// `NO_PROXY`: loopback names and addresses that a rule allows on the host.
    pub fn routes_loopback(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        for r in &self.rules {
            let name = match &r.host {
                HostPattern::Ip(ip) if ip.is_loopback() && ip.is_ipv4() => "127.0.0.1",
                HostPattern::Ip(ip) if ip.is_loopback() => "::1",
                HostPattern::Name(n) if n == "localhost" => "localhost",
                _ => continue,
            };
            if !v.contains(&name) {
                v.push(name);
            }
        }
        v
    }
}

/// May `rule` reach address `ip` (after name resolution)?
pub fn address_allowed(rule: &HostRule, ip: IpAddr) -> Result<(), String> {
    if rule.is_literal() {
        return Ok(());
    }
    let special = match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                // fe80::/10, and v4-mapped forms of the v4 cases.
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6.to_ipv4_mapped().is_some_and(|v4| {
                    v4.is_loopback() || v4.is_link_local() || v4.is_unspecified()
                })
        }
    };
    if special {
        Err(format!(
            "{rule} resolved to {ip}, a loopback, link-local or special address: allow it by address to reach it"
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> HostRule {
        s.parse().unwrap()
    }

    #[test]
    fn forms_parse_to_exact_rules() {
        assert_eq!(
            rule("GitHub.com."),
            HostRule {
                host: HostPattern::Name("github.com".into()),
                ports: Ports::Web
            }
        );
        assert_eq!(
            rule("*.github.com:443"),
            HostRule {
                host: HostPattern::Subdomains(".github.com".into()),
                ports: Ports::One(443)
            }
        );
        assert_eq!(
            rule("127.0.0.1:*"),
            HostRule {
                host: HostPattern::Ip("127.0.0.1".parse().unwrap()),
                ports: Ports::Any
            }
        );
        assert_eq!(
            rule("[::1]:8080"),
            HostRule {
                host: HostPattern::Ip("::1".parse().unwrap()),
                ports: Ports::One(8080)
            }
        );
        assert_eq!(
            rule("::1"),
            HostRule {
                host: HostPattern::Ip("::1".parse().unwrap()),
                ports: Ports::Web
            }
        );
        for s in ["*.github.com:443", "[::1]:8080", "localhost:*", "pypi.org"] {
            assert_eq!(rule(s).to_string(), s);
        }
    }

    #[test]
    fn bad_rules_say_why() {
        let err = |s: &str| s.parse::<HostRule>().unwrap_err().0;
        assert_eq!(
            err("*"),
            "allowed host \"*\": * alone would allow everything: use --allow-network for that"
        );
        assert!(err("https://x.org").contains("not a URL"));
        assert!(err("x.org:0").contains("1-65535"));
        assert!(err("x.org:http").contains("1-65535"));
        assert!(err("a.*.org").contains("first label"));
        assert!(err("*.org").contains("two labels"));
        assert!(err("exa mple.org").contains("not a host name"));
        assert!(err("").contains("empty"));
        assert!(err("[::1").contains("unclosed"));
    }

    #[test]
    fn decisions() {
        let a = Allowlist::parse(&["*.github.com", "pypi.org:443", "127.0.0.1:8080"]).unwrap();
        assert!(a.decide("api.github.com", 443).allowed);
        assert!(a.decide("A.B.GitHub.com.", 80).allowed);
        assert!(!a.decide("github.com", 443).allowed);
        assert!(!a.decide("evilgithub.com", 443).allowed);
        assert!(!a.decide("api.github.com", 22).allowed);
        let d = a.decide("pypi.org", 80);
        assert_eq!(
            d.reason,
            "port 80 of pypi.org is not in the session's allowed hosts"
        );
        assert_eq!(
            a.decide("example.org", 443).reason,
            "example.org is not in the session's allowed hosts"
        );
        assert_eq!(
            a.decide("127.0.0.1", 8080).reason,
            "allowed by 127.0.0.1:8080"
        );
        assert!(!a.decide("127.0.0.1", 8081).allowed);
        assert!(!a.decide("localhost", 8080).allowed);
        assert!(!a.decide("bad host", 80).allowed);
    }

    #[test]
    fn names_do_not_reach_loopback_or_metadata() {
        let name = rule("api.example.com");
        assert!(address_allowed(&name, "93.184.216.34".parse().unwrap()).is_ok());
        assert!(address_allowed(&name, "10.1.2.3".parse().unwrap()).is_ok());
        for ip in [
            "127.0.0.1",
            "169.254.169.254",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(address_allowed(&name, ip.parse().unwrap()).is_err(), "{ip}");
        }
        assert!(address_allowed(&rule("127.0.0.1:80"), "127.0.0.1".parse().unwrap()).is_ok());
        assert!(address_allowed(&rule("localhost:80"), "::1".parse().unwrap()).is_ok());
    }

    #[test]
    fn loopback_rules_leave_no_proxy() {
        let a = Allowlist::parse(&["127.0.0.1:1", "localhost:2", "[::1]:3", "x.org"]).unwrap();
        assert_eq!(a.routes_loopback(), vec!["127.0.0.1", "localhost", "::1"]);
    }
}
