//! `exec`: run another process inside a running container.
//!
//! The process is described as an OCI `process` object: either the `--process FILE` the engine
//! wrote, or one built by [`exec_process`] from the container's own init process plus the
//! command-line overrides (runc's semantics: the init's user, cwd, capabilities and rlimits are
//! the defaults). That object is what libcontainer executes, so the flags map to it exactly and
//! the mapping is unit-tested as data.

use std::path::{Path, PathBuf};

use libcontainer::container::builder::ContainerBuilder;
use libcontainer::container::ContainerStatus;
use libcontainer::syscall::syscall::SyscallType;
use oci_spec::runtime::{Capability, Process};

use crate::error::{Error, ErrorKind, Result};
use crate::executor::ShadowExecutor;
use crate::tty::ConsoleListener;
use crate::{container, foreground, prepare, root, Globals};

/// Options of `exec`.
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    /// Container id.
    pub id: String,
    /// A process.json to run instead of `args`.
    pub process: Option<PathBuf>,
    /// The command and its arguments.
    pub args: Vec<String>,
    /// Return once the process has started.
    pub detach: bool,
    /// Where to write the process's pid.
    pub pid_file: Option<PathBuf>,
    /// Console socket for `-t` with `--detach`.
    pub console_socket: Option<PathBuf>,
    /// Allocate a terminal.
    pub tty: bool,
    /// Working directory inside the container.
    pub cwd: Option<PathBuf>,
    /// Extra `NAME=VALUE` environment entries (override the init's).
    pub env: Vec<String>,
    /// `uid[:gid]`.
    pub user: Option<(u32, Option<u32>)>,
    /// Additional group ids.
    pub additional_gids: Vec<u32>,
    /// Capabilities to add (e.g. `CAP_KILL`).
    pub caps: Vec<String>,
    /// Set no_new_privileges.
    pub no_new_privs: bool,
    /// Extra fds to pass.
    pub preserve_fds: i32,
}

/// Parse `uid[:gid]`.
pub fn parse_user(s: &str) -> Result<(u32, Option<u32>)> {
    let bad = || {
        Error::invalid(format!(
            "invalid --user {s:?}: expected uid[:gid] (numeric)"
        ))
    };
    let (u, g) = match s.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (s, None),
    };
    let uid = u.parse().map_err(|_| bad())?;
    let gid = g.map(|g| g.parse().map_err(|_| bad())).transpose()?;
    Ok((uid, gid))
}

/// Parse `CAP_KILL` / `kill` into a capability.
pub fn parse_cap(name: &str) -> Result<Capability> {
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    };
    serde_json::from_value(serde_json::Value::String(full))
        .map_err(|_| Error::invalid(format!("unknown capability {name:?}")))
}

/// The process to exec: the container's init process with `o`'s overrides applied.
pub fn exec_process(base: &Process, o: &ExecOptions) -> Result<Process> {
    if o.args.is_empty() {
        return Err(Error::invalid(
            "exec: no command given (need args or --process)",
        ));
    }
    let mut p = base.clone();
    p.set_args(Some(o.args.clone()));
    p.set_terminal(Some(o.tty));
    p.set_console_size(None);
    let mut env = base.env().clone().unwrap_or_default();
    for kv in &o.env {
        let key = kv.split_once('=').map_or(kv.as_str(), |(k, _)| k);
        env.retain(|e| e.split_once('=').map_or(e.as_str(), |(k, _)| k) != key);
        env.push(kv.clone());
    }
    p.set_env(Some(env));
    if let Some(cwd) = &o.cwd {
        if !cwd.is_absolute() {
            return Err(Error::invalid(format!(
                "--cwd {} must be an absolute path",
                cwd.display()
            )));
        }
        p.set_cwd(cwd.clone());
    }
    if let Some((uid, gid)) = o.user {
        let mut user = p.user().clone();
        user.set_uid(uid);
        if let Some(g) = gid {
            user.set_gid(g);
        }
        p.set_user(user);
    }
    if !o.additional_gids.is_empty() {
        let mut user = p.user().clone();
        user.set_additional_gids(Some(o.additional_gids.clone()));
        p.set_user(user);
    }
    if o.no_new_privs {
        p.set_no_new_privileges(Some(true));
    }
    if !o.caps.is_empty() {
        let mut caps = p.capabilities().clone().unwrap_or_default();
        for name in &o.caps {
            let cap = parse_cap(name)?;
            let add = |set: &Option<oci_spec::runtime::Capabilities>| {
                let mut s = set.clone().unwrap_or_default();
                s.insert(cap);
                Some(s)
            };
            // runc's --cap adds to every set, so the process really holds the capability.
            let (b, e, pm, i, a) = (
                add(caps.bounding()),
                add(caps.effective()),
                add(caps.permitted()),
                add(caps.inheritable()),
                add(caps.ambient()),
            );
            caps.set_bounding(b)
                .set_effective(e)
                .set_permitted(pm)
                .set_inheritable(i)
                .set_ambient(a);
        }
        p.set_capabilities(Some(caps));
    }
    Ok(p)
}

/// Run the exec. Returns the process's exit status (0 when detached).
pub fn exec(g: &Globals, o: &ExecOptions) -> Result<i32> {
    let root = root::existing(&g.root)?;
    let pid_file = root::absolute_opt(o.pid_file.as_deref())?;
    let console = root::absolute_opt(o.console_socket.as_deref())?;
    let c = container::load_locked(&root, &o.id)?;
    if c.status() != ContainerStatus::Running {
        return Err(Error::new(
            ErrorKind::NotRunning,
            format!(
                "cannot exec in a stopped container: container not running ({})",
                container::status_word(c.status())
            ),
        ));
    }
    let cfg_spec = prepare::spec_as_created(&root, &c)?;
    // The container's seccomp filter, installed by our executor (libcontainer's tenant path
    // drops it). One that notifies a supervisor (exec audit) cannot be installed a second time:
    // nobody would answer the new notify fd, so such an exec is refused.
    let exec_seccomp = cfg_spec.linux().as_ref().and_then(|l| l.seccomp().clone());
    if exec_seccomp.as_ref().is_some_and(|f| {
        f.default_action() == oci_spec::runtime::LinuxSeccompAction::ScmpActNotify
            || f.syscalls()
                .iter()
                .flatten()
                .any(|r| r.action() == oci_spec::runtime::LinuxSeccompAction::ScmpActNotify)
    }) {
        return Err(Error::invalid(format!(
            "cannot exec in container {}: its seccomp filter notifies a supervisor (exec audit), which serves only the container's own processes",
            o.id
        )));
    }
    let process = match &o.process {
        Some(f) => {
            let f = root::absolute(f)?;
            let data =
                std::fs::read(&f).map_err(|e| Error::io(format!("read {}", f.display()), e))?;
            let de = &mut serde_json::Deserializer::from_slice(&data);
            serde_path_to_error::deserialize::<_, Process>(de).map_err(|e| {
                Error::invalid(format!(
                    "{}: field `{}`: {}",
                    f.display(),
                    e.path(),
                    e.inner()
                ))
            })?
        }
        None => {
            let mut base = cfg_spec
                .process()
                .clone()
                .ok_or_else(|| Error::runtime("container spec has no process"))?;
            // A HOME the runtime chose for the init's user is looked up again for this one.
            if prepare::effective_bundle_dir(&root, &o.id)
                .join(crate::home::ADDED_MARKER)
                .exists()
            {
                crate::home::unset(&mut base);
            }
            exec_process(&base, o)?
        }
    };
    // HOME is resolved here, in the container's own view of its root (its mounts included),
    // never by libcontainer through NSS inside the container (see home).
    let mut process = process;
    let pid = c
        .pid()
        .ok_or_else(|| Error::runtime(format!("container {} is running but has no pid", o.id)))?;
    crate::home::ensure(
        &mut process,
        &Path::new("/proc").join(pid.to_string()).join("root"),
        true,
    );
    let terminal = process.terminal().unwrap_or(false);
    if terminal && o.detach && console.is_none() {
        return Err(Error::invalid(
            "cannot allocate a tty for a detached exec without --console-socket",
        ));
    }
    let cdir = container::dir(&root, &o.id);
    let pfile = cdir.join(format!("exec-{}.json", std::process::id()));
    prepare::write_atomic(
        &pfile,
        &serde_json::to_vec(&process)
            .map_err(|e| Error::runtime(format!("encode process: {e}")))?,
    )?;
    let listener = if terminal && console.is_none() {
        let path = root.join(format!(".console-exec-{}.sock", std::process::id()));
        Some(ConsoleListener::bind(&path)?)
    } else {
        None
    };
    let console_path = console
        .clone()
        .or_else(|| listener.as_ref().map(|l| l.path().to_path_buf()));
    if !o.detach {
        foreground::set_subreaper()?;
    }
    // As at create: the exec joins the container's cgroup, which a rootless v1 host does not
    // have (see rootless_cgroups). An exec asks for no limits of its own.
    crate::rootless_cgroups::prepare(&oci_spec::runtime::Spec::default())?;
    let built = ContainerBuilder::new(o.id.clone(), SyscallType::default())
        .with_executor(ShadowExecutor {
            annotations: cfg_spec.annotations().clone(),
            exec_seccomp: exec_seccomp.clone(),
            ..Default::default()
        })
        .with_root_path(&root)
        .map_err(|e| Error::from_libcontainer("root", &e))
        .map(|b| {
            b.with_console_socket(console_path.as_deref())
                .with_preserved_fds(o.preserve_fds)
                .as_tenant()
                .with_detach(o.detach || console_path.is_some())
                .with_process(Some(&pfile))
                .build()
        });
    let _ = std::fs::remove_file(&pfile);
    let pid =
        built?.map_err(|e| Error::from_libcontainer(format!("exec in container {}", o.id), &e))?;
    if let Some(pf) = &pid_file {
        prepare::write_atomic(pf, pid.as_raw().to_string().as_bytes())?;
    }
    if o.detach {
        return Ok(0);
    }
    let attached = listener.as_ref().map(ConsoleListener::attach).transpose()?;
    let set = foreground::block_signals()?;
    let code = foreground::wait(&set, pid, attached.as_ref().map(|a| a.master))?;
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::{ProcessBuilder, UserBuilder};
    use std::path::Path;

    fn base() -> Process {
        ProcessBuilder::default()
            .args(vec!["sh".to_string()])
            .env(vec!["PATH=/bin".to_string(), "A=1".to_string()])
            .cwd("/")
            .user(UserBuilder::default().uid(5u32).gid(6u32).build().unwrap())
            .build()
            .unwrap()
    }

    #[test]
    fn overrides_apply_on_the_init_process() {
        let o = ExecOptions {
            args: vec!["ls".into(), "-l".into()],
            env: vec!["A=2".into(), "B=3".into()],
            cwd: Some("/tmp".into()),
            user: Some((7, None)),
            tty: true,
            ..Default::default()
        };
        let p = exec_process(&base(), &o).unwrap();
        assert_eq!(
            p.args().as_ref().unwrap(),
            &vec!["ls".to_string(), "-l".to_string()]
        );
        assert_eq!(
            p.env().as_ref().unwrap(),
            &vec![
                "PATH=/bin".to_string(),
                "A=2".to_string(),
                "B=3".to_string()
            ]
        );
        assert_eq!(p.cwd(), Path::new("/tmp"));
        assert_eq!(p.user().uid(), 7);
        assert_eq!(p.user().gid(), 6, "gid keeps the init's");
        assert_eq!(p.terminal(), Some(true));
    }

    #[test]
    fn relative_cwd_and_bad_caps_are_refused() {
        let mut o = ExecOptions {
            args: vec!["x".into()],
            cwd: Some("tmp".into()),
            ..Default::default()
        };
        assert!(exec_process(&base(), &o).is_err());
        o.cwd = None;
        o.caps = vec!["CAP_NOPE".into()];
        assert_eq!(
            exec_process(&base(), &o).unwrap_err().to_string(),
            "unknown capability \"CAP_NOPE\""
        );
        o.caps = vec!["kill".into()];
        let p = exec_process(&base(), &o).unwrap();
        assert!(p
            .capabilities()
            .as_ref()
            .unwrap()
            .bounding()
            .as_ref()
            .unwrap()
            .contains(&Capability::Kill));
    }

    #[test]
    fn user_parsing() {
        assert_eq!(parse_user("0").unwrap(), (0, None));
        assert_eq!(parse_user("1000:100").unwrap(), (1000, Some(100)));
        assert!(parse_user("root").is_err());
    }
}
