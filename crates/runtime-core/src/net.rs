//! Network namespace setup libcontainer leaves out: bringing up `lo`.
//!
//! runc brings the loopback interface up in every new network namespace; libcontainer does not,
//! and without it `localhost` is unreachable inside (test suites that start a local server fail).
//!
//! - As root: from the host side after `create`, while the init process waits for `start`, a
//!   short-lived thread joins the container's network namespace (setns on a network namespace
//!   affects only the calling thread) and sets IFF_UP on `lo`.
//! - Rootless: the host side may not enter the namespaces of the (non-dumpable) init process, so
//!   the effective spec gets a `createContainer` hook, `/proc/self/exe` (this very binary)
//!   with [`LOOPBACK_HOOK_ARG`], which runs inside the container's namespaces while it still
//!   holds its capabilities there; both binaries call [`hook_main`] first thing.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use oci_spec::runtime::{LinuxNamespaceType, Spec};

use crate::error::{Error, Result};

/// Whether we run rootless (not root, or root of a user namespace other than the initial one):
/// then the host side cannot enter the container's namespaces.
pub fn rootless() -> bool {
    // libcontainer's own test, so both sides agree on which mode is in force.
    let syscall = libcontainer::syscall::syscall::create_syscall();
    libcontainer::utils::rootless_required(&*syscall).unwrap_or(true)
}

/// argv[1] that makes the binary act as the loopback hook.
pub const LOOPBACK_HOOK_ARG: &str = "__shadow-loopback-up";

/// If this process was started as the loopback hook, bring `lo` up in the current network
/// namespace and return the exit status; otherwise None.
pub fn hook_main() -> Option<i32> {
    let mut args = std::env::args_os();
    args.next();
    if args.next().as_deref() != Some(std::ffi::OsStr::new(LOOPBACK_HOOK_ARG)) {
        return None;
    }
    Some(match set_lo_up() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("shadow-runtime: bring up lo: {e}");
            1
        }
    })
}

fn set_lo_up() -> std::io::Result<()> {
    // SAFETY: a plain datagram socket used for interface ioctls.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd was just created and is owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data; zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in b"lo\0".iter().enumerate() {
        req.ifr_name[i] = *b as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write the ifreq we own.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether the spec asks for a new (not joined) network namespace.
pub fn wants_new_netns(spec: &Spec) -> bool {
    spec.linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .is_some_and(|nss| {
            nss.iter()
                .any(|n| n.typ() == LinuxNamespaceType::Network && n.path().is_none())
        })
}

/// Bring `lo` up in the network namespace of `pid`.
pub fn loopback_up(pid: i32) -> Result<()> {
    in_netns(pid, "bring up lo", set_lo_up)
}

/// Run `f` on a short-lived thread inside the network namespace of process `pid` (as root, or
/// root of the user namespace that owns the container's). Sockets made there stay in that
/// namespace: this is how `shadow run` gives the sandbox its proxy listener.
pub fn in_netns<T: Send>(
    pid: i32,
    what: &str,
    f: impl FnOnce() -> std::io::Result<T> + Send,
) -> Result<T> {
    // Rootless callers in the initial user namespace cannot open the non-dumpable init's
    // /proc files (nor setns through a pidfd, which makes the same ptrace-access check); they
    // use the hook instead.
    let ns = File::open(format!("/proc/{pid}/ns/net"))
        .map_err(|e| Error::io(format!("open network namespace of {pid}"), e))?;
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("netns".into())
            .spawn_scoped(s, move || -> std::io::Result<T> {
                // SAFETY: setns with an fd we own, on this thread only (CLONE_NEWNET).
                if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                f()
            })
            .map_err(|e| Error::io("spawn thread", e))?;
        handle
            .join()
            .map_err(|_| Error::runtime("network namespace thread panicked"))?
            .map_err(|e| Error::io(format!("{what} in the container's network namespace"), e))
    })
}
