//! `shadow doctor`: can this host run shadow's sandboxes, and if not, what to change.
//!
//! Every check is a probe (reads a sysctl, calls a syscall, or forks a child that tries the real
//! thing: a user namespace, an overlay mounted inside one) followed by a pure judgement
//! (`*_check` functions) that turns what was found into a [`Check`]: `ok`, `warn` (works, but
//! something is degraded) or `fail` (shadow cannot run a sandbox), with the fix. Only checks of
//! things a sandbox cannot do without ever say `fail`; the exit status is 1 when one does.

use std::ffi::CString;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;
use shadow_sandbox::hostview::{self, CgroupAccess, UserInfo};
use shadow_sandbox::session::Store;

use crate::{Failure, Outcome};

/// Options of `shadow doctor`.
#[derive(Debug, Clone, Default)]
pub struct DoctorOptions {
    /// Machine-readable output.
    pub json: bool,
}

/// Result of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Ok,
    /// Works, degraded.
    Warn,
    /// A sandbox cannot run.
    Fail,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Short name (`kernel`, `userns`…).
    pub name: String,
    /// Outcome.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about it (`None` when ok).
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: &str, detail: impl Into<String>) -> Self {
        Check {
            name: name.into(),
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    fn warn(name: &str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            name: name.into(),
            status: Status::Warn,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    fn fail(name: &str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            name: name.into(),
            status: Status::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------------------------

/// Whether no check failed.
pub fn all_ok(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.status != Status::Fail)
}

/// One line per check (`ok`/`warn`/`fail`, name, detail), the fix indented below when not ok,
/// and a closing line.
pub fn render_text(checks: &[Check], color: bool) -> String {
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let mut s = String::new();
    for c in checks {
        let word = format!("{:<4}", c.status.word());
        let word = if color {
            let col = match c.status {
                Status::Ok => "\x1b[32m",
                Status::Warn => "\x1b[33m",
                Status::Fail => "\x1b[1;31m",
            };
            format!("{col}{word}\x1b[m")
        } else {
            word
        };
        let _ = writeln!(s, "{word}  {:<width$}  {}", c.name, c.detail);
        if let Some(fix) = &c.fix {
            let _ = writeln!(s, "{:<4}  {:<width$}  fix: {fix}", "", "");
        }
    }
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    if failed > 0 {
        let _ = writeln!(
            s,
            "{failed} required check(s) failed: shadow cannot run sandboxes on this host"
        );
    } else if warned > 0 {
        let _ = writeln!(s, "shadow can run here ({warned} warning(s))");
    } else {
        let _ = writeln!(s, "shadow can run here");
    }
    s
}

/// `{"checks":[{"name","status","detail","fix"}],"ok":bool}`.
pub fn render_json(checks: &[Check]) -> String {
    #[derive(Serialize)]
    struct Report<'a> {
        checks: &'a [Check],
        ok: bool,
    }
    serde_json::to_string(&Report {
        checks,
        ok: all_ok(checks),
    })
    .expect("checks serialise")
}

// ---------------------------------------------------------------------------------------------
// Judgements (pure)
// ---------------------------------------------------------------------------------------------

/// `major.minor` of a kernel release string (`6.18.44-fc-v1045` → (6, 18)).
pub fn parse_kernel(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// Kernel version: ≥ 5.13 ok (Landlock, overlayfs in user namespaces), 5.11–5.12 warn (no
/// Landlock), older fail (no unprivileged overlayfs).
pub fn kernel_check(release: &str) -> Check {
    const NAME: &str = "kernel";
    let Some(v) = parse_kernel(release) else {
        return Check::warn(
            NAME,
            format!("cannot parse kernel release {release:?}"),
            "shadow needs Linux ≥ 5.13",
        );
    };
    if v >= (5, 13) {
        Check::ok(NAME, format!("Linux {release} (≥ 5.13)"))
    } else if v >= (5, 11) {
        Check::warn(
            NAME,
            format!(
                "Linux {release}: overlayfs in user namespaces works, Landlock does not (5.13)"
            ),
            "upgrade to Linux ≥ 5.13",
        )
    } else {
        Check::fail(
            NAME,
            format!("Linux {release}: overlayfs cannot be mounted in a user namespace before 5.11"),
            "upgrade to Linux ≥ 5.13",
        )
    }
}

/// The user-namespace sysctls, as read (`None`: file absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsernsSysctls {
    /// `/proc/sys/kernel/unprivileged_userns_clone` (Debian/old Ubuntu kernels).
    pub unprivileged_userns_clone: Option<String>,
    /// `/proc/sys/user/max_user_namespaces`.
    pub max_user_namespaces: Option<String>,
    /// `/proc/sys/kernel/apparmor_restrict_unprivileged_userns` (Ubuntu ≥ 23.10).
    pub apparmor_restrict: Option<String>,
}

impl UsernsSysctls {
    fn read() -> Self {
        let r = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        UsernsSysctls {
            unprivileged_userns_clone: r("/proc/sys/kernel/unprivileged_userns_clone"),
            max_user_namespaces: r("/proc/sys/user/max_user_namespaces"),
            apparmor_restrict: r("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
        }
    }

    fn apparmor_restricts(&self) -> bool {
        self.apparmor_restrict.as_deref() == Some("1")
    }
}

const APPARMOR_FIX: &str = "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (persist in \
                            /etc/sysctl.d/), or install an AppArmor profile that allows userns \
                            for the shadow binary";

/// Whether the sysctls allow this user to create user namespaces (every sandbox has one, root's
/// too).
pub fn userns_sysctl_check(s: &UsernsSysctls, root: bool) -> Check {
    const NAME: &str = "userns.sysctl";
    let max = s.max_user_namespaces.as_deref();
    if max == Some("0") {
        return Check::fail(
            NAME,
            "user.max_user_namespaces = 0: no user namespaces can be created",
            "sysctl -w user.max_user_namespaces=15000 (persist in /etc/sysctl.d/)",
        );
    }
    if !root && s.unprivileged_userns_clone.as_deref() == Some("0") {
        return Check::fail(
            NAME,
            "kernel.unprivileged_userns_clone = 0: only root can create user namespaces",
            "sysctl -w kernel.unprivileged_userns_clone=1 (persist in /etc/sysctl.d/)",
        );
    }
    if !root && s.apparmor_restricts() {
        return Check::warn(
            NAME,
            "kernel.apparmor_restrict_unprivileged_userns = 1: user namespaces of unconfined \
             programs get no capabilities",
            APPARMOR_FIX,
        );
    }
    let mut detail = format!("user.max_user_namespaces = {}", max.unwrap_or("?"));
    if let Some(v) = &s.unprivileged_userns_clone {
        let _ = write!(detail, ", kernel.unprivileged_userns_clone = {v}");
    }
    if let Some(v) = &s.apparmor_restrict {
        let _ = write!(
            detail,
            ", kernel.apparmor_restrict_unprivileged_userns = {v}"
        );
    }
    Check::ok(NAME, detail)
}

/// How a forked probe failed: at which step, with which errno (0: the step's own check failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeError {
    /// Step name.
    pub step: &'static str,
    /// errno.
    pub errno: i32,
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.errno == 0 {
            write!(f, "{}", self.step)
        } else {
            write!(
                f,
                "{}: {}",
                self.step,
                std::io::Error::from_raw_os_error(self.errno)
            )
        }
    }
}

/// Whether a child could `unshare(CLONE_NEWUSER)`.
pub fn userns_create_check(r: Result<(), ProbeError>, s: &UsernsSysctls, root: bool) -> Check {
    const NAME: &str = "userns.create";
    match r {
        Ok(()) => Check::ok(NAME, "a child process created a user namespace"),
        Err(e) => {
            let fix = if !root && s.unprivileged_userns_clone.as_deref() == Some("0") {
                "sysctl -w kernel.unprivileged_userns_clone=1".to_string()
            } else if s.max_user_namespaces.as_deref() == Some("0") {
                "sysctl -w user.max_user_namespaces=15000".to_string()
            } else if e.errno == libc::EPERM {
                "user namespaces are refused (a seccomp filter of the container shadow runs in, \
                 or an LSM): run shadow on the host, or allow unshare(CLONE_NEWUSER)"
                    .to_string()
            } else if e.errno == libc::ENOSPC {
                "the user-namespace limit is reached: raise user.max_user_namespaces".to_string()
            } else {
                "enable user namespaces (CONFIG_USER_NS)".to_string()
            };
            Check::fail(NAME, format!("cannot create a user namespace ({e})"), fix)
        }
    }
}

/// Whether a child in a new user + mount namespace could mount an overlay with `userxattr` and
/// write and delete through it.
pub fn overlay_check(
    r: Option<Result<(), ProbeError>>,
    dir: &Path,
    s: &UsernsSysctls,
    root: bool,
) -> Check {
    const NAME: &str = "overlay.userns";
    match r {
        None => Check::fail(
            NAME,
            "not tried: no user namespace",
            "fix the user namespace checks first",
        ),
        Some(Ok(())) => Check::ok(
            NAME,
            format!(
                "overlay (userxattr) mounted in a user namespace on {}; a write and a delete \
                 landed in the upper layer",
                dir.display()
            ),
        ),
        Some(Err(e)) => {
            let fix = if !root && s.apparmor_restricts() && e.errno == libc::EPERM {
                APPARMOR_FIX.to_string()
            } else if e.step.starts_with("mount overlay") {
                format!(
                    "needs Linux ≥ 5.11 with overlayfs and a session store on a file system \
                     that supports user.* xattrs (not tmpfs before 6.6, not NFS); set \
                     SHADOW_STORE to a directory on ext4/xfs/btrfs (tried {})",
                    dir.display()
                )
            } else {
                "see the detail; the sandbox needs the same steps".to_string()
            };
            Check::fail(
                NAME,
                format!("overlay in a user namespace failed at {e}"),
                fix,
            )
        }
    }
}

/// Landlock ABI (`errno` of the probe when it is 0).
pub fn landlock_check(abi: i64, errno: i32) -> Check {
    const NAME: &str = "landlock";
    if abi >= 1 {
        return Check::ok(NAME, format!("ABI {abi}"));
    }
    let (detail, fix) = if errno == libc::EOPNOTSUPP {
        (
            "Landlock is built in but disabled",
            "add landlock to the kernel's lsm= boot parameter (e.g. lsm=landlock,lockdown,yama,apparmor,bpf)",
        )
    } else {
        (
            "Landlock is not available",
            "use Linux ≥ 5.13 built with CONFIG_SECURITY_LANDLOCK=y",
        )
    };
    Check::warn(
        NAME,
        format!("{detail}: sandboxes run without Landlock file-system rules"),
        fix,
    )
}

/// Whether Landlock denials reach the session log (see the shadow-kaudit crate). Only a warning:
/// the rules are enforced either way; what is missing is the record of each denial.
pub fn landlock_audit_check(r: Result<(), shadow_kaudit::Unavailable>) -> Check {
    const NAME: &str = "landlock.audit";
    match r {
        Ok(()) => Check::ok(
            NAME,
            "kernel audit is on: Landlock denials are recorded in session logs",
        ),
        Err(why) => {
            let fix = if why.0.contains("audit is off") {
                "`auditctl -e 1` (Debian package auditd), or run auditd; shadow does not switch machine-wide audit on itself"
            } else if why.0.contains("needs root") {
                "run shadow as root to record Landlock denials (they are enforced either way)"
            } else if why.0.contains("Landlock ABI") {
                "use Linux ≥ 6.15 (Landlock ABI 7 reports denials)"
            } else {
                "check that the kernel is built with CONFIG_AUDIT=y"
            };
            Check::warn(NAME, format!("Landlock denials are {why}"), fix)
        }
    }
}

/// Seccomp filters: the `Seccomp:` field of `/proc/self/status` and `prctl(PR_GET_SECCOMP)`
/// (`Err(errno)`).
pub fn seccomp_check(status_field: Option<&str>, prctl: Result<i32, i32>) -> Check {
    const NAME: &str = "seccomp";
    match (status_field, prctl) {
        (Some(_), Ok(mode)) => {
            let d = match mode {
                0 => "available (this process is not filtered)".to_string(),
                2 => "available (this process already runs under a filter, e.g. in a container)"
                    .to_string(),
                m => format!("available (mode {m})"),
            };
            Check::ok(NAME, d)
        }
        (_, Err(e)) => Check::fail(
            NAME,
            format!(
                "prctl(PR_GET_SECCOMP) failed: {}",
                std::io::Error::from_raw_os_error(e)
            ),
            "use a kernel built with CONFIG_SECCOMP and CONFIG_SECCOMP_FILTER",
        ),
        (None, Ok(_)) => Check::fail(
            NAME,
            "/proc/self/status has no Seccomp field",
            "use a kernel built with CONFIG_SECCOMP and CONFIG_SECCOMP_FILTER",
        ),
    }
}

/// Seccomp user notification (`SECCOMP_GET_NOTIF_SIZES`; Linux ≥ 5.0).
pub fn seccomp_notify_check(r: Result<(u16, u16, u16), i32>) -> Check {
    const NAME: &str = "seccomp.notify";
    match r {
        Ok((n, resp, data)) => Check::ok(
            NAME,
            format!("user notification available (notif {n} B, resp {resp} B, data {data} B)"),
        ),
        Err(e) => Check::warn(
            NAME,
            format!(
                "SECCOMP_GET_NOTIF_SIZES failed: {}",
                std::io::Error::from_raw_os_error(e)
            ),
            "use Linux ≥ 5.0 (seccomp user notification)",
        ),
    }
}

/// Layout of `/sys/fs/cgroup`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupLayout {
    /// Unified (v2 only).
    V2,
    /// v1 controllers plus a v2 `unified` mount.
    Hybrid,
    /// v1 only.
    V1,
    /// Nothing recognisable mounted.
    Missing,
}

impl CgroupLayout {
    fn describe(self) -> &'static str {
        match self {
            CgroupLayout::V2 => "cgroup v2 (unified)",
            CgroupLayout::Hybrid => "hybrid (cgroup v1 controllers + v2 at /sys/fs/cgroup/unified)",
            CgroupLayout::V1 => "cgroup v1",
            CgroupLayout::Missing => "no cgroup file system at /sys/fs/cgroup",
        }
    }
}

/// Cgroups: without them `--memory/--pids/--cpus` fall back to rlimits (a warning, not a
/// failure).
pub fn cgroup_check(layout: CgroupLayout, access: &CgroupAccess, root: bool) -> Check {
    const NAME: &str = "cgroups";
    if layout == CgroupLayout::Missing {
        return Check::warn(
            NAME,
            "no cgroup file system at /sys/fs/cgroup: limits fall back to rlimits",
            "mount cgroup2 on /sys/fs/cgroup",
        );
    }
    match access {
        CgroupAccess::Usable if root => Check::ok(
            NAME,
            format!("{}; root: limits are cgroup limits", layout.describe()),
        ),
        CgroupAccess::Usable => Check::ok(
            NAME,
            format!(
                "{}; a delegated cgroup with memory and pids controllers",
                layout.describe()
            ),
        ),
        CgroupAccess::Unavailable(why) => {
            let fix = if layout == CgroupLayout::V2 {
                "delegate a cgroup to the user: run under systemd --user (`systemd-run --user \
                 --scope -p Delegate=yes shadow run …`), or enable Delegate=memory pids cpu in \
                 user@.service"
            } else {
                "boot with cgroup v2 only (systemd.unified_cgroup_hierarchy=1) and a delegated \
                 user cgroup, or run shadow as root"
            };
            Check::warn(
                NAME,
                format!(
                    "{}; not usable rootless ({why}): memory/pids limits fall back to rlimits, \
                     no CPU limit",
                    layout.describe()
                ),
                fix,
            )
        }
    }
}

/// Whether any cgroup hierarchy is mounted with `favordynmods`, from `/proc/self/mountinfo`.
/// The flag belongs to the kernel's one `cgroup_threadgroup_rwsem`, so one such mount (v1 or
/// v2) is enough for every migration.
pub fn favordynmods_in(mountinfo: &str) -> bool {
    mountinfo.lines().any(|l| {
        // "... - FSTYPE SOURCE SUPER_OPTIONS"
        let Some((_, tail)) = l.split_once(" - ") else {
            return false;
        };
        let mut f = tail.split_whitespace();
        let fstype = f.next().unwrap_or_default();
        let opts = f.nth(1).unwrap_or_default();
        (fstype == "cgroup" || fstype == "cgroup2") && opts.split(',').any(|o| o == "favordynmods")
    })
}

/// Cgroup migration latency: putting each sandbox's init into its cgroup takes the kernel's
/// cgroup threadgroup lock for writing, which waits for an RCU grace period unless a hierarchy
/// is mounted with `favordynmods` (measured here: 5–17 ms per move without, 0.4 ms with; runc
/// and crun pay it too). Speed only, never a failure.
pub fn cgroup_migration_check(cgroups_used: bool, mountinfo: &str) -> Check {
    const NAME: &str = "cgroups.migration";
    if !cgroups_used {
        return Check::ok(NAME, "no cgroups used here: nothing to move");
    }
    if favordynmods_in(mountinfo) {
        return Check::ok(
            NAME,
            "favordynmods is set: moving a sandbox into its cgroup does not wait",
        );
    }
    Check::warn(
        NAME,
        "each sandbox start waits for an RCU grace period to move its init into its cgroup \
         (5-17 ms measured on a 2-vCPU VM); optional speed-up",
        "mount -o remount,favordynmods /sys/fs/cgroup (v2) or /sys/fs/cgroup/unified (hybrid); \
         it makes forks and exits slightly dearer, host-wide",
    )
}

/// What the runtime probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeProbe {
    /// libcontainer version built in.
    pub libcontainer: String,
    /// Whether this process already runs from a sealed memfd.
    pub sealed: bool,
    /// Whether a sealed, executable memfd copy of the binary could be made and run (`Err`:
    /// why not).
    pub seal_works: Result<(), String>,
    /// `vm.memfd_noexec`, if present.
    pub memfd_noexec: Option<String>,
    /// `SHADOW_RUNTIME_NO_SEAL` is set.
    pub seal_disabled: bool,
}

/// The runtime: its version, and whether `shadow run` can re-execute from a sealed copy of
/// itself (CVE-2019-5736 protection; without it `shadow run` refuses to start).
pub fn runtime_check(p: &RuntimeProbe) -> Check {
    const NAME: &str = "runtime";
    let base = format!("libcontainer {}", p.libcontainer);
    match &p.seal_works {
        Ok(()) => Check::ok(
            NAME,
            format!(
                "{base}; the binary can seal itself (sealed executable memfd{})",
                if p.sealed { ", running sealed" } else { "" }
            ),
        ),
        Err(e) => {
            let fix = if p.memfd_noexec.as_deref() == Some("2") {
                "vm.memfd_noexec = 2 forbids executable memfds: sysctl -w vm.memfd_noexec=0 (or 1)"
            } else {
                "shadow run re-executes from a sealed memfd copy of itself; allow memfd_create \
                 and executing memfds (or, unsafely, set SHADOW_RUNTIME_NO_SEAL=1)"
            };
            if p.seal_disabled {
                Check::warn(
                    NAME,
                    format!("{base}; cannot seal the binary ({e}); SHADOW_RUNTIME_NO_SEAL is set"),
                    fix,
                )
            } else {
                Check::fail(NAME, format!("{base}; cannot seal the binary ({e})"), fix)
            }
        }
    }
}

/// The session store: writable, with free space (`avail` bytes).
pub fn store_check(root: &Path, writable: Result<(), String>, avail: Option<u64>) -> Check {
    const NAME: &str = "store";
    const GIB: u64 = 1 << 30;
    if let Err(e) = writable {
        return Check::fail(
            NAME,
            format!("{} is not writable: {e}", root.display()),
            "make it writable by this user, or set SHADOW_STORE to a writable directory",
        );
    }
    match avail {
        Some(a) if a < 64 << 20 => Check::fail(
            NAME,
            format!("{}: only {} free", root.display(), human(a)),
            "free disk space, or set SHADOW_STORE to a directory on a larger file system",
        ),
        Some(a) if a < GIB => Check::warn(
            NAME,
            format!(
                "{}: {} free (sessions store every file an agent writes)",
                root.display(),
                human(a)
            ),
            "free disk space, or set SHADOW_STORE to a directory on a larger file system",
        ),
        Some(a) => Check::ok(
            NAME,
            format!("{}: writable, {} free", root.display(), human(a)),
        ),
        None => Check::ok(NAME, format!("{}: writable", root.display())),
    }
}

/// `1.5 GiB`-style sizes.
pub fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

// ---------------------------------------------------------------------------------------------
// Probes
// ---------------------------------------------------------------------------------------------

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Run `f` in a forked child and report its result through a pipe. `f` runs after `fork()` in
/// a possibly multi-threaded process: it must only make raw system calls on data prepared
/// before (no allocation, no locks).
fn in_child(
    f: impl FnOnce() -> Result<(), ProbeError>,
    steps: &[&'static str],
) -> Result<(), ProbeError> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two-int array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(ProbeError {
            step: "pipe",
            errno: errno(),
        });
    }
    let (rd, wr) = (fds[0], fds[1]);
    // SAFETY: the child only runs `f` (raw syscalls, per this function's contract), write and
    // _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let e = errno();
        // SAFETY: closing fds we own.
        unsafe {
            libc::close(rd);
            libc::close(wr);
        }
        return Err(ProbeError {
            step: "fork",
            errno: e,
        });
    }
    if pid == 0 {
        let code = match f() {
            Ok(()) => 0,
            Err(e) => {
                let idx = steps.iter().position(|s| *s == e.step).unwrap_or(255) as u8;
                let mut buf = [0u8; 5];
                buf[0] = idx;
                buf[1..].copy_from_slice(&e.errno.to_ne_bytes());
                // SAFETY: write of a stack buffer to our pipe end.
                unsafe { libc::write(wr, buf.as_ptr().cast(), buf.len()) };
                1
            }
        };
        // SAFETY: leave the child without running any destructor or atexit handler.
        unsafe { libc::_exit(code) };
    }
    // SAFETY: our copy of the write end.
    unsafe { libc::close(wr) };
    let mut buf = [0u8; 5];
    let mut got = 0usize;
    while got < buf.len() {
        // SAFETY: read into the unfilled part of a stack buffer.
        let n = unsafe { libc::read(rd, buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            break;
        }
        got += n as usize;
    }
    // SAFETY: our read end.
    unsafe { libc::close(rd) };
    let mut status = 0;
    // SAFETY: reap our child.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 && errno() == libc::EINTR {}
    if got == buf.len() {
        let step = steps.get(buf[0] as usize).copied().unwrap_or("child");
        let errno = i32::from_ne_bytes([buf[1], buf[2], buf[3], buf[4]]);
        return Err(ProbeError { step, errno });
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else {
        Err(ProbeError {
            step: "child died",
            errno: 0,
        })
    }
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("no NUL in path")
}

/// Raw write of a whole buffer to a path (in a forked child).
fn write_file(path: &CString, data: &[u8]) -> Result<(), i32> {
    // SAFETY: open/write/close on a NUL-terminated path and a buffer we own.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(errno());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let e = errno();
        libc::close(fd);
        if n != data.len() as isize {
            return Err(if e == 0 { libc::EIO } else { e });
        }
    }
    Ok(())
}

fn probe_userns() -> Result<(), ProbeError> {
    in_child(
        || {
            // SAFETY: unshare in the forked child.
            if unsafe { libc::unshare(libc::CLONE_NEWUSER) } != 0 {
                return Err(ProbeError {
                    step: "unshare(CLONE_NEWUSER)",
                    errno: errno(),
                });
            }
            Ok(())
        },
        &["unshare(CLONE_NEWUSER)"],
    )
}

const OVERLAY_STEPS: &[&str] = &[
    "unshare(CLONE_NEWUSER|CLONE_NEWNS)",
    "write /proc/self/setgroups",
    "write /proc/self/uid_map",
    "write /proc/self/gid_map",
    "make / private",
    "mount overlay (userxattr)",
    "create a file through the overlay",
    "delete a lower file through the overlay",
];

/// Fork a child that enters a new user + mount namespace (mapping itself to root), mounts an
/// overlay with `userxattr` on dirs under `base`, creates a file and deletes a lower file
/// through it; then check that both landed in the upper dir and the lower is untouched.
fn probe_overlay(base: &Path, user: &UserInfo) -> Result<(), ProbeError> {
    let step = |s: &'static str| ProbeError { step: s, errno: 0 };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = base.join(format!(".doctor-{}-{nanos:x}", std::process::id()));
    let (lower, upper, work, merged) = (
        dir.join("lower"),
        dir.join("upper"),
        dir.join("work"),
        dir.join("merged"),
    );
    let setup = || -> std::io::Result<()> {
        for d in [&lower, &upper, &work, &merged] {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(lower.join("old"), "lower\n")
    };
    if let Err(e) = setup() {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(ProbeError {
            step: "create probe directories",
            errno: e.raw_os_error().unwrap_or(0),
        });
    }
    let opts = CString::new(format!(
        "lowerdir={},upperdir={},workdir={},userxattr",
        lower.display(),
        upper.display(),
        work.display()
    ))
    .expect("no NUL");
    let uid_map = format!("0 {} 1\n", user.uid);
    let gid_map = format!("0 {} 1\n", user.gid);
    let (c_merged, c_new, c_old) = (
        cstr(&merged),
        cstr(&merged.join("new")),
        cstr(&merged.join("old")),
    );
    let (setgroups, uidp, gidp) = (
        CString::new("/proc/self/setgroups").expect("no NUL"),
        CString::new("/proc/self/uid_map").expect("no NUL"),
        CString::new("/proc/self/gid_map").expect("no NUL"),
    );
    let (overlay, root) = (
        CString::new("overlay").expect("no NUL"),
        CString::new("/").expect("no NUL"),
    );
    let child = || -> Result<(), ProbeError> {
        let fail = |i: usize, e: i32| ProbeError {
            step: OVERLAY_STEPS[i],
            errno: e,
        };
        // SAFETY: (whole block) raw syscalls in the forked child on CStrings prepared above.
        unsafe {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                return Err(fail(0, errno()));
            }
            match write_file(&setgroups, b"deny") {
                Err(e) if e != libc::ENOENT => return Err(fail(1, e)),
                _ => {}
            }
            write_file(&uidp, uid_map.as_bytes()).map_err(|e| fail(2, e))?;
            write_file(&gidp, gid_map.as_bytes()).map_err(|e| fail(3, e))?;
            if libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err(fail(4, errno()));
            }
            if libc::mount(
                overlay.as_ptr(),
                c_merged.as_ptr(),
                overlay.as_ptr(),
                0,
                opts.as_ptr().cast(),
            ) != 0
            {
                return Err(fail(5, errno()));
            }
            let fd = libc::open(
                c_new.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_EXCL | libc::O_CLOEXEC,
                0o644,
            );
            if fd < 0 {
                return Err(fail(6, errno()));
            }
            let n = libc::write(fd, b"shadow\n".as_ptr().cast(), 7);
            let e = errno();
            libc::close(fd);
            if n != 7 {
                return Err(fail(6, e));
            }
            if libc::unlink(c_old.as_ptr()) != 0 {
                return Err(fail(7, errno()));
            }
            libc::umount2(c_merged.as_ptr(), libc::MNT_DETACH);
        }
        Ok(())
    };
    let r = in_child(child, OVERLAY_STEPS).and_then(|()| {
        if std::fs::read(upper.join("new")).ok().as_deref() != Some(b"shadow\n") {
            return Err(step(
                "the file written through the overlay is not in the upper dir",
            ));
        }
        if lower.join("new").exists() || !lower.join("old").exists() {
            return Err(step("the overlay wrote to the lower dir"));
        }
        let wh = std::fs::symlink_metadata(upper.join("old"));
        let is_whiteout = wh.as_ref().is_ok_and(|m| {
            (m.file_type().is_char_device() && m.rdev() == 0) || (m.is_file() && m.len() == 0)
        });
        if !is_whiteout {
            return Err(step("the delete left no whiteout in the upper dir"));
        }
        Ok(())
    });
    // overlayfs leaves work/work with mode 000.
    if let Ok(rd) = std::fs::read_dir(&work) {
        for e in rd.flatten() {
            let _ = std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o700));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn probe_landlock() -> (i64, i32) {
    let abi = shadow_runtime_core::spec_load::landlock_abi();
    if abi >= 1 {
        return (abi, 0);
    }
    // SAFETY: version query, as in landlock_abi, to learn the errno.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1 as libc::c_uint,
        )
    };
    (abi, if rc < 0 { errno() } else { 0 })
}

fn probe_seccomp() -> (Option<String>, Result<i32, i32>) {
    let field = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Seccomp:").map(|v| v.trim().to_string()))
        });
    // SAFETY: PR_GET_SECCOMP takes no pointer arguments.
    let rc = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    (field, if rc < 0 { Err(errno()) } else { Ok(rc) })
}

fn probe_seccomp_notify() -> Result<(u16, u16, u16), i32> {
    const SECCOMP_GET_NOTIF_SIZES: libc::c_uint = 3;
    let mut sizes = [0u16; 3];
    // SAFETY: SECCOMP_GET_NOTIF_SIZES fills a struct seccomp_notif_sizes (three u16) we own.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_NOTIF_SIZES,
            0 as libc::c_uint,
            sizes.as_mut_ptr(),
        )
    };
    if rc < 0 {
        Err(errno())
    } else {
        Ok((sizes[0], sizes[1], sizes[2]))
    }
}

fn fs_type(path: &str) -> Option<i64> {
    let c = CString::new(path).ok()?;
    // SAFETY: statfs fills a struct we own.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: NUL-terminated path, valid out pointer.
    (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0).then_some(st.f_type as i64)
}

fn probe_cgroup_layout() -> CgroupLayout {
    const CGROUP2: i64 = 0x6367_7270;
    const TMPFS: i64 = 0x0102_1994;
    const CGROUP1: i64 = 0x0027_e0eb;
    match fs_type("/sys/fs/cgroup") {
        Some(CGROUP2) => CgroupLayout::V2,
        Some(TMPFS) | Some(CGROUP1) => {
            if fs_type("/sys/fs/cgroup/unified") == Some(CGROUP2) {
                CgroupLayout::Hybrid
            } else {
                CgroupLayout::V1
            }
        }
        _ => CgroupLayout::Missing,
    }
}

/// Copy our own executable into a sealed memfd and run `--version` from it: what
/// `shadow_runtime_core::seal::ensure_sealed` does before every `shadow run`.
fn probe_seal() -> Result<(), String> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    const MFD_EXEC: libc::c_uint = 0x0010;
    let name = CString::new("shadow-doctor").expect("no NUL");
    // Not CLOEXEC: the child that runs it inherits it.
    // SAFETY: memfd_create with a NUL-terminated name.
    let mut fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_ALLOW_SEALING | MFD_EXEC) };
    if fd < 0 && errno() == libc::EINVAL {
        // SAFETY: as above, for kernels before 6.3 that do not know MFD_EXEC.
        fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_ALLOW_SEALING) };
    }
    if fd < 0 {
        return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: a fresh fd we own.
    let memfd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut exe =
        std::fs::File::open("/proc/self/exe").map_err(|e| format!("/proc/self/exe: {e}"))?;
    let mut dst = std::fs::File::from(memfd.try_clone().map_err(|e| e.to_string())?);
    std::io::copy(&mut exe, &mut dst).map_err(|e| format!("copy into the memfd: {e}"))?;
    drop(dst);
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: fcntl on our memfd.
    if unsafe { libc::fcntl(memfd.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
        return Err(format!("F_ADD_SEALS: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fcntl on our memfd.
    let got = unsafe { libc::fcntl(memfd.as_raw_fd(), libc::F_GET_SEALS) };
    if got < 0 || got & seals != seals {
        return Err("the seals did not hold".into());
    }
    let out = std::process::Command::new(format!("/proc/self/fd/{}", memfd.as_raw_fd()))
        .arg("--version")
        .env("SHADOW_RUNTIME_NO_SEAL", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot execute the sealed copy: {e}"))?;
    if !out.status.success() {
        return Err(format!("the sealed copy exited with {}", out.status));
    }
    Ok(())
}

fn probe_store(user: &UserInfo) -> (PathBuf, Result<(), String>, Option<u64>) {
    let root = shadow_sandbox::session::resolve_store_root(
        std::env::var_os("SHADOW_STORE"),
        std::env::var_os("XDG_DATA_HOME"),
        user,
    );
    let writable = Store::open(&root).map_err(|e| e.to_string()).and_then(|s| {
        let p = s
            .root()
            .join(format!(".doctor-write-{}", std::process::id()));
        std::fs::write(&p, b"x").map_err(|e| e.to_string())?;
        std::fs::remove_file(&p).map_err(|e| e.to_string())
    });
    let avail = CString::new(root.as_os_str().as_bytes())
        .ok()
        .and_then(|c| {
            // SAFETY: statvfs fills a struct we own.
            let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
            // SAFETY: NUL-terminated path, valid out pointer.
            (unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0)
                .then(|| st.f_bavail as u64 * st.f_frsize as u64)
        });
    (root, writable, avail)
}

/// Run every check.
pub fn run_checks() -> Result<Vec<Check>, Failure> {
    let user = hostview::probe_user()?;
    let root = user.is_root();
    let mut checks = Vec::new();

    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    checks.push(kernel_check(&release));

    let sysctls = UsernsSysctls::read();
    checks.push(userns_sysctl_check(&sysctls, root));
    let userns = probe_userns();
    let userns_ok = userns.is_ok();
    checks.push(userns_create_check(userns, &sysctls, root));

    // Probe the overlay where session layers live: the store decides the file system.
    let (store_root, store_writable, avail) = probe_store(&user);
    let overlay_base = if store_writable.is_ok() {
        store_root.clone()
    } else {
        std::env::temp_dir()
    };
    let overlay = userns_ok.then(|| probe_overlay(&overlay_base, &user));
    checks.push(overlay_check(overlay, &overlay_base, &sysctls, root));

    let (abi, ll_errno) = probe_landlock();
    checks.push(landlock_check(abi, ll_errno));
    checks.push(landlock_audit_check(shadow_kaudit::check(abi)));
    let (field, prctl) = probe_seccomp();
    checks.push(seccomp_check(field.as_deref(), prctl));
    checks.push(seccomp_notify_check(probe_seccomp_notify()));
    let cgroup_access = hostview::probe_cgroups(&user);
    checks.push(cgroup_check(probe_cgroup_layout(), &cgroup_access, root));
    checks.push(cgroup_migration_check(
        cgroup_access.is_usable(),
        &std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default(),
    ));
    checks.push(runtime_check(&RuntimeProbe {
        libcontainer: shadow_runtime_core::LIBCONTAINER_VERSION.to_string(),
        sealed: shadow_runtime_core::seal::is_sealed().unwrap_or(false),
        seal_works: probe_seal(),
        memfd_noexec: std::fs::read_to_string("/proc/sys/vm/memfd_noexec")
            .ok()
            .map(|s| s.trim().to_string()),
        seal_disabled: std::env::var_os("SHADOW_RUNTIME_NO_SEAL").is_some(),
    }));
    checks.push(store_check(&store_root, store_writable, avail));
    Ok(checks)
}

/// Run the checks.
pub fn doctor(o: &DoctorOptions) -> Outcome {
    let checks = run_checks()?;
    if o.json {
        println!("{}", render_json(&checks));
    } else {
        let color = std::io::stdout().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        print!("{}", render_text(&checks, color));
    }
    Ok(if all_ok(&checks) { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions() {
        assert_eq!(parse_kernel("6.18.44-fc-v1045"), Some((6, 18)));
        assert_eq!(parse_kernel("5.4.0-150-generic"), Some((5, 4)));
        assert_eq!(parse_kernel("junk"), None);
        assert_eq!(kernel_check("6.18.44-fc-v1045").status, Status::Ok);
        assert_eq!(kernel_check("5.13.0").status, Status::Ok);
        assert_eq!(kernel_check("5.12.9").status, Status::Warn);
        assert_eq!(kernel_check("5.11.0").status, Status::Warn);
        assert_eq!(kernel_check("5.10.200").status, Status::Fail);
        assert_eq!(kernel_check("4.19.0").status, Status::Fail);
        assert!(kernel_check("4.19.0").fix.unwrap().contains("5.13"));
    }

    #[test]
    fn userns_sysctls() {
        let s = |clone: Option<&str>, max: Option<&str>, aa: Option<&str>| UsernsSysctls {
            unprivileged_userns_clone: clone.map(Into::into),
            max_user_namespaces: max.map(Into::into),
            apparmor_restrict: aa.map(Into::into),
        };
        assert_eq!(
            userns_sysctl_check(&s(None, Some("96363"), None), false).status,
            Status::Ok
        );
        let c = userns_sysctl_check(&s(None, Some("0"), None), true);
        assert_eq!(c.status, Status::Fail);
        assert!(c.fix.unwrap().contains("user.max_user_namespaces"));
        let c = userns_sysctl_check(&s(Some("0"), Some("10"), None), false);
        assert_eq!(c.status, Status::Fail);
        assert!(c.fix.unwrap().contains("unprivileged_userns_clone=1"));
        assert_eq!(
            userns_sysctl_check(&s(Some("0"), Some("10"), None), true).status,
            Status::Ok,
            "root is not affected"
        );
        let c = userns_sysctl_check(&s(None, Some("10"), Some("1")), false);
        assert_eq!(c.status, Status::Warn);
        assert!(c
            .fix
            .unwrap()
            .contains("apparmor_restrict_unprivileged_userns=0"));
        assert_eq!(
            userns_sysctl_check(&s(None, Some("10"), Some("1")), true).status,
            Status::Ok
        );
    }

    #[test]
    fn probe_outcomes() {
        let s = UsernsSysctls {
            apparmor_restrict: Some("1".into()),
            ..Default::default()
        };
        let e = ProbeError {
            step: "unshare(CLONE_NEWUSER)",
            errno: libc::EPERM,
        };
        let c = userns_create_check(Err(e), &UsernsSysctls::default(), false);
        assert_eq!(c.status, Status::Fail);
        assert!(
            c.detail
                .contains("unshare(CLONE_NEWUSER): Operation not permitted"),
            "{}",
            c.detail
        );
        assert_eq!(userns_create_check(Ok(()), &s, false).status, Status::Ok);
        let d = Path::new("/store");
        assert_eq!(overlay_check(None, d, &s, false).status, Status::Fail);
        assert_eq!(overlay_check(Some(Ok(())), d, &s, false).status, Status::Ok);
        let mount = ProbeError {
            step: "mount overlay (userxattr)",
            errno: libc::EPERM,
        };
        let c = overlay_check(Some(Err(mount)), d, &s, false);
        assert!(c.fix.unwrap().contains("apparmor"));
        let c = overlay_check(Some(Err(mount)), d, &UsernsSysctls::default(), false);
        assert!(c.fix.unwrap().contains("SHADOW_STORE"));
    }

    #[test]
    fn security_features() {
        assert_eq!(landlock_check(7, 0).detail, "ABI 7");
        let c = landlock_check(0, libc::EOPNOTSUPP);
        assert_eq!(c.status, Status::Warn);
        assert!(c.fix.unwrap().contains("lsm="));
        assert!(landlock_check(0, libc::ENOSYS)
            .fix
            .unwrap()
            .contains("5.13"));
        assert_eq!(landlock_audit_check(Ok(())).status, Status::Ok);
        let off = landlock_audit_check(Err(shadow_kaudit::Unavailable(
            "not recorded: kernel audit is off (audit_enabled=0; …)".into(),
        )));
        assert_eq!(off.status, Status::Warn);
        assert_eq!(
            off.detail,
            "Landlock denials are not recorded: kernel audit is off (audit_enabled=0; …)"
        );
        assert!(off.fix.unwrap().contains("auditctl -e 1"));
        let old = landlock_audit_check(shadow_kaudit::check(6));
        assert_eq!(
            old.detail,
            "Landlock denials are not reported by this kernel (Landlock ABI 6 < 7)"
        );
        assert!(old.fix.unwrap().contains("6.15"));
        assert_eq!(seccomp_check(Some("0"), Ok(0)).status, Status::Ok);
        assert!(seccomp_check(Some("2"), Ok(2)).detail.contains("already"));
        assert_eq!(seccomp_check(None, Err(libc::EINVAL)).status, Status::Fail);
        assert_eq!(seccomp_check(None, Ok(0)).status, Status::Fail);
        assert_eq!(seccomp_notify_check(Ok((80, 24, 64))).status, Status::Ok);
        assert_eq!(seccomp_notify_check(Err(libc::EINVAL)).status, Status::Warn);
    }

    #[test]
    fn cgroups() {
        let u = CgroupAccess::Usable;
        let no = CgroupAccess::Unavailable("not delegated".into());
        assert_eq!(
            cgroup_check(CgroupLayout::Hybrid, &u, true).status,
            Status::Ok
        );
        let c = cgroup_check(CgroupLayout::Hybrid, &no, false);
        assert_eq!(c.status, Status::Warn);
        assert!(c.detail.starts_with("hybrid"));
        assert!(c.fix.unwrap().contains("unified_cgroup_hierarchy"));
        assert!(cgroup_check(CgroupLayout::V2, &no, false)
            .fix
            .unwrap()
            .contains("Delegate"));
        assert_eq!(cgroup_check(CgroupLayout::V2, &u, false).status, Status::Ok);
        assert_eq!(
            cgroup_check(CgroupLayout::Missing, &u, true).status,
            Status::Warn
        );
    }

    #[test]
    fn cgroup_migration() {
        let plain = "35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n\
                     36 25 0:31 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n\
                     37 25 0:32 / /mnt rw - ext4 /dev/sda1 rw,favordynmods\n";
        assert!(!favordynmods_in(plain));
        let c = cgroup_migration_check(true, plain);
        assert_eq!(c.status, Status::Warn);
        assert!(c.fix.unwrap().contains("favordynmods"));
        let fast = "35 25 0:30 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,favordynmods\n";
        assert!(favordynmods_in(fast));
        assert_eq!(cgroup_migration_check(true, fast).status, Status::Ok);
        assert_eq!(cgroup_migration_check(false, plain).status, Status::Ok);
    }

    #[test]
    fn runtime_and_store() {
        let mut p = RuntimeProbe {
            libcontainer: "0.7.0".into(),
            sealed: false,
            seal_works: Ok(()),
            memfd_noexec: Some("0".into()),
            seal_disabled: false,
        };
        let c = runtime_check(&p);
        assert_eq!(c.status, Status::Ok);
        assert!(c.detail.starts_with("libcontainer 0.7.0"));
        p.seal_works = Err("memfd_create: EPERM".into());
        p.memfd_noexec = Some("2".into());
        let c = runtime_check(&p);
        assert_eq!(c.status, Status::Fail);
        assert!(c.fix.unwrap().contains("vm.memfd_noexec"));
        p.seal_disabled = true;
        assert_eq!(runtime_check(&p).status, Status::Warn);

        let r = Path::new("/s");
        assert_eq!(
            store_check(r, Ok(()), Some(10 << 30)).detail,
            "/s: writable, 10.0 GiB free"
        );
        assert_eq!(store_check(r, Ok(()), Some(100 << 20)).status, Status::Warn);
        assert_eq!(store_check(r, Ok(()), Some(1 << 20)).status, Status::Fail);
        assert_eq!(
            store_check(r, Err("EACCES".into()), None).status,
            Status::Fail
        );
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536), "1.5 KiB");
    }

    #[test]
    fn formatting() {
        let checks = vec![
            Check::ok("kernel", "Linux 6.18"),
            Check::warn("cgroups", "hybrid", "use v2"),
        ];
        assert_eq!(
            render_text(&checks, false),
            "ok    kernel   Linux 6.18\n\
             warn  cgroups  hybrid\n\
             \x20              fix: use v2\n\
             shadow can run here (1 warning(s))\n"
        );
        let v: serde_json::Value = serde_json::from_str(&render_json(&checks)).unwrap();
        assert_eq!(v["ok"], true);
        assert_eq!(v["checks"][0]["name"], "kernel");
        assert_eq!(v["checks"][0]["status"], "ok");
        assert_eq!(v["checks"][0]["fix"], serde_json::Value::Null);
        assert_eq!(v["checks"][1]["fix"], "use v2");
        let mut failing = checks.clone();
        failing.push(Check::fail("store", "read-only", "chmod"));
        assert!(!all_ok(&failing));
        let t = render_text(&failing, true);
        assert!(t.contains("\x1b[1;31mfail\x1b[m  store"), "{t}");
        assert!(
            t.ends_with("1 required check(s) failed: shadow cannot run sandboxes on this host\n")
        );
        let v: serde_json::Value = serde_json::from_str(&render_json(&failing)).unwrap();
        assert_eq!(v["ok"], false);
    }
}
