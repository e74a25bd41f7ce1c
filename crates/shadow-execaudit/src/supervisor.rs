//! The seccomp agent: the listener socket and the thread that answers
//! notifications.

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow};
use nix::sys::socket::{
    self, recvmsg, sockopt, AddressFamily, Backlog, ControlMessageOwned, MsgFlags, SockFlag,
    SockType, UnixAddr,
};
use oci_spec::runtime::{ContainerProcessState, SECCOMP_FD_NAME};
use serde::Serialize;

use crate::decode::{Decoder, Denial};
use crate::ExecEvent;

/// What the supervisor saw: an exec it let through, or a call it denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// An exec attempt (answered: continue).
    Exec(ExecEvent),
    /// A call a denying NOTIFY rule matched (answered: EPERM).
    Denied(Denial),
}

/// The runtime's message is a few KiB (annotations included); anything far
/// larger is not from the runtime.
const MAX_STATE_BYTES: usize = 1 << 20;
/// Room for `SCM_MAX_FD` (253) fds: the kernel then never truncates the
/// control data, so every fd a peer sends is received and closed by us
/// rather than silently installed and leaked (nix refuses to parse
/// truncated control data).
const MAX_FDS: usize = 253;

/// The unix socket the runtime connects to (`linux.seccomp.listenerPath`).
///
/// Only the first connection is accepted. Put the socket in a directory
/// only the supervisor can write to and that is not visible inside the
/// container: a process that reached it before the runtime could hand us a
/// decoy fd (the runtime's connect would then fail and the container would
/// not start, so this fails closed, but it is a denial of service).
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
    path: PathBuf,
    /// (dev, ino) of the socket file, so that we only ever unlink our own.
    id: (u64, u64),
}

impl Listener {
    /// Bind and listen on `path` with mode 0600. A stale *socket* at `path`
    /// is removed first; any other existing file is an error
    /// (`AlreadyExists`). Call this before the runtime's `create`.
    pub fn bind(path: &Path) -> io::Result<Listener> {
        match fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => fs::remove_file(path)?,
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a socket", path.display()),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let fd = socket::socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )?;
        socket::bind(fd.as_raw_fd(), &UnixAddr::new(path)?)?;
        // Between bind and listen a connect() is refused, so the
        // umask-dependent mode bind gave the file does not matter.
        let prepared = fs::set_permissions(path, fs::Permissions::from_mode(0o600))
            .and_then(|()| fs::symlink_metadata(path))
            .and_then(|m| {
                socket::listen(&fd, Backlog::new(4)?)?;
                Ok(m)
            });
        match prepared {
            Ok(m) => Ok(Listener {
                fd,
                path: path.to_path_buf(),
                id: (m.dev(), m.ino()),
            }),
            Err(e) => {
                let _ = fs::remove_file(path);
                Err(e)
            }
        }
    }

    /// The socket path, for `linux.seccomp.listenerPath`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Start the supervisor thread. `sink` receives one [`ExecEvent`] per
    /// exec attempt, on that thread, *after* the exec has been answered.
    /// While it runs, the container's next exec waits for it, so it must be
    /// fast and non-blocking (push to a buffer or channel; no file I/O, no
    /// contended locks). It runs with all signals blocked.
    ///
    /// The thread accepts one connection, checks the runtime's message
    /// (peer uid, exactly one fd, a `ContainerProcessState` naming
    /// `seccompFd`, and that the fd is a seccomp notify fd), then serves
    /// notifications until every process using the filter is gone (the
    /// notify fd reports `POLLHUP`) or [`Supervisor::stop`] is called.
    /// Failures are reported by [`Supervisor::finish`].
    pub fn spawn<F>(self, mut sink: F) -> io::Result<Supervisor>
    where
        F: FnMut(ExecEvent) + Send + 'static,
    {
        self.spawn_notices(move |n| {
            if let Notice::Exec(e) = n {
                sink(e)
            }
        })
    }

    /// [`Listener::spawn`], also reporting the calls denied through denying NOTIFY rules
    /// ([`crate::notify_denials`]), which are answered EPERM before the sink sees them.
    pub fn spawn_notices<F>(self, sink: F) -> io::Result<Supervisor>
    where
        F: FnMut(Notice) + Send + 'static,
    {
        // SAFETY: eventfd() takes no pointers; a non-negative result is a
        // new fd that nothing else owns.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh, valid fd (checked above) owned by nobody.
        let stop = Arc::new(unsafe { OwnedFd::from_raw_fd(raw) });
        let thread_stop = Arc::clone(&stop);

        // The caller handles signals with sigwait(): a process-directed
        // signal is delivered to any thread that does not block it, and for
        // ours that would mean the default action (often: kill the
        // process). Threads inherit the creator's mask, so block everything
        // around the spawn and restore.
        let mut old = SigSet::empty();
        pthread_sigmask(
            SigmaskHow::SIG_SETMASK,
            Some(&SigSet::all()),
            Some(&mut old),
        )?;
        let spawned = std::thread::Builder::new()
            .name("shadow-execaudit".into())
            .spawn(move || run(self, &thread_stop, sink));
        // Cannot fail: SIG_SETMASK with a mask we just got from the kernel.
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
        Ok(Supervisor {
            stop,
            thread: Some(spawned?),
        })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // Only unlink the file if it is still the socket we created.
        if let Ok(m) = fs::symlink_metadata(&self.path) {
            if (m.dev(), m.ino()) == self.id {
                let _ = fs::remove_file(&self.path);
            }
        }
    }
}

/// Counters returned by [`Supervisor::finish`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Exec notifications answered (= exec events given to the sink).
    pub execs: u64,
    /// Denied calls answered EPERM.
    pub denials: u64,
    /// Events with an `error`, plus a failed handshake or a fatal error of
    /// the notification loop.
    pub errors: u64,
    /// The first of those errors.
    pub first_error: Option<String>,
}

impl Stats {
    fn error(&mut self, msg: impl FnOnce() -> String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(msg());
        }
    }
}

/// The running supervisor thread. Dropping it is [`Supervisor::finish`]
/// without the result.
#[derive(Debug)]
pub struct Supervisor {
    stop: Arc<OwnedFd>,
    thread: Option<JoinHandle<Stats>>,
}

impl Supervisor {
    /// Ask the thread to stop; it closes the notify fd. From then on the
    /// kernel fails every exec of the container with `ENOSYS` (fail-closed:
    /// no unrecorded execs). Returns immediately.
    pub fn stop(&self) {
        // An eventfd write only fails if the counter would overflow, which
        // a few increments of 1 cannot do.
        let _ = nix::unistd::write(self.stop.as_fd(), &1u64.to_ne_bytes());
    }

    /// The thread has ended: every process using the filter is gone, the
    /// handshake failed, or it was stopped.
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stop the thread if it is still running, wait for it, and return what
    /// it counted.
    pub fn finish(mut self) -> Stats {
        self.join()
    }

    fn join(&mut self) -> Stats {
        let Some(thread) = self.thread.take() else {
            return Stats::default();
        };
        if !thread.is_finished() {
            self.stop();
        }
        thread.join().unwrap_or_else(|_| Stats {
            errors: 1,
            first_error: Some("supervisor thread panicked (in the sink?)".into()),
            ..Stats::default()
        })
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        let _ = self.join();
    }
}

fn run(listener: Listener, stop: &OwnedFd, mut sink: impl FnMut(Notice)) -> Stats {
    let mut stats = Stats::default();
    match handshake(listener, stop.as_fd()) {
        Ok(Some(notify)) => serve(notify.as_fd(), stop.as_fd(), &mut sink, &mut stats),
        // Stopped before the runtime connected (e.g. create failed).
        Ok(None) => {}
        Err(e) => stats.error(|| format!("seccomp agent handshake: {e}")),
    }
    stats
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Accept the runtime's connection and take the notify fd out of its one
/// message. `Ok(None)`: stopped meanwhile.
fn handshake(listener: Listener, stop: BorrowedFd<'_>) -> io::Result<Option<OwnedFd>> {
    if !wait_readable(listener.fd.as_fd(), stop)? {
        return Ok(None);
    }
    let raw = socket::accept4(listener.fd.as_raw_fd(), SockFlag::SOCK_CLOEXEC)?;
    // SAFETY: accept4 returned a new fd that nothing else owns.
    let conn = unsafe { OwnedFd::from_raw_fd(raw) };
    // One container, one connection: stop listening and unlink the path.
    drop(listener);

    // Defense in depth on top of the 0600 mode (root bypasses the mode).
    let peer = socket::getsockopt(&conn, sockopt::PeerCredentials)?;
    let euid = nix::unistd::geteuid().as_raw();
    if peer.uid() != euid {
        return Err(invalid(format!(
            "peer pid {} has uid {}, expected {euid}",
            peer.pid(),
            peer.uid()
        )));
    }

    let mut payload = Vec::new();
    let mut fds: Vec<OwnedFd> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut cmsg = nix::cmsg_space!([RawFd; MAX_FDS]);
    loop {
        if !wait_readable(conn.as_fd(), stop)? {
            return Ok(None);
        }
        let mut iov = [io::IoSliceMut::new(&mut buf)];
        let msg = match recvmsg::<()>(
            conn.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
        ) {
            Err(Errno::EINTR | Errno::EAGAIN) => continue,
            other => other?,
        };
        let n = msg.bytes;
        for c in msg.cmsgs()? {
            if let ControlMessageOwned::ScmRights(raws) = c {
                // SAFETY: the kernel just installed these fds for us; each
                // is owned exactly once, here.
                fds.extend(raws.into_iter().map(|r| unsafe { OwnedFd::from_raw_fd(r) }));
            }
        }
        if n == 0 {
            break; // The runtime closes the socket after its one sendmsg.
        }
        payload.extend_from_slice(&buf[..n]);
        if payload.len() > MAX_STATE_BYTES {
            return Err(invalid(format!(
                "message longer than {MAX_STATE_BYTES} bytes"
            )));
        }
    }

    if fds.len() != 1 {
        return Err(invalid(format!(
            "expected exactly one fd (SCM_RIGHTS), got {}",
            fds.len()
        )));
    }
    let state: ContainerProcessState = serde_json::from_slice(&payload)
        .map_err(|e| invalid(format!("container process state JSON: {e}")))?;
    // Every field has a serde default, so `{}` parses: check the one that
    // describes the fd.
    if state.fds() != &[SECCOMP_FD_NAME] {
        return Err(invalid(format!(
            "state names fds {:?}, expected [{SECCOMP_FD_NAME:?}]",
            state.fds()
        )));
    }
    let fd = fds.remove(0);
    let kind = fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    if kind.as_os_str() != "anon_inode:seccomp notify" {
        return Err(invalid(format!(
            "received fd is {}, not a seccomp notify fd",
            kind.display()
        )));
    }
    Ok(Some(fd))
}

/// Wait until `fd` is readable (or hung up); `false` if `stop` fired.
fn wait_readable(fd: BorrowedFd<'_>, stop: BorrowedFd<'_>) -> io::Result<bool> {
    loop {
        let mut fds = [
            PollFd::new(fd, PollFlags::POLLIN),
            PollFd::new(stop, PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        if fds[1].any().unwrap_or(true) {
            return Ok(false);
        }
        if fds[0].any().unwrap_or(true) {
            return Ok(true);
        }
    }
}

/// The notification loop. Per exec: poll, RECV, the reads, ID_VALID, SEND.
fn serve(
    notify: BorrowedFd<'_>,
    stop: BorrowedFd<'_>,
    sink: &mut impl FnMut(Notice),
    stats: &mut Stats,
) {
    // Deliberately not SECCOMP_IOCTL_NOTIF_SET_FLAGS with
    // SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (6.6+, "wake the other side on this
    // CPU"). Measured on 2 vCPUs: a process calling a notified syscall in a
    // tight loop gets answered in 4.7 µs with it and ~40 µs without, but a
    // shell running 1,000 fresh processes (what a sandbox does) got ~20 µs
    // *slower* per exec, polled or with a blocking RECV (which would also
    // lose POLLHUP and stop()).
    let mut decoder = Decoder::new();
    loop {
        let mut fds = [
            PollFd::new(notify, PollFlags::POLLIN),
            PollFd::new(stop, PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Err(Errno::EINTR) => continue,
            Err(e) => return stats.error(|| format!("poll on the notify fd: {e}")),
            Ok(_) => {}
        }
        if fds[1].any().unwrap_or(true) {
            return; // stop() was called
        }
        let ready = fds[0].revents().unwrap_or(PollFlags::POLLNVAL);
        if ready.contains(PollFlags::POLLIN) {
            match receive(notify) {
                Ok(Some(req)) if !crate::decode::is_exec(&req) => {
                    let d = deny(notify, &req, &mut decoder);
                    stats.denials += 1;
                    sink(Notice::Denied(d));
                }
                Ok(Some(req)) => {
                    let ev = handle(notify, &req, &mut decoder);
                    stats.execs += 1;
                    if let Some(e) = &ev.error {
                        stats.error(|| format!("pid {}: {e}", ev.pid));
                    }
                    sink(Notice::Exec(ev));
                }
                Ok(None) => {}
                Err(e) => return stats.error(|| format!("SECCOMP_IOCTL_NOTIF_RECV: {e}")),
            }
        } else if !ready.is_empty() {
            // POLLHUP: the filter has no users left (the kernel drops a task
            // from it when the task is reaped, not when it exits).
            return;
        }
    }
}

/// The raw ioctls rather than the libseccomp crate: `ScmpNotifReq::receive`
/// converts the architecture *after* the kernel has dequeued the
/// notification and returns an error for one it does not know, losing the
/// id we need to answer (the exec would hang until we close the fd); it also
/// allocates per call. Here a notification, once received, is always
/// answered.
fn receive(notify: BorrowedFd<'_>) -> Result<Option<libc::seccomp_notif>, Errno> {
    loop {
        // The kernel requires the buffer to be zeroed.
        let mut req = libc::seccomp_notif {
            id: 0,
            pid: 0,
            flags: 0,
            data: libc::seccomp_data {
                nr: 0,
                arch: 0,
                instruction_pointer: 0,
                args: [0; 6],
            },
        };
        // SAFETY: NOTIF_RECV writes one `struct seccomp_notif`, which is
        // what `req` is, and keeps no reference to it.
        let r = unsafe {
            libc::ioctl(
                notify.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut req as *mut libc::seccomp_notif,
            )
        };
        if r == 0 {
            return Ok(Some(req));
        }
        match Errno::last() {
            Errno::EINTR => continue,
            // The caller was killed, or its wait interrupted by a signal,
            // between poll and RECV; an interrupted exec is re-notified.
            Errno::ENOENT => return Ok(None),
            e => return Err(e),
        }
    }
}

/// Any notification that is not an exec comes from a rule that denies (see
/// [`crate::notify_denials`]): answer EPERM, as the rule's ERRNO action would have, and say
/// who asked.
fn deny(notify: BorrowedFd<'_>, req: &libc::seccomp_notif, decoder: &mut Decoder) -> Denial {
    let mut resp = libc::seccomp_notif_resp {
        id: req.id,
        val: 0,
        error: -libc::EPERM,
        flags: 0,
    };
    // Answer first: a denial costs the caller nothing more than the round trip.
    let sent = send(notify, &mut resp);
    let mut d = decoder.denial(req);
    if let Err(e) = sent {
        if e != Errno::ENOENT {
            d.error = Some(format!("SECCOMP_IOCTL_NOTIF_SEND: {e}"));
        }
    }
    d
}

fn send(notify: BorrowedFd<'_>, resp: &mut libc::seccomp_notif_resp) -> Result<(), Errno> {
    loop {
        // SAFETY: NOTIF_SEND reads one `struct seccomp_notif_resp` from the
        // pointer and keeps no reference to it.
        let r = unsafe {
            libc::ioctl(
                notify.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                resp as *mut libc::seccomp_notif_resp,
            )
        };
        match r {
            0 => return Ok(()),
            _ => match Errno::last() {
                Errno::EINTR => continue,
                e => return Err(e),
            },
        }
    }
}

fn handle(notify: BorrowedFd<'_>, req: &libc::seccomp_notif, decoder: &mut Decoder) -> ExecEvent {
    let mut ev = decoder.decode(req);
    // After reading its memory: if the caller died meanwhile, its pid may
    // already name another process, whose memory we may have read.
    let mut id = req.id;
    // SAFETY: NOTIF_ID_VALID reads one u64 from the pointer and keeps no
    // reference to it.
    let valid = unsafe {
        libc::ioctl(
            notify.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &mut id as *mut u64,
        )
    } == 0;
    // Answer even if invalid or undecodable: never leave an exec hanging.
    let mut resp = libc::seccomp_notif_resp {
        id: req.id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    let sent = send(notify, &mut resp);
    ev.id_valid = valid && sent.is_ok();
    match sent {
        // ENOENT: the caller is gone or was interrupted; nothing to answer.
        Ok(()) | Err(Errno::ENOENT) => {}
        Err(e) => ev.note(format!("SECCOMP_IOCTL_NOTIF_SEND: {e}")),
    }
    ev
}
