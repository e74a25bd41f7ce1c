//! The state a hook reads on stdin, made right.
//!
//! libcontainer gives hooks the state it holds during `create`: when the runtime rewrote the
//! spec, `bundle` is the effective bundle under the runtime root rather than the user's (a hook
//! that reads `<bundle>/config.json`, as GPU and network hooks do, would read ours), and a
//! `prestart` hook sees status `creating` where runtime-tools and crun give `created`. The
//! effective spec therefore wraps such hooks in this very binary (`/proc/self/exe`, as the
//! loopback hook): it reads the state, sets the two fields, and execs the hook itself with the
//! fixed state as its stdin — same pid, so the hook's timeout and exit status are untouched.

use std::io::{Read, Seek, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;

use oci_spec::runtime::{Hook, Hooks};

/// argv[1] of the wrapper.
pub const HOOK_STATE_ARG: &str = "__shadow-hook-state";

/// Our own hooks (loopback, listener) run this binary and read no state: left as they are.
const SELF: &str = "/proc/self/exe";

/// `hook` wrapped: run through this binary, which sets `bundle` (and `status`, if given) in the
/// state before exec'ing it. Pure.
pub fn wrap(hook: &Hook, bundle: &Path, status: Option<&str>) -> Hook {
    let mut args = vec![
        "shadow-hook".to_string(),
        HOOK_STATE_ARG.to_string(),
        bundle.display().to_string(),
        status.unwrap_or("-").to_string(),
        hook.path().display().to_string(),
    ];
    args.extend(hook.args().iter().flatten().cloned());
    let mut w = hook.clone();
    w.set_path(SELF.into());
    w.set_args(Some(args));
    w
}

/// The spec's hooks with those that read a wrong state wrapped: `prestart` always (its
/// status), `createRuntime` and `createContainer` when the spec runs from an effective bundle
/// (`rewritten`, or because wrapping a prestart hook makes one). Returns whether anything
/// changed, i.e. whether the spec must run from an effective bundle.
pub fn wrap_hooks(hooks: &mut Hooks, bundle: &Path, rewritten: bool) -> bool {
    let (prestart, changed) = wrap_all(hooks.prestart(), bundle, Some("created"));
    hooks.set_prestart(prestart);
    if rewritten || changed {
        let (cr, a) = wrap_all(hooks.create_runtime(), bundle, None);
        let (cc, b) = wrap_all(hooks.create_container(), bundle, None);
        hooks.set_create_runtime(cr);
        hooks.set_create_container(cc);
        return changed || a || b;
    }
    changed
}

/// Every hook of `list` but our own wrapped; and whether any was.
fn wrap_all(
    list: &Option<Vec<Hook>>,
    bundle: &Path,
    status: Option<&str>,
) -> (Option<Vec<Hook>>, bool) {
    let mut any = false;
    let out = list.as_ref().map(|l| {
        l.iter()
            .map(|h| {
                if h.path() == Path::new(SELF) {
                    h.clone()
                } else {
                    any = true;
                    wrap(h, bundle, status)
                }
            })
            .collect()
    });
    (out, any)
}

/// The wrapper's work, from its arguments after [`HOOK_STATE_ARG`]. Only returns on error.
pub(crate) fn run(args: &[std::ffi::OsString]) -> std::result::Result<(), String> {
    let [bundle, status, path, argv @ ..] = args else {
        return Err(format!(
            "{HOOK_STATE_ARG}: expected BUNDLE STATUS PATH [ARGS…]"
        ));
    };
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
    // A memfd, not a pipe: the state (annotations included) may exceed a pipe's buffer, and
    // nobody would drain it before the exec.
    let mut f = memfd()?;
    f.write_all(state.to_string().as_bytes())
        .and_then(|()| f.rewind())
        .map_err(|e| format!("hook state: {e}"))?;
    let mut cmd = std::process::Command::new(path);
    if let Some((arg0, rest)) = argv.split_first() {
        cmd.arg0(arg0).args(rest);
    }
    let err = cmd.stdin(f).exec();
    Err(format!("hook {}: {err}", Path::new(path).display()))
}

fn memfd() -> std::result::Result<std::fs::File, String> {
    let fd = rustix::fs::memfd_create("hook-state", rustix::fs::MemfdFlags::CLOEXEC)
        .map_err(|e| format!("hook state: memfd: {e}"))?;
    Ok(std::fs::File::from(fd))
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
        let w = wrap(&h, Path::new("/b/x"), Some("created"));
        assert_eq!(w.path(), Path::new("/proc/self/exe"));
        assert_eq!(
            w.args().clone().unwrap(),
            [
                "shadow-hook",
                HOOK_STATE_ARG,
                "/b/x",
                "created",
                "/usr/bin/nvidia-hook",
                "nvidia-hook",
                "prestart"
            ]
        );
        assert_eq!(w.env(), h.env());
        assert_eq!(w.timeout(), Some(5));
        let w = wrap(&hook("/bin/hook", None), Path::new("/b"), None);
        assert_eq!(
            w.args().clone().unwrap(),
            ["shadow-hook", HOOK_STATE_ARG, "/b", "-", "/bin/hook"]
        );
    }

    #[test]
    fn which_hooks_are_wrapped() {
        let mut hooks = Hooks::default();
        hooks.set_prestart(Some(vec![hook("/p", None)]));
        hooks.set_create_runtime(Some(vec![hook("/cr", None)]));
        hooks.set_create_container(Some(vec![hook(SELF, Some(vec!["x", "__own"]))]));
        hooks.set_poststart(Some(vec![hook("/ps", None)]));
        let mut h = hooks.clone();
        assert!(wrap_hooks(&mut h, Path::new("/b"), false));
        assert_eq!(
            h.prestart().as_ref().unwrap()[0].args().as_ref().unwrap()[3],
            "created"
        );
        // The prestart hook makes an effective bundle, so createRuntime hooks need the fix too.
        assert_eq!(
            h.create_runtime().as_ref().unwrap()[0].path(),
            Path::new(SELF)
        );
        // Without prestart hooks and without a rewrite, nothing is wrapped.
        let mut only_cr = hooks.clone();
        only_cr.set_prestart(None);
        let before = only_cr.clone();
        assert!(!wrap_hooks(&mut only_cr, Path::new("/b"), false));
        assert_eq!(only_cr, before);
        let mut h = hooks.clone();
        assert!(wrap_hooks(&mut h, Path::new("/b"), true));
        assert_eq!(
            h.create_runtime().as_ref().unwrap()[0].path(),
            Path::new(SELF)
        );
        // Our own hooks and those that run after create (which see the right state) stay.
        assert_eq!(h.create_container(), hooks.create_container());
        assert_eq!(h.poststart(), hooks.poststart());
        let mut none = Hooks::default();
        assert!(!wrap_hooks(&mut none, Path::new("/b"), true));
    }
}
