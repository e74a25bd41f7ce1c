//! OCI hooks: all six kinds, their order and where they run; a failing hook.

use std::fs;

use serde_json::json;
use shadow_integration_tests::*;

/// A hook running `sh -c SCRIPT` (`/bin/sh` on the host, or in the container for
/// startContainer, whose path resolves in the container).
fn hook(script: &str) -> serde_json::Value {
    json!({"path": "/bin/sh", "args": ["sh", "-c", script]})
}

#[test]
fn hooks_all_six_run_in_order() {
    let mut ctx = Ctx::new("hooks", &["sh", "-c", "echo process >> /hooklog/log"]);
    let logdir = ctx.dir().join("hooklog");
    fs::create_dir(&logdir).unwrap();
    let host_log = logdir.join("log");
    let h = host_log.to_str().unwrap();
    ctx.spec["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/hooklog", "type": "bind",
                     "source": logdir, "options": ["rbind", "rw"]}));
    // Host hooks also record that the state arrives on stdin (it names the container id).
    let host = |name: &str| {
        hook(&format!(
            "read -r state; case \"$state\" in *'\"id\"'*) echo {name} >> {h};; *) echo {name}-nostate >> {h};; esac"
        ))
    };
    ctx.spec["hooks"] = json!({
        "prestart": [host("prestart")],
        "createRuntime": [host("createRuntime")],
        // Runs in the container's namespaces before pivot_root: the host path is still visible,
        // and the mount namespace is the container's (its hostname is already set).
        "createContainer": [hook(&format!("echo createContainer-$(hostname) >> {h}"))],
        // Runs in the container after pivot_root: only the bind mount reaches the host file.
        "startContainer": [hook("echo startContainer-$(hostname) >> /hooklog/log")],
        "poststart": [host("poststart")],
        "poststop": [host("poststop")],
    });
    ctx.write_spec();
    let id = ctx.id("c");
    ctx.ok(&["create", &id]);
    let after_create = read_trim(&host_log);
    assert_eq!(
        after_create, "prestart\ncreateRuntime\ncreateContainer-itest",
        "hooks run by create"
    );
    ctx.ok(&["start", &id]);
    ctx.wait_status(&id, "stopped");
    wait_until("poststart", std::time::Duration::from_secs(10), || {
        read_trim(&host_log).contains("poststart")
    });
    assert!(
        !read_trim(&host_log).contains("poststop"),
        "poststop ran before delete"
    );
    ctx.ok(&["delete", &id]);
    let log = read_trim(&host_log);
    let got: Vec<&str> = log.lines().collect();
    // The process and poststart race (poststart runs after the process was started). poststart
    // vs startContainer is checked strictly by hooks_poststart_runs_after_start_container.
    let hooks: Vec<&str> = got.iter().copied().filter(|l| *l != "process").collect();
    assert_eq!(hooks.len(), 6, "hook log: {log:?}");
    assert_eq!(
        hooks[..3],
        ["prestart", "createRuntime", "createContainer-itest"],
        "hook log: {log:?}"
    );
    let mut middle = hooks[3..5].to_vec();
    middle.sort();
    assert_eq!(
        middle,
        ["poststart", "startContainer-itest"],
        "hook log: {log:?}"
    );
    assert_eq!(hooks[5], "poststop", "hook log: {log:?}");
    let p = got
        .iter()
        .position(|l| *l == "process")
        .expect("process ran");
    let sc = got
        .iter()
        .position(|l| *l == "startContainer-itest")
        .unwrap();
    assert!(
        p > sc && p < 6,
        "process ran outside startContainer..poststop: {log:?}"
    );
    ctx.assert_clean();
}

#[test]
fn hooks_failing_prestart_fails_create_and_leaves_nothing() {
    let mut ctx = Ctx::new("hookfail", &["sleep", "60"]);
    ctx.spec["hooks"] = json!({"prestart": [hook("cat >/dev/null; exit 3")]});
    ctx.write_spec();
    let id = ctx.id("c");
    let line = expect_error(&ctx, &["create", &id], &["hook", "exit code: 3"]);
    assert!(line.contains("create container"), "{line}");
    let o = ctx.rt(&["state", &id]);
    assert!(o.stderr.contains("does not exist"), "{o}");
    ctx.assert_clean();
    // `run` likewise.
    let id2 = ctx.id("r");
    expect_error(&ctx, &["run", &id2], &["hook", "exit code: 3"]);
    ctx.assert_clean();
}

#[test]
fn hooks_failing_hook_error_names_the_hook() {
    let mut ctx = Ctx::new("hookname", &["sleep", "60"]);
    ctx.spec["hooks"] = json!({"prestart": [hook("cat >/dev/null; exit 3")]});
    ctx.write_spec();
    let id = ctx.id("c");
    expect_error(&ctx, &["create", &id], &["prestart", "/bin/sh"]);
    ctx.assert_clean();
    // The first that fails is named, not the last that ran; here a later kind.
    let mut ctx = Ctx::new("hookname2", &["sleep", "60"]);
    ctx.spec["hooks"] = json!({
        "prestart": [hook("cat >/dev/null")],
        "createRuntime": [{"path": "/bin/false"}, hook("exit 0")],
    });
    ctx.write_spec();
    let id = ctx.id("c");
    let line = expect_error(&ctx, &["run", &id], &["createRuntime hook /bin/false"]);
    assert!(!line.contains("prestart"), "{line}");
    ctx.assert_clean();
}

/// Hooks that exit without reading the state from stdin are common (`/bin/true`, a script that
/// only touches a file). libcontainer ignores the EPIPE when writing the state; the runtime must
/// not die of SIGPIPE.
fn quick_hook_test(kind: &str) {
    let mut ctx = Ctx::new(&format!("hookpipe-{kind}"), &["true"]);
    // A large state (annotations) makes the write outlast the hook reliably.
    let big: serde_json::Map<String, serde_json::Value> = (0..64)
        .map(|i| (format!("k{i}"), json!("x".repeat(2048))))
        .collect();
    ctx.spec["annotations"] = serde_json::Value::Object(big);
    ctx.spec["hooks"] = json!({kind: [{"path": "/bin/true"}]});
    ctx.write_spec();
    let id = ctx.id("c");
    let o = ctx.rt(&["run", "--keep", &id]);
    assert_eq!(o.code(), Some(0), "run with a {kind} hook /bin/true: {o}");
    let o = ctx.rt(&["delete", &id]);
    assert_eq!(
        o.code(),
        Some(0),
        "delete with a {kind} hook /bin/true: {o}"
    );
    ctx.assert_clean();
}

#[test]
fn hooks_create_runtime_hook_ignoring_stdin() {
    quick_hook_test("createRuntime");
}

#[test]
fn hooks_poststop_hook_ignoring_stdin() {
    quick_hook_test("poststop");
}

#[test]
fn hooks_failing_poststop_does_not_block_delete() {
    let mut ctx = Ctx::new("hookpoststop", &["true"]);
    ctx.spec["hooks"] = json!({"poststop": [hook("cat >/dev/null; exit 1")]});
    ctx.write_spec();
    let id = ctx.id("c");
    ctx.ok(&["run", "--keep", &id]);
    let o = ctx.rt(&["delete", &id]);
    assert!(o.status.success(), "{o}");
    assert!(ctx.rt(&["state", &id]).stderr.contains("does not exist"));
    ctx.assert_clean();
}

#[test]
fn hooks_poststart_runs_after_start_container() {
    for round in 0..5 {
        let mut ctx = Ctx::new("hookorder", &["true"]);
        let logdir = ctx.dir().join("hooklog");
        fs::create_dir(&logdir).unwrap();
        let h = logdir.join("log");
        ctx.spec["mounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"destination": "/hooklog", "type": "bind",
                         "source": logdir, "options": ["rbind", "rw"]}));
        ctx.spec["hooks"] = json!({
            "startContainer": [hook("sleep 0.05; echo startContainer >> /hooklog/log")],
            "poststart": [hook(&format!("echo poststart >> {}", h.display()))],
        });
        ctx.write_spec();
        let id = ctx.id("c");
        ctx.ok(&["create", &id]);
        ctx.ok(&["start", &id]);
        ctx.wait_status(&id, "stopped");
        ctx.ok(&["delete", &id]);
        assert_eq!(
            read_trim(&h),
            "startContainer\npoststart",
            "round {round}: poststart before startContainer"
        );
        ctx.assert_clean();
    }
}

/// What a hook reads on stdin is the container's state as `state` reports it: the user's bundle
/// (not the runtime's effective copy, which a hook reading `<bundle>/config.json` would find
/// instead), and for prestart the status `created` (runtime-tools' `hooks_stdin`, as crun).
#[test]
fn hooks_read_the_users_bundle_and_prestart_sees_created() {
    let mut ctx = Ctx::new("hookstate", &["true"]);
    let out = ctx.dir().join("states");
    fs::create_dir(&out).unwrap();
    let save = |name: &str| hook(&format!("cat > {}/{name}.json", out.display()));
    ctx.spec["hooks"] = json!({
        "prestart": [save("prestart")],
        "createRuntime": [save("createRuntime")],
        "poststart": [save("poststart")],
        "poststop": [save("poststop")],
    });
    ctx.write_spec();
    let id = ctx.id("c");
    ctx.ok(&["run", &id]);
    let bundle = ctx.bundle.canonicalize().unwrap();
    for (name, status) in [
        ("prestart", "created"),
        ("createRuntime", "creating"),
        ("poststart", "running"),
        ("poststop", "stopped"),
    ] {
        let text = fs::read_to_string(out.join(format!("{name}.json"))).unwrap();
        let state: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(state["bundle"], bundle.to_str().unwrap(), "{name}: {text}");
        assert_eq!(state["id"], id.as_str(), "{name}: {text}");
        assert!(state["pid"].as_i64().unwrap() > 0, "{name}: {text}");
        if name != "poststart" && name != "poststop" {
            assert_eq!(state["status"], status, "{name}: {text}");
        }
    }
    ctx.assert_clean();
}

/// The runtime spec: a failing poststart or poststop hook is logged as a warning, and the
/// remaining hooks and the lifecycle carry on as if it had succeeded (runtime-tools'
/// `poststart_fail` and `poststop_fail`). libcontainer alone stops at the first failure and
/// fails `start`.
#[test]
fn hooks_failing_poststart_and_poststop_warn_and_the_rest_run() {
    let mut ctx = Ctx::new("hookwarn", &["true"]);
    let out = ctx.dir().join("out");
    let o = out.display();
    ctx.spec["hooks"] = json!({
        "poststart": [hook("cat >/dev/null; exit 1"),
                      // Killed at its timeout: a failure too, not a hung `start`.
                      {"path": "/bin/sleep", "args": ["sleep", "30"], "timeout": 1},
                      hook(&format!("echo post-start called >> {o}"))],
        "poststop": [{"path": "/bin/false"}, hook(&format!("echo post-stop called >> {o}"))],
    });
    ctx.write_spec();
    let id = ctx.id("c");
    ctx.ok(&["create", &id]);
    let started = ctx.rt(&["start", &id]);
    assert_eq!(started.code(), Some(0), "start: {started}");
    assert!(
        started
            .stderr
            .contains("warning: poststart hook /bin/sh failed: exit status: 1"),
        "{started}"
    );
    assert!(
        started
            .stderr
            .contains("poststart hook /bin/sleep failed: timed out after 1s"),
        "{started}"
    );
    assert_eq!(read_trim(&out), "post-start called");
    ctx.wait_status(&id, "stopped");
    let deleted = ctx.rt(&["delete", &id]);
    assert_eq!(deleted.code(), Some(0), "delete: {deleted}");
    assert!(
        deleted
            .stderr
            .contains("warning: poststop hook /bin/false failed"),
        "{deleted}"
    );
    assert_eq!(read_trim(&out), "post-start called\npost-stop called");
    ctx.assert_clean();
}

/// In a user namespace the createContainer hook (mapped root) cannot leave its name where the
/// runtime reads it: the error must then not name the prestart hook that ran (and succeeded)
/// before it.
#[test]
fn hooks_failing_create_container_in_a_user_namespace_is_not_blamed_on_prestart() {
    let mut ctx = Ctx::new("hookuserns", &["true"]);
    ctx.spec["linux"]["namespaces"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "user"}));
    let map = json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
    ctx.spec["linux"]["uidMappings"] = map.clone();
    ctx.spec["linux"]["gidMappings"] = map;
    ctx.spec["hooks"] = json!({
        "prestart": [{"path": "/bin/true"}],
        "createContainer": [{"path": "/bin/false"}],
    });
    ctx.write_spec();
    let id = ctx.id("c");
    let line = expect_error(&ctx, &["run", &id], &["createContainer hook"]);
    assert!(!line.contains("prestart"), "{line}");
    ctx.assert_clean();
}
