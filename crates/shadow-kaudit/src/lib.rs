//! Landlock denials of one sandbox, from the kernel's audit records.
//!
//! Since Landlock ABI 7 (Linux 6.15) the kernel reports denials, and only as audit records
//! (`LANDLOCK_ACCESS` 1423, `LANDLOCK_DOMAIN` 1424): there is no other channel. This crate
//! reads them the way journald does, from the read-only multicast group of NETLINK_AUDIT, so it
//! neither needs nor disturbs an audit daemon, and keeps those that belong to one sandbox (see
//! [`landlock`] for how).
//!
//! It does not switch audit on: that is a machine-wide setting (`auditctl -e 1`, or any running
//! auditd), and with it off the kernel produces no Landlock records at all. [`Watch::start`]
//! says why it cannot record instead, and the caller writes that reason into the session log.
//!
//! The end of a session is exact, not a guess: [`Watch::finish`] writes a user-space audit
//! record (`op=shadow-sync`) and reads until that record comes back. The kernel queues records
//! in order, so every denial of the (by then dead) sandbox has been read.

pub mod landlock;
pub mod netlink;
pub mod record;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use landlock::Denial;

/// Why denials cannot be read here, as one line for the session log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a finished [`Watch`] saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Denials handed to the sink.
    pub denials: u64,
    /// Times the socket buffer overflowed (records lost before they reached us).
    pub overflows: u64,
    /// Records the kernel lost during the watch, machine-wide (its backlog was full).
    pub kernel_lost: u32,
    /// Denials dropped while waiting for their domain's owner (more than
    /// [`landlock::MAX_PENDING`] held).
    pub dropped: u64,
    /// Whether the end marker came back (false: gave up after [`SYNC_TIMEOUT`], or could not
    /// send it).
    pub synced: bool,
    /// A read error that stopped the watch early, or why the marker could not be sent.
    pub error: Option<String>,
}

/// How long [`Watch::finish`] (and the check in [`Watch::start`]) waits for a marker.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether this host can report Landlock denials to this process: Landlock ABI ≥ 7, audit on,
/// and the rights to read and mark the audit stream.
pub fn check(landlock_abi: i64) -> Result<(), Unavailable> {
    if landlock_abi < 7 {
        return Err(Unavailable(format!(
            "not reported by this kernel (Landlock ABI {landlock_abi} < 7)"
        )));
    }
    let st = netlink::status().map_err(|e| {
        Unavailable(if e.raw_os_error() == Some(libc::EPERM) {
            "not recorded: reading the kernel's audit records needs root (CAP_AUDIT_CONTROL, CAP_AUDIT_READ)".into()
        } else {
            format!("not recorded: the kernel's audit status is unreadable: {e}")
        })
    })?;
    if st.enabled == 0 {
        return Err(Unavailable(
            "not recorded: kernel audit is off (audit_enabled=0; `auditctl -e 1` or a running auditd turns it on)".into(),
        ));
    }
    Ok(())
}

#[derive(Debug, Default)]
struct Shared {
    /// The sandbox's init (the creator of its own domain).
    creators: HashSet<i32>,
    /// Every pid seen executing in the sandbox (from the exec audit), for nested domains whose
    /// creator is gone by the time its record is read.
    exec_pids: HashSet<i32>,
    /// The sandbox's pid namespace (inode), once its init is known.
    pidns: Option<u64>,
}

impl Shared {
    fn classify(&self, pid: i32) -> landlock::Verdict {
        use landlock::Verdict;
        if self.creators.contains(&pid) || self.exec_pids.contains(&pid) {
            return Verdict::Ours;
        }
        match (self.pidns, pidns_of(pid)) {
            (Some(ours), Some(ns)) if ns == ours => Verdict::Ours,
            (Some(_), Some(_)) => Verdict::NotOurs,
            _ => Verdict::Unknown,
        }
    }
}

/// Hands pids seen executing in the sandbox to a [`Watch`] (see [`Watch::pid_feed`]).
#[derive(Debug, Clone)]
pub struct PidFeed(Arc<Mutex<Shared>>);

impl PidFeed {
    /// A pid (initial pid namespace) that executed a program in the sandbox.
    pub fn add(&self, pid: i32) {
        if let Ok(mut s) = self.0.lock() {
            s.exec_pids.insert(pid);
        }
    }
}

const RUNNING: u8 = 0;
const FINISHING: u8 = 1;
const ABORT: u8 = 2;

/// A thread reading the audit stream for one sandbox's Landlock denials.
#[derive(Debug)]
pub struct Watch {
    shared: Arc<Mutex<Shared>>,
    state: Arc<AtomicU8>,
    marker: String,
    lost_before: u32,
    thread: Option<std::thread::JoinHandle<Stats>>,
}

fn pidns_of(pid: i32) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|m| m.ino())
}

/// Reads until a USER record whose `msg` is `marker`; false after `timeout`.
fn read_to_marker(reader: &mut netlink::Reader, marker: &str, timeout: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        match reader.next(Duration::from_millis(100)) {
            Ok(recs) => {
                if recs
                    .iter()
                    .any(|r| r.kind == record::kind::USER && r.get("msg") == Some(marker))
                {
                    return true;
                }
            }
            Err(_) => return false,
        }
    }
    false
}

impl Watch {
    /// Starts reading (before the sandbox starts, so that nothing is missed). `token` names
    /// this watch's markers (the session id is a good one). `spawn` starts the thread (the
    /// caller may need signals blocked in it); `sink` gets each denial of the sandbox.
    ///
    /// It first writes a marker and waits for it to come back: records that cannot reach this
    /// process (audit rules excluding user records, another network namespace) are found out
    /// here, not by a session that silently records nothing.
    pub fn start<S, F>(
        landlock_abi: i64,
        token: &str,
        spawn: S,
        mut sink: F,
    ) -> Result<Watch, Unavailable>
    where
        S: FnOnce(
            Box<dyn FnOnce() -> Stats + Send>,
        ) -> std::io::Result<std::thread::JoinHandle<Stats>>,
        F: FnMut(Denial) + Send + 'static,
    {
        check(landlock_abi)?;
        let mut reader = netlink::Reader::open().map_err(|e| {
            Unavailable(format!(
                "not recorded: cannot join the audit multicast group: {e}"
            ))
        })?;
        let probe = format!("op=shadow-sync token={token} phase=start");
        netlink::send_user(&probe)
            .map_err(|e| Unavailable(format!("not recorded: cannot write an audit record: {e}")))?;
        if !read_to_marker(&mut reader, &probe, SYNC_TIMEOUT) {
            return Err(Unavailable(
                "not recorded: the kernel's audit records do not reach this process (audit rules excluding user records, or not in the initial network namespace)".into(),
            ));
        }
        let lost_before = netlink::status().map(|s| s.lost).unwrap_or(0);
        let shared = Arc::new(Mutex::new(Shared::default()));
        let state = Arc::new(AtomicU8::new(RUNNING));
        let marker = format!("op=shadow-sync token={token} phase=end");
        let (sh, st, mk) = (shared.clone(), state.clone(), marker.clone());
        let body = move || {
            let mut stats = Stats::default();
            let mut asm = record::Assembler::default();
            let classify = |pid: i32| {
                sh.lock()
                    .map(|s| s.classify(pid))
                    .unwrap_or(landlock::Verdict::Unknown)
            };
            let mut attr = landlock::Attributor::new(classify);
            let mut since_finish: Option<Instant> = None;
            let mut emit = |ds: Vec<Denial>, stats: &mut Stats| {
                for d in ds {
                    stats.denials += 1;
                    sink(d);
                }
            };
            'read: loop {
                match st.load(Ordering::SeqCst) {
                    ABORT => break,
                    FINISHING => {
                        let t = *since_finish.get_or_insert_with(Instant::now);
                        if t.elapsed() > SYNC_TIMEOUT {
                            break;
                        }
                    }
                    _ => {}
                }
                let records = match reader.next(Duration::from_millis(200)) {
                    Ok(r) => r,
                    Err(e) => {
                        stats.error = Some(e.to_string());
                        break;
                    }
                };
                for r in records {
                    let is_marker =
                        r.kind == record::kind::USER && r.get("msg") == Some(mk.as_str());
                    for ev in asm.push(r) {
                        let ds = attr.denials(&ev);
                        emit(ds, &mut stats);
                    }
                    if is_marker {
                        stats.synced = true;
                        break 'read;
                    }
                }
            }
            for ev in asm.flush() {
                let ds = attr.denials(&ev);
                emit(ds, &mut stats);
            }
            let dropped = attr.dropped;
            let ds = attr.finish();
            emit(ds, &mut stats);
            stats.dropped = dropped;
            stats.overflows = reader.overflows;
            stats
        };
        let thread = spawn(Box::new(body))
            .map_err(|e| Unavailable(format!("not recorded: cannot start the reader: {e}")))?;
        Ok(Watch {
            shared,
            state,
            marker,
            lost_before,
            thread: Some(thread),
        })
    }

    /// The container's init pid (initial pid namespace), as the runtime reported it: the
    /// sandbox's Landlock domain is the one this pid created.
    pub fn own(&self, init_pid: i32) {
        if let Ok(mut s) = self.shared.lock() {
            s.creators.insert(init_pid);
            if s.pidns.is_none() {
                s.pidns = pidns_of(init_pid);
            }
        }
    }

    /// Where to report pids that execute in the sandbox.
    pub fn pid_feed(&self) -> PidFeed {
        PidFeed(self.shared.clone())
    }

    fn stop(&mut self) -> Option<Stats> {
        let t = self.thread.take()?;
        self.state.store(FINISHING, Ordering::SeqCst);
        let sent = netlink::send_user(&self.marker);
        if sent.is_err() {
            self.state.store(ABORT, Ordering::SeqCst);
        }
        let mut st = t.join().unwrap_or_default();
        if let (Err(e), None) = (sent, &st.error) {
            st.error = Some(format!("cannot write the end marker: {e}"));
        }
        st.kernel_lost = netlink::status()
            .map(|s| s.lost.wrapping_sub(self.lost_before))
            .unwrap_or(0);
        Some(st)
    }

    /// Call once the sandbox's processes are gone: marks the stream and reads up to the mark.
    pub fn finish(mut self) -> Stats {
        self.stop().unwrap_or_default()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
