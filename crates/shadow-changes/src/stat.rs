//! `git diff --stat` and `git diff --name-status` output.
//!
//! [`render_stat`] reproduces git's `show_stats()` layout algorithm
//! (name/graph width allocation for a given total width, `...` name
//! truncation, linear graph scaling, `Bin X -> Y bytes` for binary files,
//! and the pluralised summary line). Git uses 80 columns when its output is
//! not a terminal, which is [`StatOptions::default`]. It works purely on the
//! counts recorded in the [`ChangeSet`], so no file is read again.

use std::fmt::Write as _;

use crate::diff::{quote_path, GREEN, RED, RESET};
use crate::model::{Change, ChangeKind, ChangeSet, FileType};

/// Options for [`render_stat`].
#[derive(Debug, Clone, Copy)]
pub struct StatOptions {
    /// Total width (git: terminal width, or 80 when not a terminal).
    pub width: usize,
    /// Colour the `+`/`-` graph.
    pub color: bool,
}

impl Default for StatOptions {
    fn default() -> Self {
        StatOptions {
            width: 80,
            color: false,
        }
    }
}

fn decimal_width(n: u64) -> usize {
    n.to_string().len()
}

fn scale_linear(it: u64, width: u64, max_change: u64) -> u64 {
    if it == 0 {
        0
    } else {
        1 + (it * (width - 1) / max_change)
    }
}

struct Row {
    name: String,
    added: u64,
    deleted: u64,
    binary: bool,
}

fn rows(cs: &ChangeSet) -> Vec<Row> {
    cs.changes
        .iter()
        .filter(|c| !c.is_dir_only())
        .map(|c| {
            let size = |e: &Option<crate::model::Entry>| {
                e.as_ref()
                    .filter(|e| e.file_type == FileType::File)
                    .map_or(0, |e| e.size)
            };
            if c.binary {
                Row {
                    name: quote_path("", &c.path),
                    added: size(&c.new),
                    deleted: size(&c.old),
                    binary: true,
                }
            } else {
                Row {
                    name: quote_path("", &c.path),
                    added: c.insertions,
                    deleted: c.deletions,
                    binary: false,
                }
            }
        })
        .collect()
}

fn width_of(s: &str) -> usize {
    s.chars().count()
}

/// Render `git diff --stat` output for the change set.
pub fn render_stat(cs: &ChangeSet, opts: &StatOptions) -> String {
    let rows = rows(cs);
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    let (del_c, add_c, reset) = if opts.color {
        (RED, GREEN, RESET)
    } else {
        ("", "", "")
    };
    let mut max_len = 0usize;
    let mut max_change = 0u64;
    let mut number_width = 0usize;
    let mut bin_width = 0usize;
    for r in &rows {
        max_len = max_len.max(width_of(&r.name));
        if r.binary {
            let w = 14 + decimal_width(r.added) + decimal_width(r.deleted);
            bin_width = bin_width.max(w);
            number_width = 3;
            continue;
        }
        max_change = max_change.max(r.added + r.deleted);
    }
    let mut width = opts.width as i64;
    number_width = number_width.max(decimal_width(max_change));
    let nw = number_width as i64;
    if width < 16 + 6 + nw {
        width = 16 + 6 + nw;
    }
    let mut graph_width: i64 = if max_change as i64 + 4 > bin_width as i64 {
        max_change as i64
    } else {
        bin_width as i64 - 4
    };
    let mut name_width = max_len as i64;
    if name_width + nw + 6 + graph_width > width {
        if graph_width > width * 3 / 8 - nw - 6 {
            graph_width = width * 3 / 8 - nw - 6;
            if graph_width < 6 {
                graph_width = 6;
            }
        }
        if name_width > width - nw - 6 - graph_width {
            name_width = width - nw - 6 - graph_width;
        } else {
            graph_width = width - nw - 6 - name_width;
        }
    }
    let (mut adds, mut dels) = (0u64, 0u64);
    for r in &rows {
        let mut prefix = "";
        let mut len = name_width;
        let mut name: &str = &r.name;
        let name_len = width_of(name) as i64;
        if name_width < name_len {
            prefix = "...";
            len = (len - 3).max(0);
            let mut chars = name.char_indices();
            let mut cur = name_len;
            while cur > len {
                chars.next();
                cur -= 1;
            }
            let cut = chars.next().map_or(name.len(), |(i, _)| i);
            name = &name[cut..];
            if let Some(slash) = name.find('/') {
                name = &name[slash..];
            }
        }
        let padding = (len - width_of(name) as i64).max(0) as usize;
        if r.binary {
            let _ = write!(
                out,
                " {prefix}{name}{:padding$} | {:>nw$}",
                "",
                "Bin",
                nw = number_width
            );
            if r.added == 0 && r.deleted == 0 {
                out.push('\n');
                continue;
            }
            let _ = writeln!(
                out,
                " {del_c}{}{reset} -> {add_c}{}{reset} bytes",
                r.deleted, r.added
            );
            continue;
        }
        adds += r.added;
        dels += r.deleted;
        let (mut add, mut del) = (r.added, r.deleted);
        if graph_width as u64 <= max_change {
            let gw = graph_width as u64;
            let mut total = scale_linear(add + del, gw, max_change);
            if total < 2 && add > 0 && del > 0 {
                total = 2;
            }
            if add < del {
                add = scale_linear(add, gw, max_change);
                del = total - add;
            } else {
                del = scale_linear(del, gw, max_change);
                add = total - del;
            }
        }
        let changed = r.added + r.deleted;
        let _ = write!(
            out,
            " {prefix}{name}{:padding$} | {:>nw$}{}",
            "",
            changed,
            if changed > 0 { " " } else { "" },
            nw = number_width
        );
        if add > 0 {
            let _ = write!(out, "{add_c}{}{reset}", "+".repeat(add as usize));
        }
        if del > 0 {
            let _ = write!(out, "{del_c}{}{reset}", "-".repeat(del as usize));
        }
        out.push('\n');
    }
    out.push_str(&summary(rows.len(), adds, dels));
    out
}

/// git's `print_stat_summary` line (with trailing newline).
pub fn summary(files: usize, insertions: u64, deletions: u64) -> String {
    if files == 0 {
        return " 0 files changed\n".into();
    }
    let mut s = format!(
        " {files} {} changed",
        if files == 1 { "file" } else { "files" }
    );
    if insertions > 0 || deletions == 0 {
        let _ = write!(
            s,
            ", {insertions} {}(+)",
            if insertions == 1 {
                "insertion"
            } else {
                "insertions"
            }
        );
    }
    if deletions > 0 || insertions == 0 {
        let _ = write!(
            s,
            ", {deletions} {}(-)",
            if deletions == 1 {
                "deletion"
            } else {
                "deletions"
            }
        );
    }
    s.push('\n');
    s
}

/// The `--name-status` letter of a change (`A`, `M`, `D`, `T`), or `None`
/// for directory-only changes, which git does not list. A file replaced by
/// a directory is `D` (its new children appear as `A`), and vice versa.
pub fn status_letter(c: &Change) -> Option<char> {
    if c.is_dir_only() {
        return None;
    }
    let non_dir = |t: Option<FileType>| t.filter(|t| *t != FileType::Dir);
    Some(match (non_dir(c.old_type()), non_dir(c.new_type())) {
        (None, Some(_)) => 'A',
        (Some(_), None) => 'D',
        (Some(_), Some(_)) if c.kind == ChangeKind::TypeChanged => 'T',
        _ => 'M',
    })
}

/// Render `git diff --name-status` output: `X<TAB>path` per line.
pub fn render_name_status(cs: &ChangeSet) -> String {
    let mut s = String::new();
    for c in &cs.changes {
        if let Some(l) = status_letter(c) {
            let _ = writeln!(s, "{l}\t{}", quote_path("", &c.path));
        }
    }
    s
}
