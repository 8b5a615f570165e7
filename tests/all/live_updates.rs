//! Notices and compaction updates (ACP 1.15.1): sent only to clients that
//! opt in with `session.notices` / `session.compaction`; the others keep
//! getting thoughts, as before.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::support::context::{config_with, talkative_model};
use crate::support::harness::{
    Agent, LlmServer, Split, Wire, agent_text, config_for, thought_text, updates,
};

/// `initialize` with the given `session` client capabilities.
async fn initialize_with(agent: &mut Agent, session_caps: Value) {
    let (_, response) = agent
        .call(
            "initialize",
            json!({"protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false},
                    "terminal": false, "session": session_caps},
                "clientInfo": {"name": "live-test", "version": "0"}}),
        )
        .await;
    assert!(response.get("result").is_some(), "{response}");
}

async fn flaky_server() -> LlmServer {
    let failures = AtomicUsize::new(0);
    LlmServer::start(move |request| {
        if Wire::OpenAi.is_metadata(&request.path) {
            return Wire::OpenAi.models();
        }
        if failures.fetch_add(1, Ordering::SeqCst) == 0 {
            Wire::OpenAi.error(503, "busy")
        } else {
            Wire::OpenAi.stream("text", Split::Whole)
        }
    })
    .await
}

#[tokio::test]
async fn a_retry_wait_is_a_notice_for_clients_that_take_notices() {
    let server = flaky_server().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    initialize_with(&mut agent, json!({"notices": {}})).await;
    let session = agent.new_session().await;
    let (seen, response) = agent.prompt(&session, "hi").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let notices = updates(&seen, &session, "notice");
    assert_eq!(notices.len(), 1, "{seen:?}");
    assert_eq!(notices[0]["severity"], "warning");
    assert!(
        notices[0]["title"].as_str().unwrap().contains("retrying"),
        "{}",
        notices[0]
    );
    assert!(
        notices[0]["description"]
            .as_str()
            .unwrap()
            .contains("HTTP 503"),
        "{}",
        notices[0]
    );
    assert!(!thought_text(&seen, &session).contains("retrying"));
}

#[tokio::test]
async fn without_the_capability_the_retry_is_a_thought() {
    let server = flaky_server().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    initialize_with(&mut agent, json!({})).await;
    let session = agent.new_session().await;
    let (seen, _) = agent.prompt(&session, "hi").await;
    assert!(updates(&seen, &session, "notice").is_empty());
    assert!(thought_text(&seen, &session).contains("retrying in"));
}

#[tokio::test]
async fn compact_reports_its_start_streamed_summary_and_end() {
    let server = LlmServer::start(talkative_model(40)).await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), 32_768, "")).await;
    initialize_with(&mut agent, json!({"compaction": {}})).await;
    let session = agent.new_session().await;
    for n in 0..3 {
        agent.prompt(&session, &format!("question {n}")).await;
    }
    let (seen, _) = agent.prompt(&session, "/compact").await;
    let steps: Vec<Value> = seen
        .iter()
        .map(|m| m["params"]["update"].clone())
        .filter(|u| {
            u["sessionUpdate"]
                .as_str()
                .is_some_and(|kind| kind.starts_with("compaction_"))
        })
        .collect();
    assert!(steps.len() >= 3, "{steps:?}");
    let id = &steps[0]["compactionId"];
    assert!(steps.iter().all(|s| &s["compactionId"] == id), "{steps:?}");
    assert_eq!(steps[0]["sessionUpdate"], "compaction_update");
    assert_eq!(steps[0]["status"], "in_progress");
    let summary: String = steps
        .iter()
        .filter(|s| s["sessionUpdate"] == "compaction_summary_chunk")
        .map(|s| s["content"]["text"].as_str().unwrap().to_string())
        .collect();
    assert!(summary.contains("the user asked questions"), "{summary}");
    let last = steps.last().unwrap();
    assert_eq!(last["sessionUpdate"], "compaction_update");
    assert_eq!(last["status"], "completed");
    // The command still answers with its report.
    assert!(agent_text(&seen, &session).contains("Summarized"));
}

#[tokio::test]
async fn clients_without_compaction_updates_see_none() {
    let server = LlmServer::start(talkative_model(40)).await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), 32_768, "")).await;
    initialize_with(&mut agent, json!({})).await;
    let session = agent.new_session().await;
    for n in 0..3 {
        agent.prompt(&session, &format!("question {n}")).await;
    }
    let (seen, _) = agent.prompt(&session, "/compact").await;
    assert!(
        !seen.iter().any(|m| m["params"]["update"]["sessionUpdate"]
            .as_str()
            .is_some_and(|k| k.starts_with("compaction_"))),
        "{seen:?}"
    );
    assert!(agent_text(&seen, &session).contains("Summarized"));
}
