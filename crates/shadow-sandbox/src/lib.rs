//! shadow-sandbox: what a `shadow run` session looks like, as data.
//!
//! * [`spec`]: the pure OCI runtime spec builder ([`spec::build_spec`]).
//! * [`env`]: the allowlisted process environment ([`env::build_env`]).
//! * [`hostview`]: small host probes producing the data the builder takes.
//! * [`skeleton`]: the per-session rootfs skeleton ([`skeleton::prepare_skeleton`]).
//! * [`session`]: the per-user session store.
//! * [`disk`], [`treecopy`]: `--disk`, the upper layer on a capped file system of its own.
//!
//! The sandbox runs the host's own filesystem read-only, with a fresh
//! `$HOME`, `/tmp`, `/run`, `/proc` and `/dev`, no capabilities, in a user
//! namespace mapping uid 0 to the invoking user; the project is an overlay
//! whose upper layer lives in the session store.

pub mod disk;
pub mod env;
mod error;
pub mod hostview;
pub mod session;
pub mod skeleton;
pub mod spec;
pub mod treecopy;

pub use env::{build_env, DEFAULT_ENV_ALLOWLIST};
pub use error::{Error, Result};
pub use hostview::{HostEntry, HostLimits, HostView, UserInfo};
pub use session::{Session, SessionMeta, SessionState, Store};
pub use skeleton::prepare_skeleton;
pub use spec::{
    build_spec, NetworkMode, ResourceLimits, SandboxInput, TmpfsSizes, HOME_CREDENTIAL_PATHS,
};
