//! Newline-delimited JSON-RPC 2.0 over a byte stream (stdin/stdout).
//!
//! One writer task owns the output and drains a single ordered channel, so
//! everything a session emits reaches the client in the order it was sent.
//! Agent→client requests get ids of their own and a pending map of oneshot
//! senders that the reader resolves when the answer comes back.

pub mod jsonrpc;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::RequestId;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

pub use jsonrpc::{Incoming, RpcError};

type Waiter = oneshot::Sender<Result<Value, RpcError>>;
type PendingMap = Mutex<HashMap<RequestId, Waiter>>;

/// Handle for sending to the client. Cheap to clone.
#[derive(Clone)]
pub struct Connection {
    lines: mpsc::UnboundedSender<Vec<u8>>,
    pending: Arc<PendingMap>,
    next_id: Arc<AtomicI64>,
}

impl Connection {
    /// A connection and the receiving end its writer task drains.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<Vec<u8>>) {
        let (lines, rx) = mpsc::unbounded_channel();
        (
            Self {
                lines,
                pending: Arc::default(),
                next_id: Arc::new(AtomicI64::new(0)),
            },
            rx,
        )
    }

    fn send_line(&self, line: Vec<u8>) {
        // The writer is gone only when the client hung up; nothing left to tell it.
        if self.lines.send(line).is_err() {
            tracing::debug!("output closed; dropping a message");
        }
    }

    pub fn respond(&self, id: &RequestId, result: Result<Value, RpcError>) {
        self.send_line(jsonrpc::response_line(id, &result));
    }

    pub fn notify(&self, method: &str, params: &impl Serialize) {
        match serde_json::to_value(params) {
            Ok(params) => self.send_line(jsonrpc::call_line(None, method, &params)),
            Err(err) => tracing::error!(%method, %err, "could not encode notification"),
        }
    }

    /// Send a request to the client and wait for its answer. Dropping the
    /// future withdraws the request from the pending map.
    pub async fn request(&self, method: &str, params: &impl Serialize) -> Result<Value, RpcError> {
        let params = serde_json::to_value(params).map_err(|err| {
            RpcError::internal(format!("could not encode {method} params: {err}"))
        })?;
        let id = RequestId::Number(self.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.lock_pending().insert(id.clone(), tx);
        let guard = PendingGuard {
            pending: &self.pending,
            id: &id,
        };
        self.send_line(jsonrpc::call_line(Some(&id), method, &params));
        let answer = rx.await.unwrap_or_else(|_| {
            Err(RpcError::internal(format!(
                "the client connection closed before it answered {method}"
            )))
        });
        drop(guard);
        answer
    }

    /// Deliver a client's answer to the request waiting for it.
    pub fn resolve(&self, id: &RequestId, result: Result<Value, RpcError>) {
        match self.lock_pending().remove(id) {
            Some(waiter) => {
                let _ = waiter.send(result);
            }
            None => tracing::warn!(%id, "answer to a request this agent is not waiting for"),
        }
    }

    /// Fail every request still waiting for the client (it has gone away).
    pub fn fail_pending(&self) {
        let waiters: Vec<_> = self.lock_pending().drain().collect();
        for (_, waiter) in waiters {
            let _ = waiter.send(Err(RpcError::internal("the client connection closed")));
        }
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Waiter>> {
        // The map holds plain data; a panic elsewhere cannot leave it inconsistent.
        self.pending
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

struct PendingGuard<'a> {
    pending: &'a PendingMap,
    id: &'a RequestId,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.pending
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .remove(self.id);
    }
}

/// The one answer a request is owed. Answering consumes it; dropping it
/// unanswered (a bug or a panic) still answers, with an internal error, so no
/// request is ever left hanging.
pub struct Responder {
    id: Option<RequestId>,
    connection: Connection,
    method: String,
}

impl Responder {
    pub fn new(id: RequestId, connection: Connection, method: impl Into<String>) -> Self {
        Self {
            id: Some(id),
            connection,
            method: method.into(),
        }
    }

    pub fn id(&self) -> Option<&RequestId> {
        self.id.as_ref()
    }

    pub fn respond(mut self, result: Result<Value, RpcError>) {
        if let Some(id) = self.id.take() {
            self.connection.respond(&id, result);
        }
    }

    pub fn respond_with<T: Serialize>(self, result: Result<T, RpcError>) {
        let result = result.and_then(|value| {
            serde_json::to_value(value)
                .map_err(|err| RpcError::internal(format!("could not encode the result: {err}")))
        });
        self.respond(result);
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            tracing::error!(method = %self.method, %id, "request dropped without an answer");
            self.connection.respond(
                &id,
                Err(RpcError::internal(format!(
                    "{} ended without an answer; this is a bug in crucible-agent, please report it with the log",
                    self.method
                ))),
            );
        }
    }
}

/// Drain `lines` into `output`, one message per line. Flushes whenever the
/// queue is momentarily empty, so a burst is written in one go and a single
/// message is never held back. Returns when every sender is gone or the
/// output fails (the client closed its end).
pub async fn run_writer(
    mut lines: mpsc::UnboundedReceiver<Vec<u8>>,
    output: impl AsyncWrite + Unpin,
) -> std::io::Result<()> {
    let mut output = tokio::io::BufWriter::with_capacity(64 * 1024, output);
    while let Some(mut line) = lines.recv().await {
        line.push(b'\n');
        output.write_all(&line).await?;
        if lines.is_empty() {
            output.flush().await?;
        }
    }
    output.flush().await
}

/// Read lines until EOF, handing each parsed message to `on_message`.
/// Lines are split on `\n` as bytes, so UTF-8 is decoded only on whole lines.
pub async fn run_reader(
    input: impl AsyncBufRead + Unpin,
    mut on_message: impl FnMut(Incoming),
) -> std::io::Result<()> {
    let mut input = input;
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        let read = input.read_until(b'\n', &mut line).await?;
        if read == 0 {
            return Ok(());
        }
        if let Some(message) = jsonrpc::parse_line(&line) {
            on_message(message);
        }
        if line.capacity() > 1024 * 1024 {
            // One huge prompt should not pin its buffer for the process lifetime.
            line = Vec::with_capacity(4096);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn writer_keeps_order_and_frames_lines() {
        let (connection, rx) = Connection::new();
        for n in 0..100 {
            connection.notify("session/update", &json!({ "n": n }));
        }
        drop(connection);
        let mut out = Vec::new();
        run_writer(rx, &mut out).await.unwrap();
        let text = String::from_utf8(out).unwrap();
        let numbers: Vec<i64> = text
            .lines()
            .map(|line| {
                serde_json::from_str::<Value>(line).unwrap()["params"]["n"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(numbers, (0..100).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn outbound_requests_are_matched_by_id() {
        let (connection, mut rx) = Connection::new();
        let asking = {
            let connection = connection.clone();
            tokio::spawn(async move {
                connection
                    .request("fs/read_text_file", &json!({"path":"/a"}))
                    .await
            })
        };
        let line = rx.recv().await.unwrap();
        let sent: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(sent["method"], "fs/read_text_file");
        let id: RequestId = serde_json::from_value(sent["id"].clone()).unwrap();
        connection.resolve(&id, Ok(json!({"content":"hi"})));
        assert_eq!(asking.await.unwrap().unwrap(), json!({"content":"hi"}));
        assert!(connection.lock_pending().is_empty());
    }

    #[tokio::test]
    async fn pending_requests_fail_when_the_client_goes_away() {
        let (connection, _rx) = Connection::new();
        let asking = {
            let connection = connection.clone();
            tokio::spawn(async move { connection.request("terminal/create", &json!({})).await })
        };
        tokio::task::yield_now().await;
        while connection.lock_pending().is_empty() {
            tokio::task::yield_now().await;
        }
        connection.fail_pending();
        assert!(asking.await.unwrap().is_err());
    }

    #[tokio::test]
    async fn a_dropped_responder_still_answers() {
        let (connection, mut rx) = Connection::new();
        drop(Responder::new(
            RequestId::Number(9),
            connection,
            "session/prompt",
        ));
        let line = rx.recv().await.unwrap();
        let sent: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(sent["id"], 9);
        assert_eq!(sent["error"]["code"], jsonrpc::INTERNAL_ERROR);
    }

    #[tokio::test]
    async fn reader_splits_lines_and_keeps_utf8_whole() {
        let input = "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":{\"t\":\"héllo ✓\"}}\n\nnot json\n{\"jsonrpc\":\"2.0\",\"method\":\"b\"}";
        let mut seen = Vec::new();
        run_reader(input.as_bytes(), |message| seen.push(message))
            .await
            .unwrap();
        assert_eq!(seen.len(), 3);
        assert_eq!(
            seen[0],
            Incoming::Notification {
                method: "a".into(),
                params: json!({"t":"héllo ✓"})
            }
        );
        assert!(matches!(seen[1], Incoming::Invalid { .. }));
        assert!(matches!(seen[2], Incoming::Notification { .. }));
    }
}
