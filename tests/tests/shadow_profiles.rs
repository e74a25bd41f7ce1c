//! Agent profiles: the shipped ones check clean, and each mechanism holds inside a real sandbox
//! (seccomp groups, Landlock, masks, TIOCSTI), while the agent's own directories and the project
//! stay usable.

use std::time::Duration;

use shadow_integration_tests::shadow::*;
use shadow_integration_tests::{read_fd_until, spawn_on_pty, workspace_dir};

/// Python that calls each denied syscall and prints `name=ERRNO`.
const SYSCALLS: &str = r#"
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
def t(name, f):
    r = f()
    print("%s=%s" % (name, errno.errorcode.get(ctypes.get_errno(), r) if r < 0 else "ok"))
t("unshare", lambda: libc.unshare(0x10000000))
t("clone-newns", lambda: libc.syscall(56, 0x00020000 | 17, 0, 0, 0, 0))
t("mount", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
t("keyctl", lambda: libc.syscall(250, 0, 0))
t("bpf", lambda: libc.syscall(321, 0, 0, 0))
t("ptrace", lambda: libc.ptrace(16, 1, 0, 0))
t("perf", lambda: libc.syscall(298, 0, 0, -1, -1, 0))
t("userfaultfd", lambda: libc.syscall(323, 0))
t("io_uring", lambda: libc.syscall(425, 1, 0))
"#;

#[test]
fn every_shipped_profile_passes_check_and_errors_have_positions() {
    let p = Project::new("prof-check");
    let dir = workspace_dir().join("profiles");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| f.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 7, "{files:?}");
    let mut args = vec!["profiles".to_string(), "check".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let o = p.ok(&args);
    assert_eq!(o.stdout.matches(": ok").count(), 7, "{o}");
    p.write(
        "bad.toml",
        "extends = \"default\"\n[seccomp]\ndeny = [\"mount\", \"sockets\"]\n",
    );
    let o = p.sh(&["profiles", "check", "bad.toml"]);
    assert_eq!(o.code(), Some(1), "{o}");
    assert!(
        o.stderr
            .starts_with("bad.toml:3:18: unknown variant `sockets`"),
        "{o}"
    );
    let o = p.ok(&["profiles", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    for n in [
        "aider",
        "claude-code",
        "codex",
        "default",
        "gemini-cli",
        "opencode",
        "openhands",
    ] {
        assert!(names.contains(&n), "{names:?}");
    }
    let o = p.ok(&["profiles", "show", "codex", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(
        v["sources"],
        serde_json::json!(["builtin:default", "builtin:codex"])
    );
    assert!(v["filesystem"]["deny"]
        .as_array()
        .unwrap()
        .contains(&"~/.aws".into()));
}

#[test]
fn default_profile_denies_each_seccomp_group() {
    let p = Project::new("prof-seccomp");
    let o = p.sh(&["run", "--", "python3", "-c", SYSCALLS]);
    assert_eq!(o.code(), Some(0), "{o}");
    for name in [
        "unshare",
        "clone-newns",
        "mount",
        "keyctl",
        "bpf",
        "ptrace",
        "perf",
        "userfaultfd",
        "io_uring",
    ] {
        assert!(
            o.stdout.contains(&format!("{name}=EPERM\n")),
            "{name}: {}",
            o.stdout
        );
    }
}

#[test]
fn tiocsti_is_denied_on_the_terminal_while_other_ioctls_work() {
    let p = Project::new("prof-tiocsti");
    let script = r#"
import fcntl, termios, struct, errno
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x"); print("sti=ok")
except OSError as e:
    print("sti=" + errno.errorcode[e.errno])
try:
    fcntl.ioctl(0, termios.TIOCSTI | (1 << 32), b"x"); print("sti-high=ok")
except (OSError, OverflowError) as e:
    print("sti-high=" + type(e).__name__)
rows, cols = struct.unpack("hh", fcntl.ioctl(0, termios.TIOCGWINSZ, b"0000"))
print("winsz=%d,%d" % (rows, cols))
"#;
    let cmd = p.cmd(&["run", "--", "python3", "-c", script]);
    let (mut child, master) = spawn_on_pty(cmd, Some((30, 100)));
    let s = read_fd_until(
        std::os::fd::AsFd::as_fd(&master),
        "winsz=",
        Duration::from_secs(20),
    );
    let _ = child.wait();
    assert!(s.contains("sti=EPERM"), "{s:?}");
    assert!(!s.contains("sti-high=ok"), "{s:?}");
}

#[test]
fn agent_directories_and_the_project_work_under_its_profile() {
    let p = Project::new("prof-claude");
    let o = p.run_with(
        &["--profile", "claude-code"],
        "mkdir -p ~/.claude && echo state > ~/.claude/s && cat ~/.claude/s && echo '{}' > ~/.claude.json \
         && echo changed > README.md && echo ok; echo proxy=$HTTPS_PROXY",
    );
    assert_eq!(o.code(), Some(0), "{o}");
    assert!(o.stdout.contains("state\nok\n"), "{o}");
    assert!(o.stdout.contains("proxy=http://127.0.0.1:3128\n"), "{o}");
    let d = p.ok(&["diff", "--name-status"]);
    assert_eq!(d.stdout, "M\tREADME.md\n", "{d}");
}

#[test]
fn a_project_profile_denies_a_mounted_path_limits_tcp_and_masks_env_files() {
    let p = Project::new("prof-project");
    let outside = p.base().join("shared");
    std::fs::create_dir_all(outside.join("creds")).unwrap();
    std::fs::write(outside.join("creds/token"), "s3cret\n").unwrap();
    std::fs::write(outside.join("notes"), "public\n").unwrap();
    p.write(".env", "API_KEY=abc\n");
    p.write(
        ".shadow/profiles/strict.toml",
        &format!(
            "extends = \"default\"\n[filesystem]\nread_only = [\"{o}\"]\ndeny = [\"{o}/creds\"]\n[landlock]\ntcp_connect = [8081]\n",
            o = outside.display()
        ),
    );
    let script = format!(
        r#"
import socket, os
def rd(p):
    try:
        return open(p).read().strip() or "empty"
    except OSError as e:
        return type(e).__name__
print("notes=" + rd("{o}/notes"))
print("token=" + rd("{o}/creds/token"))
print("env=" + rd(".env"))
try:
    open("{o}/new", "w"); print("write=ok")
except OSError as e:
    print("write=" + type(e).__name__)
for port in (8080, 8081):
    s = socket.socket(); s.bind(("127.0.0.1", port)); s.listen(1)
    c = socket.socket()
    try:
        c.connect(("127.0.0.1", port)); print("c%d=ok" % port)
    except OSError as e:
        print("c%d=%s" % (port, type(e).__name__))
"#,
        o = outside.display()
    );
    let o = p.sh(&["run", "--profile", "strict", "--", "python3", "-c", &script]);
    assert_eq!(o.code(), Some(0), "{o}");
    assert!(o.stdout.contains("notes=public\n"), "{o}");
    assert!(!o.stdout.contains("s3cret"), "{o}");
    assert!(o.stdout.contains("env=empty\n"), "{o}");
    assert!(!o.stdout.contains("write=ok"), "{o}");
    assert!(o.stdout.contains("c8080=PermissionError\n"), "{o}");
    assert!(o.stdout.contains("c8081=ok\n"), "{o}");
}

#[test]
fn dry_run_prints_the_spec_with_seccomp_and_the_landlock_rules() {
    let p = Project::new("prof-dry");
    let o = p.ok(&["run", "--profile", "codex", "--dry-run", "--", "true"]);
    let spec: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(spec["annotations"]["run.shadow.profile-applied"], "codex");
    let ll: serde_json::Value =
        serde_json::from_str(spec["annotations"]["run.shadow.landlock"].as_str().unwrap()).unwrap();
    // 443 from the profile, 3128 for shadow's proxy (the profile allows hosts).
    assert_eq!(ll["tcp_connect"], serde_json::json!([443, 3128]));
    assert_eq!(spec["linux"]["seccomp"]["defaultAction"], "SCMP_ACT_ALLOW");
    assert!(o.stderr.contains("# landlock: allow read+exec  /\n"), "{o}");
    assert!(
        o.stderr.contains("# landlock: tcp connect      443,3128\n"),
        "{o}"
    );
    let o = p.sh(&["run", "--profile", "nope", "--", "true"]);
    assert_eq!(o.code(), Some(1));
    assert_eq!(
        o.stderr,
        "shadow: unknown profile \"nope\" (`shadow profiles list` shows the available ones)\n"
    );
    assert!(p.session_ids().is_empty());
}

#[test]
fn a_profiles_protected_paths_are_left_out_by_apply() {
    let p = Project::new("prof-protected");
    p.write(
        ".shadow/profiles/guarded.toml",
        "extends = \"default\"\n[apply]\nprotected = [\"deploy/**\"]\n",
    );
    let o = p.run_with(
        &["--profile", "guarded"],
        "mkdir -p deploy && echo evil > deploy/prod.yml && echo ok > notes.txt",
    );
    assert_eq!(o.code(), Some(0), "{o}");
    let o = p.ok(&["apply", "--all", "--yes"]);
    assert!(o.stdout.contains("applied   notes.txt\n"), "{o}");
    assert!(
        o.stdout.contains("protected deploy/prod.yml (not applied"),
        "{o}"
    );
    assert!(!p.path("deploy/prod.yml").exists());
    assert_eq!(p.read("notes.txt"), "ok\n");
}
