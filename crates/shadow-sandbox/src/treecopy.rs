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
        if m.nlink() > 1 && !ft.is_dir() {
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
            c.skipped_devices += 1;
            continue;
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

fn copy_file(from: &Path, to: &Path) -> io::Result<u64> {
    let mut r = std::fs::File::open(from)?;
    let mut w = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)?;
    io::copy(&mut r, &mut w)
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
