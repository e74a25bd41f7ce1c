//! `shadow-runtime`: a runc-compatible OCI runtime. This file is only the command line: every
//! command is a few lines over `shadow_runtime_core`.

mod capture;
mod cli;

use std::io::Read;
use std::process::ExitCode;

use clap::Parser;
use shadow_runtime_core as core;

use cli::{Cli, Command, Format};

fn main() -> ExitCode {
    // Started by the runtime as the container's loopback hook (see runtime-core's net module).
    if let Some(code) = shadow_runtime_core::net::hook_main() {
        return ExitCode::from(code as u8);
    }
    // SIGPIPE gets a no-op handler: libcontainer writes the state to every hook's stdin and must
    // see EPIPE (not die) when a hook does not read it; and unlike SIG_IGN, a handler is reset to
    // the default by execve, so container processes do not inherit an ignored SIGPIPE. Our own
    // output then handles EPIPE (`state ID | head`) by stopping quietly.
    // SAFETY: installing a handler that does nothing, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, on_sigpipe as *const () as libc::sighandler_t);
    }
    let cli = Cli::parse();
    if cli.version {
        let _ = emit(&cli::version_text());
        return ExitCode::SUCCESS;
    }
    let Some(cmd) = cli.command.clone() else {
        eprintln!("shadow-runtime: no command given (try --help)");
        return ExitCode::from(2);
    };
    // Commands that put processes into a container first move the runtime into a sealed memfd
    // (CVE-2019-5736); see core::seal.
    if cmd.enters_container() && std::env::var_os("SHADOW_RUNTIME_NO_SEAL").is_none() {
        if let Err(e) = core::seal::ensure_sealed() {
            eprintln!("shadow-runtime: cannot protect the runtime binary (sealed memfd): {e}");
            return ExitCode::from(1);
        }
    }
    let format = match cli.log_format.as_str() {
        "json" => core::logging::LogFormat::Json,
        "text" => core::logging::LogFormat::Text,
        other => {
            eprintln!("shadow-runtime: unknown --log-format {other:?} (text or json)");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = core::logging::init(cli.log.as_deref(), format, cli.debug) {
        eprintln!("shadow-runtime: {e}");
        return ExitCode::from(1);
    }
    let g = match cli.globals() {
        Ok(g) => g,
        Err(e) => return fail(&cli, &e),
    };
    match dispatch(&g, &cli.capture_flags(), cmd) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => fail(&cli, &e),
    }
}

/// Report an error once in the log (containerd/Podman read the last `error` line) and on stderr
/// when the log is a file.
fn fail(cli: &Cli, e: &core::Error) -> ExitCode {
    tracing::error!("{e}");
    if cli.log.is_some() {
        eprintln!("shadow-runtime: {e}");
    }
    ExitCode::from(1)
}

extern "C" fn on_sigpipe(_: libc::c_int) {}

/// Write to stdout; a closed pipe ends the process quietly with status 0 (like `head` closing).
fn emit(text: &str) -> core::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => Err(core::Error::io("write to stdout", e)),
    }
}

fn print_json<T: serde::Serialize>(v: &T) -> core::Result<()> {
    let s = serde_json::to_string_pretty(v).map_err(|e| core::Error::runtime(e.to_string()))?;
    emit(&format!("{s}\n"))
}

fn dispatch(g: &core::Globals, flags: &shadow_capture::Flags, cmd: Command) -> core::Result<i32> {
    match cmd {
        Command::Create(a) => capture::create(g, flags, &a.options()),
        Command::Start { id } => core::lifecycle::start(g, &id).map(|_| 0),
        Command::Run(a) => capture::run(g, flags, &a.options()),
        Command::State { id } => print_json(&core::query::state(g, &id)?).map(|_| 0),
        Command::Kill { all, id, signal } => core::lifecycle::kill(g, &id, &signal, all).map(|_| 0),
        Command::Delete { force, id } => capture::delete(g, &id, force),
        Command::Pause { id } => core::lifecycle::pause(g, &id).map(|_| 0),
        Command::Resume { id } => core::lifecycle::resume(g, &id).map(|_| 0),
        Command::Exec(a) => core::exec::exec(g, &a.options()?),
        Command::Ps {
            format,
            id,
            ps_args,
        } => {
            let pids = core::query::pids(g, &id)?;
            match format {
                Format::Json => print_json(&pids)?,
                Format::Table => emit(&core::query::ps_table(&pids, &ps_args)?)?,
            }
            Ok(0)
        }
        Command::List { format, quiet } => {
            let states = core::query::list(g)?;
            if quiet {
                let ids: String = states.iter().map(|s| format!("{}\n", s.id)).collect();
                emit(&ids)?;
            } else {
                match format {
                    Format::Json => print_json(&states)?,
                    Format::Table => emit(&core::query::list_table(&states))?,
                }
            }
            Ok(0)
        }
        Command::Events {
            stats,
            interval,
            id,
        } => {
            let every = core::events::parse_duration(&interval)?;
            core::events::events(g, &id, every, stats).map(|_| 0)
        }
        Command::Update(a) => {
            let base = match a.resources.as_deref() {
                None => None,
                Some("-") => {
                    let mut buf = Vec::new();
                    std::io::stdin()
                        .read_to_end(&mut buf)
                        .map_err(|e| core::Error::io("read resources from stdin", e))?;
                    Some(core::update::parse_resources(&buf, "stdin")?)
                }
                Some(f) => {
                    let buf =
                        std::fs::read(f).map_err(|e| core::Error::io(format!("read {f}"), e))?;
                    Some(core::update::parse_resources(&buf, f)?)
                }
            };
            let res = core::update::merge(base, &a.flags()?)?;
            core::update::update(g, &a.id, &res).map(|_| 0)
        }
        Command::Features => print_json(&core::features::features()).map(|_| 0),
        Command::Spec { bundle, rootless } => {
            core::spec_default::write(&bundle, rootless).map(|_| 0)
        }
    }
}
