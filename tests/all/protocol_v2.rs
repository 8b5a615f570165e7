//! ACP v2 through the binary, as a v2 editor sees it (`support::v2`): the
//! version negotiated per connection, a prompt acknowledged with its
//! `messageId` while the turn runs on, the turn followed by `state_update`
//! until `idle`, messages and tool calls as upserts keyed by id, a replay
//! by `session/resume` with `replayFrom` giving the same ids, a batch, and
//! steering (`[acp] unstable = ["steering"]`): a prompt sent while the turn
//! runs joins it at the next safe point.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::harness::{
    Agent, LlmServer, Recorded, Reply, Split, answer_permission, config_for, models_reply,
    openai_stream, scripted_model, stream_head, text_stream,
};
use crate::support::v2::{
    answer_position, initialize_v2_params, messages, only_tool_call, position, states, v2_parse,
    v2_updates, with_steering,
};

use agent_client_protocol_schema::v2;

/// A command that runs until the test creates `release` in its directory:
/// a slow tool whose end the test decides.
const BLOCKING: &str = "while [ ! -e release ]; do sleep 0.05; done; echo released";

/// A server whose every chat answer is `text`, held until `gate` is notified.
async fn gated_text(text: &'static str, gate: Arc<Notify>) -> LlmServer {
    LlmServer::chat(move |_| {
        Reply::stream(text_stream(&[text, " (end)"]), Split::Every(7)).gated(Arc::clone(&gate))
    })
    .await
}

// ------------------------------------------------------------ negotiation

#[tokio::test]
async fn a_v2_client_gets_v2_and_a_v1_client_gets_v1_from_the_same_binary() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let config = config_for(&server, "test-model");

    let mut v2_agent = Agent::spawn(&config).await;
    let answer = v2_agent.initialize_v2().await;
    let result = &answer["result"];
    assert_eq!(result["protocolVersion"], 2, "{answer}");
    assert_eq!(result["info"]["name"], "crucible-agent", "{answer}");
    assert!(result["info"]["version"].is_string(), "{answer}");
    // v2's role-agnostic names; the baseline session methods come with `session`.
    assert!(result["capabilities"]["session"].is_object(), "{answer}");
    assert!(result.get("agentCapabilities").is_none(), "{answer}");
    assert!(result.get("agentInfo").is_none(), "{answer}");
    // Steering is unstable: not advertised unless configured.
    assert!(
        result["capabilities"]["session"]["steering"].is_null(),
        "{answer}"
    );

    let mut v1_agent = Agent::spawn(&config).await;
    let answer = v1_agent.initialize().await;
    let result = &answer["result"];
    assert_eq!(result["protocolVersion"], 1, "{answer}");
    assert!(result["agentCapabilities"].is_object(), "{answer}");
    assert_eq!(result["agentInfo"]["name"], "crucible-agent", "{answer}");
    assert!(result.get("capabilities").is_none(), "{answer}");
    assert!(result.get("info").is_none(), "{answer}");

    // A v1 turn is still one request: answered with the stop reason at its
    // end, with no v2 updates on the way.
    let session = v1_agent.new_session().await;
    let (seen, response) = v1_agent.prompt(&session, "hello").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let kinds: Vec<&Value> = seen
        .iter()
        .map(|m| &m["params"]["update"]["sessionUpdate"])
        .collect();
    for v2_only in [
        "state_update",
        "user_message",
        "agent_message",
        "tool_call_content_chunk",
    ] {
        assert!(
            !kinds.contains(&&json!(v2_only)),
            "{v2_only} sent to a v1 client: {seen:?}"
        );
    }
}

#[tokio::test]
async fn with_protocol_v2_off_a_v2_client_is_answered_with_v1() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let config = format!(
        "{}\n[acp]\nprotocol_v2 = false\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let (_, answer) = agent.call("initialize", initialize_v2_params()).await;
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    assert!(
        answer["result"]["agentCapabilities"].is_object(),
        "{answer}"
    );
}

#[tokio::test]
async fn steering_is_advertised_when_configured() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&with_steering(&config_for(&server, "test-model"))).await;
    let answer = agent.initialize_v2().await;
    assert!(
        answer["result"]["capabilities"]["session"]["steering"].is_object(),
        "{answer}"
    );
}

// ------------------------------------------------------------ the prompt lifecycle

#[tokio::test]
async fn a_prompt_is_acknowledged_before_the_model_finishes_then_runs_to_idle_end_turn() {
    let gate = Arc::new(Notify::new());
    let server = gated_text("Hello there", Arc::clone(&gate)).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session_v2().await;

    let prompt = agent.start_prompt_v2(&session, "hi").await;
    // The model's answer is held: the acknowledgment cannot wait for it.
    let (mut log, message_id) = agent.prompt_ack(prompt).await;
    assert!(!message_id.is_empty());
    assert!(
        states(&log, &session)
            .iter()
            .all(|s| !s.starts_with("idle")),
        "{log:?}"
    );
    gate.notify_one();
    log.extend(agent.until_idle(&session).await);

    assert_eq!(
        states(&log, &session),
        ["running", "idle:end_turn"],
        "{log:#?}"
    );
    let conversation = messages(&log, &session);
    assert_eq!(conversation.len(), 2, "{conversation:?}");
    // The user's message is reported with the id the answer gave.
    assert_eq!(conversation[0].role, "user");
    assert_eq!(conversation[0].message_id, message_id);
    assert_eq!(conversation[0].text, "hi");
    assert_eq!(conversation[1].role, "agent");
    assert_eq!(conversation[1].text, "Hello there (end)");
    assert_ne!(conversation[1].message_id, message_id);
    // Output comes while running, and nothing of the turn after idle.
    let updates = v2_updates(&log, &session);
    let running = position(&updates, "running", |u| u["state"] == "running");
    let first_text = position(&updates, "agent text", |u| {
        u["sessionUpdate"] == "agent_message_chunk" || u["sessionUpdate"] == "agent_message"
    });
    assert!(running < first_text, "{updates:#?}");
    assert_eq!(updates.last().unwrap()["state"], "idle");
    assert!(
        updates.iter().all(|u| u["sessionUpdate"] != "tool_call"),
        "v1's tool_call in v2"
    );
}

#[tokio::test]
async fn resume_replays_whole_messages_under_the_ids_they_had_live_after_a_restart() {
    let server = LlmServer::chat(|request| {
        let answer = format!("You said: {}", request.last_user_text());
        let deltas = [
            json!({"reasoning_content": "Let me "}),
            json!({"reasoning_content": "think."}),
            json!({"content": &answer[..4]}),
            json!({"content": &answer[4..]}),
        ];
        Reply::stream(openai_stream(&deltas, "stop", (42, 4)), Split::Every(9))
    })
    .await;
    let config = config_for(&server, "test-model");
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session_v2().await;
    let mut live = Vec::new();
    for text in ["first", "second"] {
        let prompt = agent.start_prompt_v2(&session, text).await;
        let (seen, _) = agent.prompt_ack(prompt).await;
        live.extend(seen);
        live.extend(agent.until_idle(&session).await);
    }
    let live_messages = messages(&live, &session);
    let roles: Vec<&str> = live_messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        ["user", "thought", "agent", "user", "thought", "agent"],
        "{live_messages:?}"
    );
    // Streamed live: the agent's messages and thoughts as chunks.
    assert!(
        v2_updates(&live, &session)
            .iter()
            .all(|u| u["sessionUpdate"] != "agent_message" && u["sessionUpdate"] != "agent_thought"),
        "{live:#?}"
    );
    // Every message chunk carries an id (`messages` fails on one without).
    for update in v2_updates(&live, &session) {
        if update["sessionUpdate"]
            .as_str()
            .is_some_and(|kind| kind.ends_with("_chunk") && kind != "tool_call_content_chunk")
        {
            assert!(update["messageId"].is_string(), "{update}");
        }
    }

    let mut again = agent.restarted_v2(&config).await;
    let (replayed, answer) = again.resume_replaying(&session, &agent.cwd()).await;
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(
        messages(&replayed, &session),
        live_messages,
        "{replayed:#?}"
    );
    // Replayed whole: one update a message, no chunk (ACP-RESUME-205: a
    // replay's chunk must follow its whole message).
    let shown: Vec<(String, String)> = v2_updates(&replayed, &session)
        .iter()
        .filter(|u| u["messageId"].is_string())
        .map(|u| {
            let kind = u["sessionUpdate"].as_str().unwrap().to_string();
            (kind, u["messageId"].as_str().unwrap().to_string())
        })
        .collect();
    let whole: Vec<(String, String)> = live_messages
        .iter()
        .map(|m| {
            let kind = match m.role {
                "user" => "user_message",
                "thought" => "agent_thought",
                _ => "agent_message",
            };
            (kind.to_string(), m.message_id.clone())
        })
        .collect();
    assert_eq!(shown, whole, "{replayed:#?}");
    // After the replay, a snapshot of the state: nothing runs.
    let replayed_states = states(&replayed, &session);
    assert!(
        replayed_states
            .last()
            .is_some_and(|s| s.starts_with("idle")),
        "{replayed_states:?}"
    );
}

#[tokio::test]
async fn a_tool_call_is_upserts_ending_completed_with_its_diff_and_its_permission_has_a_title() {
    let server = LlmServer::start(scripted_model(vec![(
        "edit_file",
        json!({"path": "a.txt", "old_text": "one", "new_text": "two"}),
    )]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    std::fs::write(agent.cwd().join("a.txt"), "one\n").unwrap();
    let session = agent.start_session_v2().await;
    let prompt = agent.start_prompt_v2(&session, "Edit a.txt").await;
    let (mut log, _) = agent.prompt_ack(prompt).await;

    let asked = answer_permission(&mut agent, "allow_once").await;
    let params = &asked["params"];
    v2_parse::<v2::RequestPermissionRequest>(params, "the permission request");
    assert!(
        params["title"].as_str().is_some_and(|t| !t.is_empty()),
        "{asked}"
    );
    assert!(
        params.get("toolCall").is_none(),
        "v1's bare toolCall: {asked}"
    );
    assert_eq!(params["subject"]["type"], "tool_call", "{asked}");
    log.extend(agent.until_idle(&session).await);

    let updates = v2_updates(&log, &session);
    assert!(updates.iter().all(|u| u["sessionUpdate"] != "tool_call"));
    let (id, call) = only_tool_call(&log, &session);
    // The question is about that call.
    assert_eq!(
        params["subject"]["toolCall"]["toolCallId"],
        id.as_str(),
        "{asked}"
    );
    let first = &updates[position(&updates, "the tool call", |u| {
        u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == id.as_str()
    })];
    assert!(first["title"].is_string(), "created with a title: {first}");
    assert_eq!(call["status"], "completed", "{call}");
    let diff = call["content"]
        .as_array()
        .and_then(|items| items.iter().find(|item| item["type"] == "diff"))
        .unwrap_or_else(|| panic!("no diff in {call}"));
    let path = agent.cwd().join("a.txt");
    assert_eq!(diff["changes"][0]["operation"], "modify", "{diff}");
    assert_eq!(diff["changes"][0]["path"], path.to_str().unwrap(), "{diff}");
    assert_eq!(diff["patch"]["format"], "git_patch", "{diff}");
    let patch = diff["patch"]["text"].as_str().unwrap();
    assert!(patch.contains("-one") && patch.contains("+two"), "{patch}");
    assert!(diff.get("oldText").is_none() && diff.get("newText").is_none());
    // Waiting on the user is a state of its own.
    let seen_states = states(&log, &session);
    let waiting = seen_states
        .iter()
        .position(|s| s == "requires_action")
        .unwrap_or_else(|| panic!("no requires_action in {seen_states:?}"));
    assert_eq!(seen_states[waiting + 1], "running", "{seen_states:?}");
    assert_eq!(seen_states.last().unwrap(), "idle:end_turn");
    assert_eq!(std::fs::read_to_string(path).unwrap(), "two\n");
}

#[tokio::test]
async fn cancel_ends_the_turn_with_idle_cancelled() {
    let calls = AtomicUsize::new(0);
    let server = LlmServer::chat(move |_| {
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::stream(stream_head(&["Once ", "upon "]), Split::Every(4)).hanging()
        } else {
            Reply::stream(text_stream(&["fresh"]), Split::Whole)
        }
    })
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session_v2().await;
    let prompt = agent.start_prompt_v2(&session, "story").await;
    agent.prompt_ack(prompt).await;
    agent.wait_for_update("agent_message_chunk").await;
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let log = agent.until_idle(&session).await;
    assert_eq!(
        states(&log, &session).last().unwrap(),
        "idle:cancelled",
        "{log:#?}"
    );
    server.wait_disconnect().await;

    let prompt = agent.start_prompt_v2(&session, "again").await;
    agent.prompt_ack(prompt).await;
    let log = agent.until_idle(&session).await;
    assert_eq!(states(&log, &session).last().unwrap(), "idle:end_turn");
}

// ------------------------------------------------------------ a batch

#[tokio::test]
async fn a_batch_of_two_v2_requests_gets_one_array_with_both_answers() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session_v2().await;
    let batch = json!([
        {"jsonrpc": "2.0", "id": 901, "method": "session/list", "params": {}},
        {"jsonrpc": "2.0", "id": 902, "method": "session/list", "params": {"cwd": agent.cwd()}},
    ]);
    agent.send(&batch).await;
    // One array line; no answer outside it (session updates may come first).
    let answers = loop {
        match agent.next_message().await {
            Value::Array(answers) => break answers,
            message if message.get("method").is_some() => continue,
            other => panic!("an answer outside the batch's array: {other}"),
        }
    };
    let mut ids: Vec<i64> = answers.iter().map(|a| a["id"].as_i64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, [901, 902], "{answers:?}");
    for answer in answers {
        let listed = answer["result"]["sessions"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"));
        assert!(
            listed.iter().any(|s| s["sessionId"] == session.as_str()),
            "{answer}"
        );
    }
}

// ------------------------------------------------------------ steering

/// The model calls the blocking shell command once, then answers with the
/// last message it was sent.
async fn slow_tool_server() -> LlmServer {
    LlmServer::start(scripted_model(vec![(
        "shell",
        json!({"command": BLOCKING}),
    )]))
    .await
}

/// A steering agent whose first turn (`run it`) is inside the blocking
/// command: the server, the agent, the session, the turn's messages so far
/// and its acknowledged id.
async fn turn_in_a_slow_tool() -> (LlmServer, Agent, String, Vec<Value>, String) {
    let server = slow_tool_server().await;
    let mut agent = Agent::spawn(&with_steering(&config_for(&server, "test-model"))).await;
    let session = agent.start_session_v2().await;
    let prompt = agent.start_prompt_v2(&session, "run it").await;
    let (log, id) = agent.prompt_ack(prompt).await;
    answer_permission(&mut agent, "allow_once").await;
    // The command runs (this update is taken out of what the test sees).
    agent
        .wait_for(|m| {
            m["params"]["update"]["sessionUpdate"] == "tool_call_update"
                && m["params"]["update"]["status"] == "in_progress"
        })
        .await;
    (server, agent, session, log, id)
}

/// Where in `log` the (one) tool call was reported completed.
fn completed_at(log: &[Value]) -> usize {
    log.iter()
        .position(|m| {
            m["params"]["update"]["sessionUpdate"] == "tool_call_update"
                && m["params"]["update"]["status"] == "completed"
        })
        .unwrap_or_else(|| panic!("the tool call never completed: {log:#?}"))
}

/// The user messages of a chat request after its tool result (`call_0`,
/// the model's id for its first call), as texts.
fn user_texts_after_the_tool_result(request: &Recorded) -> Vec<String> {
    let sent = request.body["messages"].as_array().unwrap();
    let tool = sent
        .iter()
        .position(|m| m["role"] == "tool" && m["tool_call_id"] == "call_0")
        .unwrap_or_else(|| panic!("no tool result in {sent:#?}"));
    sent[tool + 1..]
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .collect()
}

#[tokio::test]
async fn a_prompt_sent_during_a_slow_tool_joins_the_turn_after_the_tool() {
    let (server, mut agent, session, mut log, first) = turn_in_a_slow_tool().await;
    let (steer, seen) = agent.steer_v2(&session, "also say hi").await;
    log.extend(seen);
    std::fs::write(agent.cwd().join("release"), "").unwrap();
    log.extend(agent.until_answer(steer).await);
    // Answered once inserted, which is after the tool ended.
    let answered = answer_position(&log, steer);
    assert!(completed_at(&log) < answered, "{log:#?}");
    let ack: v2::PromptResponse = v2_parse(&log[answered]["result"], "the steering answer");
    let steered = ack.message_id.to_string();
    assert_ne!(steered, first);
    log.extend(agent.until_idle(&session).await);

    // One foreground run: no idle until the turn's end.
    let seen_states = states(&log, &session);
    assert_eq!(
        seen_states.iter().filter(|s| s.starts_with("idle")).count(),
        1,
        "{seen_states:?}"
    );
    assert_eq!(seen_states.last().unwrap(), "idle:end_turn");
    // The message is shown where it went in: after the tool, before the answer.
    let conversation = messages(&log, &session);
    let roles: Vec<(&str, &str)> = conversation
        .iter()
        .map(|m| (m.role, m.text.as_str()))
        .collect();
    assert_eq!(roles[0], ("user", "run it"), "{conversation:?}");
    let inserted = conversation
        .iter()
        .position(|m| m.message_id == steered)
        .unwrap_or_else(|| panic!("no user_message for {steered}: {conversation:?}"));
    assert_eq!(conversation[inserted].role, "user");
    assert_eq!(conversation[inserted].text, "also say hi");
    assert_eq!(conversation.last().unwrap().role, "agent");
    assert!(inserted < conversation.len() - 1, "{conversation:?}");
    let updates = v2_updates(&log, &session);
    let tool_done = position(&updates, "the tool call completed", |u| {
        u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed"
    });
    let shown = position(&updates, "the steered user_message", |u| {
        u["messageId"] == steered.as_str()
    });
    assert!(tool_done < shown, "{updates:#?}");
    // The model's next request carries it after the tool result.
    let chat = server.chat_requests();
    assert_eq!(chat.len(), 2, "one more model request, not a new turn");
    assert_eq!(user_texts_after_the_tool_result(&chat[1]), ["also say hi"]);
}

#[tokio::test]
async fn several_steering_prompts_wait_in_order_and_go_in_together() {
    let (server, mut agent, session, mut log, _) = turn_in_a_slow_tool().await;
    // Both wait in the session before the tool ends: its safe point takes both.
    let (second, seen) = agent.steer_v2(&session, "two").await;
    log.extend(seen);
    let (third, seen) = agent.steer_v2(&session, "three").await;
    log.extend(seen);
    std::fs::write(agent.cwd().join("release"), "").unwrap();
    log.extend(agent.until_answer(third).await);
    let (second_at, third_at) = (answer_position(&log, second), answer_position(&log, third));
    assert!(
        completed_at(&log) < second_at && second_at < third_at,
        "{log:#?}"
    );
    for at in [second_at, third_at] {
        assert!(log[at]["result"]["messageId"].is_string(), "{}", log[at]);
    }
    log.extend(agent.until_idle(&session).await);
    assert_eq!(states(&log, &session).last().unwrap(), "idle:end_turn");
    let chat = server.chat_requests();
    assert_eq!(chat.len(), 2, "both went into the one next request");
    assert_eq!(user_texts_after_the_tool_result(&chat[1]), ["two", "three"]);
}

#[tokio::test]
async fn a_steering_prompt_pending_at_cancel_gets_an_error_before_idle() {
    let (_server, mut agent, session, mut log, _) = turn_in_a_slow_tool().await;
    let (steer, seen) = agent.steer_v2(&session, "never mind").await;
    log.extend(seen);
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    log.extend(agent.until_idle(&session).await);
    let answered = answer_position(&log, steer);
    assert!(log[answered].get("error").is_some(), "{}", log[answered]);
    let idle = log.len() - 1;
    assert!(answered < idle, "{log:#?}");
    assert_eq!(states(&log, &session).last().unwrap(), "idle:cancelled");
    // It never became part of the conversation.
    assert!(
        messages(&log, &session)
            .iter()
            .all(|m| m.text != "never mind"),
        "{log:#?}"
    );
}

#[tokio::test]
async fn a_waiting_steering_prompt_whose_request_is_cancelled_is_refused_at_once() {
    let (server, mut agent, session, mut log, _) = turn_in_a_slow_tool().await;
    let dropped = agent.start_prompt_v2(&session, "forget this").await;
    let kept = agent.start_prompt_v2(&session, "keep this").await;
    agent
        .notify("$/cancel_request", json!({"requestId": dropped}))
        .await;
    log.extend(agent.until_answer(dropped).await);
    let answered = answer_position(&log, dropped);
    assert_eq!(log[answered]["error"]["code"], -32800, "{}", log[answered]);
    // At once: the tool still runs, the other message still waits.
    assert!(
        log.iter()
            .all(|m| m.get("method").is_some() || m["id"] != kept),
        "{log:#?}"
    );
    std::fs::write(agent.cwd().join("release"), "").unwrap();
    log.extend(agent.until_idle(&session).await);
    let at = answer_position(&log, kept);
    assert!(log[at]["result"]["messageId"].is_string(), "{}", log[at]);
    assert_eq!(states(&log, &session).last().unwrap(), "idle:end_turn");
    // Only the other one reached the model, and the conversation.
    let chat = server.chat_requests();
    assert_eq!(user_texts_after_the_tool_result(&chat[1]), ["keep this"]);
    assert!(
        messages(&log, &session)
            .iter()
            .all(|m| m.text != "forget this"),
        "{log:#?}"
    );
}

#[tokio::test]
async fn at_most_sixteen_steering_prompts_wait_then_one_more_is_refused() {
    let (_server, mut agent, session, mut log, _) = turn_in_a_slow_tool().await;
    let mut waiting = Vec::new();
    for n in 0..16 {
        waiting.push(agent.start_prompt_v2(&session, &format!("note {n}")).await);
    }
    let refused = agent.start_prompt_v2(&session, "one too many").await;
    log.extend(agent.until_answer(refused).await);
    let answered = answer_position(&log, refused);
    assert!(log[answered].get("error").is_some(), "{}", log[answered]);
    // Refused at once, while the tool still runs and the others wait.
    assert!(
        waiting.iter().all(|id| log
            .iter()
            .all(|m| m.get("method").is_some() || m["id"] != *id)),
        "{log:#?}"
    );
    std::fs::write(agent.cwd().join("release"), "").unwrap();
    log.extend(agent.until_idle(&session).await);
    for id in waiting {
        let at = answer_position(&log, id);
        assert!(log[at]["result"]["messageId"].is_string(), "{}", log[at]);
    }
}

#[tokio::test]
async fn a_steering_prompt_leaves_a_pending_permission_question_alone() {
    let server = LlmServer::start(scripted_model(vec![(
        "shell",
        json!({"command": "echo asked"}),
    )]))
    .await;
    let mut agent = Agent::spawn(&with_steering(&config_for(&server, "test-model"))).await;
    let session = agent.start_session_v2().await;
    let prompt = agent.start_prompt_v2(&session, "run it").await;
    let (mut log, _) = agent.prompt_ack(prompt).await;
    let question = agent
        .wait_for(|m| m["method"] == "session/request_permission")
        .await;
    let (steer, seen) = agent.steer_v2(&session, "meanwhile").await;
    log.extend(seen);
    // The question is still the user's: answered now, the command runs.
    agent
        .send(&json!({"jsonrpc": "2.0", "id": question["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}))
        .await;
    log.extend(agent.until_answer(steer).await);
    assert!(
        completed_at(&log) < answer_position(&log, steer),
        "{log:#?}"
    );
    log.extend(agent.until_idle(&session).await);
    let (_, call) = only_tool_call(&log, &session);
    assert_eq!(call["status"], "completed", "{call}");
    assert!(call.to_string().contains("asked"), "{call}");
    assert_eq!(states(&log, &session).last().unwrap(), "idle:end_turn");
    let chat = server.chat_requests();
    assert_eq!(user_texts_after_the_tool_result(&chat[1]), ["meanwhile"]);
}

#[tokio::test]
async fn a_prompt_sent_as_the_turn_ends_without_a_safe_point_runs_as_a_new_prompt() {
    let gate = Arc::new(Notify::new());
    let calls = Arc::new(AtomicUsize::new(0));
    let server = {
        let (gate, calls) = (Arc::clone(&gate), Arc::clone(&calls));
        LlmServer::start(move |request| {
            if request.path.ends_with("/models") {
                return models_reply(&["test-model"]);
            }
            let n = calls.fetch_add(1, Ordering::SeqCst);
            let reply = Reply::stream(
                openai_stream(
                    &[json!({"content": format!("answer {n}")})],
                    "stop",
                    (10, 2),
                ),
                Split::Whole,
            );
            // Only the first answer waits, until the second prompt is sent.
            if n == 0 {
                reply.gated(Arc::clone(&gate))
            } else {
                reply
            }
        })
        .await
    };
    let mut agent = Agent::spawn(&with_steering(&config_for(&server, "test-model"))).await;
    let session = agent.start_session_v2().await;
    let prompt = agent.start_prompt_v2(&session, "first").await;
    let (mut log, _) = agent.prompt_ack(prompt).await;
    // The answer comes as the message goes in, before the model is asked:
    // steer only once the first request is at the model, past the safe point.
    crate::support::wait::wait_until("the first model request", || {
        server.chat_requests().len() == 1
    })
    .await;
    let steer = agent.start_prompt_v2(&session, "second").await;
    // The model answers without a tool call: no safe point comes.
    gate.notify_one();
    while !messages(&log, &session)
        .iter()
        .any(|m| m.role == "agent" && m.text == "answer 1")
    {
        log.extend(agent.until_idle(&session).await);
    }
    assert!(log[answer_position(&log, steer)]["result"]["messageId"].is_string());
    let texts: Vec<(&str, String)> = messages(&log, &session)
        .into_iter()
        .map(|m| (m.role, m.text))
        .collect();
    assert_eq!(
        texts,
        [
            ("user", "first".to_string()),
            ("agent", "answer 0".to_string()),
            ("user", "second".to_string()),
            ("agent", "answer 1".to_string()),
        ]
    );
    assert_eq!(states(&log, &session).last().unwrap(), "idle:end_turn");
    assert_eq!(server.chat_requests()[1].last_user_text(), "second");
}

#[tokio::test]
async fn after_a_restart_resume_replays_the_steered_message_where_it_went_in() {
    let server = slow_tool_server().await;
    let config = with_steering(&config_for(&server, "test-model"));
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session_v2().await;
    let prompt = agent.start_prompt_v2(&session, "run it").await;
    let (mut log, _) = agent.prompt_ack(prompt).await;
    answer_permission(&mut agent, "allow_once").await;
    agent
        .wait_for(|m| m["params"]["update"]["status"] == "in_progress")
        .await;
    let (steer, seen) = agent.steer_v2(&session, "also say hi").await;
    log.extend(seen);
    std::fs::write(agent.cwd().join("release"), "").unwrap();
    log.extend(agent.until_idle(&session).await);
    let steered = log[answer_position(&log, steer)]["result"]["messageId"]
        .as_str()
        .unwrap()
        .to_string();
    let live = messages(&log, &session);

    let mut again = agent.restarted_v2(&config).await;
    let (replayed, answer) = again.resume_replaying(&session, &agent.cwd()).await;
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(messages(&replayed, &session), live, "{replayed:#?}");
    // In place: after the tool call, before the final answer.
    let updates = v2_updates(&replayed, &session);
    let tool = position(&updates, "the replayed tool call", |u| {
        u["sessionUpdate"] == "tool_call_update"
    });
    let shown = position(&updates, "the replayed steered message", |u| {
        u["messageId"] == steered.as_str()
    });
    let answer_text = position(&updates, "the replayed final answer", |u| {
        u["messageId"] == live.last().unwrap().message_id.as_str()
    });
    assert!(tool < shown && shown < answer_text, "{updates:#?}");
    assert_eq!(only_tool_call(&replayed, &session).1["status"], "completed");
}

#[tokio::test]
async fn a_steered_skill_command_brings_the_skill_in_as_a_prompt_would() {
    const NOTES: &str = "Write release notes: one line per change, newest first.";
    let (server, mut agent, session, mut log, _) = turn_in_a_slow_tool().await;
    let skill = agent.cwd().join(".crucible/skills/release-notes");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        format!("---\nname: release-notes\ndescription: Release notes\n---\n\n{NOTES}\n"),
    )
    .unwrap();
    let (_, seen) = agent.steer_v2(&session, "/release-notes v1.2").await;
    log.extend(seen);
    std::fs::write(agent.cwd().join("release"), "").unwrap();
    log.extend(agent.until_idle(&session).await);
    // The model reads the skill's instructions and the request.
    let chat = server.chat_requests();
    assert_eq!(chat.len(), 2, "one more model request, not a new turn");
    let steered = user_texts_after_the_tool_result(&chat[1]);
    assert_eq!(steered.len(), 1, "{steered:?}");
    assert!(
        steered[0].contains(NOTES) && steered[0].ends_with("v1.2"),
        "{steered:?}"
    );
    // The user is shown what they sent.
    assert!(
        messages(&log, &session)
            .iter()
            .any(|m| m.role == "user" && m.text == "/release-notes v1.2"),
        "{log:#?}"
    );
}

#[tokio::test]
async fn rewind_takes_back_a_steered_turn_whole_from_its_prompt() {
    let (server, mut agent, session, _, _) = turn_in_a_slow_tool().await;
    agent.steer_v2(&session, "also say hi").await;
    std::fs::write(agent.cwd().join("release"), "").unwrap();
    agent.until_idle(&session).await;
    // The steered message is part of the turn it joined: one turn back is
    // back to before "run it".
    let rewind = agent.start_prompt_v2(&session, "/rewind 1").await;
    let (mut log, _) = agent.prompt_ack(rewind).await;
    log.extend(agent.until_idle(&session).await);
    let report: String = messages(&log, &session)
        .iter()
        .filter(|m| m.role == "agent")
        .map(|m| m.text.clone())
        .collect();
    assert!(
        report.contains("1 turn") && report.contains("run it"),
        "{report}"
    );
    let next = agent.start_prompt_v2(&session, "fresh start").await;
    agent.prompt_ack(next).await;
    agent.until_idle(&session).await;
    let sent = server.chat_requests().last().unwrap().body["messages"].to_string();
    assert!(sent.contains("fresh start"), "{sent}");
    assert!(
        !sent.contains("run it") && !sent.contains("also say hi"),
        "{sent}"
    );
}
