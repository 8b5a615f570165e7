//! The fault matrix (issue 15), through the binary: whatever the provider or
//! the client does, every prompt is answered exactly once, with the right
//! stop reason or a clear message; another session in the same process keeps
//! working; the stored session still loads after a restart.
//!
//! Cells already proved elsewhere, and not repeated here:
//! - provider 401 with a key naming its variable, an unset key, connection
//!   refused, an unknown model (404), `[DONE]`-only and empty streams, a
//!   drop mid-text, a 500 run to the retry limit, a stalled stream:
//!   `provider_errors.rs`;
//! - malformed lines, unknown methods, bad params: `protocol.rs`;
//! - stdin closed mid-turn, cancel while the server is silent: `cancel.rs`;
//! - SIGKILL after and between turns: `sessions.rs`; MCP crashes:
//!   `mcp_sessions.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::harness::{
    Agent, LlmServer, Recorded, Reply, Split, agent_text, config_for, error_message, openai_stream,
    stream_head, text_stream, thought_text,
};

/// The healthy answer every prompt without "fail" in it gets.
const HEALTHY: &str = "all good";

/// A provider that answers `fault(n)` to the n-th prompt containing "fail"
/// (counting from 0) and a short text to every other prompt.
async fn faulty_server(fault: impl Fn(usize) -> Reply + Send + Sync + 'static) -> LlmServer {
    let failing = AtomicUsize::new(0);
    LlmServer::chat(move |request: &Recorded| {
        if request.last_user_text().contains("fail") {
            fault(failing.fetch_add(1, Ordering::SeqCst))
        } else {
            Reply::stream(text_stream(&[HEALTHY]), Split::Every(7))
        }
    })
    .await
}

/// One cell: a session with a healthy turn behind it, then the faulty
/// prompt; asserts the faulty prompt is answered once, a second session and
/// the first one still work, and the session loads in a fresh process.
/// Returns the faulty prompt's notifications and response.
async fn run_cell(_server: &LlmServer, config: &str) -> (Vec<Value>, Value) {
    let mut agent = Agent::spawn(config).await;
    let session = agent.start_session().await;
    let (_, warm) = agent.prompt(&session, "warm up").await;
    assert_eq!(warm["result"]["stopReason"], "end_turn", "{warm}");
    let other = agent.new_session().await;

    let (seen, response) = agent.prompt(&session, "please fail").await;
    assert!(
        response.get("result").is_some() != response.get("error").is_some(),
        "one result or one error: {response}"
    );
    if let Some(error) = response.get("error") {
        assert!(
            error["message"].as_str().is_some_and(|m| m.len() > 10),
            "a message that says something: {response}"
        );
    }

    // The same process serves another session, and this one again.
    let (other_seen, other_response) = agent.prompt(&other, "hello").await;
    assert_eq!(other_response["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&other_seen, &other), HEALTHY);
    let (_, again) = agent.prompt(&session, "once more").await;
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again}");

    // Nothing answered twice: the harness keeps unclaimed responses.
    assert!(
        agent.backlog.iter().all(|m| m.get("method").is_some()),
        "stray responses: {:?}",
        agent.backlog
    );
    agent.close_stdin();
    assert_clean_exit(&mut agent).await;

    assert_session_loads(&agent, &session, &["warm up", "once more"]).await;
    (seen, response)
}

/// The agent exits with 0 and nothing panicked.
async fn assert_clean_exit(agent: &mut Agent) {
    let status = agent.wait_exit().await;
    let log = agent.stderr();
    assert_eq!(status.code(), Some(0), "stderr:\n{log}");
    assert!(!log.contains("panicked"), "{log}");
}

/// A fresh process on `agent`'s data dir loads `session` and replays the
/// user prompts given.
async fn assert_session_loads(agent: &Agent, session: &str, prompts: &[&str]) {
    let mut later = Agent::spawn_sharing(&config_text(agent), agent).await;
    later.initialize().await;
    let (replay, loaded) = later.load(session, agent.cwd()).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let user: String = replay
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect::<Vec<_>>()
        .join("|");
    for prompt in prompts {
        assert!(user.contains(prompt), "{prompt} not replayed: {user}");
    }
}

fn config_text(agent: &Agent) -> String {
    std::fs::read_to_string(agent.cwd().join("config.toml")).unwrap()
}

fn fast_config(server: &LlmServer, extra: &str) -> String {
    format!("{}{extra}", config_for(server, "test-model"))
}

fn full(status: u16, headers: &[(&str, &str)], body: Value) -> Reply {
    Reply::Full {
        status,
        content_type: "application/json",
        body: body.to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn openai_error(status: u16, message: &str) -> Reply {
    full(status, &[], json!({"error": {"message": message}}))
}

#[tokio::test]
async fn rejected_credentials_say_where_to_set_the_key() {
    for status in [401, 403] {
        let server = faulty_server(move |_| openai_error(status, "not allowed")).await;
        let (_, response) = run_cell(&server, &fast_config(&server, "")).await;
        let message = error_message(&response);
        assert!(message.contains(&status.to_string()), "{message}");
        assert!(message.contains("not allowed"), "{message}");
        assert!(
            message.contains("api_key") && message.contains("[llm.providers.local]"),
            "names the fix: {message}"
        );
        // Never retried: the same key fails the same way.
        assert_eq!(server.chat_requests().len(), 4, "status {status}");
    }
}

#[tokio::test]
async fn an_unknown_model_404_is_not_retried_and_names_the_model() {
    let server = faulty_server(|_| openai_error(404, "no such model")).await;
    let (_, response) = run_cell(&server, &fast_config(&server, "")).await;
    let message = error_message(&response);
    assert!(message.contains("test-model"), "{message}");
    assert_eq!(server.chat_requests().len(), 4);
}

#[tokio::test]
async fn a_rate_limit_with_retry_after_waits_then_answers() {
    let server = faulty_server(|n| {
        if n == 0 {
            full(
                429,
                &[("Retry-After", "1")],
                json!({"error": {"message": "slow down"}}),
            )
        } else {
            Reply::stream(text_stream(&["after the wait"]), Split::Whole)
        }
    })
    .await;
    let started = std::time::Instant::now();
    let (seen, response) = run_cell(&server, &fast_config(&server, "")).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let session = session_of(&seen);
    let note = thought_text(&seen, &session);
    assert!(note.contains("429"), "the wait is told: {note}");
    assert_eq!(agent_text(&seen, &session), "after the wait");
    // The server's one second was honoured (a generous lower bound only).
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[tokio::test]
async fn a_rate_limit_asking_for_an_hour_gives_up_at_once_saying_so() {
    let server = faulty_server(|_| {
        full(
            429,
            &[("Retry-After", "3600")],
            json!({"error": {"message": "quota"}}),
        )
    })
    .await;
    let (_, response) = run_cell(&server, &fast_config(&server, "")).await;
    let message = error_message(&response);
    assert!(
        message.contains("429") && message.contains("3600") && message.contains("try again later"),
        "{message}"
    );
}

#[tokio::test]
async fn a_rate_limit_without_retry_after_backs_off_then_gives_up() {
    let server = faulty_server(|_| openai_error(429, "too many")).await;
    let (_, response) = run_cell(&server, &fast_config(&server, "")).await;
    let message = error_message(&response);
    assert!(
        message.contains("429") && message.contains("gave up after 4 attempts"),
        "{message}"
    );
}

#[tokio::test]
async fn a_run_of_500_502_503_is_ridden_out() {
    let server = faulty_server(|n| match n {
        0 => openai_error(500, "boom"),
        1 => openai_error(502, "bad gateway"),
        2 => openai_error(503, "overloaded"),
        _ => Reply::stream(text_stream(&["recovered"]), Split::Every(5)),
    })
    .await;
    let (seen, response) = run_cell(&server, &fast_config(&server, "")).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        agent_text(&seen, &session_of(&seen)).ends_with("recovered"),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_drop_mid_tool_call_arguments_is_reported_and_runs_no_tool() {
    let server = faulty_server(|_| {
        let whole = openai_stream(
            &[
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\": \"notes"}}]}),
            ],
            "tool_calls",
            (1, 1),
        );
        // Cut right after the partial arguments: no finish, no [DONE].
        let text = String::from_utf8(whole).unwrap();
        let cut = text.find("notes").unwrap() + "notes".len();
        let end = text[cut..].find("\n\n").unwrap() + cut + 2;
        Reply::stream(text.as_bytes()[..end].to_vec(), Split::Every(13))
    })
    .await;
    let (seen, response) = run_cell(&server, &fast_config(&server, "")).await;
    let message = error_message(&response);
    assert!(message.contains("ended before"), "{message}");
    assert!(
        !seen
            .iter()
            .any(|m| m["params"]["update"]["sessionUpdate"] == "tool_call"),
        "no tool ran on half its arguments"
    );
}

#[tokio::test]
async fn an_empty_200_is_a_clear_error() {
    let server = faulty_server(|_| Reply::Full {
        status: 200,
        content_type: "text/event-stream",
        body: String::new(),
        headers: Vec::new(),
    })
    .await;
    let (_, response) = run_cell(&server, &fast_config(&server, "")).await;
    assert!(error_message(&response).contains("empty"), "{response}");
}

#[tokio::test]
async fn an_invalid_json_event_is_a_clear_error() {
    let server = faulty_server(|_| {
        let mut bytes = stream_head(&["Half "]);
        bytes.extend_from_slice(b"data: {\"choices\": [{\"delta\": {\"content\": oops\n\n");
        bytes.extend_from_slice(&text_stream(&["never seen"]));
        Reply::stream(bytes, Split::Every(17))
    })
    .await;
    let (seen, response) = run_cell(&server, &fast_config(&server, "")).await;
    let message = error_message(&response);
    assert!(!agent_text(&seen, &session_of(&seen)).contains("never seen"));
    assert!(
        message.to_lowercase().contains("json") || message.contains("invalid"),
        "{message}"
    );
}

#[tokio::test]
async fn keep_alives_then_silence_end_in_the_idle_timeout() {
    let server = faulty_server(|_| {
        Reply::stream(b": keep-alive\n\n".repeat(4), Split::Every(14))
            .paced(Duration::from_millis(300))
            .hanging()
    })
    .await;
    let (_, response) = run_cell(&server, &fast_config(&server, "timeout_secs = 1\n")).await;
    let message = error_message(&response);
    assert!(message.contains("timeout_secs"), "{message}");
}

#[tokio::test]
async fn a_host_that_does_not_resolve_is_named() {
    let config = "[llm.providers.local]\ntype = \"openai\"\nendpoint = \"http://no-such-host.invalid/v1\"\ndefault_model = \"m\"\nretry_base_delay_ms = 20\n";
    let mut agent = Agent::spawn(config).await;
    let session = agent.start_session().await;
    for _ in 0..2 {
        let (_, response) = agent.prompt(&session, "hello").await;
        let message = error_message(&response);
        assert!(message.contains("no-such-host.invalid"), "{message}");
        assert!(message.contains("endpoint"), "{message}");
    }
}

/// The session id of the first chunk of a turn in `seen` (other sessions
/// announce their commands meanwhile).
fn session_of(seen: &[Value]) -> String {
    seen.iter()
        .filter(|m| {
            m["params"]["update"]["sessionUpdate"]
                .as_str()
                .is_some_and(|kind| kind.ends_with("_chunk"))
        })
        .find_map(|m| m["params"]["sessionId"].as_str())
        .unwrap_or_default()
        .to_string()
}

// ------------------------------------------------------------------ client

#[tokio::test]
async fn concurrent_sessions_against_a_flaky_provider_are_all_answered() {
    // Deterministic "random": a fixed pattern of failures across requests.
    let count = Arc::new(Mutex::new(0usize));
    let server = LlmServer::chat(move |_request| {
        let mut n = count.lock().unwrap();
        *n += 1;
        match *n % 5 {
            0 => openai_error(503, "busy"),
            1 => Reply::stream(stream_head(&["cut "]), Split::Whole),
            2 => openai_error(500, "oops"),
            _ => Reply::stream(text_stream(&[HEALTHY]), Split::Every(9)),
        }
    })
    .await;
    let mut agent = Agent::spawn(&fast_config(&server, "max_retries = 1\n")).await;
    agent.initialize().await;
    let mut sessions = Vec::new();
    for _ in 0..30 {
        sessions.push(agent.new_session().await);
    }
    let mut ids = Vec::new();
    for session in &sessions {
        ids.push(agent.start_prompt(session, "go").await);
    }
    for id in ids {
        let (_, response) = agent.response(id).await;
        assert!(
            response["result"]["stopReason"] == "end_turn" || response.get("error").is_some(),
            "{response}"
        );
    }
    // Later prompts still work: retried until one lands on a good reply.
    let mut answered = false;
    for _ in 0..5 {
        let (_, response) = agent.prompt(&sessions[0], "later").await;
        if response["result"]["stopReason"] == "end_turn" {
            answered = true;
            break;
        }
    }
    assert!(answered);
    agent.close_stdin();
    assert_clean_exit(&mut agent).await;
}

/// A provider for turns the client interrupts: "slow" streams 30 pieces
/// 100 ms apart, "hang" sends one piece and then nothing; anything else is
/// answered at once.
async fn interruptible_server() -> LlmServer {
    LlmServer::chat(|request: &Recorded| {
        let prompt = request.last_user_text();
        if prompt.contains("slow") {
            let pieces: Vec<String> = (0..30).map(|n| format!("p{n} ")).collect();
            let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
            let bytes = text_stream(&pieces);
            // One event per write: the first arrives at once, the rest paced.
            Reply::Stream {
                pieces: bytes
                    .split_inclusive(|&b| b == b'\n')
                    .map(<[u8]>::to_vec)
                    .collect(),
                pause: Duration::from_millis(50),
                hang: false,
                gate: None,
                content_type: "text/event-stream",
            }
        } else if prompt.contains("hang") {
            Reply::stream(stream_head(&["Partial "]), Split::Whole).hanging()
        } else {
            Reply::stream(text_stream(&[HEALTHY]), Split::Whole)
        }
    })
    .await
}

/// An agent on `interruptible_server`, with a session open.
async fn interruptible_session() -> (LlmServer, Agent, String) {
    let server = interruptible_server().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    (server, agent, session)
}

#[tokio::test]
async fn lines_of_many_megabytes_are_answered_and_the_agent_keeps_serving() {
    let (_server, mut agent, session) = interruptible_session().await;
    // 8 MB that is not JSON: one parse error.
    agent.send_raw(&"x".repeat(8 << 20)).await;
    let error = next_error(&mut agent).await;
    assert_eq!(error["error"]["code"], -32700, "{error}");
    // A 3 MB prompt is read whole and answered once, with why it cannot go
    // to a model with a small window.
    let (_, response) = agent.prompt(&session, &"word ".repeat(600_000)).await;
    assert!(error_message(&response).contains("window"), "{response}");
    // Past the 64 MiB line limit: one error, the rest of the line skipped,
    // and the next line read as usual.
    agent.send_raw(&"y".repeat(70 << 20)).await;
    let error = next_error(&mut agent).await;
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert!(error_message(&error).contains("64 MiB"), "{error}");
    let (_, response) = agent.prompt(&session, "short").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
}

/// The next error response, whatever notifications come first.
async fn next_error(agent: &mut Agent) -> Value {
    agent.wait_for(|m| m.get("error").is_some()).await
}

#[tokio::test]
async fn json_nested_200000_levels_deep_is_a_parse_error_not_a_crash() {
    let (_server, mut agent, session) = interruptible_session().await;
    let depth = 200_000;
    let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let objects = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"session/prompt\",\"params\":{}1{}}}",
        "{\"a\":".repeat(depth),
        "}".repeat(depth)
    );
    for line in [arrays, objects] {
        agent.send_raw(&line).await;
        let error = next_error(&mut agent).await;
        assert_eq!(error["error"]["code"], -32700, "{error}");
    }
    let (_, response) = agent.prompt(&session, "still alive?").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
}

#[tokio::test]
async fn duplicate_ids_in_flight_are_each_answered() {
    let (_server, mut agent, session) = interruptible_session().await;
    let other = agent.new_session().await;
    for target in [&session, &other] {
        agent
            .send(
                &json!({"jsonrpc": "2.0", "id": 7, "method": "session/prompt",
                "params": {"sessionId": target, "prompt": [{"type": "text", "text": "slow"}]}}),
            )
            .await;
    }
    let (_, first) = agent.response(7).await;
    let (_, second) = agent.response(7).await;
    for answer in [&first, &second] {
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    }
    let (_, later) = agent.prompt(&session, "hello").await;
    assert_eq!(later["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn responses_to_requests_never_sent_are_ignored() {
    let (_server, mut agent, session) = interruptible_session().await;
    for stray in [
        json!({"jsonrpc": "2.0", "id": "nobody-asked", "result": {}}),
        json!({"jsonrpc": "2.0", "id": 123456, "error": {"code": -1, "message": "no"}}),
        json!({"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}}),
    ] {
        agent.send(&stray).await;
    }
    let (seen, response) = agent.prompt(&session, "hello").await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert!(
        seen.iter().all(|m| m.get("method").is_some()),
        "nothing answers a response: {seen:?}"
    );
}

/// A session with one finished turn and a slow one under way (its first
/// chunk seen); returns the agent, the session and the slow prompt's id.
async fn mid_turn(server: &LlmServer) -> (Agent, String, i64) {
    let mut agent = Agent::spawn(&config_for(server, "test-model")).await;
    let session = agent.start_session().await;
    let (_, warm) = agent.prompt(&session, "warm up").await;
    assert_eq!(warm["result"]["stopReason"], "end_turn");
    let id = agent.start_prompt(&session, "slow turn").await;
    agent.wait_for_update("agent_message_chunk").await;
    (agent, session, id)
}

#[tokio::test]
async fn stdout_closed_mid_turn_exits_cleanly_and_the_session_loads() {
    let server = interruptible_server().await;
    let (mut agent, session, _) = mid_turn(&server).await;
    agent.close_stdout();
    assert_clean_exit(&mut agent).await;
    assert_session_loads(&agent, &session, &["warm up", "slow turn"]).await;
}

#[tokio::test]
async fn sigterm_mid_turn_answers_the_turn_flushes_and_exits_cleanly() {
    let server = interruptible_server().await;
    let (mut agent, session, id) = mid_turn(&server).await;
    agent.terminate();
    assert_clean_exit(&mut agent).await;
    let rest = agent.drain().await;
    let answer = rest
        .iter()
        .find(|m| m["id"] == id)
        .expect("the turn was answered before exit");
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert_session_loads(&agent, &session, &["warm up", "slow turn"]).await;
}

#[tokio::test]
async fn an_unwritable_data_dir_still_answers_prompts_saying_saving_failed() {
    let server = interruptible_server().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    // A file where the data directory should be: nothing can be created
    // under it, even as root (which ignores permission bits).
    std::fs::write(agent.data_dir(), "not a directory").unwrap();
    agent.initialize().await;
    let cwd = agent.cwd();
    let (_, created) = agent
        .call("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let session = created["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("a session even without storage: {created}"))
        .to_string();
    let (seen, response) = agent.prompt(&session, "hello").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let said: String = seen.iter().map(Value::to_string).collect();
    assert!(
        said.contains("Saving this session failed")
            && said.contains(&agent.data_dir().display().to_string()),
        "the client is told saving failed: {seen:?}"
    );
    let (_, again) = agent.prompt(&session, "hello again").await;
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again}");
}

/// The panic policy, as a client sees it after the fact: a session the
/// agent marked broken (a turn or the session panicked; the unit tests in
/// `session/tests.rs` prove the mark is written) is listed with the mark,
/// told about when it is loaded, goes on, and loses the mark with its next
/// turn that ends normally.
#[tokio::test]
async fn a_session_marked_broken_is_listed_told_on_load_and_cleared_by_a_good_turn() {
    let (server, mut agent, session) = interruptible_session().await;
    let (_, answered) = agent.prompt(&session, "before the crash").await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    agent.close_stdin();
    assert!(agent.wait_exit().await.success());
    let metadata_file = agent.session_dir(&session).join("metadata.json");
    let mut metadata: Value =
        serde_json::from_str(&std::fs::read_to_string(&metadata_file).unwrap()).unwrap();
    metadata["broken"] =
        json!({"at": "2026-11-25T12:00:00Z", "detail": "a panic: index out of bounds"});
    std::fs::write(&metadata_file, metadata.to_string()).unwrap();

    let mut later = Agent::spawn_sharing(&config_for(&server, "test-model"), &agent).await;
    later.initialize().await;
    let (_, listed) = later.call("session/list", json!({})).await;
    let mark = &listed["result"]["sessions"][0]["_meta"]["brokenAt"];
    assert_eq!(mark["detail"], "a panic: index out of bounds", "{listed}");
    let (_, loaded) = later.load(&session, agent.cwd()).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let (seen, answered) = later.prompt(&session, "after the crash").await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    let told: String = seen.iter().map(Value::to_string).collect();
    assert!(
        told.contains("stopped on an internal error") && told.contains("index out of bounds"),
        "the load tells of the crash: {seen:?}"
    );
    // The metadata is written by the session's writer, just after the answer.
    let mut listed = Value::Null;
    for _ in 0..100 {
        listed = later.call("session/list", json!({})).await.1;
        if listed["result"]["sessions"][0]["_meta"]
            .get("brokenAt")
            .is_none()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("a good turn clears the mark: {listed}");
}
