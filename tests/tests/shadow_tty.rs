//! `shadow run` on a terminal: a real pty inside, Ctrl-C reaches the command (through the
//! sandbox's minimal init), window size is passed on.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use shadow_integration_tests::read_fd_until;
use shadow_integration_tests::shadow::Project;

const T: Duration = Duration::from_secs(20);

#[test]
fn ctrl_c_on_the_terminal_stops_the_command() {
    let p = Project::new("tty-ctrl-c");
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let ws = libc::winsize {
        ws_row: 33,
        ws_col: 111,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads the winsize we own.
    unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&pty.slave), libc::TIOCSWINSZ, &ws) };
    let slave = pty.slave;
    let mut cmd = p.cmd(&[
        "run",
        "--",
        "sh",
        "-c",
        "echo name=$(tty) size=$(stty size); sleep 20; echo NOT-INTERRUPTED",
    ]);
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
    let mut child = cmd.spawn().expect("spawn shadow run on a pty");
    drop(slave);
    let master = pty.master;
    let s = read_fd_until(master.as_fd(), "size=33 111", T);
    assert!(s.contains("name=/dev/pts/"), "no pty inside: {s:?}");
    std::thread::sleep(Duration::from_millis(300));
    File::from(master.try_clone().unwrap())
        .write_all(&[3])
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(t0.elapsed() < T, "Ctrl-C did not stop the command");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130), "exit status after Ctrl-C");
    assert!(t0.elapsed() < Duration::from_secs(10), "took {:?}", t0.elapsed());
}
