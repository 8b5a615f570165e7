//! What keeps a model's first token close: a small window gets a brief
//! fixed prompt, a local server's prompt cache is warmed before the first
//! prompt (invisibly, and never twice), and every request begins with the
//! one before it, byte for byte, so a server's prefix cache keeps working.

use serde_json::{Value, json};

use crate::support::context::{config_with, is_compaction, talkative_model};
use crate::support::harness::{
    Agent, LlmServer, Recorded, Reply, Split, WIRES, Wire, agent_text, config_for, text_stream,
};

fn tools_of(request: &Recorded) -> Value {
    request.body["tools"].clone()
}

/// The request without what only marks cache breakpoints (Anthropic's
/// `cache_control`, which moves to the latest turn by design).
fn without_breakpoints(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| key.as_str() != "cache_control")
                .map(|(key, value)| (key.clone(), without_breakpoints(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_breakpoints).collect()),
        other => other.clone(),
    }
}

#[tokio::test]
async fn a_new_session_warms_a_local_server_once_and_the_client_sees_nothing_of_it() {
    let server = LlmServer::chat(|_| Reply::stream(text_stream(&["hello"]), Split::Whole)).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let warmups = server.wait_warmups(1).await;
    let warmup = &warmups[0].body;
    assert_eq!(warmup["max_tokens"], 1, "{warmup}");
    assert_eq!(warmup["messages"].as_array().unwrap().len(), 1, "{warmup}");

    let (seen, response) = agent.prompt(&session, "hi").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(agent_text(&seen, &session), "hello");
    let chat = server.chat_requests();
    assert_eq!(chat.len(), 1, "the prompt is one request");
    // The prompt begins with what was warmed: the system prompt and tools.
    assert_eq!(chat[0].body["messages"][0], warmup["messages"][0]);
    assert_eq!(tools_of(&chat[0]), warmup["tools"]);
    assert_eq!(server.warmups().len(), 1, "warmed once");
    // Nothing of the warm-up reached the client: its text ("Hello" from
    // the text fixture) was never shown, and the usage is the prompt's own.
    let shown: Vec<&Value> = seen
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .collect();
    assert_eq!(shown.len(), 1, "{shown:?}");
}

#[tokio::test]
async fn a_loaded_session_is_warmed_with_its_history() {
    let server = LlmServer::chat(|request| {
        let answer = format!("You said: {}", request.last_user_text());
        Reply::stream(text_stream(&[&answer]), Split::Whole)
    })
    .await;
    let config = config_for(&server, "test-model");
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    agent.prompt(&session, "remember this").await;
    agent.close_stdin();
    assert!(agent.wait_exit().await.success());

    let before = server.warmups().len();
    let mut again = Agent::spawn_sharing(&config, &agent).await;
    again.initialize().await;
    let (_, loaded) = again.load(&session, agent.cwd()).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let warmups = server.wait_warmups(before + 1).await;
    let warm = warmups[before].body["messages"].as_array().unwrap();
    let texts: Vec<&str> = warm.iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(texts.contains(&"remember this"), "{texts:?}");
    assert!(texts.contains(&"You said: remember this"), "{texts:?}");
}

#[tokio::test]
async fn a_prompt_during_the_warm_up_waits_for_it_and_prewarm_false_turns_it_off() {
    let server = LlmServer::chat(|_| Reply::stream(text_stream(&["ok"]), Split::Whole)).await;
    let gate = server.hold_warmups();
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    server.wait_warmups(1).await;
    let id = agent.start_prompt(&session, "hi").await;
    // A slow server: it reads the warm-up for a while (the sleep is that
    // simulated reading). A prompt request that comes at any time before
    // the warm-up is answered is the bug, however late it comes.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let warm_up_answered = std::time::Instant::now();
    gate.notify_one();
    let (_, response) = agent.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.chat_requests();
    assert!(
        requests.iter().all(|r| r.arrived >= warm_up_answered),
        "the prompt went out while the warm-up was still being read"
    );
    assert_eq!(requests.len(), 1);

    let quiet = LlmServer::chat(|_| Reply::stream(text_stream(&["ok"]), Split::Whole)).await;
    let config = config_for(&quiet, "test-model") + "prewarm = false\n";
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (_, response) = agent.prompt(&session, "hi").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(quiet.warmups().is_empty());
}

#[tokio::test]
async fn a_cancelled_prompt_waiting_for_the_warm_up_ends_cancelled() {
    let server = LlmServer::chat(|_| Reply::stream(text_stream(&["ok"]), Split::Whole)).await;
    let _gate = server.hold_warmups();
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    server.wait_warmups(1).await;
    let id = agent.start_prompt(&session, "hi").await;
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (_, response) = agent.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert!(server.chat_requests().is_empty());
}

#[tokio::test]
async fn every_request_begins_with_the_one_before_it_byte_for_byte() {
    for wire in WIRES {
        // The second prompt gets a tool round (a read_file call) first.
        let server = LlmServer::start(move |request| {
            if wire.is_metadata(&request.path) {
                return wire.models();
            }
            let last = request.body["messages"].as_array().unwrap().last().unwrap();
            let text = last.to_string();
            let asks_tool = text.contains("question 2")
                && last["role"] != "tool"
                && !text.contains("tool_result");
            if asks_tool {
                return wire.stream("tool_call", Split::Whole);
            }
            let answer = format!("answer {}", request.body.to_string().len());
            match wire {
                Wire::OpenAi => Reply::stream(text_stream(&[&answer]), Split::Whole),
                _ => wire.stream("text", Split::Whole),
            }
        })
        .await;
        let model = match wire {
            Wire::Anthropic => "claude-test-model",
            _ => "test-model",
        };
        let config = format!(
            "[chat]\ndefault_provider = \"p\"\n\n[llm.providers.p]\ntype = \"{}\"\nendpoint = \"{}\"\ndefault_model = \"{model}\"\napi_key = \"k\"\nretry_base_delay_ms = 20\n",
            wire.kind(),
            wire.endpoint(&server)
        );
        let mut agent = Agent::spawn(&config).await;
        let session = agent.start_session().await;
        for turn in 1..=3 {
            let (_, response) = agent.prompt(&session, &format!("question {turn}")).await;
            assert_eq!(
                response["result"]["stopReason"], "end_turn",
                "{wire:?} {response}"
            );
        }
        let chat = server.chat_requests();
        assert_eq!(chat.len(), 4, "{wire:?}: three prompts and one tool round");
        for pair in chat.windows(2) {
            let (before, after) = (
                without_breakpoints(&pair[0].body),
                without_breakpoints(&pair[1].body),
            );
            for key in ["system", "tools", "model"] {
                assert_eq!(before.get(key), after.get(key), "{wire:?}: `{key}` changed");
            }
            let (old, new) = (
                before["messages"].as_array().unwrap(),
                after["messages"].as_array().unwrap(),
            );
            assert!(new.len() > old.len(), "{wire:?}");
            // Byte for byte: the same text, not just the same values.
            assert_eq!(
                serde_json::to_string(&old[..]).unwrap(),
                serde_json::to_string(&new[..old.len()]).unwrap(),
                "{wire:?}: an earlier message changed"
            );
        }
    }
}

#[tokio::test]
async fn a_summary_request_continues_the_request_before_it_with_its_cache_hints() {
    for wire in WIRES {
        let server = LlmServer::start(move |request| {
            if wire.is_metadata(&request.path) {
                return wire.models();
            }
            wire.stream("text", Split::Whole)
        })
        .await;
        let model = match wire {
            Wire::Anthropic => "claude-test-model",
            _ => "test-model",
        };
        // The cache key asked for, so that it is sent to this OpenAI-style server.
        let cache_key = match wire {
            Wire::OpenAi => "prompt_cache_key = true\n",
            _ => "",
        };
        let config = format!(
            "[chat]\ndefault_provider = \"p\"\n\n[llm.providers.p]\ntype = \"{}\"\nendpoint = \"{}\"\ndefault_model = \"{model}\"\napi_key = \"k\"\nretry_base_delay_ms = 20\n{cache_key}",
            wire.kind(),
            wire.endpoint(&server)
        );
        let mut agent = Agent::spawn(&config).await;
        let session = agent.start_session().await;
        for turn in 1..=2 {
            agent.prompt(&session, &format!("question {turn}")).await;
        }
        let (seen, _) = agent.prompt(&session, "/compact").await;
        let report = agent_text(&seen, &session);
        assert!(report.contains("Summarized"), "{wire:?}: {report}");
        let chat = server.chat_requests();
        let (before, summary) = (
            without_breakpoints(&chat[chat.len() - 2].body),
            &chat[chat.len() - 1].body,
        );
        // Anthropic: the breakpoints are where a turn puts them, the latest on the instruction.
        if wire == Wire::Anthropic {
            let marks = summary.to_string().matches("cache_control").count();
            assert_eq!(marks, 3, "{summary}");
            let last = summary["messages"].as_array().unwrap().last().unwrap();
            assert!(last.to_string().contains("cache_control"), "{last}");
        }
        let summary = without_breakpoints(summary);
        for key in [
            "system",
            "tools",
            "model",
            "prompt_cache_key",
            "tool_choice",
        ] {
            assert_eq!(
                before.get(key),
                summary.get(key),
                "{wire:?}: `{key}` changed"
            );
        }
        if wire == Wire::OpenAi {
            assert_eq!(summary["prompt_cache_key"], session.as_str());
        }
        let (old, new) = (
            before["messages"].as_array().unwrap(),
            summary["messages"].as_array().unwrap(),
        );
        assert_eq!(
            serde_json::to_string(&old[..]).unwrap(),
            serde_json::to_string(&new[..old.len()]).unwrap(),
            "{wire:?}: an earlier message changed"
        );
        // Only the answer and the instruction are new.
        assert_eq!(new.len(), old.len() + 2, "{wire:?}");
        assert!(
            new.last()
                .unwrap()
                .to_string()
                .contains("[Compaction request]")
        );
    }
}

#[tokio::test]
async fn compaction_keeps_the_system_prompt_and_tools_as_they_were() {
    let server = LlmServer::chat(talkative_model(3000)).await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), 4096, "")).await;
    let session = agent.start_session().await;
    for turn in 1..=5 {
        let (_, response) = agent.prompt(&session, &format!("question {turn}")).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    let chat = server.chat_requests();
    assert!(chat.iter().any(is_compaction), "the window never filled");
    let turns: Vec<&Recorded> = chat.iter().filter(|r| !is_compaction(r)).collect();
    for request in &turns[1..] {
        assert_eq!(request.body["messages"][0], turns[0].body["messages"][0]);
        assert_eq!(tools_of(request), tools_of(turns[0]));
    }
}

#[tokio::test]
async fn a_small_window_gets_the_brief_prompt_and_tools_and_a_large_one_the_full() {
    let mut fixed = Vec::new();
    for window in [4096, 32768] {
        let server = LlmServer::chat(|_| Reply::stream(text_stream(&["ok"]), Split::Whole)).await;
        let mut agent = Agent::spawn(&config_with(&server.base_url(), window, "")).await;
        let session = agent.start_session().await;
        agent.prompt(&session, "hi").await;
        let (seen, _) = agent.prompt(&session, "/context").await;
        let report = agent_text(&seen, &session);
        let request = &server.chat_requests()[0];
        let tools = tools_of(request);
        let names: Vec<&str> = tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        // Every tool is offered either way.
        for name in [
            "read_file",
            "write_file",
            "edit_file",
            "list_dir",
            "glob",
            "grep",
            "shell",
        ] {
            assert!(names.contains(&name), "{window}: {names:?}");
        }
        let read_file = tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == "read_file")
            .unwrap();
        let path = &read_file["function"]["parameters"]["properties"]["path"];
        let brief = window == 4096;
        assert_eq!(path.get("description").is_none(), brief, "{window}: {path}");
        assert_eq!(
            report.contains("the tool definitions are the brief ones"),
            brief,
            "{window}: {report}"
        );
        fixed.push(request.body["messages"][0].to_string().len() + tools.to_string().len());
    }
    assert!(
        fixed[0] * 2 < fixed[1],
        "brief {} chars, full {} chars",
        fixed[0],
        fixed[1]
    );
}
