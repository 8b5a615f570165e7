//! Taking what one line brought, a single message or a JSON-RPC 2.0 batch:
//! answers to our requests go to their waiters, invalid messages are
//! answered here, and each request (with the [`Responder`] it is owed) or
//! notification is handed on. A batch's requests are dispatched one after
//! another as separate lines would be (none waits for another), and their
//! answers are collected into one array line, written once the last is in.

use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::RequestId;
use serde_json::Value;

use super::jsonrpc::{Invalid, Message, Notification, Request, Response};
use super::{Connection, Incoming, Responder, RpcError};
use crate::util::lock;

/// A request or notification from the peer, ready for its handler.
pub enum Inbound {
    Request {
        method: String,
        params: Value,
        responder: Responder,
    },
    Notification {
        method: String,
        params: Value,
    },
}

/// Where a request's answer goes.
#[derive(Clone)]
pub(super) enum AnswerTo {
    /// A line of its own.
    Line,
    /// Its batch's array.
    Batch(Arc<BatchAnswers>),
}

/// The answers of one batch so far. Every responder of the batch (and the
/// dispatch, while it runs) holds it: when the last lets go, every request
/// has been answered, and the array is written, unless there is nothing in
/// it (a batch of notifications and responses gets no reply at all).
pub(super) struct BatchAnswers {
    connection: Connection,
    answers: Mutex<Vec<Vec<u8>>>,
}

impl BatchAnswers {
    pub(super) fn add(&self, answer: Vec<u8>) {
        lock(&self.answers).push(answer);
    }
}

impl Drop for BatchAnswers {
    fn drop(&mut self) {
        let answers = std::mem::take(
            self.answers
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if answers.is_empty() {
            return;
        }
        let mut line = Vec::with_capacity(answers.iter().map(|a| a.len() + 1).sum::<usize>() + 1);
        line.push(b'[');
        for (n, answer) in answers.iter().enumerate() {
            if n > 0 {
                line.push(b',');
            }
            line.extend_from_slice(answer);
        }
        line.push(b']');
        self.connection.send_line(line);
    }
}

impl Connection {
    /// Take what one unit from the carrier held, handing each request and
    /// notification in it to `handle`, in order (see the module doc).
    pub fn receive(&self, incoming: Incoming, mut handle: impl FnMut(Inbound)) {
        match incoming {
            Incoming::Batch(entries) => {
                let batch = Arc::new(BatchAnswers {
                    connection: self.clone(),
                    answers: Mutex::default(),
                });
                for entry in entries {
                    self.receive_one(entry, AnswerTo::Batch(Arc::clone(&batch)), &mut handle);
                }
            }
            single => self.receive_one(single, AnswerTo::Line, &mut handle),
        }
    }

    fn receive_one(&self, entry: Incoming, to: AnswerTo, handle: &mut impl FnMut(Inbound)) {
        match entry {
            Incoming::Message(Message::Request(Request { id, method, params })) => {
                handle(Inbound::Request {
                    responder: Responder::answering(id, self.clone(), method.clone(), to),
                    method,
                    params,
                });
            }
            Incoming::Message(Message::Notification(Notification { method, params })) => {
                handle(Inbound::Notification { method, params });
            }
            Incoming::Message(Message::Response(Response { id, result })) => {
                self.resolve(&id, result);
            }
            Incoming::Invalid(Invalid { id, error }) => {
                tracing::warn!(code = %error.code, message = %error.message, "invalid message from client");
                self.answer(&id.unwrap_or(RequestId::Null), &Err(error), &to);
            }
            // The parser never nests batches; were one to come, it is one invalid entry.
            Incoming::Batch(_) => self.answer(
                &RequestId::Null,
                &Err(RpcError::invalid_request("a batch inside a batch")),
                &to,
            ),
        }
    }

    pub(super) fn answer(&self, id: &RequestId, result: &Result<Value, RpcError>, to: &AnswerTo) {
        let line = super::jsonrpc::encode_response(id, result);
        match to {
            AnswerTo::Line => self.send_line(line),
            AnswerTo::Batch(batch) => batch.add(line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::jsonrpc::{ErrorCode, parse};
    use serde_json::json;

    /// Feed `line`, keeping the requests' responders and the notifications' methods.
    fn receive(connection: &Connection, line: &str) -> (Vec<Responder>, Vec<String>) {
        let (mut responders, mut notified) = (Vec::new(), Vec::new());
        connection.receive(parse(line.as_bytes()).unwrap(), |inbound| match inbound {
            Inbound::Request { responder, .. } => responders.push(responder),
            Inbound::Notification { method, .. } => notified.push(method),
        });
        (responders, notified)
    }

    fn written(lines: &mut crate::transport::Outgoing) -> Vec<Value> {
        std::iter::from_fn(|| lines.try_recv().ok())
            .map(|line| serde_json::from_slice(&line).unwrap())
            .collect()
    }

    #[test]
    fn a_batch_is_answered_by_one_array_once_its_last_request_is_answered() {
        let (connection, mut lines) = Connection::new();
        let (mut responders, notified) = receive(
            &connection,
            r#"[{"jsonrpc":"2.0","id":1,"method":"slow"},{"jsonrpc":"2.0","method":"note"},{"jsonrpc":"2.0","id":"b","method":"fast"},{"foo":"boo"}]"#,
        );
        assert_eq!(notified, ["note"]);
        // Both requests were handed on at once; the fast one answering writes nothing yet.
        let slow = responders.remove(0);
        responders.remove(0).respond(Ok(json!("fast")));
        assert!(written(&mut lines).is_empty());
        slow.respond(Ok(json!("slow")));
        let out = written(&mut lines);
        assert_eq!(out.len(), 1, "{out:?}");
        let answers = out[0].as_array().expect("one array");
        assert_eq!(answers.len(), 3, "{answers:?}");
        let by_id = |id: Value| answers.iter().find(|a| a["id"] == id).unwrap();
        assert_eq!(by_id(json!(1))["result"], "slow");
        assert_eq!(by_id(json!("b"))["result"], "fast");
        assert_eq!(
            by_id(Value::Null)["error"]["code"],
            ErrorCode::INVALID_REQUEST.0
        );
    }

    #[test]
    fn notifications_and_responses_alone_get_no_reply_and_an_empty_batch_one_error() {
        let (connection, mut lines) = Connection::new();
        let (responders, notified) = receive(
            &connection,
            r#"[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":7,"result":{}},{"jsonrpc":"2.0","method":"b"}]"#,
        );
        assert!(responders.is_empty());
        assert_eq!(notified, ["a", "b"]);
        assert!(written(&mut lines).is_empty());
        receive(&connection, "[]");
        let out = written(&mut lines);
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0]["error"]["code"],
            ErrorCode::INVALID_REQUEST.0,
            "{}",
            out[0]
        );
        assert_eq!(out[0]["id"], Value::Null);
    }

    #[tokio::test]
    async fn answers_from_the_client_in_a_batch_each_reach_their_request() {
        let (connection, mut lines) = Connection::new();
        let ask = |method: &'static str| {
            let connection = connection.clone();
            tokio::spawn(async move { connection.request(method, &json!({})).await })
        };
        let (first, second) = (ask("a"), ask("b"));
        let mut ids = Vec::new();
        for _ in 0..2 {
            let sent: Value = serde_json::from_slice(&lines.recv().await.unwrap()).unwrap();
            ids.push((sent["method"].clone(), sent["id"].clone()));
        }
        let answers: Vec<Value> = ids
            .iter()
            .map(|(method, id)| json!({"jsonrpc": "2.0", "id": id, "result": method}))
            .collect();
        receive(&connection, &Value::from(answers).to_string());
        assert_eq!(first.await.unwrap().unwrap(), json!("a"));
        assert_eq!(second.await.unwrap().unwrap(), json!("b"));
    }

    #[test]
    fn a_request_of_a_batch_dropped_unanswered_still_answers_in_the_array() {
        let (connection, mut lines) = Connection::new();
        let (responders, _) = receive(&connection, r#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#);
        drop(responders);
        let out = written(&mut lines);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0][0]["id"], 1, "{}", out[0]);
        assert!(out[0][0]["error"].is_object(), "{}", out[0]);
    }
}
