//! Applying, rolling back and the safety checks, on real overlay sessions.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use common::*;
use shadow_changes::{
    applied_ids, apply, hunks, merge_hunks, record_base, recover, rollback, scan, ApplyOptions,
    ApplyRequest, BaseRecord, ChangeSet, Error, FileSelection, RecoverOutcome, RollbackOptions,
    Selection,
};
use tempfile::TempDir;

/// A finished session: overlay unmounted, change set scanned, base
/// recorded, and a copy of the merged view (what "after" must look like).
struct Session {
    ov: Overlay,
    cs: ChangeSet,
    base: BaseRecord,
    after: TempDir,
    journal: TempDir,
}

impl Session {
    fn new(populate: impl FnOnce(&Path), work: impl FnOnce(&Overlay)) -> Self {
        let mut ov = Overlay::new(populate);
        work(&ov);
        let after = TempDir::new().unwrap();
        copy_tree(&ov.merged, after.path());
        ov.unmount();
        let cs = scan(&ov.lower, &ov.upper).unwrap();
        let base = record_base(&ov.lower, &cs).unwrap();
        // Round-trip through the on-disk format, as shadow would.
        let bp = ov.dir.path().join("base.json");
        base.save(&bp).unwrap();
        let base = BaseRecord::load(&bp).unwrap();
        Session {
            ov,
            cs,
            base,
            after,
            journal: TempDir::new().unwrap(),
        }
    }

    fn project(&self) -> &Path {
        &self.ov.lower
    }

    fn apply(
        &self,
        sel: Option<&Selection>,
        options: ApplyOptions,
    ) -> shadow_changes::Result<shadow_changes::ApplyReport> {
        apply(&ApplyRequest {
            project: &self.ov.lower,
            lower_view: &self.ov.lower,
            upper: &self.ov.upper,
            changes: &self.cs,
            selection: sel,
            base: &self.base,
            journal_dir: self.journal.path(),
            options,
        })
    }
}

const ALL: ApplyOptions = ApplyOptions {
    force: false,
    include_protected: true,
};

fn populate(l: &Path) {
    write(l.join("keep.txt"), "same\n");
    write(l.join("mod.txt"), "one\ntwo\nthree\n");
    write(l.join("gone.txt"), "bye\n");
    write(l.join("run.sh"), "#!/bin/sh\n");
    chmod(l.join("run.sh"), 0o644);
    write(l.join("opaque/old1"), "o1\n");
    write(l.join("opaque/sub/old3"), "o3\n");
    write(l.join("opaque/same"), "s\n");
    symlink("keep.txt", l.join("link"));
    write(l.join("file2dir"), "f\n");
    write(l.join("dir2file/a"), "a\n");
    write(l.join("dir2file/b/c"), "c\n");
    write(l.join("file2link"), "x\n");
    symlink("keep.txt", l.join("link2file"));
    write(l.join("deep/er/edit.txt"), "e\n");
    write(l.join("rmdir/y/z"), "z\n");
    fs::create_dir(l.join("chmoddir")).unwrap();
    chmod(l.join("chmoddir"), 0o755);
    write(l.join("bin.dat"), b"\x00\x01old");
}

fn work(ov: &Overlay) {
    write(ov.m("mod.txt"), "one\nTWO\nthree\n");
    fs::remove_file(ov.m("gone.txt")).unwrap();
    chmod(ov.m("run.sh"), 0o755);
    fs::remove_file(ov.m("link")).unwrap();
    symlink("mod.txt", ov.m("link"));
    symlink("deep/er", ov.m("newlink"));
    fs::remove_dir_all(ov.m("opaque")).unwrap();
    fs::create_dir(ov.m("opaque")).unwrap();
    write(ov.m("opaque/new"), "n\n");
    write(ov.m("opaque/same"), "s\n");
    fs::remove_file(ov.m("file2dir")).unwrap();
    write(ov.m("file2dir/inner/x"), "i\n");
    fs::remove_dir_all(ov.m("dir2file")).unwrap();
    write(ov.m("dir2file"), "now a file\n");
    fs::remove_file(ov.m("file2link")).unwrap();
    symlink("keep.txt", ov.m("file2link"));
    fs::remove_file(ov.m("link2file")).unwrap();
    write(ov.m("link2file"), "was a link\n");
    write(ov.m("deep/er/edit.txt"), "E\n");
    fs::remove_dir_all(ov.m("rmdir")).unwrap();
    write(ov.m("newdir/sub/n.txt"), "new\n");
    write(ov.m("bin.dat"), b"\x00\x01new");
    fs::hard_link(ov.m("keep.txt"), ov.m("hard.txt")).unwrap();
    chmod(ov.m("chmoddir"), 0o700);
}

fn no_temp_files(root: &Path) {
    for p in snapshot(root).keys() {
        assert!(
            !p.to_string_lossy().contains(".shadow-apply-"),
            "temporary file left behind: {}",
            p.display()
        );
    }
}

#[test]
fn apply_all_then_rollback_byte_for_byte() {
    let s = Session::new(populate, work);
    let before = snapshot(s.project());
    let report = s.apply(None, ALL).unwrap();
    assert_eq!(report.applied.len(), s.cs.changes.len());
    assert!(report.mutations > 0);
    assert_eq!(snapshot(s.project()), snapshot(s.after.path()));
    // Content is copied, never hard-linked.
    assert_eq!(
        fs::metadata(s.project().join("hard.txt")).unwrap().nlink(),
        1
    );
    assert_eq!(
        applied_ids(s.journal.path()).unwrap(),
        vec![report.id.clone()]
    );
    assert_eq!(recover(s.journal.path()).unwrap(), RecoverOutcome::Clean);

    let rb = rollback(s.journal.path(), RollbackOptions::default()).unwrap();
    assert_eq!(rb.id, report.id);
    assert_eq!(snapshot(s.project()), before);
    no_temp_files(s.project());
    let e = rollback(s.journal.path(), RollbackOptions::default()).unwrap_err();
    assert!(matches!(e, Error::NothingToRollBack { .. }), "{e}");
}

#[test]
fn rollback_refuses_when_project_changed_since_apply() {
    let s = Session::new(populate, work);
    let before = snapshot(s.project());
    s.apply(None, ALL).unwrap();
    write(s.project().join("mod.txt"), "user edit\n");
    let e = rollback(s.journal.path(), RollbackOptions::default()).unwrap_err();
    assert!(matches!(e, Error::ChangedSinceApply { .. }), "{e}");
    assert!(e.to_string().contains("mod.txt"), "{e}");
    assert_eq!(
        fs::read_to_string(s.project().join("mod.txt")).unwrap(),
        "user edit\n"
    );
    rollback(s.journal.path(), RollbackOptions { force: true }).unwrap();
    assert_eq!(snapshot(s.project()), before);
}

#[test]
fn protected_paths_need_include_protected() {
    let s = Session::new(
        |l| write(l.join(".git/config"), "[core]\n"),
        |ov| {
            write(ov.m(".git/config"), "[core]\n\tfsmonitor = evil\n");
            write(ov.m(".git/hooks/pre-commit"), "#!/bin/sh\n");
            write(ov.m(".github/workflows/ci.yml"), "on: push\n");
            write(ov.m(".envrc"), "evil\n");
            write(ov.m("src/ok.rs"), "ok\n");
        },
    );
    let before = snapshot(s.project());
    let r = s.apply(None, ApplyOptions::default()).unwrap();
    assert_eq!(
        r.applied,
        [PathBuf::from(".github"), "src".into(), "src/ok.rs".into()]
    );
    assert_eq!(
        r.skipped_protected,
        [
            PathBuf::from(".envrc"),
            ".git/config".into(),
            ".git/hooks".into(),
            ".git/hooks/pre-commit".into(),
            ".github/workflows".into(),
            ".github/workflows/ci.yml".into(),
        ]
    );
    assert_eq!(
        fs::read_to_string(s.project().join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!s.project().join(".envrc").exists());
    rollback(s.journal.path(), RollbackOptions::default()).unwrap();
    assert_eq!(snapshot(s.project()), before);
    s.apply(None, ALL).unwrap();
    assert_eq!(snapshot(s.project()), snapshot(s.after.path()));
}

#[test]
fn hunk_selection_writes_base_plus_accepted_hunks() {
    let old: String = (1..=30).map(|i| format!("{i}\n")).collect();
    let line = |i: usize| match i {
        2 => "two\n".to_string(),
        15 => "fifteen\n".to_string(),
        28 => "twenty-eight\n".to_string(),
        i => format!("{i}\n"),
    };
    let new: String = (1..=30).map(line).collect();
    assert_eq!(hunks(&old, &new).len(), 3);
    let accepted: BTreeSet<usize> = [0, 2].into();
    let expect: String = (1..=30)
        .map(|i| if i == 15 { "15\n".to_string() } else { line(i) })
        .collect();
    assert_eq!(merge_hunks(&old, &new, &accepted), expect);
    assert_eq!(merge_hunks(&old, &new, &BTreeSet::new()), old);
    assert_eq!(merge_hunks(&old, &new, &[0, 1, 2].into()), new);
    // No trailing newline on either side.
    assert_eq!(merge_hunks("a\nb", "a\nc", &[0].into()), "a\nc");
    assert_eq!(merge_hunks("a\nb", "a\nc", &BTreeSet::new()), "a\nb");

    let (o2, n2) = (old.clone(), new.clone());
    let s = Session::new(
        move |l| {
            write(l.join("f.txt"), &o2);
            write(l.join("other.txt"), "x\n");
        },
        move |ov| {
            write(ov.m("f.txt"), &n2);
            write(ov.m("other.txt"), "y\n");
            write(ov.m("new.txt"), "n\n");
        },
    );
    let sel = Selection::reject_all()
        .with(
            "f.txt",
            FileSelection::Hunks {
                accepted: accepted.clone(),
                total: 3,
            },
        )
        .with("new.txt", FileSelection::Accept);
    // Serialisable: shadow review saves it, shadow apply loads it.
    let sp = s.ov.dir.path().join("sel.json");
    sel.save(&sp).unwrap();
    let sel = Selection::load(&sp).unwrap();
    let r = s.apply(Some(&sel), ALL).unwrap();
    assert_eq!(r.rejected, [PathBuf::from("other.txt")]);
    assert_eq!(
        fs::read_to_string(s.project().join("f.txt")).unwrap(),
        expect
    );
    assert_eq!(
        fs::read_to_string(s.project().join("other.txt")).unwrap(),
        "x\n"
    );
    assert_eq!(
        fs::read_to_string(s.project().join("new.txt")).unwrap(),
        "n\n"
    );

    // A stale hunk count is refused.
    rollback(s.journal.path(), RollbackOptions::default()).unwrap();
    let stale = Selection::reject_all().with("f.txt", FileSelection::Hunks { accepted, total: 2 });
    let e = s.apply(Some(&stale), ALL).unwrap_err();
    assert!(matches!(e, Error::Selection { .. }), "{e}");
}

#[test]
fn rejected_children_keep_their_directory() {
    let s = Session::new(
        |l| {
            write(l.join("d/a"), "a\n");
            write(l.join("d/b"), "b\n");
        },
        |ov| fs::remove_dir_all(ov.m("d")).unwrap(),
    );
    let sel = Selection::accept_all().with("d/b", FileSelection::Reject);
    let r = s.apply(Some(&sel), ALL).unwrap();
    assert_eq!(r.applied, [PathBuf::from("d/a")]);
    assert_eq!(r.rejected, [PathBuf::from("d"), "d/b".into()]);
    assert!(s.project().join("d/b").exists());
    assert!(!s.project().join("d/a").exists());
}

#[test]
fn drift_is_refused_naming_every_path_unless_forced() {
    let s = Session::new(
        |l| {
            write(l.join("a"), "a\n");
            write(l.join("b"), "b\n");
            write(l.join("c"), "c\n");
        },
        |ov| {
            write(ov.m("a"), "A\n");
            write(ov.m("b"), "B\n");
            write(ov.m("c"), "C\n");
            write(ov.m("new"), "n\n");
        },
    );
    // The user edits a, chmods b and creates new while the agent worked.
    write(s.project().join("a"), "user\n");
    chmod(s.project().join("b"), 0o600);
    write(s.project().join("new"), "user's own\n");
    let before = snapshot(s.project());
    let e = s.apply(None, ALL).unwrap_err();
    match &e {
        Error::Drift { paths } => {
            assert_eq!(paths, &[PathBuf::from("a"), "b".into(), "new".into()])
        }
        other => panic!("expected drift, got {other}"),
    }
    let msg = e.to_string();
    assert!(msg.contains("a, b, new"), "{msg}");
    assert_eq!(snapshot(s.project()), before);
    assert!(applied_ids(s.journal.path()).unwrap().is_empty());

    s.apply(
        None,
        ApplyOptions {
            force: true,
            include_protected: true,
        },
    )
    .unwrap();
    assert_eq!(snapshot(s.project()), snapshot(s.after.path()));
    // Rollback restores the user's drifted state exactly.
    rollback(s.journal.path(), RollbackOptions::default()).unwrap();
    assert_eq!(snapshot(s.project()), before);
}

#[test]
fn symlinked_project_dir_never_redirects_writes() {
    let outside = TempDir::new().unwrap();
    write(outside.path().join("x"), "outside\n");
    let s = Session::new(
        |l| write(l.join("sub/x"), "inside\n"),
        |ov| {
            write(ov.m("sub/x"), "agent\n");
            write(ov.m("sub/y"), "agent\n");
        },
    );
    // After the session, the project's sub becomes a symlink out.
    fs::remove_dir_all(s.project().join("sub")).unwrap();
    symlink(outside.path().to_str().unwrap(), s.project().join("sub"));
    let outside_before = snapshot(outside.path());
    for force in [false, true] {
        let e = s
            .apply(
                None,
                ApplyOptions {
                    force,
                    include_protected: true,
                },
            )
            .unwrap_err();
        assert!(matches!(e, Error::SymlinkInPath { .. }), "{e}");
        assert!(e.to_string().contains("sub/x"), "{e}");
        assert_eq!(snapshot(outside.path()), outside_before);
    }
    assert_eq!(recover(s.journal.path()).unwrap(), RecoverOutcome::Clean);
}

#[test]
fn escaping_symlinks_from_the_session_are_refused_unless_forced() {
    let s = Session::new(
        |_| {},
        |ov| {
            symlink("/etc", ov.m("abs"));
            fs::create_dir(ov.m("d")).unwrap();
            symlink("../../x", ov.m("d/rel"));
            symlink("../fine", ov.m("d/ok"));
        },
    );
    let e = s.apply(None, ALL).unwrap_err();
    assert!(matches!(e, Error::SymlinkEscape { .. }), "{e}");
    assert!(e.to_string().contains("abs"), "{e}");
    assert!(e.to_string().contains("outside the project"), "{e}");
    assert!(!s.project().join("abs").exists());
    s.apply(
        None,
        ApplyOptions {
            force: true,
            include_protected: true,
        },
    )
    .unwrap();
    assert_eq!(
        fs::read_link(s.project().join("abs")).unwrap(),
        Path::new("/etc")
    );
    assert_eq!(snapshot(s.project()), snapshot(s.after.path()));
}

#[test]
fn hardlinks_in_the_project_are_replaced_not_written_through() {
    let outside = TempDir::new().unwrap();
    let victim = outside.path().join("victim");
    write(&victim, "precious\n");
    let s = Session::new(
        |l| write(l.join("p.txt"), "precious\n"),
        |ov| write(ov.m("p.txt"), "agent\n"),
    );
    // Someone hard-links the project file to a file outside the project.
    fs::remove_file(s.project().join("p.txt")).unwrap();
    fs::hard_link(&victim, s.project().join("p.txt")).unwrap();
    s.apply(None, ALL).unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(
        fs::read_to_string(s.project().join("p.txt")).unwrap(),
        "agent\n"
    );
    assert_eq!(fs::metadata(s.project().join("p.txt")).unwrap().nlink(), 1);
}

#[test]
fn device_nodes_and_fifos_in_upper_are_refused() {
    for (name, ft, dev) in [
        ("fifo", rustix::fs::FileType::Fifo, 0),
        (
            "null",
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::makedev(1, 3),
        ),
        (
            "sda",
            rustix::fs::FileType::BlockDevice,
            rustix::fs::makedev(8, 0),
        ),
    ] {
        let s = Session::new(
            |_| {},
            |ov| {
                write(ov.m("fine.txt"), "x\n");
                rustix::fs::mknodat(
                    rustix::fs::CWD,
                    ov.m(name),
                    ft,
                    rustix::fs::Mode::from_raw_mode(0o666),
                    dev,
                )
                .unwrap();
            },
        );
        let e = s.apply(None, ALL).unwrap_err();
        assert!(matches!(e, Error::SpecialFile { .. }), "{e}");
        assert!(e.to_string().contains(name), "{e}");
        assert!(!s.project().join("fine.txt").exists());
        // Rejecting it lets the rest through.
        let sel = Selection::accept_all().with(name, FileSelection::Reject);
        s.apply(Some(&sel), ALL).unwrap();
        assert!(s.project().join("fine.txt").exists());
        assert!(!s.project().join(name).exists());
    }
}

#[test]
fn setuid_setgid_and_sticky_bits_are_stripped() {
    let s = Session::new(
        |l| write(l.join("tool"), "#!/bin/sh\n"),
        |ov| {
            chmod(ov.m("tool"), 0o4755);
            write(ov.m("new"), "x\n");
            chmod(ov.m("new"), 0o2755);
            fs::create_dir(ov.m("dir")).unwrap();
            chmod(ov.m("dir"), 0o1777);
        },
    );
    s.apply(None, ALL).unwrap();
    let mode = |p: &str| fs::symlink_metadata(s.project().join(p)).unwrap().mode() & 0o7777;
    assert_eq!(mode("tool"), 0o755);
    assert_eq!(mode("new"), 0o755);
    assert_eq!(mode("dir"), 0o777);
}

#[test]
fn concurrent_apply_gets_a_clear_error() {
    let s = Session::new(|_| {}, |ov| write(ov.m("a"), "a\n"));
    fs::create_dir_all(s.journal.path()).unwrap();
    let lock = fs::File::create(s.journal.path().join("lock")).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    let e = s.apply(None, ALL).unwrap_err();
    assert!(matches!(e, Error::Locked { .. }), "{e}");
    let e = rollback(s.journal.path(), RollbackOptions::default()).unwrap_err();
    assert!(matches!(e, Error::Locked { .. }), "{e}");
    drop(lock);
    s.apply(None, ALL).unwrap();
}

#[test]
fn error_messages_are_one_line_and_name_the_path() {
    let s = Session::new(|_| {}, |ov| symlink("/etc/passwd", ov.m("pw")));
    let e = s.apply(None, ALL).unwrap_err().to_string();
    assert!(!e.contains('\n'), "{e}");
    assert!(e.starts_with("pw: "), "{e}");
}

#[test]
fn a_failure_midway_undoes_what_was_done() {
    let s = Session::new(
        |l| {
            write(l.join("a.txt"), "a\n");
            write(l.join("d/x"), "x\n");
        },
        |ov| {
            write(ov.m("a.txt"), "A\n");
            fs::remove_dir_all(ov.m("d")).unwrap();
            write(ov.m("z.txt"), "z\n");
        },
    );
    // An untracked file appears in d after the session: rmdir d must fail.
    write(s.project().join("d/untracked"), "mine\n");
    let before = snapshot(s.project());
    let e = s.apply(None, ALL).unwrap_err();
    assert!(matches!(e, Error::Conflict { .. }), "{e}");
    assert!(e.to_string().contains("not empty"), "{e}");
    assert_eq!(snapshot(s.project()), before);
    assert!(applied_ids(s.journal.path()).unwrap().is_empty());
    assert_eq!(recover(s.journal.path()).unwrap(), RecoverOutcome::Clean);
}

#[test]
fn interrupted_rollback_is_finished_by_recover_and_blocks_apply() {
    let s = Session::new(populate, work);
    let before = snapshot(s.project());
    let r = s.apply(None, ALL).unwrap();
    // Simulate a crash right after rollback committed to rolling back.
    fs::rename(
        s.journal.path().join("applied").join(&r.id),
        s.journal.path().join("rolling-back"),
    )
    .unwrap();
    let e = s.apply(None, ALL).unwrap_err();
    assert!(matches!(e, Error::PendingJournal { .. }), "{e}");
    assert_eq!(
        recover(s.journal.path()).unwrap(),
        RecoverOutcome::FinishedRollback { id: r.id }
    );
    assert_eq!(snapshot(s.project()), before);
    no_temp_files(s.project());
    // And a fresh apply works again.
    s.apply(None, ALL).unwrap();
    assert_eq!(snapshot(s.project()), snapshot(s.after.path()));
}
