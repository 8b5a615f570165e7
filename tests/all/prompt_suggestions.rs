//! Prompt suggestions (unstable `prompt_suggestions`): at a turn's end, a
//! client that takes them is offered what is true then (the todo list's
//! next step, "Continue" after a limit stopped the turn); the next prompt
//! withdraws them; nothing is suggested that is not true, nothing reaches
//! other clients, and a load replays none.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::support::harness::{
    Agent, LlmServer, Recorded, Reply, Split, config_for, models_reply, openai_stream,
    scripted_model, stream_head, updates,
};

/// What the model does on each request in turn: a tool call, or (None) a
/// text answer; text once the list runs out.
fn model(steps: Vec<Option<(&'static str, Value)>>) -> impl Fn(&Recorded) -> Reply {
    let next = Arc::new(Mutex::new(0usize));
    move |request| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model"]);
        }
        let mut n = next.lock().unwrap();
        let reply = match steps.get(*n).cloned().flatten() {
            Some((name, arguments)) => openai_stream(
                &[
                    json!({"tool_calls": [{"index": 0, "id": format!("call_{n}"), "type": "function",
                    "function": {"name": name, "arguments": arguments.to_string()}}]}),
                ],
                "tool_calls",
                (50, 10),
            ),
            None => openai_stream(&[json!({"content": "Done for now."})], "stop", (60, 5)),
        };
        *n += 1;
        Reply::stream(reply, Split::Whole)
    }
}

fn todo(items: Value) -> Option<(&'static str, Value)> {
    Some(("todo", json!({ "todos": items })))
}

fn config(server: &LlmServer, unstable: &str, agent: &str) -> String {
    format!(
        "{}\n[agent]\ndefault_mode = \"auto\"\n{agent}\n[acp]\nunstable = [{unstable}]\n",
        config_for(server, "test-model")
    )
}

const NAMED: &str = "\"prompt_suggestions\"";

/// Initialize, declaring `session.promptSuggestions` when `takes`; the answer.
async fn init(agent: &mut Agent, takes: bool) -> Value {
    let session = if takes {
        json!({"promptSuggestions": {}})
    } else {
        json!({})
    };
    let (_, response) = agent
        .call(
            "initialize",
            json!({"protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false},
                    "terminal": false, "session": session},
                "clientInfo": {"name": "suggestions", "version": "0"}}),
        )
        .await;
    assert!(response["result"].is_object(), "{response}");
    response["result"].clone()
}

/// The texts of each `prompt_suggestions_update` in `seen`, in order.
fn offered(seen: &[Value], session: &str) -> Vec<Vec<String>> {
    updates(seen, session, "prompt_suggestions_update")
        .iter()
        .map(|update| {
            update["suggestions"]
                .as_array()
                .unwrap_or_else(|| panic!("{update}"))
                .iter()
                .map(|suggestion| {
                    let prompt = suggestion["prompt"].as_array().unwrap();
                    assert_eq!(prompt.len(), 1, "{suggestion}");
                    assert_eq!(prompt[0]["type"], "text", "{suggestion}");
                    prompt[0]["text"].as_str().unwrap().to_string()
                })
                .collect()
        })
        .collect()
}

/// Where the first update of `kind` is among `seen`.
fn position(seen: &[Value], kind: &str) -> Option<usize> {
    seen.iter()
        .position(|m| m["params"]["update"]["sessionUpdate"] == kind)
}

#[tokio::test]
async fn a_plan_left_pending_offers_its_next_step_until_the_next_prompt() {
    let server = LlmServer::start(model(vec![
        todo(json!([
            {"content": "Read the code", "status": "completed"},
            {"content": "Fix the bug", "status": "in_progress"},
            {"content": "Run the tests", "status": "pending"},
        ])),
        None,
        todo(json!([
            {"content": "Read the code", "status": "completed"},
            {"content": "Fix the bug", "status": "completed"},
            {"content": "Run the tests", "status": "pending"},
        ])),
        None,
        todo(json!([
            {"content": "Read the code", "status": "completed"},
            {"content": "Fix the bug", "status": "completed"},
            {"content": "Run the tests", "status": "completed"},
        ])),
        None,
    ]))
    .await;
    let config = config(&server, NAMED, "");
    let mut agent = Agent::spawn(&config).await;
    init(&mut agent, true).await;
    let session = agent.new_session().await;

    let (seen, answer) = agent.prompt(&session, "fix the bug").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        offered(&seen, &session),
        [["Continue with the plan: Fix the bug"]],
        "{seen:?}"
    );
    // Offered once the answer is over.
    assert!(
        position(&seen, "prompt_suggestions_update") > position(&seen, "agent_message_chunk"),
        "{seen:?}"
    );

    // The suggestion is a prompt the client can send unchanged.
    let suggestion =
        updates(&seen, &session, "prompt_suggestions_update")[0]["suggestions"][0]["prompt"]
            .clone();
    let (seen, answer) = agent
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": suggestion}),
        )
        .await;
    assert!(answer["result"].is_object(), "{answer}");
    assert_eq!(
        server.chat_requests().last().unwrap().last_user_text(),
        "Continue with the plan: Fix the bug"
    );
    // Withdrawn as the prompt starts, before anything of the turn; the
    // list's next step offered at its end.
    assert_eq!(
        offered(&seen, &session),
        vec![
            vec![],
            vec!["Continue with the plan: Run the tests".to_string()]
        ],
        "{seen:?}"
    );
    assert!(
        position(&seen, "prompt_suggestions_update") < position(&seen, "tool_call"),
        "{seen:?}"
    );

    // A finished list leaves nothing to suggest: withdrawn, not offered again.
    let (seen, _) = agent.prompt(&session, "go on").await;
    assert_eq!(
        offered(&seen, &session),
        vec![Vec::<String>::new()],
        "{seen:?}"
    );

    // Nothing was offered, so nothing is withdrawn.
    let (seen, _) = agent.prompt(&session, "thanks").await;
    assert!(offered(&seen, &session).is_empty(), "{seen:?}");
    agent.close_stdin();
    agent.wait_exit().await;

    // Suggestions are no part of the history: a load replays none.
    let mut again = Agent::spawn_sharing(&config, &agent).await;
    init(&mut again, true).await;
    let (replay, loaded) = again.load(&session, agent.cwd()).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    assert!(position(&replay, "plan").is_some(), "{replay:?}");
    assert!(offered(&replay, &session).is_empty(), "{replay:?}");
}

#[tokio::test]
async fn a_command_withdraws_them_and_a_cancelled_turn_offers_none() {
    let pending = model(vec![
        todo(json!([{"content": "Fix the bug", "status": "pending"}])),
        None,
    ]);
    let requests = Arc::new(Mutex::new(0usize));
    // The third chat request (the third turn's) hangs until cancelled.
    let server = LlmServer::start(move |request| {
        let chat = !request.path.ends_with("/models");
        let n = {
            let mut n = requests.lock().unwrap();
            *n += usize::from(chat);
            *n
        };
        if n == 3 {
            Reply::stream(stream_head(&["Looking "]), Split::Whole).hanging()
        } else {
            pending(request)
        }
    })
    .await;
    let mut agent = Agent::spawn(&config(&server, NAMED, "")).await;
    init(&mut agent, true).await;
    let session = agent.new_session().await;
    let (seen, _) = agent.prompt(&session, "fix it").await;
    assert_eq!(
        offered(&seen, &session),
        [["Continue with the plan: Fix the bug"]]
    );

    // A built-in command withdraws them and offers none at its end.
    let (seen, _) = agent.prompt(&session, "/context").await;
    assert_eq!(
        offered(&seen, &session),
        vec![Vec::<String>::new()],
        "{seen:?}"
    );

    // The plan is still pending, but a cancelled turn offers nothing.
    let id = agent.start_prompt(&session, "go on").await;
    agent.wait_for_update("agent_message_chunk").await;
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (seen, answer) = agent.response(id).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert!(offered(&seen, &session).is_empty(), "{seen:?}");
}

#[tokio::test]
async fn a_turn_stopped_by_a_limit_offers_to_continue() {
    // The turn's model calls: the second is never made.
    let server = LlmServer::start(model(vec![
        todo(json!([{"content": "Fix the bug", "status": "in_progress"}])),
        None,
    ]))
    .await;
    let mut agent = Agent::spawn(&config(&server, NAMED, "max_turn_requests = 1")).await;
    init(&mut agent, true).await;
    let session = agent.new_session().await;
    let (seen, answer) = agent.prompt(&session, "fix it").await;
    assert_eq!(answer["result"]["stopReason"], "max_turn_requests");
    assert_eq!(
        offered(&seen, &session),
        [["Continue", "Continue with the plan: Fix the bug"]],
        "{seen:?}"
    );

    // Past the turn's token budget too (each call reports 60 tokens).
    let server = LlmServer::start(scripted_model(vec![
        ("list_dir", json!({"path": "."})),
        ("list_dir", json!({"path": "."})),
        ("list_dir", json!({"path": "."})),
    ]))
    .await;
    let mut agent = Agent::spawn(&config(&server, NAMED, "max_turn_tokens = 100")).await;
    init(&mut agent, true).await;
    let session = agent.new_session().await;
    let (seen, answer) = agent.prompt(&session, "look around").await;
    assert_eq!(answer["result"]["stopReason"], "max_tokens");
    assert_eq!(offered(&seen, &session), [["Continue"]], "{seen:?}");
}

#[tokio::test]
async fn past_the_session_budget_nothing_is_suggested() {
    // Another prompt would stop before calling the model: "Continue" is not true.
    let server = LlmServer::start(scripted_model(vec![
        (
            "todo",
            json!({"todos": [{"content": "Fix the bug", "status": "pending"}]}),
        ),
        ("list_dir", json!({"path": "."})),
    ]))
    .await;
    let mut agent = Agent::spawn(&config(&server, NAMED, "max_session_tokens = 100")).await;
    init(&mut agent, true).await;
    let session = agent.new_session().await;
    let (seen, answer) = agent.prompt(&session, "fix it").await;
    assert_eq!(answer["result"]["stopReason"], "max_tokens");
    assert!(position(&seen, "plan").is_some(), "{seen:?}");
    assert!(offered(&seen, &session).is_empty(), "{seen:?}");
}

#[tokio::test]
async fn clients_that_do_not_opt_in_see_no_change() {
    let pending = || {
        model(vec![
            todo(json!([{"content": "Fix the bug", "status": "pending"}])),
            None,
        ])
    };
    // The agent advertises nothing for them (the capability is the client's).
    let server = LlmServer::start(pending()).await;
    let mut plain = Agent::spawn(&config(&server, "", "")).await;
    let before = init(&mut plain, true).await;

    for (unstable, takes) in [(NAMED, false), ("", true)] {
        let server = LlmServer::start(pending()).await;
        let mut agent = Agent::spawn(&config(&server, unstable, "")).await;
        let answer = init(&mut agent, takes).await;
        assert_eq!(answer, before, "[acp] unstable = [{unstable}]");
        let session = agent.new_session().await;
        let (seen, _) = agent.prompt(&session, "fix it").await;
        assert!(position(&seen, "plan").is_some(), "{seen:?}");
        let (more, _) = agent.prompt(&session, "go on").await;
        for seen in [seen, more] {
            assert!(
                position(&seen, "prompt_suggestions_update").is_none(),
                "[acp] unstable = [{unstable}], client takes them: {takes}: {seen:?}"
            );
        }
    }
}
