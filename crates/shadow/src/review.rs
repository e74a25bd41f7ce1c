//! `shadow review`: interactive per-file, per-hunk decisions, like `git add -p`.
//!
//! The verb is three layers:
//!
//! - the *model* ([`Reviewer`]): a state machine that takes answers ([`Key`]) one at a time and
//!   ends in a [`Selection`]; it knows nothing of terminals or files and is unit-tested by
//!   feeding it answer sequences;
//! - *rendering* ([`split_diff`], [`colorize`], [`prompt_text`], [`summary_line`]…): pure
//!   functions from diff text and state to the text shown;
//! - *I/O* ([`review`]): scanning the session, reading answers (stdin if it is a terminal, else
//!   `/dev/tty`, else lines piped on stdin), the pager, saving the selection where
//!   `shadow apply` picks it up ([`crate::decide::selection_path`]).
//!
//! Decisions: every reviewed path gets an explicit entry in the saved selection, whose default
//! is reject. A skipped hunk or file (`s`), and everything after `q` or the end of input, keeps
//! the decision of a previous review if there is one, else is rejected. Protected paths default
//! to reject (and `shadow apply` still needs `--include-protected` to write them).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::{Path, PathBuf};

use shadow_changes::{ChangeKind, ChangeSet, DiffOptions, FileSelection, FileType, Selection};

use crate::context::Context;
use crate::decide::selection_path;
use crate::inspect::{changes_of, page, use_color};
use crate::{Failure, Outcome};

/// Options of `shadow review`.
#[derive(Debug, Clone, Default)]
pub struct ReviewOptions {
    /// Session id (default: newest of the current project).
    pub session: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Model
// ---------------------------------------------------------------------------------------------

/// What is decided for one reviewed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Path relative to the project.
    pub path: PathBuf,
    /// Matches the protected-path rules (defaults to reject).
    pub protected: bool,
    /// `Some(n)`: a text modification reviewed hunk by hunk (n ≥ 1 hunks); `None`: one
    /// decision for the whole change.
    pub hunks: Option<usize>,
}

/// One answer at a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// `y`: accept this hunk / change.
    Yes,
    /// `n`: reject this hunk / change.
    No,
    /// `a`: accept this and all remaining hunks of the file.
    All,
    /// `d`: reject this and all remaining hunks of the file.
    Rest,
    /// `s`: leave undecided (a previous review's decision stays, else reject).
    Skip,
    /// `v`: view the whole diff of the file.
    View,
    /// `q`: stop; save what was decided.
    Quit,
    /// `?`: help.
    Help,
    /// Empty line: take the default, if the prompt shows one.
    Enter,
}

/// Parse one answer line (only its first character counts, as in `git add -p`). `None`: not a
/// valid answer at this kind of prompt (`whole`: a whole-file prompt, which has no `a`/`d`).
pub fn parse_key(line: &str, whole: bool) -> Option<Key> {
    let t = line.trim();
    let Some(c) = t.chars().next() else {
        return Some(Key::Enter);
    };
    Some(match c.to_ascii_lowercase() {
        'y' => Key::Yes,
        'n' => Key::No,
        'a' if !whole => Key::All,
        'd' if !whole => Key::Rest,
        's' => Key::Skip,
        'v' => Key::View,
        'q' => Key::Quit,
        '?' | 'h' => Key::Help,
        _ => return None,
    })
}

/// Where the review stands: the file and, for hunk-reviewed files, the hunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Index into the items.
    pub file: usize,
    /// Hunk index (0 for whole-file items).
    pub unit: usize,
}

/// What the I/O layer should do after an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The answer was recorded (or the unit skipped); show the next prompt.
    Next,
    /// Show the whole diff of the current file, then the same prompt again.
    View,
    /// Show the help, then the same prompt again.
    Help,
    /// Not a valid answer here (e.g. Enter without a default): show the help and ask again.
    Invalid,
    /// The review is over (`q`, or the last unit was answered).
    Done,
}

/// The decision state machine: answers in, [`Selection`] out.
#[derive(Debug, Clone)]
pub struct Reviewer {
    items: Vec<Item>,
    /// Per item, per unit: the answer given in this review.
    decided: Vec<Vec<Option<bool>>>,
    /// Per item, per unit: the default (a previous review's decision; reject for protected).
    defaults: Vec<Vec<Option<bool>>>,
    /// Per item, per unit: whether a previous review decided it (kept by `s`, `q`).
    previous: Vec<Vec<Option<bool>>>,
    pos: Option<Position>,
}

fn units(item: &Item) -> usize {
    item.hunks.unwrap_or(1)
}

/// The per-unit decisions a previous selection recorded for an item, if it still fits (a hunk
/// selection made for another number of hunks is stale and ignored).
fn previous_units(item: &Item, prev: Option<&Selection>) -> Vec<Option<bool>> {
    let n = units(item);
    let Some(fs) = prev.and_then(|p| p.files.get(&item.path)) else {
        return vec![None; n];
    };
    match (fs, item.hunks) {
        (FileSelection::Accept, _) => vec![Some(true); n],
        (FileSelection::Reject, _) => vec![Some(false); n],
        (FileSelection::Hunks { accepted, total }, Some(h)) if *total == h => {
            (0..n).map(|i| Some(accepted.contains(&i))).collect()
        }
        (FileSelection::Hunks { .. }, _) => vec![None; n],
    }
}

impl Reviewer {
    /// Start a review of `items` (files without units are dropped), with `previous` (a saved
    /// selection) supplying defaults.
    pub fn new(items: Vec<Item>, previous: Option<&Selection>) -> Self {
        let items: Vec<Item> = items.into_iter().filter(|i| i.hunks != Some(0)).collect();
        let previous: Vec<Vec<Option<bool>>> =
            items.iter().map(|i| previous_units(i, previous)).collect();
        let defaults = items
            .iter()
            .zip(&previous)
            .map(|(i, p)| {
                p.iter()
                    .map(|d| d.or(if i.protected { Some(false) } else { None }))
                    .collect()
            })
            .collect();
        let decided = items.iter().map(|i| vec![None; units(i)]).collect();
        let pos = (!items.is_empty()).then_some(Position { file: 0, unit: 0 });
        Reviewer {
            items,
            decided,
            defaults,
            previous,
            pos,
        }
    }

    /// The items under review.
    pub fn items(&self) -> &[Item] {
        &self.items
    }

    /// The current prompt's position; `None` once the review is over.
    pub fn position(&self) -> Option<Position> {
        self.pos
    }

    /// The current item.
    pub fn current_item(&self) -> Option<&Item> {
        self.pos.map(|p| &self.items[p.file])
    }

    /// The default answer at the current prompt (what Enter takes), if any.
    pub fn default_answer(&self) -> Option<bool> {
        self.pos.and_then(|p| self.defaults[p.file][p.unit])
    }

    fn advance_unit(&mut self) {
        if let Some(p) = self.pos {
            if p.unit + 1 < units(&self.items[p.file]) {
                self.pos = Some(Position {
                    file: p.file,
                    unit: p.unit + 1,
                });
            } else {
                self.advance_file();
            }
        }
    }

    fn advance_file(&mut self) {
        if let Some(p) = self.pos {
            self.pos = (p.file + 1 < self.items.len()).then_some(Position {
                file: p.file + 1,
                unit: 0,
            });
        }
    }

    fn effect_after_move(&self) -> Effect {
        if self.pos.is_some() {
            Effect::Next
        } else {
            Effect::Done
        }
    }

    /// Take one answer at the current prompt.
    pub fn answer(&mut self, key: Key) -> Effect {
        let Some(p) = self.pos else {
            return Effect::Done;
        };
        let whole = self.items[p.file].hunks.is_none();
        let key = match key {
            Key::Enter => match self.default_answer() {
                Some(true) => Key::Yes,
                Some(false) => Key::No,
                None => return Effect::Invalid,
            },
            Key::All | Key::Rest if whole => return Effect::Invalid,
            k => k,
        };
        match key {
            Key::Yes | Key::No => {
                self.decided[p.file][p.unit] = Some(key == Key::Yes);
                self.advance_unit();
                self.effect_after_move()
            }
            Key::All | Key::Rest => {
                for d in &mut self.decided[p.file][p.unit..] {
                    *d = Some(key == Key::All);
                }
                self.advance_file();
                self.effect_after_move()
            }
            Key::Skip => {
                self.advance_unit();
                self.effect_after_move()
            }
            Key::View => Effect::View,
            Key::Help => Effect::Help,
            Key::Quit => {
                self.pos = None;
                Effect::Done
            }
            Key::Enter => Effect::Invalid,
        }
    }

    /// Final per-unit decisions of an item: this review's answer, else the previous review's,
    /// else reject.
    fn resolved(&self, file: usize) -> Vec<bool> {
        self.decided[file]
            .iter()
            .zip(&self.previous[file])
            .map(|(d, p)| d.or(*p).unwrap_or(false))
            .collect()
    }

    /// The selection the answers so far amount to (every item listed explicitly; default
    /// reject).
    pub fn selection(&self) -> Selection {
        let mut sel = Selection::reject_all();
        for (i, item) in self.items.iter().enumerate() {
            let r = self.resolved(i);
            let fs = if r.iter().all(|&a| a) {
                FileSelection::Accept
            } else if !r.iter().any(|&a| a) {
                FileSelection::Reject
            } else {
                FileSelection::Hunks {
                    accepted: r
                        .iter()
                        .enumerate()
                        .filter(|(_, &a)| a)
                        .map(|(i, _)| i)
                        .collect(),
                    total: r.len(),
                }
            };
            sel.files.insert(item.path.clone(), fs);
        }
        sel
    }

    /// Counts for the closing summary.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for (i, item) in self.items.iter().enumerate() {
            let r = self.resolved(i);
            let acc = r.iter().filter(|&&a| a).count();
            if item.hunks.is_some() {
                s.hunks_total += r.len();
                s.hunks_accepted += acc;
            }
            if acc == r.len() {
                s.accepted += 1;
                if item.protected {
                    s.protected_accepted += 1;
                }
            } else if acc == 0 {
                s.rejected += 1;
            } else {
                s.partial += 1;
                if item.protected {
                    s.protected_accepted += 1;
                }
            }
        }
        s
    }
}

/// Counts of a finished review.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Paths accepted whole.
    pub accepted: usize,
    /// Paths rejected whole.
    pub rejected: usize,
    /// Paths with only some hunks accepted.
    pub partial: usize,
    /// Hunks accepted, over all hunk-reviewed files.
    pub hunks_accepted: usize,
    /// Hunks of all hunk-reviewed files.
    pub hunks_total: usize,
    /// Protected paths accepted (wholly or in part).
    pub protected_accepted: usize,
}

/// Decisions for directory-only changes, which are not shown (git shows no directories):
/// a new directory comes along when something below it is accepted (apply does that anyway);
/// a deleted directory is deleted when every change below it is accepted; anything else
/// (a directory's mode) is left alone.
pub fn settle_dirs(cs: &ChangeSet, sel: &mut Selection) {
    // Deepest first, so a deleted directory sees the decisions of deleted directories below it.
    let mut dirs: Vec<&shadow_changes::Change> =
        cs.changes.iter().filter(|c| c.is_dir_only()).collect();
    dirs.sort_by_key(|c| std::cmp::Reverse(c.path.components().count()));
    for d in dirs {
        let below: Vec<bool> = cs
            .changes
            .iter()
            .filter(|c| c.path != d.path && c.path.starts_with(&d.path))
            .map(|c| sel.for_path(&c.path) != FileSelection::Reject)
            .collect();
        let accept = match d.kind {
            ChangeKind::Added => below.iter().any(|&a| a),
            ChangeKind::Deleted => !below.is_empty() && below.iter().all(|&a| a),
            _ => false,
        };
        let fs = if accept {
            FileSelection::Accept
        } else {
            FileSelection::Reject
        };
        sel.files.insert(d.path.clone(), fs);
    }
}

/// The items to review for a change set: every change except directory-only ones; text
/// modifications hunk by hunk (`hunk_count` gives their number of hunks).
pub fn items_of(
    cs: &ChangeSet,
    hunk_count: impl Fn(&shadow_changes::Change) -> usize,
) -> Vec<Item> {
    cs.changes
        .iter()
        .filter(|c| !c.is_dir_only())
        .map(|c| Item {
            path: c.path.clone(),
            protected: c.protected,
            hunks: is_text_modification(c)
                .then(|| hunk_count(c))
                .filter(|&n| n > 0),
        })
        .collect()
}

/// Whether a change can be reviewed (and applied) hunk by hunk.
pub fn is_text_modification(c: &shadow_changes::Change) -> bool {
    c.kind == ChangeKind::Modified
        && !c.binary
        && c.old_type() == Some(FileType::File)
        && c.new_type() == Some(FileType::File)
}

// ---------------------------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------------------------

/// A file's diff split for review: the header lines (`diff --git`, modes, `---`/`+++`) and the
/// hunks, each starting with its `@@` line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileDiff {
    /// Header lines.
    pub header: String,
    /// Hunks, in order.
    pub hunks: Vec<String>,
}

/// Split an uncoloured unified diff of one file (from `shadow_changes::render_change`) into
/// header and hunks. Hunk bodies only contain lines starting with ` `, `-`, `+` or `\`, so
/// every line starting with `@@ ` opens a hunk; the hunks are exactly those of
/// `shadow_changes::hunks`, which the selection's indices refer to.
pub fn split_diff(text: &str) -> FileDiff {
    let mut d = FileDiff::default();
    for line in text.split_inclusive('\n') {
        if line.starts_with("@@ ") {
            d.hunks.push(String::new());
        }
        match d.hunks.last_mut() {
            Some(h) => h.push_str(line),
            None => d.header.push_str(line),
        }
    }
    d
}

const BOLD: &str = "\x1b[1m";
const CYAN: &str = "\x1b[36m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const BLUE: &str = "\x1b[1;34m";
const RESET: &str = "\x1b[m";

/// Colour a piece of uncoloured diff as git does: `header` lines bold, `@@` cyan, `-` red,
/// `+` green. Without `color` the text is returned as is.
pub fn colorize(text: &str, header: bool, color: bool) -> String {
    if !color {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let col = if header {
            BOLD
        } else if body.starts_with("@@") {
            CYAN
        } else if body.starts_with('-') {
            RED
        } else if body.starts_with('+') {
            GREEN
        } else {
            ""
        };
        if col.is_empty() {
            out.push_str(line);
        } else {
            out.push_str(col);
            out.push_str(body);
            out.push_str(RESET);
            out.push_str(nl);
        }
    }
    out
}

/// The header shown when a file comes up: its diff header, `[protected]` marked, and a
/// reminder of what that means.
pub fn file_banner(header: &str, protected: bool, color: bool) -> String {
    let mut h = header.to_string();
    if protected {
        if let Some(i) = h.find('\n') {
            h.insert_str(i, " [protected]");
        } else {
            h.push_str(" [protected]");
        }
    }
    let mut s = colorize(&h, true, color);
    if protected {
        let note = "[protected] this path matches the protected-path rules: rejected unless you \
                    accept it, and applied only by `shadow apply --include-protected`\n";
        if color {
            s.push_str(YELLOW);
            s.push_str(note.trim_end());
            s.push_str(RESET);
            s.push('\n');
        } else {
            s.push_str(note);
        }
    }
    s
}

/// At most `max` lines of `text`, with a note of how many were left out.
pub fn preview(text: &str, max: usize) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    if lines.len() <= max {
        return text.to_string();
    }
    let mut s: String = lines[..max].concat();
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s.push_str(&format!(
        "… {} more line(s); `v` shows the whole diff\n",
        lines.len() - max
    ));
    s
}

/// The prompt line (no newline).
pub fn prompt_text(item: &Item, unit: usize, default: Option<bool>, color: bool) -> String {
    let (q, keys) = match item.hunks {
        Some(_) => ("Accept this hunk", "[y,n,a,d,s,v,q,?]"),
        None => ("Apply this change", "[y,n,s,v,q,?]"),
    };
    let count = match item.hunks {
        Some(n) => format!("({}/{n}) ", unit + 1),
        None => String::new(),
    };
    let def = match default {
        Some(true) => " (default y)",
        Some(false) => " (default n)",
        None => "",
    };
    let text = format!("{count}{q} {keys}{def}? ");
    if color {
        format!("{BLUE}{}{RESET} ", text.trim_end())
    } else {
        text
    }
}

/// The help shown for `?` (and after an invalid answer).
pub fn help_text(whole: bool) -> &'static str {
    if whole {
        "y - apply this change\n\
         n - do not apply this change\n\
         s - skip: leave it undecided (a previous review's decision stays, else not applied)\n\
         v - view the whole diff of this file\n\
         q - quit; save the decisions made so far\n\
         ? - print help\n\
         Enter takes the default shown in the prompt, if there is one\n"
    } else {
        "y - accept this hunk\n\
         n - reject this hunk\n\
         a - accept this hunk and all remaining hunks of the file\n\
         d - reject this hunk and all remaining hunks of the file\n\
         s - skip: leave this hunk undecided (a previous review's decision stays, else rejected)\n\
         v - view the whole diff of this file\n\
         q - quit; save the decisions made so far\n\
         ? - print help\n\
         Enter takes the default shown in the prompt, if there is one\n"
    }
}

/// The closing summary line.
pub fn summary_line(s: &Summary) -> String {
    let mut line = format!("{} accepted, {} rejected", s.accepted, s.rejected);
    if s.partial > 0 {
        line.push_str(&format!(", {} in part", s.partial));
    }
    if s.hunks_total > 0 {
        line.push_str(&format!(
            "; {} of {} hunk(s) accepted",
            s.hunks_accepted, s.hunks_total
        ));
    }
    line
}

// ---------------------------------------------------------------------------------------------
// I/O
// ---------------------------------------------------------------------------------------------

/// Where answers come from.
enum Input {
    /// stdin (a terminal, or piped lines).
    Stdin,
    /// The controlling terminal, when stdin is not one.
    Tty(BufReader<File>),
}

impl Input {
    fn open() -> Self {
        if std::io::stdin().is_terminal() {
            return Input::Stdin;
        }
        match File::open("/dev/tty") {
            Ok(f) => Input::Tty(BufReader::new(f)),
            Err(_) => Input::Stdin,
        }
    }

    /// Whether the answers are typed on a terminal (which echoes them).
    fn is_terminal(&self) -> bool {
        match self {
            Input::Stdin => std::io::stdin().is_terminal(),
            Input::Tty(_) => true,
        }
    }

    /// One line; `None` at end of input.
    fn line(&mut self) -> std::io::Result<Option<String>> {
        let mut s = String::new();
        let n = match self {
            Input::Stdin => std::io::stdin().lock().read_line(&mut s)?,
            Input::Tty(r) => r.read_line(&mut s)?,
        };
        Ok((n > 0).then_some(s))
    }
}

fn out(text: &str) -> Result<(), Failure> {
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes())?;
    o.flush()?;
    Ok(())
}

/// Run the review.
pub fn review(o: &ReviewOptions) -> Outcome {
    let ctx = Context::open()?;
    let s = ctx.session(o.session.as_deref())?;
    if s.is_running() {
        eprintln!(
            "shadow: session {} is still running: its changes may still change (apply will \
             refuse a stale hunk selection)",
            s.id()
        );
    }
    let cs = changes_of(&s)?;
    let plain = DiffOptions { color: false };
    // One uncoloured rendering per file, split into header and hunks; colour is added when
    // shown, so what is shown and what is numbered are the same text.
    let mut shown: BTreeMap<PathBuf, FileDiff> = BTreeMap::new();
    for c in cs.changes.iter().filter(|c| !c.is_dir_only()) {
        let text = shadow_changes::render_change(&cs, c, &plain)?;
        shown.insert(c.path.clone(), split_diff(&text));
    }
    let items = items_of(&cs, |c| shown.get(&c.path).map_or(0, |d| d.hunks.len()));
    if items.is_empty() {
        println!("nothing to review: session {} changed nothing", s.id());
        return Ok(0);
    }
    let path = selection_path(&s);
    let previous = if path.exists() {
        match Selection::load(&path) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("shadow: ignoring the saved selection: {e}");
                None
            }
        }
    } else {
        None
    };
    if previous.is_some() {
        println!("resuming a previous review: its decisions are the defaults");
    }
    let mut r = Reviewer::new(items, previous.as_ref());
    let mut input = Input::open();
    let color = use_color();
    let mut banner_for: Option<usize> = None;
    let mut eof = false;
    while let Some(pos) = r.position() {
        let item = r.items()[pos.file].clone();
        let sh = &shown[&item.path];
        if banner_for != Some(pos.file) {
            banner_for = Some(pos.file);
            out(&file_banner(&sh.header, item.protected, color))?;
            if item.hunks.is_none() {
                let body: String = sh.hunks.concat();
                out(&colorize(&preview(&body, 60), false, color))?;
            }
        }
        if item.hunks.is_some() {
            out(&colorize(&sh.hunks[pos.unit], false, color))?;
        }
        loop {
            out(&prompt_text(&item, pos.unit, r.default_answer(), color))?;
            let Some(line) = input.line()? else {
                eof = true;
                out("\n")?;
                r.answer(Key::Quit);
                break;
            };
            if !input.is_terminal() {
                // Piped answers are not echoed: show them, so the transcript reads as typed.
                out(&format!("{}\n", line.trim_end()))?;
            }
            let key = parse_key(&line, item.hunks.is_none());
            match key.map_or(Effect::Invalid, |k| r.answer(k)) {
                Effect::Next | Effect::Done => break,
                Effect::View => {
                    page(&colorize_full(sh, color))?;
                }
                Effect::Help => out(help_text(item.hunks.is_none()))?,
                Effect::Invalid => {
                    if color {
                        out(&format!("{RED}{}{RESET}", help_text(item.hunks.is_none())))?
                    } else {
                        out(help_text(item.hunks.is_none()))?
                    }
                }
            }
        }
    }
    let mut sel = r.selection();
    settle_dirs(&cs, &mut sel);
    sel.save(&path)?;
    let sum = r.summary();
    if eof {
        eprintln!(
            "shadow: end of input: undecided changes keep their previous decision or are rejected"
        );
    }
    println!("{}", summary_line(&sum));
    if sum.protected_accepted > 0 {
        println!(
            "{} protected path(s) accepted: `shadow apply --include-protected` writes them",
            sum.protected_accepted
        );
    }
    println!(
        "selection saved to {}; `shadow apply` applies it",
        path.display()
    );
    Ok(0)
}

fn colorize_full(d: &FileDiff, color: bool) -> String {
    let mut s = colorize(&d.header, true, color);
    for h in &d.hunks {
        s.push_str(&colorize(h, false, color));
    }
    s
}

/// The paths a selection accepts (wholly or in part), for messages and tests.
pub fn accepted_paths(sel: &Selection) -> BTreeSet<&Path> {
    sel.files
        .iter()
        .filter(|(_, f)| **f != FileSelection::Reject)
        .map(|(p, _)| p.as_path())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use shadow_changes::Change;

    fn item(p: &str, hunks: Option<usize>) -> Item {
        Item {
            path: p.into(),
            protected: false,
            hunks,
        }
    }

    fn run(items: Vec<Item>, prev: Option<&Selection>, answers: &str) -> (Selection, Reviewer) {
        let mut r = Reviewer::new(items, prev);
        for line in answers.split(',') {
            let Some(p) = r.position() else { break };
            let whole = r.items()[p.file].hunks.is_none();
            let k = parse_key(line, whole).expect("valid key");
            r.answer(k);
        }
        (r.selection(), r)
    }

    fn hunks(acc: &[usize], total: usize) -> FileSelection {
        FileSelection::Hunks {
            accepted: acc.iter().copied().collect(),
            total,
        }
    }

    #[test]
    fn per_hunk_answers() {
        let (s, r) = run(
            vec![item("a", Some(3)), item("b", None), item("c", Some(2))],
            None,
            "y,n,y,n,y,y",
        );
        assert_eq!(s.files[Path::new("a")], hunks(&[0, 2], 3));
        assert_eq!(s.files[Path::new("b")], FileSelection::Reject);
        assert_eq!(s.files[Path::new("c")], FileSelection::Accept);
        assert_eq!(r.position(), None);
        assert_eq!(
            r.summary(),
            Summary {
                accepted: 1,
                rejected: 1,
                partial: 1,
                hunks_accepted: 4,
                hunks_total: 5,
                protected_accepted: 0
            }
        );
        assert_eq!(
            summary_line(&r.summary()),
            "1 accepted, 1 rejected, 1 in part; 4 of 5 hunk(s) accepted"
        );
    }

    #[test]
    fn all_and_rest_finish_the_file() {
        let (s, _) = run(
            vec![item("a", Some(4)), item("b", Some(3)), item("c", None)],
            None,
            "n,a,y,d,y",
        );
        assert_eq!(s.files[Path::new("a")], hunks(&[1, 2, 3], 4));
        assert_eq!(s.files[Path::new("b")], hunks(&[0], 3));
        assert_eq!(s.files[Path::new("c")], FileSelection::Accept);
    }

    #[test]
    fn whole_file_prompt_refuses_a_and_d() {
        assert_eq!(parse_key("a", true), None);
        assert_eq!(parse_key("d\n", true), None);
        assert_eq!(parse_key("a", false), Some(Key::All));
        assert_eq!(parse_key("  Yes please\n", true), Some(Key::Yes));
        assert_eq!(parse_key("\n", true), Some(Key::Enter));
        assert_eq!(parse_key("x", false), None);
        let mut r = Reviewer::new(vec![item("b", None)], None);
        assert_eq!(r.answer(Key::All), Effect::Invalid);
        assert_eq!(r.answer(Key::Enter), Effect::Invalid, "no default");
        assert_eq!(r.answer(Key::View), Effect::View);
        assert_eq!(r.answer(Key::Help), Effect::Help);
        assert_eq!(r.position(), Some(Position { file: 0, unit: 0 }));
        assert_eq!(r.answer(Key::Yes), Effect::Done);
    }

    #[test]
    fn skip_and_quit_keep_previous_decisions() {
        let prev = Selection::reject_all()
            .with("a", hunks(&[1], 3))
            .with("b", FileSelection::Accept)
            .with("c", FileSelection::Accept);
        let items = vec![item("a", Some(3)), item("b", None), item("c", None)];
        // a: hunk 0 skipped (no previous → reject), hunk 1 skipped (previous accept), hunk 2 y;
        // b: n; quit before c (previous accept stays).
        let (s, _) = run(items.clone(), Some(&prev), "s,s,y,n,q");
        assert_eq!(s.files[Path::new("a")], hunks(&[1, 2], 3));
        assert_eq!(s.files[Path::new("b")], FileSelection::Reject);
        assert_eq!(s.files[Path::new("c")], FileSelection::Accept);
        // Without a previous selection, quitting rejects the rest.
        let (s, _) = run(items, None, "y,q");
        assert_eq!(s.files[Path::new("a")], hunks(&[0], 3));
        assert_eq!(s.files[Path::new("b")], FileSelection::Reject);
        assert_eq!(s.files[Path::new("c")], FileSelection::Reject);
    }

    #[test]
    fn previous_decisions_are_defaults() {
        let prev = Selection::reject_all()
            .with("a", hunks(&[1], 2))
            .with("b", hunks(&[0], 5)) // stale: b now has 2 hunks
            .with("c", FileSelection::Reject);
        let mut r = Reviewer::new(
            vec![item("a", Some(2)), item("b", Some(2)), item("c", None)],
            Some(&prev),
        );
        assert_eq!(r.default_answer(), Some(false));
        r.answer(Key::Enter);
        assert_eq!(r.default_answer(), Some(true));
        r.answer(Key::Enter);
        assert_eq!(r.default_answer(), None, "stale hunk selection ignored");
        assert_eq!(r.answer(Key::Enter), Effect::Invalid);
        r.answer(Key::Yes);
        r.answer(Key::Skip);
        assert_eq!(r.default_answer(), Some(false));
        assert_eq!(r.answer(Key::Enter), Effect::Done);
        let s = r.selection();
        assert_eq!(s.files[Path::new("a")], hunks(&[1], 2));
        assert_eq!(s.files[Path::new("b")], hunks(&[0], 2));
        assert_eq!(s.files[Path::new("c")], FileSelection::Reject);
    }

    #[test]
    fn protected_defaults_to_reject() {
        let mut items = vec![item(".env", None), item("x", Some(1))];
        items[0].protected = true;
        let mut r = Reviewer::new(items, None);
        assert_eq!(r.default_answer(), Some(false));
        assert_eq!(r.answer(Key::Skip), Effect::Next);
        assert_eq!(r.default_answer(), None);
        r.answer(Key::Yes);
        assert_eq!(
            r.selection().files[Path::new(".env")],
            FileSelection::Reject
        );
        // Accepting it is possible, and counted.
        let mut items = vec![item(".env", None)];
        items[0].protected = true;
        let (s, r) = run(items, None, "y");
        assert_eq!(s.files[Path::new(".env")], FileSelection::Accept);
        assert_eq!(r.summary().protected_accepted, 1);
    }

    #[test]
    fn empty_review_and_zero_hunk_items() {
        let r = Reviewer::new(vec![item("a", Some(0))], None);
        assert_eq!(r.position(), None);
        assert_eq!(r.selection(), Selection::reject_all());
    }

    #[test]
    fn selection_round_trips_through_json() {
        let (s, _) = run(vec![item("a", Some(3)), item("b", None)], None, "y,n,n,y");
        assert_eq!(Selection::from_json(&s.to_json()).unwrap(), s);
        assert_eq!(
            accepted_paths(&s).into_iter().collect::<Vec<_>>(),
            vec![Path::new("a"), Path::new("b")]
        );
    }

    fn change(
        path: &str,
        kind: ChangeKind,
        old: Option<FileType>,
        new: Option<FileType>,
    ) -> Change {
        let e = |t: FileType| shadow_changes::Entry {
            file_type: t,
            mode: 0o644,
            size: 1,
            symlink_target: None,
        };
        Change {
            path: path.into(),
            kind,
            old: old.map(e),
            new: new.map(e),
            binary: false,
            insertions: 0,
            deletions: 0,
            new_sha256: None,
            protected: path.starts_with(".env"),
        }
    }

    fn change_set(changes: Vec<Change>) -> ChangeSet {
        ChangeSet {
            lower: "/l".into(),
            upper: "/u".into(),
            changes,
        }
    }

    #[test]
    fn items_skip_directories_and_pick_hunk_files() {
        use ChangeKind::*;
        use FileType::{Dir, File as F, Symlink};
        let mut bin = change("bin", Modified, Some(F), Some(F));
        bin.binary = true;
        let cs = change_set(vec![
            change(".env", Modified, Some(F), Some(F)),
            bin,
            change("d", Added, None, Some(Dir)),
            change("d/x", Added, None, Some(F)),
            change("l", TypeChanged, Some(F), Some(Symlink)),
            change("m", ModeChanged, Some(F), Some(F)),
            change("t", Modified, Some(F), Some(F)),
        ]);
        let items = items_of(&cs, |c| if c.path == Path::new("t") { 2 } else { 1 });
        let got: Vec<(&str, Option<usize>, bool)> = items
            .iter()
            .map(|i| (i.path.to_str().unwrap(), i.hunks, i.protected))
            .collect();
        assert_eq!(
            got,
            vec![
                (".env", Some(1), true),
                ("bin", None, false),
                ("d/x", None, false),
                ("l", None, false),
                ("m", None, false),
                ("t", Some(2), false),
            ]
        );
    }

    #[test]
    fn directories_follow_their_contents() {
        use ChangeKind::*;
        use FileType::{Dir, File as F};
        let cs = change_set(vec![
            change("gone", Deleted, Some(Dir), None),
            change("gone/a", Deleted, Some(F), None),
            change("gone/sub", Deleted, Some(Dir), None),
            change("gone/sub/b", Deleted, Some(F), None),
            change("half", Deleted, Some(Dir), None),
            change("half/a", Deleted, Some(F), None),
            change("half/b", Deleted, Some(F), None),
            change("new", Added, None, Some(Dir)),
            change("new/x", Added, None, Some(F)),
            change("empty", Added, None, Some(Dir)),
            change("chmod", ModeChanged, Some(Dir), Some(Dir)),
        ]);
        let mut sel = Selection::reject_all()
            .with("gone/a", FileSelection::Accept)
            .with("gone/sub/b", FileSelection::Accept)
            .with("half/a", FileSelection::Accept)
            .with("half/b", FileSelection::Reject)
            .with("new/x", FileSelection::Accept);
        settle_dirs(&cs, &mut sel);
        let d = |p: &str| sel.files[Path::new(p)].clone();
        assert_eq!(d("gone"), FileSelection::Accept);
        assert_eq!(d("gone/sub"), FileSelection::Accept);
        assert_eq!(d("half"), FileSelection::Reject);
        assert_eq!(d("new"), FileSelection::Accept);
        assert_eq!(d("empty"), FileSelection::Reject);
        assert_eq!(d("chmod"), FileSelection::Reject);
    }

    const DIFF: &str = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n 1\n-2\n+TWO\n@@ -9 +9 @@\n-9\n+NINE\n\\ No newline at end of file\n";

    #[test]
    fn split_and_colour() {
        let d = split_diff(DIFF);
        assert_eq!(d.header, "diff --git a/f b/f\n--- a/f\n+++ b/f\n");
        assert_eq!(d.hunks.len(), 2);
        assert_eq!(d.hunks[0], "@@ -1,2 +1,2 @@\n 1\n-2\n+TWO\n");
        assert!(d.hunks[1].ends_with("\\ No newline at end of file\n"));
        assert_eq!(colorize(&d.hunks[0], false, false), d.hunks[0]);
        assert_eq!(
            colorize(&d.hunks[0], false, true),
            "\x1b[36m@@ -1,2 +1,2 @@\x1b[m\n 1\n\x1b[31m-2\x1b[m\n\x1b[32m+TWO\x1b[m\n"
        );
        assert_eq!(
            colorize("diff --git a/f b/f\n", true, true),
            "\x1b[1mdiff --git a/f b/f\x1b[m\n"
        );
        let whole = split_diff("diff --git a/b b/b\nnew file mode 100644\n");
        assert!(whole.hunks.is_empty());
    }

    #[test]
    fn banner_marks_protected() {
        let b = file_banner("diff --git a/.env b/.env\n--- a/.env\n", true, false);
        assert!(
            b.starts_with("diff --git a/.env b/.env [protected]\n--- a/.env\n"),
            "{b}"
        );
        assert!(b.contains("--include-protected"));
        assert_eq!(
            file_banner("diff --git a/x b/x\n", false, false),
            "diff --git a/x b/x\n"
        );
    }

    #[test]
    fn prompts() {
        assert_eq!(
            prompt_text(&item("a", Some(3)), 1, None, false),
            "(2/3) Accept this hunk [y,n,a,d,s,v,q,?]? "
        );
        assert_eq!(
            prompt_text(&item("a", None), 0, Some(false), false),
            "Apply this change [y,n,s,v,q,?] (default n)? "
        );
        assert!(prompt_text(&item("a", None), 0, None, true).starts_with("\x1b["));
        assert!(help_text(false).contains("a - accept this hunk and all remaining"));
        assert!(!help_text(true).contains("a - "));
    }

    #[test]
    fn preview_truncates() {
        let t: String = (0..10).map(|i| format!("+{i}\n")).collect();
        assert_eq!(preview(&t, 10), t);
        let p = preview(&t, 3);
        assert_eq!(
            p,
            "+0\n+1\n+2\n… 7 more line(s); `v` shows the whole diff\n"
        );
    }
}
