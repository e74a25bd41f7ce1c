//! `shadow sessions`, `shadow show`, `shadow diff`: looking without touching.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use shadow_changes::{ChangeSet, DiffOptions, ProtectedRules, StatOptions};
use shadow_sandbox::session::Session;

use crate::context::Context;
use crate::{Failure, Outcome};

/// Output form of `shadow diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiffFormat {
    /// Unified diff.
    #[default]
    Patch,
    /// `--stat`.
    Stat,
    /// `--name-status`.
    NameStatus,
    /// `--json`.
    Json,
}

/// Options of `shadow diff`.
#[derive(Debug, Clone, Default)]
pub struct DiffArgs {
    /// Session id.
    pub session: Option<String>,
    /// Output form.
    pub format: DiffFormat,
    /// Only these paths (relative to the project, or prefixes).
    pub paths: Vec<PathBuf>,
}

/// File in a session naming the protected-path globs its profile added (fixed at run time, so
/// a later edit of the profile does not change what an old session may apply).
pub const PROTECTED_FILE: &str = "protected.json";

/// The protected-path rules of a session: the built-in ones plus its profile's.
pub fn protected_rules(s: &Session) -> Result<ProtectedRules, Failure> {
    let mut patterns: Vec<String> = shadow_changes::DEFAULT_PATTERNS
        .iter()
        .map(|p| p.to_string())
        .collect();
    if let Ok(text) = std::fs::read_to_string(s.dir.join(PROTECTED_FILE)) {
        let extra: Vec<String> = serde_json::from_str(&text)
            .map_err(|e| Failure::new(format!("session {}: {PROTECTED_FILE}: {e}", s.id())))?;
        patterns.extend(extra);
    }
    Ok(ProtectedRules::new(&patterns)?)
}

/// The change set of a session (scanning only its upper layer).
pub fn changes_of(s: &Session) -> Result<ChangeSet, Failure> {
    s.check_project()?;
    Ok(shadow_changes::scan_with(
        &s.meta.project,
        &s.upper_dir(),
        &protected_rules(s)?,
    )?)
}

/// Colour on a terminal unless NO_COLOR is set.
pub fn use_color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Write `text` to stdout, through a pager when stdout is a terminal.
pub fn page(text: &str) -> std::io::Result<()> {
    if std::io::stdout().is_terminal() && !text.is_empty() {
        let pager = std::env::var("SHADOW_PAGER")
            .or_else(|_| std::env::var("PAGER"))
            .unwrap_or_else(|_| "less".into());
        if !pager.is_empty() && pager != "cat" {
            let mut cmd = Command::new("sh");
            cmd.arg("-c").arg(&pager).stdin(Stdio::piped());
            if std::env::var_os("LESS").is_none() {
                cmd.env("LESS", "FRX");
            }
            if let Ok(mut child) = cmd.spawn() {
                if let Some(mut stdin) = child.stdin.take() {
                    let _ = stdin.write_all(text.as_bytes());
                }
                child.wait()?;
                return Ok(());
            }
        }
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// `shadow diff`.
pub fn diff(a: &DiffArgs) -> Outcome {
    let ctx = Context::open()?;
    let s = ctx.session(a.session.as_deref())?;
    let cs = changes_of(&s)?.filter(&a.paths);
    let color = use_color();
    let text = match a.format {
        DiffFormat::Patch => shadow_changes::render_diff(&cs, &DiffOptions { color })?,
        DiffFormat::Stat => shadow_changes::render_stat(
            &cs,
            &StatOptions {
                width: terminal_width(),
                color,
            },
        ),
        DiffFormat::NameStatus => shadow_changes::render_name_status(&cs),
        DiffFormat::Json => {
            let mut j = shadow_changes::render_json(&cs);
            j.push('\n');
            j
        }
    };
    page(&text)?;
    Ok(0)
}

fn terminal_width() -> usize {
    if !std::io::stdout().is_terminal() {
        return 80;
    }
    // SAFETY: TIOCGWINSZ fills a winsize we own.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_col > 0 {
            return ws.ws_col as usize;
        }
    }
    80
}

/// `shadow sessions [--json]`.
pub fn sessions(json: bool) -> Outcome {
    let ctx = Context::open()?;
    let list = ctx.store.list(None)?;
    if json {
        let metas: Vec<_> = list.iter().map(|s| &s.meta).collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&metas).map_err(|e| Failure::new(e.to_string()))?
        );
        return Ok(0);
    }
    if list.is_empty() {
        println!("no sessions");
        return Ok(0);
    }
    println!(
        "{:<24} {:<9} {:>4}  {:<40} COMMAND",
        "SESSION", "STATE", "EXIT", "PROJECT"
    );
    for s in &list {
        let m = &s.meta;
        let state = if s.is_running() {
            "running".to_string()
        } else {
            format!("{:?}", m.state).to_lowercase()
        };
        println!(
            "{:<24} {:<9} {:>4}  {:<40} {}",
            m.id,
            state,
            m.exit_status
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into()),
            m.project.display(),
            m.command.join(" ")
        );
    }
    Ok(0)
}

/// `shadow show [SESSION] [--json]`.
pub fn show(session: Option<&str>, json: bool) -> Outcome {
    let ctx = Context::open()?;
    let s = ctx.session(session)?;
    let cs = changes_of(&s).ok();
    if json {
        let v = serde_json::json!({
            "session": s.meta,
            "running": s.is_running(),
            "changes": cs.as_ref().map(shadow_changes::report),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| Failure::new(e.to_string()))?
        );
        return Ok(0);
    }
    let m = &s.meta;
    println!("session   {}", m.id);
    println!("project   {}", m.project.display());
    println!("command   {}", m.command.join(" "));
    println!("profile   {}", m.profile);
    println!("started   {}", m.started_at);
    println!("ended     {}", m.ended_at.as_deref().unwrap_or("-"));
    println!(
        "state     {}",
        if s.is_running() {
            "running".into()
        } else {
            format!("{:?}", m.state).to_lowercase()
        }
    );
    println!(
        "exit      {}",
        m.exit_status
            .map(|c| c.to_string())
            .unwrap_or_else(|| "-".into())
    );
    println!("upper     {}", m.upper.display());
    match cs {
        Some(cs) => {
            let n = cs.changes.iter().filter(|c| !c.is_dir_only()).count();
            let p = cs.changes.iter().filter(|c| c.protected).count();
            println!("changes   {n} path(s), {p} protected");
        }
        None => println!("changes   (project no longer exists)"),
    }
    Ok(0)
}
