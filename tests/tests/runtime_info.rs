//! Commands that do not need a container (features, spec, --version) and list.

use std::fs;

use serde_json::Value;
use shadow_integration_tests::*;

#[test]
fn version_lines() {
    let ctx = Ctx::new("version", &["true"]);
    for flag in ["--version", "-v"] {
        let o = ctx.ok(&[flag]);
        let lines: Vec<&str> = o.stdout.lines().collect();
        assert_eq!(lines.len(), 3, "{o}");
        assert!(lines[0].starts_with("shadow-runtime version "), "{o}");
        assert!(lines[0].split(' ').nth(2).is_some_and(|v| v.contains('.')));
        assert!(lines[1].starts_with("spec: 1."), "{o}");
        assert!(lines[2].starts_with("libcontainer: "), "{o}");
    }
    ctx.assert_clean();
}

#[test]
fn features_json() {
    let ctx = Ctx::new("features", &["true"]);
    let o = ctx.ok(&["features"]);
    let v: Value = serde_json::from_str(&o.stdout).expect("features is JSON");
    assert!(
        v["ociVersionMin"]
            .as_str()
            .is_some_and(|s| s.starts_with("1.")),
        "{v}"
    );
    assert!(
        v["ociVersionMax"]
            .as_str()
            .is_some_and(|s| s.starts_with("1.")),
        "{v}"
    );
    let hooks: Vec<&str> = v["hooks"]
        .as_array()
        .expect("hooks array")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for h in [
        "prestart",
        "createRuntime",
        "createContainer",
        "startContainer",
        "poststart",
        "poststop",
    ] {
        assert!(hooks.contains(&h), "{h} missing from {hooks:?}");
    }
    let ns: Vec<&str> = v["linux"]["namespaces"]
        .as_array()
        .expect("linux.namespaces array")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for n in ["pid", "network", "ipc", "uts", "mount", "user", "cgroup"] {
        assert!(ns.contains(&n), "{n} missing from {ns:?}");
    }
    assert!(v["mountOptions"].as_array().is_some_and(|a| !a.is_empty()));
    ctx.assert_clean();
}

#[test]
fn spec_writes_config_and_refuses_to_overwrite() {
    let ctx = Ctx::new("spec", &["true"]);
    let d = ctx.dir().join("newbundle");
    fs::create_dir(&d).unwrap();
    ctx.ok(&["spec", "-b", d.to_str().unwrap()]);
    let text = fs::read_to_string(d.join("config.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["ociVersion"].as_str().unwrap().starts_with("1."));
    assert_eq!(v["process"]["args"], serde_json::json!(["sh"]));
    assert_eq!(v["process"]["terminal"], true);
    assert_eq!(v["root"]["path"], "rootfs");
    let ns = v["linux"]["namespaces"].to_string();
    assert!(!ns.contains("\"user\""), "{ns}");
    // Refuses to overwrite, and leaves the file alone.
    let line = expect_error(&ctx, &["spec", "-b", d.to_str().unwrap()], &["exists"]);
    assert!(line.contains("config.json"), "{line}");
    assert_eq!(fs::read_to_string(d.join("config.json")).unwrap(), text);
    // Default bundle: the current directory.
    let d2 = ctx.dir().join("cwdbundle");
    fs::create_dir(&d2).unwrap();
    let mut c = ctx.command(&["spec"]);
    c.current_dir(&d2);
    assert!(c.status().unwrap().success());
    assert!(d2.join("config.json").is_file());
    ctx.assert_clean();
}

#[test]
fn spec_rootless_has_a_user_namespace() {
    let ctx = Ctx::new("specrootless", &["true"]);
    let d = ctx.dir().join("rl");
    fs::create_dir(&d).unwrap();
    ctx.ok(&["spec", "--rootless", "-b", d.to_str().unwrap()]);
    let v: Value =
        serde_json::from_str(&fs::read_to_string(d.join("config.json")).unwrap()).unwrap();
    let ns: Vec<&str> = v["linux"]["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["type"].as_str())
        .collect();
    assert!(ns.contains(&"user"), "{ns:?}");
    assert!(
        !ns.contains(&"network"),
        "rootless spec has a network ns: {ns:?}"
    );
    let uid_map = &v["linux"]["uidMappings"];
    assert_eq!(uid_map[0]["containerID"], 0, "{v}");
    assert_eq!(uid_map[0]["size"], 1, "{v}");
    assert!(v["linux"]["gidMappings"].is_array());
    ctx.assert_clean();
}

#[test]
fn list_table_json_quiet() {
    let ctx = Ctx::new("list", &["sleep", "60"]);
    // Empty root: just the header / [] / nothing.
    let o = ctx.ok(&["list"]);
    assert_eq!(
        o.stdout.lines().collect::<Vec<_>>(),
        ["ID   PID   STATUS   BUNDLE   CREATED   OWNER"],
        "{o}"
    );
    let o = ctx.ok(&["list", "--format", "json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&o.stdout).unwrap(),
        serde_json::json!([])
    );
    assert_eq!(ctx.ok(&["list", "-q"]).stdout, "");

    let a = ctx.id("a");
    let b = ctx.id("b");
    ctx.ok(&["create", &a]);
    ctx.run_detached(&b);
    let pid_a = ctx.state(&a)["pid"].as_i64().unwrap();
    let pid_b = ctx.state(&b)["pid"].as_i64().unwrap();

    let o = ctx.ok(&["list"]);
    let rows: Vec<Vec<&str>> = o
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{o}");
    assert_eq!(
        rows[0],
        ["ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"]
    );
    let bundle = ctx.bundle.to_str().unwrap();
    assert_eq!(
        rows[1][..4],
        [a.as_str(), &pid_a.to_string(), "created", bundle]
    );
    assert_eq!(
        rows[2][..4],
        [b.as_str(), &pid_b.to_string(), "running", bundle]
    );
    assert_eq!(rows[1][5], "root");

    let o = ctx.ok(&["list", "--format", "json"]);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 2);
    assert_eq!(arr[0]["id"], a.as_str());
    assert_eq!(arr[0]["status"], "created");
    assert_eq!(arr[1]["id"], b.as_str());
    assert_eq!(arr[1]["status"], "running");
    assert_eq!(arr[1]["pid"], pid_b);

    let o = ctx.ok(&["list", "-q"]);
    assert_eq!(o.stdout, format!("{a}\n{b}\n"));

    ctx.ok(&["delete", "--force", &a]);
    ctx.ok(&["delete", "--force", &b]);
    assert_eq!(ctx.ok(&["list", "-q"]).stdout, "");
    ctx.assert_clean();
}

#[test]
fn state_reports_annotations() {
    let mut ctx = Ctx::new("annot", &["sleep", "60"]);
    ctx.spec["annotations"] = serde_json::json!({"org.example.k": "v1"});
    ctx.write_spec();
    let id = ctx.id("c");
    ctx.ok(&["create", &id]);
    let st = ctx.state(&id);
    assert_eq!(st["annotations"]["org.example.k"], "v1", "{st}");
    ctx.ok(&["delete", "--force", &id]);
    ctx.assert_clean();
}
