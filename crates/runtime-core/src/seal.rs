//! Protection against overwriting the runtime binary from inside a container (CVE-2019-5736).
//!
//! Threat: a process in the container reaches the runtime's executable through
//! `/proc/<runtime pid>/exe` (for instance by making the container's `/bin/sh` a `#!/proc/self/exe`
//! script, which the runtime executes during `exec`), keeps that handle open and writes to it
//! once the runtime exits — replacing the host's runtime binary with its own code, which the next
//! engine call runs as host root.
//!
//! Defence: before doing anything that puts processes into a container, the runtime makes sure
//! that the executable it runs from cannot be written through any handle a container can get,
//! re-executing itself if needed:
//!
//! 1. already unwritable (on a read-only mount, or a sealed memfd): nothing to do;
//! 2. preferred (needs CAP_SYS_ADMIN): a *detached read-only bind mount* of the binary
//!    (`open_tree(OPEN_TREE_CLONE)` + `mount_setattr(MOUNT_ATTR_RDONLY)`), then `execveat` on it.
//!    `/proc/self/exe` then resolves through a read-only mount that is in no mount namespace, so
//!    opening it for writing fails with EROFS. Cost: a few syscalls and one `execve`, no copy;
//! 3. fallback (rootless, old kernels): copy into a sealed memfd
//!    (`F_SEAL_WRITE|F_SEAL_GROW|F_SEAL_SHRINK|F_SEAL_SEAL`) and re-execute from it. Cost: one
//!    in-kernel copy of the binary (several MB) on every call.
//!
//! `hack/bench` measures the cost against `SHADOW_RUNTIME_NO_SEAL=1` (which skips this; for
//! measurements only).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use crate::mount_attr::{MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};

const SEALS: libc::c_int =
    libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
/// `MFD_EXEC` (Linux 6.3): ask for an executable memfd even where `vm.memfd_noexec` defaults to
/// non-executable ones.
const MFD_EXEC: libc::c_uint = 0x0010;

/// True if the running executable cannot be written: a sealed memfd or a read-only mount.
pub fn is_sealed() -> io::Result<bool> {
    let exe = File::open("/proc/self/exe")?;
    Ok(sealed(exe.as_raw_fd()) || on_readonly_mount(exe.as_raw_fd()))
}

fn on_readonly_mount(fd: RawFd) -> bool {
    // SAFETY: fstatvfs fills a statvfs we own.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; fd is open.
    let rc = unsafe { libc::fstatvfs(fd, &mut st) };
    rc == 0 && st.f_flag & libc::ST_RDONLY != 0
}

/// A detached, read-only, nosuid, nodev bind mount of the running executable (an O_PATH fd).
fn readonly_clone() -> io::Result<OwnedFd> {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    // SAFETY: open_tree with a NUL-terminated path; returns a new fd or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c"/proc/self/exe".as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd; we own it.
    let tree = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    crate::mount_attr::set(
        tree.as_raw_fd(),
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
    )?;
    if !on_readonly_mount(tree.as_raw_fd()) {
        return Err(io::Error::other("detached mount is not read-only"));
    }
    Ok(tree)
}

fn exec_fd(fd: RawFd) -> io::Error {
    let args: Vec<CString> = std::env::args_os()
        .map(|a| CString::new(a.as_bytes()).expect("argv has no NUL"))
        .collect();
    let env: Vec<CString> = std::env::vars_os()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).expect("environment has no NUL")
        })
        .collect();
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: argv/envp are NULL-terminated arrays of pointers into CStrings that outlive the
    // call; execveat only returns on failure.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            fd,
            c"".as_ptr(),
            argv.as_ptr(),
            envp.as_ptr(),
            libc::AT_EMPTY_PATH,
        );
    }
    io::Error::last_os_error()
}

fn sealed(fd: RawFd) -> bool {
    // SAFETY: F_GET_SEALS only reads the seal set of an fd we own.
    let seals = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
    seals >= 0 && seals & SEALS == SEALS
}

/// Re-execute from a sealed copy unless already running from one. Returns only when the binary
/// already is sealed; on success the process image is replaced and this never returns.
pub fn ensure_sealed() -> io::Result<()> {
    let exe = File::open("/proc/self/exe")?;
    if sealed(exe.as_raw_fd()) || on_readonly_mount(exe.as_raw_fd()) {
        return Ok(());
    }
    if let Ok(tree) = readonly_clone() {
        // Only returns on failure; fall through to the memfd copy then.
        let _ = exec_fd(tree.as_raw_fd());
    }
    let memfd = memfd_create()?;
    let len = exe.metadata()?.len();
    let mut copied: u64 = 0;
    while copied < len {
        // SAFETY: sendfile between two fds we own, with a NULL offset (uses file positions).
        let n = unsafe {
            libc::sendfile(
                memfd.as_raw_fd(),
                exe.as_raw_fd(),
                std::ptr::null_mut(),
                (len - copied) as usize,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "short copy of /proc/self/exe",
            ));
        }
        copied += n as u64;
    }
    add_seals(memfd.as_raw_fd())?;
    Err(exec_fd(memfd.as_raw_fd()))
}

/// F_ADD_SEALS, retried while it fails with EBUSY. `F_SEAL_WRITE` refuses while any page of
/// the file holds an extra reference, and pages just written can still sit in another CPU's
/// LRU batch (the kernel drains only the current CPU's before it gives up): seen once in a CI
/// run of the rootless tests. Retrying lets those batches drain; a few ms at worst.
fn add_seals(fd: RawFd) -> io::Result<()> {
    let mut attempt = 0u64;
    loop {
        // SAFETY: F_ADD_SEALS on our memfd.
        if unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, SEALS) } >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        attempt += 1;
        if e.raw_os_error() != Some(libc::EBUSY) || attempt > 20 {
            return Err(e);
        }
        std::thread::sleep(std::time::Duration::from_millis(attempt));
    }
}

fn memfd_create() -> io::Result<OwnedFd> {
    let name = c"shadow-runtime";
    let base = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    for flags in [base | MFD_EXEC, base] {
        // SAFETY: memfd_create with a valid NUL-terminated name.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), flags) };
        if fd >= 0 {
            // SAFETY: fd was just returned by the kernel and is owned by nobody else.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(e);
        }
    }
    Err(io::Error::last_os_error())
}
