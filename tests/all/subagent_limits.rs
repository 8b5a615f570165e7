//! Delegation's limits from `[subagents]`, through the binary: how deep
//! children may delegate, how many one turn may start, the tokens one child
//! may use, and the children's tokens in the parent's usage; the parent's
//! sandbox a child's commands run in, and its way out asked through the
//! parent; then the tree
//! `sessions list` shows of a parent and its children.

use std::path::Path;

use serde_json::{Value, json};

use crate::subagents::{
    Step, delegate, delegate_updates, first_user_text, parent, routed, text_of, tool_results,
};
use crate::support::client::{respond_until, result_for};
use crate::support::harness::{self, Agent, LlmServer, Recorded, config_for, outside_temp_base};

/// The names of the tools a model request offered.
fn offered(request: &Recorded) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or_default().into())
                .collect()
        })
        .unwrap_or_default()
}

/// The model requests of the conversation whose first user message is `task`.
fn requests_of(server: &LlmServer, task: &str) -> Vec<Recorded> {
    server
        .chat_requests()
        .into_iter()
        .filter(|r| first_user_text(r) == task)
        .collect()
}

/// A parent that delegates to a coder, whose child tries to delegate to an
/// explorer; under `subagents` config.
async fn nested(subagents: &str) -> (LlmServer, Vec<Value>, Value) {
    let server = LlmServer::start(routed(vec![
        ("Go deep", parent(vec![delegate("coder", "Nest me")])),
        (
            "Nest me",
            vec![
                Step::Calls(vec![delegate("explorer", "Grandchild task")]),
                Step::Answer("child heard:"),
            ],
        ),
        ("Grandchild task", vec![Step::Answer("grand answer")]),
    ]))
    .await;
    let config = format!(
        "{}\n[subagents]\n{subagents}\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "Go deep").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    (server, seen, response)
}

#[tokio::test]
async fn by_default_a_child_cannot_delegate_and_is_told_so() {
    let (server, _, _) = nested("").await;
    let child = requests_of(&server, "Nest me");
    // The coder card has every tool, but not `delegate` at depth 1.
    let tools = offered(&child[0]);
    assert!(tools.iter().any(|t| t == "write_file"), "{tools:?}");
    assert!(!tools.iter().any(|t| t == "delegate"), "{tools:?}");
    // Its call anyway is refused, and no grandchild ever runs.
    let results = tool_results(&child[1]);
    assert!(
        results[0].contains("no tool named `delegate`"),
        "{results:?}"
    );
    assert!(requests_of(&server, "Grandchild task").is_empty());
}

#[tokio::test]
async fn a_configured_depth_of_two_lets_a_child_delegate_once_more() {
    let (server, seen, _) = nested("max_depth = 2").await;
    let child = requests_of(&server, "Nest me");
    assert!(offered(&child[0]).iter().any(|t| t == "delegate"));
    // The grandchild ran, without `delegate` of its own, and its answer
    // went up through the child to the parent.
    let grandchild = requests_of(&server, "Grandchild task");
    assert_eq!(grandchild.len(), 1);
    assert!(!offered(&grandchild[0]).iter().any(|t| t == "delegate"));
    let parent_last = requests_of(&server, "Go deep").pop().unwrap();
    let results = tool_results(&parent_last);
    assert!(
        results[0].contains("child heard:") && results[0].contains("grand answer"),
        "{results:?}"
    );
    // The editor saw the child's own delegation in its summary.
    let running: Vec<String> = delegate_updates(&seen).into_iter().map(text_of).collect();
    assert!(
        running
            .iter()
            .any(|t| t.contains("Delegate to explorer: Grandchild task")),
        "{running:?}"
    );
}

#[tokio::test]
async fn a_delegation_over_the_turns_limit_fails_with_the_reason_for_the_model() {
    let server = LlmServer::start(routed(vec![
        (
            "Two jobs",
            parent(vec![
                delegate("explorer", "First job"),
                delegate("explorer", "Second job"),
            ]),
        ),
        ("First job", vec![Step::Answer("first done")]),
        ("Second job", vec![Step::Answer("second done")]),
    ]))
    .await;
    let config = format!(
        "{}\n[subagents]\nmax_per_turn = 1\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "Two jobs").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // Both ran at once, so either may be the one refused.
    let results = tool_results(&requests_of(&server, "Two jobs").pop().unwrap());
    assert_eq!(results.len(), 2, "{results:?}");
    let (refused, answered): (Vec<&String>, Vec<&String>) =
        results.iter().partition(|r| r.starts_with("Error:"));
    assert_eq!(refused.len(), 1, "{results:?}");
    assert!(
        refused[0].contains("already started 1 agents") && refused[0].contains("max_per_turn"),
        "{results:?}"
    );
    assert!(answered[0].contains("done"), "{results:?}");
    let children = server
        .chat_requests()
        .iter()
        .filter(|r| first_user_text(r).ends_with("job"))
        .count();
    assert_eq!(children, 1, "only one child called the model");
    let failed = delegate_updates(&seen)
        .into_iter()
        .filter(|u| u["status"] == "failed")
        .count();
    assert_eq!(failed, 1, "{seen:?}");
}

#[tokio::test]
async fn a_child_over_its_token_budget_is_stopped_and_the_call_says_why() {
    let server = LlmServer::start(routed(vec![
        (
            "Spend it",
            parent(vec![delegate("explorer", "Big spender")]),
        ),
        (
            "Big spender",
            vec![
                // 60 tokens, over the budget of 30: the child stops here.
                Step::Calls(vec![("list_dir", json!({"path": "."}))]),
                Step::Answer("never reached"),
            ],
        ),
    ]))
    .await;
    let config = format!(
        "{}\n[subagents]\ntoken_budget = 30\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "Spend it").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(requests_of(&server, "Big spender").len(), 1);
    let results = tool_results(&requests_of(&server, "Spend it").pop().unwrap());
    assert!(
        results[0].starts_with("Error: the agent used more than its 30 tokens")
            && results[0].contains("token_budget"),
        "{results:?}"
    );
    let failed: Vec<String> = delegate_updates(&seen)
        .into_iter()
        .filter(|u| u["status"] == "failed")
        .map(text_of)
        .collect();
    assert_eq!(failed.len(), 1, "{seen:?}");
    assert!(failed[0].contains("30 tokens"), "{failed:?}");
}

#[tokio::test]
async fn the_childrens_tokens_count_in_the_parents_usage() {
    let server = LlmServer::start(routed(vec![
        (
            "Count us",
            parent(vec![
                delegate("explorer", "Task one"),
                delegate("explorer", "Task two"),
            ]),
        ),
        ("Task one", vec![Step::Answer("one")]),
        ("Task two", vec![Step::Answer("two")]),
    ]))
    .await;
    let config = format!(
        "{}\n[acp]\nunstable = [\"usage\"]\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (_, response) = agent.prompt(&session, "Count us").await;
    // The parent's calls: 50 + 10 (its delegations), 60 + 5 (its answer);
    // each child's answer: 60 + 5.
    let usage = &response["result"]["usage"];
    assert_eq!(usage["inputTokens"], 50 + 60 + 2 * 60, "{response}");
    assert_eq!(usage["outputTokens"], 10 + 5 + 2 * 5, "{response}");
    assert_eq!(usage["totalTokens"], 60 + 65 + 2 * 65, "{response}");
}

#[tokio::test]
async fn sessions_list_shows_each_parent_with_its_children_under_it() {
    let server = LlmServer::start(routed(vec![
        (
            "Delegating parent",
            parent(vec![
                delegate("explorer", "Child one"),
                delegate("reviewer", "Child two"),
            ]),
        ),
        ("Child one", vec![Step::Answer("one")]),
        ("Child two", vec![Step::Answer("two")]),
        ("Plain session", vec![Step::Answer("hello")]),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let plain = agent.start_session().await;
    agent.prompt(&plain, "Plain session").await;
    let parent_id = agent.start_session().await;
    agent.prompt(&parent_id, "Delegating parent").await;
    agent.close_stdin();
    agent.wait_exit().await;

    let output = tokio::process::Command::new(harness::agent_binary())
        .arg("--data-dir")
        .arg(agent.data_dir())
        .args(["sessions", "list"])
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let listing = String::from_utf8_lossy(&output.stdout).into_owned();
    let metadata = |id: &str| -> Value {
        let path = agent.session_dir(id).join("metadata.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let children: Vec<String> = metadata(&parent_id)["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    assert_eq!(children.len(), 2, "{listing}");
    // Each session's first line: its indent and its id, in listing order.
    let rows: Vec<(usize, &str)> = listing
        .lines()
        .filter_map(|line| {
            let id = line.split_whitespace().next()?;
            let known = id == plain || id == parent_id || children.iter().any(|c| c == id);
            known.then(|| (line.len() - line.trim_start().len(), id))
        })
        .collect();
    assert_eq!(rows.len(), 4, "{listing}");
    let at = rows.iter().position(|(_, id)| *id == parent_id).unwrap();
    assert_eq!(rows[at].0, 0, "{listing}");
    let under: Vec<(usize, &str)> = rows[at + 1..at + 3].to_vec();
    for child in &children {
        assert!(under.contains(&(2, child.as_str())), "{listing}");
    }
    assert!(rows.contains(&(0, plain.as_str())), "{listing}");
    // The children name their cards; the plain session names none.
    assert!(listing.contains("[explorer] Child one"), "{listing}");
    assert!(listing.contains("[reviewer] Child two"), "{listing}");
}

/// What a child's blocked command showed: the questions the editor was
/// asked (their session ids and titles), the child's tool results, and the
/// parent's.
struct Confined {
    parent: String,
    asked: Vec<(String, String)>,
    child_results: Vec<String>,
    parent_results: Vec<String>,
}

/// A parent in `auto` with the default sandbox delegates to a coder whose
/// model runs `command`; each escalation question is answered `answer`.
/// HOME and the project live outside every temp directory (which every
/// confined command may write to).
async fn child_runs(command: &'static str, home: &Path, answer: &str) -> Confined {
    let project = tempfile::tempdir_in(outside_temp_base()).unwrap();
    let server = LlmServer::start(routed(vec![
        ("Confine me", parent(vec![delegate("coder", "Go outside")])),
        (
            "Go outside",
            vec![
                Step::Calls(vec![("shell", json!({ "command": command }))]),
                Step::Answer("child saw:"),
            ],
        ),
    ]))
    .await;
    let config = format!(
        "{}\n[agent]\ndefault_mode = \"auto\"\n",
        config_for(&server, "test-model")
    );
    let home = home.to_str().unwrap();
    let mut agent = Agent::spawn_with(&config, &[], &[("HOME", home)]).await;
    agent.initialize().await;
    let (_, created) = agent
        .call(
            "session/new",
            json!({"cwd": project.path(), "mcpServers": []}),
        )
        .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    let prompt = agent
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "Confine me"}]}),
        )
        .await;
    let mut asked = Vec::new();
    let (_, response) = respond_until(&mut agent, prompt, |message| {
        if message["method"] != "session/request_permission" {
            return Vec::new();
        }
        let params = &message["params"];
        let title = params["toolCall"]["title"].as_str().unwrap_or_default();
        asked.push((params["sessionId"].to_string(), title.to_string()));
        let outcome = json!({"outcome": {"outcome": "selected", "optionId": answer}});
        vec![result_for(message, outcome)]
    })
    .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let last = |task| requests_of(&server, task).pop().unwrap();
    Confined {
        parent: json!(session).to_string(),
        asked,
        child_results: tool_results(&last("Go outside")),
        parent_results: tool_results(&last("Confine me")),
    }
}

#[tokio::test]
async fn a_child_works_in_its_parents_sandbox_and_asks_through_the_parent() {
    let home = tempfile::tempdir_in(outside_temp_base()).unwrap();
    let outside = home.path().join("outside");
    let run = child_runs("touch ~/outside", home.path(), "reject_once").await;
    assert!(!outside.exists(), "the child's command left the sandbox");
    let blocked = format!(
        "blocked by the workspace sandbox: writing {}",
        outside.display()
    );
    // The child's model read why, and so did the parent's, in its answer.
    assert_eq!(run.child_results.len(), 1, "{:?}", run.child_results);
    assert!(
        !run.child_results[0].starts_with("Exit code: 0")
            && run.child_results[0].contains(&blocked),
        "{:?}",
        run.child_results
    );
    assert!(
        run.parent_results[0].contains("child saw:") && run.parent_results[0].contains(&blocked),
        "{:?}",
        run.parent_results
    );
    // The one way out offered was asked under the parent's session.
    assert_eq!(run.asked.len(), 1, "{:?}", run.asked);
    let (session, title) = &run.asked[0];
    assert_eq!(session, &run.parent, "{:?}", run.asked);
    assert!(
        title.starts_with("Run outside the sandbox? Run `touch ~/outside`"),
        "{title}"
    );
}

#[tokio::test]
async fn a_childs_escalation_granted_through_the_parent_runs_outside_once() {
    let home = tempfile::tempdir_in(outside_temp_base()).unwrap();
    let run = child_runs("touch ~/granted", home.path(), "allow_once").await;
    assert_eq!(run.asked.len(), 1, "{:?}", run.asked);
    assert_eq!(run.asked[0].0, run.parent, "{:?}", run.asked);
    assert!(
        home.path().join("granted").exists(),
        "{:?}",
        run.child_results
    );
    assert!(
        run.child_results[0].starts_with("Exit code: 0"),
        "{:?}",
        run.child_results
    );
}

#[tokio::test]
async fn a_final_answer_over_the_budget_fails_the_call_too() {
    let server = LlmServer::start(routed(vec![
        (
            "Spend it late",
            parent(vec![delegate("explorer", "Late spender")]),
        ),
        (
            "Late spender",
            vec![
                // 60 tokens, under the budget of 100; then the answer's 65.
                Step::Calls(vec![("list_dir", json!({"path": "."}))]),
                Step::Answer("spent it all"),
            ],
        ),
    ]))
    .await;
    let config = format!(
        "{}\n[subagents]\ntoken_budget = 100\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "Spend it late").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(requests_of(&server, "Late spender").len(), 2);
    // The usage that went over ends the call (even the last one): the model
    // reads what the child said, but as a failure, not as finished work.
    let results = tool_results(&requests_of(&server, "Spend it late").pop().unwrap());
    assert!(
        results[0].starts_with("Error: the agent used more than its 100 tokens")
            && results[0].contains("What it said last: spent it all"),
        "{results:?}"
    );
    let failed = delegate_updates(&seen)
        .into_iter()
        .filter(|u| u["status"] == "failed")
        .count();
    assert_eq!(failed, 1, "{seen:?}");
}
