//! `exec` into a running container.

use std::time::Duration;

use serde_json::json;
use shadow_integration_tests::*;

/// A running container (`sleep`), its id.
fn running(tag: &str) -> (Ctx, String) {
    let ctx = Ctx::new(tag, &["sleep", "60"]);
    let id = ctx.id("c");
    ctx.run_detached(&id);
    (ctx, id)
}

fn finish(ctx: &Ctx, id: &str) {
    ctx.kill_and_delete(id);
    ctx.assert_clean();
}

#[test]
fn exec_output_and_exit_code() {
    let (ctx, id) = running("execout");
    let o = ctx.rt(&[
        "exec",
        &id,
        "sh",
        "-c",
        "echo out-$((2*3)); echo err >&2; exit 5",
    ]);
    assert_eq!(o.code(), Some(5), "{o}");
    assert_eq!(o.stdout, "out-6\n");
    assert_eq!(o.stderr, "err\n");
    let o = ctx.ok(&["exec", &id, "true"]);
    assert_eq!(o.stdout, "");
    // The exec runs in the container's pid namespace, next to its init (pid 1 = sleep).
    let o = ctx.ok(&["exec", &id, "cat", "/proc/1/cmdline"]);
    assert_eq!(o.stdout, "sleep\u{0}60\u{0}");
    finish(&ctx, &id);
}

#[test]
fn exec_env_overrides() {
    let (ctx, id) = running("execenv");
    let o = ctx.ok(&[
        "exec",
        "-e",
        "FOO=bar",
        "--env",
        "TERM=dumb",
        &id,
        "sh",
        "-c",
        "echo $FOO:$TERM:$PATH",
    ]);
    assert_eq!(
        o.stdout,
        "bar:dumb:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
    );
    finish(&ctx, &id);
}

#[test]
fn exec_cwd() {
    let (ctx, id) = running("execcwd");
    let o = ctx.ok(&["exec", "--cwd", "/tmp", &id, "pwd"]);
    assert_eq!(o.stdout, "/tmp\n");
    let o = ctx.ok(&["exec", &id, "pwd"]);
    assert_eq!(o.stdout, "/\n", "default cwd is the init's");
    finish(&ctx, &id);
}

#[test]
fn exec_user() {
    let (ctx, id) = running("execuser");
    let o = ctx.ok(&["exec", "-u", "1000:1000", &id, "id"]);
    let s = o.stdout.trim();
    assert!(
        s.starts_with("uid=1000 gid=1000"),
        "id inside the container: {s:?}"
    );
    let o = ctx.ok(&[
        "exec",
        "--user",
        "1000:1000",
        &id,
        "sh",
        "-c",
        "id -u; id -g",
    ]);
    assert_eq!(o.stdout, "1000\n1000\n");
    let o = ctx.ok(&["exec", &id, "id", "-u"]);
    assert_eq!(o.stdout, "0\n");
    finish(&ctx, &id);
}

#[test]
fn exec_process_file() {
    let (ctx, id) = running("execproc");
    let p = ctx.dir().join("process.json");
    std::fs::write(
        &p,
        serde_json::to_vec(&json!({
            "terminal": false,
            "user": {"uid": 123, "gid": 456},
            "args": ["sh", "-c", "echo $(id -u):$(id -g):$(pwd):$GREETING; exit 9"],
            "env": ["PATH=/bin", "GREETING=hello"],
            "cwd": "/etc",
            "noNewPrivileges": true
        }))
        .unwrap(),
    )
    .unwrap();
    let o = ctx.rt(&["exec", "--process", p.to_str().unwrap(), &id]);
    assert_eq!(o.code(), Some(9), "{o}");
    assert_eq!(o.stdout, "123:456:/etc:hello\n", "{o}");
    finish(&ctx, &id);
}

#[test]
fn exec_bad_process_file_names_the_field() {
    let (ctx, id) = running("execbadproc");
    let p = ctx.dir().join("process.json");
    std::fs::write(&p, br#"{"args": "not-a-list", "cwd": "/"}"#).unwrap();
    let line = expect_error(
        &ctx,
        &["exec", "--process", p.to_str().unwrap(), &id],
        &["process.json", "args"],
    );
    assert!(!line.is_empty());
    finish(&ctx, &id);
}

#[test]
fn exec_detach_with_pid_file() {
    let (ctx, id) = running("execdet");
    let pf = ctx.dir().join("exec.pid");
    let o = ctx.ok(&[
        "exec",
        "--detach",
        "--pid-file",
        pf.to_str().unwrap(),
        &id,
        "sh",
        "-c",
        "echo detached-exec; exec sleep 30",
    ]);
    let pid: i32 = read_trim(&pf).parse().expect("pid file holds a number");
    assert!(alive(pid), "exec'd process {pid} not running");
    let procs = read_trim(ctx.cgroup_dir("pids").join("cgroup.procs"));
    assert!(
        procs.lines().any(|l| l.trim() == pid.to_string()),
        "{pid} not in the container's cgroup: {procs:?}"
    );
    wait_file_contains(&o.stdout_path, "detached-exec", Duration::from_secs(10));
    // The container now has two processes.
    let ps = ctx.ok(&["ps", "--format", "json", &id]);
    let pids: Vec<i64> = serde_json::from_str(&ps.stdout).unwrap();
    assert!(pids.contains(&(pid as i64)), "{pids:?}");
    assert_eq!(pids.len(), 2, "{pids:?}");
    ctx.ok(&["kill", "--all", &id, "KILL"]);
    ctx.wait_status(&id, "stopped");
    ctx.ok(&["delete", &id]);
    ctx.assert_clean_pids(&[pid]);
}

#[test]
fn exec_ps_table_lists_container_processes() {
    let (ctx, id) = running("execps");
    let pid = ctx.state(&id)["pid"].as_i64().unwrap();
    let o = ctx.ok(&["ps", &id]);
    let mut lines = o.stdout.lines();
    assert!(lines.next().unwrap().contains("PID"), "{o}");
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 1, "{o}");
    assert!(
        rows[0].contains(&pid.to_string()) && rows[0].contains("sleep 60"),
        "{o}"
    );
    finish(&ctx, &id);
}

#[test]
fn exec_in_stopped_container_says_not_running() {
    let ctx = Ctx::new("execstopped", &["true"]);
    let id = ctx.id("c");
    ctx.ok(&["run", "--keep", &id]);
    expect_error(&ctx, &["exec", &id, "true"], &["not running"]);
    ctx.ok(&["delete", &id]);
    ctx.assert_clean();
}

#[test]
fn exec_in_created_container_says_not_running() {
    let ctx = Ctx::new("execcreated", &["sleep", "60"]);
    let id = ctx.id("c");
    ctx.ok(&["create", &id]);
    expect_error(&ctx, &["exec", &id, "true"], &["not running"]);
    ctx.ok(&["delete", "--force", &id]);
    ctx.assert_clean();
}

#[test]
fn exec_missing_binary_fails_cleanly() {
    let (ctx, id) = running("execmissing");
    let o = ctx.rt(&["exec", &id, "/no/such/binary"]);
    assert_ne!(o.code(), Some(0), "{o}");
    assert_eq!(ctx.status(&id), "running");
    finish(&ctx, &id);
}

/// An exec'd process is held by the container's seccomp filter like its init (libcontainer
/// 0.7's tenant path drops `linux.seccomp`; the executor installs it).
#[test]
fn exec_gets_the_containers_seccomp_filter() {
    let mut ctx = Ctx::new("execsec", &["sleep", "60"]);
    ctx.spec["process"]["noNewPrivileges"] = json!(true);
    ctx.spec["linux"]["seccomp"] = json!({"defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]});
    ctx.write_spec();
    let id = ctx.id("c");
    ctx.run_detached(&id);
    let o = ctx.rt(&[
        "exec",
        &id,
        "sh",
        "-c",
        "mkdir /tmp/d; echo mkdir=$?; grep -E '^Seccomp(_filters)?:' /proc/self/status",
    ]);
    assert_eq!(o.code(), Some(0), "{o}");
    assert!(o.stdout.contains("mkdir=1\n"), "{o}");
    assert!(o.stdout.contains("Seccomp:\t2\n"), "{o}");
    assert!(o.stdout.contains("Seccomp_filters:\t1\n"), "{o}");
    finish(&ctx, &id);
}
