//! The plan the model writes in plan mode (`write_plan`): a Markdown plan
//! of its own (`planId` `plan`, beside the todo list's `todos`) for clients
//! that declare `plan`, saved as `plan.md` in the session's directory with
//! its `path`, replaced whole by each write, shown again by a load, and
//! removed (`plan_removed`) by an empty write or `/clear`. Clients without
//! `plan` see only the call, whose content is the Markdown.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::context::tool_names;
use crate::support::harness::{Agent, LlmServer, config_for, scripted_model, tool_updates};
use crate::support::wait::wait_until;

const FIRST: &str = "# Plan\n\n1. Read `src/lib.rs`\n2. Fix the parser\n";
const SECOND: &str = "# Plan\n\n1. Read `src/lib.rs`\n2. Fix the parser\n3. Add a test\n";

async fn init(agent: &mut Agent, capabilities: Value) {
    let (_, response) = agent
        .call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities,
                "clientInfo": {"name": "markdown-plans", "version": "0"}}),
        )
        .await;
    assert!(response["result"].is_object(), "{response}");
}

/// A new session, switched to plan mode.
async fn plan_session(agent: &mut Agent) -> String {
    let session = agent.new_session().await;
    let (_, switched) = agent
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "plan"}),
        )
        .await;
    assert!(switched["result"].is_object(), "{switched}");
    session
}

/// The `plan_update`s and `plan_removed`s seen, as (kind, planId).
fn plan_kinds(seen: &[Value]) -> Vec<(String, String)> {
    seen.iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "plan_update" || u["sessionUpdate"] == "plan_removed")
        .map(|u| {
            let id = u["plan"]["planId"].as_str().or(u["planId"].as_str());
            (
                u["sessionUpdate"].as_str().unwrap_or_default().to_string(),
                id.unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn markdown_updates(seen: &[Value]) -> Vec<&Value> {
    tool_updates(seen, "plan_update")
        .into_iter()
        .filter(|u| u["plan"]["planId"] == "plan")
        .collect()
}

/// The names of the tools the model was offered in the `n`-th request.
fn offered(server: &LlmServer, n: usize) -> Vec<String> {
    tool_names(&server.chat_requests()[n])
}

#[tokio::test]
async fn a_plan_client_gets_the_markdown_plan_with_its_file_beside_the_todo_list_and_again_on_load()
{
    let server = LlmServer::start(scripted_model(vec![
        ("write_plan", json!({"markdown": FIRST})),
        (
            "todo",
            json!({"todos": [{"content": "Fix the parser", "status": "pending"}]}),
        ),
        ("write_plan", json!({"markdown": SECOND})),
    ]))
    .await;
    let config = config_for(&server, "test-model");
    let mut agent = Agent::spawn(&config).await;
    init(&mut agent, json!({"plan": {}})).await;
    let session = plan_session(&mut agent).await;
    let (seen, answer) = agent.prompt(&session, "plan the fix").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(offered(&server, 0).contains(&"write_plan".to_string()));
    assert_eq!(
        plan_kinds(&seen),
        [
            ("plan_update".to_string(), "plan".to_string()),
            ("plan_update".to_string(), "todos".to_string()),
            ("plan_update".to_string(), "plan".to_string()),
        ],
        "{seen:?}"
    );
    let plans = markdown_updates(&seen);
    assert_eq!(plans[0]["plan"]["type"], "markdown", "{}", plans[0]);
    assert_eq!(plans[0]["plan"]["content"], FIRST, "{}", plans[0]);
    assert_eq!(plans[1]["plan"]["content"], SECOND, "{}", plans[1]);
    let path = PathBuf::from(plans[1]["plan"]["path"].as_str().unwrap_or_default());
    assert_eq!(plans[0]["plan"]["path"], plans[1]["plan"]["path"]);
    assert!(path.is_absolute(), "{}", path.display());
    assert!(
        path.starts_with(agent.session_dir(&session)),
        "the plan is kept with the session, not in the project: {}",
        path.display()
    );
    // The second write replaced the first.
    assert_eq!(std::fs::read_to_string(&path).unwrap(), SECOND);
    // Nothing was written into the project (the agent's config and data
    // dir are all the harness put there).
    let mut project: Vec<String> = std::fs::read_dir(agent.cwd())
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    project.sort();
    assert_eq!(project, ["config.toml", "data"]);
    // No old `plan` for the todo list either: this client takes plans by id.
    assert!(tool_updates(&seen, "plan").is_empty(), "{seen:?}");
    agent.close_stdin();
    agent.wait_exit().await;

    // A load (another process) shows both plans again, under their ids,
    // the Markdown one read back from its file.
    let mut again = Agent::spawn_sharing(&config, &agent).await;
    init(&mut again, json!({"plan": {}})).await;
    let (replay, loaded) = again.load(&session, agent.cwd()).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    let kinds = plan_kinds(&replay);
    assert!(
        kinds.contains(&("plan_update".to_string(), "todos".to_string())),
        "{replay:?}"
    );
    let plans = markdown_updates(&replay);
    assert_eq!(plans.len(), 1, "{replay:?}");
    assert_eq!(plans[0]["plan"]["content"], SECOND, "{}", plans[0]);
    // The same file, seen through this process's data dir (a symlink to
    // the first one's).
    let reloaded = PathBuf::from(plans[0]["plan"]["path"].as_str().unwrap_or_default());
    assert!(reloaded.is_absolute(), "{}", reloaded.display());
    assert_eq!(
        std::fs::canonicalize(&reloaded).unwrap(),
        std::fs::canonicalize(&path).unwrap()
    );

    // `/clear` starts the conversation over: the plans go with it (the
    // todo list too, restored from the history by the load).
    let (cleared, _) = again.prompt(&session, "/clear").await;
    assert_eq!(
        plan_kinds(&cleared),
        [
            ("plan_removed".to_string(), "plan".to_string()),
            ("plan_removed".to_string(), "todos".to_string()),
        ],
        "{cleared:?}"
    );
    // The file goes in the session writer's order, at once but not
    // necessarily before the command's answer.
    wait_until("the plan file removed", || !path.exists()).await;
    assert!(!path.exists(), "{} is still there", path.display());
    again.close_stdin();
    again.wait_exit().await;
    let mut third = Agent::spawn_sharing(&config, &agent).await;
    init(&mut third, json!({"plan": {}})).await;
    let (replay, _) = third.load(&session, agent.cwd()).await;
    assert!(markdown_updates(&replay).is_empty(), "{replay:?}");
}

#[tokio::test]
async fn an_empty_plan_removes_it() {
    let server = LlmServer::start(scripted_model(vec![
        ("write_plan", json!({"markdown": FIRST})),
        ("write_plan", json!({"markdown": ""})),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    init(&mut agent, json!({"plan": {}})).await;
    let session = plan_session(&mut agent).await;
    let (seen, _) = agent.prompt(&session, "plan, then drop it").await;
    assert_eq!(
        plan_kinds(&seen),
        [
            ("plan_update".to_string(), "plan".to_string()),
            ("plan_removed".to_string(), "plan".to_string()),
        ],
        "{seen:?}"
    );
    assert!(!agent.session_dir(&session).join("plan.md").exists());
}

#[tokio::test]
async fn a_client_without_plan_reads_the_plan_in_the_call_and_gets_no_plan_update() {
    let server = LlmServer::start(scripted_model(vec![(
        "write_plan",
        json!({"markdown": FIRST}),
    )]))
    .await;
    let config = config_for(&server, "test-model");
    let mut agent = Agent::spawn(&config).await;
    init(&mut agent, json!({})).await;
    let session = plan_session(&mut agent).await;
    let (seen, _) = agent.prompt(&session, "plan the fix").await;
    let kinds: Vec<&str> = seen
        .iter()
        .filter_map(|m| m["params"]["update"]["sessionUpdate"].as_str())
        .filter(|kind| kind.starts_with("plan"))
        .collect();
    assert!(kinds.is_empty(), "{seen:?}");
    let done: Vec<&Value> = tool_updates(&seen, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "completed")
        .collect();
    assert_eq!(done.len(), 1, "{seen:?}");
    assert_eq!(
        done[0]["content"][0]["content"]["text"], FIRST,
        "{}",
        done[0]
    );
    // Saved all the same: a client that takes plans sees it on load.
    assert_eq!(
        std::fs::read_to_string(agent.session_dir(&session).join("plan.md")).unwrap(),
        FIRST
    );
    let (replay, _) = agent.load(&session, agent.cwd()).await;
    let kinds: Vec<&str> = replay
        .iter()
        .filter_map(|m| m["params"]["update"]["sessionUpdate"].as_str())
        .filter(|kind| kind.starts_with("plan"))
        .collect();
    assert!(kinds.is_empty(), "{replay:?}");
}

#[tokio::test]
async fn write_plan_is_offered_in_plan_mode_only() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    init(&mut agent, json!({"plan": {}})).await;
    let session = agent.new_session().await;
    agent.prompt(&session, "hello").await;
    let act = offered(&server, 0);
    assert!(act.contains(&"todo".to_string()), "{act:?}");
    assert!(!act.contains(&"write_plan".to_string()), "{act:?}");
    let (_, switched) = agent
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "plan"}),
        )
        .await;
    assert!(switched["result"].is_object(), "{switched}");
    agent.prompt(&session, "plan").await;
    let plan = offered(&server, 1);
    assert!(plan.contains(&"write_plan".to_string()), "{plan:?}");
    assert!(!plan.contains(&"write_file".to_string()), "{plan:?}");
    // The plan mode's prompt layer tells the model to use it.
    let system = &server.chat_requests()[1].body["messages"][0];
    assert_eq!(system["role"], "system", "{system}");
    let text = system["content"].as_str().unwrap_or_default();
    assert!(text.contains("`write_plan`"), "{text}");
}
