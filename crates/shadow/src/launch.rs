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
use crate::{Failure, Outcome};

/// Annotation naming the profile a sandbox runs under.
pub const PROFILE_ANNOTATION: &str = "run.shadow.profile";

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
/// what the sandbox hides, plus the project.
pub fn command_visible(cmd: &str, env: &[String], project: &Path, cwd: &Path) -> bool {
    let visible = |p: &Path| p.starts_with(project) || !HIDDEN_TOP.iter().any(|h| p.starts_with(h));
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if cmd.contains('/') {
        let p = if Path::new(cmd).is_absolute() {
            PathBuf::from(cmd)
        } else {
            cwd.join(cmd)
        };
        return visible(&p) && executable(&p);
    }
    let path = env
        .iter()
        .find_map(|e| e.strip_prefix("PATH="))
        .unwrap_or("/usr/local/bin:/usr/bin:/bin");
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(cmd))
        .any(|p| visible(&p) && executable(&p))
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
    if o.disk.is_some() || profile.resources.disk.is_some() {
        return Err(Failure::new(
            "a disk cap (--disk or the profile's resources.disk) is not supported yet: refusing to run without it",
        ));
    }
    let size = |s: &Option<String>| s.as_deref().and_then(shadow_profile::schema::parse_size);
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

    let (names, set) = split_env(&o.env);
    let host_env: Vec<(String, String)> = std::env::vars().collect();
    let env_plan = crate::policy::env_plan(&profile);
    let mut allow = names.clone();
    allow.extend(env_plan.allow.iter().cloned());
    let mut values = env_plan.set.clone();
    values.extend(set);
    values.push(("HOME".into(), ctx.user.home.display().to_string()));
    // `--env NAME` and the profile's exact names win over its deny patterns.
    let exact: Vec<String> = allow.iter().filter(|a| !a.contains('*')).cloned().collect();
    let host_env: Vec<(String, String)> = host_env
        .into_iter()
        .filter(|(k, _)| !crate::policy::env_denied(&env_plan, k, &exact))
        .collect();
    let env = build_env(&host_env, &default_allowlist_with(&allow), &values);
    let (host_network, net_warning) = crate::policy::network(&profile, o.allow_network);
    if let Some(w) = net_warning {
        eprintln!("shadow: {w}");
    }
    let fs_plan = crate::policy::fs_plan(&profile, &ctx.user.home, &project, &|p| p.exists())?;
    let mut denied = fs_plan.denied.clone();
    denied.extend(crate::policy::project_glob_matches(
        &project,
        &fs_plan.deny_globs,
    )?);
    let landlock = crate::policy::landlock_policy(
        &profile,
        &fs_plan,
        &ctx.user.home,
        &project,
        ctx.store.root(),
        o.best_effort,
    );
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
    if o.rootfs.is_none() && !command_visible(&o.command[0], &env, &project, &cwd) {
        return Err(Failure {
            msg: format!("command not found in the sandbox: {}", o.command[0]),
            code: 127,
        });
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
    })?;
    let id = session.id().to_string();
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
    let input = SandboxInput {
        session_id: id.clone(),
        args: o.command.clone(),
        cwd: Some(cwd),
        project_dir: project.clone(),
        upper_dir: session.upper_dir(),
        work_dir: session.work_dir(),
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
        network: if host_network {
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
        seccomp: shadow_profile::seccomp::build(&profile.seccomp.deny),
        annotations: [
            (shadow_landlock::ANNOTATION.to_string(), landlock.to_json()),
            (PROFILE_ANNOTATION.to_string(), profile.name.clone()),
        ]
        .into_iter()
        .collect(),
    };
    let spec = build_spec(&input).map_err(|e| remove_session(e.into()))?;
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
            "network": if host_network { "host" } else { "none" },
            "limits": limits,
            "timeout_s": timeout,
            "seccomp_deny": profile.seccomp.deny,
            "landlock": landlock,
            "landlock_abi": shadow_landlock::kernel_abi(),
        }),
    );
    let g = rt::Globals {
        root: ctx.runtime_root(),
        ..Default::default()
    };
    let result = rt::run::run_outcome(
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
    );
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
    crate::audit::record(&ctx, &id, "changes", crate::audit::changes_data(&changes));
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
        assert!(command_visible("sh", &env, p, p));
        assert!(!command_visible("no-such-command-xyz", &env, p, p));
        assert!(!command_visible("/tmp/x", &env, p, p));
    }
}
