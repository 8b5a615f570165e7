//! An MCP server the editor serves over the ACP connection itself (the
//! unstable MCP-over-ACP): each request of the MCP client travels as an ACP
//! `mcp/message` request naming the server, and that request's result is the
//! inner answer. The editor's `mcp/message` notifications for a running
//! request (its progress) come back through [`AcpRelay::subscribe`]. The
//! relay is the ACP side's part (`crate::acp`), behind a trait
//! ([`crate::mcp::relay`]) so this layer does not know ACP.
//!
//! ACP 1.20 carries no notification from the agent to such a server, so the
//! client's `notifications/initialized` is dropped, and its
//! `notifications/cancelled` withdraws the ACP request instead (the relay
//! then cancels it at the editor with ACP's `$/cancel_request`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::JsonObject;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use thiserror::Error;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::mcp::relay::{AcpRelay, Relay, RelayAnswer, RelayNotification};
use crate::util::lock;

/// JSON-RPC's internal error: the editor did not answer the request.
const INTERNAL_ERROR: i64 = -32603;

#[derive(Debug, Error)]
pub enum AcpTransportError {
    #[error("the MCP message could not be read: {0}")]
    Encode(String),
}

/// The rmcp transport of one `acp` server connection.
pub struct AcpTransport {
    relay: Arc<dyn AcpRelay>,
    server_id: String,
    answers: mpsc::UnboundedSender<RxJsonRpcMessage<RoleClient>>,
    incoming: mpsc::UnboundedReceiver<RxJsonRpcMessage<RoleClient>>,
    notifications: mpsc::UnboundedReceiver<RelayNotification>,
    /// The requests waiting for the editor, by inner request id.
    waiting: Arc<Mutex<HashMap<String, AbortHandle>>>,
}

impl AcpTransport {
    pub fn new(relay: &Relay, server_id: &str) -> Self {
        let (answers, incoming) = mpsc::unbounded_channel();
        Self {
            notifications: relay.0.subscribe(server_id),
            relay: relay.0.clone(),
            server_id: server_id.to_string(),
            answers,
            incoming,
            waiting: Arc::default(),
        }
    }

    /// Sends `request` (`id`, `method`, `params`) in its own task: rmcp
    /// waits for `send`, and the answer may take as long as the tool.
    fn forward(&self, id: Value, method: String, params: Option<JsonObject>) {
        let request_id = id_text(&id);
        let answer = self
            .relay
            .request(&self.server_id, &request_id, &method, params);
        let answers = self.answers.clone();
        let waiting = self.waiting.clone();
        let key = request_id.clone();
        // Held until the task is filed, so its own removal comes after.
        let mut filed = lock(&self.waiting);
        let task = tokio::spawn(async move {
            let message = match answer.await {
                Ok(RelayAnswer::Result(result)) => {
                    json!({"jsonrpc": "2.0", "id": id, "result": result})
                }
                Ok(RelayAnswer::Error(error)) => {
                    json!({"jsonrpc": "2.0", "id": id, "error": error})
                }
                Err(reason) => json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": INTERNAL_ERROR,
                    "message": format!("the editor did not answer {method}: {reason}"),
                }}),
            };
            lock(&waiting).remove(&key);
            match serde_json::from_value(message) {
                Ok(message) => {
                    let _ = answers.send(message);
                }
                Err(err) => {
                    tracing::warn!(%err, %method, "the editor's MCP answer is not an MCP result");
                    let failed = json!({"jsonrpc": "2.0", "id": id, "error": {
                        "code": INTERNAL_ERROR,
                        "message": format!("the editor's answer to {method} could not be read: {err}"),
                    }});
                    if let Ok(message) = serde_json::from_value(failed) {
                        let _ = answers.send(message);
                    }
                }
            }
        });
        filed.insert(request_id, task.abort_handle());
    }

    /// `notifications/cancelled`: the request's ACP request is withdrawn.
    fn cancelled(&self, params: Option<&Value>) {
        let Some(id) = params.and_then(|p| p.get("requestId")) else {
            return;
        };
        if let Some(task) = lock(&self.waiting).remove(&id_text(id)) {
            task.abort();
        }
    }
}

impl Drop for AcpTransport {
    fn drop(&mut self) {
        for (_, task) in lock(&self.waiting).drain() {
            task.abort();
        }
    }
}

impl Transport<RoleClient> for AcpTransport {
    type Error = AcpTransportError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), AcpTransportError>> + Send + 'static {
        let outcome = serde_json::to_value(&item)
            .map_err(|err| AcpTransportError::Encode(err.to_string()))
            .map(|message| self.route(message));
        async move { outcome }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            tokio::select! {
                message = self.incoming.recv() => return message,
                Some(notification) = self.notifications.recv() => {
                    let message = json!({
                        "jsonrpc": "2.0",
                        "method": notification.method,
                        "params": notification.params.unwrap_or_default(),
                    });
                    match serde_json::from_value(message) {
                        Ok(message) => return Some(message),
                        Err(err) => tracing::debug!(%err, "an MCP notification from the editor not understood"),
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), AcpTransportError> {
        for (_, task) in lock(&self.waiting).drain() {
            task.abort();
        }
        self.incoming.close();
        Ok(())
    }
}

impl AcpTransport {
    fn route(&self, message: Value) {
        let method = message.get("method").and_then(Value::as_str);
        let params = message.get("params").and_then(Value::as_object).cloned();
        match (message.get("id"), method) {
            (Some(id), Some(method)) => self.forward(id.clone(), method.to_string(), params),
            (None, Some("notifications/cancelled")) => self.cancelled(message.get("params")),
            (None, Some(method)) => {
                tracing::debug!(%method, server = %self.server_id, "MCP notification not carried over ACP");
            }
            // Answers to the server's requests: ACP 1.20 carries none.
            _ => tracing::debug!(server = %self.server_id, "MCP answer not carried over ACP"),
        }
    }
}

/// An inner request id as the string ACP carries.
fn id_text(id: &Value) -> String {
    match id {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::relay::RelayError;
    use crate::mcp::{McpOptions, McpServer, McpServerSpec};
    use futures::future::BoxFuture;

    /// An editor whose server has one tool, `echo`.
    struct Editor;

    impl AcpRelay for Editor {
        fn request(
            &self,
            server_id: &str,
            _request_id: &str,
            method: &str,
            params: Option<JsonObject>,
        ) -> BoxFuture<'static, Result<RelayAnswer, RelayError>> {
            assert_eq!(server_id, "ed-1");
            let answer = match method {
                "initialize" => RelayAnswer::Result(json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "ed", "version": "1"}
                })),
                "tools/list" => RelayAnswer::Result(json!({"tools": [{
                    "name": "echo", "inputSchema": {"type": "object"}
                }]})),
                "tools/call" => RelayAnswer::Result(json!({"content": [{
                    "type": "text",
                    "text": params.map(|p| Value::Object(p).to_string()).unwrap_or_default()
                }]})),
                other => RelayAnswer::Error(json!({"code": -32601, "message": other})),
            };
            Box::pin(async move { Ok(answer) })
        }

        fn subscribe(&self, _: &str) -> mpsc::UnboundedReceiver<RelayNotification> {
            mpsc::unbounded_channel().1
        }
    }

    #[tokio::test]
    async fn a_server_over_the_relay_lists_and_calls_its_tools() {
        let relay = Relay(Arc::new(Editor));
        let spec = McpServerSpec::acp("ed", "ed-1", relay);
        let server = McpServer::start(spec, McpOptions::default()).await.unwrap();
        assert_eq!(server.tool_names(), ["echo"]);
        let cancel = tokio_util::sync::CancellationToken::new();
        let result = server.call_tool("echo", None, &cancel).await.unwrap();
        assert!(format!("{result:?}").contains("echo"), "{result:?}");
    }
}
