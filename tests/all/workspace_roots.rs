//! `additionalDirectories`: extra workspace roots a client gives a session.
//! The file tools reach them and nothing beyond them; they are saved with
//! the session, listed, shown by `/context`, and replaced by a later load.

use serde_json::json;

use crate::support::harness::{
    Agent, LlmServer, agent_text, config_for, error_message, scripted_model, tool_updates,
};

fn statuses(seen: &[serde_json::Value]) -> Vec<String> {
    tool_updates(seen, "tool_call_update")
        .iter()
        .filter_map(|u| u["status"].as_str())
        .filter(|s| *s != "in_progress")
        .map(str::to_string)
        .collect()
}

/// A session with `root` as its one additional directory; its id.
async fn session_with_root(agent: &mut Agent, root: &std::path::Path) -> String {
    let response = agent
        .new_session_answer(json!({"additionalDirectories": [root]}))
        .await;
    let id = response["result"]["sessionId"].as_str();
    id.unwrap_or_else(|| panic!("{response}")).to_string()
}

#[tokio::test]
async fn the_file_tools_reach_every_root_and_nothing_else() {
    let extra = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(extra.path().join("note.txt"), "from the extra root\n").unwrap();
    std::fs::write(outside.path().join("secret.txt"), "not yours\n").unwrap();
    let server = LlmServer::start(scripted_model(vec![
        ("read_file", json!({"path": extra.path().join("note.txt")})),
        (
            "read_file",
            json!({"path": outside.path().join("secret.txt")}),
        ),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let init = agent.initialize().await;
    assert!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"]
            .is_object(),
        "{init}"
    );
    let session = session_with_root(&mut agent, extra.path()).await;

    let (seen, _) = agent.prompt(&session, "read both").await;
    assert_eq!(statuses(&seen), ["completed", "failed"], "{seen:?}");
    let chat = server.chat_requests();
    let results: Vec<String> = chat[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(results[0].contains("from the extra root"), "{results:?}");
    assert!(!results[1].contains("not yours"), "{results:?}");

    let (seen, _) = agent.prompt(&session, "/context").await;
    let shown = agent_text(&seen, &session);
    assert!(
        shown.contains(&extra.path().display().to_string()),
        "{shown}"
    );

    let (_, listed) = agent.call("session/list", json!({})).await;
    assert_eq!(
        listed["result"]["sessions"][0]["additionalDirectories"],
        json!([extra.path()]),
        "{listed}"
    );
}

#[tokio::test]
async fn a_resume_replaces_the_roots_and_bad_roots_are_refused() {
    let extra = tempfile::tempdir().unwrap();
    let server = LlmServer::start(scripted_model(vec![])).await;
    let config = config_for(&server, "test-model");
    let mut agent = Agent::spawn(&config).await;
    agent.initialize().await;
    let refused = agent
        .new_session_answer(json!({"additionalDirectories": ["relative/dir"]}))
        .await;
    assert!(
        error_message(&refused).contains("additionalDirectories[0]"),
        "{refused}"
    );
    let session = session_with_root(&mut agent, extra.path()).await;
    agent.prompt(&session, "hello").await;
    let (mut again, resumed) = agent.resumed_elsewhere(&config, &session).await;
    assert!(resumed.get("result").is_some(), "{resumed}");
    let (seen, _) = again.prompt(&session, "/context").await;
    let shown = agent_text(&seen, &session);
    assert!(
        !shown.contains(&extra.path().display().to_string()),
        "{shown}"
    );
    let (_, listed) = again.call("session/list", json!({})).await;
    assert!(
        listed["result"]["sessions"][0]
            .get("additionalDirectories")
            .is_none(),
        "{listed}"
    );
}
