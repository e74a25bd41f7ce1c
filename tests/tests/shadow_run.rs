//! `shadow run`: exit status, output passthrough, `--json`, `--dry-run`, missing commands,
//! `--timeout` and resource limits.

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use shadow_integration_tests::shadow::{last_json_line, one_line, pids_with_cmdline, Project};
use shadow_integration_tests::wait_until;

#[test]
fn exit_status_passes_through() {
    let p = Project::new("run-exit");
    let out = p.run("exit 0");
    assert_eq!(out.code(), Some(0), "{out}");
    let out = p.run("exit 3");
    assert_eq!(out.code(), Some(3), "{out}");
    let out = p.sh(&["run", "--", "false"]);
    assert_eq!(out.code(), Some(1), "{out}");
    // Every run is recorded with its exit status.
    let mut codes: Vec<i64> = p
        .sessions_json()
        .iter()
        .map(|m| m["exit_status"].as_i64().unwrap())
        .collect();
    codes.sort();
    assert_eq!(codes, vec![0, 1, 3]);
}

/// `shadow run … >/dev/null` (scripts, CI, benchmarks): the command can still write to its
/// stdout and stderr (they were a read-only /dev/null inside, and `print` failed with EBADF).
#[test]
fn stdout_and_stderr_dev_null_stay_writable() {
    let p = Project::new("run-devnull");
    let null = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .unwrap()
    };
    let mut c = p.cmd(&[
        "run",
        "--",
        "sh",
        "-c",
        "echo out && echo err >&2 && touch wrote",
    ]);
    c.stdout(null()).stderr(null());
    let status = c.status().unwrap();
    assert_eq!(status.code(), Some(0));
    // The write after both echos landed in the session (shadow diff names it).
    let diff = p.ok(&["diff", "--name-status"]);
    assert!(diff.stdout.contains("wrote"), "{diff}");
}

/// The command is killed by SIGKILL from the host: shadow exits 128+9.
#[test]
fn killed_by_signal_from_the_host_is_137() {
    let p = Project::new("run-sigkill");
    let marker = format!("marker-{}", p.name);
    let mut s = p.spawn(&[
        "run",
        "--",
        "sh",
        "-c",
        &format!("echo ready; sleep 30 # {marker}"),
    ]);
    s.wait_stdout("ready", Duration::from_secs(10));
    let mut pids = Vec::new();
    wait_until(
        "the sandboxed sh on the host",
        Duration::from_secs(5),
        || {
            pids = pids_with_cmdline(&marker)
                .into_iter()
                .filter(|&pid| pid != s.pid())
                .collect();
            !pids.is_empty()
        },
    );
    for pid in &pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let out = s.wait(Duration::from_secs(15));
    assert_eq!(out.code(), Some(137), "{out}");
    let m = &p.sessions_json()[0];
    assert_eq!(m["exit_status"], 137, "{m}");
}

#[test]
fn kill_minus_9_of_itself_is_137() {
    let p = Project::new("run-kill9");
    let out = p.run("kill -9 $$; echo survived");
    assert_eq!(out.code(), Some(137), "{out}");
    assert!(!out.stdout.contains("survived"), "{out}");
}

#[test]
fn stdout_stderr_and_stdin_pass_through() {
    let p = Project::new("run-io");
    let out = p.run("echo to-stdout; echo to-stderr >&2; seq 1 100000");
    assert_eq!(out.code(), Some(0), "{out}");
    let mut want = String::from("to-stdout\n");
    for i in 1..=100000 {
        want.push_str(&format!("{i}\n"));
    }
    assert!(
        out.stdout == want,
        "stdout differs (len {} vs {})",
        out.stdout.len(),
        want.len()
    );
    assert!(out.stderr.lines().any(|l| l == "to-stderr"), "{out}");
    assert!(!out.stdout.contains("to-stderr"));

    let mut c = p.cmd(&["run", "--", "sh", "-c", "tr a-z A-Z"]);
    c.stdin(Stdio::piped());
    let mut s = p.spawn_cmd(c);
    s.child
        .stdin
        .take()
        .unwrap()
        .write_all(b"piped input\n")
        .unwrap();
    let out = s.wait(Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{out}");
    assert_eq!(out.stdout, "PIPED INPUT\n");
}

#[test]
fn json_summary_lists_changes() {
    let p = Project::new("run-json");
    let out = p.sh(&[
        "run",
        "--json",
        "--",
        "sh",
        "-c",
        "echo new > added.txt; echo more >> README.md; rm run.sh",
    ]);
    assert_eq!(out.code(), Some(0), "{out}");
    let v: Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {out}"));
    let ids = p.session_ids();
    assert_eq!(ids.len(), 1);
    assert_eq!(v["session"], ids[0].as_str());
    assert_eq!(v["project"], p.dir.to_str().unwrap());
    assert_eq!(v["state"], "exited");
    assert_eq!(v["exit_status"], 0);
    let mut got: Vec<(String, String)> = v["changes"]["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no changes.entries: {v}"))
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_string(),
                e["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("README.md".into(), "modified".into()),
            ("added.txt".into(), "added".into()),
            ("run.sh".into(), "deleted".into()),
        ]
    );
    // Non-zero status is reported as well.
    let out = p.sh(&["run", "--json", "--", "sh", "-c", "exit 5"]);
    assert_eq!(out.code(), Some(5), "{out}");
    let v = last_json_line(&out);
    assert_eq!(v["exit_status"], 5);
    assert_eq!(v["changes"]["entries"].as_array().map(Vec::len), Some(0));
}

#[test]
fn dry_run_prints_the_config_and_creates_nothing() {
    let p = Project::new("run-dry");
    let out = p.sh(&["run", "--dry-run", "--", "sh", "-c", "echo hi > x"]);
    assert_eq!(out.code(), Some(0), "{out}");
    let spec: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("--dry-run did not print JSON ({e}): {out}"));
    assert_eq!(spec["root"]["readonly"], true, "{}", spec["root"]);
    let ns: Vec<&str> = spec["linux"]["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["type"].as_str().unwrap())
        .collect();
    for want in ["user", "mount", "pid", "network", "ipc", "uts"] {
        assert!(ns.contains(&want), "namespace {want} missing: {ns:?}");
    }
    let caps = &spec["process"]["capabilities"];
    for set in [
        "bounding",
        "effective",
        "permitted",
        "inheritable",
        "ambient",
    ] {
        let n = caps[set].as_array().map(Vec::len).unwrap_or(0);
        assert_eq!(n, 0, "capabilities.{set} not empty: {caps}");
    }
    assert_eq!(spec["process"]["noNewPrivileges"], true);
    assert_eq!(
        spec["process"]["args"],
        serde_json::json!(["sh", "-c", "echo hi > x"])
    );
    let project = p.dir.to_str().unwrap();
    let overlay = spec["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["destination"] == project)
        .unwrap_or_else(|| panic!("no mount at {project}: {}", spec["mounts"]));
    assert_eq!(overlay["type"], "overlay", "{overlay}");
    let opts: Vec<&str> = overlay["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    assert!(
        opts.contains(&format!("lowerdir={project}").as_str()),
        "{opts:?}"
    );
    assert!(
        opts.iter()
            .any(|o| o.starts_with(&format!("upperdir={}", p.store.display()))),
        "upper dir not in the store: {opts:?}"
    );
    // Nothing was created or run.
    assert!(p.sessions_json().is_empty());
    assert!(p.store_sessions().is_empty(), "{:?}", p.store_sessions());
    assert!(!p.path("x").exists());
}

#[test]
fn missing_command_is_one_line_127_and_no_session() {
    let p = Project::new("run-missing");
    let out = p.sh(&["run", "--", "no-such-command-xyz", "arg"]);
    assert_eq!(out.code(), Some(127), "{out}");
    assert_eq!(
        one_line(&out),
        "shadow: command not found in the sandbox: no-such-command-xyz"
    );
    assert!(out.stdout.is_empty(), "{out}");
    // A command that exists on the host, but only in a directory the sandbox does not see.
    let tool = p.base().join("host-only-tool");
    std::fs::write(&tool, "#!/bin/sh\necho host\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = p.sh(&["run", "--", tool.to_str().unwrap()]);
    assert_eq!(out.code(), Some(127), "{out}");
    assert_eq!(
        one_line(&out),
        format!(
            "shadow: command not found in the sandbox: {}",
            tool.display()
        )
    );
    // Visible, but its interpreter is a link into a hidden directory (a venv made from a
    // Python under $HOME): said in one line, before any session exists.
    let venv = tempfile::Builder::new()
        .prefix("shadow-venv")
        .tempdir_in("/var/tmp")
        .unwrap();
    let interp = venv.path().join("python3");
    std::os::unix::fs::symlink(&tool, &interp).unwrap();
    let script = venv.path().join("agent");
    std::fs::write(&script, format!("#!{}\n", interp.display())).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = p.sh(&["run", "--", script.to_str().unwrap()]);
    assert_eq!(out.code(), Some(127), "{out}");
    assert_eq!(
        one_line(&out),
        format!(
            "shadow: command cannot run in the sandbox: {}: its interpreter: {} resolves to {}, which the sandbox hides",
            script.display(),
            interp.display(),
            tool.display()
        )
    );
    assert!(p.sessions_json().is_empty());
    assert!(p.store_sessions().is_empty(), "{:?}", p.store_sessions());
}

#[test]
fn timeout_is_124_and_keeps_the_session() {
    let p = Project::new("run-timeout");
    let t0 = Instant::now();
    let out = p.sh(&[
        "run",
        "--json",
        "--timeout",
        "1",
        "--",
        "sh",
        "-c",
        "echo partial > work.txt; exec sleep 30",
    ]);
    let took = t0.elapsed();
    assert_eq!(out.code(), Some(124), "{out}");
    // SIGTERM, then SIGKILL after the 5 s grace at the latest.
    assert!(took < Duration::from_secs(12), "took {took:?}");
    assert!(took >= Duration::from_secs(1), "took {took:?}");
    assert!(out.stderr.contains("timed out"), "{out}");
    let summary = last_json_line(&out);
    let ids = p.session_ids();
    assert_eq!(ids.len(), 1, "the session is kept");
    let show = p.show_json(&ids[0]);
    assert_eq!(show["session"]["state"], "timed-out", "{show}");
    assert_eq!(show["session"]["exit_status"], 124, "{show}");
    assert_eq!(show["running"], false, "{show}");
    // `run --json` and `show --json` name the state the same way.
    assert_eq!(summary["state"], show["session"]["state"], "{summary}");
    // What it did before the timeout is in the session.
    let ns = p.ok(&["diff", "--name-status"]);
    assert_eq!(ns.stdout, "A\twork.txt\n");
}

#[test]
fn pids_limit_stops_a_fork_loop() {
    let p = Project::new("run-pids");
    let t0 = Instant::now();
    let out = p.run_with(
        &["--pids", "50"],
        "for i in $(seq 100); do sleep 3 & echo $i; done; wait",
    );
    assert!(t0.elapsed() < Duration::from_secs(20));
    assert_ne!(
        out.code(),
        Some(0),
        "100 processes started under --pids 50: {out}"
    );
    assert!(
        out.stderr.contains("fork"),
        "no fork failure reported: {out}"
    );
    let started: usize = out.stdout.lines().count();
    assert!(
        (10..50).contains(&started),
        "{started} background processes started under --pids 50: {out}"
    );
    // The same loop without the tight limit runs to the end.
    let out = p.run("for i in $(seq 100); do sleep 1 & done; wait; echo all-done");
    assert_eq!(out.code(), Some(0), "{out}");
    assert_eq!(out.stdout, "all-done\n");
}

#[test]
fn memory_limit_oom_kills_inside_only() {
    let p = Project::new("run-memory");
    let out = p.run_with(
        &["--memory", "32m"],
        "head -c 100m /dev/zero | tail > /dev/null",
    );
    assert_ne!(
        out.code(),
        Some(0),
        "100 MiB held under --memory 32m: {out}"
    );
    assert!(out.stderr.contains("Killed"), "{out}");
    // Within a larger limit the same pipeline completes (the limit, not the pipeline, failed).
    let out = p.run_with(
        &["--memory", "512m"],
        "head -c 50m /dev/zero | tail | wc -c",
    );
    assert_eq!(out.code(), Some(0), "{out}");
    assert_eq!(out.stdout.trim(), "52428800");
    // The OOM kill of the whole command is status 137.
    let out = p.sh(&[
        "run",
        "--memory",
        "32m",
        "--",
        "sh",
        "-c",
        "exec tail /dev/zero",
    ]);
    assert_eq!(out.code(), Some(137), "{out}");
}
