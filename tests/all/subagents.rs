//! Delegation through the binary: the parent's model calls `delegate`,
//! each child is a session of its own talking to the same scripted model
//! server (requests are routed by their first user message, which for a
//! child is its task), and the editor sees the children's work as the
//! running summary of the parent's call.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::harness::{
    Agent, LlmServer, Recorded, Reply, Split, agent_text, answer_permission, config_for,
    conversation, echo_mcp_server, models_reply, openai_stream, stream_head, tool_updates,
};
use crate::support::wait::wait_until;

/// One model answer of a scripted conversation.
#[derive(Clone)]
pub(crate) enum Step {
    /// Tool calls, all in one answer.
    Calls(Vec<(&'static str, Value)>),
    /// Text, followed by every tool result the request carries.
    Answer(&'static str),
    /// The first answer is held until another conversation's request
    /// arrives (proves two ran at once).
    Together(Box<Step>),
    /// A stream that starts and never ends.
    Hang,
    /// The server refuses the request.
    Fail,
}

/// The request's messages of `role`.
pub(crate) fn messages_of(request: &Recorded, role: &str) -> Vec<Value> {
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    messages.into_iter().filter(|m| m["role"] == role).collect()
}

pub(crate) fn first_user_text(request: &Recorded) -> String {
    match messages_of(request, "user").first().map(|m| &m["content"]) {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

pub(crate) fn tool_results(request: &Recorded) -> Vec<String> {
    messages_of(request, "tool")
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn calls_reply(calls: &[(&'static str, Value)]) -> Vec<u8> {
    let deltas: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(index, (name, arguments))| {
            json!({"tool_calls": [{"index": index, "id": format!("call_{index}_{name}"), "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()}}]})
        })
        .collect();
    openai_stream(&deltas, "tool_calls", (50, 10))
}

/// The model server: each conversation (by its first user message) plays
/// its steps, one per model call (the number of assistant messages so far).
pub(crate) fn routed(routes: Vec<(&'static str, Vec<Step>)>) -> impl Fn(&Recorded) -> Reply {
    let waiting: Arc<Mutex<Option<Arc<Notify>>>> = Arc::default();
    move |request| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model"]);
        }
        let first = first_user_text(request);
        let Some((_, steps)) = routes.iter().find(|(key, _)| first.contains(key)) else {
            return Reply::json(
                400,
                json!({"error": {"message": format!("unscripted: {first}")}}),
            );
        };
        let round = messages_of(request, "assistant").len();
        let step = steps
            .get(round)
            .cloned()
            .unwrap_or(Step::Answer("(out of script)"));
        reply(step, request, &waiting)
    }
}

fn reply(step: Step, request: &Recorded, waiting: &Mutex<Option<Arc<Notify>>>) -> Reply {
    match step {
        Step::Calls(calls) => Reply::stream(calls_reply(&calls), Split::Every(40)),
        Step::Answer(text) => {
            let answer = format!("{text} {}", tool_results(request).join(" | "));
            Reply::stream(
                openai_stream(&[json!({"content": answer})], "stop", (60, 5)),
                Split::Every(40),
            )
        }
        Step::Together(step) => {
            let inner = reply(*step, request, waiting);
            let mut waiting = waiting.lock().unwrap();
            match waiting.take() {
                Some(other) => {
                    other.notify_one();
                    inner
                }
                None => {
                    let gate = Arc::new(Notify::new());
                    *waiting = Some(Arc::clone(&gate));
                    inner.gated(gate)
                }
            }
        }
        Step::Hang => Reply::stream(stream_head(&["Looking"]), Split::Whole).hanging(),
        Step::Fail => Reply::json(400, json!({"error": {"message": "the child model broke"}})),
    }
}

pub(crate) fn delegate(agent: &str, task: &str) -> (&'static str, Value) {
    ("delegate", json!({"agent": agent, "task": task}))
}

/// The parent delegates `tasks` at once, then answers with their results.
pub(crate) fn parent(tasks: Vec<(&'static str, Value)>) -> Vec<Step> {
    vec![Step::Calls(tasks), Step::Answer("Parent heard:")]
}

pub(crate) fn delegate_updates(seen: &[Value]) -> Vec<&Value> {
    let calls: Vec<&Value> = tool_updates(seen, "tool_call")
        .into_iter()
        .filter(|c| {
            c["title"]
                .as_str()
                .unwrap_or_default()
                .starts_with("Delegate")
        })
        .collect();
    tool_updates(seen, "tool_call_update")
        .into_iter()
        .filter(|u| calls.iter().any(|c| c["toolCallId"] == u["toolCallId"]))
        .collect()
}

pub(crate) fn text_of(update: &Value) -> String {
    update["content"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A child that calls `tool` (only once the other such child has asked
/// the model too), then answers.
pub(crate) fn together(
    task: &'static str,
    tool: (&'static str, Value),
    answer: &'static str,
) -> (&'static str, Vec<Step>) {
    let first = Step::Together(Box::new(Step::Calls(vec![tool])));
    (task, vec![first, Step::Answer(answer)])
}

/// The turn as a reader follows it (set `CRUCIBLE_SUBAGENTS_TRANSCRIPT` to
/// a file to get it): the prompt, the session's updates (text chunks
/// joined), the answer; `->` the client's, `<-` the agent's, one per line.
fn write_transcript(
    path: &std::ffi::OsStr,
    session: &str,
    prompt: &str,
    seen: &[Value],
    response: &Value,
) {
    let mut out = format!(
        "# A parent delegating two tasks at once to explorer children (scripted model):\n\
         # each child's work streams as its delegate call's tool_call_update summary.\n\
         # -> client to agent, <- agent to client; text chunks joined.\n-> {}\n",
        json!({"jsonrpc": "2.0", "id": response["id"], "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": prompt}]}})
    );
    for update in conversation(seen, session) {
        let message = json!({"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": session, "update": update}});
        out.push_str(&format!("<- {message}\n"));
    }
    out.push_str(&format!("<- {response}\n"));
    std::fs::write(path, out).unwrap();
}

#[tokio::test]
async fn two_delegations_run_at_once_use_tools_and_both_answers_reach_the_parent() {
    let server = LlmServer::start(routed(vec![
        (
            "Survey the project",
            parent(vec![
                delegate("explorer", "Find alpha"),
                delegate("explorer", "Find beta"),
            ]),
        ),
        together(
            "Find alpha",
            ("read_file", json!({"path": "alpha.txt"})),
            "alpha says:",
        ),
        together(
            "Find beta",
            ("grep", json!({"pattern": "beta-marker", "glob": "*.txt"})),
            "beta says:",
        ),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    std::fs::write(agent.cwd().join("alpha.txt"), "ALPHA-CONTENT\n").unwrap();
    std::fs::write(agent.cwd().join("beta.txt"), "beta-marker here\n").unwrap();
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "Survey the project").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    if let Some(path) = std::env::var_os("CRUCIBLE_SUBAGENTS_TRANSCRIPT") {
        write_transcript(&path, &session, "Survey the project", &seen, &response);
    }

    // The parent's model got both children's answers as tool results.
    let chat = server.chat_requests();
    let last_parent = chat
        .iter()
        .rev()
        .find(|r| first_user_text(r).contains("Survey"))
        .unwrap();
    let results = tool_results(last_parent);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].contains("alpha says:") && results[0].contains("ALPHA-CONTENT"),
        "{results:?}"
    );
    assert!(
        results[1].contains("beta says:") && results[1].contains("beta-marker"),
        "{results:?}"
    );
    let text = agent_text(&seen, &session);
    assert!(
        text.contains("ALPHA-CONTENT") && text.contains("beta-marker"),
        "{text}"
    );

    // The children ran with the explorer card: its prompt and its tools.
    let child = chat
        .iter()
        .find(|r| first_user_text(r) == "Find alpha")
        .unwrap();
    let system = child.body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(system.contains("# Agent: explorer"), "{system}");
    let tools: Vec<&str> = child.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read_file", "list_dir", "glob", "grep"]);

    // The editor saw each child's work in its delegate call, then its end.
    let updates = delegate_updates(&seen);
    let running: Vec<String> = updates
        .iter()
        .filter(|u| u["status"] == "in_progress")
        .map(|u| text_of(u))
        .collect();
    assert!(
        running
            .iter()
            .any(|t| t.contains("explorer · running") && t.contains("Read alpha.txt")),
        "{running:?}"
    );
    let done: Vec<&&Value> = updates
        .iter()
        .filter(|u| u["status"] == "completed")
        .collect();
    assert_eq!(done.len(), 2, "{updates:?}");
    assert!(text_of(done[0]).contains("explorer · done"), "{}", done[0]);
    // No child update went out under a session id the client does not know.
    let sessions: std::collections::BTreeSet<&str> = seen
        .iter()
        .filter(|m| m["method"] == "session/update")
        .filter_map(|m| m["params"]["sessionId"].as_str())
        .collect();
    assert_eq!(sessions.into_iter().collect::<Vec<_>>(), [session.as_str()]);
}

#[tokio::test]
async fn cancelling_the_parent_cancels_every_child_within_a_second() {
    let server = LlmServer::start(routed(vec![
        (
            "Look around",
            parent(vec![
                delegate("explorer", "Slow one"),
                delegate("explorer", "Slow two"),
            ]),
        ),
        ("Slow one", vec![Step::Hang]),
        ("Slow two", vec![Step::Hang]),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let id = agent.start_prompt(&session, "Look around").await;
    wait_until("both children calling the model", || {
        let requests = server.chat_requests();
        let children = requests
            .iter()
            .filter(|r| first_user_text(r).starts_with("Slow"));
        children.count() >= 2
    })
    .await;
    let cancelled = Instant::now();
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (seen, response) = agent.response(id).await;
    let took = cancelled.elapsed();
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert!(
        took < Duration::from_secs(1),
        "the turn ended {took:?} after the cancel"
    );
    let failed = delegate_updates(&seen)
        .into_iter()
        .filter(|u| u["status"] == "failed")
        .count();
    assert_eq!(failed, 2, "{seen:?}");
}

#[tokio::test]
async fn a_failing_child_is_a_failed_call_the_parent_model_reads() {
    let server = LlmServer::start(routed(vec![
        ("Try it", parent(vec![delegate("explorer", "Doomed task")])),
        ("Doomed task", vec![Step::Fail]),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "Try it").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let failed: Vec<&Value> = delegate_updates(&seen)
        .into_iter()
        .filter(|u| u["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{seen:?}");
    assert!(
        text_of(failed[0]).contains("the agent failed"),
        "{}",
        failed[0]
    );
    let last = server.chat_requests().last().unwrap().clone();
    let results = tool_results(&last);
    assert!(
        results[0].starts_with("Error: the agent failed")
            && results[0].contains("the child model broke"),
        "{results:?}"
    );
}

/// A parent that delegates `task` to `agent`, whose child writes `path`.
async fn child_writes(
    prompt: &'static str,
    agent: &str,
    task: &'static str,
    path: &str,
) -> (LlmServer, Agent) {
    let server = LlmServer::start(routed(vec![
        (prompt, parent(vec![delegate(agent, task)])),
        (
            task,
            vec![
                Step::Calls(vec![("write_file", json!({"path": path, "content": "x"}))]),
                Step::Answer("written:"),
            ],
        ),
    ]))
    .await;
    let agent = Agent::spawn(&config_for(&server, "test-model")).await;
    (server, agent)
}

#[tokio::test]
async fn a_child_never_gets_past_its_parents_plan_mode() {
    let (server, mut agent) = child_writes("Plan it", "coder", "Write the file", "out.txt").await;
    let session = agent.start_session().await;
    let (_, response) = agent
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "plan"}),
        )
        .await;
    assert!(response["error"].is_null(), "{response}");
    let (seen, response) = agent.prompt(&session, "Plan it").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!agent.cwd().join("out.txt").exists());
    assert!(
        !seen
            .iter()
            .any(|m| m["method"] == "session/request_permission")
    );
    // The coder card has every tool, but its child in plan mode is offered
    // none that changes anything.
    let child = server
        .chat_requests()
        .into_iter()
        .find(|r| first_user_text(r) == "Write the file")
        .unwrap();
    let tools: Vec<String> = child.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !tools.iter().any(|t| t == "write_file" || t == "shell"),
        "{tools:?}"
    );
}

#[tokio::test]
async fn a_childs_question_reaches_the_client_under_the_parent_and_its_answer_is_obeyed() {
    let (server, mut agent) = child_writes("Go write", "writer", "Write notes", "notes.txt").await;
    // A card asking for auto mode: under an act parent it still asks.
    let cards = agent.cwd().join(".crucible/agents");
    std::fs::create_dir_all(&cards).unwrap();
    std::fs::write(
        cards.join("writer.md"),
        "---\nname: writer\ndescription: Writes files\nmode: auto\n---\nWrite what you are asked.\n",
    )
    .unwrap();
    let session = agent.start_session().await;
    let id = agent.start_prompt(&session, "Go write").await;
    let request = answer_permission(&mut agent, "reject_once").await;
    assert_eq!(
        request["params"]["sessionId"],
        session.as_str(),
        "{request}"
    );
    let title = request["params"]["toolCall"]["title"]
        .as_str()
        .unwrap_or_default();
    assert!(title.starts_with("[writer]"), "{request}");
    let (_, response) = agent.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!agent.cwd().join("notes.txt").exists());
    let child_last = server
        .chat_requests()
        .into_iter()
        .rfind(|r| first_user_text(r) == "Write notes")
        .unwrap();
    let results = tool_results(&child_last);
    assert!(results[0].contains("declined"), "{results:?}");
}

#[tokio::test]
async fn lineage_survives_a_restart_in_the_list_the_store_and_the_replay() {
    let server = LlmServer::start(routed(vec![
        (
            "Survey twice",
            parent(vec![
                delegate("explorer", "Count one"),
                delegate("explorer", "Count two"),
            ]),
        ),
        ("Count one", vec![Step::Answer("one found")]),
        ("Count two", vec![Step::Answer("two found")]),
    ]))
    .await;
    let config = config_for(&server, "test-model");
    let mut first = Agent::spawn(&config).await;
    let session = first.start_session().await;
    let (_, response) = first.prompt(&session, "Survey twice").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    first.kill().await;

    let mut second = Agent::spawn_sharing(&config, &first).await;
    second.initialize().await;
    let (_, listed) = second.call("session/list", json!({})).await;
    let sessions = listed["result"]["sessions"].as_array().unwrap().clone();
    assert_eq!(sessions.len(), 3, "{listed}");
    let parent = sessions
        .iter()
        .find(|s| s["sessionId"] == session.as_str())
        .unwrap();
    let children: Vec<&str> = parent["_meta"]["childSessionIds"]
        .as_array()
        .unwrap_or_else(|| panic!("{parent}"))
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(children.len(), 2, "{parent}");
    for child in &children {
        let listed = sessions.iter().find(|s| s["sessionId"] == *child).unwrap();
        assert_eq!(
            listed["_meta"]["parentSessionId"],
            session.as_str(),
            "{listed}"
        );
        assert_eq!(listed["_meta"]["agent"], "explorer", "{listed}");
        let metadata: Value = serde_json::from_str(
            &std::fs::read_to_string(first.session_dir(child).join("metadata.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(metadata["parent_id"], session.as_str());
        assert!(
            metadata["parent_tool_call_id"]
                .as_str()
                .unwrap()
                .starts_with("call-")
        );
        // The child's whole transcript is its own.
        let history =
            std::fs::read_to_string(first.session_dir(child).join("history.jsonl")).unwrap();
        assert!(history.contains("found"), "{history}");
    }

    // Loading the parent shows each delegate call with its child's summary.
    let (replayed, response) = second.load(&session, first.cwd()).await;
    assert!(response["error"].is_null(), "{response}");
    let done: Vec<String> = delegate_updates(&replayed)
        .into_iter()
        .filter(|u| u["status"] == "completed")
        .map(text_of)
        .collect();
    assert_eq!(done.len(), 2, "{replayed:?}");
    assert!(done.iter().any(|t| t.contains("one found")), "{done:?}");
    // A child loads too, as a session of its own.
    let (_, response) = second
        .call(
            "session/load",
            json!({"sessionId": children[0], "cwd": first.cwd(), "mcpServers": []}),
        )
        .await;
    assert!(response["error"].is_null(), "{response}");
}

#[tokio::test]
async fn a_child_uses_its_parents_mcp_servers_which_outlive_it() {
    let server = LlmServer::start(routed(vec![
        (
            "Add with help",
            vec![
                Step::Calls(vec![delegate("coder", "Add numbers")]),
                // After the child stopped, the parent's server still answers.
                Step::Calls(vec![("fx__add", json!({"a": 20, "b": 22}))]),
                Step::Answer("Parent heard:"),
            ],
        ),
        (
            "Add numbers",
            vec![
                Step::Calls(vec![("fx__add", json!({"a": 2, "b": 3}))]),
                Step::Answer("child sum:"),
            ],
        ),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session_with(json!([echo_mcp_server()])).await;
    let (_, response) = agent.prompt(&session, "Add with help").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let chat = server.chat_requests();
    let child_last = chat
        .iter()
        .rfind(|r| first_user_text(r) == "Add numbers")
        .unwrap();
    assert_eq!(tool_results(child_last), ["5"]);
    let parent_last = chat
        .iter()
        .rfind(|r| first_user_text(r) == "Add with help")
        .unwrap();
    let results = tool_results(parent_last);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].contains("child sum: 5"), "{results:?}");
    assert_eq!(results[1], "42", "{results:?}");
}
