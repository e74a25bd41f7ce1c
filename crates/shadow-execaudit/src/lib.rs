//! Record every program executed inside a container.
//!
//! # How
//!
//! The container runtime (libcontainer) implements the OCI *seccomp agent*
//! protocol: when `linux.seccomp` has a rule with action `SCMP_ACT_NOTIFY`
//! and `linux.seccomp.listenerPath` is set, the runtime's main process
//! connects to the unix stream socket at `listenerPath` during `create`,
//! sends **one** message whose payload is the JSON of an OCI
//! [`ContainerProcessState`](oci_spec::runtime::ContainerProcessState) with
//! the seccomp notify fd attached as `SCM_RIGHTS`, and closes the socket.
//!
//! This crate provides the three pieces:
//!
//! 1. [`add_to`] / [`notify_rules`]: the `SCMP_ACT_NOTIFY` rule for `execve`
//!    and `execveat`, to add to the profile the container already has.
//! 2. [`Listener::bind`]: the socket at `listenerPath`; it must exist
//!    **before** the runtime's `create` runs.
//! 3. [`Listener::spawn`] → [`Supervisor`]: one thread that receives the
//!    notify fd and then, for every exec attempt, reads the path and argv
//!    from the caller's memory, tells the kernel to let the call continue,
//!    and hands an [`ExecEvent`] to the caller's sink.
//!
//! # What the record is worth (threat model)
//!
//! The threat is an agent in the sandbox running programs the operator does
//! not know about. The record is taken from the caller's memory **at
//! notification time** with `process_vm_readv` (not `/proc/pid/cmdline`,
//! which still shows the old image). This is *auditing, not enforcement*:
//! the call is answered with `SECCOMP_USER_NOTIF_FLAG_CONTINUE`, and after we
//! read the strings another thread of the caller (or another process sharing
//! its memory) can rewrite them before the kernel reads them again — the
//! classic TOCTOU of seccomp user notification. So an [`ExecEvent`] is "what
//! the process asked for", good for an audit log, never a basis for a policy
//! decision. A process that deliberately races us can make the log lie; the
//! log still shows *that* an exec happened, by which pid, and when.
//!
//! Each record is an *attempt*: the kernel does not tell us whether the
//! exec then succeeded. Code that searches `PATH` by trying `execve` in each
//! directory (glibc's `execvp`) leaves one record per directory tried, all
//! but the last failing with `ENOENT`.
//!
//! # Denials
//!
//! [`notify_denials`] turns a profile's `ERRNO(EPERM)` rules into `NOTIFY` rules. The
//! supervisor answers every notification that is not an exec with EPERM — what the rule would
//! have answered — and reports a [`Denial`] (who, which call, its arguments): the session log
//! then holds every seccomp denial without the kernel audit subsystem (disabled on many hosts).
//! If the supervisor is gone those calls fail with ENOSYS: still denied.
//!
//! # Fail-closed
//!
//! While the supervisor runs, every exec waits for it. Once it stops (or
//! never received the fd) the kernel answers each further `execve` of the
//! container with `ENOSYS`: a container whose supervisor is gone cannot run
//! unaudited programs. So call [`Supervisor::finish`] only after the
//! container is gone (or to tear it down).

mod decode;
mod profile;
mod supervisor;

pub use decode::{Denial, ExecEvent};
pub use profile::{add_to, notify_denials, notify_rules, ProfileError, NOTIFIED_SYSCALLS};
pub use supervisor::{Listener, Notice, Stats, Supervisor};
