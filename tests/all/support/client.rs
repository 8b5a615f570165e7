//! A client that answers the agent's requests (`terminal/*`, …) while a
//! prompt runs, on top of [`super::harness::Agent`].

use serde_json::{Value, json};

use super::harness::Agent;

/// Read until the response to `id`, letting `client` answer what the agent
/// asks on the way: for each message it returns the messages to send back
/// (responses, notifications). Returns everything seen, in order, and the
/// response.
pub async fn respond_until(
    agent: &mut Agent,
    id: i64,
    mut client: impl FnMut(&Value) -> Vec<Value>,
) -> (Vec<Value>, Value) {
    let mut seen = Vec::new();
    loop {
        let message = agent.next_message().await;
        if message.get("method").is_none() && message.get("id") == Some(&json!(id)) {
            return (seen, message);
        }
        for reply in client(&message) {
            agent.send(&reply).await;
        }
        seen.push(message);
    }
}

/// A JSON-RPC result for the request `request`.
pub fn result_for(request: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": request["id"], "result": result})
}

/// Initialize as a client that offers a terminal (and no file system);
/// returns a new session's id.
pub async fn initialize_with_terminal(agent: &mut Agent) -> String {
    agent
        .call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": true}}),
        )
        .await;
    agent.new_session().await
}
