//! Container ids. An id becomes a directory name under the root and a cgroup path component, so
//! anything that could climb out of those (`/`, `..`) or confuse a shell is refused up front.

use crate::error::{Error, Result};

/// Longest id accepted (a path component must stay well under NAME_MAX).
pub const MAX_ID_LEN: usize = 1024;

/// Check a container id: non-empty, not `.` or `..`, only `[A-Za-z0-9_+.-]`.
pub fn validate(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid("container id cannot be empty"));
    }
    if id == "." || id == ".." {
        return Err(Error::invalid(format!("invalid container id {id:?}")));
    }
    if id.len() > MAX_ID_LEN {
        return Err(Error::invalid(format!(
            "invalid container id: longer than {MAX_ID_LEN} bytes"
        )));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-' | '.')))
    {
        return Err(Error::invalid(format!(
            "invalid container id {id:?}: character {c:?} is not allowed"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_engine_ids() {
        for id in ["a", "ctr1", "0123abcdef", "libpod-x_y.z+1", "a..b"] {
            validate(id).unwrap();
        }
    }

    #[test]
    fn refuses_escapes() {
        for id in ["", ".", "..", "a/b", "../x", "x y", "a\0b", "é"] {
            assert!(validate(id).is_err(), "{id:?} accepted");
        }
        let e = validate("../etc").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid container id \"../etc\": character '/' is not allowed"
        );
    }
}
