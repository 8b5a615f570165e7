//! A WebSocket client of `crucible-agent serve` (tokio-tungstenite): the
//! upgrade of `GET /acp` with the token, then one JSON-RPC message per text
//! frame each way, read in order with a backlog for messages a test is not
//! waiting for yet.

use std::path::Path;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::harness::PATIENCE;
use super::remote::TOKEN;

/// One WebSocket connection to `serve`.
pub struct WsClient {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// The `Acp-Connection-Id` of the 101 response.
    pub connection: String,
    /// Messages read while waiting for something else, in order.
    backlog: Vec<Value>,
    next_id: i64,
}

/// The upgrade request for `ws_url`, with the token when given.
fn upgrade(ws_url: &str, token: Option<&str>) -> tungstenite::handshake::client::Request {
    let mut request = ws_url.into_client_request().unwrap();
    if let Some(token) = token {
        request.headers_mut().insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
        );
    }
    request
}

/// Whether `message` is the agent asking the user's permission.
pub fn is_permission_request(message: &Value) -> bool {
    message["method"] == "session/request_permission"
}

/// The answer "allow once" to a permission question.
pub fn allow_once() -> Value {
    json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}})
}

/// The status an upgrade without a token is refused with.
pub async fn refused_without_token(ws_url: &str) -> StatusCode {
    match tokio_tungstenite::connect_async(upgrade(ws_url, None)).await {
        Ok(_) => panic!("a WebSocket without the token was let in"),
        Err(tungstenite::Error::Http(response)) => response.status(),
        Err(err) => panic!("the upgrade failed otherwise: {err}"),
    }
}

impl WsClient {
    /// Upgrade `ws_url` (`ws://…/acp`) with the token; fails the test
    /// unless it is a 101 carrying the connection id.
    pub async fn open(ws_url: &str) -> Self {
        let (socket, response) = tokio_tungstenite::connect_async(upgrade(ws_url, Some(TOKEN)))
            .await
            .unwrap_or_else(|err| panic!("the WebSocket upgrade failed: {err}"));
        assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
        let connection = response
            .headers()
            .get("acp-connection-id")
            .expect("the 101 carries Acp-Connection-Id")
            .to_str()
            .unwrap()
            .to_string();
        Self {
            socket,
            connection,
            backlog: Vec::new(),
            next_id: 0,
        }
    }

    /// [`Self::open`], then `initialize` as an ACP `version` client; the
    /// client and the initialize answer.
    pub async fn connect(ws_url: &str, version: u16) -> (Self, Value) {
        let mut client = Self::open(ws_url).await;
        let params = match version {
            1 => json!({"protocolVersion": 1, "clientCapabilities": {}}),
            _ => super::v2::initialize_v2_params(),
        };
        let (_, answer) = client.call("initialize", params).await;
        assert_eq!(answer["result"]["protocolVersion"], version, "{answer}");
        (client, answer)
    }

    /// Send one frame as it is.
    pub async fn send_frame(&mut self, frame: Message) {
        self.socket.send(frame).await.unwrap();
    }

    /// Send one message as a text frame.
    pub async fn send(&mut self, message: &Value) {
        self.send_frame(Message::text(message.to_string())).await;
    }

    /// Send a request; returns its id.
    pub async fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Answer the agent's request `request` with `result`.
    pub async fn answer(&mut self, request: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": result}))
            .await;
    }

    /// The next message from the agent (a hang guard, not a speed check).
    pub async fn next(&mut self) -> Value {
        if !self.backlog.is_empty() {
            return self.backlog.remove(0);
        }
        // One deadline for the message: the agent's pings do not extend it.
        let deadline = tokio::time::Instant::now() + *PATIENCE;
        loop {
            let frame = match tokio::time::timeout_at(deadline, self.socket.next()).await {
                Ok(Some(Ok(frame))) => frame,
                Ok(Some(Err(err))) => panic!("the WebSocket failed: {err}"),
                Ok(None) => panic!("the WebSocket ended"),
                Err(_) => panic!("no message on the WebSocket in {:?}", *PATIENCE),
            };
            match frame {
                Message::Text(text) => {
                    return serde_json::from_str(&text)
                        .unwrap_or_else(|err| panic!("not JSON ({err}): {text}"));
                }
                Message::Close(frame) => panic!("the agent closed the WebSocket: {frame:?}"),
                // Pings are answered by tungstenite as it reads.
                _ => {}
            }
        }
    }

    /// Messages until the first one `pred` holds for: (those before it, it).
    pub async fn until(&mut self, pred: impl Fn(&Value) -> bool) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let message = self.next().await;
            if pred(&message) {
                return (before, message);
            }
            before.push(message);
        }
    }

    /// Messages until the answer to request `id`: (those before it, it).
    pub async fn until_answer(&mut self, id: i64) -> (Vec<Value>, Value) {
        self.until(|m| m.get("method").is_none() && m["id"] == id)
            .await
    }

    /// Request and wait for the answer.
    pub async fn call(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        let id = self.request(method, params).await;
        self.until_answer(id).await
    }

    /// `session/new` in `cwd`: the new session's id.
    pub async fn new_session(&mut self, cwd: &Path) -> String {
        let (_, answer) = self
            .call("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        answer["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new failed: {answer}"))
            .to_string()
    }

    /// `session/load` of `session` in `cwd`: what it replayed, and its answer.
    pub async fn load(&mut self, session: &str, cwd: &Path) -> (Vec<Value>, Value) {
        self.call(
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        )
        .await
    }

    /// v2's `session/resume` of `session` in `cwd` with `replayFrom:
    /// start`: what it replayed, and its answer.
    pub async fn resume_replaying(&mut self, session: &str, cwd: &Path) -> (Vec<Value>, Value) {
        self.call(
            "session/resume",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": [], "replayFrom": {"type": "start"}}),
        )
        .await
    }

    /// Send a text prompt; returns its request id.
    pub async fn start_prompt(&mut self, session: &str, text: &str) -> i64 {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }

    /// Every message until (and with) `session`'s `state_update` `idle`
    /// with a stop reason: a v2 turn's end.
    pub async fn until_idle(&mut self, session: &str) -> Vec<Value> {
        let (mut seen, end) = self.until(|m| super::v2::is_idle_end(m, session)).await;
        seen.push(end);
        seen
    }

    /// Messages until the agent ends the WebSocket (a close frame, or the
    /// socket's end); fails the test if it stays open past [`PATIENCE`].
    pub async fn until_closed(&mut self) -> Vec<Value> {
        let mut seen = std::mem::take(&mut self.backlog);
        let deadline = tokio::time::Instant::now() + *PATIENCE;
        loop {
            match tokio::time::timeout_at(deadline, self.socket.next()).await {
                Ok(Some(Ok(Message::Text(text)))) => {
                    seen.push(serde_json::from_str(&text).unwrap_or(Value::Null));
                }
                Ok(Some(Ok(Message::Close(_)) | Err(_)) | None) => return seen,
                Ok(Some(Ok(_))) => {}
                Err(_) => panic!("the WebSocket stayed open for {:?}", *PATIENCE),
            }
        }
    }

    /// Drop the socket without a close frame, as a client that vanished.
    pub fn vanish(self) {
        drop(self.socket);
    }
}
