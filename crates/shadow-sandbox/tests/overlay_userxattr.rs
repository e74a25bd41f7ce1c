//! Real-kernel check of the `userxattr` decision: mounts the project
//! overlay exactly as `build_spec` emits it, inside `unshare -Urm` (a user
//! namespace, like every sandbox), with and without `userxattr`.
//!
//! Finding (kernel 6.18): without `userxattr` the mount *succeeds*, but the
//! kernel cannot set `trusted.overlay.*` xattrs from a user namespace, so it
//! silently falls back (no redirect_dir, no opaque dirs; dmesg: "try
//! mounting with 'userxattr' option"), and removing or renaming a directory
//! that comes from the lower layer fails with EIO. With `userxattr` both
//! work, and the opaque marker is `user.overlay.opaque` in the upper dir.
//! This holds for host root mapped 0 -> 0 as well as for an unprivileged
//! user, so the builder always sets it.
//!
//! Skips (passing, with a note) where user namespaces or `unshare` are
//! unavailable.

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use shadow_sandbox::hostview::{HostLimits, HostView, UserInfo};
use shadow_sandbox::spec::{build_spec, NetworkMode, ResourceLimits, SandboxInput, TmpfsSizes};

struct Layout {
    _tmp: tempfile::TempDir,
    lower: PathBuf,
    upper: PathBuf,
    work: PathBuf,
    merged: PathBuf,
}

fn layout() -> Layout {
    let tmp = tempfile::Builder::new()
        .prefix("shadow-ovl")
        .tempdir()
        .unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    let [lower, upper, work, merged] = ["lower", "upper", "work", "merged"].map(|d| base.join(d));
    for d in [&lower, &upper, &work, &merged] {
        fs::create_dir(d).unwrap();
    }
    fs::write(lower.join("a"), "a\n").unwrap();
    for d in ["gone", "moved"] {
        fs::create_dir(lower.join(d)).unwrap();
        fs::write(lower.join(d).join("f"), "f\n").unwrap();
    }
    Layout {
        _tmp: tmp,
        lower,
        upper,
        work,
        merged,
    }
}

/// The overlay options exactly as the spec builder emits them.
fn spec_overlay_options(l: &Layout) -> Vec<String> {
    let input = SandboxInput {
        session_id: "20261202-134501-abcdef".into(),
        args: vec!["true".into()],
        cwd: None,
        project_dir: l.lower.clone(),
        upper_dir: l.upper.clone(),
        work_dir: l.work.clone(),
        rootfs_dir: "/nonexistent/rootfs".into(),
        store_dir: "/nonexistent/store".into(),
        host: HostView::default(),
        host_limits: HostLimits::default(),
        user: UserInfo {
            uid: 1000,
            gid: 1000,
            home: "/home/alice".into(),
            username: "alice".into(),
        },
        env: vec![],
        terminal: false,
        network: NetworkMode::None,
        limits: ResourceLimits::default(),
        cgroups_usable: true,
        tmpfs: TmpfsSizes::default(),
        extra_ro: vec![],
        extra_rw: vec![],
        denied: vec![],
        cgroups_path: None,
        seccomp: None,
        annotations: Default::default(),
    };
    let spec = build_spec(&input).unwrap();
    let m = spec
        .mounts()
        .as_ref()
        .unwrap()
        .iter()
        .find(|m| m.typ().as_deref() == Some("overlay"))
        .unwrap();
    assert_eq!(m.destination(), &l.lower);
    m.options().clone().unwrap()
}

struct Outcome {
    mounted: bool,
    rm_dir_ok: bool,
    mv_dir_ok: bool,
    recreated_empty: bool,
    log: String,
}

/// Mounts with `opts` inside `unshare -Urm` (optionally as `as_uid` via
/// setpriv) and exercises directory operations on lower-layer dirs.
fn run(l: &Layout, opts: &[String], as_uid: Option<u32>) -> Outcome {
    let script = format!(
        r#"set -u
mount -t overlay overlay -o '{opts}' '{m}' || {{ echo MOUNT_FAILED; exit 0; }}
echo MOUNTED
rm -rf '{m}/gone' && echo RM_OK
mkdir -p '{m}/gone' && [ -z "$(ls -A '{m}/gone')" ] && echo EMPTY_OK
mv '{m}/moved' '{m}/moved2' && echo MV_OK
umount '{m}'
"#,
        opts = opts.join(","),
        m = l.merged.display()
    );
    let mut cmd = match as_uid {
        Some(uid) => {
            let mut c = Command::new("setpriv");
            c.args([
                format!("--reuid={uid}"),
                format!("--regid={uid}"),
                "--clear-groups".into(),
                "unshare".into(),
            ]);
            c
        }
        None => Command::new("unshare"),
    };
    cmd.args(["-Urm", "sh", "-c", &script]);
    let out = match cmd.output() {
        Ok(o) => o,
        // shadow cannot work without user namespaces: fail rather than pass vacuously.
        Err(e) => panic!("cannot run unshare: {e}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let log = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success() || stdout.contains("MOUNT"),
        "no user namespace here: {log}"
    );
    Outcome {
        mounted: stdout.contains("MOUNTED"),
        rm_dir_ok: stdout.contains("RM_OK"),
        mv_dir_ok: stdout.contains("MV_OK"),
        recreated_empty: stdout.contains("EMPTY_OK"),
        log,
    }
}

fn xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    let mut buf = [0u8; 64];
    // SAFETY: both strings are NUL-terminated and live across the call; the
    // buffer pointer and length describe `buf`.
    let len =
        unsafe { nix::libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (len >= 0).then(|| buf[..len as usize].to_vec())
}

fn reset(l: &Layout) {
    for d in [&l.upper, &l.work] {
        // The kernel's work/work is mode 000.
        let _ = Command::new("chmod").arg("-R").arg("u+rwx").arg(d).status();
        fs::remove_dir_all(d).unwrap();
        fs::create_dir(d).unwrap();
    }
}

fn chown_all(l: &Layout, uid: u32) {
    let ok = Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{uid}"))
        .arg(l.lower.parent().unwrap())
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

fn check(l: &Layout, as_uid: Option<u32>) {
    let with = spec_overlay_options(l);
    assert_eq!(with.last().map(String::as_str), Some("userxattr"));
    let without: Vec<String> = with.iter().filter(|o| *o != "userxattr").cloned().collect();

    let ok = run(l, &with, as_uid);
    assert!(ok.mounted, "{}", ok.log);
    assert!(
        ok.rm_dir_ok && ok.recreated_empty && ok.mv_dir_ok,
        "with userxattr: {}",
        ok.log
    );
    assert_eq!(
        xattr(&l.upper.join("gone"), "user.overlay.opaque").as_deref(),
        Some(&b"y"[..]),
        "opaque dir marked with a user.* xattr"
    );
    assert!(l.lower.join("gone/f").exists(), "lower untouched");

    reset(l);
    if let Some(uid) = as_uid {
        chown_all(l, uid);
    }
    let bad = run(l, &without, as_uid);
    assert!(bad.mounted, "the mount itself succeeds: {}", bad.log);
    assert!(
        !bad.rm_dir_ok && !bad.mv_dir_ok,
        "without userxattr, lower-dir rm/mv should fail (kernel changed?): {}",
        bad.log
    );
    assert!(bad.log.contains("Input/output error"), "{}", bad.log);
}

#[test]
fn overlay_needs_userxattr_in_userns() {
    let l = layout();
    check(&l, None);
}

#[test]
fn overlay_needs_userxattr_in_userns_unprivileged() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root (to switch to nobody): run through hack/test"
    );
    assert!(
        Command::new("setpriv").arg("--help").output().is_ok(),
        "setpriv (util-linux) is missing"
    );
    let l = layout();
    chown_all(&l, 65534);
    // The temp dir's parent (/tmp) is world-traversable.
    check(&l, Some(65534));
}
