//! Rate limits and outages never strand a session (issue 18, item 2): a
//! long rate-limit wait is told and sat out (or cancelled), and a provider
//! that keeps failing hands the turn to the next of its fallback chain.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::harness::{
    Agent, LlmServer, Reply, Split, agent_text, config_for, models_reply, text_stream,
    thought_text, updates,
};

/// A 429 naming its reset (OpenAI's headers, a wait past the backoff
/// limit), then answers.
fn limited_then_answering(
    reset: &'static str,
    times: Arc<Mutex<Vec<Instant>>>,
) -> impl Fn(&crate::support::harness::Recorded) -> Reply {
    move |request| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model"]);
        }
        let mut times = times.lock().unwrap();
        times.push(Instant::now());
        if times.len() == 1 {
            return Reply::Full {
                status: 429,
                content_type: "application/json",
                body: json!({"error": {"message": "Rate limit reached for requests", "type": "requests"}})
                    .to_string(),
                headers: vec![
                    ("x-ratelimit-reset-requests".into(), reset.into()),
                    ("x-ratelimit-remaining-requests".into(), "0".into()),
                ],
            };
        }
        Reply::stream(text_stream(&["after ", "the wait"]), Split::Whole)
    }
}

/// Backoff waits stop at 1 s, so a 3 s reset is a rate-limit wait.
fn limited_config(server: &LlmServer) -> String {
    format!(
        "{}retry_max_delay_secs = 1\nmax_wait_secs = 60\n",
        config_for(server, "test-model")
    )
}

#[tokio::test]
async fn a_429_with_a_3_s_reset_is_told_waited_for_and_retried() {
    let times = Arc::new(Mutex::new(Vec::new()));
    let server = LlmServer::start(limited_then_answering("3s", Arc::clone(&times))).await;
    let mut agent = Agent::spawn(&limited_config(&server)).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "hello").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let thoughts = thought_text(&seen, &session);
    assert!(
        thoughts.contains("is rate limited until ")
            && thoughts.contains("waiting (cancel to stop)"),
        "{thoughts}"
    );
    assert_eq!(agent_text(&seen, &session), "after the wait");
    let times = times.lock().unwrap();
    assert_eq!(times.len(), 2);
    assert!(
        times[1] - times[0] >= Duration::from_millis(2500),
        "retried after {:?}",
        times[1] - times[0]
    );
}

#[tokio::test]
async fn cancel_ends_a_rate_limit_wait_at_once() {
    let times = Arc::new(Mutex::new(Vec::new()));
    let server = LlmServer::start(limited_then_answering("45s", Arc::clone(&times))).await;
    let mut agent = Agent::spawn(&limited_config(&server)).await;
    let session = agent.start_session().await;
    let id = agent.start_prompt(&session, "hello").await;
    let notice = agent.wait_for_update("agent_thought_chunk").await;
    let text = notice["params"]["update"]["content"]["text"].to_string();
    assert!(text.contains("rate limited until"), "{text}");
    let cancelled_at = Instant::now();
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (_, response) = agent.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert!(cancelled_at.elapsed() < Duration::from_secs(20));
    assert_eq!(times.lock().unwrap().len(), 1, "no retry after the cancel");
}

#[tokio::test]
async fn a_provider_in_an_outage_hands_the_turn_to_its_fallback() {
    let primary = LlmServer::start(|request| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model"]);
        }
        Reply::json(503, json!({"error": {"message": "upstream overloaded"}}))
    })
    .await;
    let backup = LlmServer::start(|request| {
        if request.path.ends_with("/models") {
            return models_reply(&["backup-model"]);
        }
        Reply::stream(text_stream(&["the backup ", "answers"]), Split::Whole)
    })
    .await;
    let config = format!(
        "{}max_retries = 1\nfallback = [\"backup\"]\n\n[llm.providers.backup]\ntype = \"openai\"\nendpoint = \"{}\"\ndefault_model = \"backup-model\"\n",
        config_for(&primary, "test-model"),
        backup.base_url()
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "hello").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(agent_text(&seen, &session), "the backup answers");
    let thoughts = thought_text(&seen, &session);
    assert!(
        thoughts.contains("Provider `local` failed")
            && thoughts.contains("503")
            && thoughts.contains("Continuing this turn with `backup` (model `backup-model`)"),
        "{thoughts}"
    );
    assert_eq!(primary.chat_requests().len(), 2, "one try and one retry");
    let asked = backup.chat_requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].body["model"], "backup-model");
    assert_eq!(asked[0].last_user_text(), "hello");
    // The session moved, and the client's selectors say so.
    let options = updates(&seen, &session, "config_option_update");
    let provider = options
        .last()
        .and_then(|update| update["configOptions"].as_array())
        .and_then(|all| all.iter().find(|o| o["id"] == "provider").cloned())
        .unwrap_or_else(|| panic!("no provider option in {options:?}"));
    assert_eq!(provider["currentValue"], "backup", "{provider}");
    let (_, again) = agent.prompt(&session, "and again").await;
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again}");
    assert_eq!(primary.chat_requests().len(), 2);
    assert_eq!(backup.chat_requests().len(), 2);
}

#[tokio::test]
async fn a_fallback_naming_no_provider_is_a_config_error() {
    let server = LlmServer::start(|_| models_reply(&["m"])).await;
    let config = format!("{}fallback = [\"nowhere\"]\n", config_for(&server, "m"));
    let mut agent = Agent::spawn(&config).await;
    agent.initialize().await;
    let (_, response) = agent
        .call("session/new", json!({"cwd": agent.cwd(), "mcpServers": []}))
        .await;
    let message = response["error"]["message"].to_string();
    assert!(
        message.contains("llm.providers.local.fallback")
            && message.contains("nowhere")
            && message.contains("config.toml"),
        "{response}"
    );
}
