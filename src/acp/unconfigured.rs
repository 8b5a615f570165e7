//! Serving a client when the config cannot be used. The config is read
//! after `initialize` is answered (see [`super::handshake`]), so the process
//! stays up and answers every request that needs it with the config's own
//! error (file, key, fix): the editor shows it where the user looks, instead
//! of an agent that died before saying anything.

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

use crate::transport::jsonrpc::ErrorCode;
use crate::transport::{Connection, Inbound, Incoming, RpcError};

pub struct Unconfigured {
    connection: Connection,
    why: String,
}

impl Unconfigured {
    pub fn new(connection: Connection, why: impl Into<String>) -> Self {
        Self {
            connection,
            why: why.into(),
        }
    }

    pub fn handle(&mut self, message: Incoming) {
        let connection = self.connection.clone();
        connection.receive(message, |inbound| match inbound {
            Inbound::Request {
                method,
                params,
                responder,
            } => responder.respond(self.answer(&method, params)),
            Inbound::Notification { method, .. } => {
                tracing::debug!(%method, "notification ignored: the config cannot be used");
            }
        });
    }

    fn answer(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let encode = |value: serde_json::Result<Value>| {
            value.map_err(|err| RpcError::internal(format!("could not encode the result: {err}")))
        };
        match method {
            m if m == acp::AGENT_METHOD_NAMES.initialize => {
                super::handshake::initialize(params).answer
            }
            "logout" => encode(serde_json::to_value(acp::LogoutResponse::new())),
            _ => Err(RpcError::new(
                ErrorCode::INTERNAL_ERROR,
                format!("crucible-agent cannot start: {}", self.why),
            )
            .with_data(serde_json::json!({ "method": method }))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::jsonrpc::parse as parse_line;

    #[tokio::test]
    async fn the_handshake_works_and_everything_else_names_the_config_error() {
        let (connection, mut lines) = Connection::new();
        let mut service = Unconfigured::new(
            connection,
            "/home/u/.config/crucible/config.toml: unknown key `llm.default_modle`; did you mean `default_model`?",
        );
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#,
            r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}"#,
        ] {
            service.handle(parse_line(line.as_bytes()).unwrap());
        }
        let mut answers = Vec::new();
        while let Ok(line) = lines.try_recv() {
            answers.push(serde_json::from_slice::<Value>(&line).unwrap());
        }
        assert_eq!(
            answers.len(),
            3,
            "one answer per request, none for the notification"
        );
        assert_eq!(answers[0]["result"]["protocolVersion"], 1);
        for answer in &answers[1..] {
            let message = answer["error"]["message"].as_str().unwrap();
            assert!(message.contains("config.toml"), "{message}");
            assert!(message.contains("llm.default_modle"), "{message}");
        }
    }
}
