//! `shadow run` on a terminal: a real pty inside, Ctrl-C reaches the command (through the
//! sandbox's minimal init), window size is passed on.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use shadow_integration_tests::shadow::Project;
use shadow_integration_tests::{read_fd_until, spawn_on_pty};

const T: Duration = Duration::from_secs(20);

#[test]
fn ctrl_c_on_the_terminal_stops_the_command() {
    let p = Project::new("tty-ctrl-c");
    let cmd = p.cmd(&[
        "run",
        "--",
        "sh",
        "-c",
        "echo name=$(tty) size=$(stty size); sleep 20; echo NOT-INTERRUPTED",
    ]);
    let (mut child, master) = spawn_on_pty(cmd, Some((33, 111)));
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
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
}
