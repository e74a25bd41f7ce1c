//! Crash recovery of `shadow apply` through the CLI: the apply aborts after its N-th file system
//! mutation (`SHADOW_APPLY_CRASH_AFTER=N`); the next shadow command (of any verb) must leave the
//! project exactly as before the apply or exactly as after it, byte for byte.

use std::os::unix::process::ExitStatusExt;

use shadow_integration_tests::shadow::{assert_same_tree, snapshot, tree_diff, Project};

/// Every change type, so that each kind of undo is exercised.
const SCRIPT: &str = "echo more >> README.md; echo new > added.txt; rm docs/guide.txt; rm -r src; \
                      chmod 600 run.sh; ln -s README.md link; mkdir -p deep/er; echo x > deep/er/f; \
                      rm -r docs; echo now-a-file > docs";

fn crash_at_every_step(tag: &str, recover_with: &[&str]) {
    let p = Project::new(tag);
    let before = snapshot(&p.dir);
    let after = snapshot(&p.replay(SCRIPT));
    let id = p.session(SCRIPT);
    for n in 1..500 {
        let mut c = p.cmd(&["apply", "--all", "--yes", &id]);
        c.env("SHADOW_APPLY_CRASH_AFTER", n.to_string());
        let out = p.out(c);
        if out.code() == Some(0) {
            let crashes = n - 1;
            assert!(crashes > 3, "only {crashes} crash points");
            eprintln!("{tag}: {crashes} crash points, complete at N={n}");
            assert_same_tree(
                &format!("after a complete apply (N={n})"),
                &after,
                &snapshot(&p.dir),
            );
            // The completed apply can still be rolled back exactly.
            p.ok(&["apply", "--rollback", "--yes"]);
            assert_same_tree("after rollback", &before, &snapshot(&p.dir));
            return;
        }
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGABRT),
            "N={n}: expected an abort: {out}"
        );
        // Any shadow command recovers.
        let rec = p.sh(recover_with);
        assert_eq!(
            rec.code(),
            Some(0),
            "N={n}: recovery via {recover_with:?}: {rec}"
        );
        let got = snapshot(&p.dir);
        let to_before = tree_diff(&before, &got);
        let to_after = tree_diff(&after, &got);
        assert!(
            to_before.is_empty() || to_after.is_empty(),
            "N={n}: project half-applied after recovery:\n vs before:\n  {}\n vs after:\n  {}",
            to_before.join("\n  "),
            to_after.join("\n  ")
        );
        // No temporary files of the apply are left in the project.
        assert!(
            !got.keys()
                .any(|k| k.to_string_lossy().contains(".shadow-apply")),
            "N={n}: temporary files left: {:?}",
            got.keys().collect::<Vec<_>>()
        );
        if to_after.is_empty() {
            // Crashed after the commit point: it counts as applied; undo it to go on.
            p.ok(&["apply", "--rollback", "--yes"]);
            assert_same_tree("after rollback", &before, &snapshot(&p.dir));
        }
    }
    panic!("apply never completed");
}

#[test]
fn crash_recovered_by_sessions() {
    crash_at_every_step("recover-sessions", &["sessions"]);
}

#[test]
fn crash_recovered_by_diff() {
    crash_at_every_step("recover-diff", &["diff", "--stat"]);
}

#[test]
fn crash_recovered_by_the_next_apply() {
    // The next apply itself recovers first and then applies completely.
    let p = Project::new("recover-apply");
    let after = snapshot(&p.replay(SCRIPT));
    let id = p.session(SCRIPT);
    for n in [2, 5, 9] {
        let mut c = p.cmd(&["apply", "--all", "--yes", &id]);
        c.env("SHADOW_APPLY_CRASH_AFTER", n.to_string());
        let out = p.out(c);
        assert_eq!(out.status.signal(), Some(libc::SIGABRT), "N={n}: {out}");
        p.ok(&["apply", "--all", "--yes", &id]);
        assert_same_tree(
            &format!("apply after crash at N={n}"),
            &after,
            &snapshot(&p.dir),
        );
        p.ok(&["apply", "--rollback", "--yes"]);
    }
}
