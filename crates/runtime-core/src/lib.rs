//! shadow-runtime core.
