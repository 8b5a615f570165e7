//! What the HTTP carrier reads of a message to route it (ACP's Streamable
//! HTTP transport RFD): the session it concerns, and for an answer, the
//! request it answers. Only these members are read; the rest is skipped.

use agent_client_protocol_schema::v1::RequestId;
use serde::Deserialize;
use serde_json::Value;

use crate::transport::jsonrpc::{Incoming, Message};

/// The `sessionId` member of a message's `params` or `result`.
#[derive(Deserialize)]
struct AboutSession {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

/// An outgoing message, as far as routing it goes.
#[derive(Deserialize)]
struct Outgoing {
    id: Option<RequestId>,
    method: Option<String>,
    params: Option<AboutSession>,
}

/// Where an outgoing message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    /// The answer to the client's request `id` (its route was recorded when
    /// the request came in).
    Answer(RequestId),
    /// A request or notification of the agent's, about this session (or
    /// about none: the connection's stream).
    Call {
        session: Option<String>,
        /// Set for a request: the client's answer comes back with it.
        id: Option<RequestId>,
    },
}

/// How `message` (one encoded JSON-RPC message of ours) is routed.
pub fn outgoing(message: &[u8]) -> Bound {
    match serde_json::from_slice::<Outgoing>(message) {
        Ok(Outgoing {
            id: Some(id),
            method: None,
            ..
        }) => Bound::Answer(id),
        Ok(Outgoing { id, params, .. }) => Bound::Call {
            session: params.and_then(|params| params.session_id),
            id,
        },
        // Ours are always objects; were one not, the connection's stream takes it.
        Err(_) => Bound::Call {
            session: None,
            id: None,
        },
    }
}

/// The `sessionId` of an incoming request's or notification's params.
pub fn session_of(message: &Incoming) -> Option<String> {
    let params = match message {
        Incoming::Message(Message::Request(request)) => &request.params,
        Incoming::Message(Message::Notification(notification)) => &notification.params,
        _ => return None,
    };
    session_in(params)
}

fn session_in(params: &Value) -> Option<String> {
    AboutSession::deserialize(params).ok()?.session_id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::jsonrpc;

    #[test]
    fn messages_are_routed_by_their_session_and_answers_by_their_id() {
        let table: [(&str, Bound); 5] = [
            (
                r#"{"jsonrpc":"2.0","id":7,"result":{"sessionId":"s1"}}"#,
                Bound::Answer(RequestId::Number(7)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"no"}}"#,
                Bound::Answer(RequestId::Str("x".into())),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{}}}"#,
                Bound::Call {
                    session: Some("s1".into()),
                    id: None,
                },
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"sessionId":"s2"}}"#,
                Bound::Call {
                    session: Some("s2".into()),
                    id: Some(RequestId::Number(3)),
                },
            ),
            (
                r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":4}}"#,
                Bound::Call {
                    session: None,
                    id: None,
                },
            ),
        ];
        for (message, bound) in table {
            assert_eq!(outgoing(message.as_bytes()), bound, "{message}");
        }
    }

    #[test]
    fn an_incoming_message_names_its_session_in_its_params() {
        let read = |text: &str| jsonrpc::parse(text.as_bytes()).unwrap();
        assert_eq!(
            session_of(&read(
                r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}"#
            )),
            Some("s".into())
        );
        assert_eq!(
            session_of(&read(
                r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/"}}"#
            )),
            None
        );
        assert_eq!(
            session_of(&read(
                r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}"#
            )),
            None
        );
    }
}
