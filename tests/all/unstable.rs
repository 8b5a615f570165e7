//! Unstable ACP features: absent unless `[acp] unstable` names them, and
//! working when it does.

use serde_json::json;

use crate::support::context::system_text;
use crate::support::harness::{Agent, LlmServer, config_for, error_message, scripted_model};

#[tokio::test]
async fn unstable_methods_are_absent_unless_turned_on() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let init = agent.initialize().await;
    let caps = &init["result"]["agentCapabilities"]["sessionCapabilities"];
    assert!(caps.get("title").is_none(), "{caps}");
    assert!(caps.get("status").is_none(), "{caps}");
    assert!(caps.get("fork").is_none(), "{caps}");
    let agent_caps = &init["result"]["agentCapabilities"];
    assert!(agent_caps.get("providers").is_none(), "{agent_caps}");
    assert!(agent_caps["auth"].get("status").is_none(), "{agent_caps}");
    let session = agent.new_session().await;
    // End-turn usage is unstable too: not in the answer unless asked for.
    let (_, answered) = agent.prompt(&session, "hi").await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    assert!(answered["result"].get("usage").is_none(), "{answered}");
    for (method, params) in [
        (
            "session/set_title",
            json!({"sessionId": session, "title": "x"}),
        ),
        ("session/status", json!({"sessionId": session})),
        (
            "session/fork",
            json!({"sessionId": session, "cwd": agent.cwd()}),
        ),
        ("providers/list", json!({})),
        ("providers/disable", json!({"providerId": "local"})),
        ("auth/status", json!({})),
    ] {
        let (_, response) = agent.call(method, params).await;
        assert_eq!(response["error"]["code"], -32601, "{method}: {response}");
    }
}

#[tokio::test]
async fn a_session_is_retitled_and_its_status_reported() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let config = format!(
        "{}\n[acp]\nunstable = [\"set_title\", \"status\"]\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let init = agent.initialize().await;
    let caps = &init["result"]["agentCapabilities"]["sessionCapabilities"];
    assert!(caps["title"].is_object(), "{caps}");
    assert!(caps["status"].is_object(), "{caps}");
    let session = agent.new_session().await;

    let (seen, response) = agent
        .call(
            "session/set_title",
            json!({"sessionId": session, "title": "  Release notes  "}),
        )
        .await;
    assert_eq!(response["result"]["title"], "Release notes", "{response}");
    // The update may come just after the answer: look in what follows too.
    let mut after = seen;
    let (more, empty) = agent
        .call(
            "session/set_title",
            json!({"sessionId": session, "title": " "}),
        )
        .await;
    after.extend(more);
    assert_eq!(empty["error"]["code"], -32602, "{empty}");
    // The first prompt does not replace a title the user gave.
    let (more, _) = agent.prompt(&session, "hello there").await;
    after.extend(more);
    let (_, listed) = agent.call("session/list", json!({})).await;
    assert_eq!(listed["result"]["sessions"][0]["title"], "Release notes");
    let told = after
        .iter()
        .any(|m| m["params"]["update"]["sessionUpdate"] == "session_info_update");
    assert!(told, "no session_info_update after the new title");

    let (_, status) = agent
        .call("session/status", json!({"sessionId": session}))
        .await;
    assert_eq!(status["result"]["status"], "open", "{status}");
    agent
        .call("session/close", json!({"sessionId": session}))
        .await;
    let (_, status) = agent
        .call("session/status", json!({"sessionId": session}))
        .await;
    assert_eq!(status["result"]["status"], "saved", "{status}");
    let (_, unknown) = agent
        .call("session/status", json!({"sessionId": "no-such"}))
        .await;
    assert!(error_message(&unknown).contains("no-such"), "{unknown}");
}

#[tokio::test]
async fn an_unknown_unstable_feature_is_a_config_error_naming_the_key() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let config = format!(
        "{}\n[acp]\nunstable = [\"teleport\"]\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    agent.close_stdin();
    agent.wait_exit().await;
    let stderr = agent.stderr();
    assert!(stderr.contains("acp.unstable[0]"), "{stderr}");
    assert!(
        stderr.contains("set_title"),
        "the fix names the known ones: {stderr}"
    );
}

fn haiku() -> serde_json::Value {
    json!({"mode": "append", "content": [{"type": "text", "text": "Answer in haiku."}]})
}

/// The system prompt of the newest chat request.
fn last_system(server: &LlmServer) -> String {
    let requests = server.chat_requests();
    system_text(requests.last().expect("no chat request"))
}

#[tokio::test]
async fn a_client_system_prompt_is_the_last_layer_and_stays_with_the_session() {
    // Stable since ACP 1.20: no `[acp] unstable` needed.
    let server = LlmServer::start(scripted_model(vec![])).await;
    let config = config_for(&server, "test-model");
    let mut first = Agent::spawn(&config).await;
    let init = first.initialize().await;
    let caps = &init["result"]["agentCapabilities"]["sessionCapabilities"];
    assert!(
        caps["systemPrompt"]["mode"]["override"].is_object(),
        "{caps}"
    );
    let (_, created) = first
        .call(
            "session/new",
            json!({"cwd": first.cwd(), "mcpServers": [], "systemPrompt": haiku()}),
        )
        .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    first.prompt(&session, "hello").await;
    let system = last_system(&server);
    assert!(
        system.ends_with("# Instructions from the client\nAnswer in haiku."),
        "{system}"
    );
    first.close_stdin();
    assert!(first.wait_exit().await.success());

    // A resume without one keeps the prompt saved with the session.
    let mut second = Agent::spawn_sharing(&config, &first).await;
    second.initialize().await;
    let (_, resumed) = second
        .call(
            "session/resume",
            json!({"sessionId": session, "cwd": first.cwd()}),
        )
        .await;
    assert!(resumed.get("result").is_some(), "{resumed}");
    second.prompt(&session, "again").await;
    assert!(last_system(&server).ends_with("Answer in haiku."));

    // A new one replaces it; `override` replaces the built-in base prompt.
    let base = last_system(&server);
    let (_, loaded) = second
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": first.cwd(), "mcpServers": [],
                   "systemPrompt": {"mode": "override", "content": [{"type": "text", "text": "ONLY THESE RULES."}]}}),
        )
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    second.prompt(&session, "third").await;
    let system = last_system(&server);
    assert!(system.starts_with("ONLY THESE RULES."), "{system}");
    assert!(!system.contains("Answer in haiku."), "{system}");
    let base_start: String = base.chars().take(60).collect();
    assert!(
        !system.contains(&base_start),
        "the base prompt is still there: {system}"
    );
}

/// The messages of the newest chat request, as text.
fn last_messages(server: &LlmServer) -> String {
    let requests = server.chat_requests();
    requests.last().expect("no chat request").body["messages"].to_string()
}

#[tokio::test]
async fn a_fork_continues_from_the_parents_history_and_leaves_the_parent_alone() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let config = format!(
        "{}\n[acp]\nunstable = [\"fork\"]\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let init = agent.initialize().await;
    let caps = &init["result"]["agentCapabilities"]["sessionCapabilities"];
    assert!(caps["fork"].is_object(), "{caps}");
    let parent = agent.new_session().await;
    agent.prompt(&parent, "remember seven").await;

    let (_, forked) = agent
        .call(
            "session/fork",
            json!({"sessionId": parent, "cwd": agent.cwd()}),
        )
        .await;
    let fork = forked["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{forked}"))
        .to_string();
    assert_ne!(fork, parent);
    assert!(forked["result"]["configOptions"].is_array(), "{forked}");
    agent.prompt(&fork, "which number, fork?").await;
    let seen = last_messages(&server);
    assert!(seen.contains("remember seven"), "{seen}");

    agent.prompt(&parent, "parent again").await;
    let seen = last_messages(&server);
    assert!(seen.contains("remember seven"), "{seen}");
    assert!(
        !seen.contains("which number, fork?"),
        "the parent saw the fork: {seen}"
    );

    let (_, listed) = agent.call("session/list", json!({})).await;
    let ids: Vec<&str> = listed["result"]["sessions"]
        .as_array()
        .map(|all| all.iter().filter_map(|s| s["sessionId"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        ids.contains(&fork.as_str()) && ids.contains(&parent.as_str()),
        "{listed}"
    );
    let (_, unknown) = agent
        .call(
            "session/fork",
            json!({"sessionId": "no-such", "cwd": agent.cwd()}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
}
