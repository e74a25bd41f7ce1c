//! `shadow apply`, `shadow apply --rollback`, `shadow discard`: the only verbs that change the
//! real project (or throw a session away).

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use shadow_changes::{ApplyOptions, ApplyRequest, BaseRecord, RollbackOptions, Selection};

use crate::context::{resolve_project, Context};
use crate::inspect::changes_of;
use crate::{Failure, Outcome};

/// Options of `shadow apply`.
#[derive(Debug, Clone, Default)]
pub struct ApplyArgs {
    /// Session id.
    pub session: Option<String>,
    /// Apply every change (protected paths excepted) instead of the reviewed selection.
    pub all: bool,
    /// Do not ask.
    pub yes: bool,
    /// Apply despite base drift / escaping symlinks.
    pub force: bool,
    /// Include protected paths.
    pub include_protected: bool,
    /// Only these paths.
    pub paths: Vec<PathBuf>,
    /// Machine-readable report.
    pub json: bool,
}

/// Where `shadow review` saves its decisions.
pub fn selection_path(s: &shadow_sandbox::Session) -> PathBuf {
    s.dir.join("selection.json")
}

/// Ask a yes/no question on the terminal. Without a terminal, refuse (the caller must pass
/// `--yes` to act non-interactively).
pub fn confirm(question: &str) -> Result<bool, Failure> {
    if !std::io::stdin().is_terminal() {
        return Err(Failure::new(format!(
            "{question} — not on a terminal: pass --yes to confirm"
        )));
    }
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes" | "Yes"))
}

/// `shadow apply`.
pub fn apply(a: &ApplyArgs) -> Outcome {
    let ctx = Context::open()?;
    let s = ctx.session(a.session.as_deref())?;
    if s.is_running() {
        return Err(Failure::new(format!(
            "session {} is still running: wait for it to end before applying",
            s.id()
        )));
    }
    let cs = changes_of(&s)?.filter(&a.paths);
    let saved = selection_path(&s);
    let selection = if a.all || !a.paths.is_empty() {
        Selection::accept_all()
    } else if saved.exists() {
        Selection::load(&saved)?
    } else {
        return Err(Failure::new(
            "nothing selected: run `shadow review` first, or pass --all or PATHS",
        ));
    };
    let base_path = s.dir.join("base.json");
    let base = BaseRecord::load(&base_path).map_err(|_| {
        Failure::new(format!(
            "session {} has no base record (it did not finish): nothing can be applied safely",
            s.id()
        ))
    })?;
    let n = cs.changes.iter().filter(|c| !c.is_dir_only()).count();
    if n == 0 {
        eprintln!("shadow: nothing to apply");
        return Ok(0);
    }
    if !a.yes
        && !confirm(&format!(
            "Apply changes of session {} to {}?",
            s.id(),
            s.meta.project.display()
        ))?
    {
        eprintln!("shadow: nothing applied");
        return Ok(1);
    }
    let journal = ctx.journal_dir(&s.meta.project);
    std::fs::create_dir_all(&journal)?;
    let report = shadow_changes::apply(&ApplyRequest {
        project: &s.meta.project,
        lower_view: &s.meta.project,
        upper: &s.upper_dir(),
        changes: &cs,
        selection: Some(&selection),
        base: &base,
        journal_dir: &journal,
        options: ApplyOptions {
            force: a.force,
            include_protected: a.include_protected,
        },
    })?;
    crate::audit::record(
        &ctx,
        s.id(),
        "apply",
        serde_json::json!({
            "journal": report.id,
            "applied": report.applied,
            "skipped_protected": report.skipped_protected,
            "rejected": report.rejected,
            "force": a.force,
        }),
    );
    if a.json {
        let v = serde_json::json!({
            "session": s.id(),
            "journal": report.id,
            "applied": report.applied,
            "skipped_protected": report.skipped_protected,
            "rejected": report.rejected,
        });
        println!("{v}");
    } else {
        for p in &report.applied {
            println!("applied   {}", p.display());
        }
        for p in &report.skipped_protected {
            println!(
                "protected {} (not applied; --include-protected to apply)",
                p.display()
            );
        }
        eprintln!(
            "shadow: applied {} path(s); `shadow apply --rollback` undoes this",
            report.applied.len()
        );
    }
    Ok(0)
}

/// `shadow apply --rollback`: undo the most recent apply to the project.
pub fn rollback(
    project: Option<&std::path::Path>,
    session: Option<&str>,
    force: bool,
    yes: bool,
) -> Outcome {
    let ctx = Context::open()?;
    let project = match session {
        Some(id) => ctx.store.load(id)?.meta.project,
        None => resolve_project(project)?,
    };
    let journal = ctx.journal_dir(&project);
    if shadow_changes::applied_ids(&journal)
        .unwrap_or_default()
        .is_empty()
    {
        return Err(Failure::new(format!(
            "nothing to roll back for {}",
            project.display()
        )));
    }
    if !yes && !confirm(&format!("Undo the last apply to {}?", project.display()))? {
        eprintln!("shadow: nothing rolled back");
        return Ok(1);
    }
    let r = shadow_changes::rollback(&journal, RollbackOptions { force })?;
    if let Some(sid) = crate::audit::session_of_apply(&ctx, &r.id.to_string()) {
        crate::audit::record(
            &ctx,
            &sid,
            "rollback",
            serde_json::json!({"journal": r.id.to_string(), "restored": r.restored}),
        );
    }
    for p in &r.restored {
        println!("restored  {}", p.display());
    }
    eprintln!(
        "shadow: rolled back apply {} ({} path(s))",
        r.id,
        r.restored.len()
    );
    Ok(0)
}

/// `shadow discard [SESSION]`.
pub fn discard(session: Option<&str>) -> Outcome {
    let ctx = Context::open()?;
    let s = ctx.session(session)?;
    let id = s.id().to_string();
    ctx.store.remove(&id)?;
    crate::audit::record(&ctx, &id, "discard", serde_json::json!({}));
    eprintln!("shadow: discarded session {id}");
    Ok(0)
}
