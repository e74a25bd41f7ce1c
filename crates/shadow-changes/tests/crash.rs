//! Crash safety: a child process applies with `SHADOW_APPLY_CRASH_AFTER=N`
//! (it aborts after its N-th file system mutation), then `recover` runs and
//! the project must be exactly as before or exactly as after.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::json;
use shadow_changes::{
    apply, record_base, recover, rollback, scan, ApplyOptions, ApplyRequest, BaseRecord, ChangeSet,
    RecoverOutcome, RollbackOptions, CRASH_ENV,
};
use tempfile::TempDir;

const CHILD_ENV: &str = "SHADOW_CHANGES_TEST_CRASH_CHILD";

/// Not a test of its own: the body the parent runs in a child process.
#[test]
fn crash_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let spec: serde_json::Value = serde_json::from_str(&fs::read_to_string(spec).unwrap()).unwrap();
    let p = |k: &str| PathBuf::from(spec[k].as_str().unwrap());
    let cs: ChangeSet = serde_json::from_str(&fs::read_to_string(p("changes")).unwrap()).unwrap();
    let base = BaseRecord::load(&p("base")).unwrap();
    apply(&ApplyRequest {
        project: &p("project"),
        lower_view: &p("lower"),
        upper: &p("upper"),
        changes: &cs,
        selection: None,
        base: &base,
        journal_dir: &p("journal"),
        options: ApplyOptions {
            force: false,
            include_protected: true,
        },
    })
    .unwrap();
}

fn populate(l: &Path) {
    write(l.join("mod.txt"), "one\ntwo\n");
    write(l.join("gone.txt"), "bye\n");
    write(l.join("run.sh"), "#!/bin/sh\n");
    symlink("mod.txt", l.join("link"));
    write(l.join("dir2file/a"), "a\n");
    write(l.join("file2dir"), "f\n");
    write(l.join("opaque/old"), "o\n");
    fs::create_dir(l.join("chmoddir")).unwrap();
}

fn work(ov: &Overlay) {
    write(ov.m("mod.txt"), "one\nTWO\n");
    fs::remove_file(ov.m("gone.txt")).unwrap();
    chmod(ov.m("run.sh"), 0o755);
    fs::remove_file(ov.m("link")).unwrap();
    symlink("run.sh", ov.m("link"));
    fs::remove_dir_all(ov.m("dir2file")).unwrap();
    write(ov.m("dir2file"), "file now\n");
    fs::remove_file(ov.m("file2dir")).unwrap();
    write(ov.m("file2dir/x"), "x\n");
    fs::remove_dir_all(ov.m("opaque")).unwrap();
    write(ov.m("opaque/new"), "n\n");
    write(ov.m("new/deep/file"), "new\n");
    chmod(ov.m("chmoddir"), 0o700);
}

#[test]
fn crash_at_every_mutation_then_recover_is_before_or_after() {
    let mut ov = Overlay::new(populate);
    work(&ov);
    let after_dir = TempDir::new().unwrap();
    copy_tree(&ov.merged, after_dir.path());
    ov.unmount();
    let before = snapshot(&ov.lower);
    let after = snapshot(after_dir.path());
    let cs = scan(&ov.lower, &ov.upper).unwrap();
    let base = record_base(&ov.lower, &cs).unwrap();
    let work_dir = TempDir::new().unwrap();
    let changes = work_dir.path().join("changes.json");
    fs::write(&changes, serde_json::to_string(&cs).unwrap()).unwrap();
    let base_path = work_dir.path().join("base.json");
    base.save(&base_path).unwrap();

    // One clean run to learn how many mutations an apply performs.
    let total = {
        let project = TempDir::new().unwrap();
        copy_tree(&ov.lower, project.path());
        let journal = TempDir::new().unwrap();
        let r = apply(&ApplyRequest {
            project: project.path(),
            lower_view: &ov.lower,
            upper: &ov.upper,
            changes: &cs,
            selection: None,
            base: &base,
            journal_dir: journal.path(),
            options: ApplyOptions {
                force: false,
                include_protected: true,
            },
        })
        .unwrap();
        assert_eq!(snapshot(project.path()), after);
        r.mutations
    };
    assert!(total > 20, "expected many mutations, got {total}");

    let exe = std::env::current_exe().unwrap();
    for n in 1..=total + 1 {
        let project = TempDir::new().unwrap();
        copy_tree(&ov.lower, project.path());
        let journal = TempDir::new().unwrap();
        let spec = work_dir.path().join(format!("spec-{n}.json"));
        fs::write(
            &spec,
            json!({
                "project": project.path(),
                "lower": ov.lower,
                "upper": ov.upper,
                "changes": changes,
                "base": base_path,
                "journal": journal.path(),
            })
            .to_string(),
        )
        .unwrap();
        let out = Command::new(&exe)
            .args(["--exact", "crash_child", "--test-threads=1", "--nocapture"])
            .env(CHILD_ENV, &spec)
            .env(CRASH_ENV, n.to_string())
            .output()
            .unwrap();
        if n <= total {
            assert!(
                !out.status.success(),
                "child should have aborted at mutation {n}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        } else {
            assert!(
                out.status.success(),
                "child failed: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        let outcome = recover(journal.path()).unwrap();
        let snap = snapshot(project.path());
        if n < total {
            assert_eq!(
                snap, before,
                "crash after mutation {n} of {total}: not restored to before"
            );
            if n > 4 {
                assert!(
                    matches!(
                        outcome,
                        RecoverOutcome::UndidApply { .. } | RecoverOutcome::Clean
                    ),
                    "{outcome:?}"
                );
            }
        } else {
            assert_eq!(
                snap, after,
                "crash after the final mutation {n}: apply should be complete"
            );
            assert_eq!(outcome, RecoverOutcome::Clean);
            // And the completed apply can still be rolled back exactly.
            rollback(journal.path(), RollbackOptions::default()).unwrap();
            assert_eq!(snapshot(project.path()), before);
        }
        // Recovering again is a no-op.
        assert_eq!(recover(journal.path()).unwrap(), RecoverOutcome::Clean);
        assert_eq!(snapshot(project.path()), before);
    }
}
