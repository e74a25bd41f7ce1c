use super::*;
use std::collections::HashSet;

fn user(uid: u32, home: &str) -> UserInfo {
    UserInfo {
        uid,
        gid: uid,
        home: home.into(),
        username: "u".into(),
    }
}

struct Fixture {
    _tmp: tempfile::TempDir,
    store: Store,
    project: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    // As `SHADOW_STORE=<tmp>/store` would select.
    let root = resolve_store_root(
        Some(tmp.path().join("store").into_os_string()),
        None,
        &user(1000, "/home/u"),
    );
    let store = Store::open(root).unwrap();
    let project = tmp.path().join("proj");
    fs::create_dir(&project).unwrap();
    Fixture {
        store,
        project: fs::canonicalize(&project).unwrap(),
        _tmp: tmp,
    }
}

fn new(project: &Path) -> NewSession {
    NewSession {
        project: project.to_path_buf(),
        command: vec!["claude".into()],
        profile: "default".into(),
        limits: ResourceLimits::default(),
        supervisor: None,
        engine: None,
    }
}

fn exited(store: &Store, id: &str) {
    store
        .update_meta(id, |m| m.finish(SessionState::Exited, Some(0)))
        .unwrap();
}

#[test]
fn ids() {
    let t = DateTime::parse_from_rfc3339("2026-12-02T13:45:01Z")
        .unwrap()
        .with_timezone(&Utc);
    assert_eq!(format_session_id(t, 0), "20261202-134501-aaaaaa");
    assert_eq!(format_session_id(t, u32::MAX), "20261202-134501-777777");
    let id = new_session_id().unwrap();
    validate_id(&id).unwrap();
    assert_eq!(id.len(), 22);
    for bad in [
        "",
        "../x",
        "a/b",
        "..",
        ".tmp-x",
        "-x",
        "ABC",
        "a b",
        &"a".repeat(65),
    ] {
        assert!(validate_id(bad).is_err(), "{bad:?}");
    }
    let e = validate_id("../x").unwrap_err().to_string();
    assert!(e.starts_with("invalid session id '../x'"), "{e}");
}

#[test]
fn store_location() {
    let u = user(1000, "/home/u");
    assert_eq!(
        resolve_store_root(None, None, &u),
        PathBuf::from("/home/u/.local/share/shadow")
    );
    assert_eq!(
        resolve_store_root(None, Some("/x/data".into()), &u),
        PathBuf::from("/x/data/shadow")
    );
    assert_eq!(
        resolve_store_root(None, Some("rel".into()), &u),
        PathBuf::from("/home/u/.local/share/shadow")
    );
    assert_eq!(
        resolve_store_root(None, Some("/x/data".into()), &user(0, "/root")),
        PathBuf::from("/var/lib/shadow")
    );
    assert_eq!(
        resolve_store_root(Some("/s".into()), None, &user(0, "/root")),
        PathBuf::from("/s")
    );
    assert!(Store::open("relative").is_err());
    let t = tempfile::tempdir().unwrap();
    fs::create_dir(t.path().join("sessions")).unwrap();
    fs::set_permissions(t.path().join("sessions"), fs::Permissions::from_mode(0o755)).unwrap();
    Store::open(t.path()).unwrap();
    let mode = fs::metadata(t.path().join("sessions")).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o700, "loose sessions dir tightened");
}

#[test]
fn stat_parsing_and_pid_reuse() {
    let line = "1234 (we(ird) name) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4242 19 20";
    assert_eq!(parse_stat_start_time(line), Some(4242));
    assert_eq!(parse_stat_start_time("garbage"), None);
    let me = ProcessRef::current().unwrap();
    assert!(me.is_alive());
    let reused = ProcessRef {
        start_time: me.start_time + 1,
        ..me
    };
    assert!(!reused.is_alive(), "same pid, other start time");
    assert!(!ProcessRef {
        pid: u32::MAX - 1,
        start_time: 1
    }
    .is_alive());
}

#[test]
fn create_load_layout_and_meta() {
    let f = fixture();
    let s = f.store.create(&new(&f.project)).unwrap();
    assert_eq!(s.dir, f.store.root().join("sessions").join(s.id()));
    for d in ["upper", "work", "bundle", "bundle/rootfs"] {
        assert!(s.dir.join(d).is_dir(), "{d}");
    }
    assert_eq!(fs::metadata(s.rootfs_dir()).unwrap().mode() & 0o777, 0o755);
    assert_eq!(fs::metadata(s.bundle_dir()).unwrap().mode() & 0o777, 0o700);
    let mode = fs::metadata(f.store.root().join("sessions"))
        .unwrap()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700);
    assert_eq!(fs::metadata(&s.dir).unwrap().mode() & 0o777, 0o700);
    assert_eq!(s.meta.project, f.project);
    assert_eq!(s.meta.upper, s.upper_dir());
    assert_eq!(s.meta.state, SessionState::Running);
    assert_eq!(s.meta.supervisor, Some(ProcessRef::current().unwrap()));
    assert!(s.is_running());
    let loaded = f.store.load(s.id()).unwrap();
    assert_eq!(loaded.meta, s.meta);
    // meta.json has the documented fields.
    let v: serde_json::Value = serde_json::from_slice(&fs::read(s.meta_path()).unwrap()).unwrap();
    for k in [
        "id",
        "project",
        "command",
        "profile",
        "started_at",
        "ended_at",
        "exit_status",
        "state",
        "upper",
        "supervisor",
        "limits",
    ] {
        assert!(v.get(k).is_some(), "{k}");
    }
    assert_eq!(v["state"], "running");
    // No temp dirs left behind.
    let names: Vec<_> = fs::read_dir(f.store.root().join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1);
}

#[test]
fn project_is_canonicalized() {
    let f = fixture();
    let link = f.project.parent().unwrap().join("link");
    std::os::unix::fs::symlink(&f.project, &link).unwrap();
    let s = f.store.create(&new(&link.join("."))).unwrap();
    assert_eq!(s.meta.project, f.project);
    assert_eq!(f.store.newest_for_project(&link).unwrap().id(), s.id());
    assert!(f.store.create(&new(Path::new("/nonexistent/x"))).is_err());
}

#[test]
fn update_finish_and_timed_out_state() {
    let f = fixture();
    let s = f.store.create(&new(&f.project)).unwrap();
    let u = f
        .store
        .update_meta(s.id(), |m| m.finish(SessionState::TimedOut, Some(137)))
        .unwrap();
    assert_eq!(u.meta.state, SessionState::TimedOut);
    let l = f.store.load(s.id()).unwrap();
    assert_eq!(l.meta.exit_status, Some(137));
    assert!(l.meta.ended_at.is_some());
    assert!(!l.is_running());
    let v: serde_json::Value = serde_json::from_slice(&fs::read(l.meta_path()).unwrap()).unwrap();
    assert_eq!(v["state"], "timed-out");
}

#[test]
fn list_filter_and_newest() {
    let f = fixture();
    let other = f.project.parent().unwrap().join("other");
    fs::create_dir(&other).unwrap();
    let a = f.store.create(&new(&f.project)).unwrap();
    let b = f.store.create(&new(&other)).unwrap();
    let c = f.store.create(&new(&f.project)).unwrap();
    let all: Vec<String> = f
        .store
        .list(None)
        .unwrap()
        .iter()
        .map(|s| s.id().to_string())
        .collect();
    assert_eq!(all, [a.id(), b.id(), c.id()]);
    let mine: Vec<String> = f
        .store
        .list(Some(&f.project))
        .unwrap()
        .iter()
        .map(|s| s.id().to_string())
        .collect();
    assert_eq!(mine, [a.id(), c.id()]);
    assert_eq!(f.store.newest_for_project(&f.project).unwrap().id(), c.id());
    assert_eq!(f.store.newest_for_project(&other).unwrap().id(), b.id());

    // Strays, temp dirs and corrupt sessions are skipped by list.
    let sessions = f.store.root().join("sessions");
    fs::create_dir(sessions.join(".tmp-20260101-000000-aaaaaa")).unwrap();
    fs::create_dir(sessions.join("20260101-000000-bbbbbb")).unwrap();
    fs::write(sessions.join("20260101-000000-bbbbbb/meta.json"), "{").unwrap();
    assert_eq!(f.store.list(None).unwrap().len(), 3);
    let e = f
        .store
        .load("20260101-000000-bbbbbb")
        .unwrap_err()
        .to_string();
    assert!(e.contains("is corrupt"), "{e}");
}

#[test]
fn error_messages() {
    let f = fixture();
    assert_eq!(
        f.store.load("nope").unwrap_err().to_string(),
        "no session 'nope'"
    );
    assert!(matches!(
        f.store.load("../../etc"),
        Err(Error::InvalidId(_))
    ));
    assert!(matches!(f.store.remove("a/b"), Err(Error::InvalidId(_))));
    assert_eq!(
        f.store
            .newest_for_project(&f.project)
            .unwrap_err()
            .to_string(),
        format!("no sessions for project {}", f.project.display())
    );
    let s = f.store.create(&new(&f.project)).unwrap();
    s.check_project().unwrap();
    fs::remove_dir(&f.project).unwrap();
    assert_eq!(
        s.check_project().unwrap_err().to_string(),
        format!(
            "session {}'s project {} no longer exists",
            s.id(),
            f.project.display()
        )
    );
}

#[test]
fn remove_handles_kernel_work_dir_and_refuses_running() {
    let f = fixture();
    let s = f.store.create(&new(&f.project)).unwrap();
    // What overlayfs leaves behind: work/work with mode 000, plus content.
    let ww = s.work_dir().join("work");
    fs::create_dir(&ww).unwrap();
    fs::write(ww.join("f"), "x").unwrap();
    fs::set_permissions(&ww, fs::Permissions::from_mode(0o000)).unwrap();
    fs::create_dir_all(s.upper_dir().join("a/b")).unwrap();
    fs::write(s.upper_dir().join("a/b/c"), "x").unwrap();
    std::os::unix::fs::symlink("/etc", s.upper_dir().join("link")).unwrap();
    fs::write(s.config_path(), "{}").unwrap();

    let e = f.store.remove(s.id()).unwrap_err().to_string();
    assert!(e.contains("is still running"), "{e}");
    assert!(s.dir.exists());

    exited(&f.store, s.id());
    f.store.remove(s.id()).unwrap();
    assert!(!s.dir.exists());
    assert!(Path::new("/etc").is_dir(), "symlink not followed");
    assert_eq!(
        fs::read_dir(f.store.root().join("sessions"))
            .unwrap()
            .count(),
        0
    );
    assert_eq!(
        f.store.remove(s.id()).unwrap_err().to_string(),
        format!("no session '{}'", s.id())
    );
}

#[test]
fn crashed_supervisor_is_not_running() {
    let f = fixture();
    let me = ProcessRef::current().unwrap();
    let mut n = new(&f.project);
    n.supervisor = Some(ProcessRef {
        start_time: me.start_time + 12345,
        ..me
    });
    let s = f.store.create(&n).unwrap();
    assert_eq!(s.meta.state, SessionState::Running);
    assert!(!s.is_running());
    f.store.remove(s.id()).unwrap();
}

#[test]
fn concurrent_creation_without_lock() {
    let f = fixture();
    let ids: Vec<String> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                sc.spawn(|| {
                    (0..5)
                        .map(|_| f.store.create(&new(&f.project)).unwrap().id().to_string())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let unique: HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), 40);
    assert_eq!(f.store.list(Some(&f.project)).unwrap().len(), 40);
}

#[test]
fn write_config_atomically() {
    let f = fixture();
    let s = f.store.create(&new(&f.project)).unwrap();
    let spec = Spec::default();
    s.write_config(&spec).unwrap();
    assert_eq!(Spec::load(s.config_path()).unwrap(), spec);
    let names: Vec<_> = fs::read_dir(s.bundle_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, ["config.json", "rootfs"]);
}

#[test]
fn maybe_running_follows_the_state_and_heals() {
    let f = fixture();
    let ids = |v: Vec<Session>| -> Vec<String> { v.iter().map(|s| s.id().to_string()).collect() };
    let a = f.store.create(&new(&f.project)).unwrap();
    let b = f.store.create(&new(&f.project)).unwrap();
    assert_eq!(ids(f.store.maybe_running().unwrap()), [a.id(), b.id()]);
    // Finishing a session drops it; so does removing one.
    f.store
        .update_meta(a.id(), |m| m.finish(SessionState::Exited, Some(0)))
        .unwrap();
    assert_eq!(ids(f.store.maybe_running().unwrap()), [b.id()]);
    let running = f.store.root().join("running");
    assert!(!running.join(a.id()).exists());
    // A marker without its session: young, it may be a session being created, and stays;
    // older than STALE_MARKER it is dropped.
    let young = running.join("20260101-000000-cccccc");
    let old = running.join("20260101-000000-dddddd");
    fs::write(&young, "").unwrap();
    fs::write(&old, "").unwrap();
    let past = std::time::SystemTime::now() - STALE_MARKER - std::time::Duration::from_secs(5);
    fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(past)
        .unwrap();
    assert_eq!(ids(f.store.maybe_running().unwrap()), [b.id()]);
    assert!(young.exists());
    assert!(!old.exists());
    // A store from before the index, or indexed before a reboot (another boot id), or one
    // where a create made running/ first: a full scan indexes every running session.
    for reset in ["remove", "reboot", "create-first"] {
        let c = match reset {
            "remove" => {
                fs::remove_dir_all(&running).unwrap();
                None
            }
            "reboot" => {
                fs::remove_file(running.join(b.id())).unwrap();
                fs::write(running.join(".indexed"), "another-boot").unwrap();
                None
            }
            _ => {
                fs::remove_dir_all(&running).unwrap();
                Some(f.store.create(&new(&f.project)).unwrap())
            }
        };
        let mut want = vec![b.id().to_string()];
        want.extend(c.as_ref().map(|c| c.id().to_string()));
        assert_eq!(ids(f.store.maybe_running().unwrap()), want, "{reset}");
        assert!(running.join(b.id()).exists(), "{reset}");
        assert!(!running.join(a.id()).exists(), "{reset}");
        if let Some(c) = c {
            f.store
                .update_meta(c.id(), |m| m.finish(SessionState::Exited, Some(0)))
                .unwrap();
        }
    }
}
