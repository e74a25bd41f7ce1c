//! Landlock denials out of audit events, and which of them belong to one sandbox.
//!
//! A denial event holds a `LANDLOCK_ACCESS` record (domain id, blockers, the object), the
//! `SYSCALL` record of the denied call (pid, syscall, exit, comm, exe) and, for the first denial
//! of a domain, a `LANDLOCK_DOMAIN status=allocated` record naming the domain's creator: the
//! pid, in the initial pid namespace, of the task that called `landlock_restrict_self`, as it
//! was at that moment (the kernel keeps it with the domain, so it cannot be raced).
//!
//! Attribution: shadow-runtime's executor restricts the container's init itself, so the
//! sandbox's own domain is the one created by the init pid the runtime reported. A domain
//! created by a process inside the sandbox (an agent that sandboxes its own tools) belongs to it
//! if its creator is a pid the exec audit saw executing in the sandbox, or is in the sandbox's
//! pid namespace when the record is read; one whose creator is gone by then is decided at the
//! end, when every exec is known. Records of other domains (other sandboxes, other programs on
//! the host) are ignored. Left alone: a host process that, during the session, reuses the pid of
//! a sandbox process that had exited and creates a domain would be taken for the sandbox's.

use std::collections::HashMap;

use serde::Serialize;

use crate::record::{kind, Record};

/// One Landlock denial, as recorded in the session log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Denial {
    /// Always `"landlock"` (next to seccomp's denial records).
    pub mechanism: &'static str,
    /// The kernel's domain id (hex).
    pub domain: String,
    /// What denied it: `fs.read_file`, `fs.write_file`, `net.connect_tcp`, `scope.signal`, …
    pub blockers: Vec<String>,
    /// The object: `path`, `dev`, `ino` for files; `daddr`, `dest` for a connect; `opid`,
    /// `ocomm` for a signal; whatever else the kernel named.
    pub object: serde_json::Map<String, serde_json::Value>,
    /// The denied task (initial pid namespace).
    pub pid: Option<i32>,
    /// The syscall, by name where known.
    pub syscall: Option<String>,
    /// The syscall's result (`-13` is EACCES).
    pub exit: Option<i64>,
    /// The task's command name and executable.
    pub comm: Option<String>,
    /// The task's executable.
    pub exe: Option<String>,
    /// When (milliseconds since the epoch, from the kernel).
    pub time_ms: u64,
}

/// Whether a pid is the sandbox's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It is (the sandbox's init, a process seen executing in it, or one in its pid namespace).
    Ours,
    /// It is alive, outside the sandbox.
    NotOurs,
    /// Cannot tell (it is gone): decided again at [`Attributor::finish`].
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Ours,
    NotOurs,
    Unresolved(i32),
}

/// Most denials held while their domain's owner is not known yet.
pub const MAX_PENDING: usize = 4096;

/// Decides which domains are the sandbox's and turns their events into [`Denial`]s.
///
/// A denial's domain is usually known by the time its ACCESS record arrives (the DOMAIN record
/// of a domain's first denial comes in the same event), but not always: without an audit
/// context the two records are separate events, and a nested domain's creator may be gone by
/// the time it is read. Such denials are held (at most [`MAX_PENDING`]) until the domain's
/// owner is known, or until [`Attributor::finish`] asks once more.
#[derive(Debug)]
pub struct Attributor<F: Fn(i32) -> Verdict> {
    classify: F,
    domains: HashMap<String, Owner>,
    pending: Vec<(Record, Option<Record>)>,
    /// Denials dropped because [`MAX_PENDING`] were already held.
    pub dropped: u64,
}

impl<F: Fn(i32) -> Verdict> Attributor<F> {
    /// `classify(pid)` says whether a domain creator's pid is the sandbox's.
    pub fn new(classify: F) -> Self {
        Attributor {
            classify,
            domains: HashMap::new(),
            pending: Vec::new(),
            dropped: 0,
        }
    }

    /// The sandbox's denials this event completes (its own, and held ones it resolves).
    pub fn denials(&mut self, event: &[Record]) -> Vec<Denial> {
        let mut out = Vec::new();
        let syscall = event.iter().find(|r| r.kind == kind::SYSCALL);
        let mut freed = Vec::new();
        for r in event.iter().filter(|r| r.kind == kind::LANDLOCK_DOMAIN) {
            let Some(domain) = r.get("domain") else {
                continue;
            };
            if r.get("status") == Some("allocated") {
                let owner = match r.get("pid").and_then(|p| p.parse::<i32>().ok()) {
                    None => Owner::NotOurs,
                    Some(pid) => match (self.classify)(pid) {
                        Verdict::Ours => Owner::Ours,
                        Verdict::NotOurs => Owner::NotOurs,
                        Verdict::Unknown => Owner::Unresolved(pid),
                    },
                };
                self.domains.insert(domain.to_string(), owner);
                if owner == Owner::Ours {
                    out.extend(self.release(domain));
                }
            } else if r.get("status") == Some("deallocated") {
                freed.push(domain.to_string());
            }
        }
        for a in event.iter().filter(|r| r.kind == kind::LANDLOCK_ACCESS) {
            let Some(domain) = a.get("domain") else {
                continue;
            };
            match self.domains.get(domain) {
                Some(Owner::Ours) => out.push(denial(a, syscall)),
                Some(Owner::NotOurs) => {}
                _ if self.pending.len() >= MAX_PENDING => self.dropped += 1,
                _ => self.pending.push((a.clone(), syscall.cloned())),
            }
        }
        // A domain's last record: forget it, unless denials still wait on it.
        for d in freed {
            if !self
                .pending
                .iter()
                .any(|(a, _)| a.get("domain") == Some(d.as_str()))
            {
                self.domains.remove(&d);
            }
        }
        out
    }

    fn release(&mut self, domain: &str) -> Vec<Denial> {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(a, _)| a.get("domain") == Some(domain));
        self.pending = rest;
        mine.iter().map(|(a, s)| denial(a, s.as_ref())).collect()
    }

    /// At the end: held denials whose domain's creator is now known to be the sandbox's (the
    /// caller's `classify` knows every pid that executed in it by then); the rest are dropped.
    pub fn finish(mut self) -> Vec<Denial> {
        let unresolved: Vec<(String, i32)> = self
            .domains
            .iter()
            .filter_map(|(d, o)| match o {
                Owner::Unresolved(pid) => Some((d.clone(), *pid)),
                _ => None,
            })
            .collect();
        let mut out = Vec::new();
        for (d, pid) in unresolved {
            if (self.classify)(pid) == Verdict::Ours {
                out.extend(self.release(&d));
            }
        }
        out
    }
}

fn denial(access: &Record, syscall: Option<&Record>) -> Denial {
    let object = access
        .fields
        .iter()
        .filter(|(k, _)| k != "domain" && k != "blockers")
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    let s = |k: &str| syscall.and_then(|r| r.get(k));
    Denial {
        mechanism: "landlock",
        domain: access.get("domain").unwrap_or_default().to_string(),
        blockers: access
            .get("blockers")
            .unwrap_or_default()
            .split(',')
            .filter(|b| !b.is_empty())
            .map(String::from)
            .collect(),
        object,
        pid: s("pid").and_then(|p| p.parse().ok()),
        syscall: s("syscall").map(|n| syscall_name(s("arch"), n)),
        exit: s("exit").and_then(|e| e.parse().ok()),
        comm: s("comm").map(String::from),
        exe: s("exe").map(String::from),
        time_ms: access.time_ms,
    }
}

/// `openat` for `arch=c000003e syscall=257`; the number as text where libseccomp does not know it.
fn syscall_name(arch: Option<&str>, nr: &str) -> String {
    let (Some(arch), Ok(n)) = (
        arch.and_then(|a| u32::from_str_radix(a, 16).ok()),
        nr.parse::<i32>(),
    ) else {
        return nr.to_string();
    };
    let arch = match arch {
        0xc000_003e => libseccomp::ScmpArch::X8664,
        0xc000_00b7 => libseccomp::ScmpArch::Aarch64,
        0x4000_0003 => libseccomp::ScmpArch::X86,
        _ => return nr.to_string(),
    };
    libseccomp::ScmpSyscall::from(n)
        .get_name_by_arch(arch)
        .unwrap_or_else(|_| nr.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::parse;

    /// The event the kernel sent here for `cat` denied `/usr/bin/cat` (first denial of the
    /// domain), captured from the audit multicast on this machine.
    fn first_denial(creator: i32) -> Vec<Record> {
        vec![
            parse(1423, "audit(1796305551.513:3): domain=1de3ef224 blockers=fs.read_file path=\"/usr/bin/cat\" dev=\"vda\" ino=247030").unwrap(),
            parse(1424, &format!("audit(1796305551.513:3): domain=1de3ef224 status=allocated mode=enforcing pid={creator} uid=0 exe=\"/usr/bin/python3.11\" comm=\"python3\"")).unwrap(),
            parse(1300, "audit(1796305551.513:3): arch=c000003e syscall=59 success=no exit=-13 a0=7f88501f1a30 ppid=20935 pid=21024 uid=0 comm=\"python3\" exe=\"/usr/bin/python3.11\" key=(null)").unwrap(),
        ]
    }

    fn second_denial() -> Vec<Record> {
        vec![
            parse(1423, "audit(1796305551.513:5): domain=1de3ef224 blockers=fs.read_file,fs.write_file path=2F746D702F612062 dev=\"vda\" ino=10027097").unwrap(),
            parse(1300, "audit(1796305551.513:5): arch=c000003e syscall=257 success=no exit=-13 pid=21024 comm=\"sh\" exe=\"/bin/dash\"").unwrap(),
        ]
    }

    fn only(pid: i32) -> impl Fn(i32) -> Verdict {
        move |p| {
            if p == pid {
                Verdict::Ours
            } else {
                Verdict::NotOurs
            }
        }
    }

    #[test]
    fn the_sandboxs_domain_is_attributed_by_its_creator() {
        let mut a = Attributor::new(only(21000));
        let d = a.denials(&first_denial(21000));
        assert_eq!(d.len(), 1);
        let mut object = serde_json::Map::new();
        for (k, v) in [("path", "/usr/bin/cat"), ("dev", "vda"), ("ino", "247030")] {
            object.insert(k.into(), v.into());
        }
        assert_eq!(
            d[0],
            Denial {
                mechanism: "landlock",
                domain: "1de3ef224".into(),
                blockers: vec!["fs.read_file".into()],
                object,
                pid: Some(21024),
                syscall: Some("execve".into()),
                exit: Some(-13),
                comm: Some("python3".into()),
                exe: Some("/usr/bin/python3.11".into()),
                time_ms: 1_796_305_551_513,
            }
        );
        // Later denials of the same domain carry no DOMAIN record.
        let d = a.denials(&second_denial());
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].blockers, ["fs.read_file", "fs.write_file"]);
        assert_eq!(d[0].object["path"], "/tmp/a b");
        assert_eq!(d[0].syscall.as_deref(), Some("openat"));
        // After the domain's deallocation it is forgotten.
        let gone = parse(
            1424,
            "audit(1796305551.593:7): domain=1de3ef224 status=deallocated denials=2",
        )
        .unwrap();
        assert!(a.denials(&[gone]).is_empty());
        assert!(a.domains.is_empty());
    }

    #[test]
    fn other_domains_are_ignored() {
        let mut a = Attributor::new(only(1));
        assert!(a.denials(&first_denial(21000)).is_empty());
        assert!(a.denials(&second_denial()).is_empty());
        assert!(a.pending.is_empty());
        assert!(a.finish().is_empty());
    }

    #[test]
    fn a_denial_before_its_domain_record_waits_for_it() {
        // No audit context: ACCESS and DOMAIN come as separate events, ACCESS first.
        let mut a = Attributor::new(only(21000));
        let ev = first_denial(21000);
        assert!(a.denials(&[ev[0].clone()]).is_empty());
        let d = a.denials(&[ev[1].clone()]);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].object["path"], "/usr/bin/cat");
        assert_eq!(d[0].pid, None);
        assert!(a.pending.is_empty());
    }

    #[test]
    fn a_domain_whose_creator_is_gone_is_decided_at_finish() {
        let seen = std::cell::Cell::new(false);
        let mut a = Attributor::new(|p| match (p, seen.get()) {
            (21000, true) => Verdict::Ours,
            (21000, false) => Verdict::Unknown,
            _ => Verdict::NotOurs,
        });
        assert!(a.denials(&first_denial(21000)).is_empty());
        assert!(a.denials(&second_denial()).is_empty());
        // By the end the creator turned out to have executed in the sandbox.
        seen.set(true);
        assert_eq!(a.finish().len(), 2);
        // Never resolved: dropped.
        let mut b = Attributor::new(|_| Verdict::Unknown);
        b.denials(&first_denial(21000));
        assert!(b.finish().is_empty());
    }

    #[test]
    fn syscall_names() {
        assert_eq!(syscall_name(Some("c000003e"), "257"), "openat");
        assert_eq!(syscall_name(Some("c000003e"), "99999"), "99999");
        assert_eq!(syscall_name(Some("zz"), "257"), "257");
        assert_eq!(syscall_name(None, "257"), "257");
    }
}
