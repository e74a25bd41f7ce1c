//! `create`: set up a container and leave its init process waiting for `start`.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use libcontainer::container::builder::ContainerBuilder;
use libcontainer::container::Container;
use libcontainer::syscall::syscall::SyscallType;

use crate::error::{Error, ErrorKind, Result};
use crate::executor::ShadowExecutor;
use crate::lock::ContainerLock;
use crate::{container, id, prepare, root, spec_load, Globals};

/// Options of `create` (and the create half of `run`).
#[derive(Debug, Clone, Default)]
pub struct CreateOptions {
    /// Container id.
    pub id: String,
    /// Bundle directory (relative to the current directory if relative).
    pub bundle: PathBuf,
    /// Where to write the init pid (atomically) once the container exists.
    pub pid_file: Option<PathBuf>,
    /// Unix socket that receives the pty master when `process.terminal` is set.
    pub console_socket: Option<PathBuf>,
    /// Use chroot-like setup instead of pivot_root (runc's `--no-pivot`).
    pub no_pivot: bool,
    /// Do not create a new session keyring.
    pub no_new_keyring: bool,
    /// Number of extra fds (from 3 up) passed to the container.
    pub preserve_fds: i32,
    /// Run a minimal init as pid 1 with the process as its child (see `init_shim`).
    pub init_shim: bool,
    /// The spec to run instead of `<bundle>/config.json` (which is still the recorded bundle):
    /// a caller that rewrites the spec (shadow capture) passes the result here. It is validated
    /// like a loaded one and always written to the effective bundle, so the spec that ran stays
    /// inspectable.
    pub spec: Option<oci_spec::runtime::Spec>,
}

/// Create the container. On any failure nothing is left behind: no state directory, no
/// effective bundle, no cgroup, no process.
pub fn create(g: &Globals, o: &CreateOptions) -> Result<Container> {
    create_with(g, o, true)
}

/// As [`create`]; `detached` = false lets a foreground `run` share our stdio.
pub(crate) fn create_with(g: &Globals, o: &CreateOptions, detached: bool) -> Result<Container> {
    id::validate(&o.id)?;
    let root = root::prepare(&g.root)?;
    // Resolve every path now: libcontainer's notify-socket setup changes the process-wide current
    // directory while it works, after which relative paths would point elsewhere.
    let bundle = root::absolute(&o.bundle)?;
    let pid_file = root::absolute_opt(o.pid_file.as_deref())?;
    let console = root::absolute_opt(o.console_socket.as_deref())?;
    if let Some(c) = &console {
        check_console_socket(c)?;
    }
    if o.preserve_fds < 0 {
        return Err(Error::invalid("--preserve-fds must not be negative"));
    }

    let config_path = bundle.join("config.json");
    let rewritten = o.spec.is_some();
    let spec = match &o.spec {
        Some(s) => s.clone(),
        None => spec_load::load(&bundle)?,
    };
    let rootfs = spec_load::validate(&spec, &bundle, &config_path)?;
    let terminal = spec
        .process()
        .as_ref()
        .and_then(|p| p.terminal())
        .unwrap_or(false);
    if terminal && detached && console.is_none() {
        return Err(Error::invalid(
            "cannot allocate a tty for a detached container without --console-socket",
        ));
    }
    if !terminal && console.is_some() {
        return Err(Error::invalid(
            "--console-socket given but process.terminal is false in the spec",
        ));
    }

    let _lock = ContainerLock::acquire(&root, &o.id)?;
    let cdir = container::dir(&root, &o.id);
    if cdir.exists() {
        return Err(Error::new(
            ErrorKind::AlreadyExists,
            format!("container with id \"{}\" already exists", o.id),
        ));
    }

    let is_root = nix::unistd::geteuid().is_root();
    let rootless = crate::net::rootless();
    let (mut eff, changed) =
        prepare::effective_spec(spec, &rootfs, &o.id, g.systemd_cgroup, is_root, rootless);
    let mut changed = changed || rewritten;
    // Hooks are run through a wrapper that gives them the right state (the user's bundle,
    // prestart's status), names the one that fails, and makes poststart and poststop failures
    // warnings (see hook_state).
    let crumb = prepare::effective_bundle_dir(&root, &o.id).join("hook");
    if let Some(mut hooks) = eff.hooks().clone() {
        if crate::hook_state::wrap_hooks(&mut hooks, &bundle, &crumb) {
            eff.set_hooks(Some(hooks));
            changed = true;
        }
    }
    // HOME is resolved here, never by libcontainer through NSS inside the container (see home).
    let mut home_added = false;
    if let Some(p) = eff.process_mut() {
        if crate::home::ensure(p, &rootfs, false) {
            home_added = true;
            changed = true;
        }
    }
    let eff_dir = prepare::effective_bundle_dir(&root, &o.id);
    let lc_bundle = if changed {
        // The effective bundle lives elsewhere: its rootfs must be absolute.
        if let Some(r) = eff.root_mut() {
            r.set_path(rootfs.clone());
        }
        prepare::write_bundle(&eff_dir, &eff)?;
        if home_added {
            // exec of another user must not inherit the HOME the runtime chose for this one.
            prepare::write_atomic(&eff_dir.join(crate::home::ADDED_MARKER), b"")?;
        }
        eff_dir.clone()
    } else {
        bundle.clone()
    };

    // Rootless on a v1/hybrid host (rootless Podman): a read-only cgroup2 view, or a refusal
    // of limits that cannot be enforced there.
    crate::rootless_cgroups::prepare(&eff)?;
    let cgroups_path = eff.linux().as_ref().and_then(|l| l.cgroups_path().clone());
    let result = build(g, o, &root, &lc_bundle, console.as_deref(), detached).and_then(|mut c| {
        if changed {
            // Report the user's bundle, not ours, in `state` and to poststop hooks.
            c.state.bundle = bundle.clone();
            c.save()
                .map_err(|e| Error::from_libcontainer("save state", &e))?;
        }
        crate::cgroups::apply_disable_oom_killer(&c, &eff)?;
        // libcontainer mounts v1 cgroup hierarchies read-write whatever the spec says (see
        // cgroup_mount). Rootless callers cannot enter the container's mount namespace from
        // here; there the hierarchies' files belong to the host's root and stay unwritable.
        if is_root {
            if let Some(pid) = c.pid() {
                crate::cgroup_mount::enforce(pid.as_raw(), &eff)?;
            }
        }
        if !rootless && crate::net::wants_new_netns(&eff) {
            if let Some(pid) = c.pid() {
                crate::net::loopback_up(pid.as_raw())?;
            }
        }
        if let Some(pf) = &pid_file {
            let pid = c.pid().map(|p| p.as_raw()).unwrap_or_default();
            prepare::write_atomic(pf, pid.to_string().as_bytes())?;
        }
        Ok(c)
    });
    match result {
        Ok(c) => {
            let _ = std::fs::remove_file(&crumb);
            Ok(c)
        }
        Err(e) => {
            // libcontainer says only "hook command exited with non-zero exit code: N".
            let e = if e.message().contains("hook") {
                // libcontainer reports an init's failure as "exec process failed …".
                let in_init = e.message().contains("exec process failed");
                match crate::hook_state::failed_hook(&crumb, in_init) {
                    Some(h) => e.context(h),
                    None => e,
                }
            } else {
                e
            };
            cleanup_failed(&root, &o.id, cgroups_path.as_deref(), g.systemd_cgroup);
            Err(e)
        }
    }
}

fn build(
    g: &Globals,
    o: &CreateOptions,
    root: &Path,
    bundle: &Path,
    console: Option<&Path>,
    detached: bool,
) -> Result<Container> {
    let executor = ShadowExecutor {
        no_new_keyring: o.no_new_keyring,
        init_shim: o.init_shim,
        annotations: None,
        exec_seccomp: None,
    };
    ContainerBuilder::new(o.id.clone(), SyscallType::default())
        .with_executor(executor)
        .with_root_path(root)
        .map_err(|e| Error::from_libcontainer("root", &e))?
        .with_console_socket(console)
        .with_preserved_fds(o.preserve_fds)
        .as_init(bundle)
        .with_systemd(g.systemd_cgroup)
        .with_detach(detached || console.is_some())
        .with_no_pivot(o.no_pivot)
        .build()
        .map_err(|e| Error::from_libcontainer("create container", &e))
}

fn check_console_socket(p: &Path) -> Result<()> {
    match std::fs::metadata(p) {
        Ok(m) if m.file_type().is_socket() => Ok(()),
        Ok(_) => Err(Error::invalid(format!(
            "console socket {} is not a socket",
            p.display()
        ))),
        Err(_) => Err(Error::invalid(format!(
            "console socket {} does not exist",
            p.display()
        ))),
    }
}

/// Undo a failed create: kill whatever was started, remove cgroup, state and effective bundle.
fn cleanup_failed(root: &Path, id: &str, cgroups_path: Option<&Path>, systemd: bool) {
    let cdir = container::dir(root, id);
    if let Ok(mut c) = Container::load(cdir.clone()) {
        // Kill the init directly too: where no cgroup could be created (rootless), delete's
        // cgroup-based kill finds nothing and the init would wait for `start` forever.
        if let Some(pid) = c.pid() {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
        let _ = c.delete(true);
    }
    if let Some(cg) = cgroups_path {
        crate::cgroups::remove(cg, id, systemd);
    }
    let _ = std::fs::remove_dir_all(&cdir);
    let _ = std::fs::remove_dir_all(prepare::effective_bundle_dir(root, id));
    let _ = std::fs::remove_file(root.join(".locks").join(id));
}
