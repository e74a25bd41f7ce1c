//! `shadow run`: create a session, build its OCI bundle, run the command through the runtime
//! library, then record what it changed.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use shadow_runtime_core as rt;
use shadow_sandbox::env::{build_env, default_allowlist_with};
use shadow_sandbox::hostview;
use shadow_sandbox::session::{NewSession, ProcessRef, SessionState};
use shadow_sandbox::spec::{build_spec, NetworkMode, ResourceLimits, SandboxInput, TmpfsSizes};

use crate::context::{resolve_project, Context};
use crate::policy::Network;
use crate::{Failure, Outcome};

/// The profile the spec was built from (a record: its rules are already in the spec). Not
/// `run.shadow.profile`, which asks shadow-runtime to apply one (see shadow-capture).
pub const PROFILE_ANNOTATION: &str = "run.shadow.profile-applied";

/// Exit status after `--timeout`, as timeout(1).
pub const TIMEOUT_STATUS: i32 = 124;
/// SIGTERM → SIGKILL grace period on timeout.
pub const TIMEOUT_GRACE: Duration = Duration::from_secs(5);

/// Options of `shadow run`.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The command and its arguments.
    pub command: Vec<String>,
    /// Project directory (default: git top level or current directory).
    pub project: Option<PathBuf>,
    /// A prepared root filesystem instead of the host's.
    pub rootfs: Option<PathBuf>,
    /// `NAME` (pass the host's value) or `NAME=VALUE`.
    pub env: Vec<String>,
    /// Give the sandbox the host's network.
    pub allow_network: bool,
    /// Loopback only, whatever the profile says (`--network none`).
    pub no_network: bool,
    /// `--allow-host` rules (added to the profile's hosts).
    pub allow_host: Vec<String>,
    /// Do not record the processes executed inside (`--no-exec-audit`).
    pub no_exec_audit: bool,
    /// Stop after this many seconds (exit status 124).
    pub timeout: Option<u64>,
    /// Memory limit in bytes.
    pub memory: Option<u64>,
    /// Maximum number of tasks.
    pub pids: Option<u64>,
    /// CPUs (fraction).
    pub cpus: Option<f64>,
    /// Cap on the upper layer's size.
    pub disk: Option<u64>,
    /// Print config.json and do nothing.
    pub dry_run: bool,
    /// Keep the bundle in the session after the run.
    pub keep_bundle: bool,
    /// Profile name.
    pub profile: Option<String>,
    /// Print the session summary as JSON on stdout at the end.
    pub json: bool,
    /// Enforce what the kernel can of the profile's Landlock rules, and say what is missing.
    pub best_effort: bool,
}

/// Split `--env` items into names to pass through and values to set.
pub fn split_env(items: &[String]) -> (Vec<String>, Vec<(String, String)>) {
    let mut names = Vec::new();
    let mut set = Vec::new();
    for i in items {
        match i.split_once('=') {
            Some((k, v)) => set.push((k.to_string(), v.to_string())),
            None => names.push(i.clone()),
        }
    }
    (names, set)
}

/// Directories of the host that the sandbox does not see (so a command found there on the host
/// is not found inside).
const HIDDEN_TOP: [&str; 8] = [
    "/home", "/root", "/tmp", "/run", "/mnt", "/media", "/proc", "/dev",
];

/// Find `cmd` as the sandbox will: through `PATH` from `env`, over the host's filesystem minus
/// what the sandbox hides, plus the project. `Err`: why it cannot run there, one phrase (not
/// found; or found, but it or its `#!` interpreter resolves into a hidden directory, as a
/// venv made from a `~/.pyenv` Python does).
pub fn command_runnable(
    cmd: &str,
    env: &[String],
    project: &Path,
    cwd: &Path,
) -> Result<(), String> {
    let visible = |p: &Path| p.starts_with(project) || !HIDDEN_TOP.iter().any(|h| p.starts_with(h));
    let exists = |p: &Path| visible(p) && std::fs::symlink_metadata(p).is_ok();
    let found = if cmd.contains('/') {
        let p = if Path::new(cmd).is_absolute() {
            PathBuf::from(cmd)
        } else {
            cwd.join(cmd)
        };
        Some(p).filter(|p| exists(p))
    } else {
        let path = env
            .iter()
            .find_map(|e| e.strip_prefix("PATH="))
            .unwrap_or("/usr/local/bin:/usr/bin:/bin");
        // The first PATH entry that has it is the one the sandbox runs.
        path.split(':')
            .filter(|d| !d.is_empty())
            .map(|d| Path::new(d).join(cmd))
            .find(|p| exists(p) && executable(p))
    };
    let Some(p) = found else {
        return Err("not found".into());
    };
    runnable(&p, &visible, 0)
}

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether the file at `p` (visible itself) can be executed in the sandbox: its symlinks
/// resolve to something visible and executable, and so does its `#!` interpreter.
fn runnable(p: &Path, visible: &dyn Fn(&Path) -> bool, depth: u8) -> Result<(), String> {
    let real =
        std::fs::canonicalize(p).map_err(|_| format!("{} is a dangling link", p.display()))?;
    if !visible(&real) {
        return Err(format!(
            "{} resolves to {}, which the sandbox hides",
            p.display(),
            real.display()
        ));
    }
    if !executable(&real) {
        return Err(format!("{} is not executable", p.display()));
    }
    let mut head = [0u8; 256];
    let n = std::fs::File::open(&real)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    let Some(line) = head[..n].strip_prefix(b"#!") else {
        return Ok(());
    };
    let line = line.split(|b| *b == b'\n').next().unwrap_or_default();
    let interp = String::from_utf8_lossy(line);
    let Some(interp) = interp
        .split_whitespace()
        .next()
        .filter(|i| i.starts_with('/'))
    else {
        return Ok(());
    };
    let ip = Path::new(interp);
    // The kernel follows one more `#!` level at most as scripts go in practice; stop there.
    if depth > 0 || !visible(ip) {
        return if visible(ip) {
            Ok(())
        } else {
            Err(format!("its interpreter {interp} is hidden in the sandbox"))
        };
    }
    runnable(ip, visible, depth + 1).map_err(|e| format!("its interpreter: {e}"))
}

/// Run `shadow run`.
pub fn run(o: &RunOptions) -> Outcome {
    if o.command.is_empty() {
        return Err(Failure::new(
            "no command given: shadow run [OPTIONS] -- CMD [ARGS…]",
        ));
    }
    let ctx = Context::open()?;
    let project = resolve_project(o.project.as_deref())?;
    let registry = crate::profiles::registry(Some(&project));
    let profile = match o.profile.as_deref() {
        Some(f) if f.ends_with(".toml") => registry.resolve_path(Path::new(f))?,
        Some(n) => registry.resolve(n)?,
        None => registry.resolve("default")?,
    };
    let size = |s: &Option<String>| s.as_deref().and_then(shadow_profile::schema::parse_size);
    let disk_cap = o.disk.or(size(&profile.resources.disk));
    if let Some(cap) = disk_cap {
        if !ctx.user.is_root() {
            return Err(Failure::new(
                "a disk cap (--disk or the profile's resources.disk) needs root: it is a loop-mounted file system, which an unprivileged user cannot mount; refusing to run without it",
            ));
        }
        if cap < shadow_sandbox::disk::MIN_SIZE {
            return Err(Failure::new(format!(
                "--disk {cap}: a disk cap must be at least {} MiB",
                shadow_sandbox::disk::MIN_SIZE >> 20
            )));
        }
    }
    let mut limits = ResourceLimits::for_host(hostview::total_ram_bytes()?);
    if let Some(m) = o.memory.or(size(&profile.resources.memory)) {
        limits.memory_bytes = Some(m);
    }
    if let Some(p) = o.pids.or(profile.resources.pids) {
        limits.pids = Some(p);
    }
    if let Some(c) = o.cpus.or(profile.resources.cpus) {
        limits.cpus = Some(c);
    }
    let timeout = o.timeout.or(profile.resources.timeout);

    let net = crate::policy::network(&profile, o.allow_network, o.no_network, &o.allow_host)?;
    let (names, set) = split_env(&o.env);
    let host_env: Vec<(String, String)> = std::env::vars().collect();
    let env_plan = crate::policy::env_plan(&profile);
    let mut allow = names.clone();
    allow.extend(env_plan.allow.iter().cloned());
    let mut values = env_plan.set.clone();
    values.extend(set);
    values.push(("HOME".into(), ctx.user.home.display().to_string()));
    if let Network::Proxy(allow) = &net {
        let url = format!("http://{}", shadow_netproxy::SANDBOX_ADDR);
        values.extend(shadow_netproxy::proxy_env(&url, allow));
    }
    // `--env NAME` and the profile's exact names win over its deny patterns.
    let exact: Vec<String> = allow.iter().filter(|a| !a.contains('*')).cloned().collect();
    let host_env: Vec<(String, String)> = host_env
        .into_iter()
        .filter(|(k, _)| !crate::policy::env_denied(&env_plan, k, &exact))
        .collect();
    let env = build_env(&host_env, &default_allowlist_with(&allow), &values);
    let fs_plan = crate::policy::fs_plan(&profile, &ctx.user.home, &project, &|p| p.exists())?;
    let mut denied = fs_plan.denied.clone();
    denied.extend(crate::policy::project_glob_matches(
        &project,
        &fs_plan.deny_globs,
    )?);
    let mut landlock = crate::policy::landlock_policy(
        &profile,
        &fs_plan,
        &ctx.user.home,
        &project,
        ctx.store.root(),
        o.best_effort,
    );
    if let (Network::Proxy(_), Some(ports)) = (&net, landlock.tcp_connect.as_mut()) {
        // The proxy is the way out: a profile that limits TCP connects must still reach it.
        ports.push(PROXY_PORT);
    }
    let missing = landlock.missing_on(shadow_landlock::kernel_abi());
    if !missing.is_empty() {
        if o.best_effort {
            eprintln!(
                "shadow: best effort: this kernel's Landlock cannot enforce {}",
                missing.join(", ")
            );
        } else {
            return Err(Failure::new(format!(
                "profile {}: this kernel's Landlock cannot enforce {} (use --best-effort to run without it)",
                profile.name,
                missing.join(", ")
            )));
        }
    }
    let cwd = std::env::current_dir()
        .ok()
        .filter(|c| c.starts_with(&project))
        .unwrap_or_else(|| project.clone());
    if o.rootfs.is_none() {
        if let Err(why) = command_runnable(&o.command[0], &env, &project, &cwd) {
            let msg = if why == "not found" {
                format!("command not found in the sandbox: {}", o.command[0])
            } else {
                format!("command cannot run in the sandbox: {}: {why}", o.command[0])
            };
            return Err(Failure { msg, code: 127 });
        }
    }

    let cgroups = hostview::probe_cgroups(&ctx.user);
    if !cgroups.is_usable() {
        eprintln!(
            "shadow: cgroups are not available to this user; limits fall back to rlimits (pids per user, address space per process)"
        );
    }
    let session = ctx.store.create(&NewSession {
        project: project.clone(),
        command: o.command.clone(),
        profile: profile.name.clone(),
        limits,
        supervisor: Some(ProcessRef::current()?),
        engine: None,
    })?;
    let id = session.id().to_string();
    // `--disk`: the upper layer on a capped file system of its own (root only, checked above).
    let disk = match disk_cap {
        Some(cap) if !o.dry_run => {
            match shadow_sandbox::disk::Disk::create(&session.dir, cap, &session.upper_dir()) {
                Ok(d) => Some(d),
                Err(e) => {
                    let _ = ctx
                        .store
                        .update_meta(&id, |m| m.finish(SessionState::Failed, None));
                    let _ = ctx.store.remove(&id);
                    return Err(Failure::new(format!("--disk: {e}")));
                }
            }
        }
        _ => None,
    };
    let remove_session = |why: Failure| {
        // Finished first: the store refuses to remove a session its (live) supervisor runs.
        let _ = ctx
            .store
            .update_meta(&id, |m| m.finish(SessionState::Failed, None));
        let _ = ctx.store.remove(&id);
        why
    };
    let host = hostview::probe_host_view().map_err(|e| remove_session(e.into()))?;
    let rootfs_dir = match &o.rootfs {
        Some(r) => std::fs::canonicalize(r).map_err(|_| {
            remove_session(Failure::new(format!(
                "rootfs {} does not exist",
                r.display()
            )))
        })?,
        None => {
            shadow_sandbox::prepare_skeleton(&session.rootfs_dir(), &host)
                .map_err(|e| remove_session(e.into()))?;
            session.rootfs_dir()
        }
    };
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    // Rootless: from here on we are root of our own user namespace, and the sandbox maps its
    // root to ours (see rootless.rs).
    let mut sandbox_user = ctx.user.clone();
    if !ctx.user.is_root() && !o.dry_run {
        crate::rootless::enter(ctx.user.uid, ctx.user.gid).map_err(remove_session)?;
        sandbox_user.uid = 0;
        sandbox_user.gid = 0;
    }
    // Exec audit: seccomp user notification on execve/execveat, answered by a supervisor
    // thread here (see the shadow-execaudit crate), declared in the spec like the rest.
    let exec_socket = session.dir.join("exec.sock");
    let mut seccomp = shadow_profile::seccomp::build(&profile.seccomp.deny);
    if !o.no_exec_audit {
        let s = seccomp.get_or_insert_with(shadow_profile::seccomp::allow_default);
        // The same supervisor answers the profile's denials (EPERM) and records them.
        shadow_execaudit::notify_denials(s);
        shadow_execaudit::add_to(s, &exec_socket).map_err(|e| {
            remove_session(Failure::new(format!(
                "exec audit: {e} (use --no-exec-audit)"
            )))
        })?;
    }
    let input = SandboxInput {
        session_id: id.clone(),
        args: o.command.clone(),
        cwd: Some(cwd),
        project_dir: project.clone(),
        upper_dir: disk
            .as_ref()
            .map_or_else(|| session.upper_dir(), |d| d.upper()),
        work_dir: disk
            .as_ref()
            .map_or_else(|| session.work_dir(), |d| d.work()),
        rootfs_dir,
        store_dir: ctx.store.root().to_path_buf(),
        host: if o.rootfs.is_some() {
            Default::default()
        } else {
            host
        },
        host_limits: hostview::probe_host_limits(),
        user: sandbox_user,
        env,
        terminal,
        network: if net == Network::Host {
            NetworkMode::Host
        } else {
            NetworkMode::None
        },
        limits,
        cgroups_usable: cgroups.is_usable(),
        tmpfs: TmpfsSizes::default(),
        extra_ro: fs_plan.extra_ro.clone(),
        extra_rw: vec![],
        denied,
        cgroups_path: cgroups.is_usable().then(|| format!("/shadow/{id}").into()),
        seccomp,
        annotations: [
            (shadow_landlock::ANNOTATION.to_string(), landlock.to_json()),
            (PROFILE_ANNOTATION.to_string(), profile.name.clone()),
        ]
        .into_iter()
        .collect(),
    };
    let mut spec = build_spec(&input).map_err(|e| remove_session(e.into()))?;
    let proxy_socket = session.dir.join("proxy.sock");
    if matches!(net, Network::Proxy(_)) {
        add_listen_hook(&mut spec, &proxy_socket);
    }
    if o.dry_run {
        let _ = remove_session(Failure::new("dry run"));
        // stdout stays one JSON document; the rules, readable, go to stderr.
        eprintln!(
            "# profile {} ({})",
            profile.name,
            profile.sources.join(" <- ")
        );
        for line in landlock.describe() {
            eprintln!("# landlock: {line}");
        }
        if let Network::Proxy(a) = &net {
            eprintln!(
                "# network: proxy on {} allowing {}",
                shadow_netproxy::SANDBOX_ADDR,
                describe_hosts(a)
            );
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&spec).map_err(|e| Failure::new(e.to_string()))?
        );
        return Ok(0);
    }
    session
        .write_config(&spec)
        .map_err(|e| remove_session(e.into()))?;
    std::fs::write(
        session.dir.join(crate::inspect::PROTECTED_FILE),
        serde_json::to_string(&profile.apply.protected).unwrap_or_else(|_| "[]".into()),
    )
    .map_err(|e| remove_session(e.into()))?;

    let started = std::time::Instant::now();
    // The log writer, and the reader of the kernel's Landlock denial records, start before the
    // sandbox so that nothing it does is missed.
    let writer = crate::audit::ExecWriter::start(&ctx, &id).map_err(remove_session)?;
    let landlock_watch = crate::audit::watch_landlock(&id, &writer);
    crate::audit::record(
        &ctx,
        &id,
        "session.start",
        serde_json::json!({
            "project": project,
            "command": o.command,
            "cwd": input.cwd,
            "profile": profile.name,
            "profile_sources": profile.sources,
            "network": network_record(&net),
            "limits": limits,
            "timeout_s": timeout,
            "disk_cap_bytes": disk_cap,
            "seccomp_deny": profile.seccomp.deny,
            "landlock": landlock,
            "landlock_abi": shadow_landlock::kernel_abi(),
            "exec_audit": if o.no_exec_audit {
                serde_json::Value::Bool(false)
            } else {
                "seccomp user notification (execve, execveat)".into()
            },
            // Where kernel denials come from: seccomp's through the same supervisor;
            // Landlock's only exist as kernel audit records.
            "denials": {
                "seccomp": if o.no_exec_audit { "not recorded (--no-exec-audit)" } else { "seccomp user notification" },
                "landlock": match &landlock_watch {
                    Ok(_) => crate::audit::LANDLOCK_SOURCE.to_string(),
                    Err(why) => why.to_string(),
                },
            },
        }),
    );
    let exec_audit = if o.no_exec_audit {
        None
    } else {
        let mut sink = writer.sink();
        // The Landlock reader attributes nested domains by the pids that executed inside.
        let pids = landlock_watch.as_ref().ok().map(|w| w.pid_feed());
        let sink = move |n: shadow_execaudit::Notice| {
            if let (Some(p), shadow_execaudit::Notice::Exec(e)) = (&pids, &n) {
                p.add(e.pid);
            }
            sink(n)
        };
        let supervisor = shadow_execaudit::Listener::bind(&exec_socket)
            .and_then(|l| l.spawn_notices(sink))
            .map_err(|e| remove_session(Failure::new(format!("exec audit: {e}"))))?;
        Some(supervisor)
    };
    let g = rt::Globals {
        root: ctx.runtime_root(),
        ..Default::default()
    };
    let mut proxy: Option<shadow_netproxy::Proxy> = None;
    let mut receiver = match net {
        Network::Proxy(_) => Some(rt::net::FdReceiver::bind(&proxy_socket)?),
        _ => None,
    };
    let mut after_create = |pid: nix::unistd::Pid| -> rt::Result<()> {
        if let Ok(w) = &landlock_watch {
            w.own(pid.as_raw());
        }
        if let (Network::Proxy(allow), Some(r)) = (&net, receiver.take()) {
            proxy = Some(start_proxy(&ctx, &id, r, allow)?);
        }
        Ok(())
    };
    let result = rt::run::run_outcome_with(
        &g,
        &rt::run::RunOptions {
            create: rt::create::CreateOptions {
                id: id.clone(),
                bundle: session.bundle_dir(),
                init_shim: true,
                ..Default::default()
            },
            timeout: timeout.map(Duration::from_secs),
            grace: TIMEOUT_GRACE,
            ..Default::default()
        },
        &mut after_create,
    );
    let proxy_stats = proxy.take().map(|p| p.shutdown());
    // Every process of the sandbox is gone now: the supervisor has seen its last exec.
    let exec_stats = exec_audit.map(|supervisor| supervisor.finish());
    let landlock_stats = landlock_watch.ok().map(|w| w.finish());
    let written = writer.finish();
    let exec_stats = exec_stats.map(|st| {
        serde_json::json!({
            "execs": st.execs,
            "recorded": written.execs,
            "errors": st.errors,
            "first_error": st.first_error,
            "seccomp_denials": crate::audit::denials_of(&written, "seccomp"),
        })
    });
    let landlock_stats = landlock_stats.map(|st| {
        serde_json::json!({
            "denials": crate::audit::denials_of(&written, "landlock"),
            "read_to_end": st.synced,
            "overflows": st.overflows,
            "kernel_lost_records": st.kernel_lost,
            "dropped_unattributed": st.dropped,
            "error": st.error,
        })
    });
    // Before the session is marked finished: if the copy fails, the image stays and the
    // session still looks interrupted, so the next shadow command retries (see reap_interrupted).
    if let Some(d) = disk {
        d.finish(&session.upper_dir())
            .map_err(|e| Failure::new(format!("--disk: {e}")))?;
    }
    let (state, code, err) = match &result {
        Ok(e) if e.timed_out => (SessionState::TimedOut, TIMEOUT_STATUS, None),
        Ok(e) => (SessionState::Exited, e.code, None),
        Err(e) => (SessionState::Failed, 1, Some(e.clone())),
    };
    let session = ctx
        .store
        .update_meta(&id, |m| m.finish(state, Some(code)))?;
    crate::audit::record(
        &ctx,
        &id,
        "session.end",
        serde_json::json!({
            "state": state,
            "exit_status": code,
            "error": err.as_ref().map(|e| e.to_string()),
            "duration_ms": started.elapsed().as_millis() as u64,
            "usage": crate::audit::children_usage(),
            "network": proxy_stats,
            "exec": exec_stats,
            "landlock": landlock_stats,
        }),
    );
    // Record the base the changes were made against (for drift detection at apply time).
    let changes = shadow_changes::scan_with(
        &project,
        &session.upper_dir(),
        &crate::inspect::protected_rules(&session)?,
    )?;
    let base = shadow_changes::record_base(&project, &changes)?;
    base.save(&session.dir.join("base.json"))?;
    crate::audit::record(
        &ctx,
        &id,
        "changes",
        shadow_changes::audit_summary(&changes),
    );
    if !o.keep_bundle {
        let _ = std::fs::remove_file(session.config_path());
    }
    let summary = shadow_changes::report(&changes);
    if o.json {
        let v = serde_json::json!({
            "session": id,
            "project": project,
            "state": state,
            "exit_status": code,
            "changes": summary,
        });
        println!("{v}");
    }
    if let Some(e) = err {
        return Err(Failure::new(format!("session {id}: {e}")));
    }
    if state == SessionState::TimedOut {
        eprintln!(
            "shadow: session {id} timed out after {}s; kept for review",
            timeout.unwrap_or(0)
        );
    }
    let n = changes.changes.iter().filter(|c| !c.is_dir_only()).count();
    if n > 0 {
        eprintln!(
            "shadow: session {id}: {n} path(s) changed; `shadow diff` to look, `shadow apply` to take them"
        );
    }
    Ok(code)
}

/// The proxy's port inside the sandbox.
const PROXY_PORT: u16 = 3128;

fn describe_hosts(a: &shadow_netproxy::Allowlist) -> String {
    if a.rules.is_empty() {
        return "no host".into();
    }
    a.rules
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn network_record(net: &Network) -> serde_json::Value {
    match net {
        Network::None => "none".into(),
        Network::Host => "host".into(),
        Network::Proxy(a) => serde_json::json!({
            "proxy": shadow_netproxy::SANDBOX_ADDR,
            "hosts": a.rules.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
        }),
    }
}

/// The sandbox's proxy listener is made by a `createContainer` hook inside its network
/// namespace and sent to us over `socket` (see `rt::net::listen_hook_spec`); it shows in the
/// config.json like everything else.
fn add_listen_hook(spec: &mut oci_spec::runtime::Spec, socket: &Path) {
    let mut hooks = spec.hooks().clone().unwrap_or_default();
    let mut cc = hooks.create_container().clone().unwrap_or_default();
    cc.push(rt::net::listen_hook_spec(
        socket,
        shadow_netproxy::SANDBOX_ADDR,
    ));
    hooks.set_create_container(Some(cc));
    spec.set_hooks(Some(hooks));
}

/// Serve the listener the hook made inside the sandbox's network namespace from here,
/// outside. Every decision goes to the session's audit log.
fn start_proxy(
    ctx: &Context,
    id: &str,
    receiver: rt::net::FdReceiver,
    allow: &shadow_netproxy::Allowlist,
) -> rt::Result<shadow_netproxy::Proxy> {
    let addr = shadow_netproxy::SANDBOX_ADDR
        .parse()
        .map_err(|_| rt::Error::runtime("bad proxy address"))?;
    let listener = receiver.take(addr)?;
    let log = crate::audit::log_path(ctx, id);
    let session = id.to_string();
    let warned = std::sync::atomic::AtomicBool::new(false);
    shadow_netproxy::Proxy::spawn(
        listener,
        allow.clone(),
        shadow_netproxy::Options::default(),
        move |e| {
            let data = serde_json::to_value(&e).unwrap_or_default();
            if let Err(err) = shadow_audit::append(&log, &session, "net", data) {
                if !warned.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    eprintln!("shadow: audit log of session {session}: {err}");
                }
            }
        },
    )
    .map_err(|e| rt::Error::io("start the network proxy", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_items_split() {
        let (n, s) = split_env(&["FOO".into(), "A=b=c".into()]);
        assert_eq!(n, vec!["FOO".to_string()]);
        assert_eq!(s, vec![("A".to_string(), "b=c".to_string())]);
    }

    #[test]
    fn command_lookup_hides_home_and_tmp() {
        let env = vec!["PATH=/usr/bin:/bin".to_string()];
        let p = Path::new("/nonexistent-project");
        assert_eq!(command_runnable("sh", &env, p, p), Ok(()));
        assert_eq!(
            command_runnable("no-such-command-xyz", &env, p, p),
            Err("not found".into())
        );
        assert_eq!(
            command_runnable("/tmp/x", &env, p, p),
            Err("not found".into())
        );
    }

    #[test]
    fn a_script_or_link_into_a_hidden_directory_cannot_run() {
        // A venv made from a Python under $HOME: the script is visible, its interpreter is a
        // link into /root (hidden).
        use std::os::unix::fs::{symlink, PermissionsExt};
        let d = tempfile::Builder::new()
            .prefix("shadow-cmd")
            .tempdir_in("/var/tmp")
            .unwrap();
        let bin = d.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        symlink(
            "/root/.pyenv/versions/3.11/bin/python3",
            bin.join("python3"),
        )
        .unwrap();
        let script = bin.join("tool");
        std::fs::write(&script, format!("#!{}/python3\nprint(1)\n", bin.display())).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let env = vec![format!("PATH={}:/usr/bin:/bin", bin.display())];
        let p = Path::new("/nonexistent-project");
        let why = command_runnable("tool", &env, p, p).unwrap_err();
        assert_eq!(
            why,
            format!(
                "its interpreter: {}/python3 is a dangling link",
                bin.display()
            )
        );
        // A link that resolves into /root (existing here) is refused with where it goes.
        symlink("/root", d.path().join("home-link")).unwrap();
        let why = command_runnable(&format!("{}/home-link", d.path().display()), &env, p, p);
        assert!(why.unwrap_err().contains("which the sandbox hides"));
        // A shebang to a visible interpreter runs.
        std::fs::write(&script, "#!/bin/sh\necho\n").unwrap();
        assert_eq!(command_runnable("tool", &env, p, p), Ok(()));
    }
}
