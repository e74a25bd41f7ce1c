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

/// Groups records into events (same serial). Records of different events interleave (a denial
/// is logged when it happens, the SYSCALL record and EOE when the call returns, and other CPUs
/// log in between), so several events are open at once. An event is complete at its EOE; one
/// that never gets an EOE (a task without an audit context logs single records) is closed once
/// [`STALE_AFTER`] further records have arrived, or at [`Assembler::flush`].
#[derive(Debug, Default)]
pub struct Assembler {
    open: std::collections::BTreeMap<u64, (u64, Vec<Record>)>,
    seen: u64,
}

/// Records after which an event without EOE is taken as complete.
pub const STALE_AFTER: u64 = 512;

impl Assembler {
    /// Feeds one record; returns the events now complete, oldest first.
    pub fn push(&mut self, r: Record) -> Vec<Vec<Record>> {
        self.seen += 1;
        let mut done = Vec::new();
        if r.kind == kind::EOE {
            if let Some((_, ev)) = self.open.remove(&r.serial) {
                done.push(ev);
            }
        } else {
            let e = self.open.entry(r.serial).or_insert((0, Vec::new()));
            e.0 = self.seen;
            e.1.push(r);
        }
        let seen = self.seen;
        let stale: Vec<u64> = self
            .open
            .iter()
            .filter(|(_, (last, _))| seen - last > STALE_AFTER)
            .map(|(s, _)| *s)
            .collect();
        for s in stale {
            if let Some((_, ev)) = self.open.remove(&s) {
                done.push(ev);
            }
        }
        done
    }

    /// Every event still open (at the end of reading), oldest first.
    pub fn flush(&mut self) -> Vec<Vec<Record>> {
        std::mem::take(&mut self.open)
            .into_values()
            .map(|(_, ev)| ev)
            .collect()
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
    fn interleaved_events_are_kept_apart_and_end_at_their_eoe() {
        let mut a = Assembler::default();
        let rec = |kind, serial| Record {
            kind,
            time_ms: 0,
            serial,
            fields: vec![],
        };
        assert!(a.push(rec(1423, 3)).is_empty());
        // Another CPU's event in between.
        assert!(a.push(rec(1300, 4)).is_empty());
        assert!(a.push(rec(1424, 3)).is_empty());
        assert!(a.push(rec(1300, 3)).is_empty());
        let done = a.push(rec(kind::EOE, 3));
        assert_eq!(done.len(), 1);
        assert_eq!(
            done[0].iter().map(|r| r.kind).collect::<Vec<_>>(),
            [1423, 1424, 1300]
        );
        assert_eq!(a.push(rec(kind::EOE, 4)).len(), 1);
        // An EOE of nothing open completes nothing.
        assert!(a.push(rec(kind::EOE, 99)).is_empty());
    }

    #[test]
    fn an_event_without_eoe_closes_when_stale_or_at_flush() {
        let mut a = Assembler::default();
        let rec = |kind, serial| Record {
            kind,
            time_ms: 0,
            serial,
            fields: vec![],
        };
        a.push(rec(1424, 7));
        let mut closed = Vec::new();
        for i in 0..STALE_AFTER + 1 {
            closed.extend(a.push(rec(1300, 1000 + i)));
            closed.extend(a.push(rec(kind::EOE, 1000 + i)));
        }
        assert!(closed.iter().any(|ev| ev[0].serial == 7));
        a.push(rec(1423, 8));
        let rest = a.flush();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0][0].serial, 8);
        assert!(a.flush().is_empty());
    }
}
