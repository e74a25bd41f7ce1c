//! `run`: create and start in one step; in the foreground, wait, forward signals, return the
//! container's exit status and delete it (unless `--keep`).

use crate::create::{create_with, CreateOptions};
use crate::error::{Error, Result};
use crate::tty::ConsoleListener;
use crate::{foreground, lifecycle, root, Globals};

/// Options of `run`.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The create options.
    pub create: CreateOptions,
    /// Return once the container has started.
    pub detach: bool,
    /// Do not delete the container after it exits.
    pub keep: bool,
    /// Stop the container after this long (SIGTERM to all its processes, SIGKILL after
    /// `grace`); the outcome then says `timed_out`.
    pub timeout: Option<std::time::Duration>,
    /// Grace period between SIGTERM and SIGKILL on timeout.
    pub grace: std::time::Duration,
}

/// Run a container. Returns the exit status to exit with (0 when detached).
pub fn run(g: &Globals, o: &RunOptions) -> Result<i32> {
    run_outcome(g, o).map(|e| e.code)
}

/// [`run`], also telling whether the timeout fired.
pub fn run_outcome(g: &Globals, o: &RunOptions) -> Result<foreground::Exit> {
    run_outcome_with(g, o, &mut |_| Ok(()))
}

/// [`run_outcome`], calling `after_create` with the init's pid once the container is created
/// and before it starts (foreground runs only): the place to attach things to its namespaces.
/// An error there deletes the container and is returned.
pub fn run_outcome_with(
    g: &Globals,
    o: &RunOptions,
    after_create: &mut dyn FnMut(nix::unistd::Pid) -> Result<()>,
) -> Result<foreground::Exit> {
    if o.detach {
        let mut c = create_with(g, &o.create, true)?;
        if let Err(e) = c.start() {
            let _ = lifecycle::delete(g, &o.create.id, true);
            return Err(Error::from_libcontainer("start container", &e));
        }
        return Ok(foreground::Exit {
            code: 0,
            timed_out: false,
        });
    }
    foreground::set_subreaper()?;
    let loaded;
    let spec = match &o.create.spec {
        Some(s) => s,
        None => {
            loaded = crate::spec_load::load(&root::absolute(&o.create.bundle)?)?;
            &loaded
        }
    };
    let spec_terminal = spec
        .process()
        .as_ref()
        .and_then(|p| p.terminal())
        .unwrap_or(false);
    // A terminal without a console socket: we receive the pty master ourselves and proxy it.
    let mut create = o.create.clone();
    let listener = if spec_terminal && create.console_socket.is_none() {
        let root = root::prepare(&g.root)?;
        let path = root.join(format!(".console-{}.sock", std::process::id()));
        let l = ConsoleListener::bind(&path)?;
        create.console_socket = Some(path);
        Some(l)
    } else {
        None
    };
    let c = create_with(g, &create, false)?;
    let id = o.create.id.clone();
    let fail = |e: Error| {
        let _ = lifecycle::delete(g, &id, true);
        e
    };
    let pid = c
        .pid()
        .ok_or_else(|| fail(Error::runtime("container has no init pid")))?;
    let attached = match &listener {
        Some(l) => Some(l.attach().map_err(fail)?),
        None => None,
    };
    let master_fd = attached.as_ref().map(|a| a.master);
    after_create(pid).map_err(fail)?;
    let set = foreground::block_signals().map_err(fail)?;
    let mut c = c;
    c.start()
        .map_err(|e| fail(Error::from_libcontainer("start container", &e)))?;
    let deadline = o.timeout.map(|t| foreground::Deadline {
        at: std::time::Instant::now() + t,
        grace: o.grace,
    });
    let mut on_timeout = || {
        // Ask every process in the container to stop (the init alone may ignore SIGTERM as
        // pid 1 of its namespace).
        if lifecycle::kill(g, &id, "SIGTERM", true).is_err() {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
    };
    let exit =
        foreground::wait_until(&set, pid, master_fd, deadline, &mut on_timeout).map_err(fail)?;
    if !o.keep {
        lifecycle::delete(g, &id, true)?;
        // Every process is gone now, so the pty's slave side is closed and the copy ends.
        if let Some(a) = attached {
            let _ = a.output.join();
        }
    }
    Ok(exit)
}
