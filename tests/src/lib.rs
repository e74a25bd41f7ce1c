//! Shared helpers for the `shadow-runtime` integration tests: locating the binary, building a
//! busybox bundle per test, running runtime commands with timeouts, and [`LeakCheck`], which
//! asserts that a test left nothing behind (state, cgroups, processes, mounts).
//!
//! Every [`Ctx`] has its own temporary directory holding the state root (`root/`) and the bundle
//! (`bundle/`), a unique name used for container ids, and its own cgroups path
//! `/shadow-itest/<name>`, so tests run in parallel without seeing each other.
//!
//! The tests need root (containers, cgroups) and a built runtime:
//! `cargo build -p shadow-runtime` (or set `SHADOW_RUNTIME=/path/to/shadow-runtime`;
//! `SHADOW_RUNTIME_PROFILE=release` picks `target/release`).

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub mod shadow;

/// Default timeout of one runtime command.
pub const CMD_TIMEOUT: Duration = Duration::from_secs(30);

/// The cgroup parent under which every test container is placed.
pub const CGROUP_PARENT: &str = "shadow-itest";

/// The workspace directory (parent of this package).
pub fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Path of workspace binary `name` under test: `$env_var` if set, else `target/{debug|release}`
/// (release when `SHADOW_RUNTIME_PROFILE=release`).
pub fn built_binary(name: &str, env_var: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env_var) {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "{env_var}={} does not exist", p.display());
        return p;
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_dir().join("target"));
    let profile = match std::env::var("SHADOW_RUNTIME_PROFILE").as_deref() {
        Ok("release") => "release",
        _ => "debug",
    };
    let p = target.join(profile).join(name);
    assert!(
        p.is_file(),
        "{} not found: build it first with `cargo build -p shadow -p shadow-runtime{}` \
         (or set {env_var})",
        p.display(),
        if profile == "release" {
            " --release"
        } else {
            ""
        }
    );
    warn_if_stale(&p);
    p
}

/// Path of the `shadow-runtime` binary under test.
pub fn runtime() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| built_binary("shadow-runtime", "SHADOW_RUNTIME"))
        .clone()
}

/// Spawn `cmd` as the session leader of a fresh pty (stdin/stdout/stderr on its slave, the
/// slave its controlling terminal); returns the child and the master.
pub fn spawn_on_pty(
    mut cmd: Command,
    size: Option<(u16, u16)>,
) -> (std::process::Child, std::os::fd::OwnedFd) {
    use std::os::unix::process::CommandExt;
    let pty = nix::pty::openpty(None, None).expect("openpty");
    if let Some((rows, cols)) = size {
        let ws = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads the winsize we own.
        unsafe {
            libc::ioctl(
                std::os::fd::AsRawFd::as_raw_fd(&pty.slave),
                libc::TIOCSWINSZ,
                &ws,
            )
        };
    }
    let slave = pty.slave;
    cmd.stdin(File::from(slave.try_clone().unwrap()))
        .stdout(File::from(slave.try_clone().unwrap()))
        .stderr(File::from(slave.try_clone().unwrap()));
    // SAFETY: setsid and ioctl are async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            if libc::ioctl(0, libc::TIOCSCTTY as _, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn on a pty");
    drop(slave);
    (child, pty.master)
}

/// Warn (do not fail) when the binary is older than the runtime's sources.
fn warn_if_stale(bin: &Path) {
    let Ok(bin_time) = fs::metadata(bin).and_then(|m| m.modified()) else {
        return;
    };
    let ws = workspace_dir();
    for dir in ["crates/runtime-core/src", "crates/shadow-runtime/src"] {
        let Ok(rd) = fs::read_dir(ws.join(dir)) else {
            continue;
        };
        for e in rd.flatten() {
            if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
                if t > bin_time {
                    eprintln!(
                        "warning: {} is older than {}: rebuild with `cargo build -p shadow-runtime`",
                        bin.display(),
                        e.path().display()
                    );
                    return;
                }
            }
        }
    }
}

/// Whether we can run containers at all (root). Tests call [`require_root`].
pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "the shadow-runtime integration tests need root (containers, cgroups)"
    );
}

fn busybox_applets() -> &'static [String] {
    static APPLETS: OnceLock<Vec<String>> = OnceLock::new();
    APPLETS.get_or_init(|| {
        let out = Command::new("/bin/busybox")
            .arg("--list")
            .output()
            .expect("run /bin/busybox --list (apt-get install busybox-static)");
        assert!(out.status.success(), "busybox --list failed");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.contains('/'))
            .map(String::from)
            .collect()
    })
}

/// Build a busybox rootfs in `dir` (must not exist): `/bin/busybox` plus a symlink per applet,
/// `/etc/passwd`, `/etc/group`, and the usual empty mount points.
pub fn make_rootfs(dir: &Path) {
    for d in ["bin", "proc", "sys", "dev", "tmp", "etc", "root", "hooklog"] {
        fs::create_dir_all(dir.join(d)).unwrap();
    }
    fs::copy("/bin/busybox", dir.join("bin/busybox")).expect("copy /bin/busybox");
    for a in busybox_applets() {
        if a != "busybox" {
            symlink("busybox", dir.join("bin").join(a)).unwrap();
        }
    }
    fs::write(
        dir.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
    )
    .unwrap();
    fs::write(
        dir.join("etc/group"),
        "root:x:0:\nnogroup:x:65534:\nnobody:x:65534:\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(dir.join("tmp"), fs::Permissions::from_mode(0o1777)).unwrap();
}

/// A runc-`spec`-like config running `args`, with `linux.cgroupsPath = cgroup`.
pub fn default_spec(args: &[&str], cgroup: &str) -> Value {
    json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": args,
            "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TERM=xterm"],
            "cwd": "/",
            "capabilities": {
                "bounding": ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"],
                "effective": ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"],
                "permitted": ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"],
                "ambient": ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]
            },
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
            "noNewPrivileges": true
        },
        "root": {"path": "rootfs", "readonly": false},
        "hostname": "itest",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
             "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]}
        ],
        "linux": {
            "cgroupsPath": cgroup,
            "resources": {"devices": [{"allow": false, "access": "rwm"}]},
            "namespaces": [
                {"type": "pid"}, {"type": "network"}, {"type": "ipc"},
                {"type": "uts"}, {"type": "mount"}
            ],
            "maskedPaths": ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
                            "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                            "/proc/sched_debug", "/sys/firmware", "/proc/scsi"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
        }
    })
}

/// The result of one finished runtime command.
#[derive(Debug)]
pub struct Out {
    /// How it ended.
    pub status: ExitStatus,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
    /// The file its stdout went to (a detached container keeps writing there).
    pub stdout_path: PathBuf,
}

impl Out {
    /// Exit code (`None` when killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Assert success, with the output in the message otherwise.
    #[track_caller]
    pub fn ok(self) -> Self {
        assert!(self.status.success(), "command failed: {self}");
        self
    }

    /// Assert failure, and that stderr is exactly one non-empty line; returns that line.
    #[track_caller]
    pub fn one_error_line(&self) -> String {
        assert!(
            !self.status.success(),
            "command unexpectedly succeeded: {self}"
        );
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "expected exactly one error line on stderr, got {}: {self}",
            lines.len()
        );
        lines[0].to_string()
    }
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[{}]\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// A runtime process still running (foreground `run`, `exec`, `events` …).
#[derive(Debug)]
pub struct Spawned {
    /// The child.
    pub child: Child,
    /// Where its stdout goes.
    pub stdout_path: PathBuf,
    /// Where its stderr goes.
    pub stderr_path: PathBuf,
}

impl Spawned {
    /// The runtime's pid.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// What it wrote to stdout so far.
    pub fn stdout(&self) -> String {
        fs::read_to_string(&self.stdout_path).unwrap_or_default()
    }

    /// Wait until stdout contains `needle`.
    #[track_caller]
    pub fn wait_stdout(&mut self, needle: &str, timeout: Duration) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.stdout();
            if s.contains(needle) {
                return s;
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                let s = self.stdout();
                if s.contains(needle) {
                    return s;
                }
                panic!(
                    "process exited ({st}) before printing {needle:?}; stdout: {s:?}; stderr: {:?}",
                    fs::read_to_string(&self.stderr_path).unwrap_or_default()
                );
            }
            assert!(
                t0.elapsed() < timeout,
                "timeout waiting for {needle:?} on stdout; got {s:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Wait for it to end (killing it after `timeout`, and failing).
    #[track_caller]
    pub fn wait(mut self, timeout: Duration) -> Out {
        let t0 = Instant::now();
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                break st;
            }
            if t0.elapsed() > timeout {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "runtime command did not finish within {timeout:?}; stdout: {:?}; stderr: {:?}",
                    fs::read_to_string(&self.stdout_path).unwrap_or_default(),
                    fs::read_to_string(&self.stderr_path).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        Out {
            status,
            stdout: fs::read_to_string(&self.stdout_path).unwrap_or_default(),
            stderr: fs::read_to_string(&self.stderr_path).unwrap_or_default(),
            stdout_path: self.stdout_path.clone(),
        }
    }
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A short name unique in this machine for the test's lifetime (`<tag>-<pid>-<n>`).
pub fn unique(tag: &str) -> String {
    format!(
        "{tag}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// One test's world: temporary directory, state root, bundle, cgroups path, ids.
#[derive(Debug)]
pub struct Ctx {
    tmp: tempfile::TempDir,
    /// The test's unique name (ids and the cgroup derive from it).
    pub name: String,
    /// `--root` of every command.
    pub root: PathBuf,
    /// The bundle directory.
    pub bundle: PathBuf,
    /// The bundle's rootfs.
    pub rootfs: PathBuf,
    /// `linux.cgroupsPath`: `/shadow-itest/<name>`.
    pub cgroup: String,
    /// The spec written by [`Ctx::write_spec`].
    pub spec: Value,
    ids: Mutex<Vec<String>>,
    seq: AtomicUsize,
}

impl Ctx {
    /// A new context whose bundle runs `args`; config.json is written.
    pub fn new(tag: &str, args: &[&str]) -> Self {
        require_root();
        let _ = runtime();
        let name = unique(tag);
        let tmp = tempfile::Builder::new()
            .prefix(&format!("shadow-itest-{name}-"))
            .tempdir()
            .expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let root = dir.join("root");
        let bundle = dir.join("bundle");
        let rootfs = bundle.join("rootfs");
        fs::create_dir_all(&rootfs).unwrap();
        fs::create_dir_all(dir.join("io")).unwrap();
        make_rootfs(&rootfs);
        let cgroup = format!("/{CGROUP_PARENT}/{name}");
        let spec = default_spec(args, &cgroup);
        let c = Self {
            tmp,
            name,
            root,
            bundle,
            rootfs,
            cgroup,
            spec,
            ids: Mutex::new(Vec::new()),
            seq: AtomicUsize::new(0),
        };
        c.write_spec();
        c
    }

    /// The temporary directory (parent of root and bundle).
    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// Write [`Ctx::spec`] as the bundle's config.json.
    pub fn write_spec(&self) {
        fs::write(
            self.bundle.join("config.json"),
            serde_json::to_vec_pretty(&self.spec).unwrap(),
        )
        .unwrap();
    }

    /// Replace `process.args` and rewrite config.json.
    pub fn set_args(&mut self, args: &[&str]) {
        self.spec["process"]["args"] = json!(args);
        self.write_spec();
    }

    /// A container id unique to this test (registered for cleanup on drop).
    pub fn id(&self, suffix: &str) -> String {
        let id = format!("{}-{suffix}", self.name);
        self.ids.lock().unwrap().push(id.clone());
        id
    }

    /// `/sys/fs/cgroup/<controller>/shadow-itest/<name>` (v1).
    pub fn cgroup_dir(&self, controller: &str) -> PathBuf {
        Path::new("/sys/fs/cgroup")
            .join(controller)
            .join(self.cgroup.trim_start_matches('/'))
    }

    fn io_paths(&self) -> (PathBuf, PathBuf) {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let io = self.dir().join("io");
        (io.join(format!("{n}.out")), io.join(format!("{n}.err")))
    }

    /// `shadow-runtime --root <root> ARGS` (unless ARGS has its own `--root`), stdin null, run in
    /// the bundle directory.
    pub fn command<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Command {
        let mut c = Command::new(runtime());
        // A test that passes its own --root gets only that one.
        if !args.iter().any(|a| a.as_ref() == "--root") {
            c.arg("--root").arg(&self.root);
        }
        c.args(args);
        c.current_dir(&self.bundle).stdin(Stdio::null());
        c
    }

    /// Spawn a prepared command with stdout/stderr going to files.
    pub fn spawn_cmd(&self, mut c: Command) -> Spawned {
        let (o, e) = self.io_paths();
        c.stdout(fs::File::create(&o).unwrap())
            .stderr(fs::File::create(&e).unwrap());
        let child = c.spawn().expect("spawn shadow-runtime");
        Spawned {
            child,
            stdout_path: o,
            stderr_path: e,
        }
    }

    /// Spawn `shadow-runtime --root <root> ARGS` in the background.
    pub fn spawn<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Spawned {
        self.spawn_cmd(self.command(args))
    }

    /// Run `shadow-runtime --root <root> ARGS` to completion.
    #[track_caller]
    pub fn rt<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Out {
        self.spawn(args).wait(CMD_TIMEOUT)
    }

    /// As [`Ctx::rt`], feeding `input` on stdin.
    #[track_caller]
    pub fn rt_stdin<S: AsRef<std::ffi::OsStr>>(&self, args: &[S], input: &[u8]) -> Out {
        let mut c = self.command(args);
        c.stdin(Stdio::piped());
        let mut s = self.spawn_cmd(c);
        s.child.stdin.take().unwrap().write_all(input).unwrap();
        s.wait(CMD_TIMEOUT)
    }

    /// Run and assert success.
    #[track_caller]
    pub fn ok<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Out {
        self.rt(args).ok()
    }

    /// `state ID` parsed.
    #[track_caller]
    pub fn state(&self, id: &str) -> Value {
        let o = self.ok(&["state", id]);
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("state is not JSON ({e}): {o}"))
    }

    /// The `status` field of `state ID`.
    #[track_caller]
    pub fn status(&self, id: &str) -> String {
        self.state(id)["status"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Wait until `state ID` reports `want`.
    #[track_caller]
    pub fn wait_status(&self, id: &str, want: &str) {
        let t0 = Instant::now();
        loop {
            let s = self.status(id);
            if s == want {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "container {id} is {s:?}, waited for {want:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `run --detach` the bundle as `id` (container output goes to the returned file).
    #[track_caller]
    pub fn run_detached(&self, id: &str) -> PathBuf {
        let b = self.bundle.to_str().unwrap().to_string();
        self.ok(&["run", "--detach", "-b", &b, id]).stdout_path
    }

    /// `kill ID KILL`, wait for stopped, `delete ID`.
    #[track_caller]
    pub fn kill_and_delete(&self, id: &str) {
        self.ok(&["kill", id, "KILL"]);
        self.wait_status(id, "stopped");
        self.ok(&["delete", id]);
    }

    /// The leak checker for this context.
    pub fn leak_check(&self) -> LeakCheck {
        LeakCheck {
            root: self.root.clone(),
            dir: self.dir().to_path_buf(),
            cgroup: self.cgroup.clone(),
            pids: Vec::new(),
        }
    }

    /// Assert nothing is left behind (see [`LeakCheck`]).
    #[track_caller]
    pub fn assert_clean(&self) {
        self.leak_check().assert_clean();
    }

    /// Assert nothing is left behind, also checking that `pids` are gone.
    #[track_caller]
    pub fn assert_clean_pids(&self, pids: &[i32]) {
        let mut l = self.leak_check();
        l.pids.extend_from_slice(pids);
        l.assert_clean();
    }
}

impl Drop for Ctx {
    /// Best-effort cleanup after a failed test, so one failure does not leak into later runs.
    fn drop(&mut self) {
        let ids = self.ids.lock().map(|v| v.clone()).unwrap_or_default();
        for id in ids {
            if self.root.join(&id).exists() {
                let _ = self
                    .command(&["delete", "--force", id.as_str()])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
        for m in mounts_under(self.dir()).into_iter().rev() {
            let _ = nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH);
        }
        for d in cgroup_dirs(&self.cgroup) {
            let _ = fs::remove_dir(d);
        }
    }
}

/// Every existing cgroup directory for `path` (all v1 hierarchies and the v2 one).
pub fn cgroup_dirs(path: &str) -> Vec<PathBuf> {
    let rel = path.trim_start_matches('/');
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir("/sys/fs/cgroup") {
        for e in rd.flatten() {
            let d = e.path().join(rel);
            if d.is_dir() {
                out.push(d);
            }
        }
    }
    let direct = Path::new("/sys/fs/cgroup").join(rel);
    if direct.is_dir() && !out.contains(&direct) {
        out.push(direct);
    }
    out
}

/// Mount points at or under `dir` (from /proc/self/mountinfo).
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let d = dir.to_string_lossy().to_string();
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(|m| m.replace("\\040", " ")))
        .filter(|m| m == &d || m.starts_with(&format!("{d}/")))
        .collect()
}

/// Whether `pid` is a live (non-zombie) process.
pub fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .map(|(_, r)| !r.trim_start().starts_with(['Z', 'X']))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Host processes whose cmdline, cwd or root mention `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == me || !alive(pid) {
            continue;
        }
        let cmdline = fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        let cwd = fs::read_link(format!("/proc/{pid}/cwd"))
            .map(|p| p.to_string_lossy().to_string())
            .unwrap_or_default();
        let root = fs::read_link(format!("/proc/{pid}/root"))
            .map(|p| p.to_string_lossy().to_string())
            .unwrap_or_default();
        if cmdline.contains(needle) || cwd.contains(needle) || root.contains(needle) {
            out.push((
                pid,
                format!("cmdline={cmdline:?} cwd={cwd:?} root={root:?}"),
            ));
        }
    }
    out
}

/// Asserts that a test left nothing behind:
/// - under the state root, nothing but `.locks` and `.bundles`, both empty;
/// - no cgroup directory `/sys/fs/cgroup/*/shadow-itest/<name>`;
/// - none of the given pids alive, and no host process whose cmdline/cwd/root mentions the
///   test's directory (bundle, root);
/// - no mount at or under the test's directory.
///
/// Things that settle asynchronously (a killed process disappearing) get a few seconds.
#[derive(Debug, Clone)]
pub struct LeakCheck {
    /// The state root.
    pub root: PathBuf,
    /// The test directory (bundle and root are inside).
    pub dir: PathBuf,
    /// The cgroups path.
    pub cgroup: String,
    /// Pids that must be gone.
    pub pids: Vec<i32>,
}

impl LeakCheck {
    /// Everything left behind, one description per item (empty = clean).
    pub fn leaks(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Ok(rd) = fs::read_dir(&self.root) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().to_string();
                if n == ".locks" || n == ".bundles" {
                    let inner: Vec<String> = fs::read_dir(e.path())
                        .map(|r| {
                            r.flatten()
                                .map(|x| x.file_name().to_string_lossy().to_string())
                                .collect()
                        })
                        .unwrap_or_default();
                    if !inner.is_empty() {
                        out.push(format!("state root: {n}/ contains {inner:?}"));
                    }
                } else {
                    out.push(format!("state root: {n} left behind"));
                }
            }
        }
        for d in cgroup_dirs(&self.cgroup) {
            out.push(format!("cgroup left behind: {}", d.display()));
        }
        for &p in &self.pids {
            if p > 0 && alive(p) {
                out.push(format!("process {p} still alive"));
            }
        }
        for (pid, what) in processes_mentioning(&self.dir.to_string_lossy()) {
            out.push(format!("process {pid} mentions the test dir: {what}"));
        }
        for m in mounts_under(&self.dir) {
            out.push(format!("mount left behind: {m}"));
        }
        out
    }

    /// Panic with the list of leaks unless clean within a few seconds.
    #[track_caller]
    pub fn assert_clean(&self) {
        let t0 = Instant::now();
        loop {
            let l = self.leaks();
            if l.is_empty() {
                return;
            }
            if t0.elapsed() > Duration::from_secs(3) {
                panic!("left behind:\n  {}", l.join("\n  "));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

/// Read a file to a trimmed string ("" if unreadable).
pub fn read_trim(p: impl AsRef<Path>) -> String {
    fs::read_to_string(p.as_ref())
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Poll `f` until it returns true, failing after `timeout`.
#[track_caller]
pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timeout waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait until a file contains `needle`; returns its content.
#[track_caller]
pub fn wait_file_contains(p: &Path, needle: &str, timeout: Duration) -> String {
    let t0 = Instant::now();
    loop {
        let s = fs::read_to_string(p).unwrap_or_default();
        if s.contains(needle) {
            return s;
        }
        assert!(
            t0.elapsed() < timeout,
            "timeout waiting for {needle:?} in {}; content: {s:?}",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Read from `fd` until `needle` appears in what was read (or `timeout`). Uses poll(2).
#[track_caller]
pub fn read_fd_until(fd: std::os::fd::BorrowedFd<'_>, needle: &str, timeout: Duration) -> String {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let t0 = Instant::now();
    let mut acc = Vec::new();
    loop {
        if String::from_utf8_lossy(&acc).contains(needle) {
            return String::from_utf8_lossy(&acc).to_string();
        }
        let left = timeout.saturating_sub(t0.elapsed());
        assert!(
            !left.is_zero(),
            "timeout waiting for {needle:?}; read so far: {:?}",
            String::from_utf8_lossy(&acc)
        );
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        let n = poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        )
        .unwrap_or(0);
        if n == 0 {
            continue;
        }
        let mut buf = [0u8; 4096];
        match nix::unistd::read(std::os::fd::AsRawFd::as_raw_fd(&fd), &mut buf) {
            Ok(0) | Err(_) => {
                let s = String::from_utf8_lossy(&acc).to_string();
                assert!(s.contains(needle), "EOF before {needle:?}; read: {s:?}");
                return s;
            }
            Ok(n) => acc.extend_from_slice(&buf[..n]),
        }
    }
}

/// Read everything from a reader into a string (lossy).
pub fn read_all(mut r: impl Read) -> String {
    let mut v = Vec::new();
    let _ = r.read_to_end(&mut v);
    String::from_utf8_lossy(&v).to_string()
}

/// Run a failing runtime command twice — plainly, then with `--log F --log-format json` — and
/// check what a user and an engine see: non-zero exit, exactly one line on stderr containing
/// every `needles` item, and a last log line `{"level":"error","msg":…,"time":RFC3339}` whose
/// `msg` contains them too. Returns the stderr line of the plain run.
#[track_caller]
pub fn expect_error(ctx: &Ctx, args: &[&str], needles: &[&str]) -> String {
    let o = ctx.rt(args);
    let line = o.one_error_line();
    for n in needles {
        assert!(line.contains(n), "error line lacks {n:?}: {line:?}");
    }
    let log = ctx.dir().join(format!("log-{}.json", unique("l")));
    let mut full: Vec<String> = vec![
        "--log".into(),
        log.to_string_lossy().into(),
        "--log-format".into(),
        "json".into(),
    ];
    full.extend(args.iter().map(|s| s.to_string()));
    let o2 = ctx.rt(&full);
    assert!(!o2.status.success(), "second run succeeded: {o2}");
    let text = fs::read_to_string(&log).unwrap_or_default();
    let last = text
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or_else(|| panic!("log {} is empty; {o2}", log.display()));
    let v: Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("last log line is not JSON ({e}): {last:?}"));
    assert_eq!(v["level"], "error", "{last}");
    let msg = v["msg"].as_str().unwrap_or_default();
    for n in needles {
        assert!(msg.contains(n), "log msg lacks {n:?}: {msg:?}");
    }
    let time = v["time"].as_str().unwrap_or_default();
    assert!(is_rfc3339(time), "time {time:?} is not RFC 3339");
    let _ = fs::remove_file(&log);
    line
}

/// A loose RFC 3339 check: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
pub fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 20 {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
    if !(digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && (b[10] == b'T' || b[10] == b't')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19))
    {
        return false;
    }
    let mut rest = &s[19..];
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &r[n..];
    }
    rest == "Z"
        || (rest.len() == 6
            && (rest.starts_with('+') || rest.starts_with('-'))
            && rest.as_bytes()[3] == b':')
}

/// Accept one connection on a console socket and receive the pty master (SCM_RIGHTS).
pub fn recv_pty_master(listener: &std::os::unix::net::UnixListener) -> std::os::fd::OwnedFd {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    use std::os::fd::{AsRawFd, FromRawFd, RawFd};
    let (stream, _) = listener.accept().expect("accept on console socket");
    let mut buf = [0u8; 4096];
    let mut iov = [std::io::IoSliceMut::new(&mut buf)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(
        stream.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .expect("recvmsg on console socket");
    for c in msg.cmsgs().expect("cmsgs") {
        if let ControlMessageOwned::ScmRights(fds) = c {
            if let Some(&fd) = fds.first() {
                // SAFETY: the kernel just installed this fd in our table; nobody else owns it.
                return unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
            }
        }
    }
    panic!("console socket: no fd received");
}

/// A console socket bound in the test directory, whose pty master is received on a thread.
#[derive(Debug)]
pub struct ConsoleSocket {
    /// The socket path (for `--console-socket`).
    pub path: PathBuf,
    handle: Option<std::thread::JoinHandle<std::os::fd::OwnedFd>>,
}

impl ConsoleSocket {
    /// Bind `<dir>/console.sock` and start accepting.
    pub fn bind(ctx: &Ctx) -> Self {
        let path = ctx.dir().join(format!("console-{}.sock", unique("s")));
        let l = std::os::unix::net::UnixListener::bind(&path).expect("bind console socket");
        let handle = std::thread::spawn(move || recv_pty_master(&l));
        Self {
            path,
            handle: Some(handle),
        }
    }

    /// The received pty master (waits for it).
    pub fn master(&mut self) -> std::os::fd::OwnedFd {
        self.handle
            .take()
            .expect("master taken twice")
            .join()
            .expect("console receiver panicked")
    }
}
