//! Concurrent commands on one container: the lock keeps state.json consistent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shadow_integration_tests::*;

/// Errors a concurrent command may legitimately report (the container changed under it).
const RACE_ERRORS: [&str; 4] = [
    "does not exist",
    "not running",
    "not paused",
    "no such process",
];

#[test]
fn concurrent_kill_state_pause_resume_then_delete() {
    let ctx = Arc::new(Ctx::new("conc", &["sleep", "60"]));
    let id = ctx.id("c");
    ctx.run_detached(&id);
    let pid = ctx.state(&id)["pid"].as_i64().unwrap() as i32;
    let deleted = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for t in 0..8 {
        let ctx = Arc::clone(&ctx);
        let id = id.clone();
        let deleted = Arc::clone(&deleted);
        threads.push(std::thread::spawn(move || {
            let mut problems = Vec::new();
            let mut states = 0;
            let mut after_delete = 0;
            let t0 = Instant::now();
            let mut i = t;
            while after_delete < 3 && t0.elapsed() < Duration::from_secs(20) {
                if deleted.load(Ordering::SeqCst) {
                    after_delete += 1;
                }
                let args: Vec<&str> = match i % 4 {
                    // SIGWINCH: harmless to the container's init (it has no handler).
                    0 => vec!["kill", &id, "WINCH"],
                    1 => vec!["state", &id],
                    2 => vec!["pause", &id],
                    _ => vec!["resume", &id],
                };
                i += 1;
                let o = ctx.rt(&args);
                if o.stderr.contains("panicked") {
                    problems.push(format!("{args:?} panicked: {o}"));
                }
                if o.status.success() {
                    if args[0] == "state" {
                        states += 1;
                        match serde_json::from_str::<serde_json::Value>(&o.stdout) {
                            Ok(v) => {
                                let s = v["status"].as_str().unwrap_or_default();
                                if !["running", "paused", "stopped"].contains(&s) {
                                    problems.push(format!("state status {s:?}: {v}"));
                                }
                            }
                            Err(e) => problems.push(format!("state output not JSON ({e}): {o}")),
                        }
                    }
                } else {
                    let lines = o.stderr.lines().filter(|l| !l.trim().is_empty()).count();
                    if lines != 1 || !RACE_ERRORS.iter().any(|e| o.stderr.contains(e)) {
                        problems.push(format!("{args:?}: unexpected failure: {o}"));
                    }
                }
            }
            (problems, states)
        }));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let del = ctx.rt(&["delete", "--force", &id]);
    deleted.store(true, Ordering::SeqCst);
    let mut problems = Vec::new();
    let mut states = 0;
    for t in threads {
        let (p, s) = t.join().expect("worker panicked");
        problems.extend(p);
        states += s;
    }
    assert!(
        del.status.success(),
        "delete --force during the storm: {del}"
    );
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(states > 0, "no state call succeeded");
    assert!(ctx.rt(&["state", &id]).stderr.contains("does not exist"));
    ctx.assert_clean_pids(&[pid]);
}

#[test]
fn concurrent_creates_of_one_id_exactly_one_wins() {
    let ctx = Arc::new(Ctx::new("concreate", &["sleep", "60"]));
    let id = ctx.id("c");
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let ctx = Arc::clone(&ctx);
            let id = id.clone();
            std::thread::spawn(move || ctx.rt(&["create", &id]))
        })
        .collect();
    let outs: Vec<Out> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let wins = outs.iter().filter(|o| o.status.success()).count();
    assert_eq!(
        wins,
        1,
        "{}",
        outs.iter()
            .map(|o| o.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
    for o in outs.iter().filter(|o| !o.status.success()) {
        assert!(o.stderr.contains("already exists"), "{o}");
    }
    assert_eq!(ctx.status(&id), "created");
    ctx.ok(&["delete", "--force", &id]);
    ctx.assert_clean();
}
