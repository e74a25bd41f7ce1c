//! A minimal init for the container's pid 1 (used by `shadow run`; engines bring their own).
//!
//! Threat/usability: the kernel drops default-action signals sent to a pid namespace's init, so
//! a command running as pid 1 ignores Ctrl-C, `kill` from inside and the runtime's SIGTERM, and
//! nobody reaps orphaned zombies. Instead of exec'ing the command, the container's init process
//! (already set up by libcontainer: namespaces, mounts, seccomp, dropped capabilities) forks it:
//! the child gets its own process group, made the terminal's foreground group, and execs the
//! command; the parent stays as pid 1, forwards the signals it receives to that group, reaps
//! every child, and exits with the command's status (128+N when killed by signal N).
//! No extra `execve` is involved, so the shim costs one `fork`.

use nix::sys::signal::{kill, sigprocmask, SigSet, SigmaskHow, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, getpid, setpgid, tcsetpgrp, ForkResult, Pid};

/// Fork: in the child run `exec_child` (which must exec or exit); in the parent supervise and
/// never return.
pub fn run(exec_child: impl FnOnce() -> i32) -> ! {
    let all = SigSet::all();
    // Block everything before forking so no signal is lost between fork and sigwait.
    let mut old = SigSet::empty();
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&all), Some(&mut old));
    // SAFETY: the init process is single-threaded here (libcontainer's init is a clone of one
    // thread), so fork is safe.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => {
            let me = getpid();
            let _ = setpgid(me, me);
            // Become the terminal's foreground group (Ctrl-C, Ctrl-Z reach the command, not
            // pid 1). tcsetpgrp from a background group raises SIGTTOU, which is blocked here.
            let _ = tcsetpgrp(std::io::stdin(), me);
            let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
            let code = exec_child();
            std::process::exit(code);
        }
        Ok(ForkResult::Parent { child }) => supervise(&all, child),
        Err(e) => {
            eprintln!("shadow: cannot start the command: fork: {e}");
            std::process::exit(126);
        }
    }
}

fn supervise(set: &SigSet, child: Pid) -> ! {
    loop {
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == child => std::process::exit(code),
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                    std::process::exit(128 + sig as i32)
                }
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
        match set.wait() {
            Ok(Signal::SIGCHLD) | Err(_) => {}
            Ok(Signal::SIGTTIN | Signal::SIGTTOU | Signal::SIGTSTP) => {}
            Ok(sig) => {
                // The command's whole process group, then the command itself (in case it left
                // the group).
                let _ = kill(Pid::from_raw(-child.as_raw()), sig);
                let _ = kill(child, sig);
            }
        }
    }
}
