//! Container engines driving `shadow-runtime`: Docker 20.10, Podman 4.3 and containerd 1.6
//! (Debian 12 `docker.io`, `podman`, `containerd`).
//!
//! Each test has its own private engine — daemon, sockets, storage and state all in its own
//! temporary directory — so the tests run in parallel with each other and with the rest of the
//! suite. A guard stops the daemon by pid and lazily unmounts anything left under the directory,
//! also when the test fails; then the test checks that no process and no mount mentioning the
//! directory is left.
//!
//! Network rule: no engine may reach a registry or any non-loopback address. Images are imported
//! from a local tarball of the busybox rootfs, every container runs with `--network none`,
//! `docker run` gets `--pull never`, and dockerd has no bridge and no iptables.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::os::fd::AsFd;

use shadow_integration_tests::{
    cgroup_dirs, mounts_under, processes_mentioning, read_fd_until, require_root, runtime,
    spawn_on_pty, unique, workspace_dir,
};

/// Bound of one engine command (passed to timeout(1)).
const TIMEOUT_SECS: &str = "60";

/// One finished engine command.
#[derive(Debug)]
struct Res {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    what: String,
}

impl Res {
    #[track_caller]
    fn ok(self) -> Self {
        assert_eq!(self.code, Some(0), "command failed: {self}");
        self
    }

    #[track_caller]
    fn code(self, want: i32) -> Self {
        assert_eq!(self.code, Some(want), "unexpected exit code: {self}");
        self
    }
}

impl std::fmt::Display for Res {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}\n[exit {:?}]\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.what, self.code, self.stdout, self.stderr
        )
    }
}

/// Run `prog args` under `timeout -k 5 60`, stdin /dev/null, with extra `env`.
fn run(prog: &str, args: &[&str], env: &[(&str, &str)]) -> Res {
    let mut c = Command::new("timeout");
    c.args(["-k", "5", TIMEOUT_SECS, prog])
        .args(args)
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap_or_else(|e| panic!("spawn {prog}: {e}"));
    Res {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        what: format!("{prog} {}", args.join(" ")),
    }
}

/// A short private temporary directory (`/tmp/<tag>XXXXXX`: unix socket paths must stay short).
fn short_tmp(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(tag)
        .tempdir_in("/tmp")
        .expect("create temp dir")
}

/// The busybox rootfs: `$SHADOW_TEST_ROOTFS`, else one built with `hack/mkrootfs` in `dir`.
fn rootfs(dir: &Path) -> PathBuf {
    if let Some(p) = std::env::var_os("SHADOW_TEST_ROOTFS") {
        let p = PathBuf::from(p);
        assert!(
            p.join("bin/busybox").is_file(),
            "{}: no bin/busybox",
            p.display()
        );
        return p;
    }
    let p = dir.join("rootfs");
    let mk = workspace_dir().join("hack/mkrootfs");
    run(mk.to_str().unwrap(), &[p.to_str().unwrap()], &[]).ok();
    p
}

/// `tar -C <rootfs> -cf <dir>/<name> .`
fn rootfs_tar(dir: &Path, name: &str) -> PathBuf {
    let root = rootfs(dir);
    let tar = dir.join(name);
    run(
        "tar",
        &[
            "-C",
            root.to_str().unwrap(),
            "-cf",
            tar.to_str().unwrap(),
            ".",
        ],
        &[],
    )
    .ok();
    tar
}

/// A started daemon, stopped by pid (SIGTERM, bounded wait, SIGKILL) on drop.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn spawn(prog: &str, args: &[&str], log: PathBuf) -> Self {
        let f = fs::File::create(&log).expect("create daemon log");
        let child = Command::new(prog)
            .args(args)
            .stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {prog}: {e}"));
        Daemon { child, log }
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Poll `ready` (bounded) while the daemon is alive.
    #[track_caller]
    fn wait_ready(&mut self, what: &str, mut ready: impl FnMut() -> bool) {
        let t0 = Instant::now();
        while !ready() {
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!(
                    "{what} exited ({st}) before it was ready; log:\n{}",
                    self.log()
                );
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "{what} not ready after 30s; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("daemon {pid} ignored SIGTERM for 20s: SIGKILL");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One engine's world: its temporary directory and (optionally) its daemon. On drop: a
/// best-effort `cleanup` command, the daemon stopped, every mount under the directory lazily
/// unmounted, the directory removed.
struct World {
    daemon: Option<Daemon>,
    cleanup: Vec<Vec<String>>,
    env: Vec<(String, String)>,
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    /// Cgroup parents the engine puts its containers under (relative to each hierarchy), and
    /// whether the parent itself is the test's to remove afterwards. Podman's shared
    /// `libpod_parent/conmon` (its monitors' cgroup, never removed) is not a container's.
    cgroups: Vec<(String, bool)>,
    /// Named network namespaces (`/run/netns`) before the test.
    netns_before: Vec<String>,
    /// State roots the engine gives shadow-runtime outside the test's directory (Podman as root
    /// passes no --root; containerd's shim uses /run/containerd/runc/<namespace>), with what
    /// they held before.
    extra_roots: Vec<(PathBuf, Vec<String>)>,
}

/// shadow-runtime state roots under `dir` (recognised by their `.locks` directory) that still
/// hold a container, a lock or an effective bundle.
fn runtime_state_left(dir: &Path, depth: u32, roots: &mut u32) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    let entries: Vec<fs::DirEntry> = rd.flatten().collect();
    if entries.iter().any(|e| e.file_name() == ".locks") {
        *roots += 1;
        for e in &entries {
            let n = e.file_name().to_string_lossy().into_owned();
            if n == ".locks" || n == ".bundles" {
                for x in fs::read_dir(e.path()).into_iter().flatten().flatten() {
                    out.push(format!("{}", x.path().display()));
                }
            } else if !n.starts_with(".probe-") {
                out.push(format!("{}", e.path().display()));
            }
        }
        return out;
    }
    if depth == 0 {
        return out;
    }
    for e in entries {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(runtime_state_left(&e.path(), depth - 1, roots));
        }
    }
    out
}

/// Named network namespaces (Podman pins its own under /run/netns).
fn named_netns() -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir("/run/netns")
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

impl World {
    fn new(tag: &str) -> Self {
        let dir = short_tmp(tag);
        let path = dir.path().to_path_buf();
        World {
            daemon: None,
            cleanup: Vec::new(),
            env: Vec::new(),
            dir: Some(dir),
            path,
            cgroups: Vec::new(),
            netns_before: named_netns(),
            extra_roots: Vec::new(),
        }
    }

    /// Also check state root `root` (outside the test's directory) at the end.
    fn watch_root(&mut self, root: &str) {
        let mut n = 0;
        let before = runtime_state_left(Path::new(root), 0, &mut n);
        self.extra_roots.push((PathBuf::from(root), before));
    }

    /// Everything the test left behind: processes and mounts that mention its directory
    /// (a network namespace pinned by a bind mount is such a mount, one held by a process such
    /// a process), container cgroups under the engine's parent, new named network namespaces.
    fn leaks(&self) -> Vec<String> {
        let dir = self.path.to_string_lossy().to_string();
        let mut leaks: Vec<String> = processes_mentioning(&dir)
            .into_iter()
            .map(|(pid, what)| format!("process {pid}: {what}"))
            .collect();
        leaks.extend(
            mounts_under(&self.path)
                .into_iter()
                .map(|m| format!("mount {m}")),
        );
        for (parent, _) in &self.cgroups {
            for d in cgroup_dirs(parent) {
                for e in fs::read_dir(&d).into_iter().flatten().flatten() {
                    if e.path().is_dir() && e.file_name() != "conmon" {
                        leaks.push(format!("cgroup {}", e.path().display()));
                    }
                }
            }
        }
        for n in named_netns() {
            if !self.netns_before.contains(&n) {
                leaks.push(format!("network namespace /run/netns/{n}"));
            }
        }
        leaks
    }

    fn p(&self, rel: &str) -> String {
        self.path.join(rel).to_string_lossy().to_string()
    }

    fn run(&self, prog: &str, args: &[&str]) -> Res {
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        run(prog, args, &env)
    }

    /// Tear everything down now (what drop does).
    fn teardown(&mut self) {
        for c in std::mem::take(&mut self.cleanup) {
            let args: Vec<&str> = c[1..].iter().map(String::as_str).collect();
            let _ = self.run(&c[0], &args);
        }
        if let Some(mut d) = self.daemon.take() {
            d.stop();
        }
        let mut ms = mounts_under(&self.path);
        ms.sort();
        for m in ms.iter().rev() {
            let _ = Command::new("umount")
                .args(["-l", m])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        if let Some(d) = self.dir.take() {
            if let Err(e) = d.close() {
                eprintln!("removing {}: {e}", self.path.display());
            }
        }
    }

    /// Tear down, then assert that no process and no mount mentions the directory.
    #[track_caller]
    fn finish_clean(mut self) {
        // Before the directory goes: the runtime's state roots in it (each engine points
        // shadow-runtime's --root somewhere under it) hold no container any more.
        let mut roots = 0;
        let mut state = runtime_state_left(&self.path, 6, &mut roots);
        for (root, before) in &self.extra_roots {
            state.extend(
                runtime_state_left(root, 0, &mut roots)
                    .into_iter()
                    .filter(|x| !before.contains(x)),
            );
        }
        assert!(
            roots > 0,
            "no shadow-runtime state root under {}",
            self.path.display()
        );
        assert!(
            state.is_empty(),
            "runtime state left behind:\n  {}",
            state.join("\n  ")
        );
        self.teardown();
        let dir = self.path.to_string_lossy().to_string();
        let t0 = Instant::now();
        loop {
            let leaks = self.leaks();
            if leaks.is_empty() {
                // The engine's (now empty) cgroup parents that the test created.
                for (parent, ours) in &self.cgroups {
                    if *ours {
                        for d in cgroup_dirs(parent) {
                            let _ = fs::remove_dir(d);
                        }
                    }
                }
                return;
            }
            if t0.elapsed() > Duration::from_secs(5) {
                // Do not leave them to the rest of the suite: kill them (by pid), then fail.
                for (pid, _) in processes_mentioning(&dir) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                for m in mounts_under(&self.path) {
                    let _ = Command::new("umount").args(["-l", &m]).status();
                }
                panic!("left behind:\n  {}", leaks.join("\n  "));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.teardown();
    }
}

#[test]
fn podman_runs_containers_with_shadow_runtime() {
    require_root();
    let rt = runtime();
    let mut w = World::new("pm-");
    // Podman's cgroupfs parent; every container's cgroup must be gone after `rm`.
    w.cgroups.push(("libpod_parent".into(), false));
    w.watch_root("/run/shadow-runtime");
    let conf = podman_conf(&w.path, &rt);
    w.env
        .push(("CONTAINERS_CONF".into(), conf.to_string_lossy().to_string()));
    let (root, runroot, tmpdir) = (w.p("root"), w.p("runroot"), w.p("tmp"));
    let base: Vec<String> = [
        "--root",
        &root,
        "--runroot",
        &runroot,
        "--tmpdir",
        &tmpdir,
        "--runtime",
        "shadow-runtime",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut cleanup = vec!["podman".to_string()];
    cleanup.extend(base.iter().cloned());
    cleanup.extend(["rm", "-a", "-f", "-t", "0"].map(String::from));
    w.cleanup.push(cleanup);
    let pm = |args: &[&str]| {
        let mut a: Vec<&str> = base.iter().map(String::as_str).collect();
        a.extend_from_slice(args);
        w.run("podman", &a)
    };

    let tar = rootfs_tar(&w.path, "bb.tar");
    pm(&["import", tar.to_str().unwrap(), "localhost/bb:1"]).ok();

    let r = pm(&[
        "run",
        "--rm",
        "--network",
        "none",
        "localhost/bb:1",
        "sh",
        "-c",
        "echo hello; exit 7",
    ])
    .code(7);
    assert_eq!(r.stdout.trim(), "hello", "{r}");

    let name = unique("pm");
    pm(&[
        "run",
        "-d",
        "--name",
        &name,
        "--network",
        "none",
        "localhost/bb:1",
        "sleep",
        "100",
    ])
    .ok();
    let r = pm(&["exec", &name, "sh", "-c", "echo in-exec"]).ok();
    assert_eq!(r.stdout.trim(), "in-exec", "{r}");
    pm(&["stop", "-t", "1", &name]).ok();
    pm(&["rm", &name]).ok();

    let r = pm(&[
        "run",
        "--rm",
        "-t",
        "--network",
        "none",
        "localhost/bb:1",
        "tty",
    ])
    .ok();
    assert_eq!(r.stdout.trim(), "/dev/pts/0", "{r}");

    // A Landlock policy by annotation holds inside a Podman container, also over the files
    // Podman itself bind-mounts (/etc/hosts); a malformed one is refused and Podman shows the
    // runtime's own error line.
    let policy = r#"{"version":1,"read_only":["/"],"read_write":["/dev","/proc","/tmp"],"deny":["/etc/hosts"]}"#;
    // Podman parses --annotation as CSV: the JSON goes in one quoted field, quotes doubled.
    let csv = |v: &str| format!("\"run.shadow.landlock={}\"", v.replace('"', "\"\""));
    let ann = csv(policy);
    let r = pm(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--annotation",
        &ann,
        "localhost/bb:1",
        "sh",
        "-c",
        "cat /etc/hosts; echo rc=$?; cat /etc/hostname >/dev/null && echo hostname-ok; echo x > /etc/x; echo w=$?",
    ])
    .ok();
    assert!(r.stdout.contains("rc=1"), "{r}");
    assert!(r.stdout.contains("hostname-ok"), "{r}");
    assert!(!r.stdout.contains("w=0"), "{r}");
    assert!(r.stderr.contains("Permission denied"), "{r}");
    let r = pm(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--annotation",
        &csv(r#"{"version":1,"read_only":[7]}"#),
        "localhost/bb:1",
        "true",
    ]);
    assert_ne!(r.code, Some(0), "{r}");
    assert!(
        r.stderr
            .contains("annotation run.shadow.landlock: at read_only[0]: invalid type"),
        "{r}"
    );

    // shadow capture by annotation; the store is a runtime flag.
    let project = capture_project(&w);
    let vol = format!("{}:/work", project.display());
    let store = format!("shadow-store={}", w.p("store"));
    let capture = |ann: &str, cmd: &[&str]| {
        let mut a = vec![
            "--runtime-flag",
            &store,
            "run",
            "--rm",
            "--network",
            "none",
            "--annotation",
            ann,
            "-v",
            &vol,
            "localhost/bb:1",
        ];
        a.extend_from_slice(cmd);
        pm(&a)
    };
    let r = capture("run.shadow.capture=/work", &["sh", "-c", CAPTURE_SCRIPT]).code(3);
    assert_eq!(r.stdout.trim(), "hello", "{r}");
    check_captured(&w, &project, None);
    let r = capture("run.shadow.capture=work", &["true"]);
    assert_ne!(r.code, Some(0), "{r}");
    assert!(
        r.stderr.contains(
            "shadow capture: run.shadow.capture=\"work\": must be an absolute container path"
        ),
        "{r}"
    );
    assert_eq!(session_count(&w), 0, "a refused capture left a session");

    // An agent profile by annotation: the default profile's seccomp groups (stacked on the
    // container's filter), Landlock denials (a credential Podman bind-mounts), its environment
    // deny patterns, no-new-privileges and its pids limit, in `run` and in `exec`.
    let secret = w.path.join("id_rsa");
    fs::write(&secret, "SECRET-KEY\n").unwrap();
    let vol = format!("{}:/root/.ssh/id_rsa:ro", secret.display());
    let checks = "cat /root/.ssh/id_rsa; echo cat=$?; unshare -U true 2>&1; echo unshare=$?; \
                  echo token=${GITHUB_TOKEN:-none}; grep NoNewPrivs /proc/self/status";
    // Without the profile the same checks pass (so each denial below is the profile's).
    let r = pm(&[
        "run",
        "--rm",
        "--network",
        "none",
        "-e",
        "GITHUB_TOKEN=tok",
        "-v",
        &vol,
        "localhost/bb:1",
        "sh",
        "-c",
        checks,
    ])
    .ok();
    assert!(
        r.stdout.contains("SECRET-KEY") && r.stdout.contains("unshare=0"),
        "{r}"
    );
    assert!(r.stdout.contains("token=tok"), "{r}");
    let name = unique("pp");
    let r = pm(&[
        "run",
        "-d",
        "--name",
        &name,
        "--network",
        "none",
        "--annotation",
        "run.shadow.profile=default",
        "-e",
        "GITHUB_TOKEN=tok",
        "-e",
        "HOME=/root",
        "-v",
        &vol,
        "localhost/bb:1",
        "sh",
        "-c",
        &format!("{checks}; sleep 100"),
    ])
    .ok();
    let full_id = r.stdout.trim().to_string();
    for r in [pm(&["exec", &name, "sh", "-c", checks]).ok(), {
        let t0 = Instant::now();
        loop {
            let l = pm(&["logs", &name]).ok();
            if l.stdout.contains("NoNewPrivs") || t0.elapsed() > Duration::from_secs(10) {
                break l;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }] {
        assert!(!r.stdout.contains("SECRET-KEY"), "{r}");
        assert!(r.stdout.contains("cat=1"), "{r}");
        assert!(r.stdout.contains("Operation not permitted"), "{r}");
        assert!(r.stdout.contains("unshare=1"), "{r}");
        assert!(r.stdout.contains("token=none"), "{r}");
        assert!(r.stdout.contains("NoNewPrivs:\t1"), "{r}");
    }
    let pids_max = cgroup_dirs(&format!("libpod_parent/libpod-{full_id}"))
        .into_iter()
        .map(|d| d.join("pids.max"))
        .find(|f| f.exists())
        .map(|f| fs::read_to_string(f).unwrap());
    assert_eq!(pids_max.as_deref(), Some("1024\n"));
    pm(&["rm", "-f", "-t", "0", &name]).ok();
    // Refused, with the runtime's line shown by Podman: a profile without network on the
    // host's network, and a profile that does not exist.
    let r = pm(&[
        "run",
        "--rm",
        "--network",
        "host",
        "--annotation",
        "run.shadow.profile=default",
        "localhost/bb:1",
        "true",
    ]);
    assert_ne!(r.code, Some(0), "{r}");
    assert!(
        r.stderr.contains(
            "profile \"default\" allows no network, but the container shares the host's network: run it with --network none"
        ),
        "{r}"
    );
    let r = pm(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--annotation",
        "run.shadow.profile=nope",
        "localhost/bb:1",
        "true",
    ]);
    assert_ne!(r.code, Some(0), "{r}");
    assert!(
        r.stderr
            .contains("run.shadow.profile: unknown profile \"nope\""),
        "{r}"
    );

    let r = pm(&["ps", "-a", "-q"]).ok();
    assert_eq!(r.stdout.trim(), "", "containers left: {r}");
    w.finish_clean();
}

/// Start a private dockerd (data, exec root, socket, pidfile in `w`) with runtime `shadow`;
/// returns the client's `-H unix://…` arguments.
fn start_dockerd(w: &mut World) -> Vec<String> {
    // A cgroup parent of the test's own, so that the leak check can see every container cgroup.
    let cg = unique("shadow-itest-dk");
    w.cgroups.push((cg.clone(), true));
    let conf = serde_json::json!({
        "iptables": false,
        "ip-forward": false,
        "ip-masq": false,
        "bridge": "none",
        "shutdown-timeout": 2,
        "data-root": w.p("data"),
        "exec-root": w.p("exec"),
        "pidfile": w.p("docker.pid"),
        "cgroup-parent": format!("/{cg}"),
        "hosts": [format!("unix://{}", w.p("docker.sock"))],
    });
    let conf_path = w.p("daemon.json");
    fs::write(&conf_path, serde_json::to_vec_pretty(&conf).unwrap()).unwrap();
    // The runtimes `shadow` and `shadow-capture` (capture by runtime name: Docker 20.10 has no
    // --annotation) are registered by the installer, as on a real host.
    let rt = runtime();
    let store = w.p("store");
    let r = run(
        &workspace_dir()
            .join("hack/install-runtime")
            .to_string_lossy(),
        &[
            "--runtime",
            rt.to_str().unwrap(),
            "--docker",
            &conf_path,
            "--no-podman",
            "--no-containerd",
            "--store",
            &store,
        ],
        &[],
    )
    .ok();
    assert!(r.stdout.contains("updated"), "{r}");
    let mut conf: serde_json::Value =
        serde_json::from_slice(&fs::read(&conf_path).unwrap()).unwrap();
    conf["runtimes"]["shadow-badarg"] =
        serde_json::json!({"path": rt, "runtimeArgs": ["--shadow-capture=work"]});
    // An agent profile by runtime name (Docker 20.10 has no --annotation).
    conf["runtimes"]["shadow-agent"] =
        serde_json::json!({"path": rt, "runtimeArgs": ["--shadow-profile=default"]});
    fs::write(&conf_path, serde_json::to_vec_pretty(&conf).unwrap()).unwrap();
    // The client reads nothing from the host's ~/.docker.
    w.env.push(("DOCKER_CONFIG".into(), w.p("client")));
    let host = vec!["-H".to_string(), format!("unix://{}", w.p("docker.sock"))];
    let mut d = Daemon::spawn(
        "dockerd",
        &["--config-file", &conf_path],
        w.path.join("dockerd.log"),
    );
    let probe = ["5", "docker", &host[0], &host[1], "info"];
    let env: Vec<(&str, &str)> = w
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    d.wait_ready("dockerd", || run("timeout", &probe, &env).code == Some(0));
    w.daemon = Some(d);
    host
}

#[test]
fn docker_runs_containers_with_shadow_runtime() {
    require_root();
    let mut w = World::new("dk-");
    let tar = rootfs_tar(&w.path, "bb.tar");
    let host = start_dockerd(&mut w);
    let dk = |args: &[&str]| {
        let mut a: Vec<&str> = host.iter().map(String::as_str).collect();
        a.extend_from_slice(args);
        w.run("docker", &a)
    };
    const RUN: [&str; 7] = [
        "run",
        "--pull",
        "never",
        "--runtime=shadow",
        "--network",
        "none",
        "--rm",
    ];
    // Not `import -q`: the client may be newer than the daemon.
    dk(&["import", tar.to_str().unwrap(), "bb:1"]).ok();

    // Foreground run: output and exit code.
    let mut a = RUN.to_vec();
    a.extend(["bb:1", "sh", "-c", "echo hello-from-docker; exit 5"]);
    let r = dk(&a).code(5);
    assert_eq!(r.stdout.trim(), "hello-from-docker", "{r}");

    // `run -it` on a terminal: the container gets a pty (through the shim's console socket),
    // its input is ours, its exit status comes back.
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", TIMEOUT_SECS, "docker"]).args(&host);
    cmd.args(RUN).args([
        "-it",
        "bb:1",
        "sh",
        "-c",
        "tty; read x; echo got-$x; exit 6",
    ]);
    for (k, v) in &w.env {
        cmd.env(k, v);
    }
    let (mut child, master) = spawn_on_pty(cmd, Some((24, 80)));
    let tty = read_fd_until(master.as_fd(), "/dev/pts/", Duration::from_secs(30));
    nix::unistd::write(&master, b"hello\r").unwrap();
    let out = read_fd_until(master.as_fd(), "got-hello", Duration::from_secs(30));
    let status = child.wait().unwrap();
    let all = format!("{tty}{out}");
    assert!(all.contains("/dev/pts/0"), "{all:?}");
    assert!(all.contains("got-hello"), "{all:?}");
    assert_eq!(status.code(), Some(6), "{out:?}");

    // Detached container: exec, top, pause/unpause, update, stop, rm.
    let d1 = unique("d1");
    let mut a = RUN[..6].to_vec();
    a.extend(["-d", "--name", &d1, "bb:1", "sleep", "100"]);
    let full_id = dk(&a).ok().stdout.trim().to_string();
    // Its cgroup is under the test's parent (what the leak check at the end looks at).
    let parent = w.cgroups[0].0.clone();
    assert!(
        !cgroup_dirs(&format!("{parent}/{full_id}")).is_empty(),
        "no cgroup {parent}/{full_id}"
    );
    let r = dk(&["exec", &d1, "echo", "in-exec"]).ok();
    assert_eq!(r.stdout.trim(), "in-exec", "{r}");
    let r = dk(&["top", &d1]).ok();
    assert!(r.stdout.contains("sleep 100"), "{r}");
    dk(&["pause", &d1]).ok();
    let r = dk(&["inspect", "-f", "{{.State.Status}}", &d1]).ok();
    assert_eq!(r.stdout.trim(), "paused", "{r}");
    dk(&["unpause", &d1]).ok();
    let r = dk(&["inspect", "-f", "{{.State.Status}}", &d1]).ok();
    assert_eq!(r.stdout.trim(), "running", "{r}");
    dk(&["update", "--memory", "64m", "--memory-swap", "64m", &d1]).ok();
    let r = dk(&["exec", &d1, "echo", "after-update"]).ok();
    assert_eq!(r.stdout.trim(), "after-update", "{r}");
    dk(&["stop", "-t", "1", &d1]).ok();
    dk(&["rm", &d1]).ok();

    // Hardening options reach the container.
    let mut a = RUN.to_vec();
    a.extend([
        "--read-only",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--pids-limit",
        "50",
        "--memory",
        "64m",
        "bb:1",
        "sh",
        "-c",
        "grep -E 'CapEff|NoNewPrivs|Seccomp:' /proc/self/status; \
         cat /sys/fs/cgroup/pids/pids.max; touch /x",
    ]);
    let r = dk(&a);
    assert_ne!(
        r.code,
        Some(0),
        "touch on a read-only rootfs succeeded: {r}"
    );
    for want in ["CapEff:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"] {
        assert!(r.stdout.contains(want), "missing {want:?}: {r}");
    }
    assert!(r.stdout.lines().any(|l| l.trim() == "50"), "pids.max: {r}");
    assert!(r.stderr.contains("Read-only file system"), "{r}");

    // Docker mounts /sys/fs/cgroup read-only: with Docker's default capabilities, root in the
    // container cannot lift its own limit (libcontainer alone binds it read-write on this host).
    let mut a = RUN.to_vec();
    a.extend([
        "--pids-limit",
        "50",
        "bb:1",
        "sh",
        "-c",
        "echo 77 > /sys/fs/cgroup/pids/pids.max; cat /sys/fs/cgroup/pids/pids.max",
    ]);
    let r = dk(&a).ok();
    assert_eq!(
        r.stdout.trim(),
        "50",
        "the container changed its pids limit: {r}"
    );
    assert!(r.stderr.contains("Read-only file system"), "{r}");

    // Logs, restart, kill, rm -f.
    let d2 = unique("d2");
    let mut a = RUN[..6].to_vec();
    a.extend([
        "-d",
        "--name",
        &d2,
        "bb:1",
        "sh",
        "-c",
        "echo logline; sleep 100",
    ]);
    dk(&a).ok();
    let t0 = Instant::now();
    loop {
        let r = dk(&["logs", &d2]).ok();
        if r.stdout.contains("logline") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no logline: {r}");
        std::thread::sleep(Duration::from_millis(100));
    }
    dk(&["restart", "-t", "1", &d2]).ok();
    let r = dk(&["inspect", "-f", "{{.State.Status}}", &d2]).ok();
    assert_eq!(r.stdout.trim(), "running", "{r}");
    dk(&["kill", &d2]).ok();
    dk(&["rm", "-f", &d2]).ok();

    // shadow capture: the container's writes to its bind mount land in a shadow session, and
    // the review workflow takes it from there.
    let project = capture_project(&w);
    let mut a = RUN.to_vec();
    a[3] = "--runtime=shadow-capture";
    let vol = format!("{}:/work", project.display());
    a.extend(["-v", &vol, "bb:1", "sh", "-c", CAPTURE_SCRIPT]);
    let r = dk(&a).code(3);
    assert_eq!(r.stdout.trim(), "hello", "{r}");
    check_captured(&w, &project, None);
    // Requests the runtime cannot honour: the engine shows the runtime's own line.
    let mut a = RUN.to_vec();
    a[3] = "--runtime=shadow-badarg";
    a.extend(["-v", &vol, "bb:1", "true"]);
    let r = dk(&a);
    assert_ne!(r.code, Some(0), "{r}");
    assert!(
        r.stderr.contains(
            "shadow capture: --shadow-capture=\"work\": must be an absolute container path"
        ),
        "{r}"
    );
    let mut a = RUN.to_vec();
    a[3] = "--runtime=shadow-capture";
    a.extend(["bb:1", "true"]);
    let r = dk(&a);
    assert_ne!(r.code, Some(0), "{r}");
    assert!(
        r.stderr
            .contains("shadow capture: capture /work: the container has no mount there"),
        "{r}"
    );
    assert_eq!(session_count(&w), 0, "a refused capture left a session");

    // The default profile by runtime name, through Docker's own seccomp profile and its
    // libnetwork hook (with --network none the namespace keeps only lo, so it is accepted).
    let mut a = RUN.to_vec();
    a[3] = "--runtime=shadow-agent";
    a.extend([
        "-e",
        "AWS_SECRET_ACCESS_KEY=k",
        "bb:1",
        "sh",
        "-c",
        "grep NoNewPrivs /proc/self/status; echo key=${AWS_SECRET_ACCESS_KEY:-none}; cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || true",
    ]);
    let r = dk(&a).ok();
    assert!(r.stdout.contains("NoNewPrivs:\t1"), "{r}");
    assert!(r.stdout.contains("key=none"), "{r}");

    let r = dk(&["ps", "-a", "-q"]).ok();
    assert_eq!(r.stdout.trim(), "", "containers left: {r}");
    w.finish_clean();
}

/// What a captured container does to its /work: read, add, change, remove.
const CAPTURE_SCRIPT: &str =
    "cat /work/a; echo new > /work/n; echo more >> /work/a; rm /work/gone; exit 3";

/// A project for capture tests: `a` (hello) and `gone`.
fn capture_project(w: &World) -> PathBuf {
    let p = w.path.join("project");
    fs::create_dir_all(&p).unwrap();
    fs::write(p.join("a"), "hello\n").unwrap();
    fs::write(p.join("gone"), "").unwrap();
    p
}

/// `shadow ARGS` in `project` with the test's store.
fn shadow_in(w: &World, project: &Path, args: &[&str]) -> Res {
    let bin = shadow_integration_tests::shadow::shadow_bin();
    let mut a = vec!["-C", project.to_str().unwrap(), bin.to_str().unwrap()];
    a.extend_from_slice(args);
    let store = w.p("store");
    run("env", &a, &[("SHADOW_STORE", &store)])
}

fn session_count(w: &World) -> usize {
    fs::read_dir(w.path.join("store/sessions"))
        .map(|d| {
            d.flatten()
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .count()
        })
        .unwrap_or(0)
}

/// After [`CAPTURE_SCRIPT`] ran in a captured container: the project is untouched, the session
/// shows the changes, its log and kept spec say what ran, and apply / rollback work. `exit`:
/// the status the session recorded (known when the runtime ran in the foreground).
#[track_caller]
fn check_captured(w: &World, project: &Path, exit: Option<i64>) {
    assert_eq!(fs::read_to_string(project.join("a")).unwrap(), "hello\n");
    assert!(project.join("gone").exists() && !project.join("n").exists());
    let r = shadow_in(w, project, &["diff", "--stat"]).ok();
    for f in ["a ", "n ", "gone "] {
        assert!(r.stdout.contains(f), "{f:?} missing: {r}");
    }
    let r = shadow_in(w, project, &["sessions", "--json"]).ok();
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let s = v
        .as_array()
        .and_then(|a| a.last())
        .expect("a session")
        .clone();
    assert_eq!(s["state"], "exited", "{s}");
    assert_eq!(s["profile"], "engine", "{s}");
    let id = s["id"].as_str().unwrap().to_string();
    shadow_in(w, project, &["log", "--verify"]).ok();
    let r = shadow_in(w, project, &["log", "--json"]).ok();
    let recs: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = recs.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["session.start", "session.end", "changes"], "{r}");
    assert_eq!(recs[0]["data"]["engine"]["capture"], "/work", "{r}");
    assert_eq!(
        recs[1]["data"]["exit_status"],
        serde_json::json!(exit),
        "{r}"
    );
    assert_eq!(recs[2]["data"]["count"], 3, "{r}");
    // The spec as it ran: the bind became the session's overlay.
    let spec: serde_json::Value = serde_json::from_slice(
        &fs::read(
            w.path
                .join(format!("store/sessions/{id}/bundle/config.json")),
        )
        .unwrap(),
    )
    .unwrap();
    let m = spec["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["destination"].as_str().unwrap().trim_end_matches('/') == "/work")
        .unwrap()
        .clone();
    assert_eq!(m["type"], "overlay", "{m}");
    let lower = format!("lowerdir={}", fs::canonicalize(project).unwrap().display());
    assert_eq!(m["options"][0], lower.as_str(), "{m}");
    assert_eq!(spec["annotations"]["run.shadow.session"], id.as_str());

    shadow_in(w, project, &["apply", "--all", "--yes"]).ok();
    assert_eq!(
        fs::read_to_string(project.join("a")).unwrap(),
        "hello\nmore\n"
    );
    assert_eq!(fs::read_to_string(project.join("n")).unwrap(), "new\n");
    assert!(!project.join("gone").exists());
    shadow_in(w, project, &["apply", "--rollback", "--yes"]).ok();
    assert_eq!(fs::read_to_string(project.join("a")).unwrap(), "hello\n");
    assert!(project.join("gone").exists() && !project.join("n").exists());
    shadow_in(w, project, &["discard", &id]).ok();
}

/// `sha256sum FILE` (hex).
fn sha256(p: &Path) -> String {
    let r = run("sha256sum", &[p.to_str().unwrap()], &[]).ok();
    r.stdout.split_whitespace().next().unwrap().to_string()
}

/// Move `file` into the OCI layout's blob store; returns `(digest, size)`.
fn add_blob(layout: &Path, file: &Path) -> (String, u64) {
    let hex = sha256(file);
    let size = fs::metadata(file).unwrap().len();
    fs::rename(file, layout.join("blobs/sha256").join(&hex)).unwrap();
    (format!("sha256:{hex}"), size)
}

/// Build an OCI image-layout tarball `<dir>/<name>` of the busybox rootfs (one uncompressed
/// layer), named `image` for `ctr images import`.
fn oci_image_tar(dir: &Path, name: &str, image: &str) -> PathBuf {
    use serde_json::json;
    let layout = dir.join("oci");
    fs::create_dir_all(layout.join("blobs/sha256")).unwrap();
    let layer = rootfs_tar(dir, "layer.tar");
    let (layer_digest, layer_size) = add_blob(&layout, &layer);
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let config = json!({
        "architecture": arch,
        "os": "linux",
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Cmd": ["sh"]
        },
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]}
    });
    let f = dir.join("config.json");
    fs::write(&f, serde_json::to_vec(&config).unwrap()).unwrap();
    let (config_digest, config_size) = add_blob(&layout, &f);
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config_size
        },
        "layers": [{
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": layer_digest,
            "size": layer_size
        }]
    });
    let f = dir.join("manifest.json");
    fs::write(&f, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let (manifest_digest, manifest_size) = add_blob(&layout, &f);
    let tag = image.rsplit_once(':').map(|(_, t)| t).unwrap_or("latest");
    let index = json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest,
            "size": manifest_size,
            "annotations": {
                "io.containerd.image.name": image,
                "org.opencontainers.image.ref.name": tag
            }
        }]
    });
    fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&index).unwrap(),
    )
    .unwrap();
    fs::write(
        layout.join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .unwrap();
    let tar = dir.join(name);
    run(
        "tar",
        &[
            "-C",
            layout.to_str().unwrap(),
            "-cf",
            tar.to_str().unwrap(),
            "oci-layout",
            "index.json",
            "blobs",
        ],
        &[],
    )
    .ok();
    fs::remove_dir_all(&layout).unwrap();
    tar
}

#[test]
fn containerd_runs_containers_with_shadow_runtime() {
    require_root();
    let rt = runtime();
    let mut w = World::new("ct-");
    let image = "docker.io/library/bb:1";
    let tar = oci_image_tar(&w.path, "bb-oci.tar", image);
    let sock = w.p("c.sock");
    let conf = format!(
        "version = 2\n\
         root = {:?}\n\
         state = {:?}\n\
         disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
         [grpc]\n  address = {sock:?}\n\
         [ttrpc]\n  address = {:?}\n\
         [debug]\n  address = {:?}\n\
         [metrics]\n  address = \"\"\n",
        w.p("root"),
        w.p("state"),
        w.p("c.sock.ttrpc"),
        w.p("debug.sock"),
    );
    let conf_path = w.p("config.toml");
    fs::write(&conf_path, conf).unwrap();
    // The runtime inherits containerd's environment (through the shim): the capture store.
    let store_env = format!("SHADOW_STORE={}", w.p("store"));
    let mut d = Daemon::spawn(
        "env",
        &[&store_env, "containerd", "--config", &conf_path],
        w.path.join("containerd.log"),
    );
    let ns = unique("shadow-itest");
    // containerd puts a container's cgroup at /<namespace>/<id>.
    w.cgroups.push((ns.clone(), true));
    w.watch_root(&format!("/run/containerd/runc/{ns}"));
    let ctr_base = ["-a", &sock, "--namespace", &ns];
    let probe: Vec<&str> = ["5", "ctr"]
        .into_iter()
        .chain(ctr_base)
        .chain(["version"])
        .collect();
    d.wait_ready("containerd", || run("timeout", &probe, &[]).code == Some(0));
    w.daemon = Some(d);
    let ctr = |args: &[&str]| {
        let mut a = ctr_base.to_vec();
        a.extend_from_slice(args);
        w.run("ctr", &a)
    };

    let r = ctr(&["images", "import", tar.to_str().unwrap()]).ok();
    assert!(r.stdout.contains(image), "{r}");
    let id = unique("c1");
    let r = ctr(&[
        "run",
        "--rm",
        "--runc-binary",
        rt.to_str().unwrap(),
        image,
        &id,
        "sh",
        "-c",
        "echo hello-from-ctr; exit 4",
    ])
    .code(4);
    assert_eq!(r.stdout.trim(), "hello-from-ctr", "{r}");

    // shadow capture by annotation (as a Kubernetes pod annotation arrives through the CRI).
    let project = capture_project(&w);
    let mount = format!(
        "type=bind,src={},dst=/work,options=rbind:rw",
        project.display()
    );
    let capture = |ann: &str, id: &str, cmd: &[&str]| {
        let mut a = vec![
            "run",
            "--rm",
            "--runc-binary",
            rt.to_str().unwrap(),
            "--annotation",
            ann,
            "--mount",
            &mount,
            image,
            id,
        ];
        a.extend_from_slice(cmd);
        ctr(&a)
    };
    let r = capture(
        "run.shadow.capture=/work",
        &unique("c2"),
        &["sh", "-c", CAPTURE_SCRIPT],
    )
    .code(3);
    assert_eq!(r.stdout.trim(), "hello", "{r}");
    check_captured(&w, &project, None);
    let r = capture("run.shadow.capture=/nowhere", &unique("c3"), &["true"]);
    assert_ne!(r.code, Some(0), "{r}");
    assert!(
        r.stderr
            .contains("shadow capture: capture /nowhere: the container has no mount there"),
        "{r}"
    );
    assert_eq!(session_count(&w), 0, "a refused capture left a session");

    let r = ctr(&["containers", "ls", "-q"]).ok();
    assert_eq!(r.stdout.trim(), "", "containers left: {r}");
    w.finish_clean();
}

/// `dir/containers.conf` registering `rt` as `shadow-runtime` (with its errors shown, and the
/// ulimits this host allows).
fn podman_conf(dir: &Path, rt: &Path) -> PathBuf {
    let conf = dir.join("containers.conf");
    fs::write(
        &conf,
        format!(
            "[containers]\n\
             default_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n\
             [engine]\n\
             runtime_supports_json = [\"crun\", \"runc\", \"shadow-runtime\"]\n\
             [engine.runtimes]\n\
             shadow-runtime = [{:?}]\n",
            rt.to_string_lossy()
        ),
    )
    .unwrap();
    conf
}

/// Single-quoted for sh.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Rootless Podman (the test user `shadowtest`, with its subuid/subgid range) drives
/// shadow-runtime: Podman runs the runtime as root of its own user namespace and passes no
/// `--root`, so the runtime's default root must follow `$XDG_RUNTIME_DIR` as runc's does.
#[test]
fn rootless_podman_runs_containers_with_shadow_runtime() {
    require_root();
    const USER: &str = "shadowtest";
    assert!(
        run("id", &[USER], &[]).code == Some(0),
        "user {USER} is missing: run the tests through hack/test"
    );
    let mut w = World::new("pr-");
    let d = w.path.clone();
    // The user's own copy of the runtime (the build tree need not be readable to it).
    let rt = d.join("shadow-runtime");
    fs::copy(runtime(), &rt).unwrap();
    let conf = podman_conf(&d, &rt);
    let tar = rootfs_tar(&d, "bb.tar");
    fs::create_dir_all(d.join("xdg")).unwrap();
    run(
        "chown",
        &["-R", &format!("{USER}:{USER}"), d.to_str().unwrap()],
        &[],
    )
    .ok();
    run("chmod", &["700", &w.p("xdg")], &[]).ok();
    run("chmod", &["755", d.to_str().unwrap()], &[]).ok();
    let env = format!(
        "cd {dir} && HOME={dir} XDG_RUNTIME_DIR={dir}/xdg CONTAINERS_CONF={conf}",
        dir = sh_quote(&w.p("")),
        conf = sh_quote(&conf.to_string_lossy())
    );
    let base = format!(
        "podman --root {root} --runroot {dir}/xdg/run --tmpdir {dir}/tmp --runtime shadow-runtime",
        root = sh_quote(&w.p("root")),
        dir = sh_quote(&w.p(""))
    );
    w.cleanup.push(vec![
        "su".into(),
        USER.into(),
        "-s".into(),
        "/bin/sh".into(),
        "-c".into(),
        format!("{env} {base} rm -a -f -t 0"),
    ]);
    // Rootless Podman keeps a pause process (holding its user namespace) until told otherwise.
    w.cleanup.push(vec![
        "sh".into(),
        "-c".into(),
        format!("kill $(cat {}/pause.pid)", sh_quote(&w.p("tmp"))),
    ]);
    let pm = |args: &[&str]| {
        let line: Vec<String> = args.iter().map(|a| sh_quote(a)).collect();
        let script = format!("{env} {base} {}", line.join(" "));
        w.run("su", &[USER, "-s", "/bin/sh", "-c", &script])
    };
    pm(&["import", tar.to_str().unwrap(), "localhost/bb:1"]).ok();

    let r = pm(&[
        "run",
        "--rm",
        "--network",
        "none",
        "localhost/bb:1",
        "sh",
        "-c",
        "echo hello; id -u; exit 7",
    ])
    .code(7);
    assert_eq!(r.stdout, "hello\n0\n", "{r}");

    let name = unique("pr");
    pm(&[
        "run",
        "-d",
        "--name",
        &name,
        "--network",
        "none",
        "localhost/bb:1",
        "sleep",
        "100",
    ])
    .ok();
    let r = pm(&[
        "exec",
        &name,
        "sh",
        "-c",
        "echo in-exec; cat /proc/self/uid_map",
    ])
    .ok();
    assert!(r.stdout.starts_with("in-exec\n"), "{r}");
    // Root inside is the test user outside, not the host's root.
    let uid = run("id", &["-u", USER], &[]).ok().stdout.trim().to_string();
    assert!(
        r.stdout
            .lines()
            .nth(1)
            .unwrap_or("")
            .split_whitespace()
            .collect::<Vec<_>>()
            == ["0", uid.as_str(), "1"],
        "{r}"
    );
    pm(&["kill", &name]).ok();
    pm(&["rm", "-f", "-t", "0", &name]).ok();
    let name = unique("pr");
    pm(&[
        "run",
        "-d",
        "--name",
        &name,
        "--network",
        "none",
        "localhost/bb:1",
        "sleep",
        "100",
    ])
    .ok();
    pm(&["stop", "-t", "1", &name]).ok();
    pm(&["rm", &name]).ok();
    let r = pm(&[
        "run",
        "--rm",
        "-t",
        "--network",
        "none",
        "localhost/bb:1",
        "tty",
    ])
    .ok();
    assert_eq!(r.stdout.trim(), "/dev/pts/0", "{r}");
    // Created (the runtime's create ran), never started, removed: the runtime's delete must
    // cope without the cgroup view create switched to (it did not before).
    let name = unique("pr");
    pm(&[
        "create",
        "--name",
        &name,
        "--network",
        "none",
        "localhost/bb:1",
        "true",
    ])
    .ok();
    pm(&["init", &name]).ok();
    let r = pm(&["inspect", "-f", "{{.State.Status}}", &name]).ok();
    assert_eq!(r.stdout.trim(), "initialized", "{r}");
    pm(&["rm", "-f", &name]).ok();
    let r = pm(&["ps", "-a", "-q"]).ok();
    assert_eq!(r.stdout.trim(), "", "{r}");
    w.finish_clean();
}
