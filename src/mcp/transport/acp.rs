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
//!
//! rmcp's messages stay typed here; JSON appears only where ACP carries it:
//! an inner request's params, and the editor's results, errors and
//! notifications, read back into rmcp's types by serde.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientNotification, ClientRequest, ErrorData, JsonObject, JsonRpcMessage, JsonRpcNotification,
    JsonRpcRequest, RequestId, ServerNotification, ServerResult,
};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::mcp::relay::{AcpRelay, Relay, RelayAnswer, RelayError, RelayNotification};
use crate::util::lock;

#[derive(Debug, Error)]
pub enum AcpTransportError {
    #[error("the MCP message could not be read: {0}")]
    Encode(#[from] serde_json::Error),
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

/// What ACP's `mcp/message` carries of an MCP request besides its method:
/// its params as JSON (none for a request without them, as `ping`).
#[derive(Deserialize)]
struct CarriedParams {
    #[serde(default)]
    params: Option<JsonObject>,
}

impl CarriedParams {
    fn of(request: &ClientRequest) -> Result<Option<JsonObject>, serde_json::Error> {
        let carried: Self = serde_json::from_value(serde_json::to_value(request)?)?;
        Ok(carried.params)
    }
}

/// The editor's notification in MCP's own shape, which rmcp's
/// `ServerNotification` reads by its method.
#[derive(Serialize)]
struct EditorNotification<'a> {
    method: &'a str,
    params: &'a JsonObject,
}

impl EditorNotification<'_> {
    fn read(notification: RelayNotification) -> Result<ServerNotification, serde_json::Error> {
        let params = notification.params.unwrap_or_default();
        let shaped = serde_json::to_value(EditorNotification {
            method: &notification.method,
            params: &params,
        })?;
        ServerNotification::deserialize(shaped)
    }
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

    fn route(&self, message: TxJsonRpcMessage<RoleClient>) -> Result<(), AcpTransportError> {
        match message {
            JsonRpcMessage::Request(JsonRpcRequest { id, request, .. }) => {
                let params = CarriedParams::of(&request)?;
                self.forward(id, request.method().to_string(), params);
            }
            JsonRpcMessage::Notification(JsonRpcNotification {
                notification: ClientNotification::CancelledNotification(cancelled),
                ..
            }) => self.cancelled(cancelled.params.request_id.as_ref()),
            JsonRpcMessage::Notification(JsonRpcNotification { notification, .. }) => {
                tracing::debug!(?notification, server = %self.server_id, "MCP notification not carried over ACP");
            }
            // Answers to the server's requests: ACP 1.20 carries none.
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {
                tracing::debug!(server = %self.server_id, "MCP answer not carried over ACP");
            }
        }
        Ok(())
    }

    /// Sends request `id` (`method`, `params`) in its own task: rmcp waits
    /// for `send`, and the answer may take as long as the tool.
    fn forward(&self, id: RequestId, method: String, params: Option<JsonObject>) {
        let request_id = id.to_string();
        let answer = self
            .relay
            .request(&self.server_id, &request_id, &method, params);
        let answers = self.answers.clone();
        let waiting = self.waiting.clone();
        let key = request_id.clone();
        // Held until the task is filed, so its own removal comes after.
        let mut filed = lock(&self.waiting);
        let task = tokio::spawn(async move {
            let message = answer_message(answer.await, id, &method);
            lock(&waiting).remove(&key);
            let _ = answers.send(message);
        });
        filed.insert(request_id, task.abort_handle());
    }

    /// `notifications/cancelled`: the request's ACP request is withdrawn.
    fn cancelled(&self, id: Option<&RequestId>) {
        let Some(id) = id else {
            return;
        };
        if let Some(task) = lock(&self.waiting).remove(&id.to_string()) {
            task.abort();
        }
    }
}

/// The editor's answer to request `id` as rmcp's answer: its result or its
/// error, or an internal error saying why there is neither.
fn answer_message(
    answer: Result<RelayAnswer, RelayError>,
    id: RequestId,
    method: &str,
) -> RxJsonRpcMessage<RoleClient> {
    let read = match answer {
        Ok(RelayAnswer::Result(result)) => serde_json::from_value::<ServerResult>(result)
            .map(|result| JsonRpcMessage::response(result, id.clone())),
        Ok(RelayAnswer::Error(error)) => serde_json::from_value::<ErrorData>(error)
            .map(|error| JsonRpcMessage::error(error, Some(id.clone()))),
        Err(reason) => Ok(JsonRpcMessage::error(
            ErrorData::internal_error(
                format!("the editor did not answer {method}: {reason}"),
                None,
            ),
            Some(id.clone()),
        )),
    };
    read.unwrap_or_else(|err| {
        tracing::warn!(%err, %method, "the editor's MCP answer is not an MCP result");
        JsonRpcMessage::error(
            ErrorData::internal_error(
                format!("the editor's answer to {method} could not be read: {err}"),
                None,
            ),
            Some(id),
        )
    })
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
        let outcome = self.route(item);
        async move { outcome }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            tokio::select! {
                message = self.incoming.recv() => return message,
                Some(notification) = self.notifications.recv() => {
                    match EditorNotification::read(notification) {
                        Ok(notification) => return Some(JsonRpcMessage::notification(notification)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::{McpOptions, McpServer, McpServerSpec};
    use futures::future::BoxFuture;
    use serde_json::{Value, json};

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

    /// An editor that records each request and answers by its method;
    /// `tools/list` it never answers, and says so when that wait is dropped.
    #[derive(Default)]
    struct Recorder {
        requests: Mutex<Vec<(String, String, Option<JsonObject>)>>,
        notifications: Mutex<Option<mpsc::UnboundedReceiver<RelayNotification>>>,
        withdrawn: Mutex<Option<mpsc::UnboundedSender<String>>>,
    }

    /// Reports its request id when the wait holding it is dropped.
    struct Withdrawn(Option<mpsc::UnboundedSender<String>>, String);

    impl Drop for Withdrawn {
        fn drop(&mut self) {
            if let Some(report) = &self.0 {
                let _ = report.send(self.1.clone());
            }
        }
    }

    impl AcpRelay for Recorder {
        fn request(
            &self,
            _server_id: &str,
            request_id: &str,
            method: &str,
            params: Option<JsonObject>,
        ) -> BoxFuture<'static, Result<RelayAnswer, RelayError>> {
            lock(&self.requests).push((request_id.into(), method.into(), params));
            let answer = match method {
                "tools/list" => {
                    let guard = Withdrawn(lock(&self.withdrawn).clone(), request_id.into());
                    return Box::pin(async move {
                        let _guard = guard;
                        std::future::pending().await
                    });
                }
                "ping" => Ok(RelayAnswer::Result(json!({}))),
                "tools/call" => Ok(RelayAnswer::Result(
                    json!({"content": [{"type": "text", "text": "hi"}]}),
                )),
                "resources/read" => Ok(RelayAnswer::Error(
                    json!({"code": -32002, "message": "gone"}),
                )),
                "completion/complete" => Ok(RelayAnswer::Error(json!("junk"))),
                _ => Err(RelayError::Connection("it left".into())),
            };
            Box::pin(async move { answer })
        }

        fn subscribe(&self, _: &str) -> mpsc::UnboundedReceiver<RelayNotification> {
            lock(&self.notifications)
                .take()
                .unwrap_or_else(|| mpsc::unbounded_channel().1)
        }
    }

    fn message(json: Value) -> TxJsonRpcMessage<RoleClient> {
        serde_json::from_value(json).unwrap()
    }

    fn object(json: Value) -> Option<JsonObject> {
        json.as_object().cloned()
    }

    /// Requests reach the editor as method and params, each answer comes
    /// back as rmcp's answer to the same id; notifications and answers the
    /// client sends reach nothing.
    #[tokio::test]
    async fn requests_travel_as_method_and_params_and_their_answers_come_back_typed() {
        enum Expect {
            Result(&'static str),
            Error(i32, &'static str),
        }
        let recorder = Arc::new(Recorder::default());
        let mut transport = AcpTransport::new(&Relay(recorder.clone()), "ed-1");
        let table = [
            (
                json!({"jsonrpc": "2.0", "id": "a", "method": "tools/call",
                       "params": {"name": "echo", "arguments": {"x": 1}}}),
                RequestId::String("a".into()),
                object(json!({"name": "echo", "arguments": {"x": 1}})),
                Expect::Result(r#""text":"hi""#),
            ),
            (
                json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}),
                RequestId::Number(7),
                None,
                Expect::Result("{"),
            ),
            (
                json!({"jsonrpc": "2.0", "id": 8, "method": "resources/read",
                       "params": {"uri": "file:///a"}}),
                RequestId::Number(8),
                object(json!({"uri": "file:///a"})),
                Expect::Error(-32002, "gone"),
            ),
            (
                json!({"jsonrpc": "2.0", "id": 9, "method": "prompts/list"}),
                RequestId::Number(9),
                // rmcp writes a request of optional params with `{}`.
                object(json!({})),
                Expect::Error(-32603, "the editor did not answer prompts/list: it left"),
            ),
            (
                json!({"jsonrpc": "2.0", "id": 10, "method": "completion/complete",
                       "params": {"ref": {"type": "ref/prompt", "name": "p"},
                                  "argument": {"name": "a", "value": "b"}}}),
                RequestId::Number(10),
                object(json!({"ref": {"type": "ref/prompt", "name": "p"},
                              "argument": {"name": "a", "value": "b"}})),
                Expect::Error(
                    -32603,
                    "the editor's answer to completion/complete could not be read",
                ),
            ),
        ];
        for (sent, id, params, expected) in table {
            let method = sent["method"].as_str().unwrap().to_string();
            transport.send(message(sent)).await.unwrap();
            let answer = transport.receive().await.unwrap();
            assert_eq!(
                lock(&recorder.requests).pop(),
                Some((id.to_string(), method.clone(), params)),
                "{method}"
            );
            match (answer, expected) {
                (JsonRpcMessage::Response(response), Expect::Result(part)) => {
                    assert_eq!(response.id, id, "{method}");
                    let result = serde_json::to_string(&response.result).unwrap();
                    assert!(result.contains(part), "{method}: {result}");
                }
                (JsonRpcMessage::Error(error), Expect::Error(code, part)) => {
                    assert_eq!(error.id, Some(id), "{method}");
                    assert_eq!(error.error.code.0, code, "{method}");
                    assert!(error.error.message.contains(part), "{method}: {error:?}");
                }
                (answer, _) => panic!("{method}: {answer:?}"),
            }
        }
        for sent in [
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
            json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -1, "message": "no"}}),
        ] {
            transport.send(message(sent.clone())).await.unwrap();
            assert!(lock(&recorder.requests).is_empty(), "{sent}");
        }
    }

    /// `notifications/cancelled` withdraws the request it names (by string
    /// or number id) and no other.
    #[tokio::test]
    async fn a_cancelled_notification_withdraws_the_request_it_names() {
        let (report, mut withdrawn) = mpsc::unbounded_channel();
        let recorder = Recorder {
            withdrawn: Mutex::new(Some(report)),
            ..Recorder::default()
        };
        let mut transport = AcpTransport::new(&Relay(Arc::new(recorder)), "ed-1");
        for id in [json!("slow"), json!(12)] {
            let list = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
            transport.send(message(list)).await.unwrap();
            let other = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                               "params": {"requestId": "someone else"}});
            transport.send(message(other)).await.unwrap();
            assert_eq!(lock(&transport.waiting).len(), 1, "{id}");
            let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": id, "reason": "user"}});
            transport.send(message(cancel)).await.unwrap();
            let expected = id.as_str().map_or_else(|| id.to_string(), str::to_string);
            assert!(lock(&transport.waiting).is_empty(), "{id}");
            assert_eq!(withdrawn.recv().await, Some(expected));
        }
    }

    /// The editor's notifications arrive as rmcp's typed notifications,
    /// chosen by their method; one rmcp does not know stays a custom one.
    #[tokio::test]
    async fn the_editors_notifications_arrive_as_rmcp_notifications() {
        let (editor, notifications) = mpsc::unbounded_channel();
        let recorder = Recorder {
            notifications: Mutex::new(Some(notifications)),
            ..Recorder::default()
        };
        let mut transport = AcpTransport::new(&Relay(Arc::new(recorder)), "ed-1");
        type Received = fn(&ServerNotification) -> bool;
        let table: [(&str, Option<Value>, Received); 4] = [
            (
                "notifications/progress",
                Some(json!({"progressToken": "t", "progress": 1, "total": 2})),
                |n| {
                    matches!(n, ServerNotification::ProgressNotification(p)
                        if p.params.progress == 1.0 && p.params.total == Some(2.0))
                },
            ),
            ("notifications/tools/list_changed", None, |n| {
                matches!(n, ServerNotification::ToolListChangedNotification(_))
            }),
            (
                "notifications/message",
                Some(json!({"level": "info", "data": "hi"})),
                |n| matches!(n, ServerNotification::LoggingMessageNotification(_)),
            ),
            ("editor/own", Some(json!({"a": 1})), |n| {
                matches!(n, ServerNotification::CustomNotification(c)
                    if c.method == "editor/own" && c.params == Some(json!({"a": 1})))
            }),
        ];
        for (method, params, expected) in table {
            editor
                .send(RelayNotification {
                    method: method.into(),
                    params: params.and_then(object),
                })
                .unwrap();
            let received = transport.receive().await.unwrap();
            let JsonRpcMessage::Notification(notification) = received else {
                panic!("{method}: {received:?}");
            };
            assert!(
                expected(&notification.notification),
                "{method}: {notification:?}"
            );
        }
    }
}
