//! End-to-end: a real process under a real NOTIFY filter, the fd passed in
//! libcontainer's wire format, the supervisor answering.
//!
//! The filtered process is this test binary re-executed (`helper_entry`
//! with an environment variable set): it is a fresh process, so it can use
//! libseccomp (which allocates) without the malloc-after-fork hazards of
//! forking a multi-threaded test process.

use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libseccomp::{ScmpAction, ScmpFilterContext, ScmpSyscall};
use nix::sys::socket::{self, ControlMessage, MsgFlags, UnixAddr};
use oci_spec::runtime::{ContainerProcessStateBuilder, ContainerState, StateBuilder};
use shadow_execaudit::{ExecEvent, Listener, Stats, Supervisor};

const HELPER_SOCKET: &str = "SHADOW_EXECAUDIT_TEST_SOCKET";
const SCRIPT: &str = "ls / | wc -l";
const HELPER_MODE: &str = "SHADOW_EXECAUDIT_TEST_MODE";

/// Not a test on its own: with `HELPER_SOCKET` set, this process installs
/// the filter, hands the notify fd over like libcontainer does and becomes
/// `/bin/sh -c SCRIPT`.
#[test]
fn helper_entry() {
    let Some(socket_path) = std::env::var_os(HELPER_SOCKET) else {
        return;
    };
    let mut ctx = ScmpFilterContext::new(ScmpAction::Allow).unwrap();
    for name in ["execve", "execveat"] {
        ctx.add_rule(ScmpAction::Notify, ScmpSyscall::from_name(name).unwrap())
            .unwrap();
    }
    // Sets NO_NEW_PRIVS first (SCMP_FLTATR_CTL_NNP defaults to on).
    ctx.load().unwrap();
    let notify_fd = ctx.get_notify_fd().unwrap();
    send_like_libcontainer(Path::new(&socket_path), Some(notify_fd), &state_json());
    // SAFETY: our copy of the notify fd, not used afterwards.
    unsafe { libc::close(notify_fd) };
    if std::env::var_os(HELPER_MODE).is_some_and(|m| m == "fexecve") {
        fexecve_true();
    }
    let err = Command::new("/bin/sh").args(["-c", SCRIPT]).exec();
    panic!("exec /bin/sh: {err}");
}

/// `fexecve(open("/bin/true"), ["true", "x"], [])`, spelled as the
/// syscall glibc uses for it: `execveat(fd, "", argv, envp, AT_EMPTY_PATH)`.
fn fexecve_true() -> ! {
    let file = std::fs::File::open("/bin/true").unwrap();
    let empty = c"";
    let args = [c"true".as_ptr(), c"x".as_ptr(), std::ptr::null()];
    let env = [std::ptr::null::<libc::c_char>()];
    // SAFETY: all pointers are valid NUL-terminated strings / NULL-ended
    // arrays that outlive the call; on success the call does not return.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            file.as_raw_fd(),
            empty.as_ptr(),
            args.as_ptr(),
            env.as_ptr(),
            libc::AT_EMPTY_PATH,
        );
    }
    panic!("execveat: {}", std::io::Error::last_os_error());
}

fn state_json() -> Vec<u8> {
    let state = ContainerProcessStateBuilder::default()
        .version(oci_spec::runtime::VERSION)
        .fds(vec![oci_spec::runtime::SECCOMP_FD_NAME.to_string()])
        .pid(std::process::id() as i32)
        .metadata(String::new())
        .state(
            StateBuilder::default()
                .version(oci_spec::runtime::VERSION)
                .id("execaudit-test")
                .status(ContainerState::Creating)
                .pid(std::process::id() as i32)
                .bundle(PathBuf::from("/tmp/bundle"))
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    serde_json::to_vec(&state).unwrap()
}

/// What libcontainer's `sync_seccomp_send_msg` does: connect, one sendmsg
/// with the JSON and the fd as SCM_RIGHTS, close.
fn send_like_libcontainer(path: &Path, fd: Option<RawFd>, payload: &[u8]) {
    let sock = socket::socket(
        socket::AddressFamily::Unix,
        socket::SockType::Stream,
        socket::SockFlag::empty(),
        None,
    )
    .unwrap();
    socket::connect(sock.as_raw_fd(), &UnixAddr::new(path).unwrap()).unwrap();
    let iov = [IoSlice::new(payload)];
    let fds: Vec<RawFd> = fd.into_iter().collect();
    let cmsgs: Vec<ControlMessage<'_>> = if fds.is_empty() {
        Vec::new()
    } else {
        vec![ControlMessage::ScmRights(&fds)]
    };
    socket::sendmsg::<UnixAddr>(sock.as_raw_fd(), &iov, &cmsgs, MsgFlags::empty(), None).unwrap();
}

type Events = Arc<Mutex<Vec<ExecEvent>>>;

fn start(dir: &Path) -> (PathBuf, Supervisor, Events) {
    let path = dir.join("exec.sock");
    let listener = Listener::bind(&path).unwrap();
    let events: Events = Arc::default();
    let sink = Arc::clone(&events);
    let sup = listener
        .spawn(move |ev| sink.lock().unwrap().push(ev))
        .unwrap();
    (path, sup, events)
}

fn run_helper(socket: &Path, cwd: &Path, mode: &str) -> (u32, Output) {
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_entry", "--nocapture", "--test-threads=1"])
        .env(HELPER_SOCKET, socket)
        .env(HELPER_MODE, mode)
        .current_dir(cwd)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    (pid, child.wait_with_output().unwrap())
}

fn wait_finished(sup: &Supervisor) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if sup.is_finished() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn records_execs_lets_them_run_and_ends_on_pollhup() {
    let dir = tempfile::tempdir().unwrap();
    let (socket, sup, events) = start(dir.path());
    let (helper_pid, out) = run_helper(&socket, dir.path(), "sh");

    // The execs went through: normal output and exit status.
    assert!(
        out.status.success(),
        "{out:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // libtest may have printed its header before the exec; wc's line is last.
    let counted: usize = stdout.split_whitespace().last().unwrap().parse().unwrap();
    let expected = std::fs::read_dir("/")
        .unwrap()
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .count();
    assert_eq!(counted, expected, "stdout: {stdout}");

    // The helper is reaped (by wait_with_output), and sh reaped ls and wc:
    // the filter has no users left, so the supervisor ends on its own.
    assert!(wait_finished(&sup), "supervisor did not see POLLHUP");
    let stats = sup.finish();
    let events = events.lock().unwrap().clone();
    assert_eq!(
        stats,
        Stats {
            execs: 3,
            denials: 0,
            errors: 0,
            first_error: None
        },
        "{events:#?}"
    );
    assert_eq!(events.len(), 3);

    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    for ev in &events {
        assert_eq!(ev.syscall, "execve", "{ev:?}");
        assert_eq!(ev.cwd.as_deref(), cwd.to_str(), "{ev:?}");
        assert!(ev.ppid.is_some(), "{ev:?}");
        assert!(ev.id_valid && !ev.truncated && ev.error.is_none(), "{ev:?}");
    }
    let sh = &events[0];
    assert_eq!(sh.path, "/bin/sh");
    assert_eq!(sh.argv, ["/bin/sh", "-c", SCRIPT]);
    assert_eq!(sh.ppid, Some(std::process::id() as i32));

    // ls and wc run concurrently: either order.
    let by_cmd = |cmd: &str| -> &ExecEvent {
        let found: Vec<&ExecEvent> = events
            .iter()
            .filter(|e| e.path.ends_with(&format!("/{cmd}")))
            .collect();
        assert_eq!(found.len(), 1, "{cmd}: {events:#?}");
        found[0]
    };
    let (ls, wc) = (by_cmd("ls"), by_cmd("wc"));
    assert_eq!(ls.argv, ["ls", "/"]);
    assert_eq!(wc.argv, ["wc", "-l"]);
    // ls and wc are children of the shell (the helper process after exec).
    assert_eq!(ls.ppid, Some(helper_pid as i32));
    assert_eq!(wc.ppid, Some(helper_pid as i32));
}

#[test]
fn records_fexecve_with_the_file_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (socket, sup, events) = start(dir.path());
    let (_, out) = run_helper(&socket, dir.path(), "fexecve");
    assert!(out.status.success(), "{out:?}");
    assert!(wait_finished(&sup), "supervisor did not see POLLHUP");
    let stats = sup.finish();
    let events = events.lock().unwrap().clone();
    assert_eq!((stats.execs, stats.errors), (1, 0), "{events:#?}");
    let ev = &events[0];
    assert_eq!(ev.syscall, "execveat");
    assert_eq!(ev.path, "");
    assert_eq!(ev.argv, ["true", "x"]);
    let target = std::fs::canonicalize("/bin/true").unwrap();
    assert_eq!(ev.dirfd_path.as_deref(), target.to_str());
    assert!(ev.id_valid);
}

fn assert_fails_by_itself(fd: Option<RawFd>, payload: &[u8], expect: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (socket, sup, events) = start(dir.path());
    send_like_libcontainer(&socket, fd, payload);
    assert!(wait_finished(&sup), "supervisor hangs on {expect}");
    let stats = sup.finish();
    assert_eq!(stats.execs, 0);
    assert_eq!(stats.errors, 1);
    let err = stats.first_error.unwrap();
    assert!(err.contains(expect), "{err}");
    assert!(events.lock().unwrap().is_empty());
    // The listener removed its socket after the one connection.
    assert!(!socket.exists());
}

#[test]
fn malformed_messages_are_reported_not_hung_on() {
    let (r, _w) = nix::unistd::pipe().unwrap();
    let pipe = r.as_fd().as_raw_fd();
    assert_fails_by_itself(None, b"garbage", "expected exactly one fd");
    assert_fails_by_itself(None, &state_json(), "expected exactly one fd");
    assert_fails_by_itself(None, b"", "expected exactly one fd");
    assert_fails_by_itself(Some(pipe), b"garbage", "container process state JSON");
    assert_fails_by_itself(Some(pipe), b"{}", "state names fds []");
    assert_fails_by_itself(Some(pipe), &state_json(), "not a seccomp notify fd");
}

#[test]
fn stop_before_any_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (socket, sup, _events) = start(dir.path());
    assert!(socket.exists());
    std::thread::sleep(Duration::from_millis(20));
    assert!(!sup.is_finished());
    assert_eq!(sup.finish(), Stats::default());
    assert!(!socket.exists());
}

#[test]
fn bind_replaces_stale_socket_but_not_other_files() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let l = Listener::bind(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    drop(l);
    assert!(!path.exists());

    std::fs::write(&path, b"not a socket").unwrap();
    let err = Listener::bind(&path).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    assert_eq!(std::fs::read(&path).unwrap(), b"not a socket");
}
