//! `run` in the foreground and detached: output, exit codes, signals.

use std::time::Duration;

use shadow_integration_tests::*;

#[test]
fn run_captures_stdout_and_exit_code_zero() {
    let ctx = Ctx::new("run0", &["sh", "-c", "echo hello from $(hostname)"]);
    let id = ctx.id("c");
    let o = ctx.rt(&["run", "-b", ctx.bundle.to_str().unwrap(), &id]);
    assert_eq!(o.code(), Some(0), "{o}");
    assert_eq!(o.stdout, "hello from itest\n", "{o}");
    assert_eq!(o.stderr, "", "{o}");
    ctx.assert_clean();
}

#[test]
fn run_exit_code_is_the_containers() {
    let ctx = Ctx::new("run3", &["sh", "-c", "echo out; echo err >&2; exit 3"]);
    let id = ctx.id("c");
    let o = ctx.rt(&["run", &id]); // bundle defaults to the current directory
    assert_eq!(o.code(), Some(3), "{o}");
    assert_eq!(o.stdout, "out\n");
    assert_eq!(o.stderr, "err\n");
    ctx.assert_clean();
}

#[test]
fn run_killed_by_signal_exits_128_plus_n() {
    // PID 1 of a pid namespace cannot SIGKILL itself, so this container shares the host's pid
    // namespace: `kill -9 $$` really kills the container's init.
    let mut ctx = Ctx::new(
        "runsig",
        &["sh", "-c", "echo before; kill -9 $$; echo after"],
    );
    ctx.spec["linux"]["namespaces"] = serde_json::json!([
        {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}
    ]);
    ctx.write_spec();
    let id = ctx.id("c");
    let o = ctx.rt(&["run", &id]);
    assert_eq!(o.code(), Some(128 + 9), "{o}");
    assert_eq!(o.stdout, "before\n", "{o}");
    ctx.assert_clean();
}

#[test]
fn run_killed_from_outside_exits_137() {
    let ctx = Ctx::new("runkill", &["sh", "-c", "echo up; exec sleep 60"]);
    let id = ctx.id("c");
    let mut run = ctx.spawn(&["run", &id]);
    run.wait_stdout("up", Duration::from_secs(10));
    ctx.wait_status(&id, "running");
    ctx.ok(&["kill", &id, "KILL"]);
    let o = run.wait(Duration::from_secs(10));
    assert_eq!(o.code(), Some(137), "{o}");
    ctx.assert_clean();
}

#[test]
fn run_forwards_sigterm_to_the_container() {
    let ctx = Ctx::new(
        "runfwd",
        &[
            "sh",
            "-c",
            "trap 'echo got-term; exit 42' TERM; echo ready; while :; do sleep 0.1; done",
        ],
    );
    let id = ctx.id("c");
    let mut run = ctx.spawn(&["run", &id]);
    run.wait_stdout("ready", Duration::from_secs(10));
    let rt_pid = run.pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(rt_pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let o = run.wait(Duration::from_secs(10));
    assert_eq!(o.code(), Some(42), "{o}");
    assert!(o.stdout.contains("got-term"), "{o}");
    ctx.assert_clean_pids(&[rt_pid]);
}

#[test]
fn run_detach_then_state_kill_delete() {
    let ctx = Ctx::new("rundet", &["sh", "-c", "echo detached-up; exec sleep 60"]);
    let id = ctx.id("c");
    let t0 = std::time::Instant::now();
    let out = ctx.run_detached(&id);
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "run --detach did not return promptly"
    );
    let st = ctx.state(&id);
    assert_eq!(st["status"], "running", "{st}");
    assert_eq!(st["id"], id.as_str());
    let pid = st["pid"].as_i64().unwrap() as i32;
    assert!(pid > 0 && alive(pid), "{st}");
    wait_file_contains(&out, "detached-up", Duration::from_secs(10));
    ctx.ok(&["kill", &id, "KILL"]);
    ctx.wait_status(&id, "stopped");
    assert_eq!(ctx.state(&id)["pid"], 0);
    ctx.ok(&["delete", &id]);
    let o = ctx.rt(&["state", &id]);
    assert!(o.stderr.contains("does not exist"), "{o}");
    ctx.assert_clean_pids(&[pid]);
}

#[test]
fn run_keep_leaves_a_stopped_container() {
    let ctx = Ctx::new("runkeep", &["true"]);
    let id = ctx.id("c");
    ctx.ok(&["run", "--keep", &id]);
    assert_eq!(ctx.status(&id), "stopped");
    ctx.ok(&["delete", &id]);
    ctx.assert_clean();
}

/// A payload whose stdout is `/dev/null` can write to it (`shadow-runtime run … >/dev/null`):
/// libcontainer reopens it inside the container read-only, and every write failed (EBADF).
#[test]
fn run_with_stdout_dev_null_can_write() {
    let ctx = Ctx::new("runnull", &["sh", "-c", "echo gone; echo rc=$? >&2"]);
    let id = ctx.id("c");
    let err = ctx.dir().join("err");
    let mut c = ctx.command(&["run", &id]);
    c.stdout(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .unwrap(),
    )
    .stderr(std::fs::File::create(&err).unwrap());
    let status = c.status().unwrap();
    let text = std::fs::read_to_string(&err).unwrap();
    assert_eq!((status.code(), text.as_str()), (Some(0), "rc=0\n"));
    ctx.assert_clean();
}
