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

use std::sync::atomic::{AtomicBool, Ordering};
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
    /// Times the socket buffer overflowed (records lost).
    pub overflows: u64,
    /// Whether the end marker came back (false: gave up waiting after [`SYNC_TIMEOUT`]).
    pub synced: bool,
    /// A read error that stopped the watch early.
    pub error: Option<String>,
}

/// How long [`Watch::finish`] waits for its marker.
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
    creators: Vec<i32>,
    pidns: Option<u64>,
}

/// A thread reading the audit stream for one sandbox's Landlock denials.
#[derive(Debug)]
pub struct Watch {
    shared: Arc<Mutex<Shared>>,
    finishing: Arc<AtomicBool>,
    token: String,
    thread: Option<std::thread::JoinHandle<Stats>>,
}

fn pidns_of(pid: i32) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|m| m.ino())
}

impl Watch {
    /// Starts reading (before the sandbox starts, so that nothing is missed). `token` names
    /// this watch's end marker (the session id is a good one). `spawn` starts the thread (the
    /// caller may need signals blocked in it); `sink` gets each denial of the sandbox.
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
        let shared = Arc::new(Mutex::new(Shared::default()));
        let finishing = Arc::new(AtomicBool::new(false));
        let marker = format!("op=shadow-sync token={token}");
        let (sh, fin, mk) = (shared.clone(), finishing.clone(), marker.clone());
        let body = move || {
            let mut stats = Stats::default();
            let mut asm = record::Assembler::default();
            let mut attr = landlock::Attributor::new(|pid| {
                let ns = sh.lock().ok().and_then(|s| s.pidns);
                ns.is_some() && pidns_of(pid) == ns
            });
            let mut since_finish: Option<Instant> = None;
            let mut handle = |event: Vec<record::Record>, attr: &mut landlock::Attributor<_>| {
                if let Ok(s) = sh.lock() {
                    for c in &s.creators {
                        attr.own_creator(*c);
                    }
                }
                for d in attr.denials(&event) {
                    stats.denials += 1;
                    sink(d);
                }
            };
            'read: loop {
                if fin.load(Ordering::SeqCst) {
                    let t = *since_finish.get_or_insert_with(Instant::now);
                    if t.elapsed() > SYNC_TIMEOUT {
                        break;
                    }
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
                        r.kind == record::kind::USER && r.get("msg").is_some_and(|m| m == mk);
                    for ev in asm.push(r) {
                        handle(ev, &mut attr);
                    }
                    if is_marker {
                        stats.synced = true;
                        break 'read;
                    }
                }
            }
            if let Some(ev) = asm.flush() {
                handle(ev, &mut attr);
            }
            stats.overflows = reader.overflows;
            stats
        };
        let thread = spawn(Box::new(body))
            .map_err(|e| Unavailable(format!("not recorded: cannot start the reader: {e}")))?;
        Ok(Watch {
            shared,
            finishing,
            token: marker,
            thread: Some(thread),
        })
    }

    /// The container's init pid (initial pid namespace), as the runtime reported it: the
    /// sandbox's Landlock domain is the one this pid created.
    pub fn own(&self, init_pid: i32) {
        if let Ok(mut s) = self.shared.lock() {
            s.creators.push(init_pid);
            if s.pidns.is_none() {
                s.pidns = pidns_of(init_pid);
            }
        }
    }

    /// Call once the sandbox's processes are gone: marks the stream and reads up to the mark.
    pub fn finish(mut self) -> Stats {
        self.finishing.store(true, Ordering::SeqCst);
        let sent = netlink::send_user(&self.token);
        let mut st = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        if let (Err(e), None) = (sent, &st.error) {
            st.error = Some(format!("cannot write the end marker: {e}"));
        }
        st
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.finishing.store(true, Ordering::SeqCst);
            let _ = netlink::send_user(&self.token);
            let _ = t.join();
        }
    }
}
