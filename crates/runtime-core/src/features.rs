//! `features`: what this runtime supports, as the runtime-spec `features.md` document.

use serde_json::{json, Value};

/// The six hook kinds, all of which libcontainer runs.
pub const HOOKS: [&str; 6] = [
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
];

/// Mount options understood by the runtime's mount code.
pub const MOUNT_OPTIONS: [&str; 44] = [
    "async",
    "atime",
    "bind",
    "defaults",
    "dev",
    "diratime",
    "dirsync",
    "exec",
    "iversion",
    "lazytime",
    "loud",
    "mand",
    "noatime",
    "nodev",
    "nodiratime",
    "noexec",
    "noiversion",
    "nolazytime",
    "nomand",
    "norelatime",
    "nostrictatime",
    "nosuid",
    "nosymfollow",
    "private",
    "ratime",
    "rbind",
    "rdev",
    "rdiratime",
    "relatime",
    "remount",
    "rexec",
    "rnoatime",
    "rnodev",
    "rnoexec",
    "rnosuid",
    "ro",
    "rprivate",
    "rro",
    "rrw",
    "rshared",
    "rslave",
    "rw",
    "shared",
    "slave",
];

/// The features document.
pub fn features() -> Value {
    let caps: Vec<String> = oci_spec_caps();
    json!({
        "ociVersionMin": "1.0.0",
        "ociVersionMax": oci_spec::runtime::VERSION,
        "hooks": HOOKS.to_vec(),
        "mountOptions": MOUNT_OPTIONS.to_vec(),
        "linux": {
            "namespaces": ["cgroup", "ipc", "mount", "network", "pid", "user", "uts", "time"],
            "capabilities": caps,
            "cgroup": {"v1": true, "v2": true, "systemd": true, "systemdUser": true, "rdma": false},
            "seccomp": {
                "enabled": true,
                "actions": ["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS",
                            "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG", "SCMP_ACT_NOTIFY", "SCMP_ACT_TRACE", "SCMP_ACT_TRAP"],
                "operators": ["SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE", "SCMP_CMP_LT",
                              "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE"],
                "archs": ["SCMP_ARCH_X86", "SCMP_ARCH_X86_64", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"]
            },
            "apparmor": {"enabled": true},
            "selinux": {"enabled": false},
            "intelRdt": {"enabled": true},
            "mountExtensions": {"idmap": {"enabled": true}}
        },
        "annotations": {
            "org.opencontainers.runc.checkpoint.enabled": "false",
            "run.shadow.runtime.version": env!("CARGO_PKG_VERSION"),
            "run.shadow.libcontainer.version": crate::LIBCONTAINER_VERSION,
            "run.shadow.landlock.abi": crate::spec_load::landlock_abi().to_string()
        }
    })
}

fn oci_spec_caps() -> Vec<String> {
    // Every capability the kernel knows, by its CAP_ name (cap_last_cap bounds the list).
    let last: usize = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40);
    ALL_CAPS
        .iter()
        .take(last + 1)
        .map(|s| s.to_string())
        .collect()
}

const ALL_CAPS: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

#[cfg(test)]
mod tests {
    #[test]
    fn features_document_shape() {
        let f = super::features();
        assert_eq!(f["ociVersionMin"], "1.0.0");
        assert_eq!(f["hooks"].as_array().unwrap().len(), 6);
        assert_eq!(f["linux"]["seccomp"]["enabled"], true);
        assert!(f["linux"]["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "CAP_SYS_ADMIN"));
    }
}
