//! `shadow review` end to end: a real session made by `shadow run` on a temp git project, then
//! the review driven through a real pty (and, separately, with answers piped on stdin), then
//! `shadow apply`, checking the project holds exactly the accepted hunks.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const SHADOW: &str = env!("CARGO_BIN_EXE_shadow");

/// A temp store and a temp git project with `f` (30 numbered lines) and `h`.
struct Fixture {
    _tmp: tempfile::TempDir,
    store: PathBuf,
    project: PathBuf,
}

fn git(project: &Path, args: &[&str]) {
    let st = Command::new("git")
        .args(["-c", "user.email=t@example.invalid", "-c", "user.name=t"])
        .args(args)
        .current_dir(project)
        .stdout(Stdio::null())
        .status()
        .expect("git runs");
    assert!(st.success(), "git {args:?}");
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let store = root.join("store");
        let project = root.join("proj");
        std::fs::create_dir_all(&project).unwrap();
        let lines: String = (1..=30).map(|i| format!("{i}\n")).collect();
        std::fs::write(project.join("f"), lines).unwrap();
        std::fs::write(project.join("h"), "x\n").unwrap();
        git(&project, &["init", "-q"]);
        git(&project, &["add", "."]);
        git(&project, &["commit", "-qm", "init"]);
        Fixture {
            _tmp: tmp,
            store,
            project,
        }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(SHADOW);
        c.args(args)
            .current_dir(&self.project)
            .env("SHADOW_STORE", &self.store)
            .env_remove("NO_COLOR");
        c
    }

    fn run_ok(&self, args: &[&str]) -> Output {
        let out = self
            .cmd(args)
            .stdin(Stdio::null())
            .output()
            .expect("shadow runs");
        assert!(
            out.status.success(),
            "shadow {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// A session that changes two distant lines of `f` (two hunks), adds `g`, deletes `h`.
    fn session(&self) {
        self.run_ok(&[
            "run",
            "--",
            "sh",
            "-c",
            "sed -i 's/^2$/TWO/; s/^25$/TWENTYFIVE/' f && echo b > g && rm h",
        ]);
    }

    fn selection(&self) -> serde_json::Value {
        let sessions = self.store.join("sessions");
        let dir = std::fs::read_dir(&sessions)
            .unwrap()
            .flatten()
            .find(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .expect("a session")
            .path();
        let text = std::fs::read_to_string(dir.join("selection.json")).expect("selection saved");
        serde_json::from_str(&text).unwrap()
    }

    fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.project.join(name)).ok()
    }
}

/// The child end of a pty as stdin/stdout/stderr, made the child's controlling terminal.
struct Pty {
    master: std::fs::File,
    rx: mpsc::Receiver<Vec<u8>>,
    seen: Vec<u8>,
    pos: usize,
}

impl Pty {
    fn spawn(mut cmd: Command) -> (std::process::Child, Pty) {
        let pty = nix::pty::openpty(None, None).expect("openpty");
        let slave: OwnedFd = pty.slave;
        let dup = |fd: &OwnedFd| fd.try_clone().unwrap();
        cmd.stdin(Stdio::from(dup(&slave)))
            .stdout(Stdio::from(dup(&slave)))
            .stderr(Stdio::from(dup(&slave)));
        // SAFETY: setsid and ioctl(TIOCSCTTY) are async-signal-safe; they make the pty (fd 0
        // after the redirections) the child's controlling terminal.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn on pty");
        drop(cmd);
        drop(slave);
        let master = std::fs::File::from(pty.master);
        let mut reader = master.try_clone().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once the child side is closed.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        (
            child,
            Pty {
                master,
                rx,
                seen: Vec::new(),
                pos: 0,
            },
        )
    }

    /// Wait until `needle` appears after what earlier calls consumed; consume up to its end.
    fn expect(&mut self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(i) = find(&self.seen[self.pos..], needle.as_bytes()) {
                self.pos += i + needle.len();
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(chunk) => self.seen.extend_from_slice(&chunk),
                Err(_) => panic!(
                    "timed out waiting for {needle:?}; output so far:\n{}",
                    String::from_utf8_lossy(&self.seen)
                ),
            }
        }
    }

    fn send(&mut self, line: &str) {
        self.master.write_all(line.as_bytes()).unwrap();
        self.master.write_all(b"\n").unwrap();
    }

    /// Everything the child printed, once it is gone.
    fn drain(&mut self) -> String {
        while let Ok(chunk) = self.rx.recv_timeout(Duration::from_secs(10)) {
            self.seen.extend_from_slice(&chunk);
        }
        String::from_utf8_lossy(&self.seen).into_owned()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn wait(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("shadow review did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_piped(fx: &Fixture, args: &[&str], input: &str) -> Output {
    let mut cmd = fx.cmd(args);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setsid is async-signal-safe; without a controlling terminal the review cannot
    // open /dev/tty and reads the piped answers.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn review_through_a_pty_then_apply() {
    let fx = Fixture::new();
    fx.session();

    let mut cmd = fx.cmd(&["review"]);
    cmd.env("SHADOW_PAGER", "cat").env("TERM", "xterm");
    let (mut child, mut pty) = Pty::spawn(cmd);
    // f, hunk 1: ask for help and a view first, then accept.
    pty.expect("+TWO");
    pty.expect("(1/2) Accept this hunk [y,n,a,d,s,v,q,?]?");
    pty.send("?");
    pty.expect("a - accept this hunk and all remaining hunks of the file");
    pty.expect("(1/2) Accept this hunk");
    pty.send("v");
    pty.expect("+TWENTYFIVE"); // the whole-file view shows the second hunk too
    pty.expect("(1/2) Accept this hunk");
    pty.send("y");
    // f, hunk 2: reject.
    pty.expect("(2/2) Accept this hunk");
    pty.send("n");
    // g (added): accept; h (deleted): reject.
    pty.expect("new file mode");
    pty.expect("Apply this change [y,n,s,v,q,?]?");
    pty.send("y");
    pty.expect("deleted file mode");
    pty.expect("Apply this change [y,n,s,v,q,?]?");
    pty.send("n");
    pty.expect("1 accepted, 1 rejected, 1 in part; 1 of 2 hunk(s) accepted");
    let st = wait(&mut child);
    let all = pty.drain();
    assert!(st.success(), "{st}\n{all}");
    assert!(
        all.contains("\x1b[32m+TWO\x1b[m"),
        "coloured on a terminal: {all}"
    );

    let sel = fx.selection();
    assert_eq!(
        sel["files"]["f"],
        serde_json::json!({"decision": "hunks", "accepted": [0], "total": 2})
    );
    assert_eq!(sel["files"]["g"]["decision"], "accept");
    assert_eq!(sel["files"]["h"]["decision"], "reject");

    // Resume: the saved decisions are the defaults; Enter keeps each of them.
    let out = run_piped(&fx, &["review"], "\n\n\n\n");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("resuming a previous review"), "{text}");
    assert!(
        text.contains("(1/2) Accept this hunk [y,n,a,d,s,v,q,?] (default y)?"),
        "{text}"
    );
    assert!(
        text.contains("(2/2) Accept this hunk [y,n,a,d,s,v,q,?] (default n)?"),
        "{text}"
    );
    assert!(!text.contains('\x1b'), "no colour when not a terminal");
    assert_eq!(fx.selection(), sel);

    fx.run_ok(&["apply", "--yes"]);
    let f = fx.read("f").unwrap();
    assert!(f.contains("\nTWO\n"), "accepted hunk applied: {f}");
    assert!(
        f.contains("\n25\n") && !f.contains("TWENTYFIVE"),
        "rejected hunk not applied: {f}"
    );
    let expected: String = (1..=30)
        .map(|i| {
            if i == 2 {
                "TWO\n".to_string()
            } else {
                format!("{i}\n")
            }
        })
        .collect();
    assert_eq!(f, expected);
    assert_eq!(fx.read("g").as_deref(), Some("b\n"));
    assert_eq!(fx.read("h").as_deref(), Some("x\n"), "rejected deletion");
}

#[test]
fn review_with_answers_piped_on_stdin() {
    let fx = Fixture::new();
    fx.session();
    // f: reject hunk 1, then `a` accepts the rest of f; g: `s` (undecided → rejected); h: y.
    let out = run_piped(&fx, &["review"], "n\na\ns\ny\n");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("diff --git a/f b/f"), "{text}");
    assert!(
        text.contains("1 accepted, 1 rejected, 1 in part; 1 of 2 hunk(s) accepted"),
        "{text}"
    );
    let sel = fx.selection();
    assert_eq!(
        sel["files"]["f"],
        serde_json::json!({"decision": "hunks", "accepted": [1], "total": 2})
    );
    assert_eq!(sel["files"]["g"]["decision"], "reject");
    assert_eq!(sel["files"]["h"]["decision"], "accept");

    // Quitting early keeps the earlier decisions for the rest (here: accept f's first hunk
    // instead, then quit).
    let out = run_piped(&fx, &["review"], "y\nq\n");
    assert!(out.status.success());
    let sel = fx.selection();
    assert_eq!(sel["files"]["f"]["decision"], "accept");
    assert_eq!(sel["files"]["h"]["decision"], "accept");

    // End of input acts like q.
    let out = run_piped(&fx, &["review"], "n\n");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("end of input"));
    assert_eq!(
        fx.selection()["files"]["f"],
        serde_json::json!({"decision": "hunks", "accepted": [1], "total": 2})
    );

    fx.run_ok(&["apply", "--yes"]);
    let f = fx.read("f").unwrap();
    assert!(f.contains("\n2\n") && f.contains("\nTWENTYFIVE\n"), "{f}");
    assert_eq!(fx.read("g"), None, "skipped addition not applied");
    assert_eq!(fx.read("h"), None, "accepted deletion applied");
}

#[test]
fn review_of_an_unchanged_session() {
    let fx = Fixture::new();
    fx.run_ok(&["run", "--", "true"]);
    let out = run_piped(&fx, &["review"], "");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to review"));
}

#[test]
fn protected_paths_default_to_reject_and_directories_follow_their_files() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.project.join("dir")).unwrap();
    std::fs::write(fx.project.join("dir/a"), "a\n").unwrap();
    std::fs::write(fx.project.join("dir/b"), "b\n").unwrap();
    git(&fx.project, &["add", "."]);
    git(&fx.project, &["commit", "-qm", "dir"]);
    fx.run_ok(&[
        "run",
        "--",
        "sh",
        "-c",
        "echo SECRET=1 > .env && rm -rf dir",
    ]);
    // .env: Enter takes the default (reject); dir/a, dir/b: accept the deletions.
    let out = run_piped(&fx, &["review"], "\ny\ny\n");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("diff --git a/.env b/.env [protected]"),
        "{text}"
    );
    assert!(
        text.contains("Apply this change [y,n,s,v,q,?] (default n)?"),
        "{text}"
    );
    let sel = fx.selection();
    assert_eq!(sel["files"][".env"]["decision"], "reject");
    assert_eq!(sel["files"]["dir"]["decision"], "accept", "{sel}");
    fx.run_ok(&["apply", "--yes"]);
    assert!(
        !fx.project.join("dir").exists(),
        "directory deleted with its files"
    );
    assert!(!fx.project.join(".env").exists());
    assert_eq!(fx.read("f").unwrap().lines().count(), 30);
}
