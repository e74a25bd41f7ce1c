//! The workload executor: the last code that runs inside the container before the payload.
//!
//! It wraps libcontainer's default executor (PATH lookup + `execvp`) and adds, in this order:
//! - a fresh anonymous session keyring (runc's default; `--no-new-keyring` skips it) so the
//!   container cannot reach keys in the caller's session keyring;
//! - the Landlock policy carried in the bundle (annotation `run.shadow.landlock`, checked at
//!   create by `spec_load`), applied last so that it binds the payload whoever started the
//!   container: `shadow run`, Docker, Podman or containerd. libcontainer has already installed
//!   the spec's seccomp filter at this point (no-new-privileges case), so a filter that denies
//!   the landlock syscalls makes this fail, closed.
//!
//! Note: libcontainer's `setup_envs` replaces the process environment with the spec's before
//! `exec` runs, so nothing here may rely on the host environment.

use libcontainer::workload::{
    default::DefaultExecutor, Executor, ExecutorError, ExecutorValidationError,
};
use oci_spec::runtime::Spec;

/// Executor used for every container process (init and exec).
#[derive(Debug, Clone, Default)]
pub struct ShadowExecutor {
    /// Do not create a new session keyring (runc's `--no-new-keyring`).
    pub no_new_keyring: bool,
    /// Keep a minimal init as pid 1 and run the payload as its child ([`crate::init_shim`]).
    pub init_shim: bool,
    /// The container's annotations as it was created, for an `exec`: libcontainer hands the
    /// executor the spec of the user's bundle, which lacks what the runtime added to the spec
    /// it ran (an engine container's profile: Landlock, stacked seccomp, environment), and an
    /// exec'd process must be held by the same rules as the init.
    pub annotations: Option<std::collections::HashMap<String, String>>,
    /// For an `exec`: the container's own seccomp filter. libcontainer 0.7's tenant path
    /// rebuilds `linux` without `seccomp`, so without this an exec'd process (`docker exec`)
    /// would run with no filter at all.
    pub exec_seccomp: Option<oci_spec::runtime::LinuxSeccomp>,
}

/// Installs a seccomp filter from the executor, where capabilities are already dropped: it
/// needs no_new_privs unless CAP_SYS_ADMIN is left, so no_new_privs is set (a setuid program
/// run by that process then gains nothing, which is the safe side).
fn install_filter(
    what: &str,
    filter: &oci_spec::runtime::LinuxSeccomp,
) -> Result<(), ExecutorError> {
    nix::sys::prctl::set_no_new_privs()
        .map_err(|e| ExecutorError::Other(format!("no_new_privs: {e}")))?;
    libcontainer::seccomp::initialize_seccomp(filter).map_err(|e| {
        eprintln!("shadow-runtime: {what}: {e}");
        ExecutorError::Other(format!("{what}: {e}"))
    })?;
    Ok(())
}

/// Makes stdio that is `/dev/null` writable again. libcontainer 0.7 replaces stdio that is the
/// host's `/dev/null` by the container's, opened read-only, so a payload whose stdout or stderr
/// was `/dev/null` (`shadow run … >/dev/null`, an engine's detached container) got EBADF on
/// every write and died of it; runc opens it read-write. Best effort: a container without a
/// usable `/dev/null` keeps what it had.
fn writable_dev_null() {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    // Character device 1:3 opened other than read-write; /dev/null is opened only then.
    let null_rdev = libc::makedev(1, 3);
    let swapped: Vec<i32> = (0..3)
        .filter(|&fd| {
            nix::sys::stat::fstat(fd).is_ok_and(|st| {
                st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == null_rdev
            }) && nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL)
                .is_ok_and(|f| f & libc::O_ACCMODE != libc::O_RDWR)
        })
        .collect();
    if swapped.is_empty() {
        return;
    }
    let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    else {
        return;
    };
    // The container's /dev/null must be the real one before it replaces anything.
    if !null
        .metadata()
        .is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == null_rdev)
    {
        return;
    }
    for fd in swapped {
        let _ = nix::unistd::dup2(null.as_raw_fd(), fd);
    }
}

impl Executor for ShadowExecutor {
    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        writable_dev_null();
        if !self.no_new_keyring && !denies_keyctl(spec) {
            join_new_session_keyring()?;
        }
        if let Some(filter) = &self.exec_seccomp {
            // First, as libcontainer does for an init: the rest may not be able to undo it.
            install_filter("the container's seccomp filter", filter)?;
        }
        let annotations = self.annotations.as_ref().or(spec.annotations().as_ref());
        if let Some(value) = annotations.and_then(|a| a.get(shadow_profile::ENV_DENY_ANNOTATION)) {
            // A profile's environment rule, also over what an exec brings along. Names are
            // compared as bytes would be: one that is not UTF-8 matches no pattern, but no
            // profile pattern names such a variable either.
            let rule: shadow_profile::EnvDeny = serde_json::from_str(value)
                .map_err(|e| ExecutorError::Other(format!("environment rule: {e}")))?;
            for (k, _) in std::env::vars_os() {
                if k.to_str().is_some_and(|k| rule.denies(k)) {
                    std::env::remove_var(&k);
                }
            }
        }
        if let Some(value) = annotations.and_then(|a| a.get(shadow_landlock::ANNOTATION)) {
            let policy = shadow_landlock::Policy::from_json(value)
                .map_err(|e| ExecutorError::Other(e.to_string()))?;
            // Before the init shim forks: pid 1 and the payload share one Landlock domain, so
            // the shim can still reap and signal it under signal scoping.
            shadow_landlock::enforce(&policy).map_err(|e| {
                eprintln!("shadow-runtime: {e}");
                ExecutorError::Other(e.to_string())
            })?;
        }
        // A second seccomp filter (an agent profile's deny groups on an engine container),
        // stacked on the spec's own: last, so nothing the runtime still does here is denied.
        // Needs no-new-privileges (checked at create); fails closed.
        if let Some(value) =
            annotations.and_then(|a| a.get(shadow_profile::seccomp::STACKED_ANNOTATION))
        {
            let filter: oci_spec::runtime::LinuxSeccomp = serde_json::from_str(value)
                .map_err(|e| ExecutorError::Other(format!("stacked seccomp filter: {e}")))?;
            install_filter("stacked seccomp filter", &filter)?;
        }
        if self.init_shim {
            let spec = spec.clone();
            crate::init_shim::run(move || {
                let result = exec_payload(&spec);
                match result {
                    Ok(()) => 0,
                    Err(e) => {
                        eprintln!("shadow: cannot run the command: {e}");
                        127
                    }
                }
            });
        }
        exec_payload(spec)
    }

    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        DefaultExecutor {}.validate(spec)
    }
}

/// Whether the spec's seccomp filter (already loaded: libcontainer applies it before the
/// executor runs, early or, with `noNewPrivileges`, just before) denies `keyctl`: then joining a keyring would only
/// be refused (and, under exec audit, recorded as the runtime's own denial), and the payload
/// cannot reach any keyring anyway.
fn denies_keyctl(spec: &Spec) -> bool {
    spec.linux()
        .as_ref()
        .and_then(|l| l.seccomp().as_ref())
        .and_then(|s| s.syscalls().as_ref())
        .is_some_and(|rules| {
            rules.iter().any(|r| {
                r.names().iter().any(|n| n == "keyctl")
                    && r.args().as_ref().is_none_or(|a| a.is_empty())
                    && r.action() != oci_spec::runtime::LinuxSeccompAction::ScmpActAllow
            })
        })
}

/// Exec the payload: `process.args[0]` found through `PATH` (of the environment libcontainer
/// has just set up), argv unchanged.
///
/// Why not libcontainer's `execvp`: it tries `execve` in each `PATH` directory until one
/// works, and with exec audit (seccomp user notification on execve) every failed try is a
/// round trip to the supervisor and a misleading record. We look first, then exec once.
fn exec_payload(spec: &Spec) -> Result<(), ExecutorError> {
    let args = spec
        .process()
        .as_ref()
        .and_then(|p| p.args().as_ref())
        .filter(|a| !a.is_empty())
        .ok_or(ExecutorError::InvalidArg)?;
    let argv: Vec<std::ffi::CString> = args
        .iter()
        .map(|s| std::ffi::CString::new(s.as_bytes()).map_err(|_| ExecutorError::InvalidArg))
        .collect::<Result<_, _>>()?;
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let program = resolve_in_path(&args[0], &path, &|p| {
        nix::unistd::access(p, nix::unistd::AccessFlags::X_OK).is_ok()
            && std::fs::metadata(p).is_ok_and(|m| m.is_file())
    })
    .ok_or_else(|| ExecutorError::Execution(format!("{}: command not found", args[0]).into()))?;
    let c = std::ffi::CString::new(program.into_os_string().into_encoded_bytes())
        .map_err(|_| ExecutorError::InvalidArg)?;
    let err = nix::unistd::execv(&c, &argv).unwrap_err();
    Err(ExecutorError::Execution(
        format!("{}: {}", args[0], err.desc()).into(),
    ))
}

/// The file `execvp` would run for `cmd`: itself when it has a `/`, else the first executable
/// `DIR/cmd` along `path` (an empty entry is the current directory).
fn resolve_in_path(
    cmd: &str,
    path: &str,
    executable: &dyn Fn(&std::path::Path) -> bool,
) -> Option<std::path::PathBuf> {
    if cmd.contains('/') {
        return Some(cmd.into());
    }
    path.split(':')
        .map(|d| std::path::Path::new(if d.is_empty() { "." } else { d }).join(cmd))
        .find(|p| executable(p))
}

fn join_new_session_keyring() -> Result<(), ExecutorError> {
    const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;
    // SAFETY: keyctl(JOIN_SESSION_KEYRING, NULL) creates and joins an anonymous keyring; the NULL
    // name pointer is allowed and no memory of ours is written.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<libc::c_char>(),
        )
    };
    if rc >= 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        // No keyring support in the kernel, or keyctl denied by the container's own seccomp
        // profile (Docker's default denies it): in both cases the payload cannot reach any
        // keyring either, so there is nothing left to isolate.
        Some(libc::ENOSYS) | Some(libc::EPERM) | Some(libc::EACCES) => Ok(()),
        _ => Err(ExecutorError::Other(format!(
            "failed to create a new session keyring: {err}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::resolve_in_path;
    use std::path::{Path, PathBuf};

    #[test]
    fn path_lookup_is_execvp_s() {
        let has = |p: &Path| p == Path::new("/usr/bin/ls") || p == Path::new("./x");
        assert_eq!(
            resolve_in_path("ls", "/usr/local/bin:/usr/bin:/bin", &has),
            Some(PathBuf::from("/usr/bin/ls"))
        );
        assert_eq!(
            resolve_in_path("x", "/a::/b", &has),
            Some(PathBuf::from("./x"))
        );
        assert_eq!(resolve_in_path("nope", "/usr/bin", &has), None);
        assert_eq!(
            resolve_in_path("./rel/p", "/usr/bin", &has),
            Some(PathBuf::from("./rel/p"))
        );
    }
}
