//! A faithful copy of an overlay upper tree onto another file system (used by [`crate::disk`]
//! to move a capped upper layer into the session store).
//!
//! What the overlay wrote there must survive as overlayfs and shadow read it: whiteouts (char
//! devices 0:0), opaque and other `*.overlay.*` xattrs, modes, owners, symlinks, hard links,
//! fifos and sockets, and modification times. The tree came from inside the sandbox, so it is
//! data, never instructions: nothing is followed (symlinks are copied as links, never resolved),
//! every entry is created fresh under `dest` (which must be empty) by a path built from the
//! walk, and the only device created is the whiteout (any other device node is skipped: the
//! sandbox cannot make one, and apply would refuse it anyway).

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, Timespec, Timestamps, XattrFlags, CWD};

/// What was copied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Copied {
    /// Entries created (files, directories, links, whiteouts, …).
    pub entries: u64,
    /// Bytes of file contents.
    pub bytes: u64,
    /// Device nodes other than whiteouts, left out.
    pub skipped_devices: u64,
}

fn rio(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

/// Copies `src` (an upper directory) into the existing, empty directory `dest`.
pub fn copy_upper(src: &Path, dest: &Path) -> io::Result<Copied> {
    let mut c = Copied::default();
    let mut links: HashMap<(u64, u64), std::path::PathBuf> = HashMap::new();
    let mut dirs = Vec::new();
    copy_meta(src, dest, &std::fs::symlink_metadata(src)?)?;
    dirs.push((dest.to_path_buf(), std::fs::symlink_metadata(src)?));
    for entry in walkdir::WalkDir::new(src).min_depth(1).follow_links(false) {
        let entry = entry.map_err(|e| io::Error::other(e.to_string()))?;
        let rel = entry
            .path()
            .strip_prefix(src)
            .map_err(|e| io::Error::other(e.to_string()))?;
        let to = dest.join(rel);
        let m = entry.path().symlink_metadata()?;
        let ft = m.file_type();
        if ft.is_dir() {
            std::fs::create_dir(&to)?;
            copy_meta(entry.path(), &to, &m)?;
            dirs.push((to, m));
            c.entries += 1;
            continue;
        }
        let copyable = ft.is_file()
            || ft.is_symlink()
            || ft.is_fifo()
            || ft.is_socket()
            || (ft.is_char_device() && m.rdev() == 0);
        if !copyable {
            c.skipped_devices += 1;
            continue;
        }
        if m.nlink() > 1 {
            if let Some(first) = links.get(&(m.dev(), m.ino())) {
                std::fs::hard_link(first, &to)?;
                c.entries += 1;
                continue;
            }
            links.insert((m.dev(), m.ino()), to.clone());
        }
        let mode = Mode::from_raw_mode(m.mode() & 0o7777);
        if ft.is_file() {
            c.bytes += copy_file(entry.path(), &to)?;
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &to)?;
        } else if ft.is_char_device() && m.rdev() == 0 {
            rustix::fs::mknodat(CWD, &to, FileType::CharacterDevice, mode, 0).map_err(rio)?;
        } else if ft.is_fifo() {
            rustix::fs::mknodat(CWD, &to, FileType::Fifo, mode, 0).map_err(rio)?;
        } else if ft.is_socket() {
            rustix::fs::mknodat(CWD, &to, FileType::Socket, mode, 0).map_err(rio)?;
        } else {
            unreachable!("checked as copyable above");
        }
        copy_meta(entry.path(), &to, &m)?;
        c.entries += 1;
    }
    // Directory times last: creating their entries changed them.
    for (d, m) in dirs.iter().rev() {
        set_times(d, m)?;
    }
    Ok(c)
}

/// Copies the data regions only (SEEK_DATA/SEEK_HOLE), so a sparse file stays sparse: threat,
/// a sandbox capped at 16 MiB that runs `truncate -s 10T f` must not make this copy write 10 TiB
/// into the store. What lands on the host is bounded by what the image really held.
fn copy_file(from: &Path, to: &Path) -> io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::fd::AsRawFd;
    let mut r = std::fs::File::open(from)?;
    let mut w = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)?;
    let len = r.metadata()?.len();
    let mut copied = 0u64;
    let mut pos: i64 = 0;
    let mut buf = vec![0u8; 1 << 16];
    while (pos as u64) < len {
        // SAFETY: lseek on a file we own; no memory is passed.
        let data = unsafe { libc::lseek(r.as_raw_fd(), pos, libc::SEEK_DATA) };
        if data < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENXIO) {
                break; // only a hole is left
            }
            return Err(e);
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(r.as_raw_fd(), data, libc::SEEK_HOLE) };
        if hole < 0 {
            return Err(io::Error::last_os_error());
        }
        r.seek(SeekFrom::Start(data as u64))?;
        w.seek(SeekFrom::Start(data as u64))?;
        let mut left = (hole - data) as u64;
        while left > 0 {
            let want = left.min(buf.len() as u64) as usize;
            let n = r.read(&mut buf[..want])?;
            if n == 0 {
                break;
            }
            w.write_all(&buf[..n])?;
            left -= n as u64;
            copied += n as u64;
        }
        pos = hole;
    }
    w.set_len(len)?;
    Ok(copied)
}

/// Owner, mode, xattrs and (for non-directories) times, without following a symlink.
fn copy_meta(from: &Path, to: &Path, m: &std::fs::Metadata) -> io::Result<()> {
    rustix::fs::chownat(
        CWD,
        to,
        Some(rustix::fs::Uid::from_raw(m.uid())),
        Some(rustix::fs::Gid::from_raw(m.gid())),
        AtFlags::SYMLINK_NOFOLLOW,
    )
    .map_err(rio)?;
    if !m.file_type().is_symlink() {
        // After chown, which clears setuid/setgid bits.
        rustix::fs::chmodat(
            CWD,
            to,
            Mode::from_raw_mode(m.mode() & 0o7777),
            AtFlags::empty(),
        )
        .map_err(rio)?;
    }
    copy_xattrs(from, to)?;
    if !m.file_type().is_dir() {
        set_times(to, m)?;
    }
    Ok(())
}

fn copy_xattrs(from: &Path, to: &Path) -> io::Result<()> {
    let mut names = vec![0u8; 1 << 16];
    let n = match rustix::fs::llistxattr(from, &mut names[..]) {
        Ok(n) => n,
        Err(rustix::io::Errno::NOTSUP) => return Ok(()),
        Err(e) => return Err(rio(e)),
    };
    let mut value = vec![0u8; 1 << 16];
    for name in names[..n].split(|b| *b == 0).filter(|s| !s.is_empty()) {
        let name: &std::ffi::OsStr = std::os::unix::ffi::OsStrExt::from_bytes(name);
        let len = rustix::fs::lgetxattr(from, name, &mut value[..]).map_err(rio)?;
        match rustix::fs::lsetxattr(to, name, &value[..len], XattrFlags::empty()) {
            Ok(()) => {}
            // security.* labels of another file system: not ours to carry.
            Err(_) if name.as_encoded_bytes().starts_with(b"security.") => {}
            Err(e) => return Err(rio(e)),
        }
    }
    Ok(())
}

fn set_times(to: &Path, m: &std::fs::Metadata) -> io::Result<()> {
    let ts = |s: i64, ns: i64| Timespec {
        tv_sec: s,
        tv_nsec: ns as _,
    };
    rustix::fs::utimensat(
        CWD,
        to,
        &Timestamps {
            last_access: ts(m.atime(), m.atime_nsec()),
            last_modification: ts(m.mtime(), m.mtime_nsec()),
        },
        AtFlags::SYMLINK_NOFOLLOW,
    )
    .map_err(rio)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_tree_with_every_kind_of_entry_is_copied_as_it_is() {
        let d = tempfile::tempdir().unwrap();
        let (src, dst) = (d.path().join("src"), d.path().join("dst"));
        std::fs::create_dir_all(src.join("dir/sub")).unwrap();
        std::fs::create_dir(&dst).unwrap();
        std::fs::write(src.join("dir/a.txt"), "hello\n").unwrap();
        std::fs::set_permissions(
            src.join("dir/a.txt"),
            std::fs::Permissions::from_mode(0o751),
        )
        .unwrap();
        std::fs::hard_link(src.join("dir/a.txt"), src.join("hard.txt")).unwrap();
        std::os::unix::fs::symlink("../../etc/passwd", src.join("dir/sub/escape")).unwrap();
        rustix::fs::mknodat(
            CWD,
            src.join("gone"),
            FileType::CharacterDevice,
            Mode::empty(),
            0,
        )
        .unwrap();
        rustix::fs::mknodat(
            CWD,
            src.join("pipe"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        rustix::fs::lsetxattr(
            src.join("dir"),
            "user.overlay.opaque",
            b"y",
            XattrFlags::empty(),
        )
        .unwrap();
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        std::fs::File::options()
            .write(true)
            .open(src.join("dir/a.txt"))
            .unwrap()
            .set_modified(old)
            .unwrap();

        let c = copy_upper(&src, &dst).unwrap();
        assert_eq!(c.bytes, 6);
        assert_eq!(c.entries, 7);
        assert_eq!(
            std::fs::read_to_string(dst.join("dir/a.txt")).unwrap(),
            "hello\n"
        );
        let m = std::fs::metadata(dst.join("dir/a.txt")).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o751);
        assert_eq!(m.modified().unwrap(), old);
        assert_eq!(
            m.ino(),
            std::fs::metadata(dst.join("hard.txt")).unwrap().ino()
        );
        assert_eq!(
            std::fs::read_link(dst.join("dir/sub/escape")).unwrap(),
            Path::new("../../etc/passwd")
        );
        let w = std::fs::symlink_metadata(dst.join("gone")).unwrap();
        assert!(w.file_type().is_char_device() && w.rdev() == 0);
        assert!(std::fs::symlink_metadata(dst.join("pipe"))
            .unwrap()
            .file_type()
            .is_fifo());
        let mut v = [0u8; 8];
        let n = rustix::fs::lgetxattr(dst.join("dir"), "user.overlay.opaque", &mut v[..]).unwrap();
        assert_eq!(&v[..n], b"y");
    }

    #[test]
    fn a_sparse_file_stays_sparse() {
        let d = tempfile::tempdir().unwrap();
        let (src, dst) = (d.path().join("src"), d.path().join("dst"));
        std::fs::create_dir_all(&src).unwrap();
        std::fs::create_dir(&dst).unwrap();
        let f = std::fs::File::create(src.join("huge")).unwrap();
        f.set_len(1 << 40).unwrap(); // 1 TiB, all hole
        use std::os::unix::fs::FileExt;
        f.write_at(b"tail", (1 << 40) - 4).unwrap();
        let c = copy_upper(&src, &dst).unwrap();
        assert!(c.bytes < 1 << 20, "copied {} bytes", c.bytes);
        let m = std::fs::metadata(dst.join("huge")).unwrap();
        assert_eq!(m.len(), 1 << 40);
        assert!(m.blocks() * 512 < 1 << 20, "{} blocks", m.blocks());
        let mut tail = [0u8; 4];
        std::fs::File::open(dst.join("huge"))
            .unwrap()
            .read_exact_at(&mut tail, (1 << 40) - 4)
            .unwrap();
        assert_eq!(&tail, b"tail");
    }

    #[test]
    fn a_device_other_than_a_whiteout_is_left_out() {
        let d = tempfile::tempdir().unwrap();
        let (src, dst) = (d.path().join("src"), d.path().join("dst"));
        std::fs::create_dir_all(&src).unwrap();
        std::fs::create_dir(&dst).unwrap();
        // /dev/null's numbers (1:3); needs CAP_MKNOD, which the tests have (root).
        rustix::fs::mknodat(
            CWD,
            src.join("null"),
            FileType::CharacterDevice,
            Mode::from_raw_mode(0o666),
            rustix::fs::makedev(1, 3),
        )
        .unwrap();
        let c = copy_upper(&src, &dst).unwrap();
        assert_eq!(c.skipped_devices, 1);
        assert!(!dst.join("null").exists());
    }
}
