use super::*;

fn policy() -> Policy {
    Policy {
        version: VERSION,
        ..Default::default()
    }
}

#[test]
fn json_round_trip_and_positioned_errors() {
    let mut p = policy();
    p.read_only = vec!["/".into()];
    p.tcp_connect = Some(vec![443]);
    assert_eq!(Policy::from_json(&p.to_json()).unwrap(), p);
    let err = Policy::from_json(r#"{"version":1,"read_only":[3]}"#).unwrap_err();
    assert_eq!(
        err.0,
        "annotation run.shadow.landlock: at read_only[0]: invalid type: integer `3`, expected path string at line 1 column 27"
    );
    let err = Policy::from_json(r#"{"version":1,"deny":["etc"]}"#).unwrap_err();
    assert!(err.0.contains("must be absolute"), "{err}");
    let err = Policy::from_json(r#"{"version":2}"#).unwrap_err();
    assert!(err.0.contains("version 2 is not supported"), "{err}");
}

#[test]
fn kernel_requirements_fail_closed() {
    let mut p = policy();
    assert_eq!(p.required_abi(), 1);
    p.tcp_bind = Some(vec![]);
    assert_eq!(p.required_abi(), 4);
    p.scope_signals = true;
    assert_eq!(p.required_abi(), 6);
    assert_eq!(
        p.check_kernel(3).unwrap_err().0,
        "Landlock ABI 3 of this kernel cannot enforce TCP port rules (ABI 4), signal and abstract-socket scoping (ABI 6) (needs ABI 6); refusing (best effort was not asked for)"
    );
    assert!(p.check_kernel(7).is_ok());
    p.best_effort = true;
    assert!(p.check_kernel(0).is_ok());
}

#[test]
fn plan_carves_denied_paths_out_of_grants() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    std::fs::create_dir_all(r.join("home/.aws")).unwrap();
    std::fs::write(r.join("home/.aws/credentials"), "x").unwrap();
    std::fs::write(r.join("home/notes"), "x").unwrap();
    std::fs::create_dir_all(r.join("etc")).unwrap();
    std::os::unix::fs::symlink(r.join("home/.aws"), r.join("home/link")).unwrap();
    let mut p = policy();
    p.read_only = vec![r.to_path_buf()];
    p.deny = vec![r.join("home/.aws"), r.join("does-not-exist")];
    let got = plan(&p);
    let want = vec![
        PlannedRule {
            path: r.to_path_buf(),
            grant: Grant::ListOnly,
        },
        PlannedRule {
            path: r.join("etc"),
            grant: Grant::ReadOnly,
        },
        PlannedRule {
            path: r.join("home"),
            grant: Grant::ListOnly,
        },
        PlannedRule {
            path: r.join("home/notes"),
            grant: Grant::ReadOnly,
        },
    ];
    assert_eq!(got, want);
    // Without denials a grant is one rule.
    p.deny.clear();
    assert_eq!(plan(&p).len(), 1);
}

#[test]
fn only_a_mount_showing_nothing_counts_as_masked() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("secret");
    std::fs::write(&f, "").unwrap();
    // An empty file that is not a mount root, an empty directory, a missing path.
    assert_eq!(masked(&f), Some(false));
    assert_eq!(masked(d.path()), Some(false));
    assert_eq!(masked(&d.path().join("missing")), None);
    assert_eq!(masked(&f.join("below-a-file")), None);
    // /dev/null itself is not a mount root here (the real masks are tested through the
    // runtime, in tests/tests/runtime_landlock.rs).
    assert_eq!(masked(Path::new("/dev/null")), Some(false));
}
