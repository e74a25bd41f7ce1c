//! Every session writes a hash-chained audit log; `shadow log --verify` detects tampering.

use serde_json::Value;
use shadow_integration_tests::shadow::*;

fn records(p: &Project, id: &str) -> Vec<Value> {
    let o = p.ok(&["log", id, "--json"]);
    o.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_session_logs_start_end_changes_apply_rollback_and_discard() {
    let p = Project::new("audit-life");
    let id = p.session("echo new > added.txt");
    let r: Vec<Value> = records(&p, &id)
        .into_iter()
        .filter(|x| x["kind"] != "exec")
        .collect();
    let kinds: Vec<&str> = r.iter().map(|x| x["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["session.start", "session.end", "changes"]);
    assert_eq!(r[0]["data"]["profile"], "default");
    assert_eq!(r[0]["data"]["network"], "none");
    assert_eq!(r[1]["data"]["exit_status"], 0);
    let files = r[2]["data"]["files"].as_array().unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0]["path"], "added.txt");
    // sha256("new\n")
    assert_eq!(
        files[0]["sha256"],
        "7aa7a5359173d05b63cfd682e3c38487f3cb4f7f1d60659fe59fab1505977d4c"
    );
    p.ok(&["apply", &id, "--all", "--yes"]);
    p.ok(&["apply", "--rollback", "--yes"]);
    p.ok(&["discard", &id]);
    let r: Vec<Value> = records(&p, &id)
        .into_iter()
        .filter(|x| x["kind"] != "exec")
        .collect();
    let kinds: Vec<&str> = r.iter().map(|x| x["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "session.start",
            "session.end",
            "changes",
            "apply",
            "rollback",
            "discard"
        ]
    );
    assert_eq!(r[3]["data"]["journal"], r[4]["data"]["journal"]);
    let o = p.ok(&["log", &id, "--verify"]);
    // Six, plus the one exec (sh) of the session.
    assert!(o.stdout.contains("7 record(s), chain intact"), "{o}");
}

#[test]
fn tampering_with_the_log_is_detected() {
    let p = Project::new("audit-tamper");
    let o = p.run_with(&["--no-exec-audit"], "echo a > a.txt; echo b > b.txt");
    assert_eq!(o.code(), Some(0), "{o}");
    let id = p.session_ids().pop().unwrap();
    let log = p.store.join("audit").join(format!("{id}.jsonl"));
    let orig = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = orig.lines().collect();
    let check = |content: String, want: &str| {
        std::fs::write(&log, content).unwrap();
        let o = p.sh(&["log", &id, "--verify"]);
        assert_eq!(o.code(), Some(1), "{o}");
        assert!(
            o.stderr.contains("is NOT intact") && o.stderr.contains(want),
            "{o}"
        );
    };
    check(
        orig.replace("\"exit_status\":0", "\"exit_status\":3"),
        "line 2: record was changed",
    );
    check(
        format!("{}\n{}\n", lines[0], lines[2]),
        "line 2: record seq 2",
    );
    check(
        format!("{}\n{}\n{}\n", lines[1], lines[0], lines[2]),
        "line 1:",
    );
    check(format!("{}\n{}\n", lines[0], lines[1]), "cut off the end");
    std::fs::write(&log, &orig).unwrap();
    p.ok(&["log", &id, "--verify"]);
}

fn execs(r: &[Value]) -> Vec<&Value> {
    r.iter()
        .filter(|x| x["kind"] == "exec")
        .map(|x| &x["data"])
        .collect()
}

#[test]
fn every_process_executed_inside_is_logged() {
    let p = Project::new("audit-exec");
    let o = p.run("ls | wc -l");
    assert_eq!(o.code(), Some(0), "{o}");
    let id = p.session_ids().pop().unwrap();
    let r = records(&p, &id);
    let mut e = execs(&r);
    // sh first; ls and wc start in either order.
    e[1..].sort_by_key(|x| x["argv"][0].as_str().unwrap_or("").to_string());
    let argv: Vec<&Value> = e.iter().map(|x| &x["argv"]).collect();
    assert_eq!(
        argv,
        [
            &serde_json::json!(["sh", "-c", "ls | wc -l"]),
            &serde_json::json!(["ls"]),
            &serde_json::json!(["wc", "-l"]),
        ],
        "{r:?}"
    );
    // One attempt each: the payload is found through PATH before its one execve.
    assert!(e[0]["path"].as_str().unwrap().ends_with("/sh"), "{}", e[0]);
    assert!(e[1]["path"].as_str().unwrap().ends_with("/ls"));
    assert_eq!(e[1]["ppid"], e[0]["pid"]);
    assert_eq!(e[2]["ppid"], e[0]["pid"]);
    for x in &e {
        assert_eq!(x["cwd"], p.dir.display().to_string());
        assert_eq!(x["syscall"], "execve");
        assert_eq!(x["id_valid"], true);
    }
    let start = r.iter().find(|x| x["kind"] == "session.start").unwrap();
    assert_eq!(
        start["data"]["exec_audit"],
        "seccomp user notification (execve, execveat)"
    );
    let end = r.iter().find(|x| x["kind"] == "session.end").unwrap();
    assert_eq!(end["data"]["exec"]["execs"], 3);
    assert_eq!(end["data"]["exec"]["recorded"], 3);
    assert_eq!(end["data"]["exec"]["errors"], 0);
    let text = p.ok(&["log", &id]);
    assert!(text.stdout.contains("exec"), "{text}");
    assert!(text.stdout.contains(": wc -l\n"), "{text}");
    // And the chain holds with them.
    let v = p.ok(&["log", &id, "--verify"]);
    assert!(v.stdout.contains("chain intact"), "{v}");
}

#[test]
fn exec_audit_can_be_turned_off_and_says_so() {
    let p = Project::new("audit-noexec");
    let o = p.run_with(&["--no-exec-audit"], "ls | wc -l");
    assert_eq!(o.code(), Some(0), "{o}");
    let id = p.session_ids().pop().unwrap();
    let r = records(&p, &id);
    assert!(execs(&r).is_empty());
    assert_eq!(r[0]["data"]["exec_audit"], false);
    assert_eq!(r[1]["data"]["exec"], Value::Null);
}

#[test]
fn seccomp_denials_are_logged_and_still_denied() {
    let p = Project::new("audit-deny");
    let o = p.run(
        "unshare -U true 2>/dev/null; echo unshare=$?; \
         /usr/bin/python3 -c 'import ctypes,os; l=ctypes.CDLL(None,use_errno=True); \
         r=l.mount(b\"x\",b\"/tmp\",b\"tmpfs\",0,None); print(\"mount\", r, os.strerror(ctypes.get_errno()))'",
    );
    assert_eq!(o.code(), Some(0), "{o}");
    assert_eq!(
        o.stdout, "unshare=1\nmount -1 Operation not permitted\n",
        "{o}"
    );
    let id = p.session_ids().pop().unwrap();
    let r = records(&p, &id);
    let denied: Vec<&Value> = r
        .iter()
        .filter(|x| x["kind"] == "denial")
        .map(|x| &x["data"])
        .collect();
    let names: Vec<&str> = denied
        .iter()
        .map(|d| d["syscall"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"unshare") && names.contains(&"mount"),
        "{names:?}"
    );
    let un = denied.iter().find(|d| d["syscall"] == "unshare").unwrap();
    assert_eq!(un["mechanism"], "seccomp");
    assert_eq!(un["errno"], "EPERM");
    // unshare(CLONE_NEWUSER)
    assert_eq!(un["args"][0], "0x10000000");
    // The denying process is the one the exec records name.
    let unshare_exec = execs(&r)
        .into_iter()
        .find(|e| e["argv"][0] == "unshare")
        .unwrap();
    assert_eq!(un["pid"], unshare_exec["pid"]);
    let end = r.iter().find(|x| x["kind"] == "session.end").unwrap();
    assert_eq!(end["data"]["exec"]["seccomp_denials"]["mount"], 1);
    assert_eq!(end["data"]["exec"]["seccomp_denials"]["unshare"], 1);
}

/// Kernel audit on for the duration of a test, as it was after. Machine-wide: only
/// `landlock_denials_come_from_kernel_audit` touches it.
struct AuditOn {
    restore_off: bool,
}

impl AuditOn {
    fn new() -> AuditOn {
        let st = shadow_kaudit::netlink::status().expect("audit status (tests run as root)");
        if st.enabled == 0 {
            shadow_kaudit::netlink::set_enabled(true).expect("switch kernel audit on");
        }
        AuditOn {
            restore_off: st.enabled == 0,
        }
    }
}

impl Drop for AuditOn {
    fn drop(&mut self) {
        if self.restore_off {
            let _ = shadow_kaudit::netlink::set_enabled(false);
        }
    }
}

fn landlock_denials(r: &[Value]) -> Vec<&Value> {
    r.iter()
        .filter(|x| x["kind"] == "denial" && x["data"]["mechanism"] == "landlock")
        .map(|x| &x["data"])
        .collect()
}

#[test]
fn landlock_denials_come_from_kernel_audit() {
    shadow_integration_tests::require_root();
    let initially_on = shadow_kaudit::netlink::status().unwrap().enabled != 0;
    let p = Project::new("audit-landlock");
    if !initially_on {
        // Audit off: the denial still happens, the log says why it has no record of it.
        let id = p.session("cat /etc/shadow 2>/dev/null; true");
        let r = records(&p, &id);
        let why = r[0]["data"]["denials"]["landlock"].as_str().unwrap();
        assert!(why.contains("kernel audit is off"), "{why}");
        assert!(landlock_denials(&r).is_empty());
        assert_eq!(r[1]["data"]["landlock"], Value::Null);
    }
    let _audit = AuditOn::new();
    // Three sandboxes at once, each denied something else: each log holds its own denial only.
    // Two are denied by the sandbox's own domain: a profile that allows TCP connects to port 1
    // only, and a connect to another port of the sandbox's loopback (denied paths such as
    // /etc/shadow are masked, so they read empty and Landlock has nothing to deny there).
    // The third is an agent that sandboxes its own tool (a nested Landlock domain, created
    // inside the sandbox, that may not read files: exec of cat is denied).
    let profile = p.base().join("tcp-one.toml");
    std::fs::write(
        &profile,
        "extends = \"default\"\n[landlock]\ntcp_connect = [1]\n",
    )
    .unwrap();
    let profile = profile.to_str().unwrap();
    let connect = |port: u16, tag: &str| {
        format!("cat /etc/shadow; bash -c 'echo > /dev/tcp/127.0.0.1/{port}'; sleep 1; echo {tag}")
    };
    let nested = "python3 -c 'import ctypes,os,struct; l=ctypes.CDLL(None,use_errno=True); \
        l.syscall.restype=ctypes.c_long; a=struct.pack(\"=QQQ\",4,0,0); \
        fd=l.syscall(444,a,len(a),0); l.prctl(38,1,0,0,0); assert l.syscall(446,fd,2)==0; \
        os.execv(\"/usr/bin/cat\",[\"cat\",\"/etc/hostname\"])' 2>/dev/null; echo c";
    let (a, b, c) = std::thread::scope(|s| {
        let a = s.spawn(|| p.run_with(&["--profile", profile], &connect(8081, "a")));
        let b = s.spawn(|| p.run_with(&["--profile", profile], &connect(8082, "b")));
        let c = s.spawn(|| p.run(nested));
        (a.join().unwrap(), b.join().unwrap(), c.join().unwrap())
    });
    assert_eq!(c.stdout, "c\n", "{c}");
    for o in [&a, &b] {
        assert!(o.stderr.contains("Permission denied"), "{o}");
        // Masked: reads empty, no denial.
        assert!(!o.stderr.contains("/etc/shadow"), "{o}");
    }
    assert_eq!((a.stdout.as_str(), b.stdout.as_str()), ("a\n", "b\n"));
    let mut seen = Vec::new();
    for id in p.session_ids() {
        let r = records(&p, &id);
        let script = r[0]["data"]["command"][2].as_str().unwrap();
        if script.contains("; true") {
            continue; // the audit-off session above
        }
        if script.contains("python3") {
            // The nested domain's denials (the exec of cat, then python's own reads) are the
            // session's; its creator is the python process the exec records name.
            let d = landlock_denials(&r);
            let cat = d
                .iter()
                .find(|d| d["object"]["path"] == "/usr/bin/cat")
                .unwrap_or_else(|| panic!("{id}: {d:?}"));
            assert_eq!(cat["syscall"], "execve");
            let py = execs(&r)
                .into_iter()
                .find(|e| e["argv"][0] == "python3")
                .unwrap();
            assert_eq!(cat["pid"], py["pid"]);
            seen.push("nested".to_string());
            continue;
        }
        assert_eq!(
            r[0]["data"]["denials"]["landlock"].as_str().unwrap(),
            "kernel audit records (LANDLOCK_ACCESS), read from the NETLINK_AUDIT read-only multicast group"
        );
        let d = landlock_denials(&r);
        assert_eq!(d.len(), 1, "{id}: {d:?}");
        let d = d[0];
        assert_eq!(d["blockers"], serde_json::json!(["net.connect_tcp"]), "{d}");
        assert_eq!(d["syscall"], "connect");
        assert_eq!(d["exit"], -13);
        assert_eq!(d["comm"], "bash");
        // The denied process is the `bash` the exec records name.
        let bash = execs(&r)
            .into_iter()
            .find(|e| e["argv"][0] == "bash")
            .unwrap();
        assert_eq!(d["pid"], bash["pid"]);
        let end = r.iter().find(|x| x["kind"] == "session.end").unwrap();
        assert_eq!(end["data"]["landlock"]["read_to_end"], true, "{end}");
        assert_eq!(end["data"]["landlock"]["denials"]["net.connect_tcp"], 1);
        p.ok(&["log", &id, "--verify"]);
        let text = p.ok(&["log", &id]).stdout;
        assert!(text.contains("landlock pid="), "{text}");
        seen.push(format!(
            "dest={}",
            d["object"]["dest"].as_str().unwrap_or_default()
        ));
    }
    seen.sort();
    assert_eq!(seen, ["dest=8081", "dest=8082", "nested"]);
}
