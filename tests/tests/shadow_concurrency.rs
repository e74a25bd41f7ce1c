//! Several shadow processes on one project at once.

use std::fs;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

use shadow_integration_tests::shadow::{assert_same_tree, snapshot, tree_diff, Project};

#[test]
fn two_sessions_of_one_project_run_at_once() {
    let p = Project::new("conc-run");
    let script = |me: &str, other: &str| {
        format!(
            "echo {me} > {me}.txt; echo {me} >> README.md; sleep 1; \
             cat {me}.txt; test -e {other}.txt && echo SEES-{other} || echo alone; cat README.md | tail -1"
        )
    };
    let a = p.spawn(&["run", "--", "sh", "-c", &script("a", "b")]);
    let b = p.spawn(&["run", "--", "sh", "-c", &script("b", "a")]);
    let oa = a.wait(Duration::from_secs(30));
    let ob = b.wait(Duration::from_secs(30));
    assert_eq!(oa.code(), Some(0), "{oa}");
    assert_eq!(ob.code(), Some(0), "{ob}");
    assert_eq!(oa.stdout, "a\nalone\na\n");
    assert_eq!(ob.stdout, "b\nalone\nb\n");
    let list = p.sessions_json();
    assert_eq!(list.len(), 2);
    assert_ne!(list[0]["id"], list[1]["id"]);
    assert_ne!(list[0]["upper"], list[1]["upper"]);
    // Each session holds exactly its own change.
    for m in &list {
        let id = m["id"].as_str().unwrap();
        let me = if m["command"][2].as_str().unwrap().starts_with("echo a") {
            "a"
        } else {
            "b"
        };
        let ns = p.ok(&["diff", "--name-status", id]);
        assert_eq!(ns.stdout, format!("M\tREADME.md\nA\t{me}.txt\n"), "{id}");
    }
    assert!(!p.path("a.txt").exists() && !p.path("b.txt").exists());
}

/// A script creating `n` files `<tag>-<i>.txt` and one more file, all its own.
fn many_files(tag: &str, n: usize) -> String {
    format!("for i in $(seq {n}); do echo {tag}-$i > {tag}-$i.txt; done; echo {tag} >> docs/guide.txt.{tag}")
}

#[test]
fn concurrent_applies_never_half_apply() {
    let p = Project::new("conc-apply");
    let (sa, sb) = (many_files("a", 300), many_files("b", 300));
    let base = snapshot(&p.dir);
    let want_a = snapshot(&p.replay(&sa));
    let want_b = snapshot(&p.replay(&sb));
    let want_ab = snapshot(&p.replay(&format!("{sa}; {sb}")));
    let ida = p.session(&sa);
    let idb = p.session(&sb);
    let a = p.spawn(&["apply", "--all", "--yes", &ida]);
    let b = p.spawn(&["apply", "--all", "--yes", &idb]);
    let oa = a.wait(Duration::from_secs(60));
    let ob = b.wait(Duration::from_secs(60));
    for o in [&oa, &ob] {
        assert!(
            o.code() == Some(0) || o.stderr.contains("lock is held"),
            "neither applied nor refused by the lock: {o}"
        );
    }
    eprintln!("concurrent applies: a {}, b {}", oa.status, ob.status);
    let got = snapshot(&p.dir);
    let want = match (oa.code() == Some(0), ob.code() == Some(0)) {
        (true, true) => &want_ab,
        (true, false) => &want_a,
        (false, true) => &want_b,
        (false, false) => &base,
    };
    let d = tree_diff(want, &got);
    assert!(
        d.is_empty(),
        "project is not what the successful applies make it (a: {}, b: {}):\n  {}",
        oa.status,
        ob.status,
        d.join("\n  ")
    );
    // The refused one can be applied afterwards.
    if oa.code() != Some(0) {
        p.ok(&["apply", "--all", "--yes", &ida]);
    }
    if ob.code() != Some(0) {
        p.ok(&["apply", "--all", "--yes", &idb]);
    }
    assert_same_tree("after both applies", &want_ab, &snapshot(&p.dir));
}

/// The journal directories of the store.
fn journals(p: &Project) -> Vec<PathBuf> {
    fs::read_dir(p.store.join("projects"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("journal"))
        .filter(|j| j.is_dir())
        .collect()
}

/// While an apply holds a project's lock, apply and rollback of that project are refused, and
/// nothing else is blocked: sessions, diff, run.
#[test]
fn a_held_apply_lock_refuses_only_writers() {
    let p = Project::new("conc-lock");
    p.session("echo one >> README.md");
    p.ok(&["apply", "--all", "--yes"]);
    let id = p.session("echo two > two.txt");
    let j = journals(&p);
    assert_eq!(j.len(), 1, "{j:?}");
    let lock = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(j[0].join("lock"))
        .unwrap();
    // SAFETY: flock on a descriptor we own, open for the whole call.
    let locked = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(locked, 0, "cannot take the journal lock");
    let before = snapshot(&p.dir);

    let out = p.sh(&["apply", "--all", "--yes", &id]);
    assert_ne!(out.code(), Some(0), "apply ran under a held lock: {out}");
    assert!(out.stderr.contains("lock is held"), "{out}");
    let out = p.sh(&["apply", "--rollback", "--yes"]);
    assert_ne!(out.code(), Some(0), "rollback ran under a held lock: {out}");
    assert!(out.stderr.contains("lock is held"), "{out}");
    assert_same_tree("project under a held lock", &before, &snapshot(&p.dir));

    for verb in [
        vec!["sessions"],
        vec!["diff", "--name-status"],
        vec!["show", &id],
    ] {
        let out = p.sh(&verb);
        assert_eq!(
            out.code(),
            Some(0),
            "{verb:?} blocked by another project's apply lock: {out}"
        );
    }
    let out = p.run("echo three > three.txt");
    assert_eq!(out.code(), Some(0), "run blocked by the apply lock: {out}");
    drop(lock);
    p.ok(&["apply", "--all", "--yes", &id]);
    assert_eq!(p.read("two.txt"), "two\n");
}
