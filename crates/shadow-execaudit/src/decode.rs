//! Turning one seccomp notification into an [`ExecEvent`].
//!
//! Everything here runs while the caller is blocked in its exec, so it is
//! kept to a few syscalls: usually two `process_vm_readv` calls whatever
//! the number of arguments (one for the 4 KiB chunks holding the filename
//! and the argv array, one for the chunks the argv strings point into; see
//! [`ReadAhead`]), the parent pid (`PIDFD_GET_INFO`, or `/proc/pid/stat`)
//! and `readlink /proc/pid/cwd`.

use std::io::IoSliceMut;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::Pid;
use serde::Serialize;

/// At most this many argv entries are recorded.
pub(crate) const MAX_ARGS: usize = 256;
/// At most this many bytes of one string (path or argv entry).
pub(crate) const MAX_STR: usize = 4096;
/// At most this many string bytes per event in total (path + argv).
pub(crate) const MAX_TOTAL: usize = 64 * 1024;

/// Remote reads never cross a 4 KiB boundary: every Linux page size is a
/// multiple of 4 KiB, so a chunk is either entirely readable or not, and a
/// string that ends just before an unmapped page is still read.
const CHUNK: usize = 4096;

#[cfg(target_arch = "x86_64")]
const NATIVE_AUDIT_ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const NATIVE_AUDIT_ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("shadow-execaudit decodes execve only on x86_64 and aarch64");

/// x32 syscalls carry AUDIT_ARCH_X86_64 but this bit in the number; their
/// pointers are 32-bit, so they are not "native".
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: i32 = 0x4000_0000;
#[cfg(target_arch = "aarch64")]
const X32_SYSCALL_BIT: i32 = 0;

const SYS_EXECVE: i32 = libc::SYS_execve as i32;
const SYS_EXECVEAT: i32 = libc::SYS_execveat as i32;

/// One exec attempt inside the container, as the caller asked for it at
/// notification time (see the crate docs for why this is an audit record
/// and not a policy input).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecEvent {
    /// Thread id of the caller, in the supervisor's pid namespace (for a
    /// multi-threaded caller this is the exec'ing thread, not the tgid).
    pub pid: i32,
    /// Parent pid (from `PIDFD_GET_INFO` or `/proc/pid/stat`, field 4);
    /// `None` if it could not be read.
    pub ppid: Option<i32>,
    /// `"execve"` or `"execveat"`; for a foreign architecture its name
    /// there if known (`"execve"`/`"execveat"`), else `"unknown"`.
    pub syscall: &'static str,
    /// The filename argument exactly as passed (relative paths are relative
    /// to `cwd`, or to `dirfd_path` for `execveat`), lossy UTF-8.
    pub path: String,
    /// The argv array, lossy UTF-8.
    pub argv: Vec<String>,
    /// `readlink /proc/pid/cwd`, as the kernel renders it for the
    /// supervisor (a host path for a container process).
    pub cwd: Option<String>,
    /// For `execveat` with a relative or empty filename and a real dirfd:
    /// what that fd refers to. With `AT_EMPTY_PATH` (how `fexecve` works)
    /// this is the executed file itself, e.g. `/memfd:x (deleted)`: an exec
    /// that a path-only log would miss.
    pub dirfd_path: Option<String>,
    /// Some string or the argv array was cut at the caps (256 entries,
    /// 4096 bytes per string, 64 KiB in total).
    pub truncated: bool,
    /// What could not be decoded. The exec was allowed to continue anyway.
    pub error: Option<String>,
    /// `SECCOMP_IOCTL_NOTIF_ID_VALID` after the reads, and the answer was
    /// accepted. `false` means the caller died or was interrupted by a signal
    /// meanwhile (then the pid may have been reused and the data may belong
    /// to another process; an interrupted exec is re-notified, so it shows up
    /// again as a fresh event).
    pub id_valid: bool,
}

impl ExecEvent {
    pub(crate) fn note(&mut self, msg: String) {
        match &mut self.error {
            Some(e) => {
                e.push_str("; ");
                e.push_str(&msg);
            }
            None => self.error = Some(msg),
        }
    }
}

/// A call denied through a NOTIFY rule (answered EPERM).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Denial {
    /// Thread id of the caller.
    pub pid: i32,
    /// Parent pid, when it could be read.
    pub ppid: Option<i32>,
    /// Syscall name (libseccomp's), or `nr:N`.
    pub syscall: String,
    /// The raw arguments (flags and requests are what tell `clone(CLONE_NEWUSER)` from a
    /// thread, or TIOCSTI from another ioctl).
    pub args: [u64; 6],
    /// What went wrong answering it.
    pub error: Option<String>,
}

/// Is this notification an exec (let through) rather than a denial?
pub(crate) fn is_exec(req: &libc::seccomp_notif) -> bool {
    req.data.arch == NATIVE_AUDIT_ARCH
        && req.data.nr & X32_SYSCALL_BIT == 0
        && (req.data.nr == SYS_EXECVE || req.data.nr == SYS_EXECVEAT)
}

/// At most this many chunks are read ahead per decode (64 KiB).
const READAHEAD_CHUNKS: usize = 16;

/// 4 KiB chunks of the caller's memory, read together in one
/// `process_vm_readv` (one remote iovec per chunk), for one decode.
///
/// Why: each `process_vm_readv` looks the task up and checks ptrace access
/// again (~3 µs here) while the exec waits, and a compiler's argv has dozens
/// of strings, usually packed on one or two pages. A chunk is kept only if
/// the kernel read it whole; anything else (not read ahead, unmapped, the
/// batch cut short by an earlier bad chunk) is read on its own exactly as
/// before, so results and errors do not depend on what was read ahead (a
/// test compares both on random layouts). One difference: the pages of up
/// to 16 argv strings are touched even when decoding stops earlier (a bad
/// string, the 64 KiB budget). A caller that points argv into a page that
/// blocks on access (e.g. a FUSE-backed mapping) could always block us with
/// `argv[0]`; it now can with a later entry too.
#[derive(Debug)]
struct ReadAhead {
    /// Base addresses (multiples of [`CHUNK`]) of the chunks in `buf`.
    bases: Vec<u64>,
    buf: Box<[u8]>,
}

impl ReadAhead {
    fn new() -> Self {
        ReadAhead {
            bases: Vec::with_capacity(READAHEAD_CHUNKS),
            buf: vec![0; READAHEAD_CHUNKS * CHUNK].into_boxed_slice(),
        }
    }

    fn clear(&mut self) {
        self.bases.clear();
    }

    /// Where `addr..addr + len` is in `buf`, if its chunk was read ahead.
    /// `len` never crosses a chunk boundary (callers cut at [`CHUNK`]).
    fn find(&self, addr: u64, len: usize) -> Option<std::ops::Range<usize>> {
        let base = chunk_base(addr);
        let i = self.bases.iter().position(|&b| b == base)?;
        let start = i * CHUNK + (addr - base) as usize;
        debug_assert!((addr - base) as usize + len <= CHUNK);
        Some(start..start + len)
    }

    /// Read the chunks holding `addrs` that are not here yet, in one call,
    /// while there is room. Returns the number of calls made (0 or 1).
    fn fetch(&mut self, pid: Pid, addrs: impl IntoIterator<Item = u64>) -> u64 {
        let first = self.bases.len();
        let mut wanted = Vec::new();
        for base in addrs.into_iter().map(chunk_base) {
            if first + wanted.len() == READAHEAD_CHUNKS {
                break;
            }
            if !self.bases.contains(&base) && !wanted.contains(&base) {
                wanted.push(base);
            }
        }
        if wanted.is_empty() {
            return 0;
        }
        let remote: Vec<RemoteIoVec> = wanted
            .iter()
            .map(|&b| RemoteIoVec {
                base: b as usize,
                len: CHUNK,
            })
            .collect();
        let mut local: Vec<IoSliceMut<'_>> = self.buf[first * CHUNK..]
            .chunks_mut(CHUNK)
            .take(wanted.len())
            .map(IoSliceMut::new)
            .collect();
        // The kernel stops at the first chunk it cannot read, and a chunk
        // never spans two pages, so the first n / CHUNK chunks are whole.
        let whole = process_vm_readv(pid, &mut local, &remote).map_or(0, |n| n / CHUNK);
        self.bases.extend_from_slice(&wanted[..whole]);
        1
    }
}

fn chunk_base(addr: u64) -> u64 {
    addr & !(CHUNK as u64 - 1)
}

/// Reusable buffers for decoding; one per supervisor thread.
#[derive(Debug)]
pub(crate) struct Decoder {
    chunk: Box<[u8]>,
    ahead: ReadAhead,
    ptr_bytes: Vec<u8>,
    /// The kernel supports `PIDFD_GET_INFO` on thread pidfds (until shown
    /// otherwise).
    pidfd_info: bool,
    /// `process_vm_readv` calls made so far (what the read-ahead saves).
    remote_reads: u64,
    /// Use [`ReadAhead`] (always, outside tests: they turn it off to
    /// compare with reading every chunk on its own).
    read_ahead: bool,
}

impl Decoder {
    pub(crate) fn new() -> Self {
        Decoder {
            chunk: vec![0; CHUNK].into_boxed_slice(),
            ahead: ReadAhead::new(),
            ptr_bytes: Vec::with_capacity((MAX_ARGS + 1) * 8),
            pidfd_info: true,
            remote_reads: 0,
            read_ahead: true,
        }
    }

    /// Describe a denied call.
    pub(crate) fn denial(&mut self, req: &libc::seccomp_notif) -> Denial {
        let pid = req.pid as i32;
        let name = if req.data.arch == NATIVE_AUDIT_ARCH {
            libseccomp::ScmpSyscall::from_raw_syscall(req.data.nr)
                .get_name()
                .ok()
        } else {
            None
        };
        Denial {
            pid,
            ppid: if pid > 0 { self.ppid(pid) } else { None },
            syscall: name.unwrap_or_else(|| format!("nr:{}", req.data.nr)),
            args: req.data.args,
            error: None,
        }
    }

    /// Decode `req`. Never fails: problems end up in `error`.
    pub(crate) fn decode(&mut self, req: &libc::seccomp_notif) -> ExecEvent {
        let pid = req.pid as i32;
        let data = &req.data;
        let mut ev = ExecEvent {
            pid,
            ppid: None,
            syscall: "unknown",
            path: String::new(),
            argv: Vec::new(),
            cwd: None,
            dirfd_path: None,
            truncated: false,
            error: None,
            id_valid: false,
        };
        if pid <= 0 {
            // The kernel reports 0 when the caller is not visible in our pid
            // namespace; then /proc and process_vm_readv cannot find it.
            ev.note("caller not visible in the supervisor's pid namespace".into());
            return ev;
        }
        let native = data.arch == NATIVE_AUDIT_ARCH && data.nr & X32_SYSCALL_BIT == 0;
        let call = if native {
            match data.nr {
                SYS_EXECVE => Some(("execve", data.args[0], data.args[1], None)),
                SYS_EXECVEAT => Some((
                    "execveat",
                    data.args[1],
                    data.args[2],
                    Some(data.args[0] as i32),
                )),
                nr => {
                    ev.note(format!("unexpected syscall number {nr}"));
                    None
                }
            }
        } else {
            ev.syscall = foreign_name(data.arch, data.nr);
            ev.note(format!(
                "foreign architecture (audit arch {:#x}, syscall {:#x})",
                data.arch, data.nr
            ));
            None
        };
        let remote = Pid::from_raw(pid);
        if let Some((name, path_ptr, argv_ptr, dirfd)) = call {
            ev.syscall = name;
            self.read_call(remote, path_ptr, argv_ptr, &mut ev);
            if let Some(dirfd) = dirfd {
                if dirfd != libc::AT_FDCWD && !ev.path.starts_with('/') {
                    ev.dirfd_path = read_link(&format!("/proc/{pid}/fd/{dirfd}"));
                }
            }
        }
        ev.ppid = self.ppid(pid);
        ev.cwd = read_link(&format!("/proc/{pid}/cwd"));
        ev
    }

    fn read_call(&mut self, pid: Pid, path_ptr: u64, argv_ptr: u64, ev: &mut ExecEvent) {
        self.ahead.clear();
        if self.read_ahead {
            self.remote_reads += self.ahead.fetch(pid, [path_ptr, argv_ptr]);
        }
        let mut budget = MAX_TOTAL;
        let s = self.read_cstr(pid, path_ptr, MAX_STR.min(budget));
        budget -= s.text.len();
        ev.truncated |= s.truncated;
        ev.path = s.text;
        if let Some(e) = s.err {
            ev.note(format!("filename at {path_ptr:#x}: {e}"));
        }
        if argv_ptr == 0 {
            // execve(path, NULL, ...) is legal: an empty argv.
            return;
        }
        let (ptrs, err) = self.read_ptrs(pid, argv_ptr, MAX_ARGS + 1);
        if let Some(e) = err {
            ev.note(format!("argv array at {argv_ptr:#x}: {e}"));
        }
        let n = ptrs.len().min(MAX_ARGS);
        ev.truncated |= ptrs.len() > MAX_ARGS;
        if self.read_ahead {
            self.remote_reads += self.ahead.fetch(pid, ptrs[..n].iter().copied());
        }
        ev.argv.reserve_exact(n);
        for (i, &p) in ptrs[..n].iter().enumerate() {
            if budget == 0 {
                ev.truncated = true;
                break;
            }
            let s = self.read_cstr(pid, p, MAX_STR.min(budget));
            budget -= s.text.len();
            ev.truncated |= s.truncated;
            ev.argv.push(s.text);
            if let Some(e) = s.err {
                ev.note(format!("argv[{i}] at {p:#x}: {e}"));
                break;
            }
        }
    }

    /// Read a NUL-terminated string of at most `max` bytes.
    fn read_cstr(&mut self, pid: Pid, addr: u64, max: usize) -> RemoteStr {
        let mut out = Vec::new();
        let mut addr = addr;
        loop {
            // One byte more than `max` tells "exactly max long" from "longer".
            let want = (max + 1 - out.len()).min(CHUNK - (addr as usize % CHUNK));
            let chunk = match self.read_at(pid, addr, want) {
                Ok(chunk) => chunk,
                Err(e) => return RemoteStr::new(out, false, Some(e)),
            };
            let got = chunk.len();
            if let Some(end) = chunk.iter().position(|&b| b == 0) {
                out.extend_from_slice(&chunk[..end]);
                return RemoteStr::new(out, false, None);
            }
            out.extend_from_slice(chunk);
            if out.len() > max {
                out.truncate(max);
                return RemoteStr::new(out, true, None);
            }
            match addr.checked_add(got as u64) {
                Some(next) if got == want => addr = next,
                _ => return RemoteStr::new(out, false, Some(Errno::EFAULT)),
            }
        }
    }

    /// Read up to `max` non-NULL 8-byte pointers starting at `addr`.
    fn read_ptrs(&mut self, pid: Pid, addr: u64, max: usize) -> (Vec<u64>, Option<Errno>) {
        let mut ptrs = Vec::new();
        self.ptr_bytes.clear();
        let mut addr = addr;
        while ptrs.len() < max {
            let want = (max * 8 - self.ptr_bytes.len()).min(CHUNK - (addr as usize % CHUNK));
            let range = match self.read_range(pid, addr, want) {
                Ok(range) => range,
                Err(e) => return (ptrs, Some(e)),
            };
            let got = range.1.len();
            let src = match range.0 {
                Src::Ahead => &self.ahead.buf[range.1],
                Src::Chunk => &self.chunk[range.1],
            };
            self.ptr_bytes.extend_from_slice(src);
            // A pointer may straddle two chunks if the array is unaligned.
            while (ptrs.len() + 1) * 8 <= self.ptr_bytes.len() {
                let off = ptrs.len() * 8;
                let mut word = [0u8; 8];
                word.copy_from_slice(&self.ptr_bytes[off..off + 8]);
                match u64::from_ne_bytes(word) {
                    0 => return (ptrs, None),
                    p => ptrs.push(p),
                }
            }
            match addr.checked_add(got as u64) {
                Some(next) if got == want => addr = next,
                _ => return (ptrs, Some(Errno::EFAULT)),
            }
        }
        (ptrs, None)
    }
}

/// Which buffer [`Decoder::read_range`] left the bytes in.
enum Src {
    Ahead,
    Chunk,
}

impl Decoder {
    /// `want` bytes (not crossing a chunk boundary) at `addr` in the
    /// caller: from the read-ahead if there, else read now (fewer bytes if
    /// the read comes up short).
    fn read_range(
        &mut self,
        pid: Pid,
        addr: u64,
        want: usize,
    ) -> Result<(Src, std::ops::Range<usize>), Errno> {
        if let Some(r) = self.ahead.find(addr, want) {
            return Ok((Src::Ahead, r));
        }
        self.remote_reads += 1;
        let got = read_remote(pid, addr, &mut self.chunk[..want])?;
        Ok((Src::Chunk, 0..got))
    }

    fn read_at(&mut self, pid: Pid, addr: u64, want: usize) -> Result<&[u8], Errno> {
        let (src, r) = self.read_range(pid, addr, want)?;
        Ok(match src {
            Src::Ahead => &self.ahead.buf[r],
            Src::Chunk => &self.chunk[r],
        })
    }
}

struct RemoteStr {
    text: String,
    truncated: bool,
    err: Option<Errno>,
}

impl RemoteStr {
    fn new(bytes: Vec<u8>, truncated: bool, err: Option<Errno>) -> Self {
        let text = String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        RemoteStr {
            text,
            truncated,
            err,
        }
    }
}

fn read_remote(pid: Pid, addr: u64, buf: &mut [u8]) -> Result<usize, Errno> {
    let remote = [RemoteIoVec {
        base: addr as usize,
        len: buf.len(),
    }];
    match process_vm_readv(pid, &mut [IoSliceMut::new(buf)], &remote)? {
        0 => Err(Errno::EFAULT),
        n => Ok(n),
    }
}

fn read_link(path: &str) -> Option<String> {
    std::fs::read_link(path)
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// `PIDFD_INFO_PID` and the v0 `struct pidfd_info` of `<linux/pidfd.h>`
/// (Linux 6.13), which libc does not have yet.
const PIDFD_INFO_PID: u64 = 1;
#[repr(C)]
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    /// ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid, exit_code.
    rest: [u32; 9],
}
const PIDFD_GET_INFO: libc::c_ulong =
    nix::request_code_readwrite!(0xFF, 11, std::mem::size_of::<PidfdInfo>()) as libc::c_ulong;
/// `pidfd_open` flag for a thread (not only a thread-group leader), 6.9+.
const PIDFD_THREAD: libc::c_int = libc::O_EXCL;

impl Decoder {
    /// The parent pid, in our pid namespace. `PIDFD_GET_INFO` costs about a
    /// third of opening and formatting `/proc/pid/stat` (measured: ~7 vs
    /// ~25 µs per fresh process, while the exec waits), so use it when the
    /// kernel has it and `/proc/pid/stat` otherwise.
    fn ppid(&mut self, pid: i32) -> Option<i32> {
        if self.pidfd_info {
            match pidfd_ppid(pid) {
                Ok(ppid) => return Some(ppid),
                // Gone: /proc would not find it either.
                Err(Errno::ESRCH) => return None,
                // Kernel without PIDFD_THREAD or PIDFD_GET_INFO: stop trying.
                Err(_) => self.pidfd_info = false,
            }
        }
        proc_stat_ppid(pid)
    }
}

fn pidfd_ppid(pid: i32) -> Result<i32, Errno> {
    // SAFETY: pidfd_open takes no pointers; a non-negative result is a new
    // fd we own (and close below).
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, PIDFD_THREAD) };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: just created and owned by nobody else.
    let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as RawFd) };
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_PID,
        cgroupid: 0,
        pid: 0,
        tgid: 0,
        ppid: 0,
        rest: [0; 9],
    };
    // SAFETY: PIDFD_GET_INFO reads and writes one `struct pidfd_info` of the
    // size encoded in the request, which is what `info` is.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), PIDFD_GET_INFO, &mut info as *mut PidfdInfo) };
    if r < 0 {
        return Err(Errno::last());
    }
    if info.mask & PIDFD_INFO_PID == 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(info.ppid as i32)
}

fn proc_stat_ppid(pid: i32) -> Option<i32> {
    // comm is at most 16 bytes, so the fields up to ppid fit easily.
    let mut buf = [0u8; 256];
    let n = read_prefix(&format!("/proc/{pid}/stat"), &mut buf).ok()?;
    parse_ppid(&buf[..n])
}

fn read_prefix(path: &str, buf: &mut [u8]) -> io::Result<usize> {
    std::fs::File::open(path)?.read(buf)
}

/// The 4th field of `/proc/pid/stat`. The 2nd, `(comm)`, may contain spaces
/// and parentheses (a process can name itself `a) S 1 (`), so parse after
/// the last `)`.
pub(crate) fn parse_ppid(stat: &[u8]) -> Option<i32> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

/// Names for the exec syscalls of the compat ABIs a profile may enable.
fn foreign_name(arch: u32, nr: i32) -> &'static str {
    const AUDIT_ARCH_I386: u32 = 0x4000_0003;
    const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
    match (arch, nr) {
        (AUDIT_ARCH_I386, 11) | (AUDIT_ARCH_ARM, 11) => "execve",
        (AUDIT_ARCH_I386, 358) | (AUDIT_ARCH_ARM, 387) => "execveat",
        #[cfg(target_arch = "x86_64")]
        (NATIVE_AUDIT_ARCH, 0x4000_0208) => "execve", // x32: 520
        #[cfg(target_arch = "x86_64")]
        (NATIVE_AUDIT_ARCH, 0x4000_0221) => "execveat", // x32: 545
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    #[test]
    fn ppid_after_last_paren() {
        assert_eq!(
            parse_ppid(b"1234 (a) S 1 (b) R 99 1234 1234 0 -1 4194560"),
            Some(99)
        );
        assert_eq!(parse_ppid(b"7 (my prog) S 42 7 7"), Some(42));
        assert_eq!(parse_ppid(b"7 ()) S 5 7"), Some(5));
        assert_eq!(parse_ppid(b"7 (x) S"), None);
        assert_eq!(parse_ppid(b"garbage"), None);
    }

    #[test]
    fn pidfd_and_proc_stat_agree() {
        let me = std::process::id() as i32;
        let want = Some(nix::unistd::getppid().as_raw());
        assert_eq!(proc_stat_ppid(me), want);
        let mut d = Decoder::new();
        assert_eq!(d.ppid(me), want);
        // A live non-leader thread: its ppid is the process's parent.
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        assert_eq!(proc_stat_ppid(tid), want);
        assert_eq!(d.ppid(tid), want);
        match pidfd_ppid(tid) {
            Ok(ppid) => assert_eq!(Some(ppid), want),
            // Older kernel: only the /proc fallback was tested.
            Err(e) => assert!(!d.pidfd_info, "{e}"),
        }
        done_tx.send(()).unwrap();
        t.join().unwrap();
    }

    /// A notification as the kernel would fill it, pointing into our own
    /// memory (process_vm_readv on ourselves works like on any process).
    fn req(nr: i32, args: [u64; 6]) -> libc::seccomp_notif {
        libc::seccomp_notif {
            id: 1,
            pid: std::process::id(),
            flags: 0,
            data: libc::seccomp_data {
                nr,
                arch: NATIVE_AUDIT_ARCH,
                instruction_pointer: 0,
                args,
            },
        }
    }

    struct Argv {
        _strings: Vec<CString>,
        ptrs: Vec<u64>,
    }

    fn argv<S: AsRef<str>>(items: &[S]) -> Argv {
        let strings: Vec<CString> = items
            .iter()
            .map(|s| CString::new(s.as_ref()).unwrap())
            .collect();
        let mut ptrs: Vec<u64> = strings.iter().map(|s| s.as_ptr() as u64).collect();
        ptrs.push(0);
        Argv {
            _strings: strings,
            ptrs,
        }
    }

    #[test]
    fn decodes_execve_and_execveat() {
        let path = CString::new("/bin/echo").unwrap();
        let a = argv(&["echo", "hé", ""]);
        let mut d = Decoder::new();
        let ev = d.decode(&req(
            SYS_EXECVE,
            [path.as_ptr() as u64, a.ptrs.as_ptr() as u64, 0, 0, 0, 0],
        ));
        assert_eq!(ev.syscall, "execve");
        assert_eq!(ev.path, "/bin/echo");
        assert_eq!(ev.argv, ["echo", "hé", ""]);
        assert_eq!(ev.error, None);
        assert!(!ev.truncated);
        assert_eq!(ev.ppid, Some(nix::unistd::getppid().as_raw()));
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(ev.cwd.as_deref(), cwd.to_str());

        let rel = CString::new("echo").unwrap();
        let dir = std::fs::File::open("/bin").unwrap();
        let dirfd = std::os::fd::AsRawFd::as_raw_fd(&dir);
        let ev = d.decode(&req(
            SYS_EXECVEAT,
            [
                dirfd as u64,
                rel.as_ptr() as u64,
                a.ptrs.as_ptr() as u64,
                0,
                0,
                0,
            ],
        ));
        assert_eq!(ev.syscall, "execveat");
        assert_eq!(ev.path, "echo");
        assert_eq!(ev.argv, ["echo", "hé", ""]);
        let bin = std::fs::canonicalize("/bin").unwrap();
        assert_eq!(ev.dirfd_path.as_deref(), bin.to_str());
    }

    #[test]
    fn caps_set_truncated() {
        let path = CString::new("/p").unwrap();
        let mut d = Decoder::new();

        // Too many entries.
        let many: Vec<String> = (0..300).map(|i| i.to_string()).collect();
        let a = argv(&many);
        let ev = d.decode(&req(
            SYS_EXECVE,
            [path.as_ptr() as u64, a.ptrs.as_ptr() as u64, 0, 0, 0, 0],
        ));
        assert!(ev.truncated);
        assert_eq!(ev.argv.len(), MAX_ARGS);
        assert_eq!(ev.argv[255], "255");

        // Exactly 256 entries is not truncated.
        let a = argv(&many[..MAX_ARGS]);
        let ev = d.decode(&req(
            SYS_EXECVE,
            [path.as_ptr() as u64, a.ptrs.as_ptr() as u64, 0, 0, 0, 0],
        ));
        assert!(!ev.truncated);
        assert_eq!(ev.argv.len(), MAX_ARGS);

        // A long string, and the total budget.
        let exact = "x".repeat(MAX_STR);
        let long = "y".repeat(MAX_STR + 1);
        let a = argv(&[exact.as_str()]);
        let ev = d.decode(&req(
            SYS_EXECVE,
            [path.as_ptr() as u64, a.ptrs.as_ptr() as u64, 0, 0, 0, 0],
        ));
        assert!(!ev.truncated);
        assert_eq!(ev.argv[0].len(), MAX_STR);
        let big: Vec<&str> = std::iter::repeat_n(long.as_str(), 20).collect();
        let a = argv(&big);
        let ev = d.decode(&req(
            SYS_EXECVE,
            [path.as_ptr() as u64, a.ptrs.as_ptr() as u64, 0, 0, 0, 0],
        ));
        assert!(ev.truncated);
        let total: usize = ev.path.len() + ev.argv.iter().map(String::len).sum::<usize>();
        assert_eq!(total, MAX_TOTAL);
        assert!(ev.argv.iter().all(|s| s.len() <= MAX_STR));
        assert_eq!(ev.error, None);
    }

    #[test]
    fn string_ending_at_unmapped_page_and_bad_pointers() {
        // Map two pages, unmap the second; put "abc\0" at the very end of
        // the first.
        // SAFETY: plain anonymous mapping, used only by this test.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * CHUNK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let base = base as *mut u8;
        // SAFETY: both offsets are inside the mapping; the second page is
        // ours to unmap.
        unsafe {
            std::ptr::copy_nonoverlapping(c"abc".as_ptr().cast(), base.add(CHUNK - 4), 4);
            libc::munmap(base.add(CHUNK) as *mut _, CHUNK);
        }
        let ok = base as u64 + CHUNK as u64 - 4;
        let tail = base as u64 + CHUNK as u64 - 2; // "c\0"
        let mut d = Decoder::new();
        let ptrs = [ok, 0u64];
        let ev = d.decode(&req(SYS_EXECVE, [ok, ptrs.as_ptr() as u64, 0, 0, 0, 0]));
        assert_eq!((ev.path.as_str(), ev.error.as_deref()), ("abc", None));
        assert_eq!(ev.argv, ["abc"]);
        let ev = d.decode(&req(SYS_EXECVE, [tail, 0, 0, 0, 0, 0]));
        assert_eq!(ev.path, "c");
        assert!(ev.argv.is_empty());

        // Overwrite the NUL: now the string runs into the unmapped page.
        // SAFETY: inside the first (still mapped) page.
        unsafe { *base.add(CHUNK - 1) = b'd' };
        let ev = d.decode(&req(SYS_EXECVE, [ok, 8, 0, 0, 0, 0]));
        assert_eq!(ev.path, "abcd");
        let err = ev.error.unwrap();
        assert!(
            err.contains("filename") && err.contains("argv array"),
            "{err}"
        );
        // SAFETY: unmapping the first page we mapped above.
        unsafe { libc::munmap(base as *mut _, CHUNK) };
    }

    #[test]
    fn a_long_argv_costs_a_few_remote_reads() {
        // As a compiler's command line: 60 strings packed together.
        let items: Vec<String> = (0..60).map(|i| format!("-Iinclude/dir{i}")).collect();
        let packed: Vec<u8> = items.iter().flat_map(|s| s.bytes().chain([0])).collect();
        let mut ptrs: Vec<u64> = Vec::new();
        let mut at = packed.as_ptr() as u64;
        for s in &items {
            ptrs.push(at);
            at += s.len() as u64 + 1;
        }
        ptrs.push(0);
        let path = CString::new("/usr/bin/cc").unwrap();
        let mut d = Decoder::new();
        let ev = d.decode(&req(
            SYS_EXECVE,
            [path.as_ptr() as u64, ptrs.as_ptr() as u64, 0, 0, 0, 0],
        ));
        assert_eq!(
            (ev.path.as_str(), ev.error.as_deref()),
            ("/usr/bin/cc", None)
        );
        assert_eq!(ev.argv, items);
        // Filename and array chunks in one call, the strings' chunks in
        // another (none if already read), one more if the array crosses a
        // chunk; one read per string would be 62.
        assert!(d.remote_reads <= 3, "{} reads", d.remote_reads);
    }

    /// Pages A, A+1 and C mapped, B unmapped, in this order; the filename
    /// and the argv array live in A, so the first batch is A alone.
    struct Layout {
        base: *mut u8,
    }

    impl Layout {
        const PAGES: usize = 4;

        fn new() -> Self {
            // SAFETY: plain anonymous mapping, used only by this test.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    Self::PAGES * CHUNK,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(base, libc::MAP_FAILED);
            let base = base as *mut u8;
            // SAFETY: B (page 2) is inside our mapping.
            unsafe { libc::munmap(base.add(2 * CHUNK) as *mut _, CHUNK) };
            Layout { base }
        }

        fn page(&self, n: usize) -> u64 {
            self.base as u64 + (n * CHUNK) as u64
        }

        /// Copy `bytes` to `addr`, which must be in a mapped page of ours.
        fn put(&self, addr: u64, bytes: &[u8]) {
            let off = (addr - self.base as u64) as usize;
            assert!(
                off + bytes.len() <= Self::PAGES * CHUNK && !(2 * CHUNK..3 * CHUNK).contains(&off)
            );
            // SAFETY: inside the mapping, outside the unmapped page (checked).
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(off), bytes.len())
            };
        }

        /// Decode execve(path at A+0, argv at A+512 = `ptrs` + NULL).
        fn decode(&self, d: &mut Decoder, ptrs: &[u64]) -> ExecEvent {
            let (path, array) = (self.page(0), self.page(0) + 512);
            self.put(path, b"/p\0");
            let words: Vec<u8> = ptrs
                .iter()
                .chain([&0])
                .flat_map(|p| p.to_ne_bytes())
                .collect();
            self.put(array, &words);
            d.decode(&req(SYS_EXECVE, [path, array, 0, 0, 0, 0]))
        }
    }

    impl Drop for Layout {
        fn drop(&mut self) {
            // SAFETY: unmapping what we mapped (munmap ignores the hole).
            unsafe { libc::munmap(self.base as *mut _, Self::PAGES * CHUNK) };
        }
    }

    #[test]
    fn read_ahead_cut_short_by_an_unmapped_chunk_gives_the_same_result() {
        let l = Layout::new();
        let (a, a1, b, c) = (l.page(0) + 1024, l.page(1) + 8, l.page(2) + 8, l.page(3));
        l.put(a, b"in-a\0");
        l.put(a1, b"in-a1\0");
        l.put(c, b"in-c\0");

        // B is not wanted: A+1 and C come in the second batch.
        let mut d = Decoder::new();
        let ev = l.decode(&mut d, &[a, c, a1]);
        assert_eq!(ev.argv, ["in-a", "in-c", "in-a1"]);
        assert_eq!(ev.error, None);
        assert_eq!(d.remote_reads, 2);

        // s0 runs from the end of A into A+1; the batch [B, A+1] fails at B,
        // so A+1 is read on its own for s0, and s1 ends the argv.
        let s0 = l.page(1) - 3;
        l.put(s0, b"xyz");
        l.put(l.page(1), b"tail\0");
        let mut d = Decoder::new();
        let ev = l.decode(&mut d, &[s0, b, a1]);
        assert_eq!(ev.argv, ["xyztail", ""]);
        let err = ev.error.unwrap();
        assert!(err.starts_with(&format!("argv[1] at {b:#x}")), "{err}");
        // Batch 1 (A), batch 2 (failed at B), A+1 for s0, B for s1.
        assert_eq!(d.remote_reads, 4);

        // A filename in B fails the first batch: the array is read on its
        // own and the argv is still decoded.
        let mut d = Decoder::new();
        let ptrs = [a, 0u64];
        let ev = d.decode(&req(SYS_EXECVE, [b, ptrs.as_ptr() as u64, 0, 0, 0, 0]));
        assert_eq!(ev.path, "");
        assert_eq!(ev.argv, ["in-a"]);
        let err = ev.error.unwrap();
        assert!(err.starts_with(&format!("filename at {b:#x}")), "{err}");
    }

    /// Random layouts (unmapped and PROT_NONE pages, strings crossing chunks,
    /// unaligned and unterminated arrays, wild pointers): the same event with
    /// and without read-ahead, and again with a reused decoder.
    #[test]
    fn read_ahead_never_changes_the_event() {
        const PAGES: usize = 8;
        const LEN: usize = PAGES * CHUNK;
        // SAFETY: plain anonymous mapping, used only by this test.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let base = base as *mut u8;
        let b = base as u64;
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let wild = [
            u64::MAX,
            u64::MAX - 7,
            0xFFFF_FFFF_FFFF_F000,
            8,
            4095,
            b + CHUNK as u64 - 1,
            b + 2 * CHUNK as u64 - 1,
        ];
        for round in 0..1000 {
            // SAFETY: remaps our own range afresh (MAP_FIXED over it).
            let again = unsafe {
                libc::mmap(
                    base as *mut _,
                    LEN,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            assert_eq!(again, base as *mut _);
            // SAFETY: the whole range is mapped read-write right now.
            let mem = unsafe { std::slice::from_raw_parts_mut(base, LEN) };
            let density = [2u64, 50, 400, 5000][(rnd() % 4) as usize];
            for byte in mem.iter_mut() {
                let r = rnd();
                *byte = if r % density == 0 {
                    0
                } else {
                    b'a' + ((r >> 8) % 26) as u8
                };
            }
            let nptr = (rnd() % 300) as usize;
            let arr_off = rnd() as usize % (LEN - (nptr + 1) * 8);
            for k in 0..nptr {
                let r = rnd();
                let p = match r % 10 {
                    0 => wild[(r >> 8) as usize % wild.len()],
                    1 => b + ((r >> 8) % PAGES as u64 + 1) * CHUNK as u64 - 1 - (r >> 20) % 6,
                    _ => b + (r >> 8) % LEN as u64,
                };
                let at = arr_off + k * 8;
                mem[at..at + 8].copy_from_slice(&p.max(1).to_ne_bytes());
            }
            if rnd() % 4 != 0 {
                let at = arr_off + nptr * 8;
                mem[at..at + 8].copy_from_slice(&0u64.to_ne_bytes());
            }
            let path = match rnd() % 5 {
                0 => 0,
                1 => wild[rnd() as usize % wild.len()],
                _ => b + rnd() % LEN as u64,
            };
            let argv = match rnd() % 8 {
                0 => 0,
                1 => wild[rnd() as usize % wild.len()],
                _ => b + arr_off as u64,
            };
            for pg in 0..PAGES {
                let at = b as usize + pg * CHUNK;
                match rnd() % 6 {
                    // SAFETY: a page of our own mapping; nothing else uses it.
                    0 => unsafe { libc::munmap(at as *mut _, CHUNK) },
                    // SAFETY: as above.
                    1 => unsafe { libc::mprotect(at as *mut _, CHUNK, libc::PROT_NONE) },
                    _ => 0,
                };
            }
            let r = if round % 2 == 0 {
                req(SYS_EXECVE, [path, argv, 0, 0, 0, 0])
            } else {
                req(SYS_EXECVEAT, [libc::AT_FDCWD as u64, path, argv, 0, 0, 0])
            };
            let mut ahead = Decoder::new();
            let mut plain = Decoder::new();
            plain.read_ahead = false;
            let want = plain.decode(&r);
            assert_eq!(ahead.decode(&r), want, "round {round}");
            assert_eq!(ahead.decode(&r), want, "round {round}, reused decoder");
        }
        // SAFETY: unmapping our own range.
        unsafe { libc::munmap(base as *mut _, LEN) };
    }

    #[test]
    fn foreign_architecture_is_recorded_not_decoded() {
        let mut r = req(11, [0; 6]);
        r.data.arch = 0x4000_0003; // AUDIT_ARCH_I386
        let ev = Decoder::new().decode(&r);
        assert_eq!(ev.syscall, "execve");
        assert!(ev.error.unwrap().starts_with("foreign architecture"));
        assert!(ev.ppid.is_some());
    }
}
