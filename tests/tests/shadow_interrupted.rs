//! A `shadow run` whose own process is SIGKILLed: the next shadow command stops what is left of
//! the sandbox, removes its runtime state, and keeps the session's changes reviewable.

use std::time::{Duration, Instant};

use shadow_integration_tests::shadow::Project;
use shadow_integration_tests::{alive, processes_mentioning};

#[test]
fn killed_supervisor_is_reaped_and_changes_kept() {
    let p = Project::new("interrupted");
    // A unique sleep length marks the sandbox's process on the host.
    let marker = format!("3{}.5", std::process::id());
    let mut run = p.spawn(&[
        "run",
        "--",
        "sh",
        "-c",
        &format!("echo kept > new.txt; exec sleep {marker}"),
    ]);
    let t0 = Instant::now();
    let sandboxed = loop {
        let found = processes_mentioning(&format!("sleep {marker}"));
        if let Some((pid, _)) = found
            .into_iter()
            .find(|(_, what)| what.starts_with("cmdline=\"sleep"))
        {
            break pid;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "sandbox never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let id = p.session_ids().pop().expect("a session");
    // SIGKILL the supervising shadow process: the sandbox is left behind for now.
    run.child.kill().unwrap();
    let _ = run.child.wait();
    assert!(
        alive(sandboxed),
        "sandbox should outlive its killed supervisor until reaped"
    );
    // Any shadow command reaps it.
    let out = p.ok(&["sessions", "--json"]);
    assert!(
        out.stderr
            .contains(&format!("session {id} was interrupted")),
        "{out}"
    );
    let t1 = Instant::now();
    while alive(sandboxed) {
        assert!(
            t1.elapsed() < Duration::from_secs(10),
            "sandbox process {sandboxed} survived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let show = p.show_json(&id);
    assert_eq!(show["session"]["state"], "failed", "{show}");
    assert!(
        !std::path::Path::new("/run/shadow").join(&id).exists(),
        "runtime state left"
    );
    // The change made before the kill is still there and can be applied.
    let diff = p.ok(&["diff", "--name-status", &id]);
    assert_eq!(diff.stdout, "A\tnew.txt\n", "{diff}");
    p.ok(&["apply", &id, "--all", "--yes"]);
    assert_eq!(p.read("new.txt"), "kept\n");
}
