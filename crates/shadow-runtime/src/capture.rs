//! `create`, `run` and `delete` for containers that ask shadow-runtime for something: shadow
//! capture and/or an agent profile (see the shadow-capture crate). The glue between those
//! requests and the runtime library; a container that asks for nothing goes straight to the
//! library.

use oci_spec::runtime::{LinuxNamespaceType, Spec};
use shadow_capture::profile::NetView;
use shadow_capture::{Capture, Flags};
use shadow_runtime_core as core;

fn err(e: shadow_capture::Error) -> core::Error {
    core::Error::invalid(e.to_string())
}

/// What a container being created asked for: the spec to create it from, its capture, and the
/// network mode of its profile (checked once the container exists, see [`check_network`]).
struct Plan {
    spec: Spec,
    capture: Option<Capture>,
    profile: Option<(String, shadow_profile::NetMode)>,
}

impl Plan {
    fn abort(self) {
        if let Some(c) = self.capture {
            c.abort();
        }
    }
}

/// The plan of a container being created; `None` when it asks for nothing.
fn plan(flags: &Flags, o: &core::create::CreateOptions) -> core::Result<Option<Plan>> {
    let bundle = core::root::absolute(&o.bundle)?;
    let mut spec = core::spec_load::load(&bundle)?;
    let ann = spec.annotations().clone();
    let profile_name = shadow_capture::profile_request(ann.as_ref(), flags).map_err(err)?;
    let req = shadow_capture::request(ann.as_ref(), flags).map_err(err)?;
    if profile_name.is_none() && req.is_none() {
        return Ok(None);
    }
    core::id::validate(&o.id)?;
    let mut profile = None;
    if let Some(name) = profile_name {
        // Shipped profiles only: the runtime runs as root for whoever talks to the engine, and
        // reads no profile file a container's creator could name.
        let p = shadow_profile::Registry::default()
            .resolve(&name)
            .map_err(|e| {
                core::Error::invalid(format!("{}: {e}", shadow_capture::PROFILE_ANNOTATION))
            })?;
        // A new namespace of its own; one joined by path is someone else's, who can add
        // interfaces after our check, so it counts as connected.
        let netns = spec
            .linux()
            .as_ref()
            .and_then(|l| l.namespaces().as_ref())
            .and_then(|ns| {
                ns.iter()
                    .find(|n| n.typ() == LinuxNamespaceType::Network)
                    .cloned()
            });
        let view = match netns {
            None => NetView::Host,
            Some(n) if n.path().is_some() => NetView::Connected,
            Some(_) => NetView::LoopbackOnly,
        };
        let dest = req.as_ref().map(|r| r.destination.clone());
        let done =
            shadow_capture::profile::apply(&mut spec, &p, dest.as_deref(), view).map_err(err)?;
        for line in done {
            tracing::info!("profile {}: {line}", p.name);
        }
        profile = Some((p.name.clone(), p.network.mode));
    }
    let capture = match req {
        Some(r) => Some(shadow_capture::begin(spec.clone(), &r, &o.id).map_err(err)?),
        None => None,
    };
    let spec = capture.as_ref().map_or(spec, |c| c.spec.clone());
    Ok(Some(Plan {
        spec,
        capture,
        profile,
    }))
}

/// Interface names in the network namespace of `pid`, `lo` excepted.
fn interfaces_besides_lo(pid: i32) -> core::Result<Vec<String>> {
    let dev = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).map_err(|e| {
        core::Error::invalid(format!("cannot read the container's interfaces: {e}"))
    })?;
    Ok(dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next().map(|n| n.trim().to_string()))
        // Every new namespace gets the fallback devices of loaded tunnel modules (down, no
        // address, no route): not a way out.
        .filter(|n| {
            !n.is_empty()
                && !matches!(
                    n.as_str(),
                    "lo" | "tunl0"
                        | "sit0"
                        | "ip6tnl0"
                        | "gre0"
                        | "gretap0"
                        | "erspan0"
                        | "ip_vti0"
                        | "ip6_vti0"
                        | "ip6gre0"
                )
        })
        .collect())
}

/// A profile without network (or with host lists, which need `shadow run`'s proxy) holds only
/// for a container whose namespace has nothing but `lo`. Checked after create, because engines
/// move interfaces in from their hooks (Docker's libnetwork prestart hook), which the spec does
/// not show.
fn check_network(plan: &Plan, pid: Option<i32>) -> core::Result<()> {
    let Some((name, mode)) = &plan.profile else {
        return Ok(());
    };
    if *mode == shadow_profile::NetMode::On {
        return Ok(());
    }
    let Some(pid) = pid else {
        return Err(core::Error::invalid(
            "the container has no init process to check",
        ));
    };
    let other = interfaces_besides_lo(pid)?;
    if other.is_empty() {
        return Ok(());
    }
    Err(core::Error::invalid(format!(
        "profile {name:?} allows no network, but the container has network interface(s) besides lo ({}): run it with --network none",
        other.join(", ")
    )))
}

/// Keep the spec as it ran and log the start; on failure the container is removed again.
fn started(g: &core::Globals, cap: &Capture, id: &str, pid: Option<i32>) -> core::Result<()> {
    let root = core::root::existing(&g.root)?;
    let c = core::container::load(&root, id)?;
    let effective = core::prepare::spec_as_created(&root, &c)?;
    cap.started(&effective, pid).map_err(err)
}

/// What has to hold once the container exists: its network, and its capture's start record.
fn after_create(g: &core::Globals, plan: &Plan, id: &str, pid: Option<i32>) -> core::Result<()> {
    check_network(plan, pid)?;
    match &plan.capture {
        Some(cap) => started(g, cap, id, pid),
        None => Ok(()),
    }
}

/// `create`.
pub fn create(
    g: &core::Globals,
    flags: &Flags,
    o: &core::create::CreateOptions,
) -> core::Result<i32> {
    create_planned(g, flags, o).map(|_| 0)
}

/// `create`, returning the plan (if any) of the container now created.
fn create_planned(
    g: &core::Globals,
    flags: &Flags,
    o: &core::create::CreateOptions,
) -> core::Result<Option<Plan>> {
    let Some(plan) = plan(flags, o)? else {
        return core::create::create(g, o).map(|_| None);
    };
    let mut o = o.clone();
    o.spec = Some(plan.spec.clone());
    let c = match core::create::create(g, &o) {
        Ok(c) => c,
        Err(e) => {
            // Nothing of ours to delete: create cleans up after itself, and an id that already
            // exists names someone else's container.
            plan.abort();
            return Err(e);
        }
    };
    if let Err(e) = after_create(g, &plan, &o.id, c.pid().map(|p| p.as_raw())) {
        let _ = core::lifecycle::delete(g, &o.id, true);
        plan.abort();
        return Err(e);
    }
    Ok(Some(plan))
}

/// `run`: in the foreground a captured session ends with the container, exit status known.
pub fn run(g: &core::Globals, flags: &Flags, o: &core::run::RunOptions) -> core::Result<i32> {
    if o.detach {
        // Detached: create (as planned) and start; `delete` ends a capture's session.
        let plan = create_planned(g, flags, &o.create)?;
        return match core::lifecycle::start(g, &o.create.id) {
            Ok(()) => Ok(0),
            Err(e) => {
                let _ = core::lifecycle::delete(g, &o.create.id, true);
                if let Some(plan) = plan {
                    plan.abort();
                }
                Err(e)
            }
        };
    }
    let Some(plan) = plan(flags, &o.create)? else {
        return core::run::run(g, o);
    };
    let mut o = o.clone();
    o.create.spec = Some(plan.spec.clone());
    let id = o.create.id.clone();
    let annotations = plan.spec.annotations().clone().unwrap_or_default();
    let mut was_started = false;
    let result = core::run::run_outcome_with(g, &o, &mut |pid| {
        after_create(g, &plan, &id, Some(pid.as_raw()))?;
        was_started = true;
        Ok(())
    });
    let captured = plan.capture.is_some();
    match result {
        Ok(exit) => {
            if captured && !o.keep {
                shadow_capture::finish(&annotations, Some(exit.code)).map_err(err)?;
            }
            Ok(exit.code)
        }
        // The container ran: what it changed is kept for review, never thrown away.
        Err(e) if was_started => {
            if captured {
                let _ = shadow_capture::finish(&annotations, None);
            }
            Err(e)
        }
        Err(e) => {
            plan.abort();
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
