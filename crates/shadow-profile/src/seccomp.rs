//! Seccomp deny groups, turned into `linux.seccomp` of the generated spec.
//!
//! The filter allows by default and answers EPERM to the denied groups: an allowlist of
//! syscalls breaks the interpreters and compilers agents run, while these groups are what an
//! agent never needs and an attacker always wants. Only the native architecture is listed, so
//! libseccomp's bad-arch action (kill) stops 32-bit and x32 entry points that would dodge the
//! names below.

use oci_spec::runtime::{
    LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompArgBuilder, LinuxSeccompBuilder,
    LinuxSeccompOperator, LinuxSyscall, LinuxSyscallBuilder,
};
use serde::{Deserialize, Serialize};

/// A group of syscalls a profile can deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Group {
    /// mount(2) and the new mount API, pivot_root, chroot: reshaping the file-system view.
    Mount,
    /// ptrace and cross-process memory access: reading other processes' secrets.
    Ptrace,
    /// bpf: kernel attack surface, tracing.
    Bpf,
    /// kexec and reboot.
    Kexec,
    /// Kernel keyrings: keys of the user's session.
    Keyctl,
    /// New namespaces (unshare, setns, clone with CLONE_NEW*): nested sandboxes regain
    /// capabilities and reach kernel surface otherwise closed.
    Namespaces,
    /// perf_event_open: side channels and kernel surface.
    PerfEventOpen,
    /// userfaultfd: the classic race-widening exploit primitive.
    Userfaultfd,
    /// ioctl TIOCSTI / TIOCLINUX: typing commands into the user's terminal outside.
    Tiocsti,
    /// Loading kernel modules.
    Modules,
    /// io_uring: bypasses seccomp for the operations it performs.
    IoUring,
    /// Clock, swap, accounting and quota changes.
    System,
}

/// All groups (what `default` denies).
pub const ALL: &[Group] = &[
    Group::Mount,
    Group::Ptrace,
    Group::Bpf,
    Group::Kexec,
    Group::Keyctl,
    Group::Namespaces,
    Group::PerfEventOpen,
    Group::Userfaultfd,
    Group::Tiocsti,
    Group::Modules,
    Group::IoUring,
    Group::System,
];

const CLONE_NEW_FLAGS: &[u64] = &[
    0x0002_0000, // CLONE_NEWNS
    0x0200_0000, // CLONE_NEWCGROUP
    0x0400_0000, // CLONE_NEWUTS
    0x0800_0000, // CLONE_NEWIPC
    0x1000_0000, // CLONE_NEWUSER
    0x2000_0000, // CLONE_NEWPID
    0x4000_0000, // CLONE_NEWNET
    0x0000_0080, // CLONE_NEWTIME
];

const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;
const EPERM: u32 = 1;
const ENOSYS: u32 = 38;

impl Group {
    /// Syscalls denied outright.
    pub fn syscalls(self) -> &'static [&'static str] {
        match self {
            Group::Mount => &[
                "mount",
                "umount",
                "umount2",
                "fsopen",
                "fsconfig",
                "fsmount",
                "fspick",
                "move_mount",
                "open_tree",
                "mount_setattr",
                "pivot_root",
                "chroot",
            ],
            Group::Ptrace => &[
                "ptrace",
                "process_vm_readv",
                "process_vm_writev",
                "pidfd_getfd",
            ],
            Group::Bpf => &["bpf"],
            Group::Kexec => &["kexec_load", "kexec_file_load", "reboot"],
            Group::Keyctl => &["keyctl", "add_key", "request_key"],
            Group::Namespaces => &["unshare", "setns"],
            Group::PerfEventOpen => &["perf_event_open"],
            Group::Userfaultfd => &["userfaultfd"],
            Group::Tiocsti => &[],
            Group::Modules => &["init_module", "finit_module", "delete_module"],
            Group::IoUring => &["io_uring_setup", "io_uring_enter", "io_uring_register"],
            Group::System => &[
                "settimeofday",
                "clock_settime",
                "clock_adjtime",
                "adjtimex",
                "swapon",
                "swapoff",
                "acct",
                "quotactl",
                "syslog",
            ],
        }
    }
}

fn errno_rule(names: &[&str], errno: u32, args: Vec<LinuxSeccompArg>) -> LinuxSyscall {
    let mut b = LinuxSyscallBuilder::default()
        .names(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .action(LinuxSeccompAction::ScmpActErrno)
        .errno_ret(errno);
    if !args.is_empty() {
        b = b.args(args);
    }
    b.build().expect("all syscall fields set")
}

/// `(arg[index] & mask) == datum`, in OCI's reading (runc's): `value` is the mask, `valueTwo`
/// the datum. (shadow-runtime swaps them for libcontainer, which reads them the other way.)
fn masked_eq(index: usize, datum: u64, mask: u64) -> LinuxSeccompArg {
    LinuxSeccompArgBuilder::default()
        .index(index)
        .value(mask)
        .value_two(datum)
        .op(LinuxSeccompOperator::ScmpCmpMaskedEq)
        .build()
        .expect("all arg fields set")
}

/// The syscall rules for `groups`.
pub fn rules(groups: &[Group]) -> Vec<LinuxSyscall> {
    let mut out = Vec::new();
    for g in groups {
        let names = g.syscalls();
        if !names.is_empty() {
            out.push(errno_rule(names, EPERM, vec![]));
        }
        match g {
            Group::Namespaces => {
                // One rule per flag: libseccomp ANDs the arguments of one rule.
                for f in CLONE_NEW_FLAGS {
                    out.push(errno_rule(&["clone"], EPERM, vec![masked_eq(0, *f, *f)]));
                }
                // clone3 passes its flags in memory, out of seccomp's reach: ENOSYS makes libc
                // fall back to clone, which the rules above see.
                out.push(errno_rule(&["clone3"], ENOSYS, vec![]));
            }
            Group::Tiocsti => {
                // The request is an `unsigned int`: compare the low 32 bits only, so setting
                // high bits does not slip past.
                for req in [TIOCSTI, TIOCLINUX] {
                    out.push(errno_rule(
                        &["ioctl"],
                        EPERM,
                        vec![masked_eq(1, req, 0xFFFF_FFFF)],
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// Annotation carrying a second seccomp filter (a `linux.seccomp` object as JSON) that
/// shadow-runtime's executor stacks on top of the spec's own, right before the payload's exec.
/// Used for agent profiles applied to engine containers: the engine's filter (Docker's default
/// profile, an allowlist) stays exactly as it is, and the profile's deny rules are added by the
/// kernel's own rule for stacked filters (the strictest answer wins), instead of by merging two
/// rule sets with different defaults by hand.
pub const STACKED_ANNOTATION: &str = "run.shadow.seccomp";

/// `linux.seccomp` denying `groups` (None when there are none).
/// A filter that allows everything (the base for rules added by others, e.g. exec audit).
pub fn allow_default() -> LinuxSeccomp {
    LinuxSeccompBuilder::default()
        .default_action(LinuxSeccompAction::ScmpActAllow)
        .syscalls(Vec::<LinuxSyscall>::new())
        .build()
        .expect("all seccomp fields set")
}

pub fn build(groups: &[Group]) -> Option<LinuxSeccomp> {
    if groups.is_empty() {
        return None;
    }
    Some(
        LinuxSeccompBuilder::default()
            .default_action(LinuxSeccompAction::ScmpActAllow)
            .syscalls(rules(groups))
            .build()
            .expect("all seccomp fields set"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiocsti_rule_is_exact() {
        let r = rules(&[Group::Tiocsti]);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json,
            serde_json::json!([
                {"names":["ioctl"],"action":"SCMP_ACT_ERRNO","errnoRet":1,
                 "args":[{"index":1,"value":4294967295u64,"valueTwo":21522,"op":"SCMP_CMP_MASKED_EQ"}]},
                {"names":["ioctl"],"action":"SCMP_ACT_ERRNO","errnoRet":1,
                 "args":[{"index":1,"value":4294967295u64,"valueTwo":21532,"op":"SCMP_CMP_MASKED_EQ"}]}
            ])
        );
    }

    #[test]
    fn namespaces_cover_clone_flags_and_clone3() {
        let r = rules(&[Group::Namespaces]);
        assert_eq!(r.len(), 1 + CLONE_NEW_FLAGS.len() + 1);
        assert_eq!(r[0].names(), &["unshare".to_string(), "setns".to_string()]);
        assert_eq!(r.last().unwrap().errno_ret(), Some(ENOSYS));
    }

    #[test]
    fn no_groups_no_filter() {
        assert!(build(&[]).is_none());
        let s = build(ALL).unwrap();
        assert_eq!(s.default_action(), LinuxSeccompAction::ScmpActAllow);
    }
}
