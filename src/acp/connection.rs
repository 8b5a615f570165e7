//! One client connection's entry into the adapter: what the carrier
//! delivered (a message or a batch) taken apart by the transport, each
//! request read by the connection's codec ([`super::v1`] or
//! [`super::v2::requests`], as `initialize` settled) into the neutral
//! [`super::request::Request`] and served by the [`Router`]. `initialize`
//! itself is the early handshake, answered here for either version.

use agent_client_protocol_schema::v1::AGENT_METHOD_NAMES as NAMES;
use serde_json::Value;

use super::protocol::Version;
use super::router::{Router, tolerate};
use super::v2::initialize::negotiate;
use crate::transport::{Inbound, Incoming, Responder};

/// What one unit from the carrier held (a message or a batch of them; see
/// [`crate::transport::Connection::receive`]).
pub fn handle(router: &mut Router, message: Incoming) {
    let connection = router.connection.clone();
    connection.receive(message, |inbound| match inbound {
        Inbound::Request {
            method,
            params,
            responder,
        } => request(router, &method, params, responder),
        Inbound::Notification { method, params } => router.notification(&method, params),
    });
}

/// A request read by the connection's codec, then served.
fn request(router: &mut Router, method: &str, params: Value, responder: Responder) {
    tracing::debug!(%method, "request");
    let params = match tolerate(method, params) {
        Ok(params) => params,
        Err(err) => return responder.respond(Err(err)),
    };
    if method == NAMES.initialize {
        return initialize(router, params, responder);
    }
    let unstable = router.sessions.unstable();
    let decoded = match router.protocol.get() {
        Version::V1 => {
            let context = super::v1::Context {
                unstable,
                extras: router.extras(),
            };
            super::v1::decode(method, params, responder, &context)
        }
        Version::V2 => super::v2::requests::decode(method, params, responder, &unstable),
    };
    if let Some(request) = decoded {
        router.serve(request);
    }
}

/// `initialize` on any connection: it settles the version spoken after it.
fn initialize(router: &mut Router, params: Value, responder: Responder) {
    let negotiated = negotiate(params, router.sessions.unstable());
    if let Some(client) = negotiated.client {
        router.client = Some(client);
        router.protocol.set(negotiated.version);
    }
    responder.respond(negotiated.answer);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientSink;
    use crate::config::Config;
    use crate::providers::Providers;
    use crate::session::Defaults;
    use crate::session::manager::SessionManager;
    use crate::transport::Connection;
    use crate::transport::jsonrpc::parse as parse_line;
    use std::sync::Arc;

    fn router() -> (Router, crate::transport::Outgoing) {
        let (connection, lines) = Connection::new();
        let config = Config::builtin_default();
        let sink: Arc<dyn ClientSink> = Arc::new(connection.clone());
        let manager = SessionManager::new(
            Arc::new(Providers::new(config.providers.clone())),
            sink,
            Defaults::from_config(&config).unwrap(),
        );
        (Router::new(connection, manager), lines)
    }

    fn feed(router: &mut Router, line: &str) {
        if let Some(message) = parse_line(line.as_bytes()) {
            handle(router, message);
        }
    }

    async fn next(lines: &mut crate::transport::Outgoing) -> Value {
        let line = tokio::time::timeout(std::time::Duration::from_secs(5), lines.recv())
            .await
            .expect("an answer")
            .expect("the connection is open");
        serde_json::from_slice(&line).unwrap()
    }

    #[tokio::test]
    async fn every_request_gets_one_answer_with_the_right_code() {
        let (mut router, mut lines) = router();
        let cwd = std::env::temp_dir();
        let table = [
            (r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#.to_string(), None),
            ("{oops".to_string(), Some(-32700)),
            (r#"{"jsonrpc":"2.0","id":2,"method":"no/such"}"#.to_string(), Some(-32601)),
            (r#"{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"x","mcpServers":[]}}"#.to_string(), Some(-32602)),
            (r#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"hi"}]}}"#.to_string(), Some(-32002)),
            (r#"{"jsonrpc":"2.0","id":5,"method":"session/close","params":{"sessionId":"nope"}}"#.to_string(), Some(-32002)),
            (format!(r#"{{"jsonrpc":"2.0","id":6,"method":"session/new","params":{{"cwd":{},"mcpServers":[]}}}}"#, serde_json::to_string(&cwd).unwrap()), None),
        ];
        for (line, code) in table {
            feed(&mut router, &line);
            let answer = next(&mut lines).await;
            match code {
                Some(code) => assert_eq!(answer["error"]["code"], code, "{line} → {answer}"),
                None => assert!(answer.get("result").is_some(), "{line} → {answer}"),
            }
        }
        // Notifications, known or not, are never answered.
        feed(
            &mut router,
            r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nope"}}"#,
        );
        feed(&mut router, r#"{"jsonrpc":"2.0","method":"whatever"}"#);
        feed(&mut router, r#"{"jsonrpc":"2.0","id":7,"method":"logout"}"#);
        loop {
            let message = next(&mut lines).await;
            if message.get("method").is_some() {
                continue; // a session update (e.g. a model list, if a local Ollama answers)
            }
            assert_eq!(
                message["id"], 7,
                "only the logout was owed an answer: {message}"
            );
            break;
        }
    }

    #[tokio::test]
    async fn client_answers_reach_the_waiting_request() {
        let (router, mut lines) = router();
        let connection = router.connection.clone();
        let mut router = router;
        let asking = tokio::spawn(async move {
            connection
                .request(
                    "session/request_permission",
                    &serde_json::json!({"sessionId": "s"}),
                )
                .await
        });
        let sent = next(&mut lines).await;
        let id = sent["id"].clone();
        feed(
            &mut router,
            &serde_json::json!({"jsonrpc":"2.0","id":id,"result":{"outcome":{"outcome":"cancelled"}}}).to_string(),
        );
        let answer = asking.await.unwrap().unwrap();
        assert_eq!(answer["outcome"]["outcome"], "cancelled");
    }
}
