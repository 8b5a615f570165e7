//! The todo list (the `todo` tool's plan, `planId` `todos` for clients that
//! declare `plan`, the old `plan` update for the others) outlives the
//! process: a load or resume puts it back into the session's state, as a
//! live session has it, and `/clear` (or `/context reset`) empties it as
//! the tool empties it: `plan_removed` for `todos`, or an empty `plan`. A
//! fork (unstable) starts with its source's list.

use serde_json::{Value, json};

use crate::support::harness::{Agent, LlmServer, config_for, scripted_model, tool_updates};

async fn init(agent: &mut Agent, capabilities: Value) {
    let (_, response) = agent
        .call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities,
                "clientInfo": {"name": "todo-plans", "version": "0"}}),
        )
        .await;
    assert!(response["result"].is_object(), "{response}");
}

/// The todo list's updates seen, as the client takes them: `plan_update`
/// with its entries' texts, or `plan_removed`.
fn todo_plans(seen: &[Value]) -> Vec<(String, Vec<String>)> {
    seen.iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["plan"]["planId"] == "todos" || u["planId"] == "todos")
        .map(|u| {
            let entries = u["plan"]["items"].as_array().cloned().unwrap_or_default();
            (
                u["sessionUpdate"].as_str().unwrap_or_default().to_string(),
                entries
                    .iter()
                    .map(|e| e["content"].as_str().unwrap_or_default().to_string())
                    .collect(),
            )
        })
        .collect()
}

fn removed() -> (String, Vec<String>) {
    ("plan_removed".to_string(), Vec::new())
}

/// A session whose model set a two-item todo list, in a process now gone.
async fn session_with_todos(config: &str, capabilities: Value) -> (Agent, String) {
    let mut agent = Agent::spawn(config).await;
    init(&mut agent, capabilities).await;
    let session = agent.new_session().await;
    let (_, answer) = agent.prompt(&session, "plan the fix").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    agent.close_stdin();
    assert!(agent.wait_exit().await.success());
    (agent, session)
}

fn two_items() -> Value {
    json!({"todos": [
        {"content": "Read the parser", "status": "in_progress"},
        {"content": "Fix the parser", "status": "pending"},
    ]})
}

#[tokio::test]
async fn a_resumed_session_has_its_todo_list_and_clear_removes_it_for_good() {
    let server = LlmServer::start(scripted_model(vec![("todo", two_items())])).await;
    let config = config_for(&server, "test-model");
    let (first, session) = session_with_todos(&config, json!({"plan": {}})).await;

    // A resume replays nothing: what `/clear` removes is the list the
    // session got back from its history (before, a restarted session had
    // none, and `/clear` left the editor's list standing).
    let mut second = Agent::spawn_sharing(&config, &first).await;
    init(&mut second, json!({"plan": {}})).await;
    let (seen, resumed) = second
        .call(
            "session/resume",
            json!({"sessionId": session, "cwd": first.cwd()}),
        )
        .await;
    assert!(resumed["result"].is_object(), "{resumed}");
    assert!(todo_plans(&seen).is_empty(), "{seen:?}");
    let (cleared, _) = second.prompt(&session, "/clear").await;
    assert_eq!(todo_plans(&cleared), [removed()], "{cleared:?}");
    // Nothing left to remove the second time.
    let (again, _) = second.prompt(&session, "/context reset").await;
    assert!(todo_plans(&again).is_empty(), "{again:?}");
    second.close_stdin();
    assert!(second.wait_exit().await.success());

    // A later load ends with no todo list (the one the model set is shown,
    // then its removal, as the client saw them) and has none to remove.
    let mut third = Agent::spawn_sharing(&config, &first).await;
    init(&mut third, json!({"plan": {}})).await;
    let (replay, loaded) = third.load(&session, first.cwd()).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    let shown = todo_plans(&replay);
    assert_eq!(shown.last(), Some(&removed()), "{replay:?}");
    let (cleared, _) = third.prompt(&session, "/clear").await;
    assert!(todo_plans(&cleared).is_empty(), "{cleared:?}");
}

#[tokio::test]
async fn a_loaded_session_clears_its_todo_list_for_a_client_without_plan_with_an_empty_plan() {
    let server = LlmServer::start(scripted_model(vec![("todo", two_items())])).await;
    let config = config_for(&server, "test-model");
    let (first, session) = session_with_todos(&config, json!({})).await;

    let mut second = Agent::spawn_sharing(&config, &first).await;
    init(&mut second, json!({})).await;
    let (replay, loaded) = second.load(&session, first.cwd()).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    let plans = tool_updates(&replay, "plan");
    assert_eq!(plans.len(), 1, "{replay:?}");
    assert_eq!(plans[0]["entries"].as_array().map(Vec::len), Some(2));
    // An emptied list, as the `todo` tool shows one to this client.
    let (cleared, _) = second.prompt(&session, "/clear").await;
    let plans = tool_updates(&cleared, "plan");
    assert_eq!(plans.len(), 1, "{cleared:?}");
    assert_eq!(plans[0]["entries"], json!([]), "{}", plans[0]);
    assert!(todo_plans(&cleared).is_empty(), "{cleared:?}");
}

#[tokio::test]
async fn clear_in_a_session_without_a_todo_list_says_nothing_about_one() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    init(&mut agent, json!({"plan": {}})).await;
    let session = agent.new_session().await;
    agent.prompt(&session, "hello").await;
    let (cleared, _) = agent.prompt(&session, "/clear").await;
    let plans: Vec<&str> = cleared
        .iter()
        .filter_map(|m| m["params"]["update"]["sessionUpdate"].as_str())
        .filter(|kind| kind.starts_with("plan"))
        .collect();
    assert!(plans.is_empty(), "{cleared:?}");
}

#[tokio::test]
async fn a_fork_has_the_todo_list_its_source_had() {
    let server = LlmServer::start(scripted_model(vec![("todo", two_items())])).await;
    let config = format!(
        "{}\n[acp]\nunstable = [\"fork\"]\n",
        config_for(&server, "test-model")
    );
    let (first, session) = session_with_todos(&config, json!({"plan": {}})).await;

    let mut second = Agent::spawn_sharing(&config, &first).await;
    init(&mut second, json!({"plan": {}})).await;
    let (_, forked) = second
        .call(
            "session/fork",
            json!({"sessionId": session, "cwd": first.cwd(), "mcpServers": []}),
        )
        .await;
    let fork = forked["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{forked}"))
        .to_string();
    let (cleared, _) = second.prompt(&fork, "/clear").await;
    assert_eq!(todo_plans(&cleared), [removed()], "{cleared:?}");
}
