//! Terminals: the pty master over `--console-socket`, and `run` proxying a pty itself.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Duration;

use shadow_integration_tests::*;

const T: Duration = Duration::from_secs(10);

fn tty_ctx(tag: &str, args: &[&str]) -> Ctx {
    let mut ctx = Ctx::new(tag, args);
    ctx.spec["process"]["terminal"] = serde_json::json!(true);
    ctx.write_spec();
    ctx
}

/// Talk to an interactive `sh` on `master`: `tty` names a pts, a command's output comes back.
fn drive_shell(master: &OwnedFd) {
    let mut w = File::from(master.try_clone().unwrap());
    w.write_all(b"tty; echo hi-$((40+2))\n").unwrap();
    let s = read_fd_until(master.as_fd(), "hi-42", T);
    assert!(s.contains("/dev/pts/"), "tty did not report a pts: {s:?}");
    w.write_all(b"exit 0\n").unwrap();
}

#[test]
fn tty_create_with_console_socket() {
    let ctx = tty_ctx("ttycreate", &["sh"]);
    let id = ctx.id("c");
    let mut cs = ConsoleSocket::bind(&ctx);
    ctx.ok(&["create", "--console-socket", cs.path.to_str().unwrap(), &id]);
    let master = cs.master();
    assert_eq!(ctx.status(&id), "created");
    ctx.ok(&["start", &id]);
    drive_shell(&master);
    ctx.wait_status(&id, "stopped");
    ctx.ok(&["delete", &id]);
    drop(master);
    std::fs::remove_file(&cs.path).unwrap();
    ctx.assert_clean();
}

#[test]
fn tty_run_detach_with_console_socket() {
    let ctx = tty_ctx("ttyrund", &["sh"]);
    let id = ctx.id("c");
    let mut cs = ConsoleSocket::bind(&ctx);
    ctx.ok(&[
        "run",
        "--detach",
        "--console-socket",
        cs.path.to_str().unwrap(),
        &id,
    ]);
    let master = cs.master();
    assert_eq!(ctx.status(&id), "running");
    drive_shell(&master);
    ctx.wait_status(&id, "stopped");
    ctx.ok(&["delete", &id]);
    drop(master);
    std::fs::remove_file(&cs.path).unwrap();
    ctx.assert_clean();
}

#[test]
fn tty_console_socket_reports_pts_zero() {
    // A fresh devpts instance per container: the container's terminal is /dev/pts/0.
    let ctx = tty_ctx("ttypts0", &["sh", "-c", "echo name=$(tty):end"]);
    let id = ctx.id("c");
    let mut cs = ConsoleSocket::bind(&ctx);
    ctx.ok(&["create", "--console-socket", cs.path.to_str().unwrap(), &id]);
    let master = cs.master();
    ctx.ok(&["start", &id]);
    let s = read_fd_until(master.as_fd(), ":end", T);
    assert!(s.contains("name=/dev/pts/0:end"), "{s:?}");
    ctx.wait_status(&id, "stopped");
    ctx.ok(&["delete", &id]);
    ctx.assert_clean();
}

#[test]
fn tty_run_without_console_socket_proxies_a_pty() {
    let ctx = tty_ctx(
        "ttyproxy",
        &["sh", "-c", "echo name=$(tty); read x; echo got-$x; exit 7"],
    );
    let id = ctx.id("c");
    let (mut child, master) = spawn_on_pty(ctx.command(&["run", &id]), None);
    let s = read_fd_until(master.as_fd(), "name=/dev/pts/", T);
    assert!(!s.contains("not a tty"), "{s:?}");
    File::from(master.try_clone().unwrap())
        .write_all(b"abc\n")
        .unwrap();
    read_fd_until(master.as_fd(), "got-abc", T);
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(t0.elapsed() < T, "run on a pty did not exit");
        // Drain the master so the runtime never blocks writing to us.
        let mut buf = [0u8; 1024];
        let mut fds = [nix::poll::PollFd::new(
            master.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(20u8)).unwrap_or(0) > 0 {
            let _ = nix::unistd::read(master.as_raw_fd(), &mut buf);
        }
    };
    assert_eq!(status.code(), Some(7));
    ctx.assert_clean();
}

#[test]
fn tty_detached_create_without_console_socket_is_refused() {
    let ctx = tty_ctx("ttynosock", &["sh"]);
    let id = ctx.id("c");
    expect_error(&ctx, &["create", &id], &["console-socket"]);
    ctx.assert_clean();
}

#[test]
fn console_socket_without_terminal_is_refused() {
    let ctx = Ctx::new("ttynoterm", &["true"]);
    let id = ctx.id("c");
    let cs = ConsoleSocket::bind(&ctx);
    expect_error(
        &ctx,
        &["create", "--console-socket", cs.path.to_str().unwrap(), &id],
        &["terminal"],
    );
    std::fs::remove_file(&cs.path).unwrap();
    ctx.assert_clean();
}
