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
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let result = match args.first().and_then(|a| a.to_str()) {
        Some(LOOPBACK_HOOK_ARG) => set_lo_up().map_err(|e| format!("bring up lo: {e}")),
        Some(LISTEN_HOOK_ARG) => listen_hook(&args[1..]),
        Some(crate::hook_state::HOOK_STATE_ARG) => crate::hook_state::run(&args[1..]),
        Some(crate::hook_state::HOOK_WARN_ARG) => crate::hook_state::run_warn(&args[1..]),
        _ => return None,
    };
    Some(match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("shadow-runtime: {e}");
            1
        }
    })
}

/// argv[1] of the hook that opens a TCP listener inside the container's network namespace and
/// hands it to the process serving it (see [`listen_hook_spec`]).
pub const LISTEN_HOOK_ARG: &str = "__shadow-listen";

/// A `createContainer` hook that binds `addr` (e.g. `127.0.0.1:3128`) in the container's
/// network namespace and sends the listening socket over the unix socket at `socket` (a
/// [`FdReceiver`] bound by the caller before `create`).
///
/// Why a hook: it runs inside the container's namespaces (before `pivot_root`, so the host
/// path of `socket` is still reachable) with the capabilities it holds there, which works
/// rootless too, where the host side may not open the non-dumpable init's namespaces. The
/// socket then lives in the container's namespace while the process that accepts on it does
/// not: this is how `shadow run --allow-host` gives the sandbox its proxy.
pub fn listen_hook_spec(socket: &std::path::Path, addr: &str) -> oci_spec::runtime::Hook {
    let mut h = oci_spec::runtime::Hook::default();
    h.set_path("/proc/self/exe".into());
    h.set_args(Some(vec![
        "shadow-listen".into(),
        LISTEN_HOOK_ARG.into(),
        socket.display().to_string(),
        addr.into(),
    ]));
    h.set_timeout(Some(10));
    h
}

fn listen_hook(args: &[std::ffi::OsString]) -> std::result::Result<(), String> {
    let [socket, addr] = args else {
        return Err(format!("{LISTEN_HOOK_ARG}: expected SOCKET ADDR"));
    };
    let addr = addr.to_string_lossy();
    // lo may still be down (the loopback hook can run after us).
    set_lo_up().map_err(|e| format!("bring up lo: {e}"))?;
    let l = std::net::TcpListener::bind(&*addr).map_err(|e| format!("listen on {addr}: {e}"))?;
    let peer = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|e| format!("connect to {}: {e}", socket.to_string_lossy()))?;
    let fds = [l.as_raw_fd()];
    let cmsg = [nix::sys::socket::ControlMessage::ScmRights(&fds)];
    let iov = [std::io::IoSlice::new(b"L")];
    nix::sys::socket::sendmsg::<()>(
        peer.as_raw_fd(),
        &iov,
        &cmsg,
        nix::sys::socket::MsgFlags::empty(),
        None,
    )
    .map_err(|e| format!("send the listener: {e}"))?;
    Ok(())
}

/// The receiving end of [`listen_hook_spec`]: bind before `create`, [`FdReceiver::take`]
/// after it (the hook has run by then, or `create` failed).
#[derive(Debug)]
pub struct FdReceiver {
    listener: std::os::unix::net::UnixListener,
    path: std::path::PathBuf,
}

impl FdReceiver {
    /// Bind a unix socket at `path` (mode 0600: only this user may hand us a socket).
    pub fn bind(path: &std::path::Path) -> Result<FdReceiver> {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::remove_file(path);
        let listener = std::os::unix::net::UnixListener::bind(path)
            .map_err(|e| Error::io(format!("bind {}", path.display()), e))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Error::io(format!("chmod {}", path.display()), e))?;
        Ok(FdReceiver {
            listener,
            path: path.to_path_buf(),
        })
    }

    /// The TCP listener the hook sent; checked to be a listening TCP socket on `expect`.
    pub fn take(self, expect: std::net::SocketAddr) -> Result<std::net::TcpListener> {
        let fail = |m: String| Error::runtime(format!("receive the sandbox's listener: {m}"));
        self.listener
            .set_nonblocking(true)
            .map_err(|e| fail(e.to_string()))?;
        let (conn, _) = self
            .listener
            .accept()
            .map_err(|e| fail(format!("the hook did not connect ({e})")))?;
        conn.set_nonblocking(false)
            .map_err(|e| fail(e.to_string()))?;
        let mut buf = [0u8; 1];
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
        let msg = nix::sys::socket::recvmsg::<()>(
            conn.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            nix::sys::socket::MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(|e| fail(e.to_string()))?;
        let mut fd = None;
        for c in msg.cmsgs().map_err(|e| fail(e.to_string()))? {
            if let nix::sys::socket::ControlMessageOwned::ScmRights(fds) = c {
                for f in fds {
                    // SAFETY: the kernel just installed f in our table; we own it now.
                    let owned = unsafe { OwnedFd::from_raw_fd(f) };
                    if fd.is_none() {
                        fd = Some(owned);
                    }
                }
            }
        }
        let fd = fd.ok_or_else(|| fail("no socket came".into()))?;
        let l = std::net::TcpListener::from(fd);
        match l.local_addr() {
            Ok(a) if a == expect => Ok(l),
            Ok(a) => Err(fail(format!("it is bound to {a}, not {expect}"))),
            Err(e) => Err(fail(format!("not a TCP socket ({e})"))),
        }
    }
}

impl Drop for FdReceiver {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
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
