//! Diff, stat, name-status and JSON rendering, checked against exact text
//! and against real git.

mod common;

use std::fs;

use common::*;
use shadow_changes::{
    render_diff, render_json, render_name_status, render_stat, report, scan, DiffOptions,
    StatOptions,
};

#[test]
fn exact_diff_text_for_a_small_fixture() {
    let mut ov = Overlay::new(|l| {
        write(l.join("a.txt"), "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n");
        write(l.join("del.txt"), "gone\n");
        write(l.join("mode.sh"), "echo\n");
        chmod(l.join("mode.sh"), 0o644);
        write(l.join("nonl.txt"), "x\ny");
        symlink("a.txt", l.join("ln"));
        write(l.join("bin"), b"\x00old");
    });
    write(ov.m("a.txt"), "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n11\n");
    fs::remove_file(ov.m("del.txt")).unwrap();
    chmod(ov.m("mode.sh"), 0o755);
    write(ov.m("nonl.txt"), "x\nz");
    fs::remove_file(ov.m("ln")).unwrap();
    symlink("nonl.txt", ov.m("ln"));
    write(ov.m("bin"), b"\x00new!");
    write(ov.m("new.txt"), "hello\n");
    write(ov.m("empty"), "");
    ov.unmount();
    let cs = scan(&ov.lower, &ov.upper).unwrap();
    let diff = render_diff(&cs, &DiffOptions::default()).unwrap();
    let expected = "\
diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -2,9 +2,10 @@
 2
 3
 4
-5
+five
 6
 7
 8
 9
 10
+11
diff --git a/bin b/bin
Binary files a/bin and b/bin differ
diff --git a/del.txt b/del.txt
deleted file mode 100644
--- a/del.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
diff --git a/empty b/empty
new file mode 100644
diff --git a/ln b/ln
--- a/ln
+++ b/ln
@@ -1 +1 @@
-a.txt
\\ No newline at end of file
+nonl.txt
\\ No newline at end of file
diff --git a/mode.sh b/mode.sh
old mode 100644
new mode 100755
diff --git a/new.txt b/new.txt
new file mode 100644
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+hello
diff --git a/nonl.txt b/nonl.txt
--- a/nonl.txt
+++ b/nonl.txt
@@ -1,2 +1,2 @@
 x
-y
\\ No newline at end of file
+z
\\ No newline at end of file
";
    assert_eq!(diff, expected);

    let colored = render_diff(&cs.filter(&["del.txt"]), &DiffOptions { color: true }).unwrap();
    assert_eq!(
        colored,
        "\x1b[1mdiff --git a/del.txt b/del.txt\x1b[m\n\
         \x1b[1mdeleted file mode 100644\x1b[m\n\
         \x1b[1m--- a/del.txt\x1b[m\n\
         \x1b[1m+++ /dev/null\x1b[m\n\
         \x1b[36m@@ -1 +0,0 @@\x1b[m\n\
         \x1b[31m-gone\x1b[m\n"
    );

    assert_eq!(
        render_name_status(&cs),
        "M\ta.txt\nM\tbin\nD\tdel.txt\nA\tempty\nM\tln\nM\tmode.sh\nA\tnew.txt\nM\tnonl.txt\n"
    );
}

/// Build a fixture through a real overlay, copy the merged view, and return
/// (overlay, after-copy dir).
fn git_fixture() -> (Overlay, tempfile::TempDir) {
    let body: String = (1..=40).map(|i| format!("{i}\n")).collect();
    let mut ov = Overlay::new(|l| {
        write(l.join("src/lib.rs"), &body);
        write(l.join("src/gone.rs"), "1\n2\n3\n");
        write(l.join("tool.sh"), "1\n");
        chmod(l.join("tool.sh"), 0o644);
        write(l.join("big.txt"), "0\n");
        write(l.join("image.png"), b"\x89PNG\x00\x00\x00old");
        symlink("src/lib.rs", l.join("link"));
        write(l.join("t2l"), "1\n2\n");
        write(l.join("olddir/a"), "1\n");
        write(l.join("olddir/b/c"), "1\n2\n");
        write(l.join("tab\there"), "1\n");
    });
    let mut changed = body
        .replace("10\n", "ten\n")
        .replace("30\n", "thirty\n31b\n");
    changed.push_str("41\n");
    write(ov.m("src/lib.rs"), &changed);
    fs::remove_file(ov.m("src/gone.rs")).unwrap();
    chmod(ov.m("tool.sh"), 0o755);
    let big: String = (0..300).map(|i| format!("{i} line\n")).collect();
    write(ov.m("big.txt"), big);
    write(ov.m("image.png"), b"\x89PNG\x00\x00\x00new content");
    fs::remove_file(ov.m("link")).unwrap();
    symlink("tool.sh", ov.m("link"));
    fs::remove_file(ov.m("t2l")).unwrap();
    symlink("src", ov.m("t2l"));
    fs::remove_dir_all(ov.m("olddir")).unwrap();
    write(
        ov.m("a/very/long/directory/name/that/goes/on/and/on/and/on/forever/file.txt"),
        "1\n2\n",
    );
    write(ov.m("new bin"), b"\x00\x01");
    write(ov.m("tab\there"), "1\n2\n");
    write(ov.m("caf\u{e9}.txt"), "1\n");
    let after = tempfile::tempdir().unwrap();
    copy_tree(&ov.merged, after.path());
    ov.unmount();
    (ov, after)
}

#[test]
fn stat_and_name_status_match_git() {
    // git is the reference these outputs must match: its absence is a failure, not a pass.
    assert!(have_git(), "git is required for this comparison");
    let (ov, after) = git_fixture();
    let cs = scan(&ov.lower, &ov.upper).unwrap();
    let git_stat = git_diff_trees(&ov.lower, after.path(), &["--stat"]);
    assert_eq!(render_stat(&cs, &StatOptions::default()), git_stat);
    let git_stat = git_diff_trees(&ov.lower, after.path(), &["--stat=120"]);
    assert_eq!(
        render_stat(
            &cs,
            &StatOptions {
                width: 120,
                color: false
            }
        ),
        git_stat
    );
    let git_stat = git_diff_trees(&ov.lower, after.path(), &["--stat=40"]);
    assert_eq!(
        render_stat(
            &cs,
            &StatOptions {
                width: 40,
                color: false
            }
        ),
        git_stat
    );
    let git_ns = git_diff_trees(&ov.lower, after.path(), &["--name-status"]);
    assert_eq!(render_name_status(&cs), git_ns);
}

#[test]
fn diff_matches_git_except_index_lines() {
    // git is the reference these outputs must match: its absence is a failure, not a pass.
    assert!(have_git(), "git is required for this comparison");
    let (ov, after) = git_fixture();
    let cs = scan(&ov.lower, &ov.upper).unwrap();
    let git: String = git_diff_trees(&ov.lower, after.path(), &[])
        .lines()
        .filter(|l| !l.starts_with("index "))
        .map(|l| format!("{l}\n"))
        .collect();
    let ours = render_diff(&cs, &DiffOptions::default()).unwrap();
    assert_eq!(ours, git);
}

#[test]
fn json_report_for_agents() {
    let mut ov = Overlay::new(|l| write(l.join("a"), "1\n2\n"));
    write(ov.m("a"), "1\n3\n4\n");
    write(ov.m(".env"), "K=v\n");
    ov.unmount();
    let cs = scan(&ov.lower, &ov.upper).unwrap();
    let r = report(&cs);
    assert_eq!(r.entries.len(), 2);
    let a = &r.entries[1];
    assert_eq!(a.path, "a");
    assert_eq!((a.insertions, a.deletions), (2, 1));
    assert_eq!(a.old_mode.as_deref(), Some("100644"));
    assert!(!a.protected);
    let env = &r.entries[0];
    assert!(env.protected);
    assert_eq!(env.status, Some('A'));
    let v: serde_json::Value = serde_json::from_str(&render_json(&cs)).unwrap();
    assert_eq!(v["entries"][1]["kind"], "modified");
    assert_eq!(v["entries"][0]["new_type"], "file");
    assert_eq!(
        v["entries"][0]["sha256"],
        shadow_changes::model::sha256_hex(b"K=v\n")
    );
    assert_eq!(v["totals"]["protected"], 1);
}
