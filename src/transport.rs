//! Newline-delimited JSON-RPC 2.0 over a byte stream (stdin/stdout).
//!
//! One writer thread owns the output and drains a single ordered channel, so
//! everything a session emits reaches the client in the order it was sent.
//! Agent→client requests get ids of their own and a pending map of oneshot
//! senders that the reader resolves when the answer comes back. Every
//! client→agent request is owed one answer (a [`Responder`]), which carries
//! the request's cancellation (`$/cancel_request`); a batch's requests are
//! owed one array of answers ([`batch`]).

mod batch;
pub mod jsonrpc;
mod outgoing;
pub mod remote;
pub mod stdio;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{CancelRequestNotification, RequestId};
use serde::Serialize;
use serde_json::Value;
use thiserror::Error;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use batch::AnswerTo;
pub use batch::Inbound;
pub use jsonrpc::{Incoming, RpcError};
pub use outgoing::{MAX_QUEUED_BYTES, Outgoing};

use crate::util::lock;

type Waiter = oneshot::Sender<Result<Value, RpcError>>;
type PendingMap = Mutex<HashMap<RequestId, Waiter>>;

/// Why a request to the peer got no result.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum RequestError {
    /// The peer answered with an error.
    #[error("{}", .0.message)]
    Rejected(RpcError),
    /// The connection closed before the answer came.
    #[error("the client connection closed before it answered {0}")]
    Closed(String),
    #[error("could not encode {method} params: {detail}")]
    Encode { method: String, detail: String },
}

/// The peer's requests still being worked on, by id, with the token a
/// `$/cancel_request` fires. A generation tells a request from a later one
/// that (against the rules) reuses its id.
#[derive(Default)]
struct InFlight {
    requests: HashMap<RequestId, (u64, CancellationToken)>,
    next_generation: u64,
}

/// Handle for sending to the client. Cheap to clone.
#[derive(Clone)]
pub struct Connection {
    lines: mpsc::UnboundedSender<Vec<u8>>,
    queue: Arc<outgoing::Queue>,
    pending: Arc<PendingMap>,
    /// Requests withdrawn with `$/cancel_request` whose answer (still owed
    /// by the peer) has not come: that answer is expected, and dropped.
    withdrawn: Arc<Mutex<HashSet<RequestId>>>,
    next_id: Arc<AtomicI64>,
    in_flight: Arc<Mutex<InFlight>>,
}

impl Connection {
    /// A connection and the receiving end its writer drains.
    pub fn new() -> (Self, Outgoing) {
        let (lines, rx) = mpsc::unbounded_channel();
        let queue = Arc::new(outgoing::Queue::default());
        (
            Self {
                lines,
                queue: Arc::clone(&queue),
                pending: Arc::default(),
                withdrawn: Arc::default(),
                next_id: Arc::new(AtomicI64::new(0)),
                in_flight: Arc::default(),
            },
            Outgoing::new(rx, queue),
        )
    }

    fn send_line(&self, line: Vec<u8>) {
        self.queue.queued(line.capacity());
        // The writer is gone only when the client hung up; nothing left to tell it.
        if self.lines.send(line).is_err() {
            tracing::debug!("output closed; dropping a message");
        }
    }

    /// Resolves when the client has room for more (see [`outgoing`]).
    pub async fn room(&self) {
        self.queue.room().await;
    }

    pub fn respond(&self, id: &RequestId, result: Result<Value, RpcError>) {
        self.send_line(jsonrpc::encode_response(id, &result));
    }

    pub fn notify(&self, method: &str, params: &impl Serialize) {
        match jsonrpc::encode_call(None, method, params) {
            Ok(message) => self.send_line(message),
            Err(err) => tracing::error!(%method, %err, "could not encode notification"),
        }
    }

    /// Send a request to the client and wait for its answer. Dropping the
    /// future withdraws the request from the pending map.
    pub async fn request(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<Value, RequestError> {
        self.call(method, params, Withdrawn::Dropped).await
    }

    /// As [`Self::request`], and a request withdrawn before its answer (the
    /// future dropped: a cancel, a timeout) is cancelled at the peer too,
    /// with `$/cancel_request` naming its id, so the peer can stop working
    /// on it. The peer still answers it (the spec asks it to); that answer
    /// is dropped.
    pub async fn request_cancellable(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<Value, RequestError> {
        self.call(method, params, Withdrawn::CancelledAtPeer).await
    }

    async fn call(
        &self,
        method: &str,
        params: &impl Serialize,
        withdrawn: Withdrawn,
    ) -> Result<Value, RequestError> {
        let id = RequestId::Number(self.next_id.fetch_add(1, Ordering::Relaxed));
        let message = jsonrpc::encode_call(Some(&id), method, params).map_err(|err| {
            RequestError::Encode {
                method: method.to_string(),
                detail: err.to_string(),
            }
        })?;
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id.clone(), tx);
        let guard = PendingGuard {
            connection: self,
            id: &id,
            withdrawn,
        };
        self.send_line(message);
        let answer = match rx.await {
            Ok(answer) => answer.map_err(RequestError::Rejected),
            Err(_) => Err(RequestError::Closed(method.to_string())),
        };
        drop(guard);
        answer
    }

    /// Deliver a client's answer to the request waiting for it.
    pub fn resolve(&self, id: &RequestId, result: Result<Value, RpcError>) {
        match lock(&self.pending).remove(id) {
            Some(waiter) => {
                let _ = waiter.send(result);
            }
            None if lock(&self.withdrawn).remove(id) => {
                tracing::debug!(%id, "answer to a withdrawn request; dropped");
            }
            None => tracing::warn!(%id, "answer to a request this agent is not waiting for"),
        }
    }

    /// Fail every request still waiting for the client (it has gone away).
    pub fn fail_pending(&self) {
        // Dropping a waiter tells its request the connection closed.
        let waiters: Vec<_> = lock(&self.pending).drain().collect();
        drop(waiters);
    }

    /// The peer's `$/cancel_request`: fire the token of the request it
    /// names, if that request is still being worked on.
    pub fn cancel_request(&self, id: &RequestId) {
        let token = lock(&self.in_flight)
            .requests
            .get(id)
            .map(|(_, token)| token.clone());
        match token {
            Some(token) => token.cancel(),
            None => tracing::debug!(%id, "cancel for a request no longer in flight"),
        }
    }
}

struct PendingGuard<'a> {
    connection: &'a Connection,
    id: &'a RequestId,
    withdrawn: Withdrawn,
}

/// What becomes of a request withdrawn unanswered (its future dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Withdrawn {
    /// Forgotten here only.
    Dropped,
    /// Also cancelled at the peer, with `$/cancel_request`.
    CancelledAtPeer,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        // Still there: no answer came, and the connection is open.
        let unanswered = lock(&self.connection.pending).remove(self.id).is_some();
        if unanswered && self.withdrawn == Withdrawn::CancelledAtPeer {
            lock(&self.connection.withdrawn).insert(self.id.clone());
            self.connection.notify(
                "$/cancel_request",
                &CancelRequestNotification::new(self.id.clone()),
            );
        }
    }
}

/// The one answer a request is owed, and the request's cancellation.
/// Answering consumes it; dropping it unanswered (a bug or a panic) still
/// answers, with an internal error, so no request is ever left hanging.
pub struct Responder {
    id: RequestId,
    answered: bool,
    connection: Connection,
    method: String,
    cancel: CancellationToken,
    generation: u64,
    /// Dropped after the answer is in: the last of a batch writes its array.
    to: AnswerTo,
}

impl Responder {
    /// The answer owed to a request that came on a line of its own.
    pub fn new(id: RequestId, connection: Connection, method: impl Into<String>) -> Self {
        Self::answering(id, connection, method, AnswerTo::Line)
    }

    fn answering(
        id: RequestId,
        connection: Connection,
        method: impl Into<String>,
        to: AnswerTo,
    ) -> Self {
        let cancel = CancellationToken::new();
        let generation = {
            let mut in_flight = lock(&connection.in_flight);
            let generation = in_flight.next_generation;
            in_flight.next_generation += 1;
            let previous = in_flight
                .requests
                .insert(id.clone(), (generation, cancel.clone()));
            if previous.is_some() {
                tracing::debug!(%id, "the client reused the id of a request still in flight");
            }
            generation
        };
        Self {
            id,
            answered: false,
            connection,
            method: method.into(),
            cancel,
            generation,
            to,
        }
    }

    /// Fired when the client sends `$/cancel_request` for this request.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    pub fn respond(mut self, result: Result<Value, RpcError>) {
        self.answered = true;
        self.connection.answer(&self.id, &result, &self.to);
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
        if !self.answered {
            tracing::error!(method = %self.method, id = %self.id, "request dropped without an answer");
            self.connection.answer(
                &self.id,
                &Err(RpcError::internal(format!(
                    "{} ended without an answer; this is a bug in crucible-agent, please report it with the log",
                    self.method
                ))),
                &self.to,
            );
        }
        let mut in_flight = lock(&self.connection.in_flight);
        // Only its own entry: a later request may have reused the id.
        if matches!(in_flight.requests.get(&self.id), Some((generation, _)) if *generation == self.generation)
        {
            in_flight.requests.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        assert!(lock(&connection.pending).is_empty());
    }

    #[tokio::test]
    async fn a_withdrawn_cancellable_request_is_cancelled_at_the_peer() {
        let (connection, mut rx) = Connection::new();
        let sent = |line: Vec<u8>| serde_json::from_slice::<Value>(&line).unwrap();
        let ask = |connection: &Connection| {
            let connection = connection.clone();
            tokio::spawn(async move {
                connection
                    .request_cancellable("mcp/message", &json!({}))
                    .await
            })
        };
        // Withdrawn before its answer: `$/cancel_request` names it.
        let asking = ask(&connection);
        let request = sent(rx.recv().await.unwrap());
        asking.abort();
        let _ = asking.await;
        let cancel = sent(rx.recv().await.unwrap());
        assert_eq!(cancel["method"], "$/cancel_request", "{cancel}");
        assert_eq!(cancel["params"]["requestId"], request["id"], "{cancel}");
        assert!(cancel.get("id").is_none(), "a notification: {cancel}");
        // Its late answer is expected and dropped.
        let id: RequestId = serde_json::from_value(request["id"].clone()).unwrap();
        connection.resolve(&id, Err(RpcError::request_cancelled()));
        assert!(lock(&connection.withdrawn).is_empty());
        // Answered, or a plain request withdrawn: nothing more is sent.
        let answered = ask(&connection);
        let request = sent(rx.recv().await.unwrap());
        let id: RequestId = serde_json::from_value(request["id"].clone()).unwrap();
        connection.resolve(&id, Ok(json!({})));
        assert_eq!(answered.await.unwrap(), Ok(json!({})));
        let plain = {
            let connection = connection.clone();
            tokio::spawn(async move { connection.request("fs/read_text_file", &json!({})).await })
        };
        sent(rx.recv().await.unwrap());
        plain.abort();
        let _ = plain.await;
        drop(connection);
        assert!(rx.recv().await.is_none(), "no cancel for those");
    }

    #[tokio::test]
    async fn pending_requests_fail_when_the_client_goes_away() {
        let (connection, _rx) = Connection::new();
        let asking = {
            let connection = connection.clone();
            tokio::spawn(async move { connection.request("terminal/create", &json!({})).await })
        };
        tokio::task::yield_now().await;
        while lock(&connection.pending).is_empty() {
            tokio::task::yield_now().await;
        }
        connection.fail_pending();
        assert_eq!(
            asking.await.unwrap(),
            Err(RequestError::Closed("terminal/create".into()))
        );
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
        assert_eq!(sent["error"]["code"], jsonrpc::ErrorCode::INTERNAL_ERROR.0);
    }

    #[tokio::test]
    async fn a_cancel_request_reaches_the_responder_while_it_is_owed() {
        let (connection, mut rx) = Connection::new();
        let first = Responder::new(RequestId::Number(1), connection.clone(), "session/prompt");
        let second = Responder::new(RequestId::Number(2), connection.clone(), "session/prompt");
        connection.cancel_request(&RequestId::Number(1));
        assert!(first.cancellation().is_cancelled());
        assert!(!second.cancellation().is_cancelled());
        second.respond(Ok(Value::Null));
        assert!(rx.recv().await.is_some());
        // Answered: its id is free again, and a cancel for it does nothing.
        assert!(
            !lock(&connection.in_flight)
                .requests
                .contains_key(&RequestId::Number(2))
        );
        let reused = Responder::new(RequestId::Number(1), connection.clone(), "session/prompt");
        drop(first);
        // The old request's end does not unregister the newer one with its id.
        connection.cancel_request(&RequestId::Number(1));
        assert!(reused.cancellation().is_cancelled());
        reused.respond(Ok(Value::Null));
    }
}
