//! Signal names and numbers as runc accepts them: `TERM`, `SIGTERM`, `term`, `15`.

use nix::sys::signal::Signal;

use crate::error::{Error, Result};

/// Parse a signal given by name (with or without `SIG`, any case) or number. `0` (no signal:
/// a liveness check, as `kill -0`) is `None`.
pub fn parse_or_zero(s: &str) -> Result<Option<Signal>> {
    if s == "0" {
        return Ok(None);
    }
    parse(s).map(Some)
}

/// Parse a signal given by name (with or without `SIG`, any case) or number.
pub fn parse(s: &str) -> Result<Signal> {
    let bad = || Error::invalid(format!("unknown signal {s:?}"));
    if let Ok(n) = s.parse::<i32>() {
        return Signal::try_from(n).map_err(|_| bad());
    }
    let upper = s.to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    let name = match name.as_str() {
        "SIGIOT" => "SIGABRT",
        "SIGCLD" => "SIGCHLD",
        "SIGPOLL" => "SIGIO",
        n => n,
    };
    name.parse::<Signal>().map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(parse("TERM").unwrap(), Signal::SIGTERM);
        assert_eq!(parse("SIGKILL").unwrap(), Signal::SIGKILL);
        assert_eq!(parse("hup").unwrap(), Signal::SIGHUP);
        assert_eq!(parse("15").unwrap(), Signal::SIGTERM);
        assert_eq!(parse("9").unwrap(), Signal::SIGKILL);
        assert_eq!(parse("IOT").unwrap(), Signal::SIGABRT);
        assert_eq!(parse_or_zero("0").unwrap(), None);
        assert_eq!(parse_or_zero("KILL").unwrap(), Some(Signal::SIGKILL));
    }

    #[test]
    fn unknown_is_refused() {
        for s in ["FOO", "SIGFOO", "0x1", "-1", "65", ""] {
            let e = parse(s).unwrap_err();
            assert!(e.to_string().starts_with("unknown signal"), "{s}: {e}");
        }
    }
}
