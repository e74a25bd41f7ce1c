//! Shared test fixtures: real overlayfs mounts (we run as root), tree
//! snapshots for byte-for-byte comparison, and git helpers.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

/// A mounted overlay: `lower` (the "project"), `upper`, `work`, `merged`.
/// Unmounted on drop.
pub struct Overlay {
    pub dir: TempDir,
    pub lower: PathBuf,
    pub upper: PathBuf,
    pub work: PathBuf,
    pub merged: PathBuf,
    mounted: bool,
}

impl Overlay {
    /// Create the directories; `populate` fills `lower` before mounting.
    pub fn new(populate: impl FnOnce(&Path)) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("shadow-changes-")
            .tempdir()
            .unwrap();
        let p = |n: &str| {
            let p = dir.path().join(n);
            fs::create_dir(&p).unwrap();
            p
        };
        let (lower, upper, work, merged) = (p("lower"), p("upper"), p("work"), p("merged"));
        populate(&lower);
        let opts = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.display(),
            upper.display(),
            work.display()
        );
        rustix::mount::mount(
            "overlay",
            &merged,
            "overlay",
            rustix::mount::MountFlags::empty(),
            std::ffi::CString::new(opts).unwrap().as_c_str(),
        )
        .expect("mount overlay (tests must run as root)");
        Overlay {
            dir,
            lower,
            upper,
            work,
            merged,
            mounted: true,
        }
    }

    /// A path in the merged view.
    pub fn m(&self, rel: &str) -> PathBuf {
        self.merged.join(rel)
    }

    /// Unmount now (so the upper layer is stable for applying).
    pub fn unmount(&mut self) {
        if self.mounted {
            rustix::mount::unmount(&self.merged, rustix::mount::UnmountFlags::DETACH).unwrap();
            self.mounted = false;
        }
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        if self.mounted {
            let _ = rustix::mount::unmount(&self.merged, rustix::mount::UnmountFlags::DETACH);
        }
    }
}

pub fn write(path: impl AsRef<Path>, content: impl AsRef<[u8]>) {
    let path = path.as_ref();
    if let Some(p) = path.parent() {
        fs::create_dir_all(p).unwrap();
    }
    fs::write(path, content).unwrap();
}

pub fn chmod(path: impl AsRef<Path>, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

pub fn symlink(target: &str, link: impl AsRef<Path>) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

/// What a tree looks like, byte for byte: type, permission bits, content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File { mode: u32, content: Vec<u8> },
    Symlink(PathBuf),
    Dir { mode: u32 },
    Other { mode: u32 },
}

pub type Tree = BTreeMap<PathBuf, Node>;

/// Snapshot `root` recursively (not following symlinks).
pub fn snapshot(root: &Path) -> Tree {
    let mut t = Tree::new();
    fn walk(root: &Path, dir: &Path, t: &mut Tree) {
        let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let md = fs::symlink_metadata(&p).unwrap();
            let mode = md.mode() & 0o7777;
            let node = if md.file_type().is_symlink() {
                Node::Symlink(fs::read_link(&p).unwrap())
            } else if md.is_dir() {
                walk(root, &p, t);
                Node::Dir { mode }
            } else if md.is_file() {
                Node::File {
                    mode,
                    content: fs::read(&p).unwrap(),
                }
            } else {
                Node::Other { mode }
            };
            t.insert(rel, node);
        }
    }
    walk(root, root, &mut t);
    t
}

/// Copy a tree (regular files, dirs, symlinks) preserving modes.
pub fn copy_tree(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

pub fn have_git() -> bool {
    Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Run `git diff <extra>` between two directory trees, using a scratch
/// repository (tree objects written from each directory's content).
pub fn git_diff_trees(before: &Path, after: &Path, extra: &[&str]) -> String {
    let scratch = TempDir::new().unwrap();
    let repo = scratch.path().join("repo");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let tree_of = |src: &Path| {
        // Replace the work tree with `src`'s content.
        for e in fs::read_dir(&repo).unwrap() {
            let e = e.unwrap();
            if e.file_name() != ".git" {
                let p = e.path();
                if fs::symlink_metadata(&p).unwrap().is_dir() {
                    fs::remove_dir_all(&p).unwrap();
                } else {
                    fs::remove_file(&p).unwrap();
                }
            }
        }
        copy_tree(src, &repo);
        git(&repo, &["add", "-A"]);
        git(&repo, &["write-tree"]).trim().to_string()
    };
    let t1 = tree_of(before);
    let t2 = tree_of(after);
    let mut args = vec![
        "-c",
        "core.quotePath=true",
        "diff",
        "--no-color",
        "--no-renames",
    ];
    args.extend_from_slice(extra);
    args.push(&t1);
    args.push(&t2);
    git(&repo, &args)
}
