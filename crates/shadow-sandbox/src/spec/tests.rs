use super::*;
use crate::hostview::HostEntry;
use serde_json::{json, Value};

const ID: &str = "20261202-134501-abcdef";
const STORE: &str = "/home/alice/.local/share/shadow";

fn host() -> HostView {
    HostView {
        entries: vec![
            HostEntry::symlink("bin", "usr/bin"),
            HostEntry::dir("boot"),
            HostEntry {
                name: "container_info.json".into(),
                kind: EntryKind::Other,
            },
            HostEntry::dir("dev"),
            HostEntry::dir("etc"),
            HostEntry::dir("home"),
            HostEntry::symlink("lib", "usr/lib"),
            HostEntry::symlink("lib64", "usr/lib64"),
            HostEntry::dir("lost+found"),
            HostEntry::dir("media"),
            HostEntry::dir("mnt"),
            HostEntry::dir("opt"),
            HostEntry::dir("proc"),
            HostEntry::dir("root"),
            HostEntry::dir("run"),
            HostEntry::symlink("sbin", "usr/sbin"),
            HostEntry::dir("srv"),
            HostEntry::dir("sys"),
            HostEntry::dir("tmp"),
            HostEntry::dir("usr"),
            HostEntry::dir("var"),
        ],
        var_run: Some(EntryKind::Symlink {
            target: "/run".into(),
        }),
        ssh_host_keys: vec!["/etc/ssh/ssh_host_ed25519_key".into()],
    }
}

fn input() -> SandboxInput {
    let sess = format!("{STORE}/sessions/{ID}");
    SandboxInput {
        session_id: ID.into(),
        args: vec!["claude".into(), "--help".into()],
        cwd: None,
        project_dir: "/home/alice/src/proj".into(),
        upper_dir: format!("{sess}/upper").into(),
        work_dir: format!("{sess}/work").into(),
        rootfs_dir: format!("{sess}/bundle/rootfs").into(),
        store_dir: STORE.into(),
        host: host(),
        host_limits: HostLimits {
            nofile_hard: 20000,
            nproc_hard: 96363,
        },
        user: UserInfo {
            uid: 1000,
            gid: 1001,
            home: "/home/alice".into(),
            username: "alice".into(),
        },
        env: vec!["HOME=/home/alice".into(), "PATH=/usr/bin:/bin".into()],
        terminal: true,
        network: NetworkMode::None,
        limits: ResourceLimits {
            memory_bytes: Some(4 * GIB),
            pids: Some(1024),
            cpus: Some(1.5),
        },
        cgroups_usable: true,
        tmpfs: TmpfsSizes::default(),
        extra_ro: vec![],
        extra_rw: vec![],
        denied: vec![],
        cgroups_path: Some(format!("/shadow/{ID}").into()),
        seccomp: None,
        annotations: [("org.shadow.profile".to_string(), "default".to_string())]
            .into_iter()
            .collect(),
    }
}

fn to_json(spec: &Spec) -> Value {
    serde_json::to_value(spec).unwrap()
}

fn build(input: &SandboxInput) -> Value {
    to_json(&build_spec(input).unwrap())
}

fn ro_bind_json(p: &str) -> Value {
    json!({"destination": p, "type": "bind", "source": p,
           "options": ["rbind", "ro", "rro", "nosuid", "nodev"]})
}

fn mounts(v: &Value) -> &Vec<Value> {
    v["mounts"].as_array().unwrap()
}

fn dests(v: &Value) -> Vec<&str> {
    mounts(v)
        .iter()
        .map(|m| m["destination"].as_str().unwrap())
        .collect()
}

fn masked(v: &Value) -> Vec<&str> {
    v["linux"]["maskedPaths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect()
}

#[test]
fn whole_spec_exact() {
    let sess = format!("{STORE}/sessions/{ID}");
    let expected = json!({
        "ociVersion": "1.2.0",
        "root": {"path": format!("{sess}/bundle/rootfs"), "readonly": true},
        "hostname": "shadow",
        "annotations": {"org.shadow.session": ID, "org.shadow.profile": "default"},
        "mounts": [
            ro_bind_json("/etc"),
            ro_bind_json("/opt"),
            ro_bind_json("/srv"),
            ro_bind_json("/usr"),
            ro_bind_json("/var"),
            {"destination": "/proc", "type": "proc", "source": "proc",
             "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=67108864"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=67108864"]},
            {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
             "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "nodev", "mode=1777", "size=1073741824"]},
            {"destination": "/run", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "nodev", "mode=755", "size=67108864"]},
            {"destination": "/home/alice", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "nodev", "mode=700", "size=536870912"]},
            {"destination": "/home/alice/src/proj", "type": "overlay", "source": "overlay",
             "options": [
                "lowerdir=/home/alice/src/proj",
                format!("upperdir={sess}/upper"),
                format!("workdir={sess}/work"),
                "userxattr",
             ]},
        ],
        "process": {
            "terminal": true,
            "user": {"uid": 0, "gid": 0},
            "args": ["claude", "--help"],
            "env": ["HOME=/home/alice", "PATH=/usr/bin:/bin"],
            "cwd": "/home/alice/src/proj",
            "capabilities": {
                "bounding": [], "effective": [], "inheritable": [],
                "permitted": [], "ambient": []
            },
            "rlimits": [
                {"type": "RLIMIT_NOFILE", "hard": 4096, "soft": 4096},
                {"type": "RLIMIT_CORE", "hard": 0, "soft": 0},
            ],
            "noNewPrivileges": true,
        },
        "linux": {
            "uidMappings": [{"containerID": 0, "hostID": 1000, "size": 1}],
            "gidMappings": [{"containerID": 0, "hostID": 1001, "size": 1}],
            "namespaces": [
                {"type": "user"}, {"type": "pid"}, {"type": "network"},
                {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "cgroup"},
            ],
            "resources": {
                "memory": {"limit": 4294967296i64, "swap": 4294967296i64},
                "cpu": {"quota": 150000, "period": 100000},
                "pids": {"limit": 1024},
            },
            "cgroupsPath": format!("/shadow/{ID}"),
            "maskedPaths": [
                "/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore",
                "/proc/keys", "/proc/latency_stats", "/proc/sched_debug", "/proc/scsi",
                "/proc/timer_list", "/proc/timer_stats", "/sys/devices/virtual/powercap",
                "/sys/firmware",
                "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
                "/etc/sudoers", "/etc/sudoers.d", "/etc/security/opasswd", "/etc/ssl/private",
                "/etc/ssh/ssh_host_ed25519_key",
                STORE,
                "/home/alice/.ssh", "/home/alice/.aws", "/home/alice/.config/gcloud",
                "/home/alice/.azure", "/home/alice/.docker", "/home/alice/.kube",
                "/home/alice/.netrc", "/home/alice/.gnupg", "/home/alice/.git-credentials",
                "/home/alice/.config/gh", "/home/alice/.npmrc", "/home/alice/.pypirc",
                "/home/alice/.cargo/credentials", "/home/alice/.cargo/credentials.toml",
                "/home/alice/.password-store", "/home/alice/.local/share/keyrings",
            ],
            "readonlyPaths": [
                "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"
            ],
        },
    });
    let actual = build(&input());
    assert_eq!(
        actual,
        expected,
        "actual:\n{}",
        serde_json::to_string_pretty(&actual).unwrap()
    );
}

#[test]
fn deterministic_and_roundtrips() {
    let spec = build_spec(&input()).unwrap();
    assert_eq!(spec, build_spec(&input()).unwrap());
    let text = serde_json::to_string(&spec).unwrap();
    let back: Spec = serde_json::from_str(&text).unwrap();
    assert_eq!(back, spec);
}

#[test]
fn host_network_has_no_net_namespace_and_binds_sys() {
    let mut i = input();
    i.network = NetworkMode::Host;
    let v = build(&i);
    let ns: Vec<&str> = v["linux"]["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["type"].as_str().unwrap())
        .collect();
    assert_eq!(ns, ["user", "pid", "ipc", "uts", "mount", "cgroup"]);
    let sys = mounts(&v)
        .iter()
        .find(|m| m["destination"] == "/sys")
        .unwrap();
    assert_eq!(
        sys,
        &json!({"destination": "/sys", "type": "bind", "source": "/sys",
                "options": ["rbind", "ro", "rro", "nosuid", "noexec", "nodev"]})
    );
    // Everything else is unchanged.
    let mut a = build(&input());
    let mut b = v.clone();
    for x in [&mut a, &mut b] {
        x["linux"]["namespaces"] = Value::Null;
        x["mounts"] = Value::Null;
    }
    assert_eq!(a, b);
}

#[test]
fn excluded_dirs_are_never_bound() {
    let v = build(&input());
    for m in mounts(&v) {
        if m["type"] == "bind" {
            let d = m["destination"].as_str().unwrap();
            let top = d.trim_start_matches('/').split('/').next().unwrap();
            assert!(!EXCLUDED_TOP_LEVEL.contains(&top), "{d} bound");
            assert!(!d.starts_with("/home"), "{d}");
        }
    }
    // Symlinks and stray files are not mounts (symlinks live in the skeleton).
    let d = dests(&v);
    for absent in [
        "/bin",
        "/lib",
        "/lib64",
        "/sbin",
        "/container_info.json",
        "/boot",
    ] {
        assert!(!d.contains(&absent), "{absent}");
    }
    // Sockets under /run and /tmp are hidden by fresh tmpfs.
    for fresh in ["/run", "/tmp", "/home/alice", "/dev", "/proc"] {
        let m = mounts(&v)
            .iter()
            .find(|m| m["destination"] == fresh)
            .unwrap();
        assert_ne!(m["type"], "bind", "{fresh}");
    }
}

#[test]
fn var_run_real_dir_gets_its_own_tmpfs() {
    let mut i = input();
    i.host.var_run = Some(EntryKind::Dir);
    let v = build(&i);
    let d = dests(&v);
    let var = d.iter().position(|x| *x == "/var").unwrap();
    let var_run = d.iter().position(|x| *x == "/var/run").unwrap();
    assert!(var < var_run);
    assert_eq!(mounts(&v)[var_run]["type"], "tmpfs");
}

#[test]
fn home_tmpfs_mounted_before_project_overlay() {
    let v = build(&input());
    let d = dests(&v);
    let home = d.iter().position(|x| *x == "/home/alice").unwrap();
    let proj = d.iter().position(|x| *x == "/home/alice/src/proj").unwrap();
    assert!(home < proj);
    assert_eq!(proj, d.len() - 1);

    // Project == home: still home tmpfs first, overlay last (stable sort).
    // (The default store is inside home, which the store check rejects.)
    let mut i = input();
    i.project_dir = "/home/alice".into();
    assert!(build_spec(&i).unwrap_err().to_string().contains("store"));
    i.store_dir = "/srv/store".into();
    i.upper_dir = "/srv/store/s/upper".into();
    i.work_dir = "/srv/store/s/work".into();
    let v = build(&i);
    let ms = mounts(&v);
    let n = ms.len();
    assert_eq!(ms[n - 2]["type"], "tmpfs");
    assert_eq!(ms[n - 2]["destination"], "/home/alice");
    assert_eq!(ms[n - 1]["type"], "overlay");
    assert_eq!(ms[n - 1]["destination"], "/home/alice");
    // ... and the credentials inside the (overlaid real) home are masked.
    assert!(masked(&v).contains(&"/home/alice/.ssh"));
}

#[test]
fn project_outside_home_after_all_system_mounts() {
    let mut i = input();
    i.project_dir = "/tmp/proj".into();
    let v = build(&i);
    let d = dests(&v);
    let tmp = d.iter().position(|x| *x == "/tmp").unwrap();
    let proj = d.iter().position(|x| *x == "/tmp/proj").unwrap();
    assert!(tmp < proj);
}

#[test]
fn extra_paths_and_masks() {
    let mut i = input();
    i.extra_ro = vec!["/home/alice/.config".into(), "/home/alice/.cargo".into()];
    i.extra_rw = vec!["/home/alice/src/proj/target".into()];
    i.denied = vec!["/etc/secret.conf".into()];
    let v = build(&i);
    let d = dests(&v);
    let n = d.len();
    // Sorted by depth: home, then the extras at depth 3, then the project
    // overlay, then the rw path inside the project.
    assert_eq!(
        &d[n - 5..],
        [
            "/home/alice",
            "/home/alice/.config",
            "/home/alice/.cargo",
            "/home/alice/src/proj",
            "/home/alice/src/proj/target"
        ]
    );
    assert_eq!(mounts(&v)[n - 4], ro_bind_json("/home/alice/.config"));
    assert_eq!(
        mounts(&v)[n - 1],
        json!({"destination": "/home/alice/src/proj/target", "type": "bind",
               "source": "/home/alice/src/proj/target",
               "options": ["rbind", "rw", "nosuid", "nodev"]})
    );
    // Re-exposed home parts still hide credentials.
    let m = masked(&v);
    for c in [
        "/home/alice/.config/gh",
        "/home/alice/.config/gcloud",
        "/home/alice/.cargo/credentials",
        "/home/alice/.cargo/credentials.toml",
        "/etc/secret.conf",
    ] {
        assert!(m.contains(&c), "{c} not masked");
    }
}

#[test]
fn credential_list_is_complete() {
    let m: Vec<String> = home_credential_paths(Path::new("/h"))
        .into_iter()
        .map(|p| p.display().to_string())
        .collect();
    for c in [
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
        ".password-store",
        ".local/share/keyrings",
    ] {
        assert!(m.contains(&format!("/h/{c}")), "{c}");
    }
}

#[test]
fn etc_and_store_masked_for_root() {
    let mut i = input();
    i.user = UserInfo {
        uid: 0,
        gid: 0,
        home: "/root".into(),
        username: "root".into(),
    };
    i.store_dir = "/var/lib/shadow".into();
    i.upper_dir = format!("/var/lib/shadow/sessions/{ID}/upper").into();
    i.work_dir = format!("/var/lib/shadow/sessions/{ID}/work").into();
    i.project_dir = "/work/proj".into();
    let v = build(&i);
    let m = masked(&v);
    for p in [
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/sudoers",
        "/etc/ssh/ssh_host_ed25519_key",
        "/var/lib/shadow",
        "/root/.ssh",
    ] {
        assert!(m.contains(&p), "{p}");
    }
    assert_eq!(
        v["linux"]["uidMappings"],
        json!([{"containerID": 0, "hostID": 0, "size": 1}])
    );
    assert!(dests(&v).contains(&"/root"));
}

#[test]
fn rlimits_respect_host_hard_limits() {
    let v = build(&input());
    let nofile = &v["process"]["rlimits"][0];
    assert_eq!(nofile["type"], "RLIMIT_NOFILE");
    assert!(nofile["hard"].as_u64().unwrap() <= 20000);
    assert!(nofile["soft"].as_u64().unwrap() <= nofile["hard"].as_u64().unwrap());

    let mut i = input();
    i.host_limits.nofile_hard = 1024;
    let v = build(&i);
    assert_eq!(v["process"]["rlimits"][0]["hard"], 1024);
}

#[test]
fn no_cgroups_falls_back_to_rlimits() {
    let mut i = input();
    i.cgroups_usable = false;
    i.limits.pids = Some(200_000);
    let v = build(&i);
    assert!(v["linux"].get("resources").is_none());
    assert_eq!(
        v["process"]["rlimits"],
        json!([
            {"type": "RLIMIT_NOFILE", "hard": 4096, "soft": 4096},
            {"type": "RLIMIT_CORE", "hard": 0, "soft": 0},
            {"type": "RLIMIT_NPROC", "hard": 96363, "soft": 96363},
            {"type": "RLIMIT_AS", "hard": 4294967296u64, "soft": 4294967296u64},
        ])
    );
}

#[test]
fn limits_defaults() {
    let d = ResourceLimits::for_host(24 * GIB);
    assert_eq!(d.memory_bytes, Some(4 * GIB));
    assert_eq!(d.pids, Some(1024));
    assert_eq!(
        ResourceLimits::for_host(2 * GIB).memory_bytes,
        Some(GIB),
        "half of a small machine"
    );
    assert_eq!(ResourceLimits::default().memory_bytes, Some(4 * GIB));
    let mut i = input();
    i.limits = ResourceLimits {
        memory_bytes: None,
        pids: None,
        cpus: None,
    };
    let v = build(&i);
    assert_eq!(v["linux"]["resources"], json!({}));
}

#[test]
fn cwd_env_terminal_annotations_seccomp() {
    let mut i = input();
    i.cwd = Some("/home/alice/src/proj/sub".into());
    i.terminal = false;
    i.annotations
        .insert(SESSION_ANNOTATION.into(), "forged".into());
    let mut sc = LinuxSeccomp::default();
    sc.set_default_action(oci_spec::runtime::LinuxSeccompAction::ScmpActErrno);
    i.seccomp = Some(sc.clone());
    let spec = build_spec(&i).unwrap();
    let v = to_json(&spec);
    assert_eq!(v["process"]["cwd"], "/home/alice/src/proj/sub");
    assert_eq!(v["process"]["terminal"], false);
    assert!(v["process"].get("consoleSize").is_none());
    assert_eq!(
        v["annotations"][SESSION_ANNOTATION], ID,
        "id cannot be forged"
    );
    assert_eq!(spec.linux().as_ref().unwrap().seccomp(), &Some(sc));
}

#[test]
fn rejects_unsafe_inputs() {
    let err = |f: &dyn Fn(&mut SandboxInput)| {
        let mut i = input();
        f(&mut i);
        build_spec(&i).unwrap_err().to_string()
    };
    assert!(err(&|i| i.session_id = "../x".into()).contains("invalid session id"));
    assert!(err(&|i| i.args.clear()).contains("empty command"));
    assert!(err(&|i| i.project_dir = "rel/proj".into()).contains("absolute"));
    assert!(err(&|i| i.project_dir = "/home/alice/../bob".into()).contains("absolute"));
    assert!(err(&|i| i.project_dir = "/".into()).contains("cannot be /"));
    assert!(err(&|i| i.project_dir = "/proc/1".into()).contains("/proc"));
    assert!(err(&|i| i.project_dir = "/srv/a:b".into()).contains("overlayfs"));
    assert!(err(&|i| i.project_dir = "/srv/a,b".into()).contains("overlayfs"));
    assert!(err(&|i| i.project_dir = STORE.into()).contains("session store"));
    assert!(err(&|i| i.project_dir = "/home/alice/.local".into()).contains("session store"));
    assert!(err(&|i| i.project_dir = "/home/alice/.ssh/x".into()).contains("credential"));
    assert!(err(&|i| i.extra_ro = vec!["/home/alice/.local".into()]).contains("store"));
    assert!(err(&|i| i.extra_rw = vec![format!("{STORE}/sessions").into()]).contains("store"));
    assert!(err(&|i| i.limits.cpus = Some(0.0)).contains("cpus"));
    assert!(err(&|i| i.limits.cpus = Some(f64::NAN)).contains("cpus"));
    assert!(err(&|i| i.cwd = Some("sub".into())).contains("cwd"));
}
