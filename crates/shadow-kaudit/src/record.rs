//! Audit record text, as the kernel sends it: `audit(SECS.MSECS:SERIAL): key=value ...`.
//!
//! Pure parsing, no I/O. Values come in three forms: `"quoted"` (a string the kernel judged
//! safe), bare (numbers, and *untrusted strings that needed escaping, hex-encoded*: a path with a
//! space or a quote in it arrives as `path=2F746D702F6120622F`), and `'single-quoted'` (the
//! `msg='...'` of user-space records).

/// One audit record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The record type (1300 SYSCALL, 1423 LANDLOCK_ACCESS, 1424 LANDLOCK_DOMAIN, 1320 EOE, …).
    pub kind: u16,
    /// Milliseconds since the epoch, from the header.
    pub time_ms: u64,
    /// The event serial: records of one event share it.
    pub serial: u64,
    /// The fields, in order, values decoded.
    pub fields: Vec<(String, String)>,
}

impl Record {
    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Record types used here (include/uapi/linux/audit.h).
pub mod kind {
    /// A syscall's summary (arch, number, exit, pid, comm, exe).
    pub const SYSCALL: u16 = 1300;
    /// End of a multi-record event.
    pub const EOE: u16 = 1320;
    /// A user-space message (`AUDIT_USER`), used as a sync marker.
    pub const USER: u16 = 1005;
    /// A Landlock access denial.
    pub const LANDLOCK_ACCESS: u16 = 1423;
    /// A Landlock domain's allocation (with its creator) or deallocation.
    pub const LANDLOCK_DOMAIN: u16 = 1424;
}

/// Fields whose bare values are hex-encoded strings (`audit_log_untrustedstring` and
/// `audit_log_n_hex`).
const HEX_STRING_FIELDS: &[&str] = &[
    "path",
    "exe",
    "comm",
    "ocomm",
    "name",
    "cwd",
    "proctitle",
    "dev",
];

/// Parses one record's text. `None` if the header is not `audit(S.MS:N): `.
pub fn parse(kind: u16, text: &str) -> Option<Record> {
    let rest = text.strip_prefix("audit(")?;
    let (stamp, body) = rest.split_once("):")?;
    let (time, serial) = stamp.split_once(':')?;
    let (secs, ms) = time.split_once('.')?;
    let time_ms = secs.parse::<u64>().ok()? * 1000 + ms.parse::<u64>().ok()?;
    Some(Record {
        kind,
        time_ms,
        serial: serial.parse().ok()?,
        fields: fields(body),
    })
}

/// Splits `key=value key="value" key='a b'` into decoded pairs. Text without `=` is skipped.
pub fn fields(body: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut s = body.trim_start();
    while !s.is_empty() {
        let Some(eq) = s.find('=') else { break };
        let key = &s[..eq];
        if key.contains(' ') {
            // A word without a value: skip it.
            s = s[key.find(' ').unwrap_or(0) + 1..].trim_start();
            continue;
        }
        let after = &s[eq + 1..];
        let (value, rest, quoted) = match after.chars().next() {
            Some(q @ ('"' | '\'')) => match after[1..].find(q) {
                Some(end) => (&after[1..1 + end], &after[end + 2..], true),
                None => (&after[1..], "", true),
            },
            _ => match after.find(' ') {
                Some(end) => (&after[..end], &after[end..], false),
                None => (after, "", false),
            },
        };
        let value = if !quoted && HEX_STRING_FIELDS.contains(&key) {
            unhex(value).unwrap_or_else(|| value.to_string())
        } else {
            value.to_string()
        };
        out.push((key.to_string(), value));
        s = rest.trim_start();
    }
    out
}

/// Decodes an even-length run of hex digits into a string (lossy UTF-8); `None` otherwise.
fn unhex(s: &str) -> Option<String> {
    if s.is_empty() || s.len() % 2 != 0 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let bytes: Vec<u8> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(b'?'))
        .collect();
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Groups records into events (same serial). An event is complete at its EOE record, or when a
/// record of another serial arrives (single-record events have no EOE).
#[derive(Debug, Default)]
pub struct Assembler {
    open: Vec<Record>,
}

impl Assembler {
    /// Feeds one record; returns the events it completed (at most two: the one it closed by
    /// changing serial, and its own if it is an EOE).
    pub fn push(&mut self, r: Record) -> Vec<Vec<Record>> {
        let mut done = Vec::new();
        if self.open.first().is_some_and(|f| f.serial != r.serial) {
            done.push(std::mem::take(&mut self.open));
        }
        if r.kind == kind::EOE {
            if !self.open.is_empty() {
                done.push(std::mem::take(&mut self.open));
            }
        } else {
            self.open.push(r);
        }
        done
    }

    /// The event still open, if any (at the end of reading).
    pub fn flush(&mut self) -> Option<Vec<Record>> {
        (!self.open.is_empty()).then(|| std::mem::take(&mut self.open))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_landlock_access_record_parses() {
        let r = parse(
            1423,
            "audit(1796305551.513:3): domain=1de3ef224 blockers=fs.read_file path=\"/usr/bin/cat\" dev=\"vda\" ino=247030",
        )
        .unwrap();
        assert_eq!(r.time_ms, 1_796_305_551_513);
        assert_eq!(r.serial, 3);
        assert_eq!(
            r.fields,
            pairs(&[
                ("domain", "1de3ef224"),
                ("blockers", "fs.read_file"),
                ("path", "/usr/bin/cat"),
                ("dev", "vda"),
                ("ino", "247030"),
            ])
        );
    }

    #[test]
    fn untrusted_strings_are_unhexed_and_numbers_are_not() {
        // "/tmp/a b" needs escaping, so the kernel sends it as hex.
        let f = fields("path=2F746D702F612062 ino=1234 exit=-13 a0=7f88 comm=\"sh\"");
        assert_eq!(
            f,
            pairs(&[
                ("path", "/tmp/a b"),
                ("ino", "1234"),
                ("exit", "-13"),
                ("a0", "7f88"),
                ("comm", "sh"),
            ])
        );
    }

    #[test]
    fn single_quoted_user_messages_and_empty_bodies() {
        let r = parse(
            1005,
            "audit(1.002:9): pid=1 uid=0 msg='op=shadow-sync id=abc res=1'",
        )
        .unwrap();
        assert_eq!(r.get("msg"), Some("op=shadow-sync id=abc res=1"));
        let eoe = parse(1320, "audit(1796305551.513:3): ").unwrap();
        assert!(eoe.fields.is_empty());
        assert_eq!(parse(1300, "garbage"), None);
        assert_eq!(parse(1300, "audit(x.1:2): a=b"), None);
    }

    #[test]
    fn events_end_at_eoe_or_at_a_new_serial() {
        let mut a = Assembler::default();
        let rec = |kind, serial| Record {
            kind,
            time_ms: 0,
            serial,
            fields: vec![],
        };
        assert!(a.push(rec(1423, 3)).is_empty());
        assert!(a.push(rec(1300, 3)).is_empty());
        let done = a.push(rec(kind::EOE, 3));
        assert_eq!(done.len(), 1);
        assert_eq!(
            done[0].iter().map(|r| r.kind).collect::<Vec<_>>(),
            [1423, 1300]
        );
        // A single-record event (no EOE) is closed by the next serial.
        assert!(a.push(rec(1424, 7)).is_empty());
        let done = a.push(rec(1423, 8));
        assert_eq!(done.len(), 1);
        assert_eq!(done[0][0].serial, 7);
        assert_eq!(a.flush().unwrap()[0].serial, 8);
        assert!(a.flush().is_none());
    }
}
