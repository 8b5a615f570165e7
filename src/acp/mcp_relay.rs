//! The ACP connection as the carrier of the editor's `acp` MCP servers
//! (unstable `mcp_over_acp`): an inner MCP request goes out as an
//! `mcp/message` request and its answer (`result` or `error`) is the inner
//! one; the editor's `mcp/message` notifications go to the servers that
//! subscribed to their `serverId`. A request withdrawn before its answer
//! (a cancelled or timed-out call) is cancelled at the editor with
//! `$/cancel_request`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1 as acp;
use futures::future::BoxFuture;
use tokio::sync::mpsc;

use crate::mcp::{AcpRelay, Relay, RelayAnswer, RelayError, RelayNotification};
use crate::transport::Connection;
use crate::util::lock;

/// One per connection; the router hands its [`Relay`] to the specs of the
/// `acp` servers the editor declares.
pub struct McpRelay {
    connection: Connection,
    subscribers: Mutex<HashMap<String, Vec<mpsc::UnboundedSender<RelayNotification>>>>,
}

impl McpRelay {
    pub fn new(connection: Connection) -> Arc<Self> {
        Arc::new(Self {
            connection,
            subscribers: Mutex::default(),
        })
    }

    pub fn relay(self: &Arc<Self>) -> Relay {
        Relay(self.clone())
    }

    /// The editor's `mcp/message` notification, to the servers it names.
    pub fn deliver(&self, notification: acp::MessageMcpNotification) {
        let server = notification.server_id.0.to_string();
        let message = RelayNotification {
            method: notification.method,
            params: notification.params,
        };
        let mut subscribers = lock(&self.subscribers);
        let Some(senders) = subscribers.get_mut(&server) else {
            tracing::debug!(%server, "a relayed MCP message for a server no session uses");
            return;
        };
        senders.retain(|sender| sender.send(message.clone()).is_ok());
        if senders.is_empty() {
            subscribers.remove(&server);
        }
    }
}

impl AcpRelay for McpRelay {
    fn request(
        &self,
        server_id: &str,
        request_id: &str,
        method: &str,
        params: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> BoxFuture<'static, Result<RelayAnswer, RelayError>> {
        let request = acp::MessageMcpRequest::new(
            server_id.to_string(),
            request_id.to_string(),
            method.to_string(),
        )
        .params(params);
        let connection = self.connection.clone();
        Box::pin(async move {
            let answer = connection
                .request_cancellable(acp::CLIENT_METHOD_NAMES.mcp_message, &request)
                .await
                .map_err(|err| RelayError::Connection(err.to_string()))?;
            let response: acp::MessageMcpResponse = serde_json::from_value(answer)
                .map_err(|err| RelayError::Unreadable(err.to_string()))?;
            outcome(response)
        })
    }

    fn subscribe(&self, server_id: &str) -> mpsc::UnboundedReceiver<RelayNotification> {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.subscribers)
            .entry(server_id.to_string())
            .or_default()
            .push(tx);
        rx
    }
}

/// The inner outcome an `mcp/message` answer carries.
fn outcome(response: acp::MessageMcpResponse) -> Result<RelayAnswer, RelayError> {
    match response {
        acp::MessageMcpResponse::Result { result, .. } => Ok(RelayAnswer::Result(result)),
        acp::MessageMcpResponse::Error { error, .. } => serde_json::to_value(error)
            .map(RelayAnswer::Error)
            .map_err(|err| RelayError::InnerError(err.to_string())),
        // The schema's enum is non-exhaustive: an outcome of a later version.
        _ => Err(RelayError::NoOutcome),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_carry_the_inner_result_or_error() {
        let read = |wire| outcome(serde_json::from_value(wire).unwrap());
        assert_eq!(
            read(json!({"result": {"tools": []}})),
            Ok(RelayAnswer::Result(json!({"tools": []})))
        );
        assert_eq!(
            read(json!({"error": {"code": -32601, "message": "no such tool"}})),
            Ok(RelayAnswer::Error(
                json!({"code": -32601, "message": "no such tool"})
            ))
        );
    }
}
