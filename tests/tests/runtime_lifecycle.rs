//! create / start / state / kill / delete, pid files, statuses, and the LeakCheck itself.

use std::fs;
use std::time::Duration;

use shadow_integration_tests::*;

const TRAPPING: &str = "trap 'echo got-USR1' USR1; trap 'echo got-HUP' HUP; \
     trap 'echo got-TERM; exit 0' TERM; echo ready; while :; do sleep 0.05; done";

#[test]
fn lifecycle_create_start_state_kill_delete_with_pid_file() {
    let ctx = Ctx::new("life", &["sh", "-c", TRAPPING]);
    let id = ctx.id("c");
    let pid_file = ctx.dir().join("init.pid");
    let b = ctx.bundle.to_str().unwrap();
    let create = ctx.ok(&[
        "create",
        "-b",
        b,
        "--pid-file",
        pid_file.to_str().unwrap(),
        &id,
    ]);
    // Right when create returns: pid file written, process in the container's cgroup.
    let pid: i32 = read_trim(&pid_file)
        .parse()
        .expect("pid file holds a number");
    assert!(pid > 0 && alive(pid));
    let procs = read_trim(ctx.cgroup_dir("pids").join("cgroup.procs"));
    assert!(
        procs.lines().any(|l| l.trim() == pid.to_string()),
        "pid {pid} not in pids cgroup.procs: {procs:?}"
    );
    let st = ctx.state(&id);
    assert_eq!(st["status"], "created", "{st}");
    assert_eq!(st["pid"], pid, "{st}");
    assert_eq!(st["id"], id.as_str());
    assert_eq!(st["bundle"], b, "{st}");
    assert_eq!(st["rootfs"], ctx.rootfs.to_str().unwrap(), "{st}");
    assert!(st["ociVersion"]
        .as_str()
        .is_some_and(|v| v.starts_with('1')));
    assert!(
        is_rfc3339(st["created"].as_str().unwrap_or_default()),
        "{st}"
    );
    assert_eq!(st["owner"], "root", "{st}");
    assert!(
        !fs::read_to_string(&create.stdout_path)
            .unwrap()
            .contains("ready"),
        "the process ran before start"
    );

    ctx.ok(&["start", &id]);
    wait_file_contains(&create.stdout_path, "ready", Duration::from_secs(10));
    assert_eq!(ctx.status(&id), "running");
    assert_eq!(ctx.state(&id)["pid"], pid);

    ctx.ok(&["kill", &id, "TERM"]);
    wait_file_contains(&create.stdout_path, "got-TERM", Duration::from_secs(10));
    ctx.wait_status(&id, "stopped");
    assert_eq!(ctx.state(&id)["pid"], 0);
    ctx.ok(&["delete", &id]);
    assert!(ctx.rt(&["state", &id]).stderr.contains("does not exist"));
    ctx.assert_clean_pids(&[pid]);
}

#[test]
fn start_twice_is_an_error() {
    let ctx = Ctx::new("start2", &["sleep", "60"]);
    let id = ctx.id("c");
    ctx.ok(&["create", &id]);
    ctx.ok(&["start", &id]);
    let line = expect_error(&ctx, &["start", &id], &["running"]);
    assert!(line.contains("cannot start"), "{line}");
    assert_eq!(ctx.status(&id), "running");
    ctx.kill_and_delete(&id);
    ctx.assert_clean();
}

#[test]
fn start_of_a_stopped_container_is_an_error() {
    let ctx = Ctx::new("startstop", &["true"]);
    let id = ctx.id("c");
    ctx.ok(&["create", &id]);
    ctx.ok(&["start", &id]);
    ctx.wait_status(&id, "stopped");
    expect_error(&ctx, &["start", &id], &["stopped"]);
    ctx.ok(&["delete", &id]);
    ctx.assert_clean();
}

#[test]
fn delete_running_without_force_fails_and_keeps_container() {
    let ctx = Ctx::new("delrun", &["sleep", "60"]);
    let id = ctx.id("c");
    ctx.run_detached(&id);
    let pid = ctx.state(&id)["pid"].as_i64().unwrap() as i32;
    expect_error(&ctx, &["delete", &id], &["not stopped"]);
    assert_eq!(ctx.status(&id), "running");
    assert!(alive(pid));
    // The container still works: exec into it.
    let o = ctx.ok(&["exec", &id, "echo", "still-here"]);
    assert_eq!(o.stdout, "still-here\n");
    ctx.ok(&["delete", "--force", &id]);
    ctx.assert_clean_pids(&[pid]);
}

#[test]
fn delete_force_of_a_created_container() {
    let ctx = Ctx::new("delcreated", &["sleep", "60"]);
    let id = ctx.id("c");
    ctx.ok(&["create", &id]);
    let pid = ctx.state(&id)["pid"].as_i64().unwrap() as i32;
    ctx.ok(&["delete", "--force", &id]);
    ctx.assert_clean_pids(&[pid]);
}

#[test]
fn delete_force_of_missing_id_succeeds() {
    let ctx = Ctx::new("delmissing", &["true"]);
    let id = ctx.id("never");
    let o = ctx.ok(&["delete", "--force", &id]);
    assert_eq!(o.stderr, "");
    ctx.assert_clean();
}

#[test]
fn kill_accepts_names_and_numbers() {
    let ctx = Ctx::new("killnames", &["sh", "-c", TRAPPING]);
    let id = ctx.id("c");
    let out = ctx.run_detached(&id);
    wait_file_contains(&out, "ready", Duration::from_secs(10));
    let mut want_usr1 = 0;
    let mut want_hup = 0;
    for (sig, is_usr1) in [
        ("USR1", true),
        ("SIGHUP", false),
        ("10", true),
        ("1", false),
        ("sigusr1", true),
        ("hup", false),
    ] {
        ctx.ok(&["kill", &id, sig]);
        if is_usr1 {
            want_usr1 += 1;
        } else {
            want_hup += 1;
        }
        wait_until(
            &format!("handler for {sig}"),
            Duration::from_secs(10),
            || {
                let s = fs::read_to_string(&out).unwrap_or_default();
                s.matches("got-USR1").count() == want_usr1
                    && s.matches("got-HUP").count() == want_hup
            },
        );
        // A signal the container survives does not change its status.
        assert_eq!(ctx.status(&id), "running", "after kill {sig}");
    }
    ctx.ok(&["kill", &id, "15"]);
    wait_file_contains(&out, "got-TERM", Duration::from_secs(10));
    ctx.wait_status(&id, "stopped");
    ctx.ok(&["delete", &id]);
    ctx.assert_clean();
}

#[test]
fn kill_unknown_signal_is_refused() {
    let ctx = Ctx::new("killfoo", &["sleep", "60"]);
    let id = ctx.id("c");
    ctx.run_detached(&id);
    expect_error(&ctx, &["kill", &id, "FOO"], &["unknown signal"]);
    expect_error(&ctx, &["kill", &id, "99"], &["unknown signal"]);
    assert_eq!(ctx.status(&id), "running");
    ctx.kill_and_delete(&id);
    ctx.assert_clean();
}

#[test]
fn kill_of_a_stopped_container_says_not_running() {
    let ctx = Ctx::new("killstopped", &["true"]);
    let id = ctx.id("c");
    ctx.ok(&["run", "--keep", &id]);
    expect_error(&ctx, &["kill", &id, "TERM"], &["not running"]);
    ctx.ok(&["delete", &id]);
    ctx.assert_clean();
}

#[test]
fn kill_all_reaches_every_process() {
    let ctx = Ctx::new(
        "killall",
        &["sh", "-c", "sleep 60 & sleep 60 & echo ready; wait"],
    );
    let id = ctx.id("c");
    let out = ctx.run_detached(&id);
    wait_file_contains(&out, "ready", Duration::from_secs(10));
    wait_until("3 processes in the cgroup", Duration::from_secs(10), || {
        read_trim(ctx.cgroup_dir("pids").join("cgroup.procs"))
            .lines()
            .count()
            >= 3
    });
    let pids: Vec<i32> = read_trim(ctx.cgroup_dir("pids").join("cgroup.procs"))
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    ctx.ok(&["kill", "--all", &id, "KILL"]);
    ctx.wait_status(&id, "stopped");
    ctx.ok(&["delete", &id]);
    ctx.assert_clean_pids(&pids);
}

/// The checker must notice leaks, or every "assert_clean" above proves nothing.
#[test]
fn leak_check_detects_a_leftover_container() {
    let ctx = Ctx::new("leakself", &["sleep", "60"]);
    let id = ctx.id("c");
    ctx.run_detached(&id);
    let pid = ctx.state(&id)["pid"].as_i64().unwrap() as i32;
    let mut lc = ctx.leak_check();
    lc.pids.push(pid);
    let leaks = lc.leaks().join("\n");
    assert!(leaks.contains("state root"), "{leaks}");
    assert!(leaks.contains("cgroup left behind"), "{leaks}");
    assert!(
        leaks.contains(&format!("process {pid} still alive")),
        "{leaks}"
    );
    ctx.ok(&["delete", "--force", &id]);
    lc.assert_clean();
}

#[test]
fn kill_signal_zero_checks_liveness() {
    let ctx = Ctx::new("kill0", &["sleep", "60"]);
    let id = ctx.id("c");
    ctx.run_detached(&id);
    ctx.ok(&["kill", &id, "0"]);
    assert_eq!(ctx.status(&id), "running");
    ctx.ok(&["kill", &id, "KILL"]);
    ctx.wait_status(&id, "stopped");
    expect_error(&ctx, &["kill", &id, "0"], &["not running"]);
    ctx.ok(&["delete", &id]);
    ctx.assert_clean();
}
