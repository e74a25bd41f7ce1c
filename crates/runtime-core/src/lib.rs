//! shadow-runtime's core: the lifecycle, state and spec logic of a runc-compatible OCI runtime
//! over youki's `libcontainer`. The `shadow-runtime` binary is a thin clap layer over this crate,
//! and the `shadow` CLI starts its sandboxes through it too.
//!
//! One concern per module: ids, locks, the state root, spec loading/validation, the effective
//! spec, each command, terminals, logging, and the binary-sealing defence.

pub mod cgroup_mount;
pub mod cgroups;
pub mod container;
pub mod create;
pub mod error;
pub mod events;
pub mod exec;
pub mod executor;
pub mod features;
pub mod foreground;
pub mod home;
pub mod hook_state;
pub mod id;
pub mod init_shim;
pub mod lifecycle;
pub mod lock;
pub mod logging;
pub mod mount_attr;
pub mod net;
pub mod prepare;
pub mod query;
pub mod root;
pub mod rootless_cgroups;
pub mod run;
pub mod seal;
pub mod signal;
pub mod spec_default;
pub mod spec_load;
pub mod tty;
pub mod update;

use std::path::PathBuf;

pub use error::{Error, ErrorKind, Result};

/// The libcontainer release this build uses (reported by `--version` and `features`).
pub const LIBCONTAINER_VERSION: &str = "0.7.0";

/// `--rootless` as runc takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rootless {
    /// Decide from the effective uid and user namespace.
    #[default]
    Auto,
    /// Force rootless handling.
    True,
    /// Never rootless.
    False,
}

/// Global options shared by every command.
#[derive(Debug, Clone)]
pub struct Globals {
    /// State root.
    pub root: PathBuf,
    /// Use the systemd cgroup driver.
    pub systemd_cgroup: bool,
    /// Rootless mode.
    pub rootless: Rootless,
}

impl Default for Globals {
    fn default() -> Self {
        Self {
            root: root::default_root(),
            systemd_cgroup: false,
            rootless: Rootless::Auto,
        }
    }
}
