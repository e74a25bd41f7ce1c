//! `--disk SIZE` (and a profile's `resources.disk`): the sandbox sees ENOSPC at the cap, the
//! host's disk is not filled, the changes made up to then are kept and can be applied, and an
//! interrupted run's changes are recovered from its image.

use std::time::{Duration, Instant};

use shadow_integration_tests::shadow::Project;

fn mounted(needle: &str) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.contains(needle))
}

#[test]
fn the_sandbox_hits_enospc_at_the_cap_and_keeps_its_changes() {
    let p = Project::new("disk-cap");
    let o = p.run_with(
        &["--disk", "24M"],
        "dd if=/dev/zero of=big bs=1M count=64 2>&1 | grep -o 'No space left on device'; \
         echo small > small.txt; ln -s big link; rm README.md; exit 3",
    );
    assert_eq!(o.code(), Some(3), "{o}");
    assert_eq!(o.stdout, "No space left on device\n", "{o}");
    let id = p.session_ids().pop().unwrap();
    let dir = p.session_dir(&id);
    // The image is gone and nothing of it is still mounted; the changes are in upper/.
    assert!(!dir.join("disk.img").exists());
    assert!(!dir.join("disk").exists());
    assert!(!mounted(&id), "a mount of session {id} is left");
    let big = std::fs::metadata(dir.join("upper/big")).unwrap().len();
    assert!(big > 8 << 20 && big < 24 << 20, "big is {big} bytes");
    let ns = p.ok(&["diff", "--name-status", &id]);
    assert_eq!(
        ns.stdout, "D\tREADME.md\nA\tbig\nA\tlink\nA\tsmall.txt\n",
        "{ns}"
    );
    let start = p.ok(&["log", &id, "--json"]);
    assert!(
        start
            .stdout
            .lines()
            .next()
            .unwrap()
            .contains("\"disk_cap_bytes\":25165824"),
        "{start}"
    );
    p.ok(&["apply", &id, "--all", "--yes"]);
    assert_eq!(p.read("small.txt"), "small\n");
    assert_eq!(std::fs::metadata(p.path("big")).unwrap().len(), big);
    assert!(!p.path("README.md").exists());
}

#[test]
fn a_profile_can_set_the_cap() {
    let p = Project::new("disk-profile");
    let prof = p.base().join("capped.toml");
    std::fs::write(
        &prof,
        "extends = \"default\"\n[resources]\ndisk = \"16M\"\n",
    )
    .unwrap();
    let o = p.run_with(
        &["--profile", prof.to_str().unwrap()],
        "dd if=/dev/zero of=big bs=1M count=40 2>/dev/null; echo dd=$?",
    );
    assert_eq!(o.stdout, "dd=1\n", "{o}");
    let id = p.session_ids().pop().unwrap();
    let big = std::fs::metadata(p.session_dir(&id).join("upper/big"))
        .unwrap()
        .len();
    assert!(big < 16 << 20, "big is {big} bytes");
}

#[test]
fn a_cap_below_the_minimum_is_refused_and_nothing_is_created() {
    let p = Project::new("disk-small");
    let o = p.run_with(&["--disk", "1M"], "true");
    assert_eq!(o.code(), Some(1), "{o}");
    assert_eq!(
        o.stderr.trim(),
        "shadow: --disk 1048576: a disk cap must be at least 16 MiB",
        "{o}"
    );
    assert!(p.session_ids().is_empty());
}

#[test]
fn an_interrupted_capped_run_is_recovered_from_its_image() {
    let p = Project::new("disk-interrupted");
    let mut run = p.spawn(&[
        "run",
        "--disk",
        "20M",
        "--",
        "sh",
        "-c",
        "echo kept > new.txt; exec sleep 60",
    ]);
    let t0 = Instant::now();
    let id = loop {
        if let Some(id) = p.store_sessions().pop() {
            if p.session_dir(&id).join("disk/upper/new.txt").exists() {
                break id;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "sandbox never wrote"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    run.child.kill().unwrap();
    let _ = run.child.wait();
    assert!(
        mounted(&id),
        "the image should still be mounted until reaped"
    );
    let out = p.ok(&["sessions", "--json"]);
    assert!(out.stderr.contains("was interrupted"), "{out}");
    let dir = p.session_dir(&id);
    assert!(!dir.join("disk.img").exists());
    assert!(!mounted(&id));
    let diff = p.ok(&["diff", "--name-status", &id]);
    assert_eq!(diff.stdout, "A\tnew.txt\n", "{diff}");
    p.ok(&["discard", &id]);
    assert!(!dir.exists());
}

#[test]
fn a_sparse_file_does_not_fill_the_host_when_copied_out() {
    let p = Project::new("disk-sparse");
    let o = p.run_with(&["--disk", "16M"], "truncate -s 1T huge && echo made");
    assert_eq!(o.stdout, "made\n", "{o}");
    let id = p.session_ids().pop().unwrap();
    let m = std::fs::metadata(p.session_dir(&id).join("upper/huge")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(m.len(), 1 << 40);
    assert!(
        m.blocks() * 512 < 1 << 20,
        "{} blocks on the host",
        m.blocks()
    );
}
