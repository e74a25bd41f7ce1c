//! Scanning real overlayfs upper layers.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use shadow_changes::{scan, ChangeKind, ChangeSet, Error, FileType};

fn kinds(cs: &ChangeSet) -> Vec<(String, ChangeKind)> {
    cs.changes
        .iter()
        .map(|c| (c.path.to_string_lossy().into_owned(), c.kind))
        .collect()
}

fn lower_fixture(l: &Path) {
    write(l.join("keep.txt"), "same\n");
    write(l.join("touched.txt"), "touched\n");
    write(l.join("mod.txt"), "one\ntwo\nthree\n");
    write(l.join("gone.txt"), "bye\n");
    write(l.join("run.sh"), "#!/bin/sh\n");
    chmod(l.join("run.sh"), 0o644);
    write(l.join("opaque/old1"), "o1\n");
    write(l.join("opaque/old2"), "o2\n");
    write(l.join("opaque/sub/old3"), "o3\n");
    write(l.join("opaque/same"), "s\n");
    symlink("keep.txt", l.join("link"));
    symlink("keep.txt", l.join("link-same"));
    write(l.join("file2dir"), "f\n");
    write(l.join("dir2file/a"), "a\n");
    write(l.join("dir2file/b/c"), "c\n");
    write(l.join("file2link"), "x\n");
    write(l.join("deep/er/still.txt"), "s\n");
    write(l.join("deep/er/edit.txt"), "e\n");
    write(l.join("rmdir/x"), "x\n");
    write(l.join("rmdir/y/z"), "z\n");
    fs::create_dir(l.join("chmoddir")).unwrap();
    chmod(l.join("chmoddir"), 0o755);
}

#[test]
fn every_change_kind_through_a_real_overlay() {
    let mut ov = Overlay::new(lower_fixture);
    // Modify, delete, copy-up without change, chmod, symlinks.
    write(ov.m("mod.txt"), "one\nTWO\nthree\n");
    fs::remove_file(ov.m("gone.txt")).unwrap();
    // Copy-up without change: open for append, write nothing; chmod to the same mode.
    fs::OpenOptions::new()
        .append(true)
        .open(ov.m("touched.txt"))
        .unwrap();
    chmod(ov.m("touched.txt"), 0o644);
    chmod(ov.m("run.sh"), 0o755);
    fs::remove_file(ov.m("link")).unwrap();
    symlink("mod.txt", ov.m("link"));
    fs::remove_file(ov.m("link-same")).unwrap();
    symlink("keep.txt", ov.m("link-same"));
    symlink("../outside", ov.m("newlink"));
    // rm -rf a dir then recreate it → opaque.
    fs::remove_dir_all(ov.m("opaque")).unwrap();
    fs::create_dir(ov.m("opaque")).unwrap();
    write(ov.m("opaque/new"), "n\n");
    write(ov.m("opaque/same"), "s\n");
    // Type changes.
    fs::remove_file(ov.m("file2dir")).unwrap();
    write(ov.m("file2dir/inner"), "i\n");
    fs::remove_dir_all(ov.m("dir2file")).unwrap();
    write(ov.m("dir2file"), "now a file\n");
    fs::remove_file(ov.m("file2link")).unwrap();
    symlink("keep.txt", ov.m("file2link"));
    // Copy-up of parents only.
    write(ov.m("deep/er/edit.txt"), "E\n");
    // rm -rf without recreation.
    fs::remove_dir_all(ov.m("rmdir")).unwrap();
    // New dir, binary file, hard link.
    write(ov.m("newdir/sub/n.txt"), "new\n");
    write(ov.m("bin.dat"), b"\x00\x01\x02binary");
    fs::hard_link(ov.m("keep.txt"), ov.m("hard.txt")).unwrap();
    chmod(ov.m("chmoddir"), 0o700);
    ov.unmount();

    let cs = scan(&ov.lower, &ov.upper).unwrap();
    use ChangeKind::*;
    let expect: Vec<(String, ChangeKind)> = [
        ("bin.dat", Added),
        ("chmoddir", ModeChanged),
        ("deep/er/edit.txt", Modified),
        ("dir2file", TypeChanged),
        ("dir2file/a", Deleted),
        ("dir2file/b", Deleted),
        ("dir2file/b/c", Deleted),
        ("file2dir", TypeChanged),
        ("file2dir/inner", Added),
        ("file2link", TypeChanged),
        ("gone.txt", Deleted),
        ("hard.txt", Added),
        ("link", Modified),
        ("mod.txt", Modified),
        ("newdir", Added),
        ("newdir/sub", Added),
        ("newdir/sub/n.txt", Added),
        ("newlink", Added),
        ("opaque/new", Added),
        ("opaque/old1", Deleted),
        ("opaque/old2", Deleted),
        ("opaque/sub", Deleted),
        ("opaque/sub/old3", Deleted),
        ("rmdir", Deleted),
        ("rmdir/x", Deleted),
        ("rmdir/y", Deleted),
        ("rmdir/y/z", Deleted),
        ("run.sh", ModeChanged),
    ]
    .iter()
    .map(|(p, k)| (p.to_string(), *k))
    .collect();
    assert_eq!(kinds(&cs), expect);

    let get = |p: &str| cs.get(Path::new(p)).unwrap();
    assert!(get("bin.dat").binary);
    assert!(!get("mod.txt").binary);
    assert_eq!(
        (get("mod.txt").insertions, get("mod.txt").deletions),
        (1, 1)
    );
    assert_eq!(get("run.sh").old.as_ref().unwrap().mode, 0o644);
    assert_eq!(get("run.sh").new.as_ref().unwrap().mode, 0o755);
    assert_eq!(get("file2link").new_type(), Some(FileType::Symlink));
    assert_eq!(get("file2dir").new_type(), Some(FileType::Dir));
    assert_eq!(get("dir2file").old_type(), Some(FileType::Dir));
    assert_eq!(
        get("link").new.as_ref().unwrap().symlink_target,
        Some(PathBuf::from("mod.txt"))
    );
    assert_eq!(
        get("hard.txt").new_sha256.as_deref(),
        Some("a6328afc76e9db71da297ebff4b0d3e7a7eb3b01d917c05a6573fef121b6ecb6")
    );
    assert!(cs.changes.iter().all(|c| !c.protected));
    // Scanning is deterministic.
    assert_eq!(scan(&ov.lower, &ov.upper).unwrap(), cs);
}

#[test]
fn protected_paths_are_flagged() {
    let mut ov = Overlay::new(|l| {
        write(l.join(".git/config"), "[core]\n");
        write(l.join("src/main.rs"), "fn main() {}\n");
    });
    write(ov.m(".git/config"), "[core]\n\tfsmonitor = evil\n");
    write(ov.m(".git/hooks/pre-commit"), "#!/bin/sh\nevil\n");
    write(ov.m(".github/workflows/ci.yml"), "on: push\n");
    write(ov.m(".env"), "TOKEN=x\n");
    write(ov.m("app/.bashrc"), "evil\n");
    write(ov.m("src/main.rs"), "fn main() { println!(); }\n");
    ov.unmount();
    let cs = scan(&ov.lower, &ov.upper).unwrap();
    let prot: Vec<_> = cs
        .changes
        .iter()
        .map(|c| (c.path.to_string_lossy().into_owned(), c.protected))
        .collect();
    assert_eq!(
        prot,
        [
            (".env", true),
            (".git/config", true),
            (".git/hooks", true),
            (".git/hooks/pre-commit", true),
            (".github", false),
            (".github/workflows", true),
            (".github/workflows/ci.yml", true),
            ("app", false),
            ("app/.bashrc", true),
            ("src/main.rs", false),
        ]
        .map(|(p, b)| (p.to_string(), b))
    );
}

#[test]
fn xattr_whiteouts_and_user_opaque() {
    // Hand-built upper layer using the xattr forms.
    let t = tempfile::tempdir().unwrap();
    let (l, u) = (t.path().join("l"), t.path().join("u"));
    write(l.join("a"), "a\n");
    write(l.join("b"), "b\n");
    write(l.join("d/x"), "x\n");
    write(l.join("d/y"), "y\n");
    fs::create_dir_all(&u).unwrap();
    write(u.join("a"), "");
    rustix::fs::setxattr(
        u.join("a"),
        "trusted.overlay.whiteout",
        b"",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    write(u.join("b"), "");
    rustix::fs::setxattr(
        u.join("b"),
        "user.overlay.whiteout",
        b"",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    write(u.join("d/y"), "y\n");
    rustix::fs::setxattr(
        u.join("d"),
        "user.overlay.opaque",
        b"y",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    let cs = scan(&l, &u).unwrap();
    use ChangeKind::*;
    assert_eq!(
        kinds(&cs),
        [("a", Deleted), ("b", Deleted), ("d/x", Deleted)].map(|(p, k)| (p.to_string(), k))
    );
    // A char-device whiteout made by hand, and a whiteout of nothing.
    let u2 = t.path().join("u2");
    fs::create_dir_all(&u2).unwrap();
    for n in ["a", "nothing"] {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            u2.join(n),
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::empty(),
            0,
        )
        .unwrap();
    }
    let cs = scan(&l, &u2).unwrap();
    assert_eq!(kinds(&cs), [("a".to_string(), Deleted)]);
}

#[test]
fn redirect_dirs_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let (l, u) = (t.path().join("l"), t.path().join("u"));
    fs::create_dir_all(&l).unwrap();
    fs::create_dir_all(u.join("moved")).unwrap();
    rustix::fs::setxattr(
        u.join("moved"),
        "trusted.overlay.redirect",
        b"/orig",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    let e = scan(&l, &u).unwrap_err();
    assert!(matches!(e, Error::UnsupportedOverlay { .. }), "{e}");
    assert!(e.to_string().contains("moved"), "{e}");
}

#[test]
fn special_files_in_upper_are_reported() {
    let mut ov = Overlay::new(|_| {});
    rustix::fs::mknodat(
        rustix::fs::CWD,
        ov.m("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    ov.unmount();
    let cs = scan(&ov.lower, &ov.upper).unwrap();
    assert_eq!(cs.changes.len(), 1);
    assert_eq!(cs.changes[0].new_type(), Some(FileType::Fifo));
    assert_eq!(cs.changes[0].kind, ChangeKind::Added);
}

#[test]
fn path_filter() {
    let mut ov = Overlay::new(|l| write(l.join("src/a.rs"), "a\n"));
    write(ov.m("src/a.rs"), "A\n");
    write(ov.m("src/b.rs"), "b\n");
    write(ov.m("docs/x.md"), "x\n");
    write(ov.m("srcfoo"), "x\n");
    ov.unmount();
    let cs = scan(&ov.lower, &ov.upper).unwrap();
    let f = cs.filter(&["src"]);
    assert_eq!(
        kinds(&f).into_iter().map(|k| k.0).collect::<Vec<_>>(),
        ["src/a.rs", "src/b.rs"]
    );
    let f = cs.filter(&["src/b.rs", "docs"]);
    assert_eq!(
        kinds(&f).into_iter().map(|k| k.0).collect::<Vec<_>>(),
        ["docs", "docs/x.md", "src/b.rs"]
    );
    assert_eq!(cs.filter::<&str>(&[]).changes.len(), cs.changes.len());
}
