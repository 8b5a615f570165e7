//! Wrong params for every method (the fault matrix's client cell): each
//! request is answered exactly once, with -32602 and a message that names
//! what is wrong, or with a result where the params happen to be valid;
//! nothing else comes back for it, and the agent keeps serving.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::support::harness::{Agent, LlmServer, config_for, scripted_model};

const METHODS: &[&str] = &[
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/resume",
    "session/prompt",
    "session/set_mode",
    "session/set_model",
    "session/set_config_option",
    "session/close",
    "session/list",
    "session/delete",
    "session/set_title",
    "session/status",
    "session/fork",
];

/// Shapes that are wrong for most methods: not an object, fields of the
/// wrong type, an unknown session, content that is not content.
fn wrong_params(session: &str) -> Vec<Value> {
    vec![
        Value::Null,
        json!([]),
        json!(42),
        json!("text"),
        json!({}),
        json!({"sessionId": 5}),
        json!({"sessionId": null, "cwd": 7}),
        json!({"sessionId": session, "prompt": "not blocks"}),
        json!({"sessionId": session, "prompt": [{"type": "nope"}]}),
        json!({"sessionId": session, "modeId": ["x"], "modelId": {}, "configId": 1, "value": []}),
        json!({"sessionId": "no-such-session", "cwd": "relative/dir", "mcpServers": {}}),
        json!({"protocolVersion": "one", "clientCapabilities": 3}),
        json!({"methodId": 9, "cursor": 5, "title": 1}),
    ]
}

#[tokio::test]
async fn every_method_answers_every_wrong_params_once_and_the_agent_keeps_serving() {
    let server = LlmServer::start(scripted_model(Vec::new())).await;
    let config = format!(
        "{}\n[acp]\nunstable = [\"set_title\", \"status\", \"fork\"]\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;

    let mut sent: HashMap<i64, (String, Value)> = HashMap::new();
    for method in METHODS {
        for params in wrong_params(&session) {
            let id = agent.request(method, params.clone()).await;
            sent.insert(id, (method.to_string(), params));
        }
    }
    let mut answered: HashMap<i64, Value> = HashMap::new();
    while answered.len() < sent.len() {
        let message = agent.next_message().await;
        let Some(id) = message["id"].as_i64() else {
            continue;
        };
        if message.get("method").is_some() {
            continue; // a request of the agent's (none expected)
        }
        assert!(
            sent.contains_key(&id),
            "an answer to nothing sent: {message}"
        );
        assert!(
            answered.insert(id, message.clone()).is_none(),
            "answered twice: {message}"
        );
    }
    for (id, answer) in &answered {
        let (method, params) = &sent[id];
        if answer.get("result").is_some() {
            continue;
        }
        let error = &answer["error"];
        let code = error["code"].as_i64().unwrap_or_default();
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            [-32602, -32002, -32600].contains(&code),
            "{method} {params}: {answer}"
        );
        assert!(message.len() > 10, "{method} {params}: {answer}");
        if code == -32602 {
            assert!(
                message.contains(method.as_str()),
                "{method} {params}: {answer}"
            );
        }
    }
    // The agent still serves (the session itself may have been closed or
    // deleted by params that happened to be valid for those methods).
    let fresh = agent.new_session().await;
    let (_, response) = agent.prompt(&fresh, "hello").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
}
