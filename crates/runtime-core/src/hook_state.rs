//! The state a hook reads on stdin, made right.
//!
//! libcontainer gives hooks the state it holds during `create`: when the runtime rewrote the
//! spec, `bundle` is the effective bundle under the runtime root rather than the user's (a hook
//! that reads `<bundle>/config.json`, as GPU and network hooks do, would read ours), and a
//! `prestart` hook sees status `creating` where runtime-tools and crun give `created`. The
//! effective spec therefore wraps such hooks in this very binary (`/proc/self/exe`, as the
//! loopback hook): it reads the state, sets the two fields, and execs the hook itself with the
//! fixed state as its stdin — same pid, so the hook's timeout and exit status are untouched.
//!
//! `poststart` and `poststop` hooks are wrapped differently ([`wrap_warn`]): the runtime spec
//! says a failing one is logged as a warning and the remaining hooks and the lifecycle carry on
//! as if it had succeeded, but libcontainer stops at the first failure and fails `start` (or
//! `delete`). The wrapper runs the hook as its child, enforces the hook's timeout itself, warns
//! on stderr when it fails, and always exits 0.

use std::io::{Read, Seek, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;

use oci_spec::runtime::{Hook, Hooks};

/// argv[1] of the wrapper.
pub const HOOK_STATE_ARG: &str = "__shadow-hook-state";

/// argv[1] of the wrapper of poststart and poststop hooks, whose failure is only a warning.
pub const HOOK_WARN_ARG: &str = "__shadow-hook-warn";

/// Our own hooks (loopback, listener) run this binary and read no state: left as they are.
const SELF: &str = "/proc/self/exe";

/// `hook` (of kind `kind`) wrapped: run through this binary, which sets `bundle` (and
/// `status`, if given) in the state and writes `KIND PATH` to `crumb` (so that a failing
/// create can name the hook that failed) before exec'ing it. Pure.
pub fn wrap(hook: &Hook, bundle: &Path, status: Option<&str>, kind: &str, crumb: &Path) -> Hook {
    let mut args = vec![
        "shadow-hook".to_string(),
        HOOK_STATE_ARG.to_string(),
        bundle.display().to_string(),
        status.unwrap_or("-").to_string(),
        kind.to_string(),
        crumb.display().to_string(),
        hook.path().display().to_string(),
    ];
    args.extend(hook.args().iter().flatten().cloned());
    let mut w = hook.clone();
    w.set_path(SELF.into());
    w.set_args(Some(args));
    w
}

/// After a create that failed in a hook: `KIND hook PATH` of the last wrapped hook that started
/// (hooks run one after another and stop at the first failure, so that is the one that failed),
/// if any. `in_init`: the failure came from the container's init, where createContainer hooks
/// run (prestart and createRuntime hooks run in the runtime). A crumb of the other side is not
/// trusted: a createContainer hook in a user namespace cannot write it (the directory belongs
/// to host root), and the crumb then names an earlier hook that succeeded.
pub fn failed_hook(crumb: &Path, in_init: bool) -> Option<String> {
    let text = std::fs::read_to_string(crumb).ok();
    let named = text
        .as_deref()
        .and_then(|t| t.split_once(' '))
        .filter(|(kind, _)| (*kind == "createContainer") == in_init);
    match named {
        Some((kind, path)) => Some(format!("{kind} hook {path}")),
        None if in_init => Some("a createContainer hook".into()),
        None => None,
    }
}

/// `hook` (of kind `kind`, poststart or poststop) wrapped so that its failure is a warning:
/// the wrapper enforces the hook's timeout (the wrapped hook has none, so libcontainer never
/// kills the wrapper and calls that a failure). Pure.
pub fn wrap_warn(hook: &Hook, kind: &str) -> Hook {
    let mut args = vec![
        "shadow-hook".to_string(),
        HOOK_WARN_ARG.to_string(),
        kind.to_string(),
        hook.timeout().map_or("-".to_string(), |t| t.to_string()),
        hook.path().display().to_string(),
    ];
    args.extend(hook.args().iter().flatten().cloned());
    let mut w = hook.clone();
    w.set_path(SELF.into());
    w.set_args(Some(args));
    w.set_timeout(None);
    w
}

/// The spec's hooks wrapped, all but our own: those run by `create` (`prestart`,
/// `createRuntime`, `createContainer`) by [`wrap`], which gives them the user's bundle (the spec
/// then runs from an effective bundle), prestart its status, and a failure the hook's name;
/// `poststart` and `poststop` by [`wrap_warn`], so that their failure is a warning.
/// (`startContainer` hooks run inside the container, where this binary is not.) Returns
/// whether anything changed, i.e. whether the spec must run from an effective bundle.
pub fn wrap_hooks(hooks: &mut Hooks, bundle: &Path, crumb: &Path) -> bool {
    let state = |status, kind| move |h: &Hook| wrap(h, bundle, status, kind, crumb);
    let (prestart, a) = wrap_each(hooks.prestart(), state(Some("created"), "prestart"));
    let (cr, b) = wrap_each(hooks.create_runtime(), state(None, "createRuntime"));
    let (cc, c) = wrap_each(hooks.create_container(), state(None, "createContainer"));
    let (ps, d) = wrap_each(hooks.poststart(), |h| wrap_warn(h, "poststart"));
    let (pt, e) = wrap_each(hooks.poststop(), |h| wrap_warn(h, "poststop"));
    hooks.set_prestart(prestart);
    hooks.set_create_runtime(cr);
    hooks.set_create_container(cc);
    hooks.set_poststart(ps);
    hooks.set_poststop(pt);
    a || b || c || d || e
}

/// Every hook of `list` but our own wrapped by `wrap`; and whether any was.
fn wrap_each(list: &Option<Vec<Hook>>, wrap: impl Fn(&Hook) -> Hook) -> (Option<Vec<Hook>>, bool) {
    let mut any = false;
    let out = list.as_ref().map(|l| {
        l.iter()
            .map(|h| {
                if h.path() == Path::new(SELF) {
                    h.clone()
                } else {
                    any = true;
                    wrap(h)
                }
            })
            .collect()
    });
    (out, any)
}

/// The wrapper's work, from its arguments after [`HOOK_STATE_ARG`]. Only returns on error.
pub(crate) fn run(args: &[std::ffi::OsString]) -> std::result::Result<(), String> {
    let [bundle, status, kind, crumb, path, argv @ ..] = args else {
        return Err(format!(
            "{HOOK_STATE_ARG}: expected BUNDLE STATUS KIND CRUMB PATH [ARGS…]"
        ));
    };
    // Best effort: only the error message of a failing create depends on it.
    let mut line = kind.clone();
    line.push(" ");
    line.push(path);
    let _ = std::fs::write(crumb, line.as_encoded_bytes());
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| format!("hook state: read stdin: {e}"))?;
    let mut state: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("hook state: not JSON: {e}"))?;
    state["bundle"] = bundle.to_string_lossy().into();
    if status != "-" {
        state["status"] = status.to_string_lossy().into();
    }
    let f = state_file(&state.to_string())?;
    let mut cmd = std::process::Command::new(path);
    if let Some((arg0, rest)) = argv.split_first() {
        cmd.arg0(arg0).args(rest);
    }
    let err = cmd.stdin(f).exec();
    Err(format!("hook {}: {err}", Path::new(path).display()))
}

/// The warning wrapper's work, from its arguments after [`HOOK_WARN_ARG`]: run the hook as a
/// child (same stdin — the state —, environment and cwd), kill it at its timeout, and warn
/// when it fails. Errors only on malformed arguments; the hook's failure is not one.
pub(crate) fn run_warn(args: &[std::ffi::OsString]) -> std::result::Result<(), String> {
    let [kind, timeout, path, argv @ ..] = args else {
        return Err(format!(
            "{HOOK_WARN_ARG}: expected KIND TIMEOUT PATH [ARGS…]"
        ));
    };
    let timeout = match timeout.to_str() {
        Some("-") => None,
        Some(t) => Some(std::time::Duration::from_secs(
            t.parse::<u64>()
                .map_err(|_| format!("{HOOK_WARN_ARG}: bad timeout {t:?}"))?,
        )),
        None => return Err(format!("{HOOK_WARN_ARG}: bad timeout")),
    };
    let path = Path::new(path);
    let mut stdin = None;
    if kind == "poststart" {
        // libcontainer runs poststart hooks as soon as it has told the init to go on, while the
        // init may still be running startContainer hooks; the spec wants them after the user's
        // process was executed. Wait for that exec (the state names the init).
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("hook state: read stdin: {e}"))?;
        let pid = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|s| s["pid"].as_i64());
        if let Some(pid) = pid {
            wait_for_exec(pid, EXEC_WAIT);
        }
        stdin = Some(state_file(&text)?);
    }
    if let Err(why) = run_child(path, argv, timeout, stdin) {
        // Not eprintln!: a closed stderr must not turn the warning into a failure (a panic).
        let _ = writeln!(
            std::io::stderr(),
            "shadow-runtime: warning: {} hook {} failed: {why}; continuing, as the runtime \
             spec requires for {0} hooks",
            kind.to_string_lossy(),
            path.display()
        );
    }
    Ok(())
}

/// How long a poststart hook waits at most for the init to execute the user's process.
const EXEC_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Wait until process `pid` no longer runs this binary (the container's init has executed the
/// user's process) or is gone, at most `max`. The init is a fork of the runtime, so until its
/// exec `/proc/PID/exe` is the same file as ours (the same inode, through the read-only bind
/// mount of the sealing defence). Where the two differ from the start (the sealed-memfd
/// fallback gives each process its own copy) this returns at once, as without the wait.
fn wait_for_exec(pid: i64, max: std::time::Duration) {
    use std::os::unix::fs::MetadataExt;
    let Ok(me) = std::fs::metadata("/proc/self/exe") else {
        return;
    };
    let deadline = std::time::Instant::now() + max;
    while std::time::Instant::now() < deadline {
        match std::fs::metadata(format!("/proc/{pid}/exe")) {
            Ok(m) if m.dev() == me.dev() && m.ino() == me.ino() => {}
            _ => return,
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Run `path` with `argv` (argv[0] first) and wait for it, at most `timeout`. Its stdin is
/// `stdin`, or ours.
fn run_child(
    path: &Path,
    argv: &[std::ffi::OsString],
    timeout: Option<std::time::Duration>,
    stdin: Option<std::fs::File>,
) -> std::result::Result<(), String> {
    let mut cmd = std::process::Command::new(path);
    if let Some((arg0, rest)) = argv.split_first() {
        cmd.arg0(arg0).args(rest);
    }
    if let Some(f) = stdin {
        cmd.stdin(f);
    }
    // Its own process group, so that a timeout ends what it started too.
    cmd.process_group(0);
    let mut child = cmd.spawn().map_err(|e| format!("cannot run it: {e}"))?;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match timeout {
        None => rx.recv().map_err(|e| e.to_string())?,
        Some(t) => match rx.recv_timeout(t) {
            Ok(s) => s,
            Err(_) => {
                // The whole group: a hook's own children (`sh -c '…'`) would otherwise keep
                // running and hold the runtime's stderr open for whoever reads it to EOF.
                let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
                let _ = rx.recv();
                return Err(format!("timed out after {}s and was killed", t.as_secs()));
            }
        },
    }
    .map_err(|e| format!("wait: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(status.to_string())
    }
}

/// The hook's stdin holding `state`, read from the start. A memfd, not a pipe: the state
/// (annotations included) may exceed a pipe's buffer, and nobody would drain it before the exec.
fn state_file(state: &str) -> std::result::Result<std::fs::File, String> {
    let fd = rustix::fs::memfd_create("hook-state", rustix::fs::MemfdFlags::CLOEXEC)
        .map_err(|e| format!("hook state: memfd: {e}"))?;
    let mut f = std::fs::File::from(fd);
    f.write_all(state.as_bytes())
        .and_then(|()| f.rewind())
        .map_err(|e| format!("hook state: {e}"))?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::HookBuilder;

    fn hook(path: &str, args: Option<Vec<&str>>) -> Hook {
        let mut b = HookBuilder::default().path(path).timeout(5);
        if let Some(a) = args {
            b = b.args(a.into_iter().map(String::from).collect::<Vec<_>>());
        }
        b.build().unwrap()
    }

    #[test]
    fn a_wrapped_hook_keeps_its_argv_env_and_timeout() {
        let mut h = hook(
            "/usr/bin/nvidia-hook",
            Some(vec!["nvidia-hook", "prestart"]),
        );
        h.set_env(Some(vec!["A=b".into()]));
        let c = Path::new("/r/.bundles/x/hook");
        let w = wrap(&h, Path::new("/b/x"), Some("created"), "prestart", c);
        assert_eq!(w.path(), Path::new("/proc/self/exe"));
        assert_eq!(
            w.args().clone().unwrap(),
            [
                "shadow-hook",
                HOOK_STATE_ARG,
                "/b/x",
                "created",
                "prestart",
                "/r/.bundles/x/hook",
                "/usr/bin/nvidia-hook",
                "nvidia-hook",
                "prestart"
            ]
        );
        assert_eq!(w.env(), h.env());
        assert_eq!(w.timeout(), Some(5));
        let w = wrap(
            &hook("/bin/hook", None),
            Path::new("/b"),
            None,
            "createRuntime",
            c,
        );
        assert_eq!(
            w.args().clone().unwrap(),
            [
                "shadow-hook",
                HOOK_STATE_ARG,
                "/b",
                "-",
                "createRuntime",
                "/r/.bundles/x/hook",
                "/bin/hook"
            ]
        );
    }

    #[test]
    fn a_warning_hook_keeps_argv_and_env_and_its_timeout_moves_to_the_wrapper() {
        let mut h = hook("/bin/notify", Some(vec!["notify", "-v"]));
        h.set_env(Some(vec!["A=b".into()]));
        let w = wrap_warn(&h, "poststop");
        assert_eq!(w.path(), Path::new("/proc/self/exe"));
        assert_eq!(
            w.args().clone().unwrap(),
            [
                "shadow-hook",
                HOOK_WARN_ARG,
                "poststop",
                "5",
                "/bin/notify",
                "notify",
                "-v"
            ]
        );
        assert_eq!(w.env(), h.env());
        assert_eq!(w.timeout(), None);
        let mut n = hook("/bin/n", None);
        n.set_timeout(None);
        assert_eq!(
            wrap_warn(&n, "poststart").args().clone().unwrap(),
            ["shadow-hook", HOOK_WARN_ARG, "poststart", "-", "/bin/n"]
        );
    }

    #[test]
    fn the_warning_wrapper_reports_failure_and_timeout() {
        let sh = |s: &str| -> Vec<std::ffi::OsString> {
            ["sh", "-c", s].iter().map(Into::into).collect()
        };
        let t = Some(std::time::Duration::from_secs(1));
        assert_eq!(
            run_child(Path::new("/bin/sh"), &sh("exit 0"), t, None),
            Ok(())
        );
        assert_eq!(
            run_child(Path::new("/bin/sh"), &sh("exit 3"), t, None),
            Err("exit status: 3".into())
        );
        assert_eq!(
            run_child(Path::new("/bin/sh"), &sh("exec sleep 30"), t, None),
            Err("timed out after 1s and was killed".into())
        );
        // What the hook started dies with it.
        let d = tempfile::tempdir().unwrap();
        let pidfile = d.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        assert!(run_child(Path::new("/bin/sh"), &sh(&script), t, None).is_err());
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                !s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
        };
        let t0 = std::time::Instant::now();
        while alive() && t0.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!alive(), "the hook's child {pid} outlived its timeout");
        assert!(run_child(Path::new("/nonexistent"), &[], None, None)
            .unwrap_err()
            .starts_with("cannot run it"));
    }

    #[test]
    fn which_hooks_are_wrapped() {
        let c = Path::new("/crumb");
        let mut hooks = Hooks::default();
        hooks.set_prestart(Some(vec![hook("/p", None)]));
        hooks.set_create_runtime(Some(vec![hook("/cr", None)]));
        hooks.set_create_container(Some(vec![hook(SELF, Some(vec!["x", "__own"]))]));
        hooks.set_start_container(Some(vec![hook("/in-container", None)]));
        hooks.set_poststart(Some(vec![hook("/ps", None)]));
        let mut h = hooks.clone();
        assert!(wrap_hooks(&mut h, Path::new("/b"), c));
        let arg = |l: &Option<Vec<Hook>>, i: usize| {
            l.as_ref().unwrap()[0].args().as_ref().unwrap()[i].clone()
        };
        assert_eq!(arg(h.prestart(), 3), "created");
        assert_eq!(arg(h.prestart(), 4), "prestart");
        assert_eq!(arg(h.create_runtime(), 4), "createRuntime");
        // Our own hooks stay, and startContainer hooks run where this binary is not.
        assert_eq!(h.create_container(), hooks.create_container());
        assert_eq!(h.start_container(), hooks.start_container());
        // poststart hooks are wrapped so that their failure only warns.
        assert_eq!(arg(h.poststart(), 1), HOOK_WARN_ARG);
        // Any one kind makes an effective bundle.
        for kind in ["createRuntime", "poststop"] {
            let mut one = Hooks::default();
            if kind == "createRuntime" {
                one.set_create_runtime(Some(vec![hook("/x", None)]));
            } else {
                one.set_poststop(Some(vec![hook("/x", None)]));
            }
            assert!(wrap_hooks(&mut one, Path::new("/b"), c), "{kind}");
        }
        // Only our own hooks, or none: nothing changes.
        let mut own = Hooks::default();
        own.set_create_container(hooks.create_container().clone());
        let before = own.clone();
        assert!(!wrap_hooks(&mut own, Path::new("/b"), c));
        assert_eq!(own, before);
        let mut none = Hooks::default();
        assert!(!wrap_hooks(&mut none, Path::new("/b"), c));
    }

    #[test]
    fn failed_hook_reads_the_crumb() {
        let d = tempfile::tempdir().unwrap();
        let c = d.path().join("hook");
        assert_eq!(failed_hook(&c, false), None);
        assert_eq!(
            failed_hook(&c, true).as_deref(),
            Some("a createContainer hook")
        );
        std::fs::write(&c, "prestart /usr/bin/my hook").unwrap();
        assert_eq!(
            failed_hook(&c, false).as_deref(),
            Some("prestart hook /usr/bin/my hook")
        );
        // The init failed, but the last crumb is a prestart hook's: that one succeeded.
        assert_eq!(
            failed_hook(&c, true).as_deref(),
            Some("a createContainer hook")
        );
        std::fs::write(&c, "createContainer /bin/false").unwrap();
        assert_eq!(
            failed_hook(&c, true).as_deref(),
            Some("createContainer hook /bin/false")
        );
    }
}
