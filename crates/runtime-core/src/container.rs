//! Finding containers in the state root.

use std::path::{Path, PathBuf};

use libcontainer::container::{Container, ContainerStatus};

use crate::error::{Error, ErrorKind, Result};
use crate::id;

/// The state directory of `id` under `root`.
pub fn dir(root: &Path, id: &str) -> PathBuf {
    root.join(id)
}

/// The "does not exist" error, worded as runc's so engines recognise it.
pub fn not_found(id: &str) -> Error {
    Error::new(
        ErrorKind::NotFound,
        format!("container \"{id}\" does not exist"),
    )
}

/// Load container `id`, with its status refreshed from /proc.
pub fn load(root: &Path, id: &str) -> Result<Container> {
    id::validate(id)?;
    let d = dir(root, id);
    if !d.join("state.json").exists() {
        return Err(not_found(id));
    }
    Container::load(d).map_err(|e| Error::from_libcontainer(format!("load container {id}"), &e))
}

/// [`load`] under the container's lock, released on return: a consistent snapshot for
/// read-only commands (libcontainer rewrites `state.json` in place, so an unlocked read can
/// see it half-written while another command saves it).
pub fn load_locked(root: &Path, id: &str) -> Result<Container> {
    let _lock = crate::lock::ContainerLock::acquire_existing(root, id)?;
    load(root, id)
}

/// runc's lower-case status words.
pub fn status_word(s: ContainerStatus) -> &'static str {
    match s {
        ContainerStatus::Creating => "creating",
        ContainerStatus::Created => "created",
        ContainerStatus::Running => "running",
        ContainerStatus::Stopped => "stopped",
        ContainerStatus::Paused => "paused",
    }
}

/// All container ids under `root`, sorted.
pub fn ids(root: &Path) -> Result<Vec<String>> {
    let rd = match std::fs::read_dir(root) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("read {}", root.display()), e)),
    };
    let mut out: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.') && id::validate(n).is_ok())
        .filter(|n| root.join(n).join("state.json").exists())
        .collect();
    out.sort();
    Ok(out)
}
