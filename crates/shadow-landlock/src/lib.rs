//! The Landlock policy carried in a bundle (annotation [`ANNOTATION`], JSON) and its
//! enforcement, applied by shadow-runtime's executor inside the container right before the
//! payload's `exec`. Because it travels in the bundle, the same rules hold whether `shadow run`,
//! Docker, Podman or containerd started the container.
//!
//! Landlock is an allowlist: the ruleset handles every file-system right the kernel knows, and
//! only paths under `read_only` / `read_write` get any. `deny` carves paths out of those grants
//! (see [`plan`]). Threat: the agent reading a secret that a bind mount, a volume or a profile
//! made visible, or writing anywhere but where it was told it may.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use serde::{Deserialize, Serialize};

/// Annotation whose value is a [`Policy`] as JSON.
pub const ANNOTATION: &str = "run.shadow.landlock";

/// Current policy format version.
pub const VERSION: u32 = 1;

/// A Landlock policy, in container paths.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Format version ([`VERSION`]).
    pub version: u32,
    /// Trees readable and executable (nothing else).
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Trees with every file-system right.
    #[serde(default)]
    pub read_write: Vec<PathBuf>,
    /// Paths carved out of the grants above (when they exist at exec time).
    #[serde(default)]
    pub deny: Vec<PathBuf>,
    /// `Some(ports)`: TCP connect only to these ports (ABI 4). `None`: not restricted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_connect: Option<Vec<u16>>,
    /// `Some(ports)`: TCP bind only to these ports (ABI 4). `None`: not restricted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_bind: Option<Vec<u16>>,
    /// No signals to processes outside the sandbox (ABI 6).
    #[serde(default)]
    pub scope_signals: bool,
    /// No connections to abstract unix sockets made outside the sandbox (ABI 6).
    #[serde(default)]
    pub scope_abstract_unix: bool,
    /// Enforce what the kernel can and go on (the user asked for it).
    #[serde(default)]
    pub best_effort: bool,
}

/// Why a policy cannot be parsed or enforced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl Policy {
    /// Parses the annotation value; errors name the JSON position.
    pub fn from_json(s: &str) -> Result<Policy, Error> {
        let de = &mut serde_json::Deserializer::from_str(s);
        let p: Policy = serde_path_to_error::deserialize(de).map_err(|e| {
            Error(format!(
                "annotation {ANNOTATION}: at {}: {}",
                e.path(),
                e.inner()
            ))
        })?;
        p.validate()?;
        Ok(p)
    }

    /// The annotation value.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    fn validate(&self) -> Result<(), Error> {
        if self.version != VERSION {
            return Err(Error(format!(
                "annotation {ANNOTATION}: version {} is not supported (this runtime knows {VERSION})",
                self.version
            )));
        }
        for p in self
            .read_only
            .iter()
            .chain(&self.read_write)
            .chain(&self.deny)
        {
            if !p.is_absolute() || p.components().any(|c| c.as_os_str() == "..") {
                return Err(Error(format!(
                    "annotation {ANNOTATION}: path {} must be absolute, without `..`",
                    p.display()
                )));
            }
        }
        Ok(())
    }

    /// Lowest Landlock ABI that enforces everything the policy asks for.
    pub fn required_abi(&self) -> i64 {
        let mut abi = 1;
        if self.tcp_connect.is_some() || self.tcp_bind.is_some() {
            abi = 4;
        }
        if self.scope_signals || self.scope_abstract_unix {
            abi = 6;
        }
        abi
    }

    /// What a kernel of ABI `kernel_abi` cannot enforce, one phrase each.
    pub fn missing_on(&self, kernel_abi: i64) -> Vec<String> {
        let mut m = Vec::new();
        if kernel_abi < 1 {
            m.push("file-system rules (Landlock unavailable)".to_string());
        }
        if kernel_abi < 4 && (self.tcp_connect.is_some() || self.tcp_bind.is_some()) {
            m.push("TCP port rules (ABI 4)".to_string());
        }
        if kernel_abi < 6 && (self.scope_signals || self.scope_abstract_unix) {
            m.push("signal and abstract-socket scoping (ABI 6)".to_string());
        }
        m
    }

    /// Refuses, with one line, a policy this kernel cannot fully enforce (unless best effort).
    pub fn check_kernel(&self, kernel_abi: i64) -> Result<(), Error> {
        let missing = self.missing_on(kernel_abi);
        if missing.is_empty() || self.best_effort {
            return Ok(());
        }
        Err(Error(format!(
            "Landlock ABI {kernel_abi} of this kernel cannot enforce {} (needs ABI {}); refusing (best effort was not asked for)",
            missing.join(", "),
            self.required_abi()
        )))
    }

    /// Human-readable rules, one per line (for `--dry-run`).
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.read_only {
            out.push(format!("allow read+exec  {}", p.display()));
        }
        for p in &self.read_write {
            out.push(format!("allow read+write {}", p.display()));
        }
        for p in &self.deny {
            out.push(format!("deny             {}", p.display()));
        }
        let ports = |v: &Option<Vec<u16>>| match v {
            None => "any port".to_string(),
            Some(v) if v.is_empty() => "no port".to_string(),
            Some(v) => v
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(","),
        };
        out.push(format!("tcp connect      {}", ports(&self.tcp_connect)));
        out.push(format!("tcp bind         {}", ports(&self.tcp_bind)));
        out.push(format!(
            "scope            signals={} abstract-unix={}",
            self.scope_signals, self.scope_abstract_unix
        ));
        out
    }
}

/// Whether a grant covers files (regular files get file rights only) or a directory tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// Read and execute.
    ReadOnly,
    /// Every right.
    ReadWrite,
    /// Only listing (directories on the way to a denied path).
    ListOnly,
}

/// One rule of the planned ruleset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRule {
    /// The path beneath which the grant holds.
    pub path: PathBuf,
    /// What is granted.
    pub grant: Grant,
}

/// Turns the policy into concrete rules, looking at the file system as it is now.
///
/// A grant on a directory covers everything beneath it, so a denied path D below a granted tree
/// R is carved out by replacing R's rule with: list-only on each directory from R down to D's
/// parent, and R's grant on every *other* entry along the way. Symlinks along the way get no
/// rule (a rule would follow them, possibly into D; the target is covered by its own grant).
/// Consequence, by design: a new entry created directly in a directory on such a path is not
/// accessible. Denied paths that do not exist need nothing.
///
/// Nor do denied paths that are *masked* (see [`masked`]): what they show is empty, and the
/// original cannot come back, because a Landlock-restricted process cannot mount, unmount or
/// move mounts. They read as empty (as a project's masked `.env` does) instead of failing with
/// EACCES. `shadow run` masks every denied path it can see, so on a host root filesystem this
/// takes the default profile from ~200 rules (one per entry of `/etc`, about 1.3 ms of kernel
/// work per container start) to a handful, and lifts the rule above for them. A secret an
/// engine bind-mounts is not a mask, and is carved.
pub fn plan(policy: &Policy) -> Vec<PlannedRule> {
    let mut out = Vec::new();
    walk(policy, &mut |path, grant, _, _| {
        out.push(PlannedRule {
            path: path.to_path_buf(),
            grant,
        })
    });
    out
}

/// What [`walk`] hands on for each rule: its path, its grant, an fd on it and whether it is a
/// directory.
type Emit<'e> = dyn FnMut(&Path, Grant, BorrowedFd<'_>, bool) + 'e;

/// The carve of [`plan`], with an fd on each rule's path. Cost matters here (it runs in every
/// container, right before exec, and the host's `/etc` alone is ~150 entries): children are
/// opened relative to their directory's fd (short lookups, no second path walk) and typed by
/// the directory entry (no stat); the fd handed on is the one the rule is made from.
fn walk(policy: &Policy, emit: &mut Emit<'_>) {
    let deny: Vec<&Path> = policy
        .deny
        .iter()
        .map(|p| p.as_path())
        .filter(|p| masked(p) == Some(false))
        .collect();
    let grants = policy
        .read_only
        .iter()
        .map(|p| (p, Grant::ReadOnly))
        .chain(policy.read_write.iter().map(|p| (p, Grant::ReadWrite)));
    for (root, grant) in grants {
        if deny.iter().any(|d| root.starts_with(d)) {
            continue;
        }
        let below: Vec<&Path> = deny
            .iter()
            .copied()
            .filter(|d| d.starts_with(root))
            .collect();
        // A grant root is followed if a symlink, as the kernel would; a vanished one is
        // simply not granted.
        if below.is_empty() {
            if let Ok(fd) = rustix::fs::open(root, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
                let dir = rustix::fs::fstat(&fd)
                    .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory);
                emit(root, grant, fd.as_fd(), dir);
            }
        } else if let Ok(fd) = rustix::fs::open(root, LIST, Mode::empty()) {
            carve(root, fd, grant, &below, emit);
        }
    }
}

/// Whether `path` (not followed if a symlink) is masked: the root of a mount that shows
/// nothing — `/dev/null` bound over a file, or an empty tmpfs over a directory, as
/// `linux.maskedPaths` and Docker's and Podman's masks make them. `None` when it does not
/// exist. Anything else at a mount root, such as a secret bind-mounted into the container, is
/// not masked. A tmpfs belongs to the container's mount namespace, so nothing outside can later
/// put a secret into it; an empty file bound from the host could be written later, so it does
/// not count.
pub fn masked(path: &Path) -> Option<bool> {
    use rustix::fs::{statx, AtFlags, StatxAttributes, StatxFlags, CWD};
    let st = match statx(
        CWD,
        path,
        AtFlags::SYMLINK_NOFOLLOW | AtFlags::NO_AUTOMOUNT,
        StatxFlags::TYPE,
    ) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) | Err(rustix::io::Errno::NOTDIR) => return None,
        // Cannot look: present and not masked, so it is carved (fail closed).
        Err(_) => return Some(false),
    };
    let mount_root = st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT)
        && st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT);
    if !mount_root {
        return Some(false);
    }
    Some(match FileType::from_raw_mode(st.stx_mode.into()) {
        // /dev/null is character device 1:3.
        FileType::CharacterDevice => st.stx_rdev_major == 1 && st.stx_rdev_minor == 3,
        FileType::Directory => {
            rustix::fs::statfs(path).is_ok_and(|f| f.f_type == libc::TMPFS_MAGIC)
                && std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none())
        }
        _ => false,
    })
}

/// Flags to open a directory on a carve path: listable, and itself never a symlink.
const LIST: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

fn carve(dir: &Path, fd: OwnedFd, grant: Grant, deny: &[&Path], emit: &mut Emit<'_>) {
    emit(dir, Grant::ListOnly, fd.as_fd(), true);
    let Ok(mut entries) = rustix::fs::Dir::new(fd) else {
        return;
    };
    let mut children: Vec<(std::ffi::CString, FileType)> = entries
        .by_ref()
        .flatten()
        .filter(|e| !matches!(e.file_name().to_bytes(), b"." | b".."))
        .filter(|e| e.file_type() != FileType::Symlink)
        .map(|e| (e.file_name().to_owned(), e.file_type()))
        .collect();
    children.sort_by(|a, b| a.0.cmp(&b.0));
    let Ok(dfd) = entries.fd() else { return };
    for (name, ty) in children {
        let path = dir.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
        if deny.iter().any(|d| path.starts_with(d)) {
            continue;
        }
        let below: Vec<&Path> = deny
            .iter()
            .copied()
            .filter(|d| d.starts_with(&path))
            .collect();
        if !below.is_empty() {
            if let Ok(cfd) = rustix::fs::openat(dfd, name.as_c_str(), LIST, Mode::empty()) {
                carve(&path, cfd, grant, &below, emit);
            }
            continue;
        }
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let Ok(cfd) = rustix::fs::openat(dfd, name.as_c_str(), flags, Mode::empty()) else {
            continue;
        };
        let ty = match ty {
            FileType::Unknown => match rustix::fs::fstat(&cfd) {
                Ok(st) => FileType::from_raw_mode(st.st_mode),
                Err(_) => continue,
            },
            t => t,
        };
        if ty != FileType::Symlink {
            emit(&path, grant, cfd.as_fd(), ty == FileType::Directory);
        }
    }
}

/// Applies the policy to the calling thread (and so to what it `exec`s). Call it last, right
/// before `exec`: files opened before stay usable.
pub fn enforce(policy: &Policy) -> Result<(), Error> {
    let kernel = kernel_abi();
    policy.check_kernel(kernel)?;
    let abi = ABI::V5;
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let file = AccessFs::from_file(abi);
    let e = |what: &str, err: &dyn std::fmt::Display| Error(format!("landlock: {what}: {err}"));

    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(|x| e("handle file-system access", &x))?;
    if policy.tcp_connect.is_some() {
        ruleset = ruleset
            .handle_access(AccessNet::ConnectTcp)
            .map_err(|x| e("handle tcp connect", &x))?;
    }
    if policy.tcp_bind.is_some() {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp)
            .map_err(|x| e("handle tcp bind", &x))?;
    }
    let mut scopes = BitFlags::<Scope>::empty();
    if policy.scope_signals {
        scopes |= Scope::Signal;
    }
    if policy.scope_abstract_unix {
        scopes |= Scope::AbstractUnixSocket;
    }
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes).map_err(|x| e("scope", &x))?;
    }
    let created = ruleset.create().map_err(|x| e("create ruleset", &x))?;
    let mut slot = Some(created);
    let mut failed = None;
    walk(policy, &mut |path, grant, fd, is_dir| {
        let Some(c) = slot.take() else { return };
        let mut access = match grant {
            Grant::ReadWrite => all,
            Grant::ReadOnly => read,
            Grant::ListOnly => BitFlags::from(AccessFs::ReadDir),
        };
        if !is_dir {
            access &= file;
            if access.is_empty() {
                slot = Some(c);
                return;
            }
        }
        match c.add_rule(PathBeneath::new(fd, access)) {
            Ok(c) => slot = Some(c),
            Err(x) => failed = Some(e(&format!("rule for {}", path.display()), &x)),
        }
    });
    let mut created = match (slot, failed) {
        (Some(c), None) => c,
        (_, Some(err)) => return Err(err),
        (None, None) => return Err(Error("landlock: ruleset lost".into())),
    };
    for port in policy.tcp_connect.iter().flatten() {
        created = created
            .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
            .map_err(|x| e("tcp connect rule", &x))?;
    }
    for port in policy.tcp_bind.iter().flatten() {
        created = created
            .add_rule(NetPort::new(*port, AccessNet::BindTcp))
            .map_err(|x| e("tcp bind rule", &x))?;
    }
    // Denials after the payload's exec are what the session log wants (the kernel logs, by
    // default, only those of the executable that created the domain, i.e. the runtime). This
    // is logging, not protection: on ABI < 7 the flag is dropped (the ruleset is best effort
    // for flags; check_kernel above already refused what cannot be enforced).
    created = created
        .log_new_exec(true)
        .map_err(|x| e("log denials after exec", &x))?;
    let status = created
        .restrict_self()
        .map_err(|x| e("restrict self", &x))?;
    if status.ruleset == RulesetStatus::NotEnforced && !policy.best_effort {
        return Err(Error(
            "landlock: the kernel enforced none of the rules; refusing".into(),
        ));
    }
    Ok(())
}

/// The kernel's Landlock ABI version, 0 when Landlock is unavailable or disabled.
pub fn kernel_abi() -> i64 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a NULL attr, size 0 and the VERSION flag, landlock_create_ruleset only returns
    // the ABI version (or an error); no memory is read or written.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    v.max(0)
}

#[cfg(test)]
mod tests;
