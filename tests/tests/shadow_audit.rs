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
    let r = records(&p, &id);
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
    let r = records(&p, &id);
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
    assert!(o.stdout.contains("6 record(s), chain intact"), "{o}");
}

#[test]
fn tampering_with_the_log_is_detected() {
    let p = Project::new("audit-tamper");
    let id = p.session("echo a > a.txt; echo b > b.txt");
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
