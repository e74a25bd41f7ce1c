//! Waiting for a container process in the foreground: signal forwarding, reaping, exit status.

use std::os::fd::RawFd;

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

/// Shell-style exit status: the code, or 128+N when killed by signal N.
pub fn exit_code(ws: WaitStatus) -> Option<i32> {
    match ws {
        WaitStatus::Exited(_, code) => Some(code),
        WaitStatus::Signaled(_, sig, _) => Some(128 + sig as i32),
        _ => None,
    }
}

/// Wait for `pid` to exit, forwarding signals to it and reaping other children (we are a
/// subreaper). `pty_master`: keep its window size in step with ours on SIGWINCH.
pub fn wait(set: &SigSet, pid: Pid, pty_master: Option<RawFd>) -> Result<i32> {
    loop {
        // Reap first: the process may have exited before we blocked signals.
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => break,
                Ok(ws) => {
                    if ws.pid() == Some(pid) {
                        if let Some(code) = exit_code(ws) {
                            return Ok(code);
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
        let sig = set
            .wait()
            .map_err(|e| Error::runtime(format!("sigwait: {e}")))?;
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
