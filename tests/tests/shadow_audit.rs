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
