//! `HOME` for a container process whose spec does not set one, found by the runtime on the host.
//!
//! Threat: when `process.env` has no (or an empty) `HOME`, libcontainer 0.7 calls glibc's
//! `getpwuid_r` inside the container's init process, after `pivot_root`. glibc then reads the
//! *container's* `/etc/nsswitch.conf` and `dlopen`s the `libnss_<service>.so.2` it names from the
//! *container's* filesystem: a hostile image runs its own code inside the runtime's init process
//! during `create` — before `start`, before `startContainer` hooks, with the runtime's sync
//! channels still open (reproduced: a `passwd: evil` image wrote a file as pid 1 at `create`).
//! runc never calls NSS there; it parses `/etc/passwd` itself.
//!
//! Defence: the runtime resolves `HOME` before it hands the process to libcontainer, from the
//! container's `/etc/passwd` read as plain data (opened with `RESOLVE_IN_ROOT` below the
//! container's root, regular files only, size-capped, never blocking), falling back to `/` as runc
//! does; libcontainer then finds `HOME` set and never calls NSS. Parsing is [`passwd_home`], pure
//! and unit-tested.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::Path;

use oci_spec::runtime::Process;

/// In a container's effective bundle: the runtime added `HOME` to its process (exec then drops
/// it for a process of another user, which gets its own).
pub const ADDED_MARKER: &str = "home-added";

/// Larger `/etc/passwd` files are not read (the fallback `/` is used).
const MAX_PASSWD: u64 = 4 << 20;

/// An environment entry's name: up to the first `=`, or the whole entry (libcontainer reads a
/// bare `NAME` as `NAME=`).
fn key(entry: &str) -> &str {
    entry.split_once('=').map_or(entry, |(k, _)| k)
}

/// The value libcontainer would see for `HOME` in `env` (the last entry wins, as in its map;
/// a bare `HOME` is an empty one).
fn env_home(env: &[String]) -> Option<&str> {
    env.iter()
        .rev()
        .find(|e| key(e) == "HOME")
        .map(|e| e.split_once('=').map_or("", |(_, v)| v))
}

/// True if `p` has no `HOME`, or an empty one: libcontainer would look it up through NSS.
pub fn missing(p: &Process) -> bool {
    env_home(p.env().as_deref().unwrap_or_default()).is_none_or(str::is_empty)
}

/// Remove every `HOME` entry from `p`'s environment.
pub fn unset(p: &mut Process) {
    if let Some(env) = p.env_mut() {
        env.retain(|e| key(e) != "HOME");
    }
}

/// Set `HOME=home` in `p`'s environment (replacing any other `HOME` entry).
pub fn set(p: &mut Process, home: &str) {
    unset(p);
    p.env_mut()
        .get_or_insert_with(Vec::new)
        .push(format!("HOME={home}"));
}

/// The home directory of `uid` in the text of an `/etc/passwd` (`name:pw:uid:gid:gecos:home:shell`);
/// the first entry for `uid` wins, as in glibc's files lookup. Malformed lines are skipped.
pub fn passwd_home(passwd: &[u8], uid: u32) -> Option<String> {
    let text = String::from_utf8_lossy(passwd);
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() < 7 || f[2].parse::<u32>().ok()? != uid {
                return None;
            }
            Some(f[5].to_string())
        })
        // Empty, or not UTF-8 (libcontainer sets no HOME then): none.
        .filter(|h| !h.is_empty() && !h.contains(char::REPLACEMENT_CHARACTER))
}

/// `/etc/passwd` below `root` (a directory that is the container's `/`), resolved with every
/// path component kept inside it. `None` if it is missing, not a regular file, or too large.
/// It is first opened `O_PATH` (which opens nothing: a device node planted by the image is never
/// opened by the runtime, whose open of some devices has effects) and only a regular file is
/// then opened for reading, through that same handle.
fn read_passwd(root: &Path, running: bool) -> Option<Vec<u8>> {
    use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
    use std::os::unix::fs::OpenOptionsExt;
    let dir = File::open(root).ok()?;
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let fd = openat2(dir.as_raw_fd(), "etc/passwd", how).ok()?;
    // SAFETY: openat2 just returned this fd; nothing else owns it.
    let handle = unsafe { File::from_raw_fd(fd) };
    let meta = handle.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_PASSWD || (running && !on_data_filesystem(&handle)) {
        return None;
    }
    // Reopening the O_PATH handle opens the same inode, whatever happened to the path since.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{}", handle.as_raw_fd()))
        .ok()?;
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_PASSWD).read_to_end(&mut data).ok()?;
    Some(data)
}

/// Filesystems an image's `/etc/passwd` is read from: ones that hold plain data. Not procfs,
/// sysfs and the like, whose regular files can have effects when the runtime (host root) reads
/// them (a symlink to `/proc/kmsg` consumed the host's kernel log), nor FUSE, whose server the
/// container may run (a read could block the runtime).
const DATA_FILESYSTEMS: &[u32] = &[
    0xEF53,      // ext2/3/4
    0x5846_5342, // xfs
    0x9123_683E, // btrfs
    0x794C_7630, // overlayfs
    0x0102_1994, // tmpfs
    0x8584_58F6, // ramfs
    0x7371_7368, // squashfs
    0xE0F5_E1E2, // erofs
    0xF2F5_2010, // f2fs
    0x2FC1_2FC1, // zfs
];

/// True if `f` (an `O_PATH` handle is enough) is on one of [`DATA_FILESYSTEMS`].
fn on_data_filesystem(f: &File) -> bool {
    rustix::fs::fstatfs(f).is_ok_and(|st| DATA_FILESYSTEMS.contains(&(st.f_type as u32)))
}

/// `HOME` for `uid` in the container whose root directory is `root`: its `/etc/passwd` entry's
/// home, else `/` (runc's default).
pub fn lookup(root: &Path, uid: u32, running: bool) -> String {
    read_passwd(root, running)
        .and_then(|d| passwd_home(&d, uid))
        .unwrap_or_else(|| "/".to_string())
}

/// Give `p` a `HOME` from the container rooted at `root` if it has none. True if `p` changed.
/// `running`: `root` is a running container's (its mounts, procfs among them, are in place, and
/// it can change them), so only files of data filesystems are read; at create, `root` is the
/// bundle's rootfs before any mount, which may itself be on FUSE (rootless fuse-overlayfs).
pub fn ensure(p: &mut Process, root: &Path, running: bool) -> bool {
    if !missing(p) {
        return false;
    }
    let home = lookup(root, p.user().uid(), running);
    set(p, &home);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::ProcessBuilder;

    const PASSWD: &[u8] = b"root:x:0:0:root:/root:/bin/sh\n\
# a comment:x:5:5::/nope:/bin/sh\n\
broken line\n\
daemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n\
nohome:x:7:7:::/bin/sh\n\
dev:x:1000:1000:Dev,,,:/home/dev:/bin/bash\n\
dup:x:1000:1000::/home/second:/bin/sh\n";

    #[test]
    fn passwd_entries_by_uid() {
        assert_eq!(passwd_home(PASSWD, 0).as_deref(), Some("/root"));
        assert_eq!(passwd_home(PASSWD, 1).as_deref(), Some("/usr/sbin"));
        assert_eq!(passwd_home(PASSWD, 1000).as_deref(), Some("/home/dev"));
        assert_eq!(passwd_home(PASSWD, 5), None, "comments are not entries");
        assert_eq!(passwd_home(PASSWD, 7), None, "an empty home is none");
        assert_eq!(passwd_home(PASSWD, 4242), None);
        assert_eq!(passwd_home(b"", 0), None);
    }

    fn process(env: &[&str]) -> Process {
        ProcessBuilder::default()
            .args(vec!["sh".to_string()])
            .env(env.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .build()
            .unwrap()
    }

    #[test]
    fn home_is_missing_when_absent_or_empty() {
        assert!(missing(&process(&["PATH=/bin"])));
        assert!(missing(&process(&["HOME="])));
        assert!(
            missing(&process(&["HOME=/x", "HOME="])),
            "the last entry wins"
        );
        assert!(!missing(&process(&["HOME=", "HOME=/x"])));
        assert!(!missing(&process(&["PATH=/bin", "HOME=/h"])));
        // libcontainer reads a bare `HOME` as an empty one.
        assert!(missing(&process(&["HOME=/x", "HOME"])));
        assert!(!missing(&process(&["HOME", "HOME=/x"])));
        let mut p = process(&["PATH=/bin"]);
        p.set_env(None);
        assert!(missing(&p));
    }

    #[test]
    fn set_replaces_empty_entries() {
        let mut p = process(&["HOME=", "PATH=/bin", "HOME"]);
        set(&mut p, "/root");
        assert_eq!(
            p.env().as_deref().unwrap(),
            ["PATH=/bin".to_string(), "HOME=/root".to_string()]
        );
    }

    #[test]
    fn lookup_reads_the_containers_passwd_and_stays_inside_it() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("rootfs");
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join("etc/passwd"), PASSWD).unwrap();
        assert_eq!(lookup(&root, 1000, false), "/home/dev");
        assert_eq!(
            lookup(&root, 4242, false),
            "/",
            "unknown uid: runc's default"
        );

        // An absolute symlink is resolved inside the root, not on the host.
        let other = t.path().join("other");
        std::fs::create_dir_all(other.join("etc")).unwrap();
        std::fs::create_dir_all(other.join("srv")).unwrap();
        std::fs::write(other.join("srv/passwd"), b"u:x:3:3::/inside:/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("/srv/passwd", other.join("etc/passwd")).unwrap();
        assert_eq!(lookup(&other, 3, false), "/inside");
        std::fs::remove_file(other.join("etc/passwd")).unwrap();
        std::os::unix::fs::symlink("../../../../../../etc/passwd", other.join("etc/passwd"))
            .unwrap();
        assert_eq!(
            lookup(&other, 0, false),
            "/",
            "a climbing symlink stays in the root"
        );

        // A FIFO neither blocks nor is read.
        std::fs::remove_file(other.join("etc/passwd")).unwrap();
        nix::unistd::mkfifo(&other.join("etc/passwd"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(lookup(&other, 0, false), "/");
        assert_eq!(lookup(&t.path().join("missing"), 0, false), "/");

        // Nothing but a regular file is opened (the runtime's open of a device node can have
        // effects): inotify reports every open but an O_PATH one.
        std::fs::remove_file(other.join("etc/passwd")).unwrap();
        let made = nix::sys::stat::mknod(
            &other.join("etc/passwd"),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::S_IRUSR,
            nix::sys::stat::makedev(1, 3),
        );
        // mknod needs root (CI runs the unit tests as root).
        if made.is_ok() {
            assert_eq!(
                opens_during(&other.join("etc/passwd"), || lookup(&other, 0, false)),
                (0, "/".into())
            );
        }
        // The same check sees the open of a regular file.
        std::fs::remove_file(other.join("etc/passwd")).unwrap();
        std::fs::write(other.join("etc/passwd"), PASSWD).unwrap();
        assert_eq!(
            opens_during(&other.join("etc/passwd"), || lookup(&other, 0, false)),
            (1, "/root".into())
        );
    }

    /// How many times `path` was opened (other than `O_PATH`) while `f` ran, and `f`'s result.
    fn opens_during<T>(path: &Path, f: impl FnOnce() -> T) -> (usize, T) {
        // SAFETY: inotify_init1 returns a new fd or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: we own the new fd.
        let ino = unsafe { File::from_raw_fd(fd) };
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; the watch lives as long as the fd.
        let wd = unsafe { libc::inotify_add_watch(ino.as_raw_fd(), c.as_ptr(), libc::IN_OPEN) };
        assert!(wd >= 0, "{}", std::io::Error::last_os_error());
        let out = f();
        let mut buf = [0u8; 4096];
        let n = (&ino).read(&mut buf).unwrap_or(0);
        // Each event without a name is one `struct inotify_event` (16 bytes).
        (n / std::mem::size_of::<libc::inotify_event>(), out)
    }

    #[test]
    fn only_files_of_data_filesystems_are_read() {
        let opath = |p: &str| {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH)
                .open(p)
                .unwrap()
        };
        // Regular files whose reading by host root has effects or reveals the host.
        assert!(!on_data_filesystem(&opath("/proc/self/environ")));
        assert!(!on_data_filesystem(&opath("/sys/kernel/notes")));
        let t = tempfile::NamedTempFile::new().unwrap();
        assert!(on_data_filesystem(&opath(t.path().to_str().unwrap())));
    }

    #[test]
    fn ensure_keeps_a_given_home() {
        let t = tempfile::tempdir().unwrap();
        let mut p = process(&["HOME=/given"]);
        assert!(!ensure(&mut p, t.path(), false));
        let mut p = process(&["PATH=/bin"]);
        assert!(ensure(&mut p, t.path(), false));
        assert_eq!(env_home(p.env().as_deref().unwrap()), Some("/"));
    }
}
