//! --preserve-fds, and the CVE-2019-5736 defence (the runtime runs from a sealed memfd).

use std::fs;
use std::io::{Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use shadow_integration_tests::*;

/// A command whose fd 3 is `file` (dup2 in the child clears CLOEXEC).
fn with_fd3(ctx: &Ctx, args: &[&str], file: &fs::File) -> std::process::Command {
    let mut c = ctx.command(args);
    let fd = file.as_raw_fd();
    // SAFETY: dup2 is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        c.pre_exec(move || {
            // dup2(3, 3) would keep FD_CLOEXEC: clear it explicitly in that case.
            let rc = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c
}

fn fd3_file(ctx: &Ctx, content: &str) -> fs::File {
    let p = ctx.dir().join("fd3.txt");
    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&p)
        .unwrap();
    f.write_all(content.as_bytes()).unwrap();
    f.rewind().unwrap();
    f
}

#[test]
fn preserve_fds_passes_fd_3_to_run() {
    let ctx = Ctx::new(
        "fds",
        &[
            "sh",
            "-c",
            "cat <&3; echo; readlink /proc/self/fd/3 >/dev/null && echo fd3-open",
        ],
    );
    let id = ctx.id("c");
    let f = fd3_file(&ctx, "secret-through-fd3");
    let o = ctx
        .spawn_cmd(with_fd3(&ctx, &["run", "--preserve-fds", "1", &id], &f))
        .wait(CMD_TIMEOUT);
    assert_eq!(o.code(), Some(0), "{o}");
    assert_eq!(o.stdout, "secret-through-fd3\nfd3-open\n", "{o}");
    ctx.assert_clean();
}

#[test]
fn without_preserve_fds_fd_3_is_closed() {
    let ctx = Ctx::new(
        "nofds",
        &[
            "sh",
            "-c",
            "if [ -e /proc/self/fd/3 ]; then echo leaked; else echo closed; fi",
        ],
    );
    let id = ctx.id("c");
    let f = fd3_file(&ctx, "must-not-leak");
    let o = ctx
        .spawn_cmd(with_fd3(&ctx, &["run", &id], &f))
        .wait(CMD_TIMEOUT);
    assert_eq!(o.code(), Some(0), "{o}");
    assert_eq!(o.stdout, "closed\n", "{o}");
    ctx.assert_clean();
}

#[test]
fn preserve_fds_with_create_and_exec() {
    let ctx = Ctx::new("fdscreate", &["sh", "-c", "cat <&3; exec sleep 60"]);
    let id = ctx.id("c");
    let f = fd3_file(&ctx, "via-create");
    let o = ctx
        .spawn_cmd(with_fd3(&ctx, &["create", "--preserve-fds", "1", &id], &f))
        .wait(CMD_TIMEOUT)
        .ok();
    ctx.ok(&["start", &id]);
    wait_file_contains(&o.stdout_path, "via-create", Duration::from_secs(10));
    let g = fd3_file(&ctx, "via-exec");
    let o = ctx
        .spawn_cmd(with_fd3(
            &ctx,
            &["exec", "--preserve-fds", "1", &id, "sh", "-c", "cat <&3"],
            &g,
        ))
        .wait(CMD_TIMEOUT);
    assert_eq!(o.code(), Some(0), "{o}");
    assert_eq!(o.stdout, "via-exec", "{o}");
    ctx.kill_and_delete(&id);
    ctx.assert_clean();
}

/// How the runtime's executable is protected, if at all.
fn exe_protection(fd: &fs::File) -> Option<&'static str> {
    // SAFETY: F_GET_SEALS / fstatvfs only read kernel state of an fd we own.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    if seals >= 0 && seals & libc::F_SEAL_WRITE != 0 {
        return Some("sealed memfd");
    }
    // SAFETY: as above, into a statvfs we own.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open; st is a valid out pointer.
    if unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut st) } == 0 && st.f_flag & libc::ST_RDONLY != 0 {
        return Some("read-only mount");
    }
    None
}

/// The exe of runtime process `pid` (which puts processes into a container) must be a sealed
/// memfd (`/memfd:shadow-runtime (deleted)`) or a read-only (detached bind) mount of the binary.
/// Returns an fd to it, held the way a CVE-2019-5736 attacker would hold it.
fn check_sealed_exe(pid: i32) -> fs::File {
    let exe = format!("/proc/{pid}/exe");
    let mut held = None;
    wait_until(
        "runtime re-exec into a protected exe",
        Duration::from_secs(10),
        || {
            let Ok(f) = fs::File::open(&exe) else {
                return false;
            };
            let ok = exe_protection(&f).is_some();
            if ok {
                held = Some(f);
            }
            ok
        },
    );
    let held = held.unwrap();
    let target = fs::read_link(&exe).unwrap().to_string_lossy().to_string();
    if exe_protection(&held) == Some("sealed memfd") {
        assert_eq!(target, "/memfd:shadow-runtime (deleted)");
    }
    // Opening it for writing fails (ETXTBSY: being executed; EPERM: sealed; EROFS: ro mount).
    for read in [false, true] {
        let err = fs::OpenOptions::new()
            .write(true)
            .read(read)
            .open(&exe)
            .expect_err("opened the runtime's exe for writing");
        let code = err.raw_os_error();
        assert!(
            [libc::ETXTBSY, libc::EPERM, libc::EROFS].contains(&code.unwrap_or(0)),
            "open {exe} for writing: {err}"
        );
    }
    held
}

/// After the runtime has exited, the held handle still cannot be turned into a write.
fn assert_unwritable_after_exit(held: &fs::File) {
    let path = format!("/proc/self/fd/{}", held.as_raw_fd());
    if let Ok(mut w) = fs::OpenOptions::new().write(true).open(&path) {
        assert!(
            w.write_all(b"pwned").is_err(),
            "wrote to the runtime's exe through a held handle"
        );
    }
    assert_ne!(
        fs::read(runtime()).unwrap().get(..5),
        Some(&b"pwned"[..]),
        "on-disk runtime binary modified"
    );
}

#[test]
fn runtime_exe_is_protected_during_run() {
    let ctx = Ctx::new("seal", &["sh", "-c", "echo up; exec sleep 5"]);
    let id = ctx.id("c");
    let mut run = ctx.spawn(&["run", &id]);
    run.wait_stdout("up", Duration::from_secs(10));
    let rt = run.pid();
    let held = check_sealed_exe(rt);
    ctx.ok(&["kill", &id, "KILL"]);
    let o = run.wait(Duration::from_secs(10));
    assert_eq!(o.code(), Some(137), "{o}");
    assert_unwritable_after_exit(&held);
    ctx.assert_clean_pids(&[rt]);
}

#[test]
fn runtime_exe_is_protected_during_exec() {
    let ctx = Ctx::new("sealexec", &["sleep", "60"]);
    let id = ctx.id("c");
    ctx.run_detached(&id);
    let mut ex = ctx.spawn(&["exec", &id, "sh", "-c", "echo in; exec sleep 5"]);
    ex.wait_stdout("in", Duration::from_secs(10));
    let held = check_sealed_exe(ex.pid());
    // The container cannot reach the runtime's exe either: its /proc shows only its own pids.
    let o = ctx.ok(&["exec", &id, "sh", "-c", "ls /proc | grep -c '^[0-9]'"]);
    let n: usize = o.stdout.trim().parse().unwrap();
    // sleep (init), the exec'd sh/sleep, and this sh, ls, grep: no host process.
    assert!(n <= 5, "container sees {n} processes: {o}");
    ctx.ok(&["kill", "--all", &id, "KILL"]);
    let o = ex.wait(Duration::from_secs(10));
    assert_eq!(o.code(), Some(137), "{o}");
    assert_unwritable_after_exit(&held);
    ctx.wait_status(&id, "stopped");
    ctx.ok(&["delete", &id]);
    ctx.assert_clean();
}

#[test]
fn read_only_commands_are_not_re_executed() {
    // `state`/`list` do not enter a container and need no sealed copy (cheap).
    let ctx = Ctx::new("nosealist", &["true"]);
    let o = ctx.ok(&["list", "-q"]);
    assert_eq!(o.stdout, "");
    ctx.assert_clean();
}

/// `SCMP_CMP_MASKED_EQ` has its OCI meaning, `(arg & value) == valueTwo`, as under runc: a rule
/// denying `kill` with `(sig & 0xff) == SIGUSR1` denies SIGUSR1 and nothing else. (Read the other
/// way, the mask would be 10 and SIGTERM, 15 = 0b1111, would be denied too; Docker's default
/// profile would silently allow namespace-creating clones.)
#[test]
fn seccomp_masked_eq_has_its_oci_meaning() {
    let mut ctx = Ctx::new(
        "mskeq",
        &[
            "sh",
            "-c",
            "sleep 10 & kill -USR1 $!; echo usr1=$?; kill -TERM $!; echo term=$?",
        ],
    );
    ctx.spec["process"]["noNewPrivileges"] = serde_json::json!(true);
    ctx.spec["linux"]["seccomp"] = serde_json::json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [{"names": ["kill"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
                      "args": [{"index": 1, "value": 255, "valueTwo": 10, "op": "SCMP_CMP_MASKED_EQ"}]}]
    });
    ctx.write_spec();
    let id = ctx.id("c");
    let o = ctx.rt(&["run", &id]);
    assert!(o.stdout.contains("usr1=1"), "{o}");
    assert!(o.stdout.contains("term=0"), "{o}");
    ctx.assert_clean();
}

/// Put an NSS module into `ctx`'s rootfs that announces itself when loaded (a line on stderr and
/// `/nss-loaded` in the rootfs), and an `nsswitch.conf` that names it for passwd and group.
fn plant_nss_module(ctx: &Ctx) {
    let src = ctx.dir().join("evil.c");
    fs::write(
        &src,
        r#"#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void loaded(void) {
    static const char msg[] = "IMAGE-NSS-MODULE-LOADED\n";
    int fd = open("/nss-loaded", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) { (void)write(fd, msg, sizeof msg - 1); close(fd); }
    (void)write(2, msg, sizeof msg - 1);
}
"#,
    )
    .unwrap();
    // Wherever this host's glibc looks for libraries (multiarch and plain /lib).
    let multiarch = std::process::Command::new("cc")
        .arg("-print-multiarch")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let mut dirs = vec![ctx.rootfs.join("lib"), ctx.rootfs.join("usr/lib")];
    if !multiarch.is_empty() {
        dirs.push(ctx.rootfs.join("lib").join(&multiarch));
        dirs.push(ctx.rootfs.join("usr/lib").join(&multiarch));
    }
    let lib = ctx.dir().join("libnss_evil.so.2");
    let st = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .expect("cc (needed to build the test's NSS module)");
    assert!(st.success(), "cc failed for {}", lib.display());
    for d in &dirs {
        fs::create_dir_all(d).unwrap();
        fs::copy(&lib, d.join("libnss_evil.so.2")).unwrap();
    }
    fs::write(
        ctx.rootfs.join("etc/nsswitch.conf"),
        "passwd: evil\ngroup: evil\nshadow: evil\n",
    )
    .unwrap();
    let mut pw = fs::read_to_string(ctx.rootfs.join("etc/passwd")).unwrap();
    pw.push_str("dev:x:1000:1000:Dev:/home/dev:/bin/sh\n");
    fs::write(ctx.rootfs.join("etc/passwd"), pw).unwrap();
}

/// An image cannot run code inside the runtime: with no `HOME` in the spec, libcontainer would
/// look the user up through glibc's NSS inside the container, and glibc would load the module
/// the image's `nsswitch.conf` names from the image, in the container's init process during
/// `create` (before `start`). The runtime resolves `HOME` from the image's `/etc/passwd` itself,
/// as runc does, for the container and for `exec`.
#[test]
fn nss_modules_of_the_image_are_never_loaded_by_the_runtime() {
    let ctx = Ctx::new("nss", &["sh", "-c", "echo HOME=$HOME; exec sleep 60"]);
    plant_nss_module(&ctx);
    let marker = ctx.rootfs.join("nss-loaded");
    let id = ctx.id("c");
    let b = ctx.bundle.to_str().unwrap().to_string();
    ctx.ok(&["create", "-b", &b, &id]);
    assert!(
        !marker.exists(),
        "the image's NSS module ran in the runtime at create"
    );
    ctx.ok(&["start", &id]);
    ctx.wait_status(&id, "running");

    // exec of a process without HOME, as uid 1000: HOME from the image's passwd.
    let proc_file = ctx.dir().join("exec-process.json");
    fs::write(
        &proc_file,
        serde_json::to_vec(&serde_json::json!({
            "terminal": false,
            "user": {"uid": 1000, "gid": 1000},
            "args": ["sh", "-c", "echo HOME=$HOME"],
            "env": ["PATH=/bin"],
            "cwd": "/"
        }))
        .unwrap(),
    )
    .unwrap();
    let o = ctx.ok(&["exec", "--process", proc_file.to_str().unwrap(), &id]);
    assert_eq!(o.stdout.trim(), "HOME=/home/dev", "{o}");
    assert!(!o.stderr.contains("IMAGE-NSS-MODULE-LOADED"), "{o}");
    // An exec of the init's process gets the HOME of its user, as under runc.
    let o = ctx.ok(&["exec", &id, "sh", "-c", "echo HOME=$HOME"]);
    assert_eq!(o.stdout.trim(), "HOME=/root", "{o}");
    let o = ctx.ok(&["exec", "-u", "1000", &id, "sh", "-c", "echo HOME=$HOME"]);
    assert_eq!(o.stdout.trim(), "HOME=/home/dev", "{o}");
    let o = ctx.ok(&[
        "exec",
        "-u",
        "1000",
        "-e",
        "HOME=/mine",
        &id,
        "sh",
        "-c",
        "echo HOME=$HOME",
    ]);
    assert_eq!(o.stdout.trim(), "HOME=/mine", "{o}");
    ctx.kill_and_delete(&id);
    assert!(
        !marker.exists(),
        "the image's NSS module was loaded: {}",
        fs::read_to_string(&marker).unwrap_or_default()
    );

    // `run` in the foreground: HOME from the image's passwd, nothing loaded.
    let mut ctx = ctx;
    ctx.set_args(&["sh", "-c", "echo HOME=$HOME"]);
    let id = ctx.id("r");
    let o = ctx.ok(&["run", "-b", &b, &id]);
    assert_eq!(o.stdout.trim(), "HOME=/root", "{o}");
    assert!(!o.stderr.contains("IMAGE-NSS-MODULE-LOADED"), "{o}");
    assert!(!marker.exists(), "the image's NSS module was loaded by run");

    // libcontainer reads a bare `HOME` entry as an empty HOME (the last entry wins).
    ctx.spec["process"]["env"] = serde_json::json!(["PATH=/bin", "HOME=/x", "HOME"]);
    ctx.write_spec();
    let id = ctx.id("bare");
    let o = ctx.ok(&["run", "-b", &b, &id]);
    assert_eq!(o.stdout.trim(), "HOME=/root", "{o}");
    assert!(!o.stderr.contains("IMAGE-NSS-MODULE-LOADED"), "{o}");
    assert!(
        !marker.exists(),
        "the image's NSS module was loaded (bare HOME)"
    );
    ctx.assert_clean();
}
