//! Waiting for a container process in the foreground: signal forwarding, reaping, exit status.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::error::{Error, Result};

/// Become a child subreaper: with separate create/start, the container's init is reparented
/// away from us, and without this `run` could never wait for it.
pub fn set_subreaper() -> Result<()> {
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER, 1) takes no pointers.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(Error::io(
            "set child subreaper",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Block every signal in this thread (and threads spawned later), so that `wait` can take them
/// synchronously. Call before spawning proxy threads.
pub fn block_signals() -> Result<SigSet> {
    let set = SigSet::all();
    set.thread_block()
        .map_err(|e| Error::runtime(format!("block signals: {e}")))?;
    Ok(set)
}

/// Spawn a helper thread with every signal blocked. A process that waits for its signals with
/// sigwait (as `run` does) must not have them delivered to another thread, where the default
/// action (usually: terminate) would apply. Threads inherit the creator's mask.
pub fn spawn_signals_blocked<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    let mut old = SigSet::empty();
    nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&SigSet::all()),
        Some(&mut old),
    )?;
    let r = std::thread::Builder::new().name(name.into()).spawn(f);
    let _ = nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&old),
        None,
    );
    r
}

/// Shell-style exit status: the code, or 128+N when killed by signal N.
pub fn exit_code(ws: WaitStatus) -> Option<i32> {
    match ws {
        WaitStatus::Exited(_, code) => Some(code),
        WaitStatus::Signaled(_, sig, _) => Some(128 + sig as i32),
        _ => None,
    }
}

/// A time limit for [`wait`]: at `deadline` call `on_timeout` (which should ask the container
/// to stop, e.g. SIGTERM to all its processes), and `grace` later SIGKILL the process.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    /// When the limit is reached.
    pub at: Instant,
    /// How long to wait between the polite signal and SIGKILL.
    pub grace: Duration,
}

/// What [`wait`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// Shell-style exit status.
    pub code: i32,
    /// The deadline passed and the process was stopped by us.
    pub timed_out: bool,
}

/// `sigtimedwait` on `set` for at most `timeout`; None on timeout.
fn wait_signal(set: &SigSet, timeout: Option<Duration>) -> Result<Option<Signal>> {
    let Some(t) = timeout else {
        return set
            .wait()
            .map(Some)
            .map_err(|e| Error::runtime(format!("sigwait: {e}")));
    };
    let ts = libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    };
    loop {
        // SAFETY: sigtimedwait reads the set and timespec we own; info may be NULL.
        let rc = unsafe { libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &ts) };
        if rc >= 0 {
            return Signal::try_from(rc)
                .map(Some)
                .map_err(|e| Error::runtime(format!("sigtimedwait: {e}")));
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) => return Ok(None),
            Some(libc::EINTR) => continue,
            _ => return Err(Error::io("sigtimedwait", std::io::Error::last_os_error())),
        }
    }
}

/// Wait for `pid` to exit, forwarding signals to it and reaping other children (we are a
/// subreaper). `pty_master`: keep its window size in step with ours on SIGWINCH.
pub fn wait(set: &SigSet, pid: Pid, pty_master: Option<RawFd>) -> Result<i32> {
    wait_until(set, pid, pty_master, None, &mut || {}).map(|e| e.code)
}

/// [`wait`] with an optional deadline.
pub fn wait_until(
    set: &SigSet,
    pid: Pid,
    pty_master: Option<RawFd>,
    deadline: Option<Deadline>,
    on_timeout: &mut dyn FnMut(),
) -> Result<Exit> {
    let mut timed_out = false;
    let mut kill_at: Option<Instant> = None;
    loop {
        // Reap first: the process may have exited before we blocked signals.
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => break,
                Ok(ws) => {
                    if ws.pid() == Some(pid) {
                        if let Some(code) = exit_code(ws) {
                            return Ok(Exit { code, timed_out });
                        }
                    }
                }
                Err(nix::errno::Errno::ECHILD) => {
                    return Err(Error::runtime(format!(
                        "lost track of container process {pid}"
                    )))
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(Error::runtime(format!("waitpid: {e}"))),
            }
        }
        let now = Instant::now();
        let next = match (deadline, timed_out, kill_at) {
            (_, true, Some(k)) => Some(k),
            (Some(d), false, _) => Some(d.at),
            _ => None,
        };
        let sig = match wait_signal(set, next.map(|n| n.saturating_duration_since(now)))? {
            Some(s) => s,
            None => {
                if !timed_out {
                    timed_out = true;
                    on_timeout();
                    kill_at = deadline.map(|d| Instant::now() + d.grace);
                } else {
                    let _ = kill(pid, Signal::SIGKILL);
                    kill_at = Some(Instant::now() + Duration::from_secs(3600));
                }
                continue;
            }
        };
        match sig {
            Signal::SIGCHLD => {}
            Signal::SIGWINCH => {
                if let Some(m) = pty_master {
                    crate::tty::sync_winsize(m);
                }
            }
            // Job-control stops of the runtime itself are not forwarded: the container has its
            // own terminal (or none).
            Signal::SIGTTIN | Signal::SIGTTOU | Signal::SIGTSTP | Signal::SIGURG => {}
            s => {
                let _ = kill(pid, s);
            }
        }
    }
}
