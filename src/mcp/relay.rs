//! The ACP connection as the carrier of `acp` MCP servers' messages (the
//! unstable MCP-over-ACP), as the MCP layer sees it: a trait the ACP side
//! (`crate::acp`) implements, and the handle a spec holds. A leaf: the
//! spec names it and the transport uses it, so neither names the other.

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::JsonObject;
use serde_json::Value;
use thiserror::Error;
use tokio::sync::mpsc;

/// What came back for one request: the inner MCP result, or the inner MCP
/// error object (`code`, `message`, `data`).
#[derive(Debug, Clone, PartialEq)]
pub enum RelayAnswer {
    Result(Value),
    Error(Value),
}

/// Why the editor gave no answer to an inner request.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RelayError {
    /// It failed the ACP request, or left: the connection's own words.
    #[error("{0}")]
    Connection(String),
    #[error("its answer to mcp/message could not be read: {0}")]
    Unreadable(String),
    /// Its inner error object could not be carried on.
    #[error("{0}")]
    InnerError(String),
    #[error("its answer to mcp/message carries neither result nor error")]
    NoOutcome,
}

/// A notification the editor sent for server `server_id`: the inner MCP
/// method and params.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayNotification {
    pub method: String,
    pub params: Option<JsonObject>,
}

/// The ACP connection as the carrier of `acp` MCP servers' messages.
pub trait AcpRelay: Send + Sync + 'static {
    /// Sends one inner request to the editor's server `server_id`; Err says
    /// why the editor gave no answer (it failed the ACP request, or left).
    fn request(
        &self,
        server_id: &str,
        request_id: &str,
        method: &str,
        params: Option<JsonObject>,
    ) -> BoxFuture<'static, Result<RelayAnswer, RelayError>>;

    /// The editor's notifications for `server_id` from now on.
    fn subscribe(&self, server_id: &str) -> mpsc::UnboundedReceiver<RelayNotification>;
}

/// A relay in a spec: compared by identity, shown by nothing but its kind.
#[derive(Clone)]
pub struct Relay(pub Arc<dyn AcpRelay>);

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Relay(acp connection)")
    }
}

impl PartialEq for Relay {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Relay {}
