//! `mount_setattr(2)`, which libc does not wrap: used to make a detached mount of the runtime
//! binary read-only (seal) and a container's cgroup mounts read-only (cgroup_mount).

use std::io;
use std::os::fd::RawFd;

pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Set the attributes `set` on the mount that `fd` (an `O_PATH` or `open_tree` fd) is the root
/// of (that mount only, not those below it).
pub fn set(fd: RawFd, set: u64) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr reads `attr` (of the size we pass) and changes the mounts at fd.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
