//! `events`: container statistics (from cgroups) as JSON lines, runc-style
//! `{"type":"stats","id":…,"data":{…}}`.

use std::io::Write;
use std::time::Duration;

use libcgroups::common::CgroupManager;
use libcontainer::container::ContainerStatus;

use crate::error::{Error, Result};
use crate::{cgroups, container, root, Globals};

/// Parse a Go-style duration: `5s`, `100ms`, `1m30s`, `1.5h`, `250us`, `10ns`.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let bad = || {
        Error::invalid(format!(
            "invalid duration {s:?} (examples: 5s, 500ms, 1m30s)"
        ))
    };
    if s.is_empty() {
        return Err(bad());
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_len == 0 {
            return Err(bad());
        }
        let n: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += n * mult;
        rest = &rest[unit_len..];
    }
    Ok(Duration::from_secs_f64(total))
}

/// Print one stats event for `id`, or (without `once`) one every `interval` until the
/// container stops.
pub fn events(g: &Globals, id: &str, interval: Duration, once: bool) -> Result<()> {
    let root = root::existing(&g.root)?;
    let mut c = container::load_locked(&root, id)?;
    if c.status() == ContainerStatus::Stopped {
        return Err(Error::new(
            crate::error::ErrorKind::NotRunning,
            format!("container \"{id}\" is not running: container not running"),
        ));
    }
    let m = cgroups::for_container(&c)?;
    let mut out = std::io::stdout();
    loop {
        let stats = m
            .stats()
            .map_err(|e| Error::from_libcontainer("read cgroup stats", &e))?;
        let line = serde_json::json!({"type": "stats", "id": id, "data": stats});
        // One write per event, so a reader never sees half a line.
        let mut text = line.to_string();
        text.push('\n');
        out.write_all(text.as_bytes())
            .map_err(|e| Error::io("write", e))?;
        out.flush().map_err(|e| Error::io("write", e))?;
        if once {
            return Ok(());
        }
        std::thread::sleep(interval.max(Duration::from_millis(10)));
        c.refresh_status()
            .map_err(|e| Error::from_libcontainer("refresh", &e))?;
        if c.status() == ContainerStatus::Stopped {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("100ms").unwrap(), Duration::from_millis(100));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        for bad in ["", "5", "s", "5x", "1m30", "-1s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
