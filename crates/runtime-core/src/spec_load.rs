//! Loading and validating a bundle's `config.json`.
//!
//! Errors name the file, the field (as a JSON path) and the position, because "oci spec error"
//! — what a bare deserialisation failure says — leaves a user with nothing to fix.
//! A spec that asks for something this runtime or kernel cannot enforce is refused here, before
//! anything is created: never silently weakened.

use std::fs;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxNamespaceType, Spec};

use crate::error::{Error, ErrorKind, Result};

/// Annotation through which a bundle asks for Landlock enforcement (see the profiles issue):
/// its presence on a kernel without Landlock is refused.
pub const LANDLOCK_ANNOTATION: &str = shadow_landlock::ANNOTATION;

// Fail closed at build time: without libcontainer's `libseccomp` feature, `linux.seccomp` would
// be ignored silently. Naming a function that only exists with the feature makes such a build
// fail to compile instead.
const _: fn(
    &oci_spec::runtime::LinuxSeccomp,
) -> Result<Option<std::os::fd::RawFd>, libcontainer::seccomp::SeccompError> =
    libcontainer::seccomp::initialize_seccomp;

/// Read `bundle/config.json` into a [`Spec`].
pub fn load(bundle: &Path) -> Result<Spec> {
    let path = bundle.join("config.json");
    let data = match fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let what = if bundle.is_dir() {
                format!("{}: no such file", path.display())
            } else {
                format!("bundle {} does not exist", bundle.display())
            };
            return Err(Error::new(ErrorKind::InvalidInput, what));
        }
        Err(e) => return Err(Error::io(format!("read {}", path.display()), e)),
    };
    parse(&data).map_err(|e| e.context(path.display()))
}

/// Parse spec JSON, reporting field path, line and column on failure.
pub fn parse(data: &[u8]) -> Result<Spec> {
    let de = &mut serde_json::Deserializer::from_slice(data);
    serde_path_to_error::deserialize::<_, Spec>(de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        if field.is_empty() || field == "." || field == "?" {
            Error::invalid(format!("invalid JSON: {inner}"))
        } else {
            Error::invalid(format!("field `{field}`: {inner}"))
        }
    })
}

/// Whether the kernel enforces AppArmor profiles (what runc and crun check too).
fn apparmor_enabled() -> bool {
    fs::read_to_string("/sys/module/apparmor/parameters/enabled").is_ok_and(|s| s.trim() == "Y")
}

/// Validate what the runtime needs before it creates anything, resolving `root.path` against the
/// bundle. Returns the absolute rootfs path.
pub fn validate(spec: &Spec, bundle: &Path, config_path: &Path) -> Result<PathBuf> {
    let at = |msg: String| Error::invalid(format!("{}: {msg}", config_path.display()));
    if !spec.version().starts_with("1.") {
        return Err(at(format!(
            "field `ociVersion`: {:?} is not supported (need 1.x)",
            spec.version()
        )));
    }
    let root = spec
        .root()
        .as_ref()
        .ok_or_else(|| at("field `root`: missing (a rootfs is required)".into()))?;
    if root.path().as_os_str().is_empty() {
        return Err(at("field `root.path`: empty".into()));
    }
    let rootfs = if root.path().is_absolute() {
        root.path().clone()
    } else {
        bundle.join(root.path())
    };
    match fs::metadata(&rootfs) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(at(format!(
                "field `root.path`: rootfs {} is not a directory",
                rootfs.display()
            )))
        }
        Err(_) => {
            return Err(at(format!(
                "field `root.path`: rootfs {} does not exist",
                rootfs.display()
            )))
        }
    }
    let process = spec
        .process()
        .as_ref()
        .ok_or_else(|| at("field `process`: missing".into()))?;
    if process.args().as_ref().is_none_or(|a| a.is_empty()) {
        return Err(at(
            "field `process.args`: at least one argument is required".into(),
        ));
    }
    if !process.cwd().is_absolute() {
        return Err(at(format!(
            "field `process.cwd`: {:?} must be an absolute path",
            process.cwd()
        )));
    }
    if let Some(hooks) = spec.hooks() {
        let kinds = [
            ("prestart", hooks.prestart()),
            ("createRuntime", hooks.create_runtime()),
            ("createContainer", hooks.create_container()),
            ("startContainer", hooks.start_container()),
            ("poststart", hooks.poststart()),
            ("poststop", hooks.poststop()),
        ];
        for (kind, list) in kinds {
            for (i, h) in list.iter().flatten().enumerate() {
                if let Some(t) = h.timeout().filter(|t| *t <= 0) {
                    return Err(at(format!(
                        "field `hooks.{kind}[{i}].timeout`: {t} (must be greater than zero)"
                    )));
                }
            }
        }
    }
    if let Some(profile) = process.apparmor_profile().as_deref() {
        // Fail closed: libcontainer would fail later with a bare "no such file" (the profile's
        // /proc/self/attr/apparmor/exec), after most of the container was set up.
        if !profile.is_empty() && !apparmor_enabled() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "{}: field `process.apparmorProfile`: {profile:?} cannot be enforced: AppArmor is not enabled on this host",
                    config_path.display()
                ),
            ));
        }
    }
    let linux = spec
        .linux()
        .as_ref()
        .ok_or_else(|| at("field `linux`: missing (this is a Linux runtime)".into()))?;
    if let Some(nss) = linux.namespaces() {
        let mut seen = Vec::new();
        for (i, ns) in nss.iter().enumerate() {
            if seen.contains(&ns.typ()) {
                return Err(at(format!(
                    "field `linux.namespaces[{i}].type`: namespace {:?} listed twice",
                    ns.typ()
                )));
            }
            seen.push(ns.typ());
            let proc_name = ns_proc_name(ns.typ());
            if !Path::new("/proc/self/ns").join(proc_name).exists() {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "{}: field `linux.namespaces[{i}].type`: this kernel has no {proc_name} namespace",
                        config_path.display()
                    ),
                ));
            }
        }
    }
    if let Some(value) = spec
        .annotations()
        .as_ref()
        .and_then(|a| a.get(LANDLOCK_ANNOTATION))
    {
        // Fail closed: a policy we cannot parse or the kernel cannot fully enforce is refused
        // here, at create, rather than weakened or discovered only when the payload starts.
        let policy = shadow_landlock::Policy::from_json(value).map_err(|e| {
            Error::new(
                ErrorKind::InvalidInput,
                format!("{}: {e}", config_path.display()),
            )
        })?;
        policy.check_kernel(landlock_abi()).map_err(|e| {
            Error::new(
                ErrorKind::Unsupported,
                format!("{}: {e}", config_path.display()),
            )
        })?;
    }
    if let Some(value) = spec
        .annotations()
        .as_ref()
        .and_then(|a| a.get(shadow_profile::seccomp::STACKED_ANNOTATION))
    {
        let at = |e: &dyn std::fmt::Display| {
            Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "{}: annotation {}: {e}",
                    config_path.display(),
                    shadow_profile::seccomp::STACKED_ANNOTATION
                ),
            )
        };
        serde_json::from_str::<oci_spec::runtime::LinuxSeccomp>(value).map_err(|e| at(&e))?;
        // Installing a filter without CAP_SYS_ADMIN needs no_new_privs; a payload that kept
        // its privileges would fail at exec, so say it now.
        let nnp = spec
            .process()
            .as_ref()
            .and_then(|p| p.no_new_privileges())
            .unwrap_or(false);
        if !nnp {
            return Err(at(&"needs process.noNewPrivileges = true"));
        }
    }
    Ok(rootfs)
}

/// The `/proc/self/ns` entry for a namespace type.
pub fn ns_proc_name(t: LinuxNamespaceType) -> &'static str {
    match t {
        LinuxNamespaceType::Mount => "mnt",
        LinuxNamespaceType::Cgroup => "cgroup",
        LinuxNamespaceType::Uts => "uts",
        LinuxNamespaceType::Ipc => "ipc",
        LinuxNamespaceType::User => "user",
        LinuxNamespaceType::Pid => "pid",
        LinuxNamespaceType::Network => "net",
        LinuxNamespaceType::Time => "time",
    }
}

/// The kernel's Landlock ABI version, 0 when Landlock is unavailable or disabled.
pub fn landlock_abi() -> i64 {
    shadow_landlock::kernel_abi()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_error_names_field_and_position() {
        let json =
            br#"{"ociVersion":"1.0.2","linux":{"namespaces":[{"type":"pid"},{"type":"bogus"}]}}"#;
        let e = parse(json).unwrap_err().to_string();
        assert!(
            e.starts_with("field `linux.namespaces[1].type`: unknown variant `bogus`"),
            "{e}"
        );
        assert!(e.contains("line 1 column"), "{e}");
    }

    #[test]
    fn malformed_json_names_position() {
        let e = parse(b"{\n  \"ociVersion\": \"1.0.2\",\n  oops\n}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3 column"), "{e}");
    }

    #[test]
    fn landlock_probe_runs() {
        // This machine has ABI 7; elsewhere only require that the probe does not fail.
        assert!(landlock_abi() >= 0);
    }
}
