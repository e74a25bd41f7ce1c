//! pause / resume, update, events --stats, ps: everything that goes through the cgroup.

use std::fs;
use std::time::Duration;

use shadow_integration_tests::*;

const COUNTER: &str = "i=0; while :; do i=$((i+1)); echo $i; sleep 0.02; done";

fn running(tag: &str, args: &[&str]) -> (Ctx, String, std::path::PathBuf) {
    let ctx = Ctx::new(tag, args);
    let id = ctx.id("c");
    let out = ctx.run_detached(&id);
    (ctx, id, out)
}

fn lines(p: &std::path::Path) -> usize {
    fs::read_to_string(p).unwrap_or_default().lines().count()
}

#[test]
fn pause_and_resume_freeze_the_processes() {
    let (ctx, id, out) = running("pause", &["sh", "-c", COUNTER]);
    wait_until("counter output", Duration::from_secs(10), || {
        lines(&out) > 2
    });
    ctx.ok(&["pause", &id]);
    assert_eq!(ctx.status(&id), "paused");
    let freezer = ctx.cgroup_dir("freezer").join("freezer.state");
    assert_eq!(read_trim(&freezer), "FROZEN");
    let n = lines(&out);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(lines(&out), n, "a paused container kept running");
    // Pausing twice / resuming a running container are errors.
    expect_error(&ctx, &["pause", &id], &["not running"]);

    ctx.ok(&["resume", &id]);
    assert_eq!(ctx.status(&id), "running");
    assert_eq!(read_trim(&freezer), "THAWED");
    wait_until("counter resumes", Duration::from_secs(10), || {
        lines(&out) > n + 2
    });
    expect_error(&ctx, &["resume", &id], &["not paused"]);
    ctx.kill_and_delete(&id);
    ctx.assert_clean();
}

#[test]
fn delete_force_of_a_paused_container() {
    let (ctx, id, _out) = running("pausedel", &["sleep", "60"]);
    let pid = ctx.state(&id)["pid"].as_i64().unwrap() as i32;
    ctx.ok(&["pause", &id]);
    assert_eq!(ctx.status(&id), "paused");
    expect_error(&ctx, &["delete", &id], &["not stopped"]);
    ctx.ok(&["delete", "--force", &id]);
    ctx.assert_clean_pids(&[pid]);
}

#[test]
fn update_flags_change_cgroup_files() {
    let (ctx, id, _out) = running("update", &["sleep", "60"]);
    ctx.ok(&[
        "update",
        "--memory",
        "64m",
        "--pids-limit",
        "50",
        "--cpu-quota",
        "50000",
        "--cpu-period",
        "100000",
        "--cpuset-cpus",
        "0",
        &id,
    ]);
    assert_eq!(
        read_trim(ctx.cgroup_dir("memory").join("memory.limit_in_bytes")),
        (64u64 << 20).to_string()
    );
    assert_eq!(read_trim(ctx.cgroup_dir("pids").join("pids.max")), "50");
    assert_eq!(
        read_trim(ctx.cgroup_dir("cpu").join("cpu.cfs_quota_us")),
        "50000"
    );
    assert_eq!(
        read_trim(ctx.cgroup_dir("cpu").join("cpu.cfs_period_us")),
        "100000"
    );
    assert_eq!(read_trim(ctx.cgroup_dir("cpuset").join("cpuset.cpus")), "0");
    ctx.kill_and_delete(&id);
    ctx.assert_clean();
}

#[test]
fn update_resources_from_file_and_stdin() {
    let (ctx, id, _out) = running("updatejson", &["sleep", "60"]);
    let f = ctx.dir().join("res.json");
    fs::write(&f, br#"{"memory":{"limit":33554432},"pids":{"limit":20}}"#).unwrap();
    ctx.ok(&["update", "--resources", f.to_str().unwrap(), &id]);
    assert_eq!(
        read_trim(ctx.cgroup_dir("memory").join("memory.limit_in_bytes")),
        "33554432"
    );
    assert_eq!(read_trim(ctx.cgroup_dir("pids").join("pids.max")), "20");
    // Flags override the JSON; stdin works.
    let o = ctx.rt_stdin(
        &["update", "-r", "-", "--pids-limit", "30", &id],
        br#"{"pids":{"limit":25},"memory":{"limit":50331648}}"#,
    );
    assert!(o.status.success(), "{o}");
    assert_eq!(read_trim(ctx.cgroup_dir("pids").join("pids.max")), "30");
    assert_eq!(
        read_trim(ctx.cgroup_dir("memory").join("memory.limit_in_bytes")),
        "50331648"
    );
    // The limit is enforced: a fork bomb stops at 30.
    ctx.ok(&["update", "--pids-limit", "3", &id]);
    let o = ctx.rt(&[
        "exec",
        &id,
        "sh",
        "-c",
        "for i in 1 2 3 4 5; do sleep 5 & done; wait",
    ]);
    assert_ne!(o.code(), Some(0), "pids.max=3 did not stop 5 forks: {o}");
    let bad = ctx.dir().join("bad.json");
    fs::write(&bad, br#"{"memory":{"limit":"lots"}}"#).unwrap();
    expect_error(
        &ctx,
        &["update", "--resources", bad.to_str().unwrap(), &id],
        &["memory.limit"],
    );
    ctx.ok(&["kill", "--all", &id, "KILL"]);
    ctx.wait_status(&id, "stopped");
    ctx.ok(&["delete", &id]);
    ctx.assert_clean();
}

#[test]
fn update_of_a_stopped_container_says_not_running() {
    let ctx = Ctx::new("updstopped", &["true"]);
    let id = ctx.id("c");
    ctx.ok(&["run", "--keep", &id]);
    expect_error(
        &ctx,
        &["update", "--pids-limit", "5", &id],
        &["not running"],
    );
    ctx.ok(&["delete", &id]);
    ctx.assert_clean();
}

#[test]
fn events_stats_prints_one_json_line() {
    let (ctx, id, _out) = running("events", &["sleep", "60"]);
    let o = ctx.ok(&["events", "--stats", &id]);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{o}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).expect("stats line is JSON");
    assert_eq!(v["type"], "stats", "{v}");
    assert_eq!(v["id"], id.as_str(), "{v}");
    assert!(v["data"].is_object(), "{v}");
    let data = v["data"].to_string();
    assert!(data.contains("pids") && data.contains("memory"), "{data}");
    ctx.kill_and_delete(&id);
    ctx.assert_clean();
}

#[test]
fn events_streams_until_the_container_stops() {
    let (ctx, id, _out) = running("eventstream", &["sleep", "60"]);
    let ev = ctx.spawn(&["events", "--interval", "50ms", &id]);
    wait_until("three stats lines", Duration::from_secs(10), || {
        ev.stdout().lines().count() >= 3
    });
    let text = ev.stdout();
    // Only complete lines: the runtime may be writing the next one right now.
    let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    for l in complete.lines() {
        let v: serde_json::Value = serde_json::from_str(l).expect("every line is JSON");
        assert_eq!(v["type"], "stats");
    }
    ctx.ok(&["kill", &id, "KILL"]);
    let o = ev.wait(Duration::from_secs(10));
    assert!(o.status.success(), "{o}");
    ctx.ok(&["delete", &id]);
    ctx.assert_clean();
}

/// The cgroup mount of `runc spec` (and Docker's, Podman's): read-only.
fn ro_cgroup_mount() -> serde_json::Value {
    serde_json::json!({
        "destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
        "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]
    })
}

/// The spec's read-only cgroup mount is read-only inside the container (libcontainer 0.7 binds
/// v1 hierarchies read-write whatever the spec says): the container can neither lift its own
/// pids limit nor leave a sub-cgroup behind that would make `delete` fail, as under runc. A
/// mount of the spec's own below it keeps its options.
#[test]
fn read_only_cgroup_mount_cannot_be_written() {
    let v1 = std::path::Path::new("/sys/fs/cgroup/pids/cgroup.procs").exists();
    let pids = if v1 {
        "/sys/fs/cgroup/pids"
    } else {
        "/sys/fs/cgroup"
    };
    let script = format!(
        "echo 77 > {pids}/pids.max && echo RAISED; \
         mkdir {pids}/evil && echo CHILD; \
         touch /sys/fs/cgroup/data/ok && echo DATA-WRITABLE; \
         awk '{{for (i = 7; i <= NF; i++) if ($i == \"-\") {{ if ($5 ~ \"^/sys/fs/cgroup\") print $5, $6, $(i+1); break }}}}' /proc/self/mountinfo"
    );
    let mut ctx = Ctx::new("cgro", &["sh", "-c", &script]);
    let mounts = ctx.spec["mounts"].as_array_mut().unwrap();
    mounts.push(ro_cgroup_mount());
    mounts.push(serde_json::json!({
        "destination": "/sys/fs/cgroup/data", "type": "tmpfs", "source": "tmpfs",
        "options": ["rw", "size=64k"]
    }));
    ctx.spec["linux"]["resources"]["pids"] = serde_json::json!({"limit": 50});
    ctx.write_spec();
    let id = ctx.id("c");
    let o = ctx.rt(&["run", &id]);
    assert_eq!(o.code(), Some(0), "{o}");
    for word in ["RAISED", "CHILD"] {
        assert!(
            !o.stdout.contains(word),
            "the container wrote its cgroup mount: {o}"
        );
    }
    assert!(
        o.stdout.contains("DATA-WRITABLE"),
        "the spec's rw mount became read-only: {o}"
    );
    assert!(o.stderr.contains("Read-only file system"), "{o}");
    let cgroup_mounts: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.ends_with(" cgroup") || l.ends_with(" cgroup2"))
        .collect();
    assert!(
        cgroup_mounts.len() > usize::from(v1),
        "no cgroup hierarchy mounted: {o}"
    );
    for m in &cgroup_mounts {
        let opts = m.split_whitespace().nth(1).unwrap_or("");
        assert!(
            opts.split(',').any(|f| f == "ro"),
            "{m} is not read-only: {o}"
        );
    }
    ctx.assert_clean();
}

/// Fail closed: when no cgroup mount can be found where the spec mounted one read-only (here a
/// later tmpfs hides it), `create` fails naming it and leaves nothing behind.
#[test]
fn read_only_cgroup_mount_that_cannot_be_found_fails_create() {
    let mut ctx = Ctx::new("cgrohid", &["true"]);
    let mounts = ctx.spec["mounts"].as_array_mut().unwrap();
    mounts.push(ro_cgroup_mount());
    mounts.push(serde_json::json!({
        "destination": "/sys/fs/cgroup", "type": "tmpfs", "source": "tmpfs",
        "options": ["rw", "size=64k"]
    }));
    ctx.write_spec();
    let id = ctx.id("c");
    expect_error(
        &ctx,
        &["run", &id],
        &["/sys/fs/cgroup", "read-only", "no cgroup mount found"],
    );
    ctx.assert_clean();
}
