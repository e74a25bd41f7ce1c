//! Helpers for the end-to-end tests of the `shadow` binary (`tests/tests/shadow_*.rs`).
//!
//! Every [`Project`] owns a temporary directory holding a small git repository (the project),
//! its own session store (`SHADOW_STORE`), its own `$HOME` and the captured output of every
//! command, so tests run in parallel without seeing each other. Commands run with stdin from
//! `/dev/null`, in the project directory.
//!
//! The tests need root and a built binary: `cargo build -p shadow -p shadow-runtime` (or set
//! `SHADOW_BIN=/path/to/shadow`; `SHADOW_RUNTIME_PROFILE=release` picks `target/release`).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use crate::{require_root, unique, Out, Spawned};

/// Default timeout of one `shadow` command.
pub const SHADOW_TIMEOUT: Duration = Duration::from_secs(30);

/// Path of the `shadow` binary under test.
pub fn shadow_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| crate::built_binary("shadow", "SHADOW_BIN"))
        .clone()
}

/// Files of the default project: path, content, mode.
pub const DEFAULT_FILES: &[(&str, &str, u32)] = &[
    ("README.md", "# demo\n\nA small project.\n", 0o644),
    (
        "src/main.rs",
        "fn main() {\n    println!(\"hello\");\n}\n",
        0o644,
    ),
    (
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
        0o644,
    ),
    ("run.sh", "#!/bin/sh\necho run\n", 0o755),
    ("docs/guide.txt", "line 1\nline 2\nline 3\n", 0o644),
];

/// One test's world: a project (git repository), a store, a home, captured output.
#[derive(Debug)]
pub struct Project {
    tmp: tempfile::TempDir,
    /// The test's unique name.
    pub name: String,
    /// The project directory (canonical).
    pub dir: PathBuf,
    /// `SHADOW_STORE`.
    pub store: PathBuf,
    /// `$HOME` of every shadow command.
    pub home: PathBuf,
    seq: AtomicUsize,
}

impl Project {
    /// A project with [`DEFAULT_FILES`], `git init`ed and committed.
    pub fn new(tag: &str) -> Self {
        let p = Self::empty(tag);
        for (path, content, mode) in DEFAULT_FILES {
            p.write_mode(path, content, *mode);
        }
        p.commit();
        p
    }

    /// A `git init`ed project without files or commits.
    pub fn empty(tag: &str) -> Self {
        require_root();
        let _ = shadow_bin();
        let name = unique(tag);
        let tmp = tempfile::Builder::new()
            .prefix(&format!("shadow-etest-{name}-"))
            .tempdir()
            .expect("tempdir");
        let base = tmp.path().canonicalize().unwrap();
        let dir = base.join("project");
        let store = base.join("store");
        let home = base.join("home");
        for d in [&dir, &store, &home, &base.join("io")] {
            fs::create_dir_all(d).unwrap();
        }
        let p = Self {
            tmp,
            name,
            dir,
            store,
            home,
            seq: AtomicUsize::new(0),
        };
        p.git(&["init", "-q"]);
        p
    }

    /// The temporary directory holding project, store, home.
    pub fn base(&self) -> PathBuf {
        self.tmp.path().canonicalize().unwrap()
    }

    /// A path inside the project.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// Write a project file (creating parents), mode 0644.
    pub fn write(&self, rel: &str, content: &str) {
        self.write_mode(rel, content, 0o644);
    }

    /// Write a project file (creating parents) with `mode`.
    pub fn write_mode(&self, rel: &str, content: &str, mode: u32) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, content).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Read a project file.
    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel))
            .unwrap_or_else(|e| panic!("read {}: {e}", self.path(rel).display()))
    }

    /// Run git in the project; panics on failure.
    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .expect("run git");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `git add -A && git commit`.
    pub fn commit(&self) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", "base"]);
    }

    /// `shadow ARGS` with this test's store and home, in the project, stdin null.
    pub fn cmd<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Command {
        let mut c = Command::new(shadow_bin());
        c.args(args)
            .current_dir(&self.dir)
            .env("SHADOW_STORE", &self.store)
            .env("HOME", &self.home)
            .env_remove("SHADOW_APPLY_CRASH_AFTER")
            .env_remove("NO_COLOR")
            .stdin(Stdio::null());
        c
    }

    fn io_paths(&self) -> (PathBuf, PathBuf) {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let io = self.base().join("io");
        (io.join(format!("{n}.out")), io.join(format!("{n}.err")))
    }

    /// Spawn a prepared command with stdout/stderr going to files.
    pub fn spawn_cmd(&self, mut c: Command) -> Spawned {
        let (o, e) = self.io_paths();
        c.stdout(fs::File::create(&o).unwrap())
            .stderr(fs::File::create(&e).unwrap());
        let child = c.spawn().expect("spawn shadow");
        Spawned {
            child,
            stdout_path: o,
            stderr_path: e,
        }
    }

    /// Spawn `shadow ARGS`.
    pub fn spawn<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Spawned {
        self.spawn_cmd(self.cmd(args))
    }

    /// Run a prepared command to completion.
    #[track_caller]
    pub fn out(&self, c: Command) -> Out {
        self.spawn_cmd(c).wait(SHADOW_TIMEOUT)
    }

    /// Run `shadow ARGS` to completion.
    #[track_caller]
    pub fn sh<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Out {
        self.out(self.cmd(args))
    }

    /// Run `shadow ARGS`, asserting success.
    #[track_caller]
    pub fn ok<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Out {
        self.sh(args).ok()
    }

    /// `shadow run -- sh -c SCRIPT`.
    #[track_caller]
    pub fn run(&self, script: &str) -> Out {
        self.sh(&["run", "--", "sh", "-c", script])
    }

    /// `shadow run OPTS -- sh -c SCRIPT`.
    #[track_caller]
    pub fn run_with(&self, opts: &[&str], script: &str) -> Out {
        let mut args = vec!["run"];
        args.extend_from_slice(opts);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        self.sh(&args)
    }

    /// `shadow run -- sh -c SCRIPT`, asserting exit 0; returns the new session's id.
    #[track_caller]
    pub fn session(&self, script: &str) -> String {
        let before = self.session_ids();
        let out = self.run(script);
        assert_eq!(out.code(), Some(0), "shadow run failed: {out}");
        let new: Vec<String> = self
            .session_ids()
            .into_iter()
            .filter(|i| !before.contains(i))
            .collect();
        assert_eq!(new.len(), 1, "expected one new session, got {new:?}");
        new[0].clone()
    }

    /// `shadow sessions --json`, parsed.
    #[track_caller]
    pub fn sessions_json(&self) -> Vec<Value> {
        let out = self.ok(&["sessions", "--json"]);
        let v: Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("sessions --json is not JSON ({e}): {out}"));
        v.as_array()
            .unwrap_or_else(|| panic!("sessions --json is not an array: {out}"))
            .clone()
    }

    /// Ids of every session in the store.
    #[track_caller]
    pub fn session_ids(&self) -> Vec<String> {
        self.sessions_json()
            .iter()
            .map(|m| m["id"].as_str().expect("session id").to_string())
            .collect()
    }

    /// `shadow show ID --json`, parsed.
    #[track_caller]
    pub fn show_json(&self, id: &str) -> Value {
        let out = self.ok(&["show", id, "--json"]);
        serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("show --json is not JSON ({e}): {out}"))
    }

    /// The directory of session `id` in the store.
    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.store.join("sessions").join(id)
    }

    /// The entries of the store's `sessions/` directory.
    pub fn store_sessions(&self) -> Vec<String> {
        fs::read_dir(self.store.join("sessions"))
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A copy of the project (as it is now) in which `script` was run by `sh` on the host: what
    /// the session should have seen, and what the project must become after applying it.
    pub fn replay(&self, script: &str) -> PathBuf {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let copy = self.base().join(format!("replay-{n}"));
        let st = Command::new("cp")
            .arg("-a")
            .arg(&self.dir)
            .arg(&copy)
            .status()
            .unwrap();
        assert!(st.success(), "cp -a failed");
        let out = Command::new("sh")
            .args(["-c", script])
            .current_dir(&copy)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "replay of {script:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        copy
    }

    /// Snapshot of the project.
    pub fn snapshot(&self) -> Tree {
        snapshot(&self.dir)
    }
}

/// One node of a [`Tree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A regular file: permission bits (incl. setuid etc.) and content.
    File {
        /// `mode & 0o7777`.
        mode: u32,
        /// Content.
        data: Vec<u8>,
    },
    /// A directory: permission bits.
    Dir {
        /// `mode & 0o7777`.
        mode: u32,
    },
    /// A symlink: its target.
    Symlink(PathBuf),
    /// Anything else (fifo, socket, device): the raw mode.
    Other(u32),
}

/// Every path below a directory (relative), with type, mode, content / target.
pub type Tree = BTreeMap<PathBuf, Node>;

/// Snapshot every path below `root` (not following symlinks).
pub fn snapshot(root: &Path) -> Tree {
    fn walk(root: &Path, dir: &Path, out: &mut Tree) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
            .flatten()
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let m = fs::symlink_metadata(&p).unwrap();
            let ft = m.file_type();
            let mode = m.permissions().mode() & 0o7777;
            if ft.is_symlink() {
                out.insert(rel, Node::Symlink(fs::read_link(&p).unwrap()));
            } else if ft.is_dir() {
                out.insert(rel, Node::Dir { mode });
                walk(root, &p, out);
            } else if ft.is_file() {
                out.insert(
                    rel,
                    Node::File {
                        mode,
                        data: fs::read(&p).unwrap(),
                    },
                );
            } else {
                out.insert(rel, Node::Other(m.permissions().mode()));
            }
        }
    }
    let mut out = Tree::new();
    walk(root, root, &mut out);
    out
}

/// `tree` without the paths under `.git`.
pub fn without_git(tree: &Tree) -> Tree {
    tree.iter()
        .filter(|(p, _)| !p.starts_with(".git"))
        .map(|(p, n)| (p.clone(), n.clone()))
        .collect()
}

/// Human-readable differences between two trees (empty: equal).
pub fn tree_diff(want: &Tree, got: &Tree) -> Vec<String> {
    let show = |n: &Node| match n {
        Node::File { mode, data } => format!(
            "file {mode:o} {:?}",
            String::from_utf8_lossy(&data[..data.len().min(60)])
        ),
        Node::Dir { mode } => format!("dir {mode:o}"),
        Node::Symlink(t) => format!("symlink -> {}", t.display()),
        Node::Other(m) => format!("other {m:o}"),
    };
    let mut out = Vec::new();
    for (p, w) in want {
        match got.get(p) {
            None => out.push(format!("{}: missing (want {})", p.display(), show(w))),
            Some(g) if g != w => out.push(format!(
                "{}: want {}, got {}",
                p.display(),
                show(w),
                show(g)
            )),
            _ => {}
        }
    }
    for (p, g) in got {
        if !want.contains_key(p) {
            out.push(format!("{}: unexpected {}", p.display(), show(g)));
        }
    }
    out
}

/// Assert two trees are equal, listing every difference otherwise.
#[track_caller]
pub fn assert_same_tree(what: &str, want: &Tree, got: &Tree) {
    let d = tree_diff(want, got);
    assert!(d.is_empty(), "{what}: trees differ:\n  {}", d.join("\n  "));
}

/// Assert `s` has no ANSI escape sequences.
#[track_caller]
pub fn assert_no_ansi(what: &str, s: &str) {
    assert!(!s.contains('\x1b'), "{what} contains ANSI escapes: {s:?}");
}

/// The non-empty lines of stderr, asserting there is exactly one; returns it.
#[track_caller]
pub fn one_line(out: &Out) -> String {
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "expected exactly one line on stderr: {out}");
    lines[0].to_string()
}

/// Parse the last non-empty line of stdout as JSON.
#[track_caller]
pub fn last_json_line(out: &Out) -> Value {
    let line = out
        .stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_else(|| panic!("no output: {out}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}\n{out}"))
}

/// Host pids whose `/proc/PID/cmdline` contains `needle` (excluding this process).
pub fn pids_with_cmdline(needle: &str) -> Vec<i32> {
    crate::processes_mentioning(needle)
        .into_iter()
        .filter(|(pid, _)| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .replace('\0', " ")
                        .contains(needle)
                })
                .unwrap_or(false)
        })
        .map(|(p, _)| p)
        .collect()
}

/// An HTTP origin server on the host's loopback (a thread per connection): every request is
/// answered with `body`, and with what it asked (`body [GET /path HTTP/1.1]`). Returns the port.
pub fn http_origin(body: &'static str) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    buf.drain(..end);
                    let first = head.lines().next().unwrap_or("").to_string();
                    let reply = format!("{body} [{first}]");
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{reply}",
                        reply.len()
                    );
                }
            });
        }
    });
    port
}
