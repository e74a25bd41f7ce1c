//! `shadow review`: interactive per-file, per-hunk decisions (being written).

use crate::{Failure, Outcome};

/// Options of `shadow review`.
#[derive(Debug, Clone, Default)]
pub struct ReviewOptions {
    /// Session id (default: newest of the current project).
    pub session: Option<String>,
}

/// Run the review.
pub fn review(_o: &ReviewOptions) -> Outcome {
    Err(Failure::new(
        "shadow review is not available in this build yet",
    ))
}
