//! `shadow diff`: every kind of change, in each output form, compared with what git says about
//! the same change.

use std::process::Command;

use serde_json::Value;
use shadow_integration_tests::shadow::{assert_no_ansi, Project};

/// Every change type: modify, add, delete, delete a directory (with a subdirectory), chmod,
/// new symlink, file replaced by a directory.
const SCRIPT: &str = "echo more >> modify.txt; echo new > add.txt; rm delete.txt; rm -r dir; \
                      chmod 755 chmod.sh; ln -s keep.txt link; rm rep; mkdir rep; echo inner > rep/f";

fn project(tag: &str) -> Project {
    let p = Project::empty(tag);
    p.write("modify.txt", "a\n");
    p.write("delete.txt", "d\n");
    p.write("dir/a", "1\n");
    p.write("dir/sub/b", "1\n2\n");
    p.write("chmod.sh", "x\n");
    p.write("rep", "r\n");
    p.write("keep.txt", "k\n");
    p.commit();
    p
}

/// What `git diff --cached ARGS` says about SCRIPT run on a copy of the project.
fn git_says(p: &Project, args: &[&str]) -> String {
    let copy = p.replay(SCRIPT);
    let git = |a: &[&str]| {
        let o = Command::new("git")
            .args(a)
            .current_dir(&copy)
            .env("GIT_PAGER", "cat")
            .output()
            .unwrap();
        assert!(o.status.success(), "git {a:?}");
        String::from_utf8(o.stdout).unwrap()
    };
    git(&["add", "-A"]);
    let mut a = vec!["diff", "--cached", "--no-color"];
    a.extend_from_slice(args);
    git(&a)
}

const NAME_STATUS: &str = "A\tadd.txt\nM\tchmod.sh\nD\tdelete.txt\nD\tdir/a\nD\tdir/sub/b\nA\tlink\nM\tmodify.txt\nD\trep\nA\trep/f\n";

#[test]
fn name_status_of_every_change_type() {
    let p = project("diff-ns");
    p.session(SCRIPT);
    let out = p.ok(&["diff", "--name-status"]);
    assert_eq!(out.stdout, NAME_STATUS);
    assert_eq!(
        out.stdout,
        git_says(&p, &["--name-status"]),
        "differs from git"
    );
}

#[test]
fn stat_of_every_change_type() {
    let p = project("diff-stat");
    p.session(SCRIPT);
    let out = p.ok(&["diff", "--stat"]);
    let last = out.stdout.lines().last().unwrap();
    assert_eq!(
        last, " 9 files changed, 4 insertions(+), 5 deletions(-)",
        "{out}"
    );
    assert!(out.stdout.contains(" chmod.sh   | 0\n"), "{out}");
    assert!(out.stdout.contains(" modify.txt | 1 +\n"), "{out}");
    assert!(out.stdout.contains(" dir/sub/b  | 2 --\n"), "{out}");
    assert_eq!(out.stdout, git_says(&p, &["--stat"]), "differs from git");
}

#[test]
fn patch_matches_git_without_index_lines() {
    let p = project("diff-patch");
    p.session(SCRIPT);
    let out = p.ok(&["diff"]);
    let git: String = git_says(&p, &[])
        .lines()
        .filter(|l| !l.starts_with("index "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(out.stdout, git);
    assert!(
        out.stdout.contains("old mode 100644\nnew mode 100755\n"),
        "{out}"
    );
    assert!(out.stdout.contains("new file mode 120000\n"), "{out}");
    assert!(
        out.stdout
            .contains("+keep.txt\n\\ No newline at end of file\n"),
        "{out}"
    );
}

#[test]
fn paths_filter() {
    let p = project("diff-paths");
    p.session(SCRIPT);
    let out = p.ok(&["diff", "--name-status", "--", "dir", "rep"]);
    assert_eq!(out.stdout, "D\tdir/a\nD\tdir/sub/b\nD\trep\nA\trep/f\n");
    let out = p.ok(&["diff", "--name-status", "--", "modify.txt"]);
    assert_eq!(out.stdout, "M\tmodify.txt\n");
    let out = p.ok(&["diff", "--stat", "--", "dir/sub"]);
    assert_eq!(
        out.stdout,
        " dir/sub/b | 2 --\n 1 file changed, 2 deletions(-)\n"
    );
    let out = p.ok(&["diff", "--", "modify.txt"]);
    assert!(
        out.stdout
            .starts_with("diff --git a/modify.txt b/modify.txt\n"),
        "{out}"
    );
    assert_eq!(out.stdout.matches("diff --git").count(), 1, "{out}");
    // A path with no changes: nothing.
    let out = p.ok(&["diff", "--name-status", "--", "keep.txt"]);
    assert_eq!(out.stdout, "");
}

#[test]
fn json_lists_kinds() {
    let p = project("diff-json");
    p.session(SCRIPT);
    let out = p.ok(&["diff", "--json"]);
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"));
    let entries = v["entries"].as_array().unwrap();
    let get = |path: &str| {
        entries
            .iter()
            .find(|e| e["path"] == path)
            .unwrap_or_else(|| panic!("{path} not in {v}"))
    };
    for (path, kind, status) in [
        ("add.txt", "added", "A"),
        ("modify.txt", "modified", "M"),
        ("delete.txt", "deleted", "D"),
        ("dir/a", "deleted", "D"),
        ("dir/sub/b", "deleted", "D"),
        ("link", "added", "A"),
        ("rep/f", "added", "A"),
    ] {
        let e = get(path);
        assert_eq!(e["kind"], kind, "{e}");
        assert_eq!(e["status"], status, "{e}");
    }
    assert_eq!(get("dir")["old_type"], "dir");
    assert_eq!(get("dir")["kind"], "deleted");
    let link = get("link");
    assert_eq!(link["new_type"], "symlink");
    assert_eq!(link["new_symlink_target"], "keep.txt");
    let chmod = get("chmod.sh");
    assert_eq!(chmod["old_mode"], "100644");
    assert_eq!(chmod["new_mode"], "100755");
    assert_ne!(chmod["kind"], "modified", "content is unchanged: {chmod}");
    let rep = get("rep");
    assert_eq!(rep["old_type"], "file");
    assert_eq!(rep["new_type"], "dir");
    assert_eq!(v["totals"]["insertions"], 4);
    assert_eq!(v["totals"]["deletions"], 5);
    // The whole-file sha256 of an added file is that of its content.
    assert_eq!(
        get("add.txt")["sha256"],
        "7aa7a5359173d05b63cfd682e3c38487f3cb4f7f1d60659fe59fab1505977d4c"
    );
}

#[test]
fn piped_output_has_no_ansi_escapes() {
    let p = project("diff-ansi");
    p.session(SCRIPT);
    for args in [
        vec!["diff"],
        vec!["diff", "--stat"],
        vec!["diff", "--name-status"],
        vec!["diff", "--json"],
        vec!["sessions"],
        vec!["show"],
    ] {
        let out = p.ok(&args);
        assert!(!out.stdout.is_empty(), "{args:?}: no output");
        assert_no_ansi(&format!("shadow {args:?}"), &out.stdout);
        assert_no_ansi(&format!("shadow {args:?} (stderr)"), &out.stderr);
    }
}

#[test]
fn no_changes_no_output() {
    let p = project("diff-empty");
    p.session("cat modify.txt > /dev/null");
    for f in ["--stat", "--name-status"] {
        let out = p.ok(&["diff", f]);
        assert_eq!(out.stdout, "", "{f}");
    }
    assert_eq!(p.ok(&["diff"]).stdout, "");
}
