//! Symlink-proof, root-relative file system access.
//!
//! Every path the crate touches inside the project, the lower view or the
//! upper layer goes through a `Root`: a directory file descriptor opened
//! once, from which every *parent directory* is resolved with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`
//! and the final component is then operated on with `*at()` calls that do
//! not follow symlinks (`O_NOFOLLOW`, `unlinkat`, `renameat`, `symlinkat`,
//! `mkdirat`).
//!
//! Threats defended against:
//! * **Symlink escape** — a project (or upper) directory replaced by a
//!   symlink to `/etc` or `/tmp/outside` cannot redirect a write: the
//!   kernel refuses to traverse it (`ELOOP`) and we report
//!   [`Error::SymlinkInPath`].
//! * **`..` and absolute paths** in a change set — rejected lexically by
//!   `check_rel` before any system call, and again by `RESOLVE_BENEATH`.
//! * **Magic links** (`/proc/self/fd/N`) — `RESOLVE_NO_MAGICLINKS`.
//! * **Final-component symlinks** — files are opened with `O_NOFOLLOW`, so a
//!   symlink planted at the target name is never written through; writes
//!   go to a fresh temporary file (`O_CREAT | O_EXCL`) that is renamed over
//!   the name, which replaces the directory entry (a symlink or a hard link
//!   to a file outside the project) instead of writing into what it points
//!   to.
//! * **Device nodes / fifos** — reads use `O_NONBLOCK` and check the file
//!   type on the opened descriptor, so a fifo cannot hang us and a device
//!   cannot be read as content.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::error::{Error, IoContext, Result};

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS);

/// Check that `rel` is a non-empty relative path made only of normal
/// components (no `..`, `.`, root or prefix).
pub(crate) fn check_rel(rel: &Path) -> Result<()> {
    let mut any = false;
    for c in rel.components() {
        match c {
            Component::Normal(_) => any = true,
            _ => {
                return Err(Error::InvalidPath {
                    path: rel.to_path_buf(),
                })
            }
        }
    }
    if !any || rel.as_os_str().as_bytes().contains(&0) {
        return Err(Error::InvalidPath {
            path: rel.to_path_buf(),
        });
    }
    Ok(())
}

/// Whether `e` says "no such file" (or "a parent is not a directory").
pub(crate) fn is_absent(e: &Error) -> bool {
    match e {
        Error::Io { source, .. } => matches!(
            source.raw_os_error(),
            Some(c) if c == Errno::NOENT.raw_os_error() || c == Errno::NOTDIR.raw_os_error()
        ),
        _ => false,
    }
}

/// A directory that all access is confined to.
#[derive(Debug)]
pub(crate) struct Root {
    fd: OwnedFd,
    path: PathBuf,
}

/// Human readable name of a non-regular, non-dir, non-symlink type.
pub(crate) fn special_kind(ft: std::fs::FileType) -> Option<&'static str> {
    if ft.is_char_device() {
        Some("character device")
    } else if ft.is_block_device() {
        Some("block device")
    } else if ft.is_fifo() {
        Some("fifo")
    } else if ft.is_socket() {
        Some("socket")
    } else {
        None
    }
}

impl Root {
    /// Open `path` (which itself may be reached through symlinks: it is the
    /// caller's trusted root) as the confinement root.
    pub(crate) fn open(path: &Path) -> Result<Self> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ctx("open directory", path)?;
        Ok(Root {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The absolute-ish display path of `rel` (for error messages only).
    pub(crate) fn show(&self, rel: &Path) -> PathBuf {
        self.path.join(rel)
    }

    /// `syncfs(2)` on the root's file system: makes every staged file,
    /// rename and directory change on it durable in one call.
    pub(crate) fn sync_fs(&self) -> Result<()> {
        rustix::fs::syncfs(&self.fd).ctx("syncfs", &self.path)
    }

    /// The root's own path as given to [`Root::open`].
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn map_resolve(&self, rel: &Path, op: &'static str, e: Errno) -> Error {
        if e == Errno::LOOP || e == Errno::XDEV {
            Error::SymlinkInPath {
                path: self.show(rel),
            }
        } else {
            Error::io(op, self.show(rel), e)
        }
    }

    /// Open the directory `rel_dir` (empty = the root) beneath the root
    /// without following any symlink.
    pub(crate) fn open_dir(&self, rel_dir: &Path) -> Result<OwnedFd> {
        let p: &Path = if rel_dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            check_rel(rel_dir)?;
            rel_dir
        };
        let mut tries = 0;
        loop {
            match rustix::fs::openat2(
                &self.fd,
                p,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
                RESOLVE,
            ) {
                Ok(fd) => return Ok(fd),
                // openat2 returns EAGAIN when a concurrent rename raced the
                // lookup; retrying is what the man page recommends.
                Err(Errno::AGAIN) if tries < 16 => tries += 1,
                Err(e) => return Err(self.map_resolve(rel_dir, "open directory", e)),
            }
        }
    }

    /// Resolve the parent of `rel` safely; returns its fd and the final name.
    pub(crate) fn parent<'p>(&self, rel: &'p Path) -> Result<(OwnedFd, &'p OsStr)> {
        check_rel(rel)?;
        let name = rel.file_name().ok_or_else(|| Error::InvalidPath {
            path: rel.to_path_buf(),
        })?;
        let parent = rel.parent().unwrap_or(Path::new(""));
        match self.open_dir(parent) {
            Ok(fd) => Ok((fd, name)),
            // Name the path being resolved, not just the offending parent.
            Err(Error::SymlinkInPath { .. }) => Err(Error::SymlinkInPath {
                path: self.show(rel),
            }),
            Err(e) => Err(e),
        }
    }

    /// `lstat` of `rel`: `Ok(None)` if it (or a parent) does not exist,
    /// [`Error::SymlinkInPath`] if a parent is a symlink.
    pub(crate) fn probe(&self, rel: &Path) -> Result<Option<Metadata>> {
        let (dir, name) = match self.parent(rel) {
            Ok(x) => x,
            Err(e) if is_absent(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        stat_at(&dir, name).map_err(|e| Error::io("lstat", self.show(rel), e))
    }

    /// Like [`Root::probe`] but a symlinked parent counts as "absent": the
    /// path does not exist as a symlink-free path beneath the root.
    pub(crate) fn probe_lenient(&self, rel: &Path) -> Result<Option<Metadata>> {
        match self.probe(rel) {
            Err(Error::SymlinkInPath { .. }) => Ok(None),
            r => r,
        }
    }

    /// Read a regular file's content (never through a symlink, never from
    /// a device or fifo).
    pub(crate) fn read_file(&self, rel: &Path) -> Result<(Vec<u8>, Metadata)> {
        let (dir, name) = self.parent(rel)?;
        let fd = rustix::fs::openat(
            &dir,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            if e == Errno::LOOP {
                Error::Conflict {
                    path: self.show(rel),
                    msg: "expected a regular file, found a symlink".into(),
                }
            } else {
                Error::io("open", self.show(rel), e)
            }
        })?;
        let mut f = File::from(fd);
        let md = f.metadata().ctx("fstat", self.show(rel))?;
        if !md.file_type().is_file() {
            return Err(match special_kind(md.file_type()) {
                Some(kind) => Error::SpecialFile {
                    path: self.show(rel),
                    kind,
                },
                None => Error::Conflict {
                    path: self.show(rel),
                    msg: "expected a regular file".into(),
                },
            });
        }
        let mut buf = Vec::with_capacity(usize::try_from(md.size()).unwrap_or(0));
        f.read_to_end(&mut buf).ctx("read", self.show(rel))?;
        Ok((buf, md))
    }

    /// Read a symlink's target.
    pub(crate) fn read_link(&self, rel: &Path) -> Result<PathBuf> {
        let (dir, name) = self.parent(rel)?;
        let t = rustix::fs::readlinkat(&dir, name, Vec::new()).ctx("readlink", self.show(rel))?;
        Ok(PathBuf::from(OsStr::from_bytes(t.as_bytes())))
    }
}

/// `lstat` of `name` in `dir` via an `O_PATH | O_NOFOLLOW` descriptor.
pub(crate) fn stat_at(dir: &impl AsFd, name: &OsStr) -> io::Result<Option<Metadata>> {
    match rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => Ok(Some(File::from(fd).metadata()?)),
        Err(Errno::NOENT) | Err(Errno::NOTDIR) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Read an extended attribute of `path` without following a final symlink.
pub(crate) fn get_xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 256];
    match rustix::fs::lgetxattr(path, name, &mut buf[..]) {
        Ok(n) => {
            buf.truncate(n);
            Some(buf)
        }
        Err(_) => None,
    }
}

/// Open an existing entry for metadata changes (`fchmod`/`fchown`) without
/// following a symlink at the final component.
pub(crate) fn open_nofollow(dir: &impl AsFd, name: &OsStr) -> io::Result<File> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// Create `tmp` in `dir` exclusively, write `content` and set the mode
/// (and owner, best effort). Not fsynced: the caller makes all staged files
/// durable at once with `syncfs` before renaming them into place.
pub(crate) fn write_tmp(
    dir: &impl AsFd,
    tmp: &OsStr,
    content: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> io::Result<()> {
    remove_if_exists(dir, tmp)?;
    let fd = rustix::fs::openat(
        dir,
        tmp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut f = File::from(fd);
    f.write_all(content)?;
    if let Some((uid, gid)) = owner {
        chown_best_effort(&f, uid, gid);
    }
    // After chown: chown clears setuid/setgid, and we never set them anyway.
    rustix::fs::fchmod(&f, Mode::from_raw_mode(mode & 0o777))?;
    Ok(())
}

/// `fchown`, ignoring failure (we may not be privileged; ownership is a
/// nicety, content and mode are the contract).
pub(crate) fn chown_best_effort(f: &impl AsFd, uid: u32, gid: u32) {
    let _ = rustix::fs::fchown(
        f,
        Some(rustix::fs::Uid::from_raw(uid)),
        Some(rustix::fs::Gid::from_raw(gid)),
    );
}

/// Remove a non-directory entry if present.
pub(crate) fn remove_if_exists(dir: &impl AsFd, name: &OsStr) -> io::Result<bool> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The OS name of a temporary file for `index` in transaction `id`.
pub(crate) fn tmp_name(id: &str, index: usize) -> OsString {
    OsString::from(format!(".shadow-apply-{id}-{index}.tmp"))
}
