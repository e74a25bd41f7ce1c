//! `shadow doctor` on this host, as the invoking user and (when run as root) as the
//! unprivileged user `shadowtest`: every required check must pass here, and `--json` must parse.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

const SHADOW: &str = env!("CARGO_BIN_EXE_shadow");

/// Checks a sandbox cannot do without; on this host they must all be ok. (`cgroups` may warn
/// for non-root users on a hybrid hierarchy.)
const REQUIRED: &[&str] = &[
    "kernel",
    "userns.sysctl",
    "userns.create",
    "overlay.userns",
    "landlock",
    "seccomp",
    "seccomp.notify",
    "runtime",
    "store",
];

fn check_report(json: &str, who: &str) -> serde_json::Value {
    let v: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{who}: bad JSON ({e}): {json}"));
    let checks = v["checks"].as_array().expect("checks array");
    for name in REQUIRED {
        let c = checks
            .iter()
            .find(|c| c["name"] == *name)
            .unwrap_or_else(|| panic!("{who}: no check {name}: {json}"));
        assert_eq!(c["status"], "ok", "{who}: {name}: {c}");
        assert!(c["fix"].is_null(), "{who}: {name}: {c}");
        assert!(c["detail"].as_str().is_some_and(|d| !d.is_empty()));
    }
    for c in checks {
        assert_ne!(c["status"], "fail", "{who}: {c}");
        if c["status"] != "ok" {
            assert!(c["fix"].as_str().is_some(), "{who}: a fix for {c}");
        }
    }
    assert_eq!(v["ok"], true, "{who}: {json}");
    v
}

#[test]
fn doctor_as_invoking_user() {
    let store = tempfile::tempdir().unwrap();
    let out = Command::new(SHADOW)
        .args(["doctor", "--json"])
        .env("SHADOW_STORE", store.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = check_report(&String::from_utf8_lossy(&out.stdout), "self");
    // The probe directories are cleaned up.
    let left: Vec<_> = std::fs::read_dir(store.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with(".doctor"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let landlock = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "landlock")
        .unwrap();
    assert!(landlock["detail"].as_str().unwrap().starts_with("ABI "));

    // The text form: one line per check, status first, exit 0.
    let out = Command::new(SHADOW)
        .arg("doctor")
        .env("SHADOW_STORE", store.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for name in REQUIRED {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok ") && l.split_whitespace().nth(1) == Some(*name)),
            "{name} in:\n{text}"
        );
    }
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("shadow can run here"),
        "{text}"
    );
}

#[test]
fn doctor_as_unprivileged_user() {
    // Fail, not skip: hack/test runs as root and creates the user, so a missing precondition
    // means the suite is being run wrongly, and a silent skip would pass vacuously.
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root to switch to shadowtest"
    );
    let user_exists = Command::new("id")
        .arg("shadowtest")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        user_exists,
        "user shadowtest is missing: run the tests through hack/test"
    );
    // A copy of the binary and a store the user can reach.
    let dir = tempfile::Builder::new()
        .prefix("shadow-doctor-test")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("shadow");
    std::fs::copy(SHADOW, &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let st = Command::new("chown")
        .args(["shadowtest:", store.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
    let run = |args: &str| {
        Command::new("su")
            .args([
                "shadowtest",
                "-s",
                "/bin/sh",
                "-c",
                &format!(
                    "cd / && SHADOW_STORE={} NO_COLOR=1 {} doctor {args}",
                    store.display(),
                    bin.display()
                ),
            ])
            .env_remove("SHADOW_STORE")
            .output()
            .unwrap()
    };
    let out = run("--json");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v = check_report(&String::from_utf8_lossy(&out.stdout), "shadowtest");
    let cg = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "cgroups")
        .unwrap()
        .clone();
    if !Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        // v1 or hybrid: rootless cgroups are unusable, which is a warning with a fix.
        assert_eq!(cg["status"], "warn", "{cg}");
        assert!(cg["fix"].as_str().is_some());
    }
    let out = run("");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("userns.create"), "{text}");
}
