//! shadow capture: shadow's review workflow for containers that an engine (Docker, Podman,
//! containerd, and so Kubernetes) starts with shadow-runtime.
//!
//! A container asks by annotation ([`CAPTURE_ANNOTATION`]) or through runtime arguments fixed
//! per registered runtime name ([`Flags`]). At `create` the runtime then
//! 1. finds the bind mount at the requested path ([`rewrite::plan`]);
//! 2. creates a shadow session for its source directory, marked as an engine session
//!    ([`begin`]);
//! 3. runs the spec with that bind replaced by an overlay whose upper layer is the session's
//!    ([`rewrite::rewrite`]): the container's writes never reach the project;
//! 4. once the container exists, keeps the spec as it ran in the session and logs
//!    `session.start` ([`Capture::started`]).
//!
//! At `delete` (or the end of a foreground `run`) [`finish`] records the base and the change
//! summary and ends the session, after which `shadow diff`, `review`, `apply`, `--rollback` and
//! `discard` work on it exactly as after `shadow run`.

pub mod profile;
pub mod request;
pub mod rewrite;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use oci_spec::runtime::Spec;
use shadow_sandbox::session::{NewSession, ProcessRef};
use shadow_sandbox::{ResourceLimits, Session, SessionState, Store};

pub use request::{
    profile_request, request, Flags, Request, CAPTURE_ANNOTATION, PROFILE_ANNOTATION,
    SESSION_ANNOTATION, STORE_ANNOTATION,
};

/// Profile name recorded for engine sessions: their policy is the engine's spec.
pub const ENGINE_PROFILE: &str = "engine";

/// A capture error: one line for the engine to show its user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "shadow capture: {}", self.0)
    }
}

impl std::error::Error for Error {}

impl From<shadow_sandbox::Error> for Error {
    fn from(e: shadow_sandbox::Error) -> Self {
        Error(e.to_string())
    }
}

impl From<shadow_changes::Error> for Error {
    fn from(e: shadow_changes::Error) -> Self {
        Error(e.to_string())
    }
}

/// A session created for a container that is being created.
#[derive(Debug)]
pub struct Capture {
    /// The store.
    pub store: Store,
    /// The session.
    pub session: Session,
    /// The rewritten spec to create the container from.
    pub spec: Spec,
    /// The captured container path.
    pub destination: PathBuf,
    /// The engine's container id.
    pub container: String,
}

/// Opens the store of a request: the given one, else the runtime user's default.
fn open_store(given: Option<&Path>) -> Result<Store, Error> {
    let store = match given {
        Some(p) => Store::open(p),
        None => Store::open_default(&shadow_sandbox::hostview::probe_user()?),
    };
    store.map_err(|e| Error(format!("session store: {e}")))
}

/// Creates the session for container `container` and the spec to run. Nothing is left behind
/// on error.
pub fn begin(spec: Spec, req: &Request, container: &str) -> Result<Capture, Error> {
    let plan = rewrite::plan(&spec, req)?;
    let dest = req.destination.display();
    let project = std::fs::canonicalize(&plan.project).map_err(|e| {
        Error(format!(
            "capture {dest}: bind source {}: {e}",
            plan.project.display()
        ))
    })?;
    if !project.is_dir() {
        return Err(Error(format!(
            "capture {dest}: bind source {} is not a directory",
            project.display()
        )));
    }
    let store = open_store(req.store.as_deref())?;
    // Threat: a container capturing the store (or a directory holding it) would see, and
    // through its upper layer shape, every session's captured changes. Compared canonical:
    // the project is, and a store reached through a symlink must not slip past.
    let store_root =
        std::fs::canonicalize(store.root()).unwrap_or_else(|_| store.root().to_path_buf());
    if project.starts_with(&store_root) || store_root.starts_with(&project) {
        return Err(Error(format!(
            "capture {dest}: bind source {} overlaps the session store {}",
            project.display(),
            store_root.display()
        )));
    }
    let command = spec
        .process()
        .as_ref()
        .and_then(|p| p.args().clone())
        .unwrap_or_default();
    let session = store.create(&NewSession {
        project: project.clone(),
        command,
        profile: ENGINE_PROFILE.to_string(),
        limits: limits_of(&spec),
        supervisor: None,
        engine: Some(container.to_string()),
    })?;
    let layers = rewrite::Layers {
        session: session.id().to_string(),
        store: store.root().to_path_buf(),
        upper: session.upper_dir(),
        work: session.work_dir(),
    };
    let spec = rewrite::rewrite(spec, &plan, &project, &layers);
    Ok(Capture {
        store,
        session,
        spec,
        destination: req.destination.clone(),
        container: container.to_string(),
    })
}

/// The limits an engine set, as a session records them.
fn limits_of(spec: &Spec) -> ResourceLimits {
    let res = spec.linux().as_ref().and_then(|l| l.resources().as_ref());
    let memory_bytes = res
        .and_then(|r| r.memory().as_ref())
        .and_then(|m| m.limit())
        .and_then(|l| u64::try_from(l).ok());
    let pids = res
        .and_then(|r| r.pids().as_ref())
        .and_then(|p| u64::try_from(p.limit()).ok())
        .filter(|p| *p > 0);
    let cpus = res
        .and_then(|r| r.cpu().as_ref())
        .and_then(|c| match (c.quota(), c.period()) {
            (Some(q), Some(p)) if q > 0 && p > 0 => Some(q as f64 / p as f64),
            _ => None,
        });
    ResourceLimits {
        memory_bytes,
        pids,
        cpus,
    }
}

impl Capture {
    /// The container exists (its init is `init_pid`) and `effective` is the spec it was created
    /// from: keep that spec in the session, make the init the session's supervisor (the session
    /// is running while it lives) and log `session.start`.
    pub fn started(&self, effective: &Spec, init_pid: Option<i32>) -> Result<(), Error> {
        let id = self.session.id();
        self.session.write_config(effective)?;
        let supervisor = init_pid.and_then(|p| ProcessRef::of(p as u32));
        self.store.update_meta(id, |m| m.supervisor = supervisor)?;
        let data = serde_json::json!({
            "project": self.session.meta.project,
            "command": self.session.meta.command,
            "profile": ENGINE_PROFILE,
            "network": "engine",
            "limits": self.session.meta.limits,
            "engine": {
                "container": self.container,
                "capture": self.destination,
                "spec": self.session.config_path(),
                "pid": init_pid,
            },
            "exec_audit": false,
        });
        shadow_audit::append(&self.log(), id, "session.start", data)
            .map_err(|e| Error(format!("audit log: {e}")))?;
        Ok(())
    }

    /// Creating the container failed: remove the session.
    pub fn abort(self) {
        let id = self.session.id().to_string();
        let _ = self
            .store
            .update_meta(&id, |m| m.finish(SessionState::Failed, None));
        let _ = self.store.remove(&id);
        let _ = std::fs::remove_file(self.log());
        let _ = std::fs::remove_file(shadow_audit::head_path(&self.log()));
    }

    fn log(&self) -> PathBuf {
        shadow_audit::session_log(self.store.root(), self.session.id())
    }
}

/// Ends the session recorded in a deleted container's `annotations` (no-op for containers that
/// were not captured, and for a session already finished): records the base for drift
/// detection and the change summary, and marks it exited with `exit_status` when the caller
/// knows it (a foreground `run`; at `delete` only the engine does). Returns the session id.
pub fn finish(
    annotations: &HashMap<String, String>,
    exit_status: Option<i32>,
) -> Result<Option<String>, Error> {
    let Some(id) = annotations.get(SESSION_ANNOTATION) else {
        return Ok(None);
    };
    let store_root = annotations
        .get(STORE_ANNOTATION)
        .ok_or_else(|| Error(format!("annotation {STORE_ANNOTATION} missing")))?;
    let store = Store::open(store_root)?;
    let session = store.load(id)?;
    if session.meta.state != SessionState::Running {
        return Ok(Some(id.clone()));
    }
    let log = shadow_audit::session_log(store.root(), id);
    let duration_ms = chrono::DateTime::parse_from_rfc3339(&session.meta.started_at)
        .ok()
        .map(|t| (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_milliseconds());
    let scanned =
        shadow_changes::scan(&session.meta.project, &session.upper_dir()).and_then(|changes| {
            let base = shadow_changes::record_base(&session.meta.project, &changes)?;
            base.save(&session.dir.join("base.json"))?;
            Ok(changes)
        });
    let state = if scanned.is_ok() {
        SessionState::Exited
    } else {
        SessionState::Failed
    };
    store.update_meta(id, |m| {
        m.finish(state, exit_status);
        m.supervisor = None;
    })?;
    let end = serde_json::json!({
        "state": state,
        "exit_status": exit_status,
        "duration_ms": duration_ms,
        "error": scanned.as_ref().err().map(|e| e.to_string()),
        "note": if exit_status.is_none() { Some("the exit status is the engine's to report") } else { None },
    });
    let record = |kind: &str, data: serde_json::Value| {
        shadow_audit::append(&log, id, kind, data).map_err(|e| Error(format!("audit log: {e}")))
    };
    record("session.end", end)?;
    let changes = scanned?;
    record("changes", shadow_changes::audit_summary(&changes))?;
    Ok(Some(id.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_binding(source: &Path) -> Spec {
        serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "root": {"path": "rootfs"},
            "process": {"args": ["sh"], "cwd": "/", "user": {"uid": 0, "gid": 0}},
            "mounts": [{"destination": "/work", "type": "bind", "source": source, "options": ["rbind"]}],
        }))
        .unwrap()
    }

    #[test]
    fn a_store_reached_through_a_symlink_cannot_be_captured() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real-store");
        std::fs::create_dir_all(real.join("sessions")).unwrap();
        let link = d.path().join("store-link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let req = Request {
            destination: "/work".into(),
            store: Some(link.clone()),
        };
        for source in [real.join("sessions"), d.path().to_path_buf()] {
            let e = begin(spec_binding(&source), &req, "c1").unwrap_err();
            assert!(e.0.contains("overlaps the session store"), "{e}");
        }
        // Nothing was created in the store.
        assert_eq!(std::fs::read_dir(real.join("sessions")).unwrap().count(), 0);
        // A project beside the store is fine: the session exists, the spec has the overlay.
        let project = d.path().join("project");
        std::fs::create_dir(&project).unwrap();
        let cap = begin(spec_binding(&project), &req, "c1").unwrap();
        assert_eq!(cap.session.meta.engine.as_deref(), Some("c1"));
        assert_eq!(
            cap.spec.mounts().as_ref().unwrap()[0].typ().as_deref(),
            Some("overlay")
        );
        cap.abort();
        assert_eq!(std::fs::read_dir(real.join("sessions")).unwrap().count(), 0);
    }
}
