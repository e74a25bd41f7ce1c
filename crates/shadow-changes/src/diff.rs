//! Git-style unified diff rendering.
//!
//! Output follows `git diff` closely: `diff --git a/X b/X` headers,
//! `new file mode` / `deleted file mode` / `old mode` + `new mode`,
//! `--- a/X` / `+++ b/X` (or `/dev/null`), hunks with three lines of
//! context and `\ No newline at end of file`, `Binary files a/X and b/X
//! differ`, symlinks as mode `120000` whose "content" is the target
//! without a newline, and file↔symlink type changes as a deletion followed
//! by an addition. Paths that need it are quoted the way git quotes them
//! (`core.quotePath`). Differences from git: no `index <sha1>..<sha1>`
//! line, no function-name context after `@@`, regular files show their
//! real permission bits (`100600`, not only `100644`/`100755`), and
//! similar's Myers diff may place an ambiguous hunk differently than
//! git's indent heuristic. Directories are not shown (git tracks none).
//!
//! Colour is opt-in by the caller ([`DiffOptions::color`]); nothing here
//! looks at the terminal or the environment.

use std::fmt::Write as _;
use std::path::Path;

use similar::{ChangeTag, DiffOp, TextDiff};

use crate::error::Result;
use crate::model::{Change, ChangeSet, Entry, FileType};
use crate::safefs::Root;

/// Lines of context around each hunk (git's default).
pub const CONTEXT: usize = 3;

/// Rendering options.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiffOptions {
    /// Emit ANSI colour escapes (git's default colours).
    pub color: bool,
}

pub(crate) const BOLD: &str = "\x1b[1m";
pub(crate) const CYAN: &str = "\x1b[36m";
pub(crate) const RED: &str = "\x1b[31m";
pub(crate) const GREEN: &str = "\x1b[32m";
pub(crate) const RESET: &str = "\x1b[m";

/// Count inserted and deleted lines between two texts.
pub fn line_counts(old: &str, new: &str) -> (u64, u64) {
    let diff = TextDiff::from_lines(old, new);
    let (mut ins, mut del) = (0u64, 0u64);
    for op in diff.ops() {
        match *op {
            DiffOp::Equal { .. } => {}
            DiffOp::Delete { old_len, .. } => del += old_len as u64,
            DiffOp::Insert { new_len, .. } => ins += new_len as u64,
            DiffOp::Replace {
                old_len, new_len, ..
            } => {
                del += old_len as u64;
                ins += new_len as u64;
            }
        }
    }
    (ins, del)
}

/// Quote a path the way git does when it contains control characters,
/// `"`, `\` or non-ASCII bytes; `prefix` (`a/`, `b/` or empty) goes inside
/// the quotes.
pub fn quote_path(prefix: &str, path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let needs = bytes
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\' || b >= 0x7f);
    if !needs {
        return format!("{prefix}{}", String::from_utf8_lossy(bytes));
    }
    let mut s = String::from("\"");
    s.push_str(prefix);
    for &b in bytes {
        match b {
            0x07 => s.push_str("\\a"),
            0x08 => s.push_str("\\b"),
            b'\t' => s.push_str("\\t"),
            b'\n' => s.push_str("\\n"),
            0x0b => s.push_str("\\v"),
            0x0c => s.push_str("\\f"),
            b'\r' => s.push_str("\\r"),
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b if !(0x20..0x7f).contains(&b) => {
                let _ = write!(s, "\\{b:03o}");
            }
            b => s.push(b as char),
        }
    }
    s.push('"');
    s
}

/// One hunk of a text diff, as shown in the unified diff and as selected
/// in a [`crate::selection::Selection`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// Index of the hunk within its file (0-based).
    pub index: usize,
    /// First old line (0-based) covered by the hunk.
    pub old_start: usize,
    /// Number of old lines covered.
    pub old_len: usize,
    /// First new line (0-based) covered by the hunk.
    pub new_start: usize,
    /// Number of new lines covered.
    pub new_len: usize,
    /// The `@@ -a,b +c,d @@` header.
    pub header: String,
    /// The hunk body: context, `-` and `+` lines (each ending in `\n`).
    pub body: String,
}

fn range(start: usize, len: usize) -> String {
    match len {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        _ => format!("{},{}", start + 1, len),
    }
}

/// Split the diff of `old` → `new` into hunks with [`CONTEXT`] lines of
/// context (the same hunks the unified diff shows).
pub fn hunks(old: &str, new: &str) -> Vec<Hunk> {
    hunks_colored(old, new, false)
}

fn hunks_colored(old: &str, new: &str, color: bool) -> Vec<Hunk> {
    let diff = TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    for (index, group) in diff.grouped_ops(CONTEXT).iter().enumerate() {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old_start = first.old_range().start;
        let old_len = last.old_range().end - old_start;
        let new_start = first.new_range().start;
        let new_len = last.new_range().end - new_start;
        let header = format!(
            "@@ -{} +{} @@",
            range(old_start, old_len),
            range(new_start, new_len)
        );
        let mut body = String::new();
        for op in group {
            for change in diff.iter_changes(op) {
                let (sign, col) = match change.tag() {
                    ChangeTag::Equal => (' ', ""),
                    ChangeTag::Delete => ('-', RED),
                    ChangeTag::Insert => ('+', GREEN),
                };
                let value = change.value();
                let line = value.strip_suffix('\n').unwrap_or(value);
                if color && !col.is_empty() {
                    let _ = writeln!(body, "{col}{sign}{line}{RESET}");
                } else {
                    let _ = writeln!(body, "{sign}{line}");
                }
                if change.missing_newline() {
                    body.push_str("\\ No newline at end of file\n");
                }
            }
        }
        out.push(Hunk {
            index,
            old_start,
            old_len,
            new_start,
            new_len,
            header,
            body,
        });
    }
    out
}

/// Content of one side of a change as git diffs it (file bytes, or the
/// symlink target), read safely from the lower/upper layer.
pub(crate) fn side_bytes(root: &Root, rel: &Path, e: Option<&Entry>) -> Result<Option<Vec<u8>>> {
    use std::os::unix::ffi::OsStrExt;
    Ok(match e.map(|e| e.file_type) {
        Some(FileType::File) => Some(root.read_file(rel)?.0),
        Some(FileType::Symlink) => Some(
            e.and_then(|e| e.symlink_target.as_ref())
                .map(|t| t.as_os_str().as_bytes().to_vec())
                .unwrap_or_default(),
        ),
        _ => None,
    })
}

struct Out<'a> {
    s: &'a mut String,
    color: bool,
}

impl Out<'_> {
    fn meta(&mut self, line: &str) {
        if self.color {
            let _ = writeln!(self.s, "{BOLD}{line}{RESET}");
        } else {
            let _ = writeln!(self.s, "{line}");
        }
    }
}

/// Render one side-pair (`old` may be absent for an addition, `new` for a
/// deletion) as one `diff --git` block.
fn block(
    o: &mut Out<'_>,
    path: &Path,
    old: Option<(&Entry, &[u8])>,
    new: Option<(&Entry, &[u8])>,
    binary: bool,
) {
    let a = quote_path("a/", path);
    let b = quote_path("b/", path);
    o.meta(&format!("diff --git {a} {b}"));
    match (old, new) {
        (None, Some((n, _))) => o.meta(&format!("new file mode {}", n.git_mode())),
        (Some((ol, _)), None) => o.meta(&format!("deleted file mode {}", ol.git_mode())),
        (Some((ol, _)), Some((n, _))) if ol.git_mode() != n.git_mode() => {
            o.meta(&format!("old mode {}", ol.git_mode()));
            o.meta(&format!("new mode {}", n.git_mode()));
        }
        _ => {}
    }
    let old_bytes = old.map(|(_, b)| b).unwrap_or_default();
    let new_bytes = new.map(|(_, b)| b).unwrap_or_default();
    if old_bytes == new_bytes && old.is_some() == new.is_some() {
        return; // mode-only
    }
    if old_bytes.is_empty() && new_bytes.is_empty() {
        return; // empty file added or deleted: git prints only the header
    }
    let from = if old.is_some() {
        a.clone()
    } else {
        "/dev/null".into()
    };
    let to = if new.is_some() {
        b.clone()
    } else {
        "/dev/null".into()
    };
    if binary {
        o.meta(&format!("Binary files {from} and {to} differ"));
        return;
    }
    o.meta(&format!("--- {from}"));
    o.meta(&format!("+++ {to}"));
    let old_text = String::from_utf8_lossy(old_bytes);
    let new_text = String::from_utf8_lossy(new_bytes);
    for h in hunks_colored(&old_text, &new_text, o.color) {
        if o.color {
            let _ = writeln!(o.s, "{CYAN}{}{RESET}", h.header);
        } else {
            let _ = writeln!(o.s, "{}", h.header);
        }
        o.s.push_str(&h.body);
    }
}

/// Render one change (reading content from the change set's layers).
pub fn render_change(cs: &ChangeSet, change: &Change, opts: &DiffOptions) -> Result<String> {
    let lower = Root::open(&cs.lower)?;
    let upper = Root::open(&cs.upper)?;
    render_one(&lower, &upper, change, opts)
}

fn render_one(lower: &Root, upper: &Root, c: &Change, opts: &DiffOptions) -> Result<String> {
    let mut s = String::new();
    let mut o = Out {
        s: &mut s,
        color: opts.color,
    };
    let shown = |e: &Option<Entry>| {
        e.as_ref()
            .filter(|e| matches!(e.file_type, FileType::File | FileType::Symlink))
            .cloned()
    };
    let old = shown(&c.old);
    let new = shown(&c.new);
    let old_bytes = side_bytes(lower, &c.path, old.as_ref())?;
    let new_bytes = side_bytes(upper, &c.path, new.as_ref())?;
    let old_side = old.as_ref().zip(old_bytes.as_deref());
    let new_side = new.as_ref().zip(new_bytes.as_deref());
    let bin = |e: &Entry, b: &[u8]| e.file_type == FileType::File && crate::model::is_binary(b);
    match (old_side, new_side) {
        (None, None) => {}
        (Some(ol), Some(n)) if ol.0.file_type != n.0.file_type => {
            block(&mut o, &c.path, Some(ol), None, bin(ol.0, ol.1));
            block(&mut o, &c.path, None, Some(n), bin(n.0, n.1));
        }
        (ol, n) => {
            let binary = ol.is_some_and(|(e, b)| bin(e, b)) || n.is_some_and(|(e, b)| bin(e, b));
            block(&mut o, &c.path, ol, n, binary);
        }
    }
    Ok(s)
}

/// Render the whole change set as one unified diff.
pub fn render_diff(cs: &ChangeSet, opts: &DiffOptions) -> Result<String> {
    let lower = Root::open(&cs.lower)?;
    let upper = Root::open(&cs.upper)?;
    let mut s = String::new();
    for c in &cs.changes {
        s.push_str(&render_one(&lower, &upper, c, opts)?);
    }
    Ok(s)
}
