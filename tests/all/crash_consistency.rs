//! SIGKILL at any moment (the fault matrix's process cell): agents are
//! killed at staggered points of a session's life (its metadata being
//! written, its prompt recorded, its answer streaming into the history),
//! and a fresh agent then lists and loads every session, each losing at
//! most its torn last line.

use std::time::Duration;

use serde_json::json;

use crate::support::harness::{Agent, LlmServer, Split, config_for, models_reply, text_stream};

#[tokio::test]
async fn sessions_killed_at_any_moment_all_list_and_load_afterwards() {
    let words: Vec<String> = (0..300).map(|n| format!("word{n} ")).collect();
    let pieces: Vec<&str> = words.iter().map(String::as_str).collect();
    let body = text_stream(&pieces);
    let server = LlmServer::start(move |request| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model"]);
        }
        crate::support::harness::Reply::stream(body.clone(), Split::Every(97))
    })
    .await;
    let config = config_for(&server, "test-model");
    let mut first = Agent::spawn(&config).await;
    let mut sessions = Vec::new();
    // Staggered kills: before, during and after the first appends.
    for (round, delay) in [0u64, 3, 9, 20, 45, 90, 150].into_iter().enumerate() {
        let mut sharing;
        let agent = if round == 0 {
            &mut first
        } else {
            sharing = Agent::spawn_sharing(&config, &first).await;
            &mut sharing
        };
        let session = agent.start_session().await;
        agent
            .start_prompt(&session, &format!("long answer {round}"))
            .await;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        agent.kill().await;
        sessions.push(session);
    }

    let mut last = Agent::spawn_sharing(&config, &first).await;
    last.initialize().await;
    let (_, listed) = last.call("session/list", json!({})).await;
    let ids: Vec<String> = listed["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect();
    for session in &sessions {
        assert!(ids.contains(session), "{session} not listed: {listed}");
        let cwd = last.cwd();
        let (_, loaded) = last
            .call(
                "session/load",
                json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
            )
            .await;
        assert!(loaded.get("result").is_some(), "{session}: {loaded}");
    }
    // And a loaded session goes on.
    let (_, answer) = last.prompt(&sessions[3], "go on").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}
