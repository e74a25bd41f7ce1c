//! Scanning an overlayfs upper layer into a [`ChangeSet`].
//!
//! Only the upper directory is walked, so the cost grows with what the
//! session changed, not with the size of the project. The lower layer is
//! consulted path by path (and walked only below deleted or opaque
//! directories, where every lower entry is itself a change).
//!
//! Classification of an upper entry `p`:
//! * **whiteout** — a character device `0:0`, or a zero-size regular file
//!   with a `trusted.overlay.whiteout` / `user.overlay.whiteout` xattr:
//!   `p` (and, for a directory, everything below it in lower) is deleted.
//! * **opaque directory** — `trusted.overlay.opaque` / `user.overlay.opaque`
//!   equal to `y`: every lower entry below `p` that has no upper
//!   counterpart is deleted (this is what `rm -rf d && mkdir d` leaves).
//! * **directory** present in lower as a directory — a copy-up, not a
//!   change, unless the permission bits differ ([`ChangeKind::ModeChanged`]).
//! * **regular file / symlink** — compared with lower: absent →
//!   [`ChangeKind::Added`]; other type → [`ChangeKind::TypeChanged`];
//!   different content or target → [`ChangeKind::Modified`]; same content,
//!   different mode → [`ChangeKind::ModeChanged`]; identical → no change.
//! * device nodes, fifos and sockets are reported (so a reviewer sees them)
//!   but the apply engine refuses them.
//!
//! Threats: the upper layer is written by an untrusted agent, so scanning
//! never follows symlinks (walkdir with `follow_links(false)`, lower and
//! upper reads through [`crate::safefs`]), and redirect xattrs, which would
//! make the upper layer refer to arbitrary lower paths, are refused rather
//! than silently misread.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use walkdir::WalkDir;

use crate::error::{Error, IoContext, Result};
use crate::model::{is_binary, sha256_hex, Change, ChangeKind, ChangeSet, Entry, FileType};
use crate::protected::ProtectedRules;
use crate::safefs::{get_xattr, Root};

const XATTR_PREFIXES: [&str; 2] = ["trusted.overlay.", "user.overlay."];

fn overlay_xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    XATTR_PREFIXES
        .iter()
        .find_map(|p| get_xattr(path, &format!("{p}{name}")))
}

/// Scan with the default protected-path rules.
pub fn scan(lower: &Path, upper: &Path) -> Result<ChangeSet> {
    scan_with(lower, upper, &ProtectedRules::default())
}

/// Scan `upper` against `lower`, flagging paths matched by `rules`.
pub fn scan_with(lower: &Path, upper: &Path, rules: &ProtectedRules) -> Result<ChangeSet> {
    let mut s = Scanner {
        lower: Root::open(lower)?,
        upper: Root::open(upper)?,
        rules,
        out: BTreeMap::new(),
    };
    let mut opaque_stack: Vec<PathBuf> = Vec::new();
    for entry in WalkDir::new(upper).min_depth(1).follow_links(false) {
        let entry = entry.map_err(|e| {
            let path = e.path().unwrap_or(upper).to_path_buf();
            Error::io("walk", path, e)
        })?;
        let full = entry.path();
        let rel = full
            .strip_prefix(upper)
            .expect("walkdir yields paths below its root")
            .to_path_buf();
        while opaque_stack.last().is_some_and(|top| !rel.starts_with(top)) {
            opaque_stack.pop();
        }
        let in_opaque = !opaque_stack.is_empty();
        let md = std::fs::symlink_metadata(full).ctx("lstat", full)?;
        let ft = md.file_type();
        let whiteout = (ft.is_char_device() && md.rdev() == 0)
            || (ft.is_file() && md.size() == 0 && overlay_xattr(full, "whiteout").is_some());
        if whiteout {
            s.whiteout(&rel, in_opaque)?;
            continue;
        }
        if ft.is_dir() {
            if overlay_xattr(full, "redirect").is_some() {
                return Err(Error::UnsupportedOverlay {
                    path: full.to_path_buf(),
                    what: "redirect_dir (renamed directory); mount without redirect_dir",
                });
            }
            let opaque = overlay_xattr(full, "opaque").as_deref() == Some(b"y");
            if opaque {
                if !in_opaque {
                    s.opaque_deletions(&rel)?;
                }
                opaque_stack.push(rel.clone());
            }
        }
        s.compare(&rel, full, &md, in_opaque)?;
    }
    Ok(ChangeSet {
        lower: lower.to_path_buf(),
        upper: upper.to_path_buf(),
        changes: s.out.into_values().collect(),
    })
}

struct Scanner<'r> {
    lower: Root,
    upper: Root,
    rules: &'r ProtectedRules,
    out: BTreeMap<Vec<u8>, Change>,
}

/// Content of one side as git sees it: file bytes or symlink target.
enum Side {
    None,
    Bytes(Vec<u8>),
    NoContent,
}

impl Scanner<'_> {
    fn lower_entry(&self, rel: &Path) -> Result<Option<(Entry, std::fs::Metadata)>> {
        let Some(md) = self.lower.probe_lenient(rel)? else {
            return Ok(None);
        };
        let target = if md.file_type().is_symlink() {
            Some(self.lower.read_link(rel)?)
        } else {
            None
        };
        Ok(Some((Entry::from_metadata(&md, target), md)))
    }

    fn side_content(root: &Root, rel: &Path, e: Option<&Entry>) -> Result<Side> {
        Ok(match e {
            None => Side::None,
            Some(e) => match e.file_type {
                FileType::File => Side::Bytes(root.read_file(rel)?.0),
                FileType::Symlink => Side::Bytes(
                    e.symlink_target
                        .as_ref()
                        .map(|t| t.as_os_str().as_bytes().to_vec())
                        .unwrap_or_default(),
                ),
                _ => Side::NoContent,
            },
        })
    }

    fn push(
        &mut self,
        rel: &Path,
        kind: ChangeKind,
        old: Option<Entry>,
        new: Option<Entry>,
    ) -> Result<()> {
        self.push_with(rel, kind, old, new, None, None)
    }

    fn push_with(
        &mut self,
        rel: &Path,
        kind: ChangeKind,
        old: Option<Entry>,
        new: Option<Entry>,
        old_content: Option<Side>,
        new_content: Option<Side>,
    ) -> Result<()> {
        let oc = match old_content {
            Some(c) => c,
            None => Self::side_content(&self.lower, rel, old.as_ref())?,
        };
        let nc = match new_content {
            Some(c) => c,
            None => Self::side_content(&self.upper, rel, new.as_ref())?,
        };
        let regular = |e: &Option<Entry>| e.as_ref().is_some_and(|e| e.file_type == FileType::File);
        let bin_of = |c: &Side, reg: bool| matches!(c, Side::Bytes(b) if reg && is_binary(b));
        let binary = bin_of(&oc, regular(&old)) || bin_of(&nc, regular(&new));
        let text = |c: &Side| match c {
            Side::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
            _ => String::new(),
        };
        let (insertions, deletions) = if binary || kind == ChangeKind::ModeChanged {
            (0, 0)
        } else if kind == ChangeKind::TypeChanged {
            // Shown as a deletion of the old entry plus an addition of the new.
            let ins = crate::diff::line_counts("", &text(&nc)).0;
            let del = crate::diff::line_counts(&text(&oc), "").1;
            (ins, del)
        } else {
            crate::diff::line_counts(&text(&oc), &text(&nc))
        };
        let new_sha256 = match &nc {
            Side::Bytes(b) => Some(sha256_hex(b)),
            _ => None,
        };
        let change = Change {
            path: rel.to_path_buf(),
            kind,
            old,
            new,
            binary,
            insertions,
            deletions,
            new_sha256,
            protected: self.rules.is_protected(rel),
        };
        self.out.insert(rel.as_os_str().as_bytes().to_vec(), change);
        Ok(())
    }

    /// `rel` is a whiteout.
    fn whiteout(&mut self, rel: &Path, in_opaque: bool) -> Result<()> {
        let Some((old, _)) = self.lower_entry(rel)? else {
            return Ok(());
        };
        let is_dir = old.file_type == FileType::Dir;
        self.push(rel, ChangeKind::Deleted, Some(old), None)?;
        if is_dir && !in_opaque {
            self.lower_subtree_deletions(rel, |_| false)?;
        }
        Ok(())
    }

    /// Every lower entry below `rel` for which `keep` is false is deleted.
    fn lower_subtree_deletions(&mut self, rel: &Path, keep: impl Fn(&Path) -> bool) -> Result<()> {
        let base = self.lower.show(rel);
        let lower_root = self.lower.path().to_path_buf();
        for entry in WalkDir::new(&base).min_depth(1).follow_links(false) {
            let entry = entry.map_err(|e| {
                let path = e.path().unwrap_or(&base).to_path_buf();
                Error::io("walk", path, e)
            })?;
            let q = entry
                .path()
                .strip_prefix(&lower_root)
                .expect("below lower root")
                .to_path_buf();
            if keep(&q) {
                continue;
            }
            if let Some((old, _)) = self.lower_entry(&q)? {
                self.push(&q, ChangeKind::Deleted, Some(old), None)?;
            }
        }
        Ok(())
    }

    /// `rel` is an opaque directory: lower entries below it without an
    /// upper counterpart are deleted.
    fn opaque_deletions(&mut self, rel: &Path) -> Result<()> {
        match self.lower.probe_lenient(rel)? {
            Some(md) if md.file_type().is_dir() => {}
            _ => return Ok(()),
        }
        let upper_root = self.upper.path().to_path_buf();
        self.lower_subtree_deletions(rel, |q| {
            std::fs::symlink_metadata(upper_root.join(q)).is_ok()
        })
    }

    fn compare(
        &mut self,
        rel: &Path,
        full: &Path,
        md: &std::fs::Metadata,
        in_opaque: bool,
    ) -> Result<()> {
        let target = if md.file_type().is_symlink() {
            Some(std::fs::read_link(full).ctx("readlink", full)?)
        } else {
            None
        };
        let new = Entry::from_metadata(md, target);
        let Some((old, _)) = self.lower_entry(rel)? else {
            return self.push(rel, ChangeKind::Added, None, Some(new));
        };
        if old.file_type != new.file_type {
            let was_dir = old.file_type == FileType::Dir;
            self.push(rel, ChangeKind::TypeChanged, Some(old), Some(new))?;
            // A file or symlink over a lower directory hides all of it
            // (inside an opaque region the opaque root already did this).
            if was_dir && !in_opaque {
                self.lower_subtree_deletions(rel, |_| false)?;
            }
            return Ok(());
        }
        match new.file_type {
            FileType::Dir => {
                if old.mode != new.mode {
                    self.push(rel, ChangeKind::ModeChanged, Some(old), Some(new))?;
                }
                Ok(())
            }
            FileType::Symlink => {
                if old.symlink_target != new.symlink_target {
                    self.push(rel, ChangeKind::Modified, Some(old), Some(new))?;
                }
                Ok(())
            }
            FileType::File => {
                if overlay_xattr(full, "metacopy").is_some() {
                    if overlay_xattr(full, "redirect").is_some() {
                        return Err(Error::UnsupportedOverlay {
                            path: full.to_path_buf(),
                            what: "metacopy with redirect",
                        });
                    }
                    // Metadata-only copy-up: the data is still the lower file's.
                    if old.mode != new.mode {
                        let new = Entry {
                            size: old.size,
                            ..new
                        };
                        self.push(rel, ChangeKind::ModeChanged, Some(old), Some(new))?;
                    }
                    return Ok(());
                }
                let (old_bytes, _) = self.lower.read_file(rel)?;
                let (new_bytes, _) = self.upper.read_file(rel)?;
                if old_bytes != new_bytes {
                    self.push_with(
                        rel,
                        ChangeKind::Modified,
                        Some(old),
                        Some(new),
                        Some(Side::Bytes(old_bytes)),
                        Some(Side::Bytes(new_bytes)),
                    )
                } else if old.mode != new.mode {
                    self.push_with(
                        rel,
                        ChangeKind::ModeChanged,
                        Some(old),
                        Some(new),
                        Some(Side::Bytes(old_bytes)),
                        Some(Side::Bytes(new_bytes)),
                    )
                } else {
                    Ok(())
                }
            }
            _ => {
                if old.mode != new.mode || old.size != new.size {
                    self.push(rel, ChangeKind::Modified, Some(old), Some(new))?;
                }
                Ok(())
            }
        }
    }
}
