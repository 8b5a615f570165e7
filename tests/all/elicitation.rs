//! Elicitation (ACP `elicitation/create`, form mode): the `ask_user` tool
//! and the `/model` and `/agent` pickers, for clients that show forms; the
//! tool is not offered to the others.

use serde_json::{Value, json};

use crate::support::harness::{Agent, LlmServer, agent_text, config_for, scripted_model};

/// Wait for the agent's `elicitation/create`, answer it with `answer`;
/// returns the request.
async fn answer_question(agent: &mut Agent, answer: Value) -> Value {
    let request = agent
        .wait_for(|m| m["method"] == "elicitation/create")
        .await;
    agent
        .send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": answer}))
        .await;
    request
}

fn offered_tools(server: &LlmServer) -> Vec<String> {
    server.chat_requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn the_model_asks_and_the_users_pick_reaches_it() {
    let server = LlmServer::start(scripted_model(vec![(
        "ask_user",
        json!({"question": "Which colour?", "choices": ["red", "blue"]}),
    )]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    agent.initialize_with_forms().await;
    let session = agent.new_session().await;
    let prompt = agent.start_prompt(&session, "paint it").await;
    let request = answer_question(
        &mut agent,
        json!({"action": "accept", "content": {"answer": "blue"}}),
    )
    .await;
    let params = &request["params"];
    assert_eq!(params["mode"], "form", "{params}");
    assert_eq!(params["sessionId"], session.as_str(), "{params}");
    assert_eq!(params["message"], "Which colour?");
    let field = &params["requestedSchema"]["properties"]["answer"];
    assert_eq!(
        field["oneOf"],
        json!([{"const": "red", "title": "red"}, {"const": "blue", "title": "blue"}]),
        "{field}"
    );
    let (seen, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        agent_text(&seen, &session).contains("The user answered: blue"),
        "{seen:?}"
    );
    assert!(offered_tools(&server).contains(&"ask_user".to_string()));
}

#[tokio::test]
async fn without_forms_the_tool_is_not_offered() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    agent.prompt(&session, "hi").await;
    let tools = offered_tools(&server);
    assert!(tools.contains(&"read_file".to_string()), "{tools:?}");
    assert!(!tools.contains(&"ask_user".to_string()), "{tools:?}");
}

#[tokio::test]
async fn model_without_a_name_asks_which_and_switches() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    agent.initialize_with_forms().await;
    let session = agent.new_session().await;
    let prompt = agent.start_prompt(&session, "/model").await;
    let request = answer_question(
        &mut agent,
        json!({"action": "accept", "content": {"answer": "other-model"}}),
    )
    .await;
    let choices = &request["params"]["requestedSchema"]["properties"]["answer"]["oneOf"];
    assert!(
        choices
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["const"] == "test-model"),
        "{choices}"
    );
    let (seen, _) = agent.response(prompt).await;
    assert!(
        agent_text(&seen, &session).contains("model is now `other-model`"),
        "{seen:?}"
    );
    agent.prompt(&session, "hi").await;
    let last = server.chat_requests().pop().unwrap();
    assert_eq!(last.body["model"], "other-model");

    // Dismissed: nothing changes.
    let prompt = agent.start_prompt(&session, "/agent").await;
    answer_question(&mut agent, json!({"action": "cancel"})).await;
    let (seen, _) = agent.response(prompt).await;
    assert!(
        agent_text(&seen, &session).contains("Nothing changed"),
        "{seen:?}"
    );
}
