//! `spec`: write a starter `config.json` (runc's `spec`).

use std::path::Path;

use oci_spec::runtime::Spec;

use crate::error::{Error, Result};

/// The default spec: runc-like, running `sh` on a terminal; `rootless` maps the current user to
/// root in a user namespace and drops what an unprivileged user cannot have.
pub fn default_spec(rootless: bool) -> Spec {
    let mut spec = if rootless {
        let uid = nix::unistd::geteuid().as_raw();
        let gid = nix::unistd::getegid().as_raw();
        Spec::rootless(uid, gid)
    } else {
        Spec::default()
    };
    if let Some(p) = spec.process_mut() {
        p.set_terminal(Some(true));
        p.set_args(Some(vec!["sh".into()]));
    }
    spec
}

/// Write `bundle/config.json`, refusing to overwrite an existing one.
pub fn write(bundle: &Path, rootless: bool) -> Result<()> {
    let path = bundle.join("config.json");
    if path.exists() {
        return Err(Error::invalid(format!(
            "{} exists: remove it first",
            path.display()
        )));
    }
    let data = serde_json::to_vec_pretty(&default_spec(rootless))
        .map_err(|e| Error::runtime(format!("encode spec: {e}")))?;
    std::fs::write(&path, data).map_err(|e| Error::io(format!("write {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_spec_round_trips_through_our_loader() {
        let t = tempfile::tempdir().unwrap();
        write(t.path(), false).unwrap();
        let s = crate::spec_load::load(t.path()).unwrap();
        assert_eq!(
            s.process().as_ref().unwrap().args().as_ref().unwrap(),
            &vec!["sh".to_string()]
        );
        assert!(write(t.path(), false)
            .unwrap_err()
            .to_string()
            .contains("exists"));
    }
}
