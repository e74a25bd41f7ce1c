//! Rough performance probe (not asserted; run explicitly):
//! `cargo test -p shadow-changes --release --test perf -- --ignored --nocapture`
//!
//! A 100,000-file project with 1,000 changed files: times scan, stat,
//! record_base, apply and rollback.

mod common;

use std::time::Instant;

use common::*;
use shadow_changes::{
    apply, record_base, render_stat, rollback, scan, ApplyOptions, ApplyRequest, RollbackOptions,
    StatOptions,
};

#[test]
#[ignore = "performance probe; run with --ignored --release"]
fn hundred_thousand_files_thousand_changed() {
    let t = Instant::now();
    let mut ov = Overlay::new(|l| {
        for d in 0..100 {
            let dir = l.join(format!("d{d:03}"));
            std::fs::create_dir(&dir).unwrap();
            for f in 0..1000 {
                std::fs::write(
                    dir.join(format!("f{f:04}.txt")),
                    format!("line 1\nfile {d} {f}\nline 3\n"),
                )
                .unwrap();
            }
        }
    });
    for i in 0..1000 {
        let (d, f) = (i % 100, (i * 7) % 1000);
        let p = ov.m(&format!("d{d:03}/f{f:04}.txt"));
        std::fs::write(p, format!("line 1\nchanged {d} {f}\nline 3\nline 4\n")).unwrap();
    }
    ov.unmount();
    // Do not bill the fixture's own dirty pages to apply's syncfs.
    rustix::fs::sync();
    eprintln!("fixture: {:?}", t.elapsed());

    let t = Instant::now();
    let cs = scan(&ov.lower, &ov.upper).unwrap();
    let scan_t = t.elapsed();
    let t = Instant::now();
    let stat = render_stat(&cs, &StatOptions::default());
    let stat_t = t.elapsed();
    assert_eq!(cs.changes.len(), 1000);
    assert!(stat.ends_with(" 1000 files changed, 2000 insertions(+), 1000 deletions(-)\n"));
    let t = Instant::now();
    let base = record_base(&ov.lower, &cs).unwrap();
    let base_t = t.elapsed();
    let journal = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let r = apply(&ApplyRequest {
        project: &ov.lower,
        lower_view: &ov.lower,
        upper: &ov.upper,
        changes: &cs,
        selection: None,
        base: &base,
        journal_dir: journal.path(),
        options: ApplyOptions::default(),
    })
    .unwrap();
    let apply_t = t.elapsed();
    let t = Instant::now();
    rollback(journal.path(), RollbackOptions::default()).unwrap();
    let rollback_t = t.elapsed();
    eprintln!(
        "scan {scan_t:?} + stat {stat_t:?}; record_base {base_t:?}; apply {apply_t:?} ({} mutations); rollback {rollback_t:?}",
        r.mutations
    );
    let t = Instant::now();
    drop(ov);
    eprintln!("teardown {:?}", t.elapsed());
}
