//! What auditing every exec costs: a shell loop running `/bin/true` 1000
//! times, (a) plain and (b) under a NOTIFY filter on execve/execveat with the
//! supervisor answering. Both runs re-execute this binary first (as the
//! filtered helper in (b)), so they differ only in the filter and the
//! supervisor. With `ARGS` > 0, each `/bin/true` gets that many arguments
//! shaped like a compiler's (`-Iinclude/dir7`), as a build's processes have.
//!
//! ```text
//! CARGO_TARGET_DIR=/work/target-execaudit cargo run --release -p shadow-execaudit --example exec_cost [rounds] [ARGS]
//! ```

use std::io::IoSlice;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use libseccomp::{ScmpAction, ScmpFilterContext, ScmpSyscall};
use nix::sys::socket::{self, ControlMessage, MsgFlags, UnixAddr};
use shadow_execaudit::Listener;

const ROLE: &str = "EXEC_COST_ROLE";
const SOCKET: &str = "EXEC_COST_SOCKET";
const ARGS: &str = "EXEC_COST_ARGS";

fn shell_loop(args: usize) -> String {
    let argv: Vec<String> = (0..args).map(|i| format!("-Iinclude/dir{i}")).collect();
    format!(
        "i=0; while [ $i -lt 1000 ]; do /bin/true {}; i=$((i+1)); done",
        argv.join(" ")
    )
}

fn main() {
    match std::env::var(ROLE).as_deref() {
        Ok("plain") => exec_loop(),
        Ok("audit") => {
            install_filter_and_hand_over(Path::new(&std::env::var_os(SOCKET).unwrap()));
            exec_loop()
        }
        _ => bench(),
    }
}

fn exec_loop() -> ! {
    let args = std::env::var(ARGS).map_or(0, |a| a.parse().unwrap());
    let err = Command::new("/bin/sh")
        .args(["-c", &shell_loop(args)])
        .exec();
    panic!("exec /bin/sh: {err}");
}

/// As the runtime's init + main process would: load the filter, then one
/// sendmsg of the ContainerProcessState JSON with the fd as SCM_RIGHTS.
fn install_filter_and_hand_over(socket_path: &Path) {
    let mut ctx = ScmpFilterContext::new(ScmpAction::Allow).unwrap();
    for name in shadow_execaudit::NOTIFIED_SYSCALLS {
        ctx.add_rule(ScmpAction::Notify, ScmpSyscall::from_name(name).unwrap())
            .unwrap();
    }
    ctx.load().unwrap();
    let fd = ctx.get_notify_fd().unwrap();
    let state = serde_json::json!({
        "ociVersion": "1.0.2",
        "fds": ["seccompFd"],
        "pid": std::process::id(),
        "metadata": "",
        "state": {"ociVersion": "1.0.2", "id": "bench", "status": "creating",
                  "pid": std::process::id(), "bundle": "/tmp/bench"}
    });
    let payload = serde_json::to_vec(&state).unwrap();
    let sock = socket::socket(
        socket::AddressFamily::Unix,
        socket::SockType::Stream,
        socket::SockFlag::empty(),
        None,
    )
    .unwrap();
    socket::connect(sock.as_raw_fd(), &UnixAddr::new(socket_path).unwrap()).unwrap();
    socket::sendmsg::<UnixAddr>(
        sock.as_raw_fd(),
        &[IoSlice::new(&payload)],
        &[ControlMessage::ScmRights(&[fd])],
        MsgFlags::empty(),
        None,
    )
    .unwrap();
    // SAFETY: our copy of the notify fd, not used afterwards.
    unsafe { libc::close(fd) };
}

fn run_child(role: &str, socket_path: Option<&Path>) -> Duration {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env(ROLE, role);
    if let Some(p) = socket_path {
        cmd.env(SOCKET, p);
    }
    let start = Instant::now();
    let status = cmd.status().unwrap();
    let took = start.elapsed();
    assert!(status.success(), "{role}: {status}");
    took
}

fn plain() -> Duration {
    run_child("plain", None)
}

fn audited() -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exec.sock");
    let listener = Listener::bind(&path).unwrap();
    // A realistic, cheap sink: keep the events in memory.
    let mut kept = Vec::with_capacity(1024);
    let sup = listener.spawn(move |ev| kept.push(ev)).unwrap();
    let took = run_child("audit", Some(&path));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !sup.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let stats = sup.finish();
    assert_eq!(stats.execs, 1001, "{stats:?}"); // sh + 1000 × true
    assert_eq!(stats.errors, 0, "{stats:?}");
    took
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn bench() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(9);
    let args: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(0);
    // SAFETY: single-threaded here (no supervisor runs yet); children
    // inherit it.
    unsafe { std::env::set_var(ARGS, args.to_string()) };
    // Warm-up (page cache, binary loading).
    plain();
    audited();
    let (mut p, mut a) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        // Interleaved so that drift affects both alike.
        p.push(plain());
        a.push(audited());
    }
    let fmt = |v: &[Duration]| {
        v.iter()
            .map(|d| format!("{:.0}", ms(*d)))
            .collect::<Vec<_>>()
    };
    println!("plain   ms: {:?}", fmt(&p));
    println!("audited ms: {:?}", fmt(&a));
    let (mp, ma) = (median(&mut p), median(&mut a));
    println!(
        "median over {rounds} rounds, 1000 execs each ({args} extra args): plain {:.1} ms, audited {:.1} ms, ratio {:.3} ({:+.1}%), {:.1} µs per exec",
        ms(mp),
        ms(ma),
        ma.as_secs_f64() / mp.as_secs_f64(),
        (ma.as_secs_f64() / mp.as_secs_f64() - 1.0) * 100.0,
        (ma.as_secs_f64() - mp.as_secs_f64()) * 1e6 / 1000.0,
    );
}
