//! Creates a session in the store and writes its OCI bundle, for trying the
//! spec with any OCI runtime:
//!
//! ```text
//! SHADOW_STORE=/tmp/store cargo run -p shadow-sandbox --example make_bundle -- \
//!     [--net host] PROJECT CMD [ARGS...]
//! runc run -b <printed bundle> <printed id>
//! ```

use std::path::PathBuf;

use shadow_sandbox::env::{build_env, default_allowlist_with};
use shadow_sandbox::hostview;
use shadow_sandbox::session::{NewSession, Store};
use shadow_sandbox::spec::{build_spec, NetworkMode, ResourceLimits, SandboxInput, TmpfsSizes};
use shadow_sandbox::{prepare_skeleton, Result};

fn main() -> Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut network = NetworkMode::None;
    if args.first().map(String::as_str) == Some("--net")
        && args.get(1).map(String::as_str) == Some("host")
    {
        network = NetworkMode::Host;
        args.drain(..2);
    }
    if args.len() < 2 {
        eprintln!("usage: make_bundle [--net host] PROJECT CMD [ARGS...]");
        std::process::exit(2);
    }
    let project = PathBuf::from(args.remove(0));
    let user = hostview::probe_user()?;
    let store = Store::open_default(&user)?;
    let limits = ResourceLimits::for_host(hostview::total_ram_bytes()?);
    let session = store.create(&NewSession {
        project,
        command: args.clone(),
        profile: "example".into(),
        limits,
        supervisor: None,
        engine: None,
    })?;
    let host = hostview::probe_host_view()?;
    prepare_skeleton(&session.rootfs_dir(), &host)?;
    let host_env: Vec<(String, String)> = std::env::vars().collect();
    let env = build_env(
        &host_env,
        &default_allowlist_with(&[]),
        &[("HOME".into(), user.home.display().to_string())],
    );
    let cgroups_usable = hostview::probe_cgroups(&user).is_usable();
    let input = SandboxInput {
        session_id: session.id().to_string(),
        args,
        cwd: None,
        project_dir: session.meta.project.clone(),
        upper_dir: session.upper_dir(),
        work_dir: session.work_dir(),
        rootfs_dir: session.rootfs_dir(),
        store_dir: store.root().to_path_buf(),
        host,
        host_limits: hostview::probe_host_limits(),
        user,
        env,
        terminal: false,
        network,
        limits,
        cgroups_usable,
        tmpfs: TmpfsSizes::default(),
        extra_ro: vec![],
        extra_rw: vec![],
        denied: vec![],
        cgroups_path: cgroups_usable.then(|| format!("/shadow/{}", session.id()).into()),
        seccomp: None,
        annotations: Default::default(),
    };
    session.write_config(&build_spec(&input)?)?;
    println!("{} {}", session.bundle_dir().display(), session.id());
    Ok(())
}
