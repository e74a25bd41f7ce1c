//! Protection against overwriting the runtime binary from inside a container (CVE-2019-5736).
//!
//! Threat: a process in the container reaches the runtime's executable through
//! `/proc/<runtime pid>/exe` (for instance by making the container's `/bin/sh` a `#!/proc/self/exe`
//! script, which the runtime executes during `exec`), keeps that handle open and writes to it
//! once the runtime exits — replacing the host's runtime binary with its own code, which the next
//! engine call runs as host root.
//!
//! Defence: before doing anything that puts processes into a container, the runtime copies its
//! own executable into a sealed memfd (`F_SEAL_WRITE|F_SEAL_GROW|F_SEAL_SHRINK|F_SEAL_SEAL`) and
//! re-executes itself from it. `/proc/self/exe` then names an anonymous, immutable file: a handle
//! to it can never be written, and the file on disk is never exposed. The cost is one in-kernel
//! copy of the binary (`sendfile`) and one extra `execve`; `hack/bench` measures it.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

const SEALS: libc::c_int =
    libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
/// `MFD_EXEC` (Linux 6.3): ask for an executable memfd even where `vm.memfd_noexec` defaults to
/// non-executable ones.
const MFD_EXEC: libc::c_uint = 0x0010;

/// True if the running executable is already a sealed memfd.
pub fn is_sealed() -> io::Result<bool> {
    let exe = File::open("/proc/self/exe")?;
    Ok(sealed(exe.as_raw_fd()))
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
    if sealed(exe.as_raw_fd()) {
        return Ok(());
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
    // SAFETY: F_ADD_SEALS on our memfd.
    if unsafe { libc::fcntl(memfd.as_raw_fd(), libc::F_ADD_SEALS, SEALS) } < 0 {
        return Err(io::Error::last_os_error());
    }
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
    let err = nix::unistd::fexecve(memfd.as_raw_fd(), &args, &env).unwrap_err();
    Err(io::Error::from_raw_os_error(err as i32))
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
