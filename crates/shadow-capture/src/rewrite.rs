//! The spec rewrite, as plain data: the captured bind mount becomes an overlay whose lower
//! layer is the bind's source (the project, never written) and whose upper layer is a shadow
//! session's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{Mount, MountBuilder, Spec};

use crate::request::{normalise, Request, SESSION_ANNOTATION, STORE_ANNOTATION};
use crate::Error;

/// Mount flags of the bind that the overlay keeps: hardening the engine asked for.
const KEPT_FLAGS: [&str; 4] = ["nosuid", "nodev", "noexec", "noatime"];

/// Which mount is captured and what it brings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Index in `mounts`.
    pub index: usize,
    /// The bind's source: the project directory on the host.
    pub project: PathBuf,
    /// Its flags the overlay keeps.
    pub flags: Vec<String>,
}

/// Where the session keeps the captured changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layers {
    /// Session id.
    pub session: String,
    /// Store root.
    pub store: PathBuf,
    /// Overlay upper dir.
    pub upper: PathBuf,
    /// Overlay work dir.
    pub work: PathBuf,
}

/// Finds the bind mount at the requested destination. Errors name the destination and say why
/// it cannot be captured (none or several mounts there, not a bind, read-only, a source that is
/// not an absolute directory path overlayfs can carry).
pub fn plan(spec: &Spec, req: &Request) -> Result<Plan, Error> {
    let dest = req.destination.display();
    let mounts = spec.mounts().as_deref().unwrap_or_default();
    let at: Vec<usize> = mounts
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            m.destination()
                .to_str()
                .and_then(normalise)
                .is_some_and(|d| d == req.destination)
        })
        .map(|(i, _)| i)
        .collect();
    let index = match at.as_slice() {
        [] => {
            return Err(Error(format!(
                "capture {dest}: the container has no mount there (bind the project first, e.g. -v \"$PWD\":{dest})"
            )))
        }
        [i] => *i,
        _ => {
            return Err(Error(format!(
                "capture {dest}: {} mounts there; cannot tell which to capture",
                at.len()
            )))
        }
    };
    let m = &mounts[index];
    let options = m.options().clone().unwrap_or_default();
    let is_bind =
        m.typ().as_deref() == Some("bind") || options.iter().any(|o| o == "bind" || o == "rbind");
    if !is_bind {
        return Err(Error(format!(
            "capture {dest}: the mount there is {}, not a bind mount of a host directory",
            m.typ().as_deref().unwrap_or("untyped")
        )));
    }
    if options.iter().any(|o| o == "ro") {
        return Err(Error(format!(
            "capture {dest}: the bind mount is read-only; there is nothing to capture"
        )));
    }
    let source = m
        .source()
        .clone()
        .ok_or_else(|| Error(format!("capture {dest}: the bind mount has no source")))?;
    if !source.is_absolute() {
        return Err(Error(format!(
            "capture {dest}: bind source {} is not absolute",
            source.display()
        )));
    }
    let text = source.to_str().unwrap_or_default();
    // Overlay options are joined with ',' and lowerdir splits layers at ':'.
    if text.is_empty() || text.contains([',', ':', '\\']) {
        return Err(Error(format!(
            "capture {dest}: bind source {} contains ',', ':' or '\\', which overlayfs options cannot carry",
            source.display()
        )));
    }
    let flags = options
        .iter()
        .filter(|o| KEPT_FLAGS.contains(&o.as_str()))
        .cloned()
        .collect();
    Ok(Plan {
        index,
        project: source,
        flags,
    })
}

/// The spec with the planned mount replaced by the session's overlay, and the session and
/// store recorded in annotations (what `delete` finds the session by). `project` is the
/// canonical project directory the session was created for.
pub fn rewrite(mut spec: Spec, plan: &Plan, project: &Path, layers: &Layers) -> Spec {
    let mut mounts = spec.mounts().clone().unwrap_or_default();
    let dest = mounts[plan.index].destination().clone();
    let mut options = vec![
        format!("lowerdir={}", project.display()),
        format!("upperdir={}", layers.upper.display()),
        format!("workdir={}", layers.work.display()),
        // user.overlay.* xattrs, as `shadow run` writes them: shadow's scan reads opaque
        // directories and whiteouts the same way for both.
        "userxattr".to_string(),
    ];
    options.extend(plan.flags.iter().cloned());
    mounts[plan.index] = overlay_mount(dest, options);
    spec.set_mounts(Some(mounts));
    let mut ann: HashMap<String, String> = spec.annotations().clone().unwrap_or_default();
    ann.insert(SESSION_ANNOTATION.to_string(), layers.session.clone());
    ann.insert(
        STORE_ANNOTATION.to_string(),
        layers.store.display().to_string(),
    );
    spec.set_annotations(Some(ann));
    spec
}

fn overlay_mount(dest: PathBuf, options: Vec<String>) -> Mount {
    MountBuilder::default()
        .destination(dest)
        .typ("overlay")
        .source("overlay")
        .options(options)
        .build()
        .expect("every mount field set")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_with(mounts: serde_json::Value) -> Spec {
        serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "root": {"path": "rootfs"},
            "mounts": mounts,
            "annotations": {"io.container.manager": "libpod"},
        }))
        .unwrap()
    }

    fn req(dest: &str) -> Request {
        Request {
            destination: dest.into(),
            store: None,
        }
    }

    fn docker_mounts() -> serde_json::Value {
        serde_json::json!([
            {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/work/", "type": "bind", "source": "/home/dev/proj", "options": ["rbind", "rprivate"]},
            {"destination": "/etc/hosts", "type": "bind", "source": "/var/lib/docker/h", "options": ["rbind", "rprivate"]},
        ])
    }

    #[test]
    fn docker_bind_becomes_the_session_overlay() {
        let spec = spec_with(docker_mounts());
        let p = plan(&spec, &req("/work")).unwrap();
        assert_eq!(
            p,
            Plan {
                index: 1,
                project: "/home/dev/proj".into(),
                flags: vec![],
            }
        );
        let layers = Layers {
            session: "20261203-120000-abcdef".into(),
            store: "/var/lib/shadow".into(),
            upper: "/var/lib/shadow/sessions/20261203-120000-abcdef/upper".into(),
            work: "/var/lib/shadow/sessions/20261203-120000-abcdef/work".into(),
        };
        let out = rewrite(spec, &p, Path::new("/home/dev/proj"), &layers);
        let v = serde_json::to_value(&out).unwrap();
        assert_eq!(
            v["mounts"][1],
            serde_json::json!({
                "destination": "/work/",
                "type": "overlay",
                "source": "overlay",
                "options": [
                    "lowerdir=/home/dev/proj",
                    "upperdir=/var/lib/shadow/sessions/20261203-120000-abcdef/upper",
                    "workdir=/var/lib/shadow/sessions/20261203-120000-abcdef/work",
                    "userxattr",
                ],
            })
        );
        // The other mounts are untouched.
        assert_eq!(v["mounts"][0], docker_mounts()[0]);
        assert_eq!(v["mounts"][2], docker_mounts()[2]);
        assert_eq!(
            v["annotations"],
            serde_json::json!({
                "io.container.manager": "libpod",
                "run.shadow.session": "20261203-120000-abcdef",
                "run.shadow.store": "/var/lib/shadow",
            })
        );
    }

    #[test]
    fn podman_bind_keeps_its_hardening_flags() {
        let spec = spec_with(serde_json::json!([
            {"destination": "/work", "type": "bind", "source": "/p", "options": ["bind", "rprivate", "nosuid", "nodev", "rw"]},
        ]));
        let p = plan(&spec, &req("/work")).unwrap();
        assert_eq!(p.flags, vec!["nosuid".to_string(), "nodev".to_string()]);
    }

    #[test]
    fn what_cannot_be_captured() {
        let cases = [
            (
                serde_json::json!([]),
                "capture /work: the container has no mount there (bind the project first, e.g. -v \"$PWD\":/work)",
            ),
            (
                serde_json::json!([
                    {"destination": "/work", "type": "bind", "source": "/a", "options": ["rbind"]},
                    {"destination": "/work/", "type": "bind", "source": "/b", "options": ["rbind"]},
                ]),
                "capture /work: 2 mounts there; cannot tell which to capture",
            ),
            (
                serde_json::json!([{"destination": "/work", "type": "tmpfs", "source": "tmpfs"}]),
                "capture /work: the mount there is tmpfs, not a bind mount of a host directory",
            ),
            (
                serde_json::json!([{"destination": "/work", "type": "bind", "source": "/a", "options": ["rbind", "ro"]}]),
                "capture /work: the bind mount is read-only; there is nothing to capture",
            ),
            (
                serde_json::json!([{"destination": "/work", "type": "bind", "source": "a", "options": ["rbind"]}]),
                "capture /work: bind source a is not absolute",
            ),
            (
                serde_json::json!([{"destination": "/work", "type": "bind", "source": "/a,b", "options": ["rbind"]}]),
                "capture /work: bind source /a,b contains ',', ':' or '\\', which overlayfs options cannot carry",
            ),
        ];
        for (mounts, want) in cases {
            assert_eq!(plan(&spec_with(mounts), &req("/work")).unwrap_err().0, want);
        }
    }
}
