//! A model that makes the same call with the same arguments again and again
//! is stopped at the third: in `act` the user is asked whether to go on, in
//! `auto` the turn ends; either way the model reads why.

use serde_json::{Value, json};

use crate::support::harness::{
    Agent, LlmServer, agent_text, answer_permission, config_for, scripted_model,
};

/// The same `list_dir` call `times` times, then a text answer.
fn repeating(times: usize) -> Vec<(&'static str, Value)> {
    (0..times)
        .map(|_| ("list_dir", json!({"path": "."})))
        .collect()
}

/// The text of every tool result the model was sent.
fn tool_results(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn in_act_the_third_identical_call_asks_and_a_no_ends_the_turn() {
    let server = LlmServer::start(scripted_model(repeating(3))).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let prompt = agent.start_prompt(&session, "look around").await;
    let asked = answer_permission(&mut agent, "reject_once").await;
    let title = asked["params"]["toolCall"]["title"].as_str().unwrap_or("");
    assert!(title.contains("3 times in a row"), "{asked}");
    let (seen, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let text = agent_text(&seen, &session);
    assert!(text.contains("Stopped"), "{text}");
    assert!(text.contains("repeated_call_limit"), "{text}");
    // The first two ran; the third was never sent back to the model.
    assert_eq!(server.chat_requests().len(), 3);
    // The next request tells the model why its call did not run.
    let (_, again) = agent.prompt(&session, "and now?").await;
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again}");
    let requests = server.chat_requests();
    let results = tool_results(&requests[3].body);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results[2].contains("3 times in a row") && results[2].contains("user said to stop"),
        "{}",
        results[2]
    );
}

#[tokio::test]
async fn in_act_a_yes_lets_the_call_run_and_the_turn_go_on() {
    let server = LlmServer::start(scripted_model(repeating(3))).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let prompt = agent.start_prompt(&session, "look around").await;
    answer_permission(&mut agent, "allow_once").await;
    let (_, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // All three ran, and the model answered after the third.
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 4);
    let results = tool_results(&requests[3].body);
    assert_eq!(results.len(), 3);
    assert!(
        results.iter().all(|r| !r.contains("in a row")),
        "{results:?}"
    );
}

#[tokio::test]
async fn in_auto_an_endless_identical_call_ends_the_turn_without_asking() {
    let server = LlmServer::start(scripted_model(repeating(20))).await;
    let config = format!(
        "{}\n[agent]\ndefault_mode = \"auto\"\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "look around").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        !seen
            .iter()
            .any(|m| m["method"] == "session/request_permission"),
        "nobody is asked in auto"
    );
    let text = agent_text(&seen, &session);
    assert!(text.contains("3 times in a row"), "{text}");
    assert!(text.contains("auto"), "{text}");
    assert_eq!(server.chat_requests().len(), 3);
}

#[tokio::test]
async fn the_limit_is_configurable_and_zero_turns_it_off() {
    let server = LlmServer::start(scripted_model(repeating(5))).await;
    let config = format!(
        "{}\n[agent]\ndefault_mode = \"auto\"\nrepeated_call_limit = 0\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (_, response) = agent.prompt(&session, "look around").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // All five ran, then the text answer.
    assert_eq!(server.chat_requests().len(), 6);
}
