//! `shadow profiles list | show NAME | check FILE…`.

use std::path::{Path, PathBuf};

use shadow_profile::Registry;

use crate::{Failure, Outcome};

/// The user's config home: `$XDG_CONFIG_HOME` when absolute, else `$HOME/.config`.
pub fn config_home() -> Option<PathBuf> {
    match std::env::var_os("XDG_CONFIG_HOME") {
        Some(x) if Path::new(&x).is_absolute() => Some(PathBuf::from(x)),
        _ => std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")),
    }
}

/// The registry for `project` (None: no project layer).
pub fn registry(project: Option<&Path>) -> Registry {
    Registry::new(project, config_home().as_deref())
}

fn current_project() -> Option<PathBuf> {
    crate::context::resolve_project(None).ok()
}

/// `shadow profiles list [--json]`.
pub fn list(json: bool) -> Outcome {
    let r = registry(current_project().as_deref());
    let rows: Vec<(String, String, String)> = r
        .list()
        .into_iter()
        .map(|(n, s)| {
            let desc = r
                .resolve(&n)
                .map(|p| p.description)
                .unwrap_or_else(|e| format!("error: {e}"));
            let src = s.describe(&n);
            (n, src, desc)
        })
        .collect();
    if json {
        let v: Vec<_> = rows
            .iter()
            .map(|(n, s, d)| serde_json::json!({"name": n, "source": s, "description": d}))
            .collect();
        println!("{}", serde_json::Value::Array(v));
    } else {
        let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(4).max(4);
        println!("{:w$}  {:18}  DESCRIPTION", "NAME", "SOURCE");
        for (n, s, d) in rows {
            let s = if s.starts_with("builtin:") {
                "builtin".to_string()
            } else {
                s
            };
            println!("{n:w$}  {s:18}  {d}");
        }
    }
    Ok(0)
}

/// `shadow profiles show NAME [--json]`: the profile after `extends`.
pub fn show(name: &str, json: bool) -> Outcome {
    let r = registry(current_project().as_deref());
    let p = if name.ends_with(".toml") || name.contains('/') {
        r.resolve_path(Path::new(name))?
    } else {
        r.resolve(name)?
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&p).map_err(|e| Failure::new(e.to_string()))?
        );
    } else {
        print!(
            "# profile {} (from {})\n{}",
            p.name,
            p.sources.join(" <- "),
            toml::to_string(&p).map_err(|e| Failure::new(e.to_string()))?
        );
    }
    Ok(0)
}

/// `shadow profiles check FILE…`: every file parses and resolves; errors name file, line, col.
pub fn check(files: &[PathBuf]) -> Outcome {
    if files.is_empty() {
        return Err(Failure::new("no file given: shadow profiles check FILE…"));
    }
    let r = registry(current_project().as_deref());
    let mut bad = 0;
    for f in files {
        // Host rules are checked here too (the schema keeps them as strings).
        let resolved = r.resolve_path(f).map_err(|e| e.to_string()).and_then(|p| {
            crate::policy::profile_hosts(&p)
                .map(|_| p)
                .map_err(|e| format!("{}: {}", f.display(), e.msg))
        });
        match resolved {
            Ok(p) => println!("{}: ok ({})", f.display(), p.sources.join(" <- ")),
            Err(e) => {
                eprintln!("{e}");
                bad += 1;
            }
        }
    }
    Ok(if bad == 0 { 0 } else { 1 })
}
