//! What a container asks for: the capture request, from its annotations or from runtime
//! arguments fixed per registered runtime name.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use crate::Error;

/// Annotation naming the container path whose bind mount is captured (`/work`). Podman
/// (`--annotation`), containerd and Kubernetes pod annotations carry it.
pub const CAPTURE_ANNOTATION: &str = "run.shadow.capture";
/// Annotation naming an agent profile for the container.
pub const PROFILE_ANNOTATION: &str = "run.shadow.profile";
/// Written by shadow-runtime into the spec that runs: the session id. Never accepted from the
/// container's creator.
pub const SESSION_ANNOTATION: &str = "run.shadow.session";
/// Written by shadow-runtime into the spec that runs: the session store. Never accepted from
/// the container's creator (threat: a spec that points `delete` at another store, making the
/// runtime, as root, write a base record and audit log there).
pub const STORE_ANNOTATION: &str = "run.shadow.store";

/// The runtime's own arguments (`--shadow-capture`, `--shadow-store`, `--shadow-profile`).
/// Docker 20.10 has no `--annotation`: a daemon.json `runtimes` entry with `runtimeArgs` fixes
/// them per runtime name, and they arrive as global flags before the subcommand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// Container path to capture.
    pub capture: Option<String>,
    /// Session store (default: the store of the user the runtime runs as).
    pub store: Option<PathBuf>,
    /// Agent profile.
    pub profile: Option<String>,
}

/// A capture request, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Normalised absolute container path whose bind mount becomes the overlay.
    pub destination: PathBuf,
    /// Store to create the session in (`None`: the runtime user's default store).
    pub store: Option<PathBuf>,
}

/// The request of a container whose spec has `annotations`, started with `flags`; `None` when
/// it asks for nothing. Disagreeing sources, a relative or `..` path, a spec that carries the
/// runtime's own annotations are errors. (A profile is asked for separately: [`profile_request`].)
pub fn request(
    annotations: Option<&HashMap<String, String>>,
    flags: &Flags,
) -> Result<Option<Request>, Error> {
    let empty = HashMap::new();
    let ann = annotations.unwrap_or(&empty);
    for own in [SESSION_ANNOTATION, STORE_ANNOTATION] {
        if ann.contains_key(own) {
            return Err(Error(format!(
                "annotation {own} is set by shadow-runtime itself, not by the container's creator"
            )));
        }
    }
    let capture = match (ann.get(CAPTURE_ANNOTATION), &flags.capture) {
        (Some(a), Some(f)) if normalise(a) != normalise(f) => {
            return Err(Error(format!(
                "annotation {CAPTURE_ANNOTATION}={a:?} and --shadow-capture={f:?} disagree"
            )))
        }
        (Some(a), _) => Some((CAPTURE_ANNOTATION.to_string(), a)),
        (None, Some(f)) => Some(("--shadow-capture".to_string(), f)),
        (None, None) => None,
    };
    let Some((source, path)) = capture else {
        if let Some(s) = &flags.store {
            return Err(Error(format!(
                "--shadow-store={} given without a capture request",
                s.display()
            )));
        }
        return Ok(None);
    };
    let destination = normalise(path).ok_or_else(|| {
        Error(format!(
            "{source}={path:?}: must be an absolute container path without `..`, not /"
        ))
    })?;
    if let Some(s) = &flags.store {
        if !s.is_absolute() {
            return Err(Error(format!(
                "--shadow-store={}: must be absolute",
                s.display()
            )));
        }
    }
    Ok(Some(Request {
        destination,
        store: flags.store.clone(),
    }))
}

/// The agent profile a container asks for (annotation or `--shadow-profile`), if any.
pub fn profile_request(
    annotations: Option<&HashMap<String, String>>,
    flags: &Flags,
) -> Result<Option<String>, Error> {
    let a = annotations.and_then(|a| a.get(PROFILE_ANNOTATION));
    match (a, &flags.profile) {
        (Some(a), Some(f)) if a != f => Err(Error(format!(
            "annotation {PROFILE_ANNOTATION}={a:?} and --shadow-profile={f:?} disagree"
        ))),
        (Some(a), _) => Ok(Some(a.clone())),
        (None, f) => Ok(f.clone()),
    }
}

/// `/a//b/./c/` → `/a/b/c`; `None` for relative paths, `..` and `/` itself.
pub fn normalise(p: &str) -> Option<PathBuf> {
    let path = Path::new(p);
    if !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(n) => out.push(n),
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    (out != Path::new("/")).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn err(r: Result<Option<Request>, Error>) -> String {
        r.unwrap_err().0
    }

    #[test]
    fn nothing_asked() {
        assert_eq!(request(None, &Flags::default()).unwrap(), None);
        let a = ann(&[("org.opencontainers.image.os", "linux")]);
        assert_eq!(request(Some(&a), &Flags::default()).unwrap(), None);
    }

    #[test]
    fn by_annotation_or_flag() {
        let a = ann(&[(CAPTURE_ANNOTATION, "/work/")]);
        let want = Request {
            destination: "/work".into(),
            store: None,
        };
        assert_eq!(
            request(Some(&a), &Flags::default()).unwrap(),
            Some(want.clone())
        );
        let f = Flags {
            capture: Some("//work/.".into()),
            ..Default::default()
        };
        assert_eq!(request(None, &f).unwrap(), Some(want.clone()));
        // Both, agreeing.
        assert_eq!(request(Some(&a), &f).unwrap(), Some(want));
        let f = Flags {
            capture: Some("/work".into()),
            store: Some("/srv/shadow".into()),
            ..Default::default()
        };
        assert_eq!(
            request(None, &f).unwrap().unwrap().store,
            Some(PathBuf::from("/srv/shadow"))
        );
    }

    #[test]
    fn bad_requests_say_what_and_where() {
        let f = Flags {
            capture: Some("/src".into()),
            ..Default::default()
        };
        assert_eq!(
            err(request(Some(&ann(&[(CAPTURE_ANNOTATION, "/work")])), &f)),
            "annotation run.shadow.capture=\"/work\" and --shadow-capture=\"/src\" disagree"
        );
        for bad in ["work", "/work/../etc", "/", ""] {
            assert_eq!(
                err(request(Some(&ann(&[(CAPTURE_ANNOTATION, bad)])), &Flags::default())),
                format!("run.shadow.capture={bad:?}: must be an absolute container path without `..`, not /")
            );
        }
        for own in [SESSION_ANNOTATION, STORE_ANNOTATION] {
            let a = ann(&[(CAPTURE_ANNOTATION, "/work"), (own, "x")]);
            assert_eq!(
                err(request(Some(&a), &Flags::default())),
                format!(
                    "annotation {own} is set by shadow-runtime itself, not by the container's creator"
                )
            );
        }
        let a = ann(&[(CAPTURE_ANNOTATION, "/work"), (PROFILE_ANNOTATION, "codex")]);
        assert!(request(Some(&a), &Flags::default()).unwrap().is_some());
        assert_eq!(
            profile_request(Some(&a), &Flags::default())
                .unwrap()
                .as_deref(),
            Some("codex")
        );
        let f = Flags {
            profile: Some("aider".into()),
            ..Default::default()
        };
        assert_eq!(profile_request(None, &f).unwrap().as_deref(), Some("aider"));
        assert_eq!(
            profile_request(Some(&a), &f).unwrap_err().0,
            "annotation run.shadow.profile=\"codex\" and --shadow-profile=\"aider\" disagree"
        );
        let f = Flags {
            store: Some("/srv/shadow".into()),
            ..Default::default()
        };
        assert_eq!(
            err(request(None, &f)),
            "--shadow-store=/srv/shadow given without a capture request"
        );
        let f = Flags {
            capture: Some("/work".into()),
            store: Some("rel".into()),
            ..Default::default()
        };
        assert_eq!(
            err(request(None, &f)),
            "--shadow-store=rel: must be absolute"
        );
    }
}
