//! Sessions: listing, showing, discarding; errors for unknown sessions and missing projects.

use shadow_integration_tests::shadow::{one_line, Project};

#[test]
fn sessions_and_show_describe_a_session() {
    let p = Project::new("sess-show");
    assert!(p.sessions_json().is_empty());
    assert_eq!(p.ok(&["sessions"]).stdout, "no sessions\n");
    let id = p.session("echo x > x.txt; echo y >> README.md");
    let list = p.sessions_json();
    assert_eq!(list.len(), 1);
    let m = &list[0];
    assert_eq!(m["id"], id.as_str());
    assert_eq!(m["project"], p.dir.to_str().unwrap());
    assert_eq!(
        m["command"],
        serde_json::json!(["sh", "-c", "echo x > x.txt; echo y >> README.md"])
    );
    assert_eq!(m["state"], "exited");
    assert_eq!(m["exit_status"], 0);
    let table = p.ok(&["sessions"]).stdout;
    assert!(table.lines().nth(1).unwrap().starts_with(&id), "{table}");
    let show = p.show_json(&id);
    assert_eq!(show["running"], false);
    assert_eq!(show["changes"]["totals"]["changes"], 2, "{show}");
    // Without an id: the newest session of the current project.
    let text = p.ok(&["show"]).stdout;
    assert!(text.starts_with(&format!("session   {id}\n")), "{text}");
    assert!(
        text.contains("changes   2 path(s), 0 protected\n"),
        "{text}"
    );
}

#[test]
fn discard_removes_the_session() {
    let p = Project::new("sess-discard");
    let keep = p.session("echo keep > k");
    let id = p.session("echo gone > g");
    assert!(p.session_dir(&id).is_dir());
    let out = p.ok(&["discard", &id]);
    assert!(
        out.stderr.contains(&format!("discarded session {id}")),
        "{out}"
    );
    assert_eq!(p.session_ids(), vec![keep.clone()]);
    assert!(!p.session_dir(&id).exists(), "session dir left behind");
    assert_eq!(
        p.store_sessions(),
        vec![keep.clone()],
        "store has leftovers"
    );
    // The project was never touched.
    assert!(!p.path("g").exists() && !p.path("k").exists());
    // Without an id: the newest of the project.
    p.ok(&["discard"]);
    assert!(p.sessions_json().is_empty());
    assert!(p.store_sessions().is_empty(), "{:?}", p.store_sessions());
    let out = p.sh(&["discard"]);
    assert_ne!(out.code(), Some(0));
    assert!(one_line(&out).contains("no sessions"), "{out}");
}

#[test]
fn unknown_session_is_one_clear_line() {
    let p = Project::new("sess-unknown");
    p.session("true");
    for verb in [
        vec!["show", "no-such-id"],
        vec!["diff", "no-such-id"],
        vec!["discard", "no-such-id"],
        vec!["apply", "--all", "--yes", "no-such-id"],
        vec!["apply", "--rollback", "--yes", "no-such-id"],
    ] {
        let out = p.sh(&verb);
        assert_eq!(out.code(), Some(1), "{verb:?}: {out}");
        assert_eq!(
            one_line(&out),
            "shadow: no session 'no-such-id'",
            "{verb:?}"
        );
        assert_eq!(out.stdout, "", "{verb:?}");
    }
    // A malformed id is refused the same way, without touching the file system.
    let out = p.sh(&["discard", "../../etc"]);
    assert_ne!(out.code(), Some(0));
    one_line(&out);
    assert_eq!(p.session_ids().len(), 1);
}

#[test]
fn missing_project_is_one_line() {
    let p = Project::new("sess-noproject");
    let out = p.sh(&[
        "run",
        "--project",
        "/nonexistent-shadow-etest",
        "--",
        "true",
    ]);
    assert_eq!(out.code(), Some(1), "{out}");
    assert_eq!(
        one_line(&out),
        "shadow: project /nonexistent-shadow-etest does not exist"
    );
    let out = p.sh(&[
        "run",
        "--project",
        p.path("README.md").to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_ne!(out.code(), Some(0), "{out}");
    assert!(one_line(&out).contains("is not a directory"), "{out}");
    assert!(p.sessions_json().is_empty());
    assert!(p.store_sessions().is_empty(), "{:?}", p.store_sessions());
}

#[test]
fn failed_start_leaves_no_session() {
    let p = Project::new("sess-badrootfs");
    let out = p.sh(&["run", "--rootfs", "/nonexistent-rootfs", "--", "true"]);
    assert_eq!(out.code(), Some(1), "{out}");
    assert_eq!(
        one_line(&out),
        "shadow: rootfs /nonexistent-rootfs does not exist"
    );
    assert!(p.sessions_json().is_empty());
    assert!(p.store_sessions().is_empty(), "{:?}", p.store_sessions());
}

#[test]
fn moved_project_is_reported() {
    let p = Project::new("sess-moved");
    let id = p.session("echo x >> README.md");
    let moved = p.base().join("moved");
    std::fs::rename(&p.dir, &moved).unwrap();
    let want = format!(
        "shadow: session {id}'s project {} no longer exists",
        p.dir.display()
    );
    for verb in [
        vec!["diff", &id],
        vec!["diff", "--stat", &id],
        vec!["apply", "--all", "--yes", &id],
    ] {
        let mut c = p.cmd(&verb);
        c.current_dir(&moved);
        let out = p.out(c);
        assert_eq!(out.code(), Some(1), "{verb:?}: {out}");
        assert_eq!(one_line(&out), want, "{verb:?}");
    }
    let mut c = p.cmd(&["show", &id]);
    c.current_dir(&moved);
    let out = p.out(c).ok();
    assert!(out.stdout.contains("(project no longer exists)"), "{out}");
    // In the moved directory there is no session for it.
    let mut c = p.cmd(&["diff"]);
    c.current_dir(&moved);
    let out = p.out(c);
    assert_ne!(out.code(), Some(0));
    assert_eq!(
        one_line(&out),
        format!("shadow: no sessions for project {}", moved.display())
    );
    // Moved back, everything works again.
    std::fs::rename(&moved, &p.dir).unwrap();
    assert_eq!(
        p.ok(&["diff", "--name-status", &id]).stdout,
        "M\tREADME.md\n"
    );
    // The moved-away files were not touched.
    assert_eq!(p.read("README.md"), "# demo\n\nA small project.\n");
}
