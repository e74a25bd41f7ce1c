//! `start`, `kill`, `delete`, `pause`, `resume`: state transitions of an existing container, each
//! under the container's lock.

use libcontainer::container::ContainerStatus;

use crate::error::{Error, ErrorKind, Result};
use crate::lock::ContainerLock;
use crate::{container, prepare, root, signal, Globals};

fn not_running(id: &str) -> Error {
    Error::new(
        ErrorKind::NotRunning,
        format!("container \"{id}\" is not running: container not running"),
    )
}

/// `start ID`: let the created container's init run its process.
pub fn start(g: &Globals, id: &str) -> Result<()> {
    let root = root::existing(&g.root)?;
    let _lock = ContainerLock::acquire_existing(&root, id)?;
    let mut c = container::load(&root, id)?;
    match c.status() {
        ContainerStatus::Created => c
            .start()
            .map_err(|e| Error::from_libcontainer(format!("start container {id}"), &e)),
        ContainerStatus::Stopped => Err(Error::new(
            ErrorKind::InvalidState,
            "cannot start a container that has stopped",
        )),
        ContainerStatus::Running | ContainerStatus::Paused => Err(Error::new(
            ErrorKind::InvalidState,
            "cannot start an already running container",
        )),
        ContainerStatus::Creating => Err(Error::new(
            ErrorKind::InvalidState,
            "cannot start a container that is still being created",
        )),
    }
}

/// `kill ID [SIGNAL] [--all]`.
pub fn kill(g: &Globals, id: &str, sig: &str, all: bool) -> Result<()> {
    let sig = signal::parse_or_zero(sig)?;
    // Rootless on a v1 host: the same cgroup view as at create. There the container has no
    // cgroup of its own to list processes from, so `--all` signals the init (see below).
    let no_cgroup = crate::rootless_cgroups::prepare(&oci_spec::runtime::Spec::default())?;
    let all = all && !no_cgroup;
    let root = root::existing(&g.root)?;
    let _lock = ContainerLock::acquire_existing(&root, id)?;
    let mut c = container::load(&root, id)?;
    let before = c.status();
    if !all
        && !matches!(
            before,
            ContainerStatus::Created | ContainerStatus::Running | ContainerStatus::Paused
        )
    {
        return Err(not_running(id));
    }
    if let Some(pid) = c.pid() {
        if !all && nix::sys::signal::kill(pid, None).is_err() {
            return Err(Error::new(
                ErrorKind::NotRunning,
                format!("container \"{id}\": no such process"),
            ));
        }
    }
    let Some(sig) = sig else {
        // Signal 0: the liveness check above is all there is to do.
        return Ok(());
    };
    c.kill(sig, all)
        .map_err(|e| Error::from_libcontainer(format!("kill container {id}"), &e))?;
    // libcontainer marks the container stopped after any signal; a signal that did not end the
    // init process (SIGUSR1, SIGWINCH, …) must not change what `state` reports.
    if let Some(pid) = c.pid() {
        if before != ContainerStatus::Stopped
            && nix::sys::signal::kill(pid, None).is_ok()
            && !is_zombie(pid.as_raw())
        {
            c.set_status(before);
            c.save()
                .map_err(|e| Error::from_libcontainer("save state", &e))?;
        }
    }
    Ok(())
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with(['Z', 'X']))
        })
        .unwrap_or(true)
}

/// Remove a container whose supervisor died (for instance a SIGKILLed `shadow run`): like
/// `delete --force`, and where that cannot work (no cgroup to kill through, rootless), kill the
/// recorded init directly and remove the state by hand. Nothing of the container survives.
pub fn delete_stale(g: &Globals, id: &str) -> Result<()> {
    let err = match delete(g, id, true) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    let root = root::existing(&g.root)?;
    let _lock = ContainerLock::acquire_existing(&root, id)?;
    if let Ok(c) = container::load(&root, id) {
        if let Some(pid) = c.pid() {
            // The init is pid 1 of its namespace: SIGKILL ends every process in it.
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
    let dir = container::dir(&root, id);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| Error::io(format!("remove state of {id}"), e).context(&err))?;
    }
    let _ = std::fs::remove_dir_all(prepare::effective_bundle_dir(&root, id));
    let _ = std::fs::remove_file(root.join(".locks").join(id));
    Ok(())
}

/// `delete ID [--force]`.
pub fn delete(g: &Globals, id: &str, force: bool) -> Result<()> {
    // Rootless on a v1 host: the same cgroup view as at create, or libcontainer's v1 manager
    // fails on a cgroup that was never made (a created container could not be deleted).
    let no_cgroup = crate::rootless_cgroups::prepare(&oci_spec::runtime::Spec::default())?;
    let root = root::existing(&g.root)?;
    crate::id::validate(id)?;
    let lock = ContainerLock::acquire_existing(&root, id)?;
    let mut c = match container::load(&root, id) {
        Ok(c) => c,
        Err(e) if e.kind() == ErrorKind::NotFound && force => {
            // runc: `delete --force` of a missing container succeeds (engines always send it).
            let _ = std::fs::remove_dir_all(prepare::effective_bundle_dir(&root, id));
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    if !force
        && matches!(
            c.status(),
            ContainerStatus::Running | ContainerStatus::Paused | ContainerStatus::Creating
        )
    {
        return Err(Error::new(
            ErrorKind::InvalidState,
            format!(
                "cannot delete container \"{id}\" that is not stopped: {}",
                container::status_word(c.status())
            ),
        ));
    }
    if no_cgroup && c.status() != ContainerStatus::Stopped {
        // libcontainer kills a created (or forced) container through its cgroup's process
        // list, and this container has no cgroup: end its init instead and wait for it.
        kill_init_and_wait(&mut c, id)?;
    }
    if let Err(e) = c.delete(force) {
        // libcontainer stops at a failing poststop hook after the container is already gone
        // (processes killed, cgroup removed) but before its state directory is removed. The
        // runtime spec says such failures are logged and the deletion carries on; otherwise the
        // container could never be deleted.
        let text = crate::error::chain(&e);
        let stopped = c
            .pid()
            .is_none_or(|p| nix::sys::signal::kill(p, None).is_err() || is_zombie(p.as_raw()));
        if text.contains("hook") && stopped {
            tracing::warn!("delete {id}: poststop hook failed: {text}");
            std::fs::remove_dir_all(container::dir(&root, id))
                .map_err(|e| Error::io(format!("remove state of {id}"), e))?;
        } else {
            return Err(Error::from_libcontainer(
                format!("delete container {id}"),
                &e,
            ));
        }
    }
    let _ = std::fs::remove_dir_all(prepare::effective_bundle_dir(&root, id));
    lock.remove();
    Ok(())
}

/// SIGKILL a container's init and wait (up to 10 s) until it is gone or a zombie. The init is
/// pid 1 of the container's pid namespace, so the kernel ends every process in it; a container
/// sharing a pid namespace with its host keeps its other processes, as with runc when it has no
/// cgroup to go by, and the runtime says so.
fn kill_init_and_wait(c: &mut libcontainer::container::Container, id: &str) -> Result<()> {
    let Some(pid) = c.pid() else { return Ok(()) };
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    if ns(&pid.to_string()).is_some_and(|n| Some(n) == ns("self")) {
        tracing::warn!("container {id} shares the runtime's pid namespace and has no cgroup: only its init is killed");
    }
    c.kill(nix::sys::signal::Signal::SIGKILL, false)
        .map_err(|e| Error::from_libcontainer(format!("kill container {id}"), &e))?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while nix::sys::signal::kill(pid, None).is_ok() && !is_zombie(pid.as_raw()) {
        if std::time::Instant::now() > deadline {
            return Err(Error::new(
                ErrorKind::InvalidState,
                format!("container \"{id}\": init {pid} did not die after SIGKILL"),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(())
}

/// `pause ID`.
pub fn pause(g: &Globals, id: &str) -> Result<()> {
    let root = root::existing(&g.root)?;
    let _lock = ContainerLock::acquire_existing(&root, id)?;
    let mut c = container::load(&root, id)?;
    if c.status() != ContainerStatus::Running {
        return Err(not_running(id));
    }
    c.pause()
        .map_err(|e| Error::from_libcontainer(format!("pause container {id}"), &e))
}

/// `resume ID`.
pub fn resume(g: &Globals, id: &str) -> Result<()> {
    let root = root::existing(&g.root)?;
    let _lock = ContainerLock::acquire_existing(&root, id)?;
    let mut c = container::load(&root, id)?;
    if c.status() != ContainerStatus::Paused {
        return Err(Error::new(
            ErrorKind::InvalidState,
            format!("container \"{id}\" is not paused"),
        ));
    }
    c.resume()
        .map_err(|e| Error::from_libcontainer(format!("resume container {id}"), &e))
}
