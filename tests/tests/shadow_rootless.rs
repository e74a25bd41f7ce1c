//! `shadow run` as an ordinary user (no sudo): the rootless path on this host's cgroup layout.
//!
//! Runs as the unprivileged user `shadowtest` (created by `hack/test`; the test fails, rather
//! than skips, when it is missing, so CI cannot pass it vacuously).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use shadow_integration_tests::shadow::shadow_bin;
use shadow_integration_tests::{require_root, unique};

const USER: &str = "shadowtest";

struct UserEnv {
    dir: tempfile::TempDir,
}

impl UserEnv {
    /// A temp dir owned by the test user with: a copy of the binary, a project, a store, a home.
    fn new() -> Self {
        require_root();
        let ok = Command::new("id")
            .arg(USER)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(
            ok.success(),
            "user {USER} is missing: run the tests through hack/test"
        );
        let dir = tempfile::Builder::new()
            .prefix(&format!("shadow-rootless-{}-", unique("u")))
            .tempdir_in("/tmp")
            .unwrap();
        let d = dir.path();
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
        fs::copy(shadow_bin(), d.join("shadow")).unwrap();
        fs::set_permissions(d.join("shadow"), fs::Permissions::from_mode(0o755)).unwrap();
        for sub in ["project", "store", "home/.ssh"] {
            fs::create_dir_all(d.join(sub)).unwrap();
        }
        fs::write(d.join("project/a.txt"), "one\n").unwrap();
        fs::write(d.join("home/.ssh/id_rsa"), "SECRET-KEY\n").unwrap();
        let st = Command::new("chown")
            .args(["-R", &format!("{USER}:{USER}")])
            .arg(d.join("project"))
            .arg(d.join("store"))
            .arg(d.join("home"))
            .status()
            .unwrap();
        assert!(st.success());
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Run `shadow ARGS` as the user in the project; returns (status, stdout, stderr).
    fn shadow(&self, args: &str) -> (i32, String, String) {
        let d = self.path().display();
        let script = format!(
            "cd {d}/project && SHADOW_STORE={d}/store HOME={d}/home XDG_RUNTIME_DIR= {d}/shadow {args}"
        );
        let out = Command::new("timeout")
            .args(["60", "su", USER, "-s", "/bin/sh", "-c", &script])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

#[test]
fn rootless_run_diff_apply_rollback() {
    let u = UserEnv::new();
    let (code, out, err) = u.shadow(
        "run -- sh -c 'echo two >> a.txt; echo new > b.txt; id -u; grep CapEff /proc/self/status; exit 3'",
    );
    assert_eq!(code, 3, "stdout: {out}\nstderr: {err}");
    assert!(out.contains("0\n"), "root inside the sandbox: {out}");
    assert!(out.contains("CapEff:\t0000000000000000"), "{out}");
    assert_eq!(
        fs::read_to_string(u.path().join("project/a.txt")).unwrap(),
        "one\n"
    );
    assert!(!u.path().join("project/b.txt").exists());
    let (code, out, err) = u.shadow("diff --name-status");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "M\ta.txt\nA\tb.txt\n");
    let (code, _, err) = u.shadow("apply --all --yes");
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        fs::read_to_string(u.path().join("project/a.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(
        fs::read_to_string(u.path().join("project/b.txt")).unwrap(),
        "new\n"
    );
    let (code, _, err) = u.shadow("apply --rollback --yes");
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        fs::read_to_string(u.path().join("project/a.txt")).unwrap(),
        "one\n"
    );
    assert!(!u.path().join("project/b.txt").exists());
}

#[test]
fn rootless_isolation() {
    let u = UserEnv::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (code, out, err) = u.shadow(&format!(
        "run -- sh -c 'cat ~/.ssh/id_rsa; echo; touch /usr/x 2>&1; \
         (busybox nc -l -p 7777 -e echo inside-ok &); sleep 0.3; busybox nc 127.0.0.1 7777 </dev/null; \
         busybox nc -w 2 127.0.0.1 {port} </dev/null && echo HOST-REACHED; true'"
    ));
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(!out.contains("SECRET-KEY"), "credential readable: {out}");
    assert!(out.contains("Read-only file system"), "{out}");
    assert!(out.contains("inside-ok"), "lo is not usable inside: {out}");
    assert!(
        !out.contains("HOST-REACHED"),
        "host loopback reachable: {out}"
    );
    drop(listener);
}

#[test]
fn rootless_leaves_no_process_behind() {
    let u = UserEnv::new();
    let (code, _, err) = u.shadow("run --timeout 1 -- sleep 30");
    assert_eq!(code, 124, "{err}");
    let ps = Command::new("pgrep")
        .args(["-u", USER, "-f", &u.path().display().to_string()])
        .output()
        .unwrap();
    assert!(
        ps.stdout.is_empty(),
        "left behind: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
}

#[test]
fn rootless_allowed_host_goes_through_the_proxy() {
    let u = UserEnv::new();
    let port = shadow_integration_tests::shadow::http_origin("rootless-proxy");
    let (code, out, err) = u.shadow(&format!(
        "run --allow-host 127.0.0.1:{port} -- sh -c \"curl -sS http://127.0.0.1:{port}/r; echo; \
         curl -sS -o /dev/null -w '%{{http_code}}\\n' http://127.0.0.1:1/; \
         curl -sS --noproxy '*' http://127.0.0.1:{port}/ 2>/dev/null; echo direct=\\$?\""
    ));
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert_eq!(
        out, "rootless-proxy [GET /r HTTP/1.1]\n403\ndirect=7\n",
        "stderr: {err}"
    );
    let (code, log, err) = u.shadow("log --json");
    assert_eq!(code, 0, "{err}");
    let net: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"kind\":\"net\""))
        .collect();
    assert_eq!(net.len(), 2, "{log}");
    assert!(net[0].contains("\"allowed\":true") && net[1].contains("\"allowed\":false"));
}

#[test]
fn rootless_refuses_a_disk_cap_rather_than_run_uncapped() {
    let u = UserEnv::new();
    let (code, out, err) = u.shadow("run --disk 20M -- touch made-anyway");
    assert_eq!(code, 1, "stdout: {out}\nstderr: {err}");
    assert_eq!(
        err.trim(),
        "shadow: a disk cap (--disk or the profile's resources.disk) needs root: it is a loop-mounted file system, which an unprivileged user cannot mount; refusing to run without it"
    );
    let sessions = std::fs::read_dir(u.path().join("store/sessions"))
        .map(|r| r.count())
        .unwrap_or(0);
    assert_eq!(sessions, 0);
    assert!(!u.path().join("project/made-anyway").exists());
}
