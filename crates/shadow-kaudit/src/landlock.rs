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
//! if its creator is, when the record is read, in the sandbox's pid namespace. Records of other
//! domains (other sandboxes, other programs on the host) are ignored.

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

/// Decides which domains are the sandbox's and turns their events into [`Denial`]s.
#[derive(Debug)]
pub struct Attributor<F: Fn(i32) -> bool> {
    creators: Vec<i32>,
    in_sandbox: F,
    domains: HashMap<String, bool>,
}

impl<F: Fn(i32) -> bool> Attributor<F> {
    /// `in_sandbox(pid)` says whether a live pid is in the sandbox's pid namespace.
    pub fn new(in_sandbox: F) -> Self {
        Attributor {
            creators: Vec::new(),
            in_sandbox,
            domains: HashMap::new(),
        }
    }

    /// A pid whose domains are the sandbox's (the container's init, once the runtime created it).
    pub fn own_creator(&mut self, pid: i32) {
        self.creators.push(pid);
    }

    /// The event's denials that belong to the sandbox (none for other events).
    pub fn denials(&mut self, event: &[Record]) -> Vec<Denial> {
        for r in event.iter().filter(|r| r.kind == kind::LANDLOCK_DOMAIN) {
            if let (Some(domain), Some("allocated")) = (r.get("domain"), r.get("status")) {
                let creator = r.get("pid").and_then(|p| p.parse::<i32>().ok());
                let ours =
                    creator.is_some_and(|p| self.creators.contains(&p) || (self.in_sandbox)(p));
                self.domains.insert(domain.to_string(), ours);
            }
        }
        let syscall = event.iter().find(|r| r.kind == kind::SYSCALL);
        event
            .iter()
            .filter(|r| r.kind == kind::LANDLOCK_ACCESS)
            .filter(|r| {
                r.get("domain")
                    .is_some_and(|d| self.domains.get(d).copied().unwrap_or(false))
            })
            .map(|r| denial(r, syscall))
            .collect()
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

    #[test]
    fn the_sandboxs_domain_is_attributed_by_its_creator() {
        let mut a = Attributor::new(|_| false);
        a.own_creator(21000);
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
    }

    #[test]
    fn other_domains_are_ignored() {
        let mut a = Attributor::new(|_| false);
        a.own_creator(1);
        assert!(a.denials(&first_denial(21000)).is_empty());
        assert!(a.denials(&second_denial()).is_empty());
        // A domain never seen allocated is not ours either.
        let mut b = Attributor::new(|_| true);
        assert!(b.denials(&second_denial()).is_empty());
    }

    #[test]
    fn a_nested_domain_is_ours_if_its_creator_is_in_the_sandbox() {
        let mut a = Attributor::new(|pid| pid == 21000);
        assert_eq!(a.denials(&first_denial(21000)).len(), 1);
    }

    #[test]
    fn syscall_names() {
        assert_eq!(syscall_name(Some("c000003e"), "257"), "openat");
        assert_eq!(syscall_name(Some("c000003e"), "99999"), "99999");
        assert_eq!(syscall_name(Some("zz"), "257"), "257");
        assert_eq!(syscall_name(None, "257"), "257");
    }
}
