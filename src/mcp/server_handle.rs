//! What an [`McpTool`](super::McpTool) holds of its server: a weak handle
//! the server hands out. Weak, because the manager owns the servers and a
//! tool outliving them must fail cleanly; behind a trait, so the tool does
//! not name the server that builds it.

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, JsonObject};
use tokio_util::sync::CancellationToken;

use super::error::McpCallError;
use crate::tools::Progress;

/// A server that runs tool calls (the server's shared state implements it).
pub(crate) trait CallsTools: Send + Sync {
    /// Calls `tool`, passing the server's progress for the call to `progress`.
    fn call<'a>(
        self: Arc<Self>,
        tool: &'a str,
        arguments: Option<JsonObject>,
        cancel: &'a CancellationToken,
        progress: &'a Progress,
    ) -> BoxFuture<'a, Result<CallToolResult, McpCallError>>;
}

/// A weak handle to one server, for its tools.
#[derive(Clone)]
pub(crate) struct ServerHandle {
    server: Weak<dyn CallsTools>,
}

impl ServerHandle {
    pub(crate) fn new(server: Weak<dyn CallsTools>) -> Self {
        Self { server }
    }

    /// A handle whose server is gone already (for tests).
    #[cfg(test)]
    pub(crate) fn gone() -> Self {
        Self {
            server: Weak::<NoServer>::new(),
        }
    }

    /// The server, unless it has been dropped.
    pub(crate) fn upgrade(&self) -> Option<Arc<dyn CallsTools>> {
        self.server.upgrade()
    }
}

/// The type of a handle to nothing.
#[cfg(test)]
enum NoServer {}

#[cfg(test)]
impl CallsTools for NoServer {
    fn call<'a>(
        self: Arc<Self>,
        _: &'a str,
        _: Option<JsonObject>,
        _: &'a CancellationToken,
        _: &'a Progress,
    ) -> BoxFuture<'a, Result<CallToolResult, McpCallError>> {
        match *self {}
    }
}
