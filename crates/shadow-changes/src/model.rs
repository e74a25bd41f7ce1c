//! Plain data describing a change set.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// File type of one side of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileType {
    /// Regular file.
    File,
    /// Symbolic link.
    Symlink,
    /// Directory.
    Dir,
    /// Named pipe (never applied).
    Fifo,
    /// Unix socket (never applied).
    Socket,
    /// Character device (never applied; 0:0 in an upper layer is a whiteout).
    CharDevice,
    /// Block device (never applied).
    BlockDevice,
}

impl FileType {
    /// Classify std metadata.
    pub fn of(ft: std::fs::FileType) -> Self {
        if ft.is_symlink() {
            FileType::Symlink
        } else if ft.is_dir() {
            FileType::Dir
        } else if ft.is_file() {
            FileType::File
        } else if ft.is_fifo() {
            FileType::Fifo
        } else if ft.is_socket() {
            FileType::Socket
        } else if ft.is_char_device() {
            FileType::CharDevice
        } else {
            FileType::BlockDevice
        }
    }

    /// Whether this is a type the apply engine may create.
    pub fn is_applicable(self) -> bool {
        matches!(self, FileType::File | FileType::Symlink | FileType::Dir)
    }

    /// Short human name.
    pub fn name(self) -> &'static str {
        match self {
            FileType::File => "regular file",
            FileType::Symlink => "symlink",
            FileType::Dir => "directory",
            FileType::Fifo => "fifo",
            FileType::Socket => "socket",
            FileType::CharDevice => "character device",
            FileType::BlockDevice => "block device",
        }
    }
}

/// Metadata of one side (lower = before, upper = after) of a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Type of the entry.
    pub file_type: FileType,
    /// Permission bits as found (`st_mode & 0o7777`; apply strips
    /// setuid/setgid/sticky).
    pub mode: u32,
    /// Size in bytes (`st_size`).
    pub size: u64,
    /// Target, for symlinks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symlink_target: Option<PathBuf>,
}

impl Entry {
    pub(crate) fn from_metadata(md: &std::fs::Metadata, target: Option<PathBuf>) -> Self {
        Entry {
            file_type: FileType::of(md.file_type()),
            mode: md.mode() & 0o7777,
            size: md.size(),
            symlink_target: target,
        }
    }

    /// Git's mode word for this entry (`100644`, `100755`, `120000`, `40000`).
    /// Regular files show their real permission bits.
    pub fn git_mode(&self) -> String {
        match self.file_type {
            FileType::Symlink => "120000".into(),
            FileType::Dir => "40000".into(),
            _ => format!("{:06o}", 0o100000 | (self.mode & 0o7777)),
        }
    }
}

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Exists only after.
    Added,
    /// Content (or symlink target) changed; the mode may have changed too.
    Modified,
    /// Exists only before.
    Deleted,
    /// Same path, different file type (file/symlink/dir).
    TypeChanged,
    /// Same content, different permission bits.
    ModeChanged,
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Path relative to the project root.
    pub path: PathBuf,
    /// Classification.
    pub kind: ChangeKind,
    /// Before (lower layer); `None` for added paths.
    pub old: Option<Entry>,
    /// After (upper layer); `None` for deleted paths.
    pub new: Option<Entry>,
    /// Either side is a regular file whose content is binary (NUL in the
    /// first 8 KiB, or not valid UTF-8).
    pub binary: bool,
    /// Lines added (0 for binary files and directories).
    pub insertions: u64,
    /// Lines removed (0 for binary files and directories).
    pub deletions: u64,
    /// Hex SHA-256 of the new content (regular files: content; symlinks:
    /// target bytes); `None` for deletions and directories.
    pub new_sha256: Option<String>,
    /// Whether the path matches the protected-path rules.
    pub protected: bool,
}

impl Change {
    /// Type before, if any.
    pub fn old_type(&self) -> Option<FileType> {
        self.old.as_ref().map(|e| e.file_type)
    }

    /// Type after, if any.
    pub fn new_type(&self) -> Option<FileType> {
        self.new.as_ref().map(|e| e.file_type)
    }

    /// True for changes that involve only directories on both present
    /// sides (git does not show those).
    pub fn is_dir_only(&self) -> bool {
        self.old_type().is_none_or(|t| t == FileType::Dir)
            && self.new_type().is_none_or(|t| t == FileType::Dir)
    }
}

/// A session's changes relative to the lower layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeSet {
    /// The lower directory the scan compared against.
    pub lower: PathBuf,
    /// The upper directory that was scanned.
    pub upper: PathBuf,
    /// Changes sorted by path bytes (git's order).
    pub changes: Vec<Change>,
}

impl ChangeSet {
    /// The change for `path`, if any.
    pub fn get(&self, path: &Path) -> Option<&Change> {
        self.changes
            .binary_search_by(|c| path_cmp(&c.path, path))
            .ok()
            .map(|i| &self.changes[i])
    }

    /// Keep only changes whose path equals one of `filters` or lies below
    /// one (`src` keeps `src/a.rs`; `src/a.rs` keeps just that file). An
    /// empty filter list keeps everything.
    pub fn filter<P: AsRef<Path>>(&self, filters: &[P]) -> ChangeSet {
        let changes = if filters.is_empty() {
            self.changes.clone()
        } else {
            self.changes
                .iter()
                .filter(|c| filters.iter().any(|f| c.path.starts_with(f.as_ref())))
                .cloned()
                .collect()
        };
        ChangeSet {
            lower: self.lower.clone(),
            upper: self.upper.clone(),
            changes,
        }
    }

    /// Whether there are no changes.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}

/// Order paths by their bytes, which is the order git lists paths in.
pub fn path_cmp(a: &Path, b: &Path) -> std::cmp::Ordering {
    a.as_os_str().as_bytes().cmp(b.as_os_str().as_bytes())
}

/// Binary heuristic: NUL in the first 8 KiB, or not valid UTF-8.
pub fn is_binary(content: &[u8]) -> bool {
    content[..content.len().min(8192)].contains(&0) || std::str::from_utf8(content).is_err()
}

/// Hex SHA-256.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(data))
}
