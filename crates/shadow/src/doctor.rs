//! `shadow doctor`: host checks (being written).

use crate::{Failure, Outcome};

/// Options of `shadow doctor`.
#[derive(Debug, Clone, Default)]
pub struct DoctorOptions {
    /// Machine-readable output.
    pub json: bool,
}

/// Run the checks.
pub fn doctor(_o: &DoctorOptions) -> Outcome {
    Err(Failure::new(
        "shadow doctor is not available in this build yet",
    ))
}
