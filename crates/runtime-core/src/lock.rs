//! Per-container locks. Every command that reads-modifies-writes a container's state holds an
//! exclusive lock on `<root>/.locks/<id>`, so concurrent `start`/`kill`/`delete` from an engine
//! and a user are serialised and never interleave writes to `state.json`.
//!
//! The lock is a POSIX record lock (`fcntl(F_SETLKW)`), not `flock`: `flock` belongs to the open
//! file description, which the container's init process inherits when libcontainer clones it
//! during `create` — and that process keeps it until it execs, i.e. until `start`, which would
//! then wait for the lock forever. Record locks belong to the process and are not inherited.
//!
//! The lock file lives outside the container directory so that `delete` can remove that directory
//! while still holding the lock, and `create` can take the lock before the directory exists.

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A held lock; released on drop.
#[derive(Debug)]
pub struct ContainerLock {
    file: Option<File>,
    path: PathBuf,
}

fn lock_fd(file: &File, path: &Path) -> Result<()> {
    loop {
        // SAFETY: an all-zero flock struct is valid; we then set the fields we need.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        // SAFETY: F_SETLKW on an fd we own, with a pointer to a live flock struct.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLKW, &fl) };
        if rc == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(Error::io(format!("lock {}", path.display()), err));
        }
    }
}

impl ContainerLock {
    /// Block until the lock for `id` under `root` is ours.
    ///
    /// The lock file may be unlinked by its holder (`delete`, or a command that found no such
    /// container): a waiter that then gets the lock holds it on a file nobody else will open, so
    /// after locking we check that the path still names our file, and start over if not.
    pub fn acquire(root: &Path, id: &str) -> Result<Self> {
        let dir = root.join(".locks");
        fs::create_dir_all(&dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        let path = dir.join(id);
        loop {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .custom_flags(libc::O_CLOEXEC)
                .open(&path)
                .map_err(|e| Error::io(format!("open lock {}", path.display()), e))?;
            lock_fd(&file, &path)?;
            let ours = file.metadata().map_err(|e| Error::io("stat lock", e))?;
            match fs::metadata(&path) {
                Ok(now) if now.ino() == ours.ino() && now.dev() == ours.dev() => {
                    return Ok(Self {
                        file: Some(file),
                        path,
                    })
                }
                // Unlinked (or replaced) while we waited: retry on the current file.
                _ => continue,
            }
        }
    }

    /// Lock an existing container. When there is no such container no lock file is left behind
    /// (a command on an unknown id must leave nothing behind); the caller's load then reports it.
    pub fn acquire_existing(root: &Path, id: &str) -> Result<Self> {
        crate::id::validate(id)?;
        if !root.join(id).is_dir() {
            return Ok(Self {
                file: None,
                path: root.join(".locks").join(id),
            });
        }
        let lock = Self::acquire(root, id)?;
        if !root.join(id).is_dir() {
            // Deleted while we waited: drop the lock file we may have just created.
            lock.remove();
        }
        Ok(lock)
    }

    /// Remove the lock file (after `delete`): later commands see a fresh one.
    pub fn remove(&self) {
        if self.file.is_some() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether another process can take the lock right now (F_SETLK from a forked child).
    fn free_for_other_process(path: &Path) -> bool {
        let f = OpenOptions::new().write(true).open(path).unwrap();
        // SAFETY: the child only calls fcntl and _exit, both async-signal-safe.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                // SAFETY: zeroed flock is valid.
                let mut fl: libc::flock = unsafe { std::mem::zeroed() };
                fl.l_type = libc::F_WRLCK as libc::c_short;
                // SAFETY: fcntl on an inherited fd, then _exit.
                unsafe {
                    let rc = libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl);
                    libc::_exit(if rc == 0 { 0 } else { 1 })
                }
            }
            nix::unistd::ForkResult::Parent { child } => {
                match nix::sys::wait::waitpid(child, None).unwrap() {
                    nix::sys::wait::WaitStatus::Exited(_, code) => code == 0,
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    #[test]
    fn lock_excludes_other_processes_and_is_released_on_drop() {
        let t = tempfile::tempdir().unwrap();
        let l = ContainerLock::acquire(t.path(), "c").unwrap();
        let path = t.path().join(".locks/c");
        assert!(!free_for_other_process(&path));
        drop(l);
        assert!(free_for_other_process(&path));
    }

    #[test]
    fn no_lock_file_for_unknown_container() {
        let t = tempfile::tempdir().unwrap();
        let _l = ContainerLock::acquire_existing(t.path(), "nope").unwrap();
        assert!(!t.path().join(".locks").exists());
    }
}
