//! The pure OCI spec builder: [`SandboxInput`] in, [`Spec`] out, no I/O.
//!
//! The sandbox sees the host's own root filesystem read-only (no image), a
//! fresh `/proc`, `/dev`, `/tmp`, `/run` and `$HOME`, and the project as a
//! copy-on-write overlay whose writes land in the session store. Every choice
//! below names the threat it defends against.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

use oci_spec::runtime::{
    Linux, LinuxCapabilities, LinuxCpu, LinuxIdMapping, LinuxIdMappingBuilder, LinuxMemory,
    LinuxNamespace, LinuxNamespaceBuilder, LinuxNamespaceType, LinuxPids, LinuxResources,
    LinuxSeccomp, Mount, MountBuilder, PosixRlimit, PosixRlimitBuilder, PosixRlimitType, Process,
    Root, Spec, User,
};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::hostview::{EntryKind, HostLimits, HostView, UserInfo};

/// `ociVersion` of the produced spec.
pub const OCI_VERSION: &str = "1.2.0";

/// Hostname inside the sandbox. Threat: the real hostname leaks into logs and
/// telemetry the agent sends out; a fixed name also makes runs reproducible.
pub const HOSTNAME: &str = "shadow";

/// Annotation carrying the session id.
pub const SESSION_ANNOTATION: &str = "org.shadow.session";

/// Top-level host directories that are NOT bind-mounted.
///
/// * `proc`, `sys`, `dev`: replaced by fresh instances (the host's would
///   expose host processes, writable sysfs knobs and raw devices).
/// * `run` (and `/var/run`): fresh tmpfs. Threat: host daemon and session
///   sockets (`/run/docker.sock` = root on the host, `/run/user/*/bus`,
///   ssh-agent and gpg-agent sockets) would let the agent act as the user
///   outside the sandbox.
/// * `tmp`: fresh tmpfs. Threat: other programs' temp files, X11/tmux
///   sockets (`/tmp/.X11-unix`, `/tmp/tmux-*`) reachable from the sandbox.
/// * `home`, `root`: the invoking user's `$HOME` is a fresh tmpfs; other
///   users' homes are simply absent. Threat: credentials in home directories.
/// * `mnt`, `media`: removable/external media and ad-hoc mounts (backups,
///   other disks) have nothing to do with the project.
/// * `lost+found`: root-only fsck debris. `boot`: kernels and initrds.
pub const EXCLUDED_TOP_LEVEL: &[&str] = &[
    "proc",
    "sys",
    "dev",
    "run",
    "tmp",
    "home",
    "root",
    "mnt",
    "media",
    "lost+found",
    "boot",
];

/// Credential locations relative to the user's home. `$HOME` is a fresh
/// tmpfs so they are normally absent, but every one of them is also put into
/// `maskedPaths`, so a profile that re-exposes part of home (an extra
/// read-only path, or a project that *is* a home directory) still cannot read
/// them. `~/.cargo/credentials*` is spelled out because masks take no globs.
pub const HOME_CREDENTIAL_PATHS: &[&str] = &[
    ".ssh",
    ".aws",
    ".config/gcloud",
    ".azure",
    ".docker",
    ".kube",
    ".netrc",
    ".gnupg",
    ".git-credentials",
    ".config/gh",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".password-store",
    ".local/share/keyrings",
];

/// Host secrets under the read-only `/etc` bind, masked. Threat: when the
/// invoking user is root, the sandbox's uid 0 is host uid 0 and *owns* these
/// files, so dropping capabilities alone does not stop reading password
/// hashes, sudo policy or TLS private keys. (SSH host private keys come from
/// [`HostView::ssh_host_keys`].)
pub const ETC_SECRET_PATHS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/security/opasswd",
    "/etc/ssl/private",
];

/// Masked kernel interfaces, as runc's defaults: kernel memory (`kcore`),
/// keyrings, timer and scheduler internals that leak host activity, and
/// hardware interfaces.
pub const PROC_MASKED_PATHS: &[&str] = &[
    "/proc/acpi",
    "/proc/asound",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/sys/devices/virtual/powercap",
    "/sys/firmware",
];

/// Read-only kernel interfaces, as runc's defaults (`sysrq-trigger` could
/// reboot the host if ever writable, `/proc/sys` tunes the kernel).
pub const PROC_READONLY_PATHS: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// Soft = hard RLIMIT_NOFILE of the sandboxed process. Must stay below the
/// invoking process's hard limit (20000 on the dev machines): raising it
/// needs CAP_SYS_RESOURCE, which we do not have.
pub const NOFILE_LIMIT: u64 = 4096;

/// CFS period used for the cpu quota.
pub const CPU_PERIOD_US: u64 = 100_000;

const GIB: u64 = 1024 * 1024 * 1024;
const MIB: u64 = 1024 * 1024;

/// Network access of the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// A fresh network namespace with only loopback. Threat: exfiltration,
    /// and reaching services bound to the host's loopback (databases, dev
    /// servers, cloud metadata proxies).
    #[default]
    None,
    /// The host's network namespace (the agent needs its model API).
    Host,
}

/// Resource limits of the session.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ResourceLimits {
    /// Memory limit in bytes (swap limited to the same total, i.e. no swap).
    pub memory_bytes: Option<u64>,
    /// Maximum number of tasks (processes + threads).
    pub pids: Option<u64>,
    /// CPU share as a fraction of CPUs (1.5 = one and a half CPUs).
    pub cpus: Option<f64>,
}

impl ResourceLimits {
    /// Default pids limit. Threat: a fork bomb (or a runaway `make -j`) that
    /// would take down the developer's machine; 1024 tasks is plenty for
    /// compilers and test runners.
    pub const DEFAULT_PIDS: u64 = 1024;

    /// Defaults for a host with `total_ram` bytes: memory = min(4 GiB,
    /// RAM / 2), so a memory runaway is OOM-killed inside the sandbox before
    /// the host starts swapping; pids = [`Self::DEFAULT_PIDS`]; cpus
    /// unlimited.
    pub fn for_host(total_ram: u64) -> Self {
        ResourceLimits {
            memory_bytes: Some((4 * GIB).min(total_ram / 2)),
            pids: Some(Self::DEFAULT_PIDS),
            cpus: None,
        }
    }
}

impl Default for ResourceLimits {
    /// [`ResourceLimits::for_host`] of a host with unknown (ample) RAM: 4 GiB.
    fn default() -> Self {
        Self::for_host(u64::MAX)
    }
}

/// Sizes (bytes) of the fresh tmpfs mounts. Threat: filling RAM through
/// tmpfs, which memory cgroups may not charge to the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TmpfsSizes {
    /// `/tmp` (default 1 GiB).
    pub tmp: u64,
    /// `$HOME` (default 512 MiB).
    pub home: u64,
    /// `/run` and `/var/run` (default 64 MiB).
    pub run: u64,
    /// `/dev/shm` (default 64 MiB).
    pub dev_shm: u64,
}

impl Default for TmpfsSizes {
    fn default() -> Self {
        TmpfsSizes {
            tmp: GIB,
            home: 512 * MIB,
            run: 64 * MIB,
            dev_shm: 64 * MIB,
        }
    }
}

/// Everything the builder needs, as plain data.
#[derive(Debug, Clone)]
pub struct SandboxInput {
    /// Session id (safe charset, see [`crate::session::validate_id`]).
    pub session_id: String,
    /// argv of the sandboxed command.
    pub args: Vec<String>,
    /// Working directory inside the sandbox; `None`: the project dir.
    pub cwd: Option<PathBuf>,
    /// Absolute, canonical project directory (the overlay's lower layer).
    pub project_dir: PathBuf,
    /// Overlay upper dir (in the session store).
    pub upper_dir: PathBuf,
    /// Overlay work dir (in the session store, same filesystem as upper).
    pub work_dir: PathBuf,
    /// Per-session rootfs skeleton (see [`crate::skeleton::prepare_skeleton`]).
    pub rootfs_dir: PathBuf,
    /// Root of the session store. Always masked: threat: the agent reading
    /// or tampering with other sessions' captured changes.
    pub store_dir: PathBuf,
    /// Top-level layout of the host's `/`.
    pub host: HostView,
    /// Hard rlimits of the invoking process.
    pub host_limits: HostLimits,
    /// The invoking user (root-ness is `user.uid == 0`).
    pub user: UserInfo,
    /// Process environment, from [`crate::env::build_env`].
    pub env: Vec<String>,
    /// Allocate a pty.
    pub terminal: bool,
    /// Network access.
    pub network: NetworkMode,
    /// Resource limits.
    pub limits: ResourceLimits,
    /// Whether the runtime can enforce `linux.resources` with a cgroup
    /// (from [`crate::hostview::probe_cgroups`]). When `false`,
    /// `linux.resources` is omitted and RLIMIT_NPROC / RLIMIT_AS carry the
    /// limits instead.
    pub cgroups_usable: bool,
    /// Sizes of the fresh tmpfs mounts.
    pub tmpfs: TmpfsSizes,
    /// Extra host paths bind-mounted read-only at their own path.
    pub extra_ro: Vec<PathBuf>,
    /// Extra host paths bind-mounted read-write at their own path.
    pub extra_rw: Vec<PathBuf>,
    /// Extra paths hidden (masked) inside the sandbox.
    pub denied: Vec<PathBuf>,
    /// `linux.cgroupsPath` (absolute, e.g. `/shadow/<id>`).
    pub cgroups_path: Option<PathBuf>,
    /// Seccomp filter, passed through.
    pub seccomp: Option<LinuxSeccomp>,
    /// Extra annotations (`org.shadow.session` is always set to the id).
    pub annotations: BTreeMap<String, String>,
}

/// Absolute paths of [`HOME_CREDENTIAL_PATHS`] under `home`.
pub fn home_credential_paths(home: &Path) -> Vec<PathBuf> {
    HOME_CREDENTIAL_PATHS.iter().map(|p| home.join(p)).collect()
}

fn path_str(p: &Path) -> Result<&str> {
    p.to_str()
        .ok_or_else(|| Error::InvalidInput(format!("path {} is not UTF-8", p.display())))
}

/// Absolute, normalized (no `.`/`..`/`//`), UTF-8, NUL-free.
fn check_abs(what: &str, p: &Path) -> Result<()> {
    let s = path_str(p)?;
    let normal = p.is_absolute()
        && !s.contains('\0')
        && (s == "/" || !s.ends_with('/'))
        && !s.contains("//")
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if normal {
        Ok(())
    } else {
        Err(Error::InvalidInput(format!(
            "{what} {} must be an absolute normalized path",
            p.display()
        )))
    }
}

/// `a` is `b` or below it.
fn within(a: &Path, b: &Path) -> bool {
    a.starts_with(b)
}

fn overlaps(a: &Path, b: &Path) -> bool {
    within(a, b) || within(b, a)
}

fn validate(input: &SandboxInput) -> Result<()> {
    let bad = |m: String| Err(Error::InvalidInput(m));
    crate::session::validate_id(&input.session_id)?;
    if input.args.is_empty() {
        return bad("empty command".into());
    }
    let p = &input.project_dir;
    for (what, path) in [
        ("project", p),
        ("upper dir", &input.upper_dir),
        ("work dir", &input.work_dir),
        ("rootfs dir", &input.rootfs_dir),
        ("store dir", &input.store_dir),
        ("home", &input.user.home),
    ] {
        check_abs(what, path)?;
    }
    if let Some(cwd) = &input.cwd {
        check_abs("cwd", cwd)?;
    }
    if let Some(cg) = &input.cgroups_path {
        check_abs("cgroups path", cg)?;
    }
    for path in input.extra_ro.iter().chain(&input.extra_rw) {
        check_abs("extra path", path)?;
        // Threat: a profile exposing the store exposes every session's
        // captured changes (and lets a writable one tamper with them).
        if overlaps(path, &input.store_dir) {
            return bad(format!(
                "extra path {} overlaps the session store {}",
                path.display(),
                input.store_dir.display()
            ));
        }
    }
    for path in &input.denied {
        check_abs("denied path", path)?;
    }
    // The overlay options are `key=value` strings joined by ',' by some
    // runtimes, and lowerdir splits layers at ':'.
    for path in [p, &input.upper_dir, &input.work_dir] {
        if path_str(path)?.contains([',', ':', '\\']) {
            return bad(format!(
                "{} contains ',', ':' or '\\', which overlayfs options cannot carry",
                path.display()
            ));
        }
    }
    if p == Path::new("/") {
        return bad("the project cannot be /".into());
    }
    for special in ["/proc", "/sys", "/dev"] {
        if within(p, Path::new(special)) {
            return bad(format!("the project cannot be under {special}"));
        }
    }
    if overlaps(p, &input.store_dir) {
        return bad(format!(
            "project {} overlaps the session store {}",
            p.display(),
            input.store_dir.display()
        ));
    }
    if let Some(cred) = home_credential_paths(&input.user.home)
        .into_iter()
        .find(|c| within(p, c))
    {
        return bad(format!(
            "project {} is inside the protected credential path {}",
            p.display(),
            cred.display()
        ));
    }
    if let Some(c) = input.limits.cpus {
        if !(c.is_finite() && c > 0.0) {
            return bad(format!("cpus must be a positive number, not {c}"));
        }
    }
    Ok(())
}

fn strings(opts: &[&str]) -> Vec<String> {
    opts.iter().map(|s| s.to_string()).collect()
}

fn mount(dest: &Path, typ: &str, source: &Path, opts: Vec<String>) -> Result<Mount> {
    MountBuilder::default()
        .destination(dest)
        .typ(typ)
        .source(source)
        .options(opts)
        .build()
        .map_err(|e| Error::InvalidInput(format!("mount {}: {e}", dest.display())))
}

/// Read-only recursive bind of a host path at the same path. `rro` makes the
/// host's submounts below it read-only too (`ro` alone only affects the top
/// mount). Threat: writes to the host outside the project. `nosuid`/`nodev`:
/// setuid binaries and device nodes of the host are inert.
fn ro_bind(path: &Path) -> Result<Mount> {
    mount(
        path,
        "bind",
        path,
        strings(&["rbind", "ro", "rro", "nosuid", "nodev"]),
    )
}

fn tmpfs(dest: &Path, source: &str, opts: &[&str], size: u64) -> Result<Mount> {
    let mut o = strings(opts);
    o.push(format!("size={size}"));
    mount(dest, "tmpfs", Path::new(source), o)
}

fn build_mounts(input: &SandboxInput) -> Result<Vec<Mount>> {
    let mut mounts = Vec::new();

    // 1. The host's own top-level directories, read-only.
    for e in &input.host.entries {
        if e.kind == EntryKind::Dir && !EXCLUDED_TOP_LEVEL.contains(&e.name.as_str()) {
            mounts.push(ro_bind(&Path::new("/").join(&e.name))?);
        }
    }

    // 2. Fresh kernel filesystems. Threat: the host's /proc shows every host
    //    process (and their environ/cmdline secrets); the host's /dev gives
    //    raw disks.
    mounts.push(mount(
        Path::new("/proc"),
        "proc",
        Path::new("proc"),
        strings(&["nosuid", "noexec", "nodev"]),
    )?);
    mounts.push(tmpfs(
        Path::new("/dev"),
        "tmpfs",
        &["nosuid", "strictatime", "mode=755"],
        65536 * 1024,
    )?);
    // No `gid=5`: gid 5 (tty) is not mapped in our single-id user namespace
    // and the kernel would refuse the mount.
    mounts.push(mount(
        Path::new("/dev/pts"),
        "devpts",
        Path::new("devpts"),
        strings(&[
            "nosuid",
            "noexec",
            "newinstance",
            "ptmxmode=0666",
            "mode=0620",
        ]),
    )?);
    mounts.push(tmpfs(
        Path::new("/dev/shm"),
        "shm",
        &["nosuid", "noexec", "nodev", "mode=1777"],
        input.tmpfs.dev_shm,
    )?);
    mounts.push(mount(
        Path::new("/dev/mqueue"),
        "mqueue",
        Path::new("mqueue"),
        strings(&["nosuid", "noexec", "nodev"]),
    )?);
    // Devices: `linux.devices` stays unset; libcontainer then provides the
    // default set (null, zero, full, random, urandom, tty), bind-mounted
    // from the host because mknod is impossible in a user namespace.
    match input.network {
        // A fresh sysfs, read-only, shows only the sandbox's own net devices.
        NetworkMode::None => mounts.push(mount(
            Path::new("/sys"),
            "sysfs",
            Path::new("sysfs"),
            strings(&["nosuid", "noexec", "nodev", "ro"]),
        )?),
        // The kernel refuses a new sysfs in a user namespace that does not
        // own the network namespace: bind the host's, read-only.
        NetworkMode::Host => mounts.push(mount(
            Path::new("/sys"),
            "bind",
            Path::new("/sys"),
            strings(&["rbind", "ro", "rro", "nosuid", "noexec", "nodev"]),
        )?),
    }
    mounts.push(tmpfs(
        Path::new("/tmp"),
        "tmpfs",
        &["nosuid", "nodev", "mode=1777"],
        input.tmpfs.tmp,
    )?);
    mounts.push(tmpfs(
        Path::new("/run"),
        "tmpfs",
        &["nosuid", "nodev", "mode=755"],
        input.tmpfs.run,
    )?);
    if input.host.var_run == Some(EntryKind::Dir) {
        // A real /var/run would be visible through the /var bind.
        mounts.push(tmpfs(
            Path::new("/var/run"),
            "tmpfs",
            &["nosuid", "nodev", "mode=755"],
            input.tmpfs.run,
        )?);
    }

    // 3. User-level mounts, parents before children (mounts apply in
    //    order: the project overlay must come after a $HOME tmpfs that
    //    contains it, or the tmpfs would hide it). The sort is stable, so for
    //    equal depth home < extras < project.
    let mut user_level: Vec<Mount> = Vec::new();
    // Fresh $HOME. Threat: every credential in the real home. Owned by the
    // sandbox's uid 0 (which maps to the invoking user), so no uid=/gid=.
    user_level.push(tmpfs(
        &input.user.home,
        "tmpfs",
        &["nosuid", "nodev", "mode=700"],
        input.tmpfs.home,
    )?);
    for p in &input.extra_ro {
        user_level.push(ro_bind(p)?);
    }
    for p in &input.extra_rw {
        user_level.push(mount(
            p,
            "bind",
            p,
            strings(&["rbind", "rw", "nosuid", "nodev"]),
        )?);
    }
    // The project, copy-on-write. `userxattr` is always set: we always run in
    // a user namespace (root maps 0 -> 0 in one too), and there the kernel
    // cannot write `trusted.overlay.*` xattrs. Without `userxattr` the
    // mount still succeeds but degrades silently: no opaque directories,
    // no redirect_dir, and `rm -rf`/`mv` of a lower directory fails with EIO
    // (verified in tests/overlay_userxattr.rs). With it, overlay metadata is
    // stored as `user.overlay.*` xattrs in the upper dir.
    let p = &input.project_dir;
    user_level.push(mount(
        p,
        "overlay",
        Path::new("overlay"),
        vec![
            format!("lowerdir={}", path_str(p)?),
            format!("upperdir={}", path_str(&input.upper_dir)?),
            format!("workdir={}", path_str(&input.work_dir)?),
            "userxattr".to_string(),
        ],
    )?);
    user_level.sort_by_key(|m| m.destination().components().count());
    mounts.extend(user_level);
    Ok(mounts)
}

fn rlimit(typ: PosixRlimitType, value: u64) -> Result<PosixRlimit> {
    PosixRlimitBuilder::default()
        .typ(typ)
        .hard(value)
        .soft(value)
        .build()
        .map_err(|e| Error::InvalidInput(e.to_string()))
}

fn build_rlimits(input: &SandboxInput) -> Result<Vec<PosixRlimit>> {
    let hl = input.host_limits;
    let mut r = vec![
        // Threat: fd exhaustion. Clamped to our own hard limit, which the
        // runtime could not exceed anyway (no CAP_SYS_RESOURCE).
        rlimit(
            PosixRlimitType::RlimitNofile,
            NOFILE_LIMIT.min(hl.nofile_hard),
        )?,
        // Threat: core dumps of the agent contain its API keys and the
        // project's secrets, written into the project/upper dir.
        rlimit(PosixRlimitType::RlimitCore, 0)?,
    ];
    if !input.cgroups_usable {
        // Fallback without cgroups. Weaker: RLIMIT_NPROC counts all
        // processes of the (host) uid, not only the sandbox's, and does not
        // apply to host root at all; RLIMIT_AS is per process.
        if let Some(pids) = input.limits.pids {
            r.push(rlimit(
                PosixRlimitType::RlimitNproc,
                pids.min(hl.nproc_hard),
            )?);
        }
        if let Some(mem) = input.limits.memory_bytes {
            r.push(rlimit(PosixRlimitType::RlimitAs, mem)?);
        }
    }
    Ok(r)
}

fn build_process(input: &SandboxInput) -> Result<Process> {
    let mut process = Process::default();
    let mut user = User::default();
    // uid/gid 0 inside the user namespace, which is the invoking user outside.
    user.set_uid(0).set_gid(0);
    // Threat: privilege escalation through any capability. With all sets
    // empty the sandbox's root is powerless, even over its own namespaces.
    let none: HashSet<_> = HashSet::new();
    let mut caps = LinuxCapabilities::default();
    caps.set_bounding(Some(none.clone()))
        .set_effective(Some(none.clone()))
        .set_inheritable(Some(none.clone()))
        .set_permitted(Some(none.clone()))
        .set_ambient(Some(none));
    process
        .set_terminal(Some(input.terminal))
        .set_console_size(None)
        .set_user(user)
        .set_args(Some(input.args.clone()))
        .set_env(Some(input.env.clone()))
        .set_cwd(
            input
                .cwd
                .clone()
                .unwrap_or_else(|| input.project_dir.clone()),
        )
        .set_capabilities(Some(caps))
        .set_rlimits(Some(build_rlimits(input)?))
        // Threat: regaining privileges through setuid/file-capability binaries
        // of the (read-only) host filesystem.
        .set_no_new_privileges(Some(true));
    Ok(process)
}

fn namespace(typ: LinuxNamespaceType) -> Result<LinuxNamespace> {
    LinuxNamespaceBuilder::default()
        .typ(typ)
        .build()
        .map_err(|e| Error::InvalidInput(e.to_string()))
}

fn id_map(host_id: u32) -> Result<Vec<LinuxIdMapping>> {
    Ok(vec![LinuxIdMappingBuilder::default()
        .container_id(0u32)
        .host_id(host_id)
        .size(1u32)
        .build()
        .map_err(|e| Error::InvalidInput(e.to_string()))?])
}

fn build_resources(limits: &ResourceLimits) -> LinuxResources {
    let mut res = LinuxResources::default();
    if let Some(mem) = limits.memory_bytes {
        let mem = i64::try_from(mem).unwrap_or(i64::MAX);
        let mut m = LinuxMemory::default();
        // OCI `swap` is memory+swap: equal to the limit means no swap, so a
        // runaway is OOM-killed instead of thrashing the host.
        m.set_limit(Some(mem)).set_swap(Some(mem));
        res.set_memory(Some(m));
    }
    if let Some(pids) = limits.pids {
        let mut p = LinuxPids::default();
        p.set_limit(i64::try_from(pids).unwrap_or(i64::MAX));
        res.set_pids(Some(p));
    }
    if let Some(cpus) = limits.cpus {
        let mut c = LinuxCpu::default();
        let quota = (cpus * CPU_PERIOD_US as f64).round().max(1000.0) as i64;
        c.set_quota(Some(quota)).set_period(Some(CPU_PERIOD_US));
        res.set_cpu(Some(c));
    }
    res
}

fn build_masked_paths(input: &SandboxInput) -> Result<Vec<String>> {
    let mut masked: Vec<String> = PROC_MASKED_PATHS.iter().map(|s| s.to_string()).collect();
    masked.extend(ETC_SECRET_PATHS.iter().map(|s| s.to_string()));
    for k in &input.host.ssh_host_keys {
        masked.push(path_str(k)?.to_string());
    }
    // Threat: the store holds every session's upper dir; for root it is
    // /var/lib/shadow, inside the read-only /var bind.
    masked.push(path_str(&input.store_dir)?.to_string());
    for c in home_credential_paths(&input.user.home) {
        masked.push(path_str(&c)?.to_string());
    }
    for d in &input.denied {
        masked.push(path_str(d)?.to_string());
    }
    let mut seen = HashSet::new();
    masked.retain(|m| seen.insert(m.clone()));
    Ok(masked)
}

fn build_linux(input: &SandboxInput) -> Result<Linux> {
    use LinuxNamespaceType as N;
    let mut ns = vec![namespace(N::User)?, namespace(N::Pid)?];
    if input.network == NetworkMode::None {
        ns.push(namespace(N::Network)?);
    }
    for t in [N::Ipc, N::Uts, N::Mount, N::Cgroup] {
        ns.push(namespace(t)?);
    }
    let mut linux = Linux::default();
    linux
        .set_uid_mappings(Some(id_map(input.user.uid)?))
        .set_gid_mappings(Some(id_map(input.user.gid)?))
        .set_namespaces(Some(ns))
        .set_resources(input.cgroups_usable.then(|| build_resources(&input.limits)))
        .set_cgroups_path(input.cgroups_path.clone())
        .set_masked_paths(Some(build_masked_paths(input)?))
        .set_readonly_paths(Some(
            PROC_READONLY_PATHS.iter().map(|s| s.to_string()).collect(),
        ))
        .set_seccomp(input.seccomp.clone());
    Ok(linux)
}

/// Builds the OCI runtime spec of a sandbox session. Pure: the same input
/// always gives the same spec, and nothing on the machine is looked at.
pub fn build_spec(input: &SandboxInput) -> Result<Spec> {
    validate(input)?;
    let mut root = Root::default();
    // The skeleton holds only symlinks and mountpoints; read-only so the
    // agent cannot create files at `/` that a later session would see.
    root.set_path(input.rootfs_dir.clone())
        .set_readonly(Some(true));

    let mut annotations: HashMap<String, String> = input
        .annotations
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    annotations.insert(SESSION_ANNOTATION.to_string(), input.session_id.clone());

    let mut spec = Spec::default();
    spec.set_version(OCI_VERSION.to_string())
        .set_root(Some(root))
        .set_mounts(Some(build_mounts(input)?))
        .set_process(Some(build_process(input)?))
        .set_hostname(Some(HOSTNAME.to_string()))
        .set_domainname(None)
        .set_hooks(None)
        .set_annotations(Some(annotations))
        .set_linux(Some(build_linux(input)?));
    Ok(spec)
}

#[cfg(test)]
mod tests;
