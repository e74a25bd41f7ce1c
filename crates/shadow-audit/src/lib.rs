//! The audit log of a session: JSON Lines, one record per event, hash-chained.
//!
//! Each record carries `seq` (0, 1, …), the previous record's `hash` as `prev` (64 zeros for
//! the first) and its own `hash` = SHA-256 of `prev` + `\n` + the record's canonical JSON
//! without `hash`. A `<log>.head` file holds the last `seq` and `hash`, so [`verify`] detects a
//! changed, removed, inserted or reordered record, and a cut-off tail. Threat model: the log is
//! outside every sandbox (the store is masked); the chain makes later edits evident, it is not
//! a signature (whoever can rewrite both the log and its head can forge it).
//!
//! Writers take an exclusive `flock` on the log for each append, so several processes (the
//! session's `shadow run`, a later `shadow apply`) append safely.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// `prev` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Position in the log, from 0.
    pub seq: u64,
    /// RFC 3339 time of the event (of writing, for most records; a batch keeps each record's own
    /// time, so times need not rise with `seq`).
    pub time: String,
    /// Session id.
    pub session: String,
    /// What happened: `session.start`, `session.end`, `changes`, `apply`, `rollback`, `discard`.
    pub kind: String,
    /// Details, per kind.
    pub data: Value,
    /// Hash of the previous record.
    pub prev: String,
    /// This record's hash.
    #[serde(default)]
    pub hash: String,
}

/// The fields that are hashed, in a fixed order.
#[derive(Serialize)]
struct Hashed<'a> {
    seq: u64,
    time: &'a str,
    session: &'a str,
    kind: &'a str,
    data: &'a Value,
}

impl Record {
    /// The hash this record must carry.
    pub fn compute_hash(&self) -> String {
        let body = serde_json::to_string(&Hashed {
            seq: self.seq,
            time: &self.time,
            session: &self.session,
            kind: &self.kind,
            data: &self.data,
        })
        .unwrap_or_default();
        let mut h = Sha256::new();
        h.update(self.prev.as_bytes());
        h.update(b"\n");
        h.update(body.as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// An I/O or format problem.
#[derive(Debug)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error(format!("{}: {e}", path.display()))
}

/// The log of session `session` in the store at `store`: outside the session's directory, so
/// a discarded session keeps its record.
pub fn session_log(store: &Path, session: &str) -> PathBuf {
    store.join("audit").join(format!("{session}.jsonl"))
}

/// The file holding the last record of `log` (see [`append`]).
pub fn head_path(log: &Path) -> PathBuf {
    let mut s = log.as_os_str().to_owned();
    s.push(".head");
    PathBuf::from(s)
}

fn last_line(f: &mut File) -> std::io::Result<Option<String>> {
    let len = f.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(None);
    }
    let mut start = len.saturating_sub(1 << 16);
    loop {
        f.seek(SeekFrom::Start(start))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)?;
        let trimmed = buf.strip_suffix(b"\n").unwrap_or(&buf);
        if let Some(i) = trimmed.iter().rposition(|b| *b == b'\n') {
            return Ok(Some(
                String::from_utf8_lossy(&trimmed[i + 1..]).into_owned(),
            ));
        }
        if start == 0 {
            return Ok(Some(String::from_utf8_lossy(trimmed).into_owned()));
        }
        start = start.saturating_sub(1 << 20);
    }
}

/// Appends a record of `kind` with `data` to the log at `path` (created with its directory).
pub fn append(path: &Path, session: &str, kind: &str, data: Value) -> Result<Record, Error> {
    let mut recs = append_batch(path, session, vec![(kind.to_string(), data)])?;
    Ok(recs.pop().expect("one record in, one out"))
}

/// Appends several records under one lock, one read of the chain's end and one head update: a
/// writer with a burst of records to log (the exec audit of a build) pays for opening, locking
/// and finding the chain's end once per burst instead of once per record.
pub fn append_batch(
    path: &Path,
    session: &str,
    items: Vec<(String, Value)>,
) -> Result<Vec<Record>, Error> {
    let now = std::time::SystemTime::now();
    append_batch_at(
        path,
        session,
        items.into_iter().map(|(k, d)| (k, d, now)).collect(),
    )
}

/// As [`append_batch`], each record stamped with the time it happened rather than the time it
/// is written (a writer that collects a burst first must not make its records look later).
pub fn append_batch_at(
    path: &Path,
    session: &str,
    items: Vec<(String, Value, std::time::SystemTime)>,
) -> Result<Vec<Record>, Error> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| io(d, e))?;
    }
    let mut f = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| io(path, e))?;
    rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| io(path, e.into()))?;
    let (mut seq, mut prev) = match last_line(&mut f).map_err(|e| io(path, e))? {
        None => (0, GENESIS.to_string()),
        Some(l) => {
            let r: Record = serde_json::from_str(&l)
                .map_err(|e| Error(format!("{}: last record unreadable: {e}", path.display())))?;
            (r.seq + 1, r.hash)
        }
    };
    let mut out = Vec::with_capacity(items.len());
    let mut buf = String::new();
    for (kind, data, at) in items {
        let mut rec = Record {
            seq,
            time: chrono::DateTime::<chrono::Utc>::from(at)
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            session: session.to_string(),
            kind,
            data,
            prev: std::mem::take(&mut prev),
            hash: String::new(),
        };
        rec.hash = rec.compute_hash();
        buf.push_str(&serde_json::to_string(&rec).map_err(|e| Error(e.to_string()))?);
        buf.push('\n');
        seq += 1;
        prev = rec.hash.clone();
        out.push(rec);
    }
    let Some(last) = out.last() else {
        return Ok(out);
    };
    // One write: O_APPEND puts the whole burst at the end in one piece.
    f.write_all(buf.as_bytes()).map_err(|e| io(path, e))?;
    let head = head_path(path);
    let tmp = head.with_extension("head.tmp");
    std::fs::write(&tmp, format!("{} {}\n", last.seq, last.hash)).map_err(|e| io(&tmp, e))?;
    std::fs::rename(&tmp, &head).map_err(|e| io(&head, e))?;
    Ok(out)
}

/// All records, in file order (no checks beyond parsing).
pub fn read(path: &Path) -> Result<Vec<Record>, Error> {
    let f = File::open(path).map_err(|e| io(path, e))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|e| io(path, e))?;
        let r: Record = serde_json::from_str(&line)
            .map_err(|e| Error(format!("{}:{}: not a record: {e}", path.display(), i + 1)))?;
        out.push(r);
    }
    Ok(out)
}

/// Checks the chain and the head; `Ok(n)` with the number of records, or the first problem
/// with its line number.
pub fn verify(path: &Path) -> Result<usize, Error> {
    let records = read(path)?;
    let mut prev = GENESIS.to_string();
    for (i, r) in records.iter().enumerate() {
        let line = i + 1;
        if r.seq != i as u64 {
            return Err(Error(format!(
                "line {line}: record seq {} where {i} was expected (a record was removed, inserted or moved)",
                r.seq
            )));
        }
        if r.prev != prev {
            return Err(Error(format!(
                "line {line}: record does not follow the one before (chain broken)"
            )));
        }
        if r.compute_hash() != r.hash {
            return Err(Error(format!(
                "line {line}: record was changed after it was written (hash mismatch)"
            )));
        }
        prev = r.hash.clone();
    }
    let head = std::fs::read_to_string(head_path(path)).map_err(|e| io(&head_path(path), e))?;
    let want = match records.last() {
        Some(r) => format!("{} {}", r.seq, r.hash),
        None => String::new(),
    };
    if head.trim() != want {
        return Err(Error(format!(
            "the log ends at record {} but its head names {} (records were cut off the end)",
            records.len().saturating_sub(1),
            head.split_whitespace().next().unwrap_or("?")
        )));
    }
    Ok(records.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn log_with(n: usize) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/s.jsonl");
        for i in 0..n {
            append(&p, "s1", "event", json!({"i": i})).unwrap();
        }
        (d, p)
    }

    fn lines(p: &Path) -> Vec<String> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }

    fn write_lines(p: &Path, l: &[String]) {
        std::fs::write(p, l.join("\n") + "\n").unwrap();
    }

    #[test]
    fn a_clean_log_verifies() {
        let (_d, p) = log_with(4);
        assert_eq!(verify(&p).unwrap(), 4);
        let r = read(&p).unwrap();
        assert_eq!(r[0].prev, GENESIS);
        assert_eq!(r[3].prev, r[2].hash);
    }

    #[test]
    fn batches_continue_the_chain() {
        let (_d, p) = log_with(2);
        let items = (0..3)
            .map(|i| ("exec".to_string(), json!({"n": i})))
            .collect();
        let recs = append_batch(&p, "s1", items).unwrap();
        assert_eq!(recs.iter().map(|r| r.seq).collect::<Vec<_>>(), [2, 3, 4]);
        assert!(append_batch(&p, "s1", vec![]).unwrap().is_empty());
        append(&p, "s1", "event", json!({})).unwrap();
        assert_eq!(verify(&p).unwrap(), 6);
        let head = std::fs::read_to_string(head_path(&p)).unwrap();
        assert!(head.starts_with("5 "), "{head}");
    }

    #[test]
    fn timed_batches_keep_each_records_time() {
        let (_d, p) = log_with(0);
        let t0 = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_796_000_000_123);
        let t1 = t0 + std::time::Duration::from_millis(40);
        let items = vec![
            ("exec".to_string(), json!({}), t0),
            ("exec".to_string(), json!({}), t1),
        ];
        let recs = append_batch_at(&p, "s1", items).unwrap();
        assert_eq!(recs[0].time, "2026-11-30T00:53:20.123Z");
        assert_eq!(recs[1].time, "2026-11-30T00:53:20.163Z");
        assert_eq!(verify(&p).unwrap(), 2);
    }

    #[test]
    fn a_changed_record_is_detected() {
        let (_d, p) = log_with(3);
        let mut l = lines(&p);
        l[1] = l[1].replace("\"i\":1", "\"i\":7");
        write_lines(&p, &l);
        assert_eq!(
            verify(&p).unwrap_err().0,
            "line 2: record was changed after it was written (hash mismatch)"
        );
    }

    #[test]
    fn removed_reordered_and_cut_records_are_detected() {
        let (_d, p) = log_with(4);
        let l = lines(&p);
        write_lines(&p, &[l[0].clone(), l[2].clone(), l[3].clone()]);
        assert!(verify(&p)
            .unwrap_err()
            .0
            .starts_with("line 2: record seq 2 where 1"));
        write_lines(
            &p,
            &[l[0].clone(), l[2].clone(), l[1].clone(), l[3].clone()],
        );
        assert!(verify(&p).unwrap_err().0.starts_with("line 2:"));
        write_lines(&p, &l[..3]);
        assert!(verify(&p).unwrap_err().0.contains("cut off the end"));
        write_lines(&p, &l);
        assert_eq!(verify(&p).unwrap(), 4);
    }

    #[test]
    fn concurrent_appends_keep_the_chain() {
        let (_d, p) = log_with(0);
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let p = p.clone();
                std::thread::spawn(move || {
                    for i in 0..25 {
                        append(&p, "s", "e", json!({"t": t, "i": i})).unwrap();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(verify(&p).unwrap(), 100);
    }
}
