//! Turning a bundle's spec into the spec that actually runs.
//!
//! libcontainer reads the spec from `<bundle>/config.json` itself. When the spec needs adjusting
//! (today: a missing or relative `linux.cgroupsPath`, which libcontainer would otherwise place at
//! the root of the v1 hierarchies), we write the adjusted spec to an *effective bundle* under the
//! state root and hand that to libcontainer; the container's recorded bundle is then set back to
//! the user's. The effective spec is plain data computed by [`effective_spec`], unit-tested by
//! exact comparison, and kept on disk for inspection while the container exists.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use oci_spec::runtime::Spec;

use crate::error::{Error, Result};

/// Top-level cgroup (cgroupfs) or slice prefix under which containers without a path are placed.
pub const CGROUP_PARENT: &str = "shadow-runtime";

/// The cgroups path to use for container `id` when the spec says `given`.
///
/// - systemd driver: `slice:prefix:name` as given, else `system.slice:shadow-runtime:<id>`
///   (`user.slice` for a non-root user);
/// - cgroupfs: absolute paths are kept; a relative one is made absolute; none becomes
///   `/shadow-runtime/<id>`.
pub fn cgroups_path(given: Option<&Path>, id: &str, systemd: bool, is_root: bool) -> PathBuf {
    match given {
        Some(p) if systemd => p.to_path_buf(),
        Some(p) if p.is_absolute() => p.to_path_buf(),
        Some(p) if !p.as_os_str().is_empty() => Path::new("/").join(p),
        _ if systemd => {
            let slice = if is_root {
                "system.slice"
            } else {
                "user.slice"
            };
            PathBuf::from(format!("{slice}:{CGROUP_PARENT}:{id}"))
        }
        _ => PathBuf::from(format!("/{CGROUP_PARENT}/{id}")),
    }
}

/// The spec as it will run, and whether it differs from the bundle's. `loopback_hook`: add the
/// hook that brings `lo` up from inside (rootless callers, see [`crate::net`]).
pub fn effective_spec(
    mut spec: Spec,
    rootfs: &Path,
    id: &str,
    systemd: bool,
    is_root: bool,
    loopback_hook: bool,
) -> (Spec, bool) {
    let mut changed = false;
    if let Some(linux) = spec.linux_mut() {
        let want = cgroups_path(linux.cgroups_path().as_deref(), id, systemd, is_root);
        if linux.cgroups_path().as_deref() != Some(want.as_path()) {
            linux.set_cgroups_path(Some(want));
            changed = true;
        }
    }
    if swap_masked_eq(&mut spec) {
        changed = true;
    }
    // An empty AppArmor profile means none (runc ignores it); libcontainer would try to apply it.
    if let Some(p) = spec.process_mut() {
        if p.apparmor_profile().as_deref() == Some("") {
            p.set_apparmor_profile(None);
            changed = true;
        }
    }
    if loopback_hook && crate::net::wants_new_netns(&spec) {
        let hook = oci_spec::runtime::HookBuilder::default()
            .path("/proc/self/exe")
            .args(vec![
                "shadow-runtime".to_string(),
                crate::net::LOOPBACK_HOOK_ARG.to_string(),
            ])
            .build()
            .expect("hook with a path");
        let mut hooks = spec.hooks().clone().unwrap_or_default();
        let mut cc = hooks.create_container().clone().unwrap_or_default();
        cc.insert(0, hook);
        hooks.set_create_container(Some(cc));
        spec.set_hooks(Some(hooks));
        changed = true;
    }
    if changed {
        // The effective bundle lives elsewhere: a relative rootfs must be made absolute.
        if let Some(root) = spec.root_mut() {
            root.set_path(rootfs.to_path_buf());
        }
    }
    (spec, changed)
}

/// OCI (and runc, through libseccomp-golang) read `SCMP_CMP_MASKED_EQ` as
/// `(arg & value) == valueTwo`; libcontainer 0.7 passes `valueTwo` as the mask and `value` as
/// the datum. Threat: Docker's default profile allows `clone` only when
/// `(flags & CLONE_NEW*) == 0` (value = the mask, valueTwo = 0); read the other way the mask is
/// 0, the rule always matches and namespace-creating clones are silently allowed. Swapping the
/// two for libcontainer gives every MASKED_EQ rule its OCI meaning.
fn swap_masked_eq(spec: &mut Spec) -> bool {
    use oci_spec::runtime::LinuxSeccompOperator;
    let Some(linux) = spec.linux_mut() else {
        return false;
    };
    let Some(mut seccomp) = linux.seccomp().clone() else {
        return false;
    };
    let Some(mut syscalls) = seccomp.syscalls().clone() else {
        return false;
    };
    let mut changed = false;
    for sc in syscalls.iter_mut() {
        let Some(mut args) = sc.args().clone() else {
            continue;
        };
        for a in args.iter_mut() {
            if a.op() == LinuxSeccompOperator::ScmpCmpMaskedEq {
                let (value, two) = (a.value(), a.value_two().unwrap_or(0));
                *a = oci_spec::runtime::LinuxSeccompArgBuilder::default()
                    .index(a.index())
                    .value(two)
                    .value_two(value)
                    .op(a.op())
                    .build()
                    .expect("all arg fields set");
                changed = true;
            }
        }
        sc.set_args(Some(args));
    }
    if changed {
        seccomp.set_syscalls(Some(syscalls));
        linux.set_seccomp(Some(seccomp));
    }
    changed
}

/// Where the effective bundle of `id` lives under `root`.
pub fn effective_bundle_dir(root: &Path, id: &str) -> PathBuf {
    root.join(".bundles").join(id)
}

/// The spec container `c` (under state root `root`) was created from: the effective bundle's
/// when we rewrote it, else the user's bundle's.
pub fn spec_as_created(root: &Path, c: &libcontainer::container::Container) -> Result<Spec> {
    let eff = effective_bundle_dir(root, c.id());
    let dir = if eff.join("config.json").exists() {
        eff
    } else {
        c.bundle().clone()
    };
    crate::spec_load::load(&dir)
}

/// Write `spec` as `<dir>/config.json` (created fresh, mode 0700 directory).
pub fn write_bundle(dir: &Path, spec: &Spec) -> Result<()> {
    if dir.exists() {
        fs::remove_dir_all(dir).map_err(|e| Error::io(format!("remove {}", dir.display()), e))?;
    }
    fs::create_dir_all(dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    crate::root::chmod_private(dir)?;
    let data = serde_json::to_vec(spec).map_err(|e| Error::runtime(format!("encode spec: {e}")))?;
    let path = dir.join("config.json");
    let mut f =
        fs::File::create(&path).map_err(|e| Error::io(format!("create {}", path.display()), e))?;
    f.write_all(&data)
        .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
    Ok(())
}

/// Write `contents` to `path` atomically: a temporary file in the same directory, then rename.
/// Engines poll pid files; they must never see a partial one. No fsync: these files live in
/// runtime state (tmpfs under /run) and mean nothing after a crash; an fsync costs ~5 ms here.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{}: not a file path", path.display())))?;
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let res = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(contents)?;
        fs::rename(&tmp, path)
    })();
    res.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        Error::io(format!("write {}", path.display()), e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::{LinuxBuilder, RootBuilder, SpecBuilder};

    #[test]
    fn cgroups_path_rules() {
        let p = |g: Option<&str>, sd, root| cgroups_path(g.map(Path::new), "c1", sd, root);
        assert_eq!(p(None, false, true), PathBuf::from("/shadow-runtime/c1"));
        assert_eq!(
            p(Some("/docker/x"), false, true),
            PathBuf::from("/docker/x")
        );
        assert_eq!(p(Some("a/b"), false, true), PathBuf::from("/a/b"));
        assert_eq!(
            p(Some(""), false, true),
            PathBuf::from("/shadow-runtime/c1")
        );
        assert_eq!(
            p(None, true, true),
            PathBuf::from("system.slice:shadow-runtime:c1")
        );
        assert_eq!(
            p(None, true, false),
            PathBuf::from("user.slice:shadow-runtime:c1")
        );
        assert_eq!(
            p(Some("machine.slice:libpod:x"), true, true),
            PathBuf::from("machine.slice:libpod:x")
        );
    }

    fn spec_with(cg: Option<&str>) -> Spec {
        let mut linux = LinuxBuilder::default().build().unwrap();
        linux.set_cgroups_path(cg.map(PathBuf::from));
        SpecBuilder::default()
            .root(RootBuilder::default().path("rootfs").build().unwrap())
            .linux(linux)
            .build()
            .unwrap()
    }

    #[test]
    fn unchanged_when_path_is_absolute() {
        let (s, changed) = effective_spec(
            spec_with(Some("/x/y")),
            Path::new("/b/rootfs"),
            "c",
            false,
            true,
            false,
        );
        assert!(!changed);
        assert_eq!(s.root().as_ref().unwrap().path(), Path::new("rootfs"));
    }

    #[test]
    fn missing_path_is_filled_and_rootfs_made_absolute() {
        let (s, changed) = effective_spec(
            spec_with(None),
            Path::new("/b/rootfs"),
            "c",
            false,
            true,
            false,
        );
        assert!(changed);
        assert_eq!(
            s.linux().as_ref().unwrap().cgroups_path().as_deref(),
            Some(Path::new("/shadow-runtime/c"))
        );
        assert_eq!(s.root().as_ref().unwrap().path(), Path::new("/b/rootfs"));
    }

    #[test]
    fn atomic_write_replaces_whole_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("pid");
        write_atomic(&p, b"123").unwrap();
        write_atomic(&p, b"45").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"45");
        assert_eq!(fs::read_dir(t.path()).unwrap().count(), 1);
    }
}
