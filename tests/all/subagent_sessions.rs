//! Delegated agents as sessions of their own, for clients that take ACP's
//! unstable subagents (by capability or `[acp] unstable`): the child is
//! announced on its parent's session before any of its traffic, its work
//! streams under its own session id, its task and answer are messages
//! between the two, and its state follows it. Other clients see only the
//! parent's delegate call.

use serde_json::{Value, json};

use crate::subagents::{Step, delegate, delegate_updates, parent, routed};
use crate::support::harness::{Agent, LlmServer, answer_permission, config_for};

/// `initialize` as a client that shows subagents.
async fn initialize_taking_subagents(agent: &mut Agent) {
    let (_, response) = agent
        .call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"subagents": {}},
                "clientInfo": {"name": "subagent-viewer", "version": "0"}}),
        )
        .await;
    assert!(response["result"].is_object(), "{response}");
}

fn reading_child() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            "Survey it",
            parent(vec![delegate("explorer", "Find alpha")]),
        ),
        (
            "Find alpha",
            vec![
                Step::Calls(vec![("read_file", json!({"path": "alpha.txt"}))]),
                Step::Answer("alpha says:"),
            ],
        ),
    ]
}

/// The updates of `kind` sent on `session`, in order.
fn updates<'a>(seen: &'a [Value], session: &str, kind: &str) -> Vec<&'a Value> {
    seen.iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session)
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

/// The session ids the notifications were sent on, in order of first use.
fn sessions_of(seen: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for message in seen.iter().filter(|m| m["method"] == "session/update") {
        if let Some(id) = message["params"]["sessionId"].as_str()
            && !ids.iter().any(|known| known == id)
        {
            ids.push(id.to_string());
        }
    }
    ids
}

async fn survey(agent: &mut Agent) -> (String, Vec<Value>) {
    std::fs::write(agent.cwd().join("alpha.txt"), "ALPHA-CONTENT\n").unwrap();
    let session = agent.new_session().await;
    let (seen, response) = agent.prompt(&session, "Survey it").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    (session, seen)
}

#[tokio::test]
async fn a_client_taking_subagents_sees_the_child_announced_working_and_answering() {
    let server = LlmServer::start(routed(reading_child())).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    initialize_taking_subagents(&mut agent).await;
    let (session, seen) = survey(&mut agent).await;

    let announced = updates(&seen, &session, "subagent_update");
    assert!(!announced.is_empty(), "{seen:?}");
    let first = announced[0];
    let child = first["sessionId"].as_str().unwrap().to_string();
    assert_ne!(child, session);
    assert_eq!(first["title"], "explorer", "{first}");
    assert_eq!(first["description"], "Find alpha", "{first}");
    assert_eq!(first["state"]["state"], "running", "{first}");
    assert_eq!(first["cwd"], json!(agent.cwd()), "{first}");
    // Announced before any of the child's own traffic.
    let announce_at = seen
        .iter()
        .position(|m| m["params"]["update"]["sessionUpdate"] == "subagent_update")
        .unwrap();
    let child_first = seen
        .iter()
        .position(|m| m["params"]["sessionId"] == child.as_str())
        .unwrap();
    assert!(announce_at < child_first, "{seen:?}");

    // The child's work, under its own id.
    let calls = updates(&seen, &child, "tool_call");
    assert_eq!(calls.len(), 1, "{seen:?}");
    assert_eq!(calls[0]["title"], "Read alpha.txt", "{}", calls[0]);
    let text: String = updates(&seen, &child, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(
        text.contains("alpha says:") && text.contains("ALPHA-CONTENT"),
        "{text}"
    );

    // The task went from parent to child, the answer came back.
    let messages = updates(&seen, &session, "session_message");
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["senderSessionId"], session.as_str());
    assert_eq!(messages[0]["recipientSessionId"], child.as_str());
    assert_eq!(messages[0]["content"][0]["text"], "Find alpha");
    assert_eq!(messages[1]["senderSessionId"], child.as_str());
    assert_eq!(messages[1]["recipientSessionId"], session.as_str());
    let answer = messages[1]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(answer.contains("ALPHA-CONTENT"), "{answer}");
    // The child's own transcript has the task it got.
    assert_eq!(
        updates(&seen, &child, "session_message").len(),
        2,
        "{seen:?}"
    );

    // Its last state: done, with why.
    let last = announced.last().unwrap();
    assert_eq!(last["sessionId"], child.as_str());
    assert_eq!(
        last["state"],
        json!({"state": "idle", "stopReason": "end_turn"})
    );
    // The delegate call's running summary is still there, led by a link
    // to the child's session (ACP 1.20's `session` tool-call content),
    // its last update included.
    let delegated = delegate_updates(&seen);
    assert!(!delegated.is_empty(), "{seen:?}");
    let with_content: Vec<&&Value> = delegated
        .iter()
        .filter(|u| u["content"].is_array())
        .collect();
    assert!(!with_content.is_empty(), "{seen:?}");
    for update in &with_content {
        assert_eq!(
            update["content"][0],
            json!({"type": "session", "sessionId": child}),
            "{update}"
        );
    }
    assert_eq!(
        with_content.last().unwrap()["status"],
        "completed",
        "{seen:?}"
    );
}

#[tokio::test]
async fn the_config_switch_shows_subagents_to_a_client_that_does_not_ask() {
    let server = LlmServer::start(routed(reading_child())).await;
    let config = format!(
        "{}\n[acp]\nunstable = [\"subagents\"]\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    agent.initialize().await;
    let (session, seen) = survey(&mut agent).await;
    assert_eq!(sessions_of(&seen).len(), 2, "{seen:?}");
    assert!(!updates(&seen, &session, "subagent_update").is_empty());
}

#[tokio::test]
async fn other_clients_see_only_the_parents_session() {
    let server = LlmServer::start(routed(reading_child())).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    agent.initialize().await;
    let (session, seen) = survey(&mut agent).await;
    assert_eq!(sessions_of(&seen), vec![session.clone()], "{seen:?}");
    assert!(updates(&seen, &session, "subagent_update").is_empty());
    assert!(updates(&seen, &session, "session_message").is_empty());
    assert!(!delegate_updates(&seen).is_empty(), "{seen:?}");
    // No session references for a client that does not show sessions.
    let linked = delegate_updates(&seen)
        .iter()
        .filter_map(|u| u["content"].as_array())
        .flatten()
        .any(|c| c["type"] == "session");
    assert!(!linked, "{seen:?}");
}

#[tokio::test]
async fn a_child_waiting_for_the_user_shows_as_requiring_action() {
    let server = LlmServer::start(routed(vec![
        ("Go write", parent(vec![delegate("coder", "Write notes")])),
        (
            "Write notes",
            vec![
                Step::Calls(vec![(
                    "write_file",
                    json!({"path": "notes.txt", "content": "x"}),
                )]),
                Step::Answer("written:"),
            ],
        ),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    initialize_taking_subagents(&mut agent).await;
    let session = agent.new_session().await;
    let id = agent.start_prompt(&session, "Go write").await;
    answer_permission(&mut agent, "allow_once").await;
    let (seen, response) = agent.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let states: Vec<&Value> = updates(&seen, &session, "subagent_update")
        .iter()
        .filter_map(|u| u.get("state"))
        .map(|s| &s["state"])
        .collect();
    assert_eq!(
        states,
        vec!["running", "requires_action", "running", "idle"],
        "{seen:?}"
    );
    assert!(agent.cwd().join("notes.txt").exists());
}
