//! The command line, flag for flag as runc's (what Docker, containerd and Podman send).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use shadow_runtime_core as core;

#[derive(Debug, Parser)]
#[command(
    name = "shadow-runtime",
    about = "A runc-compatible OCI runtime built on youki's libcontainer",
    disable_version_flag = true
)]
pub struct Cli {
    /// Root directory for container state.
    #[arg(long, global = true)]
    pub root: Option<PathBuf>,
    /// Log file (default: stderr).
    #[arg(long, global = true)]
    pub log: Option<PathBuf>,
    /// Log format: text or json.
    #[arg(long = "log-format", default_value = "text", global = true)]
    pub log_format: String,
    /// Debug logging.
    #[arg(long, global = true)]
    pub debug: bool,
    /// Use the systemd cgroup driver.
    #[arg(long = "systemd-cgroup", global = true)]
    pub systemd_cgroup: bool,
    /// Rootless mode: true, false or auto (before the command: `spec --rootless` is the spec's).
    #[arg(long, default_value = "auto")]
    pub rootless: String,
    /// Accepted for runc compatibility (checkpointing is not supported).
    #[arg(long, global = true, hide = true)]
    pub criu: Option<String>,
    /// Print the version.
    #[arg(short = 'v', long)]
    pub version: bool,
    /// shadow capture: the container path whose bind mount becomes a shadow session's overlay
    /// (as the run.shadow.capture annotation; for engines without annotations, e.g. Docker's
    /// daemon.json `runtimeArgs`).
    #[arg(long = "shadow-capture", global = true, value_name = "PATH")]
    pub shadow_capture: Option<String>,
    /// shadow capture: the session store (default: the store of the user the runtime runs as).
    #[arg(long = "shadow-store", global = true, value_name = "DIR")]
    pub shadow_store: Option<PathBuf>,
    /// shadow capture: an agent profile to apply (refused: not supported for engine containers
    /// yet).
    #[arg(long = "shadow-profile", global = true, value_name = "NAME")]
    pub shadow_profile: Option<String>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

impl Cli {
    pub fn globals(&self) -> core::Result<core::Globals> {
        let rootless = match self.rootless.as_str() {
            "auto" => core::Rootless::Auto,
            "true" => core::Rootless::True,
            "false" => core::Rootless::False,
            o => {
                return Err(core::Error::invalid(format!(
                    "invalid --rootless {o:?} (true, false or auto)"
                )))
            }
        };
        Ok(core::Globals {
            root: self.root.clone().unwrap_or_else(core::root::default_root),
            systemd_cgroup: self.systemd_cgroup,
            rootless,
        })
    }
}

impl Cli {
    /// The capture flags.
    pub fn capture_flags(&self) -> shadow_capture::Flags {
        shadow_capture::Flags {
            capture: self.shadow_capture.clone(),
            store: self.shadow_store.clone(),
            profile: self.shadow_profile.clone(),
        }
    }
}

/// `--version` text: runc-style lines.
pub fn version_text() -> String {
    format!(
        "shadow-runtime version {}\nspec: {}\nlibcontainer: {}\n",
        env!("CARGO_PKG_VERSION"),
        oci_spec_version(),
        core::LIBCONTAINER_VERSION
    )
}

fn oci_spec_version() -> &'static str {
    "1.2.1"
}

#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum Format {
    #[default]
    Table,
    Json,
}

#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Create a container (its process waits for `start`).
    Create(CreateArgs),
    /// Start a created container.
    Start { id: String },
    /// Create and start a container.
    Run(RunArgs),
    /// Print a container's state as JSON.
    State { id: String },
    /// Send a signal (default SIGTERM) to a container's init (or all its processes).
    Kill {
        #[arg(short, long)]
        all: bool,
        id: String,
        #[arg(default_value = "SIGTERM")]
        signal: String,
    },
    /// Delete a container.
    Delete {
        #[arg(short, long)]
        force: bool,
        id: String,
    },
    /// Pause all processes of a container.
    Pause { id: String },
    /// Resume a paused container.
    Resume { id: String },
    /// Run a process in a running container.
    Exec(ExecArgs),
    /// List a container's processes.
    Ps {
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        format: Format,
        id: String,
        /// Arguments for ps(1) (default -ef).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        ps_args: Vec<String>,
    },
    /// List containers.
    List {
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        format: Format,
        #[arg(short, long)]
        quiet: bool,
    },
    /// Print container statistics as JSON lines.
    Events {
        /// Print one statistics event and exit.
        #[arg(long)]
        stats: bool,
        /// Interval between events (Go duration, e.g. 5s).
        #[arg(long, default_value = "5s")]
        interval: String,
        id: String,
    },
    /// Update a container's resource limits.
    Update(UpdateArgs),
    /// Print the runtime's features as JSON.
    Features,
    /// Write a starter config.json.
    Spec {
        #[arg(short, long, default_value = ".")]
        bundle: PathBuf,
        /// Generate a spec for a rootless container (user namespace, no cgroup limits).
        #[arg(long = "rootless", id = "spec_rootless")]
        rootless: bool,
    },
}

impl Command {
    /// Whether the command puts processes into a container (and so needs the sealed binary).
    pub fn enters_container(&self) -> bool {
        matches!(
            self,
            Command::Create(_) | Command::Run(_) | Command::Exec(_)
        )
    }
}

#[derive(Debug, Clone, Args)]
pub struct CreateArgs {
    #[arg(short, long, default_value = ".")]
    pub bundle: PathBuf,
    #[arg(long = "console-socket")]
    pub console_socket: Option<PathBuf>,
    #[arg(long = "pid-file")]
    pub pid_file: Option<PathBuf>,
    #[arg(long = "no-pivot")]
    pub no_pivot: bool,
    #[arg(long = "no-new-keyring")]
    pub no_new_keyring: bool,
    #[arg(long = "preserve-fds", default_value_t = 0)]
    pub preserve_fds: i32,
    pub id: String,
}

impl CreateArgs {
    pub fn options(&self) -> core::create::CreateOptions {
        core::create::CreateOptions {
            id: self.id.clone(),
            bundle: self.bundle.clone(),
            pid_file: self.pid_file.clone(),
            console_socket: self.console_socket.clone(),
            no_pivot: self.no_pivot,
            no_new_keyring: self.no_new_keyring,
            preserve_fds: self.preserve_fds,
            init_shim: false,
            spec: None,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub create: CreateArgs,
    #[arg(short, long)]
    pub detach: bool,
    /// Keep the container after it exits.
    #[arg(long)]
    pub keep: bool,
    /// Accepted for runc compatibility.
    #[arg(long = "no-subreaper", hide = true)]
    pub no_subreaper: bool,
}

impl RunArgs {
    pub fn options(&self) -> core::run::RunOptions {
        core::run::RunOptions {
            create: self.create.options(),
            detach: self.detach,
            keep: self.keep,
            timeout: None,
            grace: std::time::Duration::from_secs(10),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct ExecArgs {
    #[arg(long = "console-socket")]
    pub console_socket: Option<PathBuf>,
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    #[arg(short, long)]
    pub env: Vec<String>,
    #[arg(short, long)]
    pub tty: bool,
    #[arg(short, long)]
    pub user: Option<String>,
    #[arg(short = 'g', long = "additional-gids")]
    pub additional_gids: Vec<u32>,
    #[arg(short, long)]
    pub process: Option<PathBuf>,
    #[arg(short, long)]
    pub detach: bool,
    #[arg(long = "pid-file")]
    pub pid_file: Option<PathBuf>,
    #[arg(long = "process-label", hide = true)]
    pub process_label: Option<String>,
    #[arg(long, hide = true)]
    pub apparmor: Option<String>,
    #[arg(long = "no-new-privs")]
    pub no_new_privs: bool,
    #[arg(short, long)]
    pub cap: Vec<String>,
    #[arg(long = "preserve-fds", default_value_t = 0)]
    pub preserve_fds: i32,
    #[arg(long, hide = true)]
    pub cgroup: Option<String>,
    #[arg(long = "ignore-paused", hide = true)]
    pub ignore_paused: bool,
    pub id: String,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

impl ExecArgs {
    pub fn options(&self) -> core::Result<core::exec::ExecOptions> {
        if self.process.is_none() && self.command.is_empty() {
            return Err(core::Error::invalid(
                "exec: no command given (need COMMAND or --process)",
            ));
        }
        Ok(core::exec::ExecOptions {
            id: self.id.clone(),
            process: self.process.clone(),
            args: self.command.clone(),
            detach: self.detach,
            pid_file: self.pid_file.clone(),
            console_socket: self.console_socket.clone(),
            tty: self.tty,
            cwd: self.cwd.clone(),
            env: self.env.clone(),
            user: self
                .user
                .as_deref()
                .map(core::exec::parse_user)
                .transpose()?,
            additional_gids: self.additional_gids.clone(),
            caps: self.cap.clone(),
            no_new_privs: self.no_new_privs,
            preserve_fds: self.preserve_fds,
        })
    }
}

#[derive(Debug, Clone, Args)]
pub struct UpdateArgs {
    /// Resources JSON file, or - for stdin.
    #[arg(short, long)]
    pub resources: Option<String>,
    #[arg(long)]
    pub memory: Option<String>,
    #[arg(long = "memory-swap")]
    pub memory_swap: Option<String>,
    #[arg(long = "pids-limit")]
    pub pids_limit: Option<i64>,
    #[arg(long = "cpu-quota")]
    pub cpu_quota: Option<i64>,
    #[arg(long = "cpu-period")]
    pub cpu_period: Option<u64>,
    #[arg(long = "cpu-share")]
    pub cpu_share: Option<u64>,
    #[arg(long = "cpuset-cpus")]
    pub cpuset_cpus: Option<String>,
    #[arg(long = "cpuset-mems")]
    pub cpuset_mems: Option<String>,
    pub id: String,
}

impl UpdateArgs {
    pub fn flags(&self) -> core::Result<core::update::UpdateFlags> {
        Ok(core::update::UpdateFlags {
            memory: self
                .memory
                .as_deref()
                .map(core::update::parse_size)
                .transpose()?,
            memory_swap: self
                .memory_swap
                .as_deref()
                .map(core::update::parse_size)
                .transpose()?,
            pids_limit: self.pids_limit,
            cpu_quota: self.cpu_quota,
            cpu_period: self.cpu_period,
            cpu_shares: self.cpu_share,
            cpuset_cpus: self.cpuset_cpus.clone(),
            cpuset_mems: self.cpuset_mems.clone(),
        })
    }
}
