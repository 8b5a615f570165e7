//! The port `write_plan` reaches the session's store through: where the
//! session keeps its Markdown plan.

use std::path::PathBuf;

use futures::future::BoxFuture;
use thiserror::Error;

/// Where the session keeps its Markdown plan.
pub trait PlanKeeper: Send + Sync {
    /// Replaces the plan; the file that holds it, when it is kept on disk.
    fn save(&self, markdown: String) -> BoxFuture<'_, Result<Option<PathBuf>, PlanError>>;
    /// Removes the plan (no plan is fine).
    fn remove(&self) -> BoxFuture<'_, Result<(), PlanError>>;
}

/// Why the plan was not kept; the model reads it after "the plan was not
/// saved: ".
#[derive(Debug, Error)]
pub enum PlanError {
    /// The session's store failed (its own error, which tools cannot name).
    #[error(transparent)]
    Store(Box<dyn std::error::Error + Send + Sync>),
}
