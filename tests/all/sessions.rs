//! Sessions survive the agent: recorded under the data dir as they happen,
//! listed, loaded (with the conversation replayed) and resumed by a new
//! process after a SIGKILL, deleted, tolerant of damaged files, and never
//! open in two processes at once.

use serde_json::{Value, json};

use crate::support::context::{
    SUMMARY, all_text, config_with, is_compaction, system_text, talkative_model, tool_names,
};
use crate::support::harness::{
    Agent, LlmServer, Recorded, Reply, Split, agent_text, answer_permission, config_for,
    conversation, error_message, models_reply, openai_stream, stream_head, user_update,
};
use crate::support::wait::saved_text_of_last_turn;

/// The scripted model: "read notes" asks for `read_file notes.txt`; a tool
/// result is answered by quoting it; "hang" streams a little and then hangs;
/// anything else is echoed.
fn model(request: &Recorded) -> Reply {
    if request.path.ends_with("/models") {
        return models_reply(&["test-model", "other-model"]);
    }
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let reply = if last["role"] == "tool" {
        let result = last["content"].as_str().unwrap_or_default().to_string();
        openai_stream(
            &[
                json!({"content": "The notes say: "}),
                json!({"content": result}),
            ],
            "stop",
            (80, 8),
        )
    } else if request.last_user_text().contains("read notes") {
        openai_stream(
            &[
                json!({"reasoning_content": "I should read the file."}),
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\":\"notes.txt\"}"}}]}),
            ],
            "tool_calls",
            (50, 10),
        )
    } else if request.last_user_text().contains("write") {
        openai_stream(
            &[
                json!({"tool_calls": [{"index": 0, "id": "call_w", "type": "function",
            "function": {"name": "write_file", "arguments": "{\"path\":\"out.txt\",\"content\":\"x\"}"}}]}),
            ],
            "tool_calls",
            (50, 10),
        )
    } else if request.last_user_text().contains("hang") {
        return Reply::stream(stream_head(&["Once ", "upon ", "a "]), Split::Every(9)).hanging();
    } else {
        let text = format!("echo: {}", request.last_user_text());
        openai_stream(&[json!({"content": text})], "stop", (60, 5))
    };
    Reply::stream(reply, Split::Every(13))
}

/// Every message text of a chat request, in order (tool results included).
fn request_texts(request: &Recorded) -> Vec<String> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let mut text = m["content"].as_str().unwrap_or_default().to_string();
            for call in m["tool_calls"].as_array().into_iter().flatten() {
                text.push_str(&format!(
                    "[call {}]",
                    call["function"]["name"].as_str().unwrap()
                ));
            }
            format!("{}: {text}", m["role"].as_str().unwrap())
        })
        .collect()
}

async fn load(agent: &mut Agent, session: &str, cwd: &std::path::Path) -> (Vec<Value>, Value) {
    agent
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        )
        .await
}

#[tokio::test]
async fn a_session_survives_sigkill_and_load_replays_what_the_client_saw() {
    let server = LlmServer::start(model).await;
    let config = config_for(&server, "test-model");
    let mut first = Agent::spawn(&config).await;
    std::fs::write(first.cwd().join("notes.txt"), "buy milk\n").unwrap();
    let session = first.start_session().await;

    let mut live = Vec::new();
    let (seen, response) = first.prompt(&session, "read notes please").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // The first prompt names the session.
    let info = seen
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "session_info_update")
        .expect("a session_info_update with the title");
    assert_eq!(info["params"]["update"]["title"], "read notes please");
    live.push(user_update(&session, "read notes please"));
    live.extend(seen);

    let (_, response) = first
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "auto"}),
        )
        .await;
    assert!(response.get("result").is_some(), "{response}");
    let (seen, _) = first.prompt(&session, "second question").await;
    live.push(user_update(&session, "second question"));
    live.extend(seen);

    // A third turn is streaming when the process is killed.
    let hanging = first.start_prompt(&session, "hang on").await;
    live.push(user_update(&session, "hang on"));
    let mut text = String::new();
    while text != "Once upon a " {
        let chunk = first.wait_for_update("agent_message_chunk").await;
        text.push_str(
            chunk["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap(),
        );
        live.push(chunk);
    }
    // Killed once the writer has saved what the client was shown.
    first
        .wait_saved(&session, "the cut-short turn's text saved", |events| {
            saved_text_of_last_turn(events) == text
        })
        .await;
    first.kill().await;
    let _ = hanging;

    let mut second = Agent::spawn_sharing(&config, &first).await;
    second.initialize().await;
    let (_, listed) = second.call("session/list", json!({})).await;
    let sessions = listed["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{listed}");
    assert_eq!(sessions[0]["sessionId"], session.as_str());
    assert_eq!(sessions[0]["title"], "read notes please");
    assert_eq!(sessions[0]["cwd"], json!(first.cwd()));
    assert!(sessions[0]["updatedAt"].as_str().unwrap().ends_with('Z'));

    let (replayed, response) = load(&mut second, &session, &first.cwd()).await;
    for message in &replayed {
        eprintln!("REPLAY {message}");
    }
    eprintln!("REPLAY {response}");
    let result = &response["result"];
    assert_eq!(result["modes"]["currentModeId"], "auto", "{response}");
    let model = result["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "model")
        .unwrap();
    assert_eq!(model["currentValue"], "test-model");
    // The same conversation, in the same order, only less chunked.
    assert_eq!(
        conversation(&replayed, &session),
        conversation(&live, &session)
    );
    let replayed_kinds: Vec<String> = conversation(&replayed, &session)
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap().to_string())
        .collect();
    assert!(
        replayed_kinds.iter().any(|k| k == "tool_call"),
        "{replayed_kinds:?}"
    );
    assert!(
        replayed_kinds.iter().any(|k| k == "agent_thought_chunk"),
        "{replayed_kinds:?}"
    );
    let tool_done = conversation(&replayed, &session)
        .into_iter()
        .rfind(|u| u["sessionUpdate"] == "tool_call_update")
        .unwrap();
    assert_eq!(tool_done["status"], "completed");

    // A new prompt continues with everything before it in the model's context.
    let before = server.chat_requests().len();
    let (_, response) = second.prompt(&session, "and now?").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let request = &server.chat_requests()[before];
    let texts = request_texts(request);
    let expected_in_order = [
        "user: read notes please",
        "assistant: [call read_file]",
        "tool: ",
        "assistant: The notes say: ",
        "user: second question",
        "assistant: echo: second question",
        "user: hang on",
        "assistant: Once upon a ",
        "user: and now?",
    ];
    let mut at = 0;
    for expected in expected_in_order {
        let found = texts[at..]
            .iter()
            .position(|t| t.starts_with(expected))
            .unwrap_or_else(|| panic!("`{expected}` missing after #{at} in {texts:#?}"));
        at += found + 1;
    }
    assert!(texts.iter().any(|t| t.contains("buy milk")), "{texts:#?}");
}

#[tokio::test]
async fn resume_restores_without_replay_and_delete_removes_the_files() {
    let server = LlmServer::start(model).await;
    let config = config_for(&server, "test-model");
    let mut first = Agent::spawn(&config).await;
    let session = first.start_session().await;
    first.prompt(&session, "remember seven").await;
    first.close_stdin();
    assert!(first.wait_exit().await.success());
    assert!(first.session_dir(&session).join("metadata.json").is_file());
    assert!(first.session_dir(&session).join("history.jsonl").is_file());

    let mut second = Agent::spawn_sharing(&config, &first).await;
    second.initialize().await;
    let (seen, response) = second
        .call(
            "session/resume",
            json!({"sessionId": session, "cwd": first.cwd()}),
        )
        .await;
    assert!(response["result"]["configOptions"].is_array(), "{response}");
    assert!(
        conversation(&seen, &session).is_empty(),
        "resume replays nothing: {seen:?}"
    );
    let before = server.chat_requests().len();
    second.prompt(&session, "what number?").await;
    let texts = request_texts(&server.chat_requests()[before]);
    assert!(
        texts.iter().any(|t| t == "user: remember seven"),
        "{texts:?}"
    );

    let (_, response) = second
        .call("session/delete", json!({"sessionId": session}))
        .await;
    assert!(response.get("result").is_some(), "{response}");
    assert!(!first.session_dir(&session).exists());
    let (_, listed) = second.call("session/list", json!({})).await;
    assert_eq!(listed["result"]["sessions"], json!([]));
    for method in ["session/load", "session/resume"] {
        let (_, response) = second
            .call(
                method,
                json!({"sessionId": session, "cwd": first.cwd(), "mcpServers": []}),
            )
            .await;
        assert_eq!(response["error"]["code"], -32002, "{method}: {response}");
    }
    // Deleting it again succeeds: it is gone, as asked (the spec's SHOULD);
    // so does deleting one that never was.
    for gone in [session.as_str(), "never-was"] {
        let (_, response) = second
            .call("session/delete", json!({"sessionId": gone}))
            .await;
        assert_eq!(response["result"], json!({}), "{response}");
    }
    // The prompt of a deleted session is an unknown session too.
    let (_, response) = second.prompt(&session, "still there?").await;
    assert_eq!(response["error"]["code"], -32002, "{response}");
}

#[tokio::test]
async fn list_filters_by_cwd_newest_first_and_skips_what_it_cannot_read() {
    let server = LlmServer::start(model).await;
    let config = config_for(&server, "test-model");
    let mut first = Agent::spawn(&config).await;
    let a = first.start_session().await;
    first.prompt(&a, "first session").await;
    let elsewhere = tempfile::tempdir().unwrap();
    let (_, response) = first
        .call(
            "session/new",
            json!({"cwd": elsewhere.path(), "mcpServers": []}),
        )
        .await;
    let b = response["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    first.prompt(&b, "second session").await;
    let c = first.new_session().await;
    first.prompt(&c, "third session").await;
    first.close_stdin();
    first.wait_exit().await;

    // Damage: c's metadata is not JSON; a's history ends in a torn line.
    std::fs::write(first.session_dir(&c).join("metadata.json"), "{\"id\": ").unwrap();
    let history = first.session_dir(&a).join("history.jsonl");
    let mut bytes = std::fs::read(&history).unwrap();
    bytes.extend_from_slice(br#"{"event":"update","update":{"kind":"agent_text","te"#);
    std::fs::write(&history, bytes).unwrap();

    let mut second = Agent::spawn_sharing(&config, &first).await;
    second.initialize().await;
    let (_, listed) = second.call("session/list", json!({})).await;
    let ids: Vec<&str> = listed["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [b.as_str(), a.as_str()], "newest first, c skipped");
    let (_, listed) = second
        .call("session/list", json!({"cwd": first.cwd()}))
        .await;
    assert_eq!(listed["result"]["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(listed["result"]["sessions"][0]["sessionId"], a.as_str());

    let (_, response) = load(&mut second, &c, &first.cwd()).await;
    let message = error_message(&response);
    assert!(
        message.contains("metadata.json") && message.contains("sessions delete"),
        "{message}"
    );

    let (replayed, response) = load(&mut second, &a, &first.cwd()).await;
    assert!(response.get("result").is_some(), "{response}");
    let conversation = conversation(&replayed, &a);
    assert_eq!(conversation[0]["content"]["text"], "first session");
    assert_eq!(conversation[1]["content"]["text"], "echo: first session");
    assert!(
        second.stderr().contains("incomplete"),
        "{}",
        second.stderr()
    );
    // The session goes on, and its history stays readable line by line.
    let (_, response) = second.prompt(&a, "more").await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let (_, response) = second.call("session/close", json!({"sessionId": a})).await;
    assert!(response.get("result").is_some(), "{response}");
    let text = std::fs::read_to_string(&history).unwrap();
    assert!(text.ends_with('\n'));
    for line in text.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
}

#[tokio::test]
async fn two_processes_never_have_one_session_open_at_once() {
    let server = LlmServer::start(model).await;
    let config = config_for(&server, "test-model");
    let mut first = Agent::spawn(&config).await;
    let session = first.start_session().await;
    first.prompt(&session, "hello").await;

    let mut second = Agent::spawn_sharing(&config, &first).await;
    second.initialize().await;
    let (_, response) = load(&mut second, &session, &first.cwd()).await;
    assert_eq!(response["error"]["code"], -32600, "{response}");
    let message = error_message(&response);
    assert!(
        message.contains("open in another crucible-agent process"),
        "{message}"
    );
    let (_, response) = second
        .call("session/delete", json!({"sessionId": session}))
        .await;
    assert!(error_message(&response).contains("another"), "{response}");
    // The failed load left nothing open here.
    let (_, response) = second.prompt(&session, "anyone?").await;
    assert_eq!(response["error"]["code"], -32002, "{response}");

    // Closed in the first process, it opens in the second.
    let (_, response) = first
        .call("session/close", json!({"sessionId": session}))
        .await;
    assert!(response.get("result").is_some(), "{response}");
    let (replayed, response) = load(&mut second, &session, &first.cwd()).await;
    assert!(response.get("result").is_some(), "{response}");
    assert_eq!(conversation(&replayed, &session).len(), 2);
    // Loading it again while it is open replays again; two loads sent at
    // once are each answered once, each after its replay.
    let cwd = first.cwd();
    let params = json!({"sessionId": session, "cwd": cwd, "mcpServers": []});
    let one = second.request("session/load", params.clone()).await;
    let two = second.request("session/load", params).await;
    let (replayed, response) = second.response(one).await;
    assert!(response.get("result").is_some(), "{response}");
    assert_eq!(conversation(&replayed, &session).len(), 2);
    let (replayed, response) = second.response(two).await;
    assert!(response.get("result").is_some(), "{response}");
    assert_eq!(conversation(&replayed, &session).len(), 2);
    // The first process cannot take it back while the second has it.
    let cwd = first.cwd();
    let (_, response) = load(&mut first, &session, &cwd).await;
    assert_eq!(response["error"]["code"], -32600, "{response}");
}

#[tokio::test]
async fn always_answers_and_the_model_choice_survive_a_restart() {
    let server = LlmServer::start(model).await;
    let config = config_for(&server, "test-model");
    let mut first = Agent::spawn(&config).await;
    let session = first.start_session().await;
    // Wait for the model list, so `other-model` is a value of the option.
    first.wait_for_update("config_option_update").await;
    let (_, response) = first
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "other-model"}),
        )
        .await;
    assert!(response.get("result").is_some(), "{response}");
    let id = first.start_prompt(&session, "write the file").await;
    answer_permission(&mut first, "allow_always").await;
    let (_, response) = first.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    first.wait_saved_turns(&session, 1).await;
    first
        .wait_saved_metadata(&session, "the model and the answer saved", |m| {
            m["model"] == "other-model" && m["permissions"]["write_file"] == true
        })
        .await;
    first.kill().await;

    let mut second = Agent::spawn_sharing(&config, &first).await;
    second.initialize().await;
    let (_, response) = load(&mut second, &session, &first.cwd()).await;
    let model = response["result"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "model")
        .unwrap()
        .clone();
    assert_eq!(model["currentValue"], "other-model", "{response}");
    // The "always" answer holds: the same tool runs without a question.
    let before = server.chat_requests().len();
    let (seen, response) = second.prompt(&session, "write it again").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        !seen
            .iter()
            .any(|m| m["method"] == "session/request_permission"),
        "asked again: {seen:?}"
    );
    assert_eq!(server.chat_requests()[before].body["model"], "other-model");
    let metadata: Value = serde_json::from_slice(
        &std::fs::read(first.session_dir(&session).join("metadata.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(metadata["permissions"]["write_file"], true, "{metadata}");
    assert_eq!(metadata["model"], "other-model");
}

/// `/context` in `session`, as the report text.
async fn context_report(agent: &mut Agent, session: &str) -> String {
    let (seen, response) = agent.prompt(session, "/context").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    agent_text(&seen, session)
}

#[tokio::test]
async fn context_operations_and_checkpoints_survive_a_restart() {
    let server = LlmServer::start(talkative_model(40)).await;
    let config = config_with(&server.base_url(), 32_768, "");
    let mut first = Agent::spawn(&config).await;
    let session = first.start_session().await;
    first.prompt(&session, "first question").await;
    first.prompt(&session, "second question").await;
    let (seen, _) = first
        .prompt(&session, "/context checkpoint two-turns")
        .await;
    assert!(agent_text(&seen, &session).contains("Checkpoint `two-turns` saved"));
    first.prompt(&session, "third question").await;
    let (seen, _) = first.prompt(&session, "/context pop 2").await;
    assert!(agent_text(&seen, &session).contains("Removed the last 2 entries"));
    first.prompt(&session, "fourth question").await;
    let before = context_report(&mut first, &session).await;
    assert!(before.contains("- two-turns (4 entries)"), "{before}");
    assert!(!before.contains("third question"), "{before}");
    first.wait_saved_turns(&session, 4).await;
    first.kill().await;

    let mut second = Agent::spawn_sharing(&config, &first).await;
    second.initialize().await;
    let (_, response) = load(&mut second, &session, &first.cwd()).await;
    assert!(response.get("result").is_some(), "{response}");
    // The same entries, token counts (the learned drift too) and checkpoint.
    assert_eq!(context_report(&mut second, &session).await, before);

    let (seen, _) = second.prompt(&session, "/context rollback two-turns").await;
    let text = agent_text(&seen, &session);
    assert!(
        text.contains("Rolled back to checkpoint `two-turns`: 4 entries"),
        "{text}"
    );
    second.prompt(&session, "after rollback").await;
    let last = server.chat_requests().last().cloned().unwrap();
    let texts = request_texts(&last);
    let texts: Vec<&str> = texts.iter().map(|t| t.split(':').next().unwrap()).collect();
    assert_eq!(
        texts,
        ["system", "user", "assistant", "user", "assistant", "user"],
        "{}",
        all_text(&last)
    );
    let text = all_text(&last);
    assert!(text.contains("first question") && text.contains("second question"));
    assert!(!text.contains("third question") && !text.contains("fourth question"));
    assert!(text.ends_with("after rollback"), "{text}");
}

#[tokio::test]
async fn a_compaction_before_a_restart_is_what_the_model_gets_after_it() {
    let server = LlmServer::start(talkative_model(40)).await;
    let config = config_with(&server.base_url(), 32_768, "");
    let mut first = Agent::spawn(&config).await;
    let session = first.start_session().await;
    for n in 0..3 {
        first.prompt(&session, &format!("question {n}")).await;
    }
    let (seen, _) = first.prompt(&session, "/compact").await;
    assert!(agent_text(&seen, &session).contains("Summarized 2 entries"));
    first.wait_saved_turns(&session, 3).await;
    first
        .wait_saved(&session, "the compaction saved", |events| {
            events.iter().any(|e| e["event"] == "context")
        })
        .await;
    first.kill().await;

    let mut second = Agent::spawn_sharing(&config, &first).await;
    second.initialize().await;
    let (_, response) = load(&mut second, &session, &first.cwd()).await;
    assert!(response.get("result").is_some(), "{response}");
    second.prompt(&session, "next").await;
    let last = server.chat_requests().last().cloned().unwrap();
    assert!(!is_compaction(&last));
    let text = all_text(&last);
    assert!(text.contains(SUMMARY), "{text}");
    assert!(!text.contains("question 0"), "{text}");
    assert!(
        text.contains("question 1") && text.contains("question 2"),
        "{text}"
    );
}

#[tokio::test]
async fn the_active_agent_card_comes_back_with_the_session() {
    let server = LlmServer::start(talkative_model(10)).await;
    let config = config_with(&server.base_url(), 32_768, "");
    let mut first = Agent::spawn(&config).await;
    let session = first.start_session().await;
    let (seen, _) = first.prompt(&session, "/agent reviewer").await;
    assert!(agent_text(&seen, &session).contains("Agent `reviewer`"));
    first
        .wait_saved_metadata(&session, "the agent card saved", |m| {
            m["agent"] == "reviewer"
        })
        .await;
    first.kill().await;

    let mut second = Agent::spawn_sharing(&config, &first).await;
    second.initialize().await;
    let (_, response) = load(&mut second, &session, &first.cwd()).await;
    let options = response["result"]["configOptions"].as_array().unwrap();
    let current = |id: &str| {
        options.iter().find(|o| o["id"] == id).unwrap()["currentValue"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(current("agent"), "reviewer", "{response}");
    // The mode the card chose was saved with the session and stays.
    assert_eq!(current("mode"), "plan", "{response}");
    second.prompt(&session, "review this").await;
    let last = server.chat_requests().last().cloned().unwrap();
    assert!(system_text(&last).contains("# Agent: reviewer"));
    assert!(system_text(&last).contains("careful code reviewer"));
    let mut tools = tool_names(&last);
    tools.sort();
    assert_eq!(tools, ["glob", "grep", "list_dir", "read_file", "todo"]);
}

#[tokio::test]
async fn a_kill_between_tool_rounds_keeps_the_finished_round_and_the_always_answer() {
    // The model's answer to the first tool result never comes: the process
    // is killed while waiting for it.
    let hung = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = LlmServer::start({
        let hung = hung.clone();
        move |request: &Recorded| {
            let messages = request.body["messages"].as_array().cloned();
            let last_is_tool = messages
                .and_then(|m| m.last().cloned())
                .is_some_and(|m| m["role"] == "tool");
            if last_is_tool && !hung.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Reply::stream(stream_head(&["Writing went "]), Split::Every(5)).hanging();
            }
            model(request)
        }
    })
    .await;
    let config = config_for(&server, "test-model");
    let mut first = Agent::spawn(&config).await;
    let session = first.start_session().await;
    let _id = first.start_prompt(&session, "write the file").await;
    answer_permission(&mut first, "allow_always").await;
    first
        .wait_for(|m| {
            m["params"]["update"]["sessionUpdate"] == "tool_call_update"
                && m["params"]["update"]["status"] == "completed"
        })
        .await;
    first.wait_for_update("agent_message_chunk").await;
    first
        .wait_saved(&session, "the answer so far saved", |events| {
            saved_text_of_last_turn(events) == "Writing went "
        })
        .await;
    first
        .wait_saved_metadata(&session, "the answer to the question saved", |m| {
            m["permissions"]["write_file"] == true
        })
        .await;
    // Saved when it was given, not at the end of the turn.
    let metadata: Value = serde_json::from_slice(
        &std::fs::read(first.session_dir(&session).join("metadata.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(metadata["permissions"]["write_file"], true, "{metadata}");
    first.kill().await;

    let mut second = Agent::spawn_sharing(&config, &first).await;
    second.initialize().await;
    let (_, response) = load(&mut second, &session, &first.cwd()).await;
    assert!(response.get("result").is_some(), "{response}");
    let before = server.chat_requests().len();
    let (_, response) = second.prompt(&session, "and now?").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let texts = request_texts(&server.chat_requests()[before]);
    assert_eq!(texts.len(), 6, "{texts:#?}");
    assert_eq!(texts[1], "user: write the file");
    assert_eq!(texts[2], "assistant: [call write_file]");
    assert!(texts[3].starts_with("tool: "), "{texts:#?}");
    assert!(texts[3].len() > "tool: ".len(), "{texts:#?}");
    assert_eq!(texts[4], "assistant: Writing went ");
    assert_eq!(texts[5], "user: and now?");
    assert_eq!(
        std::fs::read_to_string(first.cwd().join("out.txt")).unwrap(),
        "x"
    );

    // A second load (after this process too is killed) rebuilds the same context.
    second.wait_saved_turns(&session, 2).await;
    second.kill().await;
    let mut third = Agent::spawn_sharing(&config, &first).await;
    third.initialize().await;
    load(&mut third, &session, &first.cwd()).await;
    let before = server.chat_requests().len();
    third.prompt(&session, "once more").await;
    let again = request_texts(&server.chat_requests()[before]);
    assert_eq!(again[..6], texts[..]);
    assert_eq!(again.len(), 8, "{again:#?}");
}

#[tokio::test]
async fn an_automatic_compaction_is_replayed_after_a_restart() {
    let server = LlmServer::start(talkative_model(1600)).await;
    let config = config_with(&server.base_url(), 8192, "");
    let mut first = Agent::spawn(&config).await;
    let session = first.start_session().await;
    let mut n = 0;
    while !server.chat_requests().iter().any(is_compaction) {
        assert!(n < 12, "no automatic compaction");
        let question = format!("Question {n}: {}", "why ".repeat(300));
        let (_, response) = first.prompt(&session, &question).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        n += 1;
    }
    let before = context_report(&mut first, &session).await;
    assert!(before.contains("1. summary"), "{before}");
    first.wait_saved_turns(&session, n).await;
    first.kill().await;

    let mut second = Agent::spawn_sharing(&config, &first).await;
    second.initialize().await;
    let (_, response) = load(&mut second, &session, &first.cwd()).await;
    assert!(response.get("result").is_some(), "{response}");
    assert_eq!(context_report(&mut second, &session).await, before);
    let count = server.chat_requests().len();
    second.prompt(&session, "short one").await;
    let next = server.chat_requests()[count..]
        .iter()
        .find(|r| !is_compaction(r) && !r.path.ends_with("/models"))
        .cloned()
        .unwrap();
    let text = all_text(&next);
    assert!(text.contains(SUMMARY), "{text}");
    assert!(!text.contains("Question 0"), "{text}");
}
