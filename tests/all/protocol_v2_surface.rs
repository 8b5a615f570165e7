//! ACP v2 beside v1 through the binary: the same agent answers a v2
//! `initialize` in v2 and a v1 one as before; a v2 prompt is answered with
//! its `messageId`; what v2 removed is -32601 to a v2 client.

use serde_json::{Value, json};

use crate::support::harness::{
    Agent, LlmServer, Reply, Split, config_for, models_reply, text_stream,
};

async fn server() -> LlmServer {
    LlmServer::start(|request| {
        if request.path.ends_with("/models") {
            models_reply(&["test-model"])
        } else {
            Reply::stream(text_stream(&["Hello ", "there"]), Split::Whole)
        }
    })
    .await
}

async fn initialize_v2(agent: &mut Agent) -> Value {
    let (_, response) = agent
        .call(
            "initialize",
            json!({"protocolVersion": 2, "info": {"name": "v2-harness", "version": "0"}}),
        )
        .await;
    response
}

#[tokio::test]
async fn a_v2_client_gets_v2_and_a_prompt_is_answered_with_its_message_id() {
    let server = server().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let response = initialize_v2(&mut agent).await;
    let result = &response["result"];
    assert_eq!(result["protocolVersion"], 2, "{response}");
    assert_eq!(result["info"]["name"], "crucible-agent");
    assert!(
        result["capabilities"]["session"]["prompt"].is_object(),
        "{response}"
    );
    assert!(result.get("agentCapabilities").is_none(), "{response}");
    // `mcpServers` may be left out in v2; the answer has no `modes`.
    let cwd = agent.cwd();
    let (_, created) = agent.call("session/new", json!({"cwd": cwd})).await;
    let session = created["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new failed: {created}"))
        .to_string();
    assert!(created["result"].get("modes").is_none(), "{created}");
    assert!(created["result"].get("models").is_none(), "{created}");
    let options = created["result"]["configOptions"].as_array().unwrap();
    assert!(
        options.iter().any(|option| option["category"] == "mode"),
        "the mode is a config option: {created}"
    );
    let (_, answered) = agent
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}],
                "idempotencyKey": "k-1"}),
        )
        .await;
    let message_id = answered["result"]["messageId"].as_str();
    assert!(message_id.is_some_and(|id| !id.is_empty()), "{answered}");
    assert!(answered["result"].get("stopReason").is_none(), "{answered}");
    // The agent's words come with a message id, as v2 requires.
    let chunk = agent.wait_for_update("agent_message_chunk").await;
    assert!(
        chunk["params"]["update"]["messageId"].is_string(),
        "{chunk}"
    );
    // A bad idempotency key is the client's error.
    let (_, refused) = agent
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}],
                "idempotencyKey": ""}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

#[tokio::test]
async fn what_v2_removed_is_not_found_for_a_v2_client_and_kept_for_v1() {
    let server = server().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    initialize_v2(&mut agent).await;
    let cwd = agent.cwd();
    for (method, params) in [
        (
            "session/load",
            json!({"sessionId": "s", "cwd": cwd, "mcpServers": []}),
        ),
        (
            "session/set_mode",
            json!({"sessionId": "s", "modeId": "act"}),
        ),
        ("authenticate", json!({"methodId": "setup"})),
        ("logout", json!({})),
    ] {
        let (_, response) = agent.call(method, params).await;
        assert_eq!(response["error"]["code"], -32601, "{method}: {response}");
    }
    let (_, logout) = agent.call("auth/logout", json!({})).await;
    assert!(logout.get("result").is_some(), "{logout}");
    let (_, listed) = agent.call("session/list", json!({})).await;
    assert!(listed["result"]["sessions"].is_array(), "{listed}");

    // A v1 client of the same binary sees v1, and keeps `session/load`.
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let response = agent.initialize().await;
    assert_eq!(response["result"]["protocolVersion"], 1, "{response}");
    assert!(response["result"]["agentCapabilities"].is_object());
    let (_, response) = agent
        .call(
            "session/load",
            json!({"sessionId": "nope", "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert_ne!(response["error"]["code"], -32601, "{response}");
}

#[tokio::test]
async fn protocol_v2_false_answers_a_v2_client_in_v1() {
    let server = server().await;
    let config = format!(
        "{}\n[acp]\nprotocol_v2 = false\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let response = initialize_v2(&mut agent).await;
    assert_eq!(response["result"]["protocolVersion"], 1, "{response}");
    assert!(
        response["result"]["agentCapabilities"].is_object(),
        "{response}"
    );
}

#[tokio::test]
async fn a_v2_resume_replays_from_the_start_only_when_asked() {
    let server = server().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    initialize_v2(&mut agent).await;
    let cwd = agent.cwd();
    let (_, created) = agent.call("session/new", json!({"cwd": cwd})).await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    agent
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "remember me"}]}),
        )
        .await;
    agent.wait_for_update("agent_message_chunk").await;
    let (_, closed) = agent
        .call("session/close", json!({"sessionId": session}))
        .await;
    assert!(closed.get("result").is_some(), "{closed}");
    let (replayed, resumed) = agent
        .call(
            "session/resume",
            json!({"sessionId": session, "cwd": cwd, "replayFrom": {"type": "start"}}),
        )
        .await;
    assert!(resumed["result"]["configOptions"].is_array(), "{resumed}");
    assert!(resumed["result"].get("modes").is_none(), "{resumed}");
    // The user's message, whole (`user_message`) or in chunks, with its id.
    let user_text: Vec<&Value> = replayed
        .iter()
        .filter(|m| is_user_message(&m["params"]["update"]))
        .collect();
    assert!(
        user_text.iter().any(|m| {
            let update = &m["params"]["update"];
            (update["content"]["text"] == "remember me"
                || update["content"][0]["text"] == "remember me")
                && update["messageId"].is_string()
        }),
        "the history comes before the answer: {replayed:?}"
    );
    // Then the replay's end and the state the session resumes in.
    let kinds: Vec<&Value> = replayed
        .iter()
        .map(|m| &m["params"]["update"]["sessionUpdate"])
        .collect();
    assert_eq!(
        kinds[kinds.len() - 2..],
        [&json!("replay_complete"), &json!("state_update")],
        "{replayed:?}"
    );
    // Without `replayFrom`, nothing is replayed.
    agent
        .call("session/close", json!({"sessionId": session}))
        .await;
    let (replayed, resumed) = agent
        .call("session/resume", json!({"sessionId": session, "cwd": cwd}))
        .await;
    assert!(resumed.get("result").is_some(), "{resumed}");
    assert!(
        !replayed
            .iter()
            .any(|m| is_user_message(&m["params"]["update"])),
        "{replayed:?}"
    );
    // Only the state snapshot, which a resume always sends.
    assert!(
        replayed
            .iter()
            .all(|m| m["params"]["update"]["sessionUpdate"] == "state_update"
                || m["params"]["update"]["sessionUpdate"] == "available_commands_update"
                || m["params"]["update"]["sessionUpdate"] == "config_option_update"),
        "{replayed:?}"
    );
}

fn is_user_message(update: &Value) -> bool {
    update["sessionUpdate"] == "user_message" || update["sessionUpdate"] == "user_message_chunk"
}
