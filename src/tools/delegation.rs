//! The port the `delegate` tool hands a task through: the session layer
//! implements [`Delegator`] and runs the task in a child session. It takes
//! only what the parent's call lends the child ([`ParentCall`]), not the
//! whole tool context, which holds the delegator itself.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::ToolFuture;
use super::progress::Progress;
use super::sandbox::SessionSandbox;

/// One delegation, as the runtime gets it.
#[derive(Debug, Clone, PartialEq)]
pub struct Delegation {
    pub agent: String,
    pub task: String,
    /// The parent's tool call (as the client knows it), for lineage.
    pub call_id: String,
}

/// What the parent's `delegate` call lends the child that runs its task.
#[derive(Debug, Clone, Copy)]
pub struct ParentCall<'a> {
    /// The call's cancel token: it stops the child.
    pub cancel: &'a CancellationToken,
    /// The call's progress hook: it shows the child's work.
    pub progress: &'a Progress,
    /// The parent's workspace roots: the child reaches these, no more.
    pub roots: &'a [PathBuf],
    /// The parent's sandbox: the child's commands are confined as the
    /// parent's are.
    pub sandbox: &'a Arc<SessionSandbox>,
}

/// Who runs a delegated task: the session layer. The answer is the
/// child's final text.
pub trait Delegator: Send + Sync {
    fn delegate<'a>(&'a self, delegation: Delegation, parent: ParentCall<'a>) -> ToolFuture<'a>;
}
