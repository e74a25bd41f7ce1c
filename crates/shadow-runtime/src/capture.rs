//! `create`, `run` and `delete` with shadow capture (see the shadow-capture crate): the glue
//! between a capture request and the runtime library. A container that asks for nothing goes
//! straight to the library.

use shadow_capture::{Capture, Flags};
use shadow_runtime_core as core;

fn err(e: shadow_capture::Error) -> core::Error {
    core::Error::invalid(e.to_string())
}

/// The capture a container being created asks for, with the spec to create it from.
fn begin(flags: &Flags, o: &core::create::CreateOptions) -> core::Result<Option<Capture>> {
    let bundle = core::root::absolute(&o.bundle)?;
    let spec = core::spec_load::load(&bundle)?;
    let Some(req) = shadow_capture::request(spec.annotations().as_ref(), flags).map_err(err)?
    else {
        return Ok(None);
    };
    core::id::validate(&o.id)?;
    shadow_capture::begin(spec, &req, &o.id)
        .map(Some)
        .map_err(err)
}

/// Keep the spec as it ran and log the start; on failure the container is removed again.
fn started(g: &core::Globals, cap: &Capture, id: &str, pid: Option<i32>) -> core::Result<()> {
    let root = core::root::existing(&g.root)?;
    let c = core::container::load(&root, id)?;
    let effective = core::prepare::spec_as_created(&root, &c)?;
    cap.started(&effective, pid).map_err(err)
}

/// `create`.
pub fn create(
    g: &core::Globals,
    flags: &Flags,
    o: &core::create::CreateOptions,
) -> core::Result<i32> {
    create_capturing(g, flags, o).map(|_| 0)
}

/// `create`, returning the capture (if any) of the container now created.
fn create_capturing(
    g: &core::Globals,
    flags: &Flags,
    o: &core::create::CreateOptions,
) -> core::Result<Option<Capture>> {
    let Some(cap) = begin(flags, o)? else {
        return core::create::create(g, o).map(|_| None);
    };
    let mut o = o.clone();
    o.spec = Some(cap.spec.clone());
    let c = match core::create::create(g, &o) {
        Ok(c) => c,
        Err(e) => {
            // Nothing of ours to delete: create cleans up after itself, and an id that already
            // exists names someone else's container.
            cap.abort();
            return Err(e);
        }
    };
    if let Err(e) = started(g, &cap, &o.id, c.pid().map(|p| p.as_raw())) {
        let _ = core::lifecycle::delete(g, &o.id, true);
        cap.abort();
        return Err(e);
    }
    Ok(Some(cap))
}

/// `run`: in the foreground the session ends with the container, exit status known.
pub fn run(g: &core::Globals, flags: &Flags, o: &core::run::RunOptions) -> core::Result<i32> {
    if o.detach {
        // Detached: create (capturing if asked) and start; `delete` ends the session.
        let cap = create_capturing(g, flags, &o.create)?;
        return match core::lifecycle::start(g, &o.create.id) {
            Ok(()) => Ok(0),
            Err(e) => {
                let _ = core::lifecycle::delete(g, &o.create.id, true);
                if let Some(cap) = cap {
                    cap.abort();
                }
                Err(e)
            }
        };
    }
    let Some(cap) = begin(flags, &o.create)? else {
        return core::run::run(g, o);
    };
    let mut o = o.clone();
    o.create.spec = Some(cap.spec.clone());
    let id = o.create.id.clone();
    let annotations = cap.spec.annotations().clone().unwrap_or_default();
    let mut was_started = false;
    let result = core::run::run_outcome_with(g, &o, &mut |pid| {
        started(g, &cap, &id, Some(pid.as_raw()))?;
        was_started = true;
        Ok(())
    });
    match result {
        Ok(exit) => {
            if !o.keep {
                shadow_capture::finish(&annotations, Some(exit.code)).map_err(err)?;
            }
            Ok(exit.code)
        }
        // The container ran: what it changed is kept for review, never thrown away.
        Err(e) if was_started => {
            let _ = shadow_capture::finish(&annotations, None);
            Err(e)
        }
        Err(e) => {
            cap.abort();
            Err(e)
        }
    }
}

/// `delete`: a captured container's session ends with it.
pub fn delete(g: &core::Globals, id: &str, force: bool) -> core::Result<i32> {
    let annotations = core::query::state(g, id)
        .ok()
        .and_then(|s| s.annotations)
        .unwrap_or_default();
    core::lifecycle::delete(g, id, force)?;
    // The container is gone whatever happens here; the engine must not be told otherwise, or
    // it would retry a delete that can only say "does not exist".
    if let Err(e) = shadow_capture::finish(&annotations, None) {
        tracing::warn!("delete {id}: {e}");
        eprintln!("shadow-runtime: delete {id}: {e}");
    }
    Ok(0)
}
