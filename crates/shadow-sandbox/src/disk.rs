//! `--disk SIZE`: the session's upper layer on a file system of its own, so that the sandbox
//! sees ENOSPC at SIZE and the host's disk is never filled through it.
//!
//! How: a sparse image file `<session>/disk.img` of SIZE bytes, `mkfs.ext4`, loop-mounted
//! (`mount -o loop`) at `<session>/disk`, with the overlay's upper and work directories inside.
//! When the run ends, [`Disk::finish`] copies the upper tree out into the session's ordinary
//! `upper/` (see [`crate::treecopy`]), unmounts and deletes the image, so every other verb
//! (diff, review, apply) reads the same layout as without `--disk`.
//!
//! Root only: an unprivileged user cannot attach a loop device or mount ext4 (it is not
//! mountable in a user namespace), and the caller refuses `--disk` then rather than run
//! uncapped. After a crash the image is still there (and maybe still mounted):
//! [`Disk::existing`] + [`Disk::finish`] recover its contents.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The image file, in the session directory.
pub const IMAGE: &str = "disk.img";
/// Its mount point, in the session directory.
pub const MOUNT: &str = "disk";
/// The smallest cap: ext4 needs a few MiB for itself (journal, inode tables).
pub const MIN_SIZE: u64 = 16 << 20;

/// `mkfs.ext4` for the image: quiet, no root reserve (the cap is what the sandbox gets, less
/// the file system's own metadata), inode tables initialised lazily (fast on a sparse file).
pub fn mkfs_argv(image: &Path) -> Vec<OsString> {
    let mut v: Vec<OsString> = ["mkfs.ext4", "-q", "-F", "-m", "0", "-E"]
        .iter()
        .map(OsString::from)
        .collect();
    v.push("lazy_itable_init=1,lazy_journal_init=1".into());
    v.push(image.into());
    v
}

/// `mount` of the image: a loop device that detaches itself at unmount; nothing on it may act
/// as a device or setuid program on the host.
pub fn mount_argv(image: &Path, dir: &Path) -> Vec<OsString> {
    vec![
        "mount".into(),
        "-t".into(),
        "ext4".into(),
        "-o".into(),
        "loop,nosuid,nodev".into(),
        image.into(),
        dir.into(),
    ]
}

/// A session's capped upper layer.
#[derive(Debug)]
pub struct Disk {
    image: PathBuf,
    dir: PathBuf,
}

fn run(argv: &[OsString]) -> io::Result<()> {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", argv[0].to_string_lossy())))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(io::Error::other(format!(
        "{} failed ({}): {}",
        argv[0].to_string_lossy(),
        out.status,
        err.trim()
    )))
}

impl Disk {
    /// Creates, formats and mounts an image of `size` bytes in `session_dir`, with `upper/` and
    /// `work/` owned like `owner_of` (the session's ordinary upper directory). On error nothing
    /// is left behind.
    pub fn create(session_dir: &Path, size: u64, owner_of: &Path) -> io::Result<Disk> {
        if size < MIN_SIZE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a disk cap must be at least {} MiB", MIN_SIZE >> 20),
            ));
        }
        // Canonical: is_mounted compares with mountinfo, which shows resolved paths.
        let session_dir = std::fs::canonicalize(session_dir)?;
        let d = Disk {
            image: session_dir.join(IMAGE),
            dir: session_dir.join(MOUNT),
        };
        let r = (|| {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&d.image)?;
            f.set_len(size)?;
            drop(f);
            run(&mkfs_argv(&d.image))?;
            std::fs::create_dir(&d.dir)?;
            run(&mount_argv(&d.image, &d.dir))?;
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(owner_of)?;
            for sub in [d.upper(), d.work()] {
                std::fs::create_dir(&sub)?;
                std::os::unix::fs::chown(&sub, Some(m.uid()), Some(m.gid()))?;
                std::fs::set_permissions(&sub, m.permissions())?;
            }
            Ok(())
        })();
        match r {
            Ok(()) => Ok(d),
            Err(e) => {
                let _ = d.remove();
                Err(e)
            }
        }
    }

    /// The disk of a session whose run did not finish (its image is still there).
    pub fn existing(session_dir: &Path) -> Option<Disk> {
        let session_dir = std::fs::canonicalize(session_dir).ok()?;
        let image = session_dir.join(IMAGE);
        image.is_file().then(|| Disk {
            image,
            dir: session_dir.join(MOUNT),
        })
    }

    /// The overlay's upper directory on the disk.
    pub fn upper(&self) -> PathBuf {
        self.dir.join("upper")
    }

    /// The overlay's work directory on the disk.
    pub fn work(&self) -> PathBuf {
        self.dir.join("work")
    }

    /// Whether the image is mounted at its mount point (in this mount namespace).
    pub fn is_mounted(&self) -> bool {
        let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
            return false;
        };
        let want = self.dir.to_string_lossy();
        info.lines()
            .filter_map(|l| l.split(' ').nth(4))
            .any(|m| unescape_mountinfo(m) == want)
    }

    /// Copies the upper tree into `dest` (the session's ordinary, empty upper directory),
    /// then unmounts and removes the image. If the copy fails, the image stays (nothing is
    /// lost) and the error says so.
    pub fn finish(self, dest: &Path) -> io::Result<crate::treecopy::Copied> {
        if !self.is_mounted() {
            std::fs::create_dir_all(&self.dir)?;
            run(&mount_argv(&self.image, &self.dir))?;
        }
        // A copy an earlier attempt left half done: start over (dest is the session's own
        // upper directory, filled only from here).
        for e in std::fs::read_dir(dest)? {
            let p = e?.path();
            if p.symlink_metadata()?.is_dir() {
                std::fs::remove_dir_all(&p)?;
            } else {
                std::fs::remove_file(&p)?;
            }
        }
        let copied = crate::treecopy::copy_upper(&self.upper(), dest).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "copying the capped upper layer out of {} failed ({e}); the image is kept",
                    self.image.display()
                ),
            )
        })?;
        self.remove()?;
        Ok(copied)
    }

    /// Unmounts (if mounted) and deletes the image and its mount point, contents and all.
    pub fn remove(&self) -> io::Result<()> {
        if self.is_mounted() {
            run(&["umount".into(), self.dir.clone().into_os_string()])?;
        }
        if self.dir.exists() {
            // Empty once unmounted; never remove_dir_all, which would descend into a mount.
            std::fs::remove_dir(&self.dir)?;
        }
        match std::fs::remove_file(&self.image) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// Mount points in mountinfo escape space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_builders() {
        let img = Path::new("/s/disk.img");
        assert_eq!(
            mkfs_argv(img),
            [
                "mkfs.ext4",
                "-q",
                "-F",
                "-m",
                "0",
                "-E",
                "lazy_itable_init=1,lazy_journal_init=1",
                "/s/disk.img"
            ]
        );
        assert_eq!(
            mount_argv(img, Path::new("/s/disk")),
            [
                "mount",
                "-t",
                "ext4",
                "-o",
                "loop,nosuid,nodev",
                "/s/disk.img",
                "/s/disk"
            ]
        );
    }

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape_mountinfo(r"/a\040b/c\134d"), "/a b/c\\d");
        assert_eq!(unescape_mountinfo(r"/plain"), "/plain");
        assert_eq!(unescape_mountinfo(r"/x\04"), r"/x\04");
    }

    #[test]
    fn too_small_is_refused_before_anything_is_created() {
        let d = tempfile::tempdir().unwrap();
        let e = Disk::create(d.path(), 1 << 20, d.path()).unwrap_err();
        assert!(e.to_string().contains("at least 16 MiB"), "{e}");
        assert!(!d.path().join(IMAGE).exists());
    }
}
