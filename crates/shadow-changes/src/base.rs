//! Base records: what each changed path looked like in the lower layer at
//! session end, so that apply can detect that the project drifted since.
//!
//! Threat: the user (or another tool) edits the project while the agent
//! works. Blindly applying the session would silently overwrite those
//! edits; instead apply compares the project's current state of every
//! target with this record and refuses, naming every drifted path, unless
//! forced.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::model::{sha256_hex, ChangeSet, FileType};
use crate::safefs::Root;

/// State of one path (type, mode, size and content hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EntryState {
    /// Nothing at this path.
    Absent,
    /// Regular file.
    File {
        /// Size in bytes.
        size: u64,
        /// `st_mode & 0o7777`.
        mode: u32,
        /// Hex SHA-256 of the content.
        sha256: String,
    },
    /// Symbolic link.
    Symlink {
        /// Link target.
        target: PathBuf,
    },
    /// Directory.
    Dir {
        /// `st_mode & 0o7777`.
        mode: u32,
    },
    /// Device node, fifo or socket.
    Other {
        /// Its type.
        file_type: FileType,
        /// `st_mode & 0o7777`.
        mode: u32,
    },
}

impl EntryState {
    /// The type, or `None` when absent.
    pub fn file_type(&self) -> Option<FileType> {
        match self {
            EntryState::Absent => None,
            EntryState::File { .. } => Some(FileType::File),
            EntryState::Symlink { .. } => Some(FileType::Symlink),
            EntryState::Dir { .. } => Some(FileType::Dir),
            EntryState::Other { file_type, .. } => Some(*file_type),
        }
    }
}

/// A probed state, the file content (regular files) and the owner.
pub(crate) type Probed = (EntryState, Option<Vec<u8>>, Option<(u32, u32)>);

/// The state of `rel` under `root` plus, for regular files, the content
/// and, for anything present, the owner. Parents are resolved safely; a
/// symlinked parent is an error.
pub(crate) fn current_state(root: &Root, rel: &Path) -> Result<Probed> {
    use std::os::unix::fs::MetadataExt;
    let Some(md) = root.probe(rel)? else {
        return Ok((EntryState::Absent, None, None));
    };
    let owner = Some((md.uid(), md.gid()));
    let mode = md.mode() & 0o7777;
    Ok(match FileType::of(md.file_type()) {
        FileType::File => {
            let (content, md) = root.read_file(rel)?;
            (
                EntryState::File {
                    size: md.size(),
                    mode: md.mode() & 0o7777,
                    sha256: sha256_hex(&content),
                },
                Some(content),
                owner,
            )
        }
        FileType::Symlink => (
            EntryState::Symlink {
                target: root.read_link(rel)?,
            },
            None,
            owner,
        ),
        FileType::Dir => (EntryState::Dir { mode }, None, owner),
        file_type => (EntryState::Other { file_type, mode }, None, owner),
    })
}

/// The recorded base of a session.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BaseRecord {
    /// Format version (1).
    pub version: u32,
    /// State of every changed path in the lower layer.
    pub entries: BTreeMap<PathBuf, EntryState>,
}

impl BaseRecord {
    /// The recorded state of `path`.
    pub fn get(&self, path: &Path) -> Option<&EntryState> {
        self.entries.get(path)
    }

    /// Write as JSON (atomically, fsynced).
    pub fn save(&self, path: &Path) -> Result<()> {
        let s = serde_json::to_string_pretty(self).expect("base record serialises");
        crate::journal::write_json_atomic(path, &s)
    }

    /// Read from JSON.
    pub fn load(path: &Path) -> Result<Self> {
        let s = std::fs::read_to_string(path).ctx("read", path)?;
        serde_json::from_str(&s).map_err(|e| Error::Json {
            path: path.to_path_buf(),
            msg: e.to_string(),
        })
    }
}

/// Record the lower layer's state of every path in `changes` (call at
/// session end; cost grows with the number of changes).
pub fn record_base(lower: &Path, changes: &ChangeSet) -> Result<BaseRecord> {
    let root = Root::open(lower)?;
    let mut entries = BTreeMap::new();
    for c in &changes.changes {
        let state = match current_state(&root, &c.path) {
            Ok((s, _, _)) => s,
            // A symlinked parent in lower: the path does not exist as a
            // symlink-free path, which is what apply will also see.
            Err(Error::SymlinkInPath { .. }) => EntryState::Absent,
            Err(e) => return Err(e),
        };
        entries.insert(c.path.clone(), state);
    }
    Ok(BaseRecord {
        version: 1,
        entries,
    })
}
