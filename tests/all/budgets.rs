//! Budgets through the binary: a turn past `max_turn_tokens` ends with
//! `max_tokens`; past `max_session_tokens` the next prompt stops at once
//! in a client without forms, and asks first in one with them; `/budget`
//! changes a limit and `/context` shows the spend.

use serde_json::{Value, json};

use crate::support::harness::{Agent, LlmServer, agent_text, config_for, scripted_model};

/// Each tool call the scripted model makes reports 60 tokens.
fn model() -> impl Fn(&crate::support::harness::Recorded) -> crate::support::harness::Reply {
    scripted_model(vec![
        ("list_dir", json!({"path": "."})),
        ("list_dir", json!({"path": "."})),
        ("list_dir", json!({"path": "."})),
        ("list_dir", json!({"path": "."})),
    ])
}

fn config(server: &LlmServer, budgets: &str) -> String {
    format!(
        "{}\n[agent]\ndefault_mode = \"auto\"\n{budgets}\n",
        config_for(server, "test-model")
    )
}

async fn prompt(agent: &mut Agent, session: &str, text: &str) -> (String, Value) {
    let (seen, response) = agent.prompt(session, text).await;
    (
        agent_text(&seen, session),
        response["result"]["stopReason"].clone(),
    )
}

#[tokio::test]
async fn a_turn_past_its_token_budget_ends_with_max_tokens() {
    let server = LlmServer::start(model()).await;
    let mut agent = Agent::spawn(&config(&server, "max_turn_tokens = 100")).await;
    let session = agent.start_session().await;
    let (text, stop) = prompt(&mut agent, &session, "look around").await;
    assert_eq!(stop, "max_tokens", "{text}");
    assert!(text.contains("This turn has used 120 tokens"), "{text}");
    assert!(text.contains("max_turn_tokens"), "{text}");
    assert_eq!(server.chat_requests().len(), 2);
    // The turn's budget is per turn: the next one runs.
    let (_, stop) = prompt(&mut agent, &session, "again").await;
    assert_eq!(stop, "max_tokens");
    assert_eq!(server.chat_requests().len(), 4);
    let (context, _) = prompt(&mut agent, &session, "/context").await;
    assert!(context.contains("last turn: 120 / 100 tokens"), "{context}");
    assert!(context.contains("session: 240 tokens"), "{context}");
}

#[tokio::test]
async fn past_the_session_budget_a_scripted_client_is_stopped_until_it_is_raised() {
    let server = LlmServer::start(model()).await;
    let mut agent = Agent::spawn(&config(&server, "max_session_tokens = 100")).await;
    let session = agent.start_session().await;
    let (text, stop) = prompt(&mut agent, &session, "look around").await;
    assert_eq!(stop, "max_tokens", "{text}");
    assert!(text.contains("max_session_tokens"), "{text}");
    let (text, stop) = prompt(&mut agent, &session, "more please").await;
    assert_eq!(stop, "max_tokens", "{text}");
    assert!(text.contains("Stopped before calling the model"), "{text}");
    assert_eq!(server.chat_requests().len(), 2, "no model call");
    let (budget, _) = prompt(&mut agent, &session, "/budget session_tokens 1000").await;
    assert!(budget.contains("session: 120 / 1000 tokens"), "{budget}");
    let (_, stop) = prompt(&mut agent, &session, "go on").await;
    assert_eq!(stop, "end_turn");
}

#[tokio::test]
async fn past_the_session_budget_a_client_with_forms_is_asked_first() {
    let server = LlmServer::start(model()).await;
    let mut agent = Agent::spawn(&config(&server, "max_session_tokens = 100")).await;
    agent.initialize_with_forms().await;
    let session = agent.new_session().await;
    let (_, stop) = prompt(&mut agent, &session, "look around").await;
    assert_eq!(stop, "max_tokens");
    // Declined: stopped without a model call.
    let asked = agent.start_prompt(&session, "more").await;
    let question = agent
        .wait_for(|m| m["method"] == "elicitation/create")
        .await;
    assert!(
        question["params"]["message"]
            .as_str()
            .unwrap()
            .contains("max_session_tokens"),
        "{question}"
    );
    agent
        .send(&json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}}))
        .await;
    let (_, response) = agent.response(asked).await;
    assert_eq!(response["result"]["stopReason"], "max_tokens");
    assert_eq!(server.chat_requests().len(), 2);
    // Let go on: the prompt runs (the session's limit is lifted for it).
    let asked = agent.start_prompt(&session, "more").await;
    let question = agent
        .wait_for(|m| m["method"] == "elicitation/create")
        .await;
    let choice = question["params"]["requestedSchema"]["properties"]
        .as_object()
        .and_then(|p| p.keys().next().cloned())
        .unwrap();
    agent
        .send(&json!({"jsonrpc": "2.0", "id": question["id"],
            "result": {"action": "accept", "content": {choice: "go_on"}}}))
        .await;
    let (_, response) = agent.response(asked).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(server.chat_requests().len() > 2);
}

#[tokio::test]
async fn an_answer_that_crosses_the_turn_budget_ends_with_max_tokens() {
    // No tool calls: one answer of 65 tokens.
    let server = LlmServer::start(scripted_model(Vec::new())).await;
    let mut agent = Agent::spawn(&config(&server, "max_turn_tokens = 50")).await;
    let session = agent.start_session().await;
    let (text, stop) = prompt(&mut agent, &session, "hello").await;
    assert_eq!(stop, "max_tokens", "{text}");
    assert!(text.starts_with("Done."), "the answer is kept: {text}");
    assert!(text.contains("This turn has used 65 tokens"), "{text}");
}

#[tokio::test]
async fn the_session_budget_and_its_spend_survive_a_restart() {
    let server = LlmServer::start(model()).await;
    let config = config(&server, "");
    let mut first = Agent::spawn(&config).await;
    let session = first.start_session().await;
    let (set, _) = prompt(&mut first, &session, "/budget session_tokens 100").await;
    assert!(set.contains("`max_session_tokens` is now `100`"), "{set}");
    let (_, stop) = prompt(&mut first, &session, "look around").await;
    assert_eq!(stop, "max_tokens");
    first.close_stdin();
    first.wait_exit().await;

    let mut second = Agent::spawn_sharing(&config, &first).await;
    second.initialize().await;
    let (_, loaded) = second.load(&session, first.cwd()).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let (text, stop) = prompt(&mut second, &session, "more").await;
    assert_eq!(stop, "max_tokens", "{text}");
    assert!(text.contains("This session has used 120 tokens"), "{text}");
    assert_eq!(server.chat_requests().len(), 2);
}
