//! The `shadow` command line: parsing only; every verb lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use shadow::{decide, doctor, inspect, launch, review, Outcome};

#[derive(Debug, Parser)]
#[command(
    name = "shadow",
    version,
    about = "Run a command or AI agent against a copy-on-write overlay of your project; review, then apply"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

// Parsed once per process: the size of the largest variant costs nothing worth boxing for.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run CMD in a sandbox whose view of the project is a copy-on-write overlay.
    Run {
        /// Project directory (default: the git top level or the current directory).
        #[arg(long)]
        project: Option<PathBuf>,
        /// A prepared root filesystem instead of the host's (read-only) one.
        #[arg(long)]
        rootfs: Option<PathBuf>,
        /// Pass NAME from the environment, or set NAME=VALUE (repeatable).
        #[arg(long = "env", short = 'e')]
        env: Vec<String>,
        /// Give the sandbox the host's network (default: loopback only).
        #[arg(long = "allow-network", conflicts_with_all = ["allow_host", "network"])]
        allow_network: bool,
        /// Let the sandbox reach HOST[:PORT] through shadow's proxy (repeatable; `*.example.com`
        /// for subdomains, `:*` for any port; default ports 80 and 443). Adds to the profile's
        /// hosts.
        #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
        allow_host: Vec<String>,
        /// `none`: loopback only, whatever the profile says; `host`: the host's network.
        #[arg(long, value_parser = ["none", "host"], conflicts_with = "allow_host")]
        network: Option<String>,
        /// Do not record the processes executed inside (saves one round trip to shadow per
        /// exec; see the README's audit section).
        #[arg(long = "no-exec-audit")]
        no_exec_audit: bool,
        /// Stop the command after SECS (SIGTERM, then SIGKILL); exit status 124.
        #[arg(long)]
        timeout: Option<u64>,
        /// Memory limit (e.g. 2g).
        #[arg(long)]
        memory: Option<String>,
        /// Maximum number of processes and threads.
        #[arg(long)]
        pids: Option<u64>,
        /// CPUs (e.g. 1.5).
        #[arg(long)]
        cpus: Option<f64>,
        /// Cap on what the session's layer may hold (e.g. 1g).
        #[arg(long)]
        disk: Option<String>,
        /// Print the config.json that would be used and exit.
        #[arg(long = "dry-run")]
        dry_run: bool,
        /// Keep the OCI bundle in the session.
        #[arg(long = "keep-bundle")]
        keep_bundle: bool,
        /// Agent profile: a name (`shadow profiles list`) or a .toml file.
        #[arg(long)]
        profile: Option<String>,
        /// Run even when the kernel cannot enforce all of the profile's Landlock rules (says
        /// which are missing).
        #[arg(long = "best-effort")]
        best_effort: bool,
        /// Print a JSON summary on stdout at the end.
        #[arg(long)]
        json: bool,
        /// The command.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
    /// List, show and check agent profiles.
    Profiles {
        #[command(subcommand)]
        cmd: ProfilesCmd,
    },
    /// Show a session's audit log (hash-chained); --verify checks it.
    Log {
        session: Option<String>,
        #[arg(long)]
        json: bool,
        #[arg(long)]
        verify: bool,
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// List sessions.
    Sessions {
        #[arg(long)]
        json: bool,
    },
    /// Show a session.
    Show {
        session: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show what a session changed, as a git-style diff.
    Diff {
        session: Option<String>,
        #[arg(long, group = "fmt")]
        stat: bool,
        #[arg(long = "name-status", group = "fmt")]
        name_status: bool,
        #[arg(long, group = "fmt")]
        json: bool,
        #[arg(last = true)]
        paths: Vec<PathBuf>,
    },
    /// Decide per file and per hunk what to apply.
    Review { session: Option<String> },
    /// Apply a session's selected (or all) changes to the project.
    Apply {
        session: Option<String>,
        #[arg(long)]
        all: bool,
        #[arg(long, short = 'y')]
        yes: bool,
        #[arg(long)]
        force: bool,
        #[arg(long = "include-protected")]
        include_protected: bool,
        /// Undo the most recent apply to the project instead.
        #[arg(long)]
        rollback: bool,
        #[arg(long)]
        json: bool,
        #[arg(last = true)]
        paths: Vec<PathBuf>,
    },
    /// Remove a session's layer and state.
    Discard { session: Option<String> },
    /// Check that this host can run shadow's sandboxes.
    Doctor {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum ProfilesCmd {
    /// The profiles available here (project, user, shipped).
    List {
        #[arg(long)]
        json: bool,
    },
    /// A profile after `extends`.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Check profile files; errors name file, line and column.
    Check {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

fn size(s: Option<String>) -> Result<Option<u64>, shadow::Failure> {
    s.map(|v| {
        shadow_runtime_core::update::parse_size(&v)
            .map_err(|e| shadow::Failure::new(e.to_string()))
            .and_then(|n| {
                u64::try_from(n).map_err(|_| shadow::Failure::new(format!("invalid size {v:?}")))
            })
    })
    .transpose()
}

fn dispatch(cmd: Cmd) -> Outcome {
    match cmd {
        Cmd::Run {
            project,
            rootfs,
            env,
            allow_network,
            allow_host,
            network,
            no_exec_audit,
            timeout,
            memory,
            pids,
            cpus,
            disk,
            dry_run,
            keep_bundle,
            profile,
            best_effort,
            json,
            command,
        } => {
            // The sandbox's processes start as forks of this binary: run from a sealed copy so
            // none of them can ever write to it (CVE-2019-5736, see the runtime's seal module).
            if !dry_run && std::env::var_os("SHADOW_RUNTIME_NO_SEAL").is_none() {
                shadow_runtime_core::seal::ensure_sealed().map_err(|e| {
                    shadow::Failure::new(format!("cannot protect the shadow binary: {e}"))
                })?;
            }
            launch::run(&launch::RunOptions {
                command,
                project,
                rootfs,
                env,
                allow_network: allow_network || network.as_deref() == Some("host"),
                no_network: network.as_deref() == Some("none"),
                allow_host,
                no_exec_audit,
                timeout,
                memory: size(memory)?,
                pids,
                cpus,
                disk: size(disk)?,
                dry_run,
                keep_bundle,
                profile,
                json,
                best_effort,
            })
        }
        Cmd::Profiles { cmd } => match cmd {
            ProfilesCmd::List { json } => shadow::profiles::list(json),
            ProfilesCmd::Show { name, json } => shadow::profiles::show(&name, json),
            ProfilesCmd::Check { files } => shadow::profiles::check(&files),
        },
        Cmd::Log {
            session,
            json,
            verify,
            follow,
        } => shadow::audit::log(&shadow::audit::LogOptions {
            session,
            json,
            verify,
            follow,
        }),
        Cmd::Sessions { json } => inspect::sessions(json),
        Cmd::Show { session, json } => inspect::show(session.as_deref(), json),
        Cmd::Diff {
            session,
            stat,
            name_status,
            json,
            paths,
        } => inspect::diff(&inspect::DiffArgs {
            session,
            format: if stat {
                inspect::DiffFormat::Stat
            } else if name_status {
                inspect::DiffFormat::NameStatus
            } else if json {
                inspect::DiffFormat::Json
            } else {
                inspect::DiffFormat::Patch
            },
            paths,
        }),
        Cmd::Review { session } => review::review(&review::ReviewOptions { session }),
        Cmd::Apply {
            session,
            all,
            yes,
            force,
            include_protected,
            rollback,
            json,
            paths,
        } => {
            if rollback {
                decide::rollback(None, session.as_deref(), force, yes)
            } else {
                decide::apply(&decide::ApplyArgs {
                    session,
                    all,
                    yes,
                    force,
                    include_protected,
                    paths,
                    json,
                })
            }
        }
        Cmd::Discard { session } => decide::discard(session.as_deref()),
        Cmd::Doctor { json } => doctor::doctor(&doctor::DoctorOptions { json }),
    }
}

fn main() -> ExitCode {
    // Started by the runtime as the container's loopback hook (see runtime-core's net module).
    if let Some(code) = shadow_runtime_core::net::hook_main() {
        return ExitCode::from(code as u8);
    }
    // SAFETY: restore SIGPIPE's default before any thread exists, so `shadow diff | head` ends
    // quietly.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(f) => {
            eprintln!("shadow: {}", f.msg);
            ExitCode::from(f.code)
        }
    }
}
