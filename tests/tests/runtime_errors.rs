//! Bad input: every case exits non-zero with one clear line (stderr and JSON log) and leaves
//! nothing behind.

use std::fs;

use serde_json::json;
use shadow_integration_tests::*;

#[test]
fn malformed_config_names_file_line_and_column() {
    let ctx = Ctx::new("badjson", &["true"]);
    let cfg = ctx.bundle.join("config.json");
    fs::write(&cfg, "{\n  \"ociVersion\": \"1.0.2\",\n  oops\n}\n").unwrap();
    let id = ctx.id("c");
    let line = expect_error(
        &ctx,
        &["create", &id],
        &[cfg.to_str().unwrap(), "line 3", "column"],
    );
    assert!(line.contains("invalid JSON"), "{line}");
    assert!(!line.contains("/./") && !line.contains("`?`"), "{line}");
    ctx.assert_clean();
}

#[test]
fn wrong_type_in_config_names_the_field() {
    let mut ctx = Ctx::new("badfield", &["true"]);
    ctx.spec["process"]["args"] = json!("not-a-list");
    ctx.write_spec();
    let id = ctx.id("c");
    expect_error(&ctx, &["create", &id], &["config.json", "process.args"]);
    ctx.assert_clean();
}

#[test]
fn missing_config_json() {
    let ctx = Ctx::new("nocfg", &["true"]);
    fs::remove_file(ctx.bundle.join("config.json")).unwrap();
    let id = ctx.id("c");
    expect_error(&ctx, &["create", &id], &["config.json", "no such file"]);
    expect_error(&ctx, &["run", &id], &["config.json"]);
    ctx.assert_clean();
}

#[test]
fn missing_bundle() {
    let ctx = Ctx::new("nobundle", &["true"]);
    let b = ctx.dir().join("no-such-bundle");
    let id = ctx.id("c");
    expect_error(
        &ctx,
        &["create", "-b", b.to_str().unwrap(), &id],
        &["bundle", "does not exist", b.to_str().unwrap()],
    );
    expect_error(
        &ctx,
        &["run", "-b", b.to_str().unwrap(), &id],
        &["does not exist"],
    );
    ctx.assert_clean();
}

#[test]
fn missing_rootfs() {
    let ctx = Ctx::new("norootfs", &["true"]);
    fs::remove_dir_all(&ctx.rootfs).unwrap();
    let id = ctx.id("c");
    expect_error(&ctx, &["create", &id], &["root.path", "does not exist"]);
    ctx.assert_clean();
}

#[test]
fn relative_rootfs_that_does_not_exist() {
    let mut ctx = Ctx::new("relrootfs", &["true"]);
    ctx.spec["root"]["path"] = json!("../elsewhere/rootfs");
    ctx.write_spec();
    let id = ctx.id("c");
    expect_error(
        &ctx,
        &["create", &id],
        &["root.path", "elsewhere/rootfs", "does not exist"],
    );
    ctx.assert_clean();
}

#[test]
fn relative_rootfs_that_exists_works() {
    let mut ctx = Ctx::new("relok", &["sh", "-c", "echo rel-ok"]);
    fs::rename(&ctx.rootfs, ctx.bundle.join("fs")).unwrap();
    ctx.spec["root"]["path"] = json!("fs");
    ctx.write_spec();
    let id = ctx.id("c");
    let o = ctx.ok(&["run", &id]);
    assert_eq!(o.stdout, "rel-ok\n");
    ctx.assert_clean();
}

#[test]
fn unknown_namespace_type_names_the_field() {
    let mut ctx = Ctx::new("badns", &["true"]);
    ctx.spec["linux"]["namespaces"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "bogus"}));
    ctx.write_spec();
    let id = ctx.id("c");
    expect_error(
        &ctx,
        &["create", &id],
        &["linux.namespaces[5].type", "bogus"],
    );
    ctx.assert_clean();
}

/// An AppArmor profile on a host without AppArmor cannot be enforced: refused at create with the
/// field named (as runc and crun refuse it), never run unconfined.
#[test]
fn apparmor_profile_without_apparmor_is_refused() {
    if std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|s| s.trim() == "Y")
    {
        eprintln!("skipped: AppArmor is enabled on this host");
        return;
    }
    let mut ctx = Ctx::new("apparmor", &["true"]);
    ctx.spec["process"]["apparmorProfile"] = json!("docker-default");
    ctx.write_spec();
    let id = ctx.id("c");
    expect_error(
        &ctx,
        &["run", &id],
        &["process.apparmorProfile", "AppArmor is not enabled"],
    );
    ctx.assert_clean();
    // An empty profile is no profile (as runc).
    let mut ctx = Ctx::new("apparmor-empty", &["true"]);
    ctx.spec["process"]["apparmorProfile"] = json!("");
    ctx.write_spec();
    let id = ctx.id("c");
    ctx.ok(&["run", &id]);
    ctx.assert_clean();
}

/// The runtime spec: a hook's timeout MUST be greater than zero. Refused, naming the hook, rather
/// than a poststart hook killed at once or an unlimited one.
#[test]
fn hook_timeout_not_above_zero_is_refused() {
    for t in [0, -1] {
        let mut ctx = Ctx::new("hooktimeout", &["true"]);
        ctx.spec["hooks"] = json!({
            "prestart": [{"path": "/bin/true"}],
            "poststart": [{"path": "/bin/true", "timeout": 5}, {"path": "/bin/true", "timeout": t}],
        });
        ctx.write_spec();
        let id = ctx.id("c");
        expect_error(
            &ctx,
            &["run", &id],
            &["hooks.poststart[1].timeout", "must be greater than zero"],
        );
        ctx.assert_clean();
    }
}

#[test]
fn unknown_id_does_not_exist() {
    let ctx = Ctx::new("unknown", &["true"]);
    let id = ctx.id("nope");
    for cmd in [
        vec!["start", id.as_str()],
        vec!["kill", id.as_str()],
        vec!["kill", id.as_str(), "KILL"],
        vec!["delete", id.as_str()],
        vec!["state", id.as_str()],
        vec!["exec", id.as_str(), "true"],
        vec!["pause", id.as_str()],
        vec!["resume", id.as_str()],
        vec!["ps", id.as_str()],
        vec!["events", "--stats", id.as_str()],
        vec!["update", "--pids-limit", "5", id.as_str()],
    ] {
        let line = expect_error(&ctx, &cmd, &["does not exist"]);
        assert!(line.contains(&id), "{cmd:?}: {line}");
    }
    ctx.assert_clean();
}

#[test]
fn duplicate_id_fails_and_first_container_is_untouched() {
    let mut ctx = Ctx::new("dup", &["sleep", "60"]);
    let id = ctx.id("c");
    ctx.ok(&["create", &id]);
    let before = ctx.state(&id);
    expect_error(&ctx, &["create", &id], &["already exists"]);
    expect_error(&ctx, &["run", "--detach", &id], &["already exists"]);
    // The same with shadow capture: its failed create must not clean up someone else's
    // container, and leaves no session behind.
    let project = ctx.dir().join("project");
    fs::create_dir(&project).unwrap();
    ctx.spec["mounts"].as_array_mut().unwrap().push(json!({
        "destination": "/work", "type": "bind",
        "source": project, "options": ["rbind", "rw"],
    }));
    ctx.spec["annotations"] = json!({"run.shadow.capture": "/work"});
    ctx.write_spec();
    let store = ctx.dir().join("store");
    let store_flag = format!("--shadow-store={}", store.display());
    expect_error(&ctx, &[&store_flag, "create", &id], &["already exists"]);
    expect_error(
        &ctx,
        &[&store_flag, "run", "--detach", &id],
        &["already exists"],
    );
    expect_error(&ctx, &[&store_flag, "run", &id], &["already exists"]);
    let sessions: Vec<_> = fs::read_dir(store.join("sessions"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(sessions.is_empty(), "sessions left: {sessions:?}");
    let after = ctx.state(&id);
    assert_eq!(before, after);
    // The first container still works.
    ctx.ok(&["start", &id]);
    assert_eq!(ctx.status(&id), "running");
    assert_eq!(ctx.ok(&["exec", &id, "echo", "ok"]).stdout, "ok\n");
    ctx.kill_and_delete(&id);
    ctx.assert_clean();
}

#[test]
fn ids_with_slash_or_dotdot_are_refused() {
    let ctx = Ctx::new("badid", &["true"]);
    for bad in ["a/b", "../x", "..", ".", "x y", ""] {
        let line = expect_error(&ctx, &["create", bad], &["container id"]);
        assert!(
            line.contains("invalid") || line.contains("empty"),
            "{bad:?}: {line}"
        );
        expect_error(&ctx, &["state", bad], &["container id"]);
        expect_error(&ctx, &["delete", "--force", bad], &["container id"]);
    }
    assert!(!ctx.dir().join("x").exists());
    ctx.assert_clean();
}

#[test]
fn root_dir_on_read_only_mount() {
    let ctx = Ctx::new("rootro", &["true"]);
    let ro = ctx.dir().join("ro");
    fs::create_dir(&ro).unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        &ro,
        Some("tmpfs"),
        nix::mount::MsFlags::MS_RDONLY,
        None::<&str>,
    )
    .expect("mount ro tmpfs");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
        }
    }
    let _u = Unmount(ro.clone());
    let id = ctx.id("c");
    let b = ctx.bundle.to_str().unwrap();
    for root in [ro.clone(), ro.join("sub")] {
        let r = root.to_str().unwrap();
        expect_error(&ctx, &["--root", r, "create", "-b", b, &id], &[r]);
        expect_error(&ctx, &["--root", r, "run", "-b", b, &id], &[r]);
    }
    drop(_u);
    assert!(fs::read_dir(&ro).unwrap().next().is_none());
    ctx.assert_clean();
}

#[test]
fn root_dir_is_a_file() {
    let ctx = Ctx::new("rootfile", &["true"]);
    let f = ctx.dir().join("file");
    fs::write(&f, "x").unwrap();
    let id = ctx.id("c");
    let b = ctx.bundle.to_str().unwrap();
    expect_error(
        &ctx,
        &["--root", f.to_str().unwrap(), "create", "-b", b, &id],
        &["not a directory"],
    );
    assert_eq!(fs::read_to_string(&f).unwrap(), "x");
    ctx.assert_clean();
}

#[test]
fn console_socket_that_does_not_exist() {
    let mut ctx = Ctx::new("nosock", &["sh"]);
    ctx.spec["process"]["terminal"] = json!(true);
    ctx.write_spec();
    let id = ctx.id("c");
    let s = ctx.dir().join("no.sock");
    expect_error(
        &ctx,
        &["create", "--console-socket", s.to_str().unwrap(), &id],
        &["console socket", "does not exist"],
    );
    expect_error(
        &ctx,
        &["run", "-d", "--console-socket", s.to_str().unwrap(), &id],
        &["does not exist"],
    );
    ctx.assert_clean();
}

#[test]
fn missing_process_binary_fails_create_cleanly() {
    let ctx = Ctx::new("nobin", &["/no/such/binary"]);
    let id = ctx.id("c");
    // libcontainer checks the executable at create time.
    let o = ctx.rt(&["run", &id]);
    assert_ne!(o.code(), Some(0), "{o}");
    assert!(o.stderr.contains("/no/such/binary"), "{o}");
    ctx.assert_clean();
}

#[test]
fn unknown_log_format_and_rootless_values() {
    let ctx = Ctx::new("badglobal", &["true"]);
    let o = ctx.rt(&["--log-format", "xml", "list"]);
    assert_ne!(o.code(), Some(0), "{o}");
    assert!(o.stderr.contains("xml"), "{o}");
    let o = ctx.rt(&["--rootless", "maybe", "list"]);
    assert_ne!(o.code(), Some(0), "{o}");
    assert!(o.stderr.contains("maybe"), "{o}");
    ctx.assert_clean();
}

#[test]
fn unknown_command_and_missing_id_are_usage_errors() {
    let ctx = Ctx::new("usage", &["true"]);
    let o = ctx.rt(&["frobnicate"]);
    assert_eq!(o.code(), Some(2), "{o}");
    let o = ctx.rt(&["start"]);
    assert_eq!(o.code(), Some(2), "{o}");
    ctx.assert_clean();
}
