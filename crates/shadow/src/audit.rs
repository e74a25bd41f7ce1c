//! The session audit log (see the shadow-audit crate): where it lives, what `shadow run`,
//! `apply`, `rollback` and `discard` record, and `shadow log`.
//!
//! Logs live in `<store>/audit/<session>.jsonl`, outside the session directory, so a discarded
//! session keeps its record. Recording is best effort for the verbs that already did their
//! work (a full disk must not turn a finished apply into an error), and says so on stderr.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::context::Context;
use crate::{Failure, Outcome};

/// The log of session `id`.
pub fn log_path(ctx: &Context, id: &str) -> PathBuf {
    shadow_audit::session_log(ctx.store.root(), id)
}

/// Appends a record; a failure is reported, not returned.
pub fn record(ctx: &Context, id: &str, kind: &str, data: Value) {
    if let Err(e) = shadow_audit::append(&log_path(ctx, id), id, kind, data) {
        eprintln!("shadow: audit log of session {id}: {e}");
    }
}

/// Denial records kept per syscall name; the rest are only counted (a program retrying a
/// denied call in a loop must not flood the log).
pub const DENIALS_PER_SYSCALL: u64 = 20;

/// Most records an [`ExecWriter`] writes under one lock.
const MAX_BATCH: usize = 256;

/// How long the writer lets records queue up after the first one of a burst before it writes
/// them. Measured on 1,000 execs: writing as each record came (one open, flock, tail read and head
/// rename per exec, plus a wake-up of this thread per exec) was most of the exec audit's cost.
/// While it waits, the supervisor's sends do not wake it (it is parked, not in `recv`), and
/// [`ExecWriter::finish`] cuts the wait short, so the end of a session is not delayed.
const COLLECT: Duration = Duration::from_millis(25);

/// What an [`ExecWriter`] wrote.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// `exec` records.
    pub execs: u64,
    /// Denials per mechanism and syscall name (`seccomp:keyctl`, `landlock:fs.read_file`; all
    /// of them, recorded or not).
    pub denials: std::collections::BTreeMap<String, u64>,
}

/// One record for the writer, stamped when it happened.
#[derive(Debug)]
enum Item {
    /// From the exec supervisor.
    Notice(shadow_execaudit::Notice),
    /// Already shaped (a Landlock denial from the kernel audit reader): kind, data, and the key
    /// it is counted under in [`Written::denials`] if it is a denial.
    Record(&'static str, Value, Option<String>),
}

/// Writes the exec and denial records the supervisor (and the kernel audit reader) hand over,
/// on its own thread: the supervisor's sink must not do file I/O (each exec in the sandbox waits
/// for it).
#[derive(Debug)]
pub struct ExecWriter {
    tx: Option<std::sync::mpsc::Sender<(Item, std::time::SystemTime)>>,
    thread: Option<std::thread::JoinHandle<Written>>,
}

impl ExecWriter {
    /// Start writing to the log of session `id`.
    pub fn start(ctx: &Context, id: &str) -> Result<ExecWriter, Failure> {
        let (tx, rx) = std::sync::mpsc::channel::<(Item, std::time::SystemTime)>();
        let log = log_path(ctx, id);
        let session = id.to_string();
        let thread =
            shadow_runtime_core::foreground::spawn_signals_blocked("shadow-execlog", move || {
                let mut w = Written::default();
                let mut warned = false;
                while let Ok(first) = rx.recv() {
                    // Let the burst queue up (see COLLECT), then write it in batches.
                    std::thread::park_timeout(COLLECT);
                    let mut pending = std::iter::once(first).chain(rx.try_iter()).peekable();
                    while pending.peek().is_some() {
                        let batch = shape(&mut w, pending.by_ref().take(MAX_BATCH));
                        if batch.is_empty() {
                            continue;
                        }
                        if let Err(err) = shadow_audit::append_batch_at(&log, &session, batch) {
                            if !warned {
                                warned = true;
                                eprintln!("shadow: audit log of session {session}: {err}");
                            }
                        }
                    }
                }
                w
            })
            .map_err(|e| Failure::new(format!("cannot start the exec audit writer: {e}")))?;
        Ok(ExecWriter {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// The sink to give the supervisor.
    pub fn sink(&self) -> impl FnMut(shadow_execaudit::Notice) + Send + 'static {
        let tx = self.tx.clone();
        move |e| {
            if let Some(tx) = &tx {
                let _ = tx.send((Item::Notice(e), std::time::SystemTime::now()));
            }
        }
    }

    /// A sink for records shaped elsewhere: `(kind, data, denial key)`.
    pub fn records(&self) -> impl FnMut(&'static str, Value, Option<String>) + Send + 'static {
        let tx = self.tx.clone();
        move |kind, data, key| {
            if let Some(tx) = &tx {
                let _ = tx.send((Item::Record(kind, data, key), std::time::SystemTime::now()));
            }
        }
    }

    /// Wait until every record is written (after the supervisor is finished).
    pub fn finish(mut self) -> Written {
        drop(self.tx.take());
        let Some(t) = self.thread.take() else {
            return Written::default();
        };
        // Cut a COLLECT wait short; a token left for a later park is harmless (it only makes
        // that wait shorter).
        t.thread().unpark();
        t.join().unwrap_or_default()
    }
}

/// The denial counts of one mechanism, by syscall (seccomp) or blocker (Landlock).
pub fn denials_of(w: &Written, mechanism: &str) -> std::collections::BTreeMap<String, u64> {
    w.denials
        .iter()
        .filter_map(|(k, n)| {
            let (m, what) = k.split_once(':')?;
            (m == mechanism).then(|| (what.to_string(), *n))
        })
        .collect()
}

/// Turns queued items into log records, counting denials and keeping at most
/// [`DENIALS_PER_SYSCALL`] of each kind.
fn shape(
    w: &mut Written,
    items: impl Iterator<Item = (Item, std::time::SystemTime)>,
) -> Vec<(String, Value, std::time::SystemTime)> {
    let mut batch = Vec::new();
    for (item, at) in items {
        let (kind, data, key) = match item {
            Item::Notice(shadow_execaudit::Notice::Exec(e)) => {
                w.execs += 1;
                ("exec", serde_json::to_value(&e).unwrap_or_default(), None)
            }
            Item::Notice(shadow_execaudit::Notice::Denied(d)) => (
                "denial",
                serde_json::to_value(DenialRecord::from(&d)).unwrap_or_default(),
                Some(format!("seccomp:{}", d.syscall)),
            ),
            Item::Record(kind, data, key) => (kind, data, key),
        };
        if let Some(key) = key {
            let c = w.denials.entry(key).or_default();
            *c += 1;
            if *c > DENIALS_PER_SYSCALL {
                continue;
            }
        }
        batch.push((kind.to_string(), data, at));
    }
    batch
}

#[derive(serde::Serialize)]
struct DenialRecord<'a> {
    mechanism: &'static str,
    syscall: &'a str,
    pid: i32,
    ppid: Option<i32>,
    args: [String; 6],
    errno: &'static str,
}

impl<'a> From<&'a shadow_execaudit::Denial> for DenialRecord<'a> {
    fn from(d: &'a shadow_execaudit::Denial) -> Self {
        DenialRecord {
            mechanism: "seccomp",
            syscall: &d.syscall,
            pid: d.pid,
            ppid: d.ppid,
            args: d.args.map(|a| format!("{a:#x}")),
            errno: "EPERM",
        }
    }
}

/// Where a session's Landlock denials come from when they are recorded.
pub const LANDLOCK_SOURCE: &str =
    "kernel audit records (LANDLOCK_ACCESS), read from the NETLINK_AUDIT read-only multicast group";

/// Starts reading the kernel's Landlock denial records into the log behind `writer`, or says
/// why this host cannot (audit off, rootless, old kernel): see the shadow-kaudit crate.
pub fn watch_landlock(
    id: &str,
    writer: &ExecWriter,
) -> Result<shadow_kaudit::Watch, shadow_kaudit::Unavailable> {
    let mut records = writer.records();
    shadow_kaudit::Watch::start(
        shadow_landlock::kernel_abi(),
        id,
        |body| shadow_runtime_core::foreground::spawn_signals_blocked("shadow-kaudit", body),
        move |d: shadow_kaudit::Denial| {
            let key = format!("landlock:{}", d.blockers.join(","));
            records(
                "denial",
                serde_json::to_value(&d).unwrap_or_default(),
                Some(key),
            );
        },
    )
}

/// CPU time and peak RSS of the reaped children (the sandbox's processes are ours: shadow is
/// their subreaper).
pub fn children_usage() -> Value {
    let u = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN);
    match u {
        Ok(u) => {
            let ms = |t: nix::sys::time::TimeVal| t.tv_sec() * 1000 + t.tv_usec() / 1000;
            json!({
                "user_cpu_ms": ms(u.user_time()),
                "system_cpu_ms": ms(u.system_time()),
                "max_rss_kb": u.max_rss(),
                "source": "getrusage(RUSAGE_CHILDREN)",
            })
        }
        Err(_) => Value::Null,
    }
}

/// The session whose log records apply `journal_id` (for `rollback`).
pub fn session_of_apply(ctx: &Context, journal_id: &str) -> Option<String> {
    let dir = ctx.store.root().join("audit");
    let mut found = None;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "jsonl") {
            if let Ok(recs) = shadow_audit::read(&p) {
                if recs
                    .iter()
                    .any(|r| r.kind == "apply" && r.data["journal"] == journal_id)
                {
                    found = recs.first().map(|r| r.session.clone());
                }
            }
        }
    }
    found
}

/// Options of `shadow log`.
#[derive(Debug, Clone, Default)]
pub struct LogOptions {
    /// Session id (default: the newest of the current project).
    pub session: Option<String>,
    /// JSON Lines as stored.
    pub json: bool,
    /// Check the chain instead of printing.
    pub verify: bool,
    /// Keep printing records as they are written.
    pub follow: bool,
}

fn summary(r: &shadow_audit::Record) -> String {
    let d = &r.data;
    let detail = match r.kind.as_str() {
        "session.start" => format!(
            "profile={} network={} command={}",
            d["profile"].as_str().unwrap_or("?"),
            match &d["network"] {
                Value::String(s) => s.clone(),
                Value::Object(o) => format!("proxy({})", o.get("hosts").unwrap_or(&Value::Null)),
                _ => "?".into(),
            },
            d["command"]
        ),
        "exec" => format!(
            "pid={} ppid={} {}: {}",
            d["pid"],
            d["ppid"],
            d["path"].as_str().unwrap_or("?"),
            d["argv"]
                .as_array()
                .map(|a| a
                    .iter()
                    .map(|x| x.as_str().unwrap_or("?"))
                    .collect::<Vec<_>>()
                    .join(" "))
                .unwrap_or_default()
        ),
        "denial" if d["mechanism"] == "landlock" => format!(
            "landlock pid={} {} {} {}",
            d["pid"],
            d["syscall"].as_str().unwrap_or("?"),
            d["blockers"]
                .as_array()
                .map(|b| b
                    .iter()
                    .map(|x| x.as_str().unwrap_or("?"))
                    .collect::<Vec<_>>()
                    .join(","))
                .unwrap_or_default(),
            d["object"]
                .as_object()
                .map(|o| o
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("?")))
                    .collect::<Vec<_>>()
                    .join(" "))
                .unwrap_or_default()
        ),
        "denial" => format!(
            "{} pid={} {} args={}",
            d["mechanism"].as_str().unwrap_or("?"),
            d["pid"],
            d["syscall"].as_str().unwrap_or("?"),
            d["args"]
        ),
        "net" => format!(
            "{} {} {}:{} status={} up={} down={} ({})",
            if d["allowed"] == true {
                "allow"
            } else {
                "deny "
            },
            d["method"].as_str().unwrap_or("?"),
            d["host"].as_str().unwrap_or("?"),
            d["port"],
            d["status"],
            d["bytes_up"],
            d["bytes_down"],
            d["error"].as_str().or(d["reason"].as_str()).unwrap_or("")
        ),
        "session.end" => format!(
            "state={} exit={} duration_ms={}",
            d["state"].as_str().unwrap_or("?"),
            d["exit_status"],
            d["duration_ms"]
        ),
        "changes" => format!("{} path(s)", d["count"]),
        "apply" => format!(
            "journal={} applied={}",
            d["journal"].as_str().unwrap_or("?"),
            d["applied"].as_array().map_or(0, |a| a.len())
        ),
        "rollback" => format!(
            "journal={} restored={}",
            d["journal"].as_str().unwrap_or("?"),
            d["restored"].as_array().map_or(0, |a| a.len())
        ),
        _ => d.to_string(),
    };
    format!("{:>3} {} {:<14} {detail}", r.seq, r.time, r.kind)
}

/// `shadow log [SESSION] [--json] [--verify] [--follow]`.
pub fn log(o: &LogOptions) -> Outcome {
    let ctx = Context::open()?;
    let id = match &o.session {
        // A discarded session has no session directory any more, only its log.
        Some(id) if log_path(&ctx, id).exists() => id.clone(),
        other => ctx.session(other.as_deref())?.id().to_string(),
    };
    let path = log_path(&ctx, &id);
    if !path.exists() {
        return Err(Failure::new(format!("session {id} has no audit log")));
    }
    if o.verify {
        let n = shadow_audit::verify(&path)
            .map_err(|e| Failure::new(format!("audit log of session {id} is NOT intact: {e}")))?;
        println!("audit log of session {id}: {n} record(s), chain intact");
        return Ok(0);
    }
    let mut shown = 0;
    loop {
        let recs = shadow_audit::read(&path).map_err(|e| Failure::new(e.to_string()))?;
        for r in recs.iter().skip(shown) {
            if o.json {
                println!(
                    "{}",
                    serde_json::to_string(r).map_err(|e| Failure::new(e.to_string()))?
                );
            } else {
                println!("{}", summary(r));
            }
        }
        shown = recs.len();
        let ended = recs
            .iter()
            .any(|r| r.kind == "session.end" || r.kind == "discard");
        if !o.follow || (ended && !session_running(&ctx, &id)) {
            return Ok(0);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn session_running(ctx: &Context, id: &str) -> bool {
    ctx.store.load(id).is_ok_and(|s| s.is_running())
}
