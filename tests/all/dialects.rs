//! Tool calls a local model wrote as text, through the binary: each
//! dialect's call runs like a native one (announced, asked about when it
//! writes, run), its text is not shown as the answer, and the next request
//! carries the call and its result in the provider's own structured form.
//! Names and arguments a model got slightly wrong are repaired; what cannot
//! be repaired reaches the model as an error with the tool's schema.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::support::harness::{
    Agent, LlmServer, Recorded, Reply, Split, Wire, agent_text, answer_permission, openai_stream,
    tool_updates,
};

/// One answer of `wire` whose text comes in `pieces`, ending with `finish`
/// (OpenAI's words: `stop`, `length`).
fn text_answer(wire: Wire, pieces: &[&str], finish: &str) -> Reply {
    let bytes = match wire {
        Wire::OpenAi => {
            let deltas: Vec<Value> = pieces.iter().map(|p| json!({ "content": p })).collect();
            openai_stream(&deltas, finish, (40, 20))
        }
        Wire::Ollama => {
            let mut out = String::new();
            for piece in pieces {
                out.push_str(&json!({"model": "test-model", "message": {"role": "assistant", "content": piece}, "done": false}).to_string());
                out.push('\n');
            }
            let reason = if finish == "length" { "length" } else { "stop" };
            out.push_str(&json!({"model": "test-model", "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": reason, "prompt_eval_count": 40, "eval_count": 20}).to_string());
            out.push('\n');
            out.into_bytes()
        }
        Wire::Anthropic => {
            let mut out = String::new();
            let mut event = |name: &str, data: Value| {
                out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
            };
            event(
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test-model", "content": [], "stop_reason": null, "usage": {"input_tokens": 40, "output_tokens": 1}}}),
            );
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            );
            for piece in pieces {
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
                );
            }
            event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            );
            let reason = if finish == "length" {
                "max_tokens"
            } else {
                "end_turn"
            };
            event(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 20}}),
            );
            event("message_stop", json!({"type": "message_stop"}));
            out.into_bytes()
        }
    };
    let reply = Reply::stream(bytes, Split::Every(7));
    match wire {
        Wire::Ollama => reply.ndjson(),
        _ => reply,
    }
}

/// A server that answers the first chat request with `first` (its text in
/// pieces, as `wire` streams it), and every later one with "Done.".
async fn server(wire: Wire, first: Vec<String>, finish: &'static str) -> LlmServer {
    let answered = Arc::new(Mutex::new(0usize));
    LlmServer::start(move |request: &Recorded| {
        if wire.is_metadata(&request.path) {
            return wire.models();
        }
        if let Some(reply) = Wire::warm_up(request) {
            return reply;
        }
        let mut n = answered.lock().unwrap();
        *n += 1;
        let pieces: Vec<&str> = first.iter().map(String::as_str).collect();
        match *n {
            1 => text_answer(wire, &pieces, finish),
            _ => text_answer(wire, &["Done."], "stop"),
        }
    })
    .await
}

fn config(wire: Wire, server: &LlmServer) -> String {
    let model = match wire {
        Wire::Anthropic => "claude-test-model",
        _ => "test-model",
    };
    format!(
        "[chat]\ndefault_provider = \"local\"\n\n[llm.providers.local]\ntype = \"{}\"\nendpoint = \"{}\"\ndefault_model = \"{model}\"\napi_key = \"sk-test\"\nretry_base_delay_ms = 20\n",
        wire.kind(),
        wire.endpoint(server)
    )
}

/// Splits `text` into pieces of about `size` characters, as a server streams it.
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// The second chat request: what the model got back.
fn second_request(server: &LlmServer) -> Value {
    let chat = server.chat_requests();
    assert_eq!(chat.len(), 2, "{chat:?}");
    chat[1].body.clone()
}

/// The call and its result as the second request carries them, in the
/// wire's own form: (tool name, arguments, result text).
fn native_call_and_result(wire: Wire, body: &Value) -> (String, Value, String) {
    let messages = body["messages"].as_array().unwrap();
    match wire {
        Wire::OpenAi | Wire::Ollama => {
            let assistant = messages
                .iter()
                .rev()
                .find(|m| m["role"] == "assistant")
                .unwrap();
            let call = &assistant["tool_calls"][0]["function"];
            let arguments = match &call["arguments"] {
                Value::String(text) => serde_json::from_str(text).unwrap(),
                other => other.clone(),
            };
            let result = messages.iter().rev().find(|m| m["role"] == "tool").unwrap();
            (
                call["name"].as_str().unwrap().to_string(),
                arguments,
                result["content"].as_str().unwrap().to_string(),
            )
        }
        Wire::Anthropic => {
            let blocks = |role: &str| {
                messages.iter().rev().find(|m| m["role"] == role).unwrap()["content"]
                    .as_array()
                    .unwrap()
                    .clone()
            };
            let call = blocks("assistant")
                .into_iter()
                .find(|b| b["type"] == "tool_use")
                .unwrap();
            let result = blocks("user")
                .into_iter()
                .find(|b| b["type"] == "tool_result")
                .unwrap();
            assert_eq!(result["tool_use_id"], call["id"]);
            let text = match &result["content"] {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            (
                call["name"].as_str().unwrap().to_string(),
                call["input"].clone(),
                text,
            )
        }
    }
}

#[tokio::test]
async fn each_dialects_read_runs_and_goes_back_in_native_form() {
    let read = |path: &str| json!({"path": path});
    let cases = [
        (
            "hermes",
            Wire::OpenAi,
            "Let me read it.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"hello.txt\"}}\n</tool_call>",
        ),
        (
            "qwen xml",
            Wire::Ollama,
            "<function=read_file>\n<parameter=path>\nhello.txt\n</parameter>\n</function>\n</tool_call>",
        ),
        (
            "llama json",
            Wire::Anthropic,
            "<|python_tag|>{\"name\": \"read_file\", \"parameters\": {\"path\": \"hello.txt\"}}<|eom_id|>",
        ),
        (
            "mistral",
            Wire::OpenAi,
            "[TOOL_CALLS]read_file[ARGS]{\"path\": \"hello.txt\"}",
        ),
        (
            "harmony",
            Wire::Ollama,
            "<|channel|>commentary to=functions.read_file <|constrain|>json<|message|>{\"path\":\"hello.txt\"}<|call|>",
        ),
        (
            "fenced json",
            Wire::Anthropic,
            "Reading it:\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"hello.txt\"}}\n```",
        ),
    ];
    for (dialect, wire, answer) in cases {
        let server = server(wire, pieces(answer, 5), "stop").await;
        let mut agent = Agent::spawn(&config(wire, &server)).await;
        std::fs::write(agent.cwd().join("hello.txt"), "greetings from disk\n").unwrap();
        let session = agent.start_session().await;
        let (seen, response) = agent.prompt(&session, "What does hello.txt say?").await;
        assert_eq!(
            response["result"]["stopReason"], "end_turn",
            "{dialect}: {response}"
        );
        let calls = tool_updates(&seen, "tool_call");
        assert_eq!(calls.len(), 1, "{dialect}: {seen:?}");
        assert_eq!(calls[0]["title"], "Read hello.txt", "{dialect}");
        let shown = agent_text(&seen, &session);
        assert!(
            !shown.contains("hello.txt\""),
            "{dialect}: the call was shown: {shown}"
        );
        assert!(
            !shown.contains("read_file"),
            "{dialect}: the call was shown: {shown}"
        );
        assert!(shown.ends_with("Done."), "{dialect}: {shown}");
        let (name, arguments, result) = native_call_and_result(wire, &second_request(&server));
        assert_eq!(name, "read_file", "{dialect}");
        assert_eq!(arguments, read("hello.txt"), "{dialect}");
        assert!(
            result.contains("greetings from disk"),
            "{dialect}: {result}"
        );
    }
}

#[tokio::test]
async fn a_text_write_asks_permission_and_writes_the_file() {
    let answer = "I'll create it.\n<tool_call>\n<function=write_file>\n<parameter=path>\nnotes.txt\n</parameter>\n<parameter=content>\nfirst line\n\n</parameter>\n</function>\n</tool_call>";
    let server = server(Wire::OpenAi, pieces(answer, 3), "stop").await;
    let mut agent = Agent::spawn(&config(Wire::OpenAi, &server)).await;
    let session = agent.start_session().await;
    let prompt = agent.start_prompt(&session, "Write notes.txt").await;
    let asked = answer_permission(&mut agent, "allow_once").await;
    assert_eq!(asked["params"]["toolCall"]["title"], "Write notes.txt");
    let (seen, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        std::fs::read_to_string(agent.cwd().join("notes.txt")).unwrap(),
        "first line\n"
    );
    assert_eq!(agent_text(&seen, &session), "I'll create it.\nDone.");
    let body = second_request(&server);
    let assistant = &body["messages"].as_array().unwrap()[2];
    assert_eq!(assistant["content"], "I'll create it.\n", "{assistant}");
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "write_file");
}

#[tokio::test]
async fn a_repaired_name_and_repaired_arguments_run() {
    let answer = "<tool_call>{\"name\": \"ReadFile\", \"arguments\": \"{'path': 'hello.txt',}\"}</tool_call>";
    let server = server(Wire::OpenAi, pieces(answer, 4), "stop").await;
    let mut agent = Agent::spawn(&config(Wire::OpenAi, &server)).await;
    std::fs::write(agent.cwd().join("hello.txt"), "greetings from disk\n").unwrap();
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "Read hello.txt").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let done: Vec<_> = tool_updates(&seen, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "completed")
        .collect();
    assert_eq!(done.len(), 1, "{seen:?}");
    // The model sees the call as it ran: the tool's own name, clean JSON.
    let (name, arguments, result) = native_call_and_result(Wire::OpenAi, &second_request(&server));
    assert_eq!(name, "read_file");
    assert_eq!(arguments, json!({"path": "hello.txt"}));
    assert!(result.contains("greetings from disk"), "{result}");
}

/// A structured call whose arguments a model broke, as servers stream it.
fn structured_call(name: &str, arguments: &str, finish: &str) -> Reply {
    let bytes = openai_stream(
        &[
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
            "function": {"name": name, "arguments": arguments}}]}),
        ],
        finish,
        (40, 20),
    );
    Reply::stream(bytes, Split::Every(9))
}

/// The error result the model got for its first call, the updates and the
/// text shown.
async fn error_the_model_got(first: Reply) -> (String, Vec<Value>, String) {
    let answered = Arc::new(Mutex::new(0usize));
    let server = LlmServer::start(move |request: &Recorded| {
        if Wire::OpenAi.is_metadata(&request.path) {
            return Wire::OpenAi.models();
        }
        let mut n = answered.lock().unwrap();
        *n += 1;
        match *n {
            1 => first.clone(),
            _ => text_answer(Wire::OpenAi, &["Sorry."], "stop"),
        }
    })
    .await;
    let mut agent = Agent::spawn(&config(Wire::OpenAi, &server)).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "Write a file").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let (_, _, result) = native_call_and_result(Wire::OpenAi, &second_request(&server));
    let shown = agent_text(&seen, &session);
    (result, seen, shown)
}

#[tokio::test]
async fn unrepairable_arguments_reach_the_model_as_an_error_with_the_schema() {
    let (result, seen, _) = error_the_model_got(structured_call(
        "write_file",
        r#"{"path": "a.txt", "content": "x" "more"}"#,
        "tool_calls",
    ))
    .await;
    assert!(result.contains("not valid JSON"), "{result}");
    assert!(
        result.contains("\"required\":[\"path\",\"content\"]"),
        "{result}"
    );
    let failed: Vec<_> = tool_updates(&seen, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{seen:?}");
    // Arguments that parse but miss a field get the schema too.
    let (result, _, _) = error_the_model_got(structured_call(
        "read_file",
        r#"{"offset": 3}"#,
        "tool_calls",
    ))
    .await;
    assert!(result.contains("missing field `path`"), "{result}");
    assert!(result.contains("\"required\":[\"path\"]"), "{result}");
}

#[tokio::test]
async fn a_call_cut_off_by_the_length_limit_is_reported_as_cut_off() {
    let (result, _, _) = error_the_model_got(structured_call(
        "write_file",
        r#"{"path": "a.txt", "content": "a long"#,
        "length",
    ))
    .await;
    assert!(
        result.contains("cut off by the output token limit"),
        "{result}"
    );
    // A text call cut off the same way.
    let text = "<tool_call>{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"a long";
    let (result, _, shown) =
        error_the_model_got(text_answer(Wire::OpenAi, &[text], "length")).await;
    assert!(
        result.contains("cut off by the output token limit"),
        "{result}"
    );
    assert_eq!(shown, "Sorry.");
}

#[tokio::test]
async fn calls_streamed_all_at_index_zero_both_run() {
    let deltas = [
        json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "write_file", "arguments": "{\"path\": \"a.txt\", \"content\": \"A\"}"}}]}),
        json!({"tool_calls": [{"index": 0, "id": "call_b", "type": "function", "function": {"name": "write_file", "arguments": "{\"path\": \"b.txt\", "}}]}),
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"content\": \"B\"}"}}]}),
    ];
    let first = Reply::stream(
        openai_stream(&deltas, "tool_calls", (40, 20)),
        Split::Every(13),
    );
    let answered = Arc::new(Mutex::new(0usize));
    let server = LlmServer::start(move |request: &Recorded| {
        if Wire::OpenAi.is_metadata(&request.path) {
            return Wire::OpenAi.models();
        }
        let mut n = answered.lock().unwrap();
        *n += 1;
        match *n {
            1 => first.clone(),
            _ => text_answer(Wire::OpenAi, &["Done."], "stop"),
        }
    })
    .await;
    let config = format!(
        "{}\n[agent]\ndefault_mode = \"auto\"\n",
        config(Wire::OpenAi, &server)
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (_, response) = agent.prompt(&session, "Write a.txt and b.txt").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        std::fs::read_to_string(agent.cwd().join("a.txt")).unwrap(),
        "A"
    );
    assert_eq!(
        std::fs::read_to_string(agent.cwd().join("b.txt")).unwrap(),
        "B"
    );
    let body = second_request(&server);
    let results = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    assert_eq!(results, 2, "{body}");
}
