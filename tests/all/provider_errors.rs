//! When the provider fails, the turn still ends, with a message that says
//! what is wrong and what to do, and no secret leaks anywhere.

use serde_json::json;

use crate::support::harness::{
    self, Agent, LlmServer, Reply, Split, agent_text, config_for, error_message, models_reply,
    stream_head,
};

async fn failing_turn(server: &LlmServer, config: &str, env: &[(&str, &str)]) -> (Agent, String) {
    let _ = server;
    let mut agent = Agent::spawn_with(config, &[], env).await;
    let session = agent.start_session().await;
    let (_, response) = agent.prompt(&session, "hello").await;
    let message = error_message(&response);
    // The session survives the failure.
    let (_, again) = agent.prompt(&session, "hello again").await;
    assert!(again.get("result").is_some() || again.get("error").is_some());
    (agent, message)
}

#[tokio::test]
async fn a_rejected_key_names_the_variable_it_came_from_and_never_shows_it() {
    let server = LlmServer::start(|request| {
        if request.header("authorization") != Some("Bearer sk-good") {
            return Reply::json(401, json!({"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}));
        }
        models_reply(&["test-model"])
    })
    .await;
    let config = format!(
        "{}api_key = \"${{MY_LLM_KEY}}\"\n",
        config_for(&server, "test-model")
    );
    let (mut agent, message) =
        failing_turn(&server, &config, &[("MY_LLM_KEY", "sk-bad-secret-123")]).await;
    assert!(message.contains("401"), "{message}");
    assert!(message.contains("MY_LLM_KEY"), "{message}");
    assert!(message.contains("Incorrect API key"), "{message}");
    assert!(!message.contains("sk-bad-secret-123"));
    // The key was really sent, and never logged (RUST_LOG=debug in the harness).
    assert_eq!(
        server.chat_requests()[0].header("authorization"),
        Some("Bearer sk-bad-secret-123")
    );
    agent.close_stdin();
    agent.wait_exit().await;
    let log = agent.stderr();
    assert!(log.contains("DEBUG"), "the log was captured: {log}");
    assert!(!log.contains("sk-bad-secret-123"), "key in the log");
}

#[tokio::test]
async fn an_unset_key_variable_is_reported_before_any_request() {
    let server = LlmServer::start(|_| models_reply(&["test-model"])).await;
    let config = format!(
        "{}api_key = \"${{UNSET_KEY_VARIABLE}}\"\n",
        config_for(&server, "test-model")
    );
    let (_, message) = failing_turn(&server, &config, &[]).await;
    assert!(message.contains("UNSET_KEY_VARIABLE"), "{message}");
    assert!(server.chat_requests().is_empty());
}

#[tokio::test]
async fn an_unreachable_endpoint_says_where_and_what_to_check() {
    // Bind then drop a listener: a local port nobody listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = format!(
        "[llm.providers.local]\ntype = \"openai\"\nendpoint = \"http://127.0.0.1:{port}/v1\"\ndefault_model = \"m\"\nretry_base_delay_ms = 20\n"
    );
    let server = LlmServer::start(|_| models_reply(&[])).await;
    let (_, message) = failing_turn(&server, &config, &[]).await;
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(message.contains("running"), "{message}");
    assert!(message.contains("endpoint"), "{message}");
    // Connection failures are retried before giving up.
    assert!(message.contains("gave up after 4 attempts"), "{message}");
}

#[tokio::test]
async fn an_unknown_model_lists_what_the_server_offers() {
    let server = LlmServer::start(|request| {
        if request.path.ends_with("/models") {
            return models_reply(&["llama-3-8b", "qwen2.5-7b"]);
        }
        Reply::json(404, json!({"error":{"message":"The model `gpt-9` does not exist","type":"invalid_request_error","code":"model_not_found"}}))
    })
    .await;
    let (_, message) = failing_turn(&server, &config_for(&server, "gpt-9"), &[]).await;
    assert!(message.contains("gpt-9"), "{message}");
    assert!(
        message.contains("llama-3-8b") && message.contains("qwen2.5-7b"),
        "{message}"
    );
}

#[tokio::test]
async fn an_empty_stream_ends_the_turn_with_a_message() {
    for body in [Vec::new(), b"data: [DONE]\n\n".to_vec()] {
        let server =
            LlmServer::chat(move |_request| Reply::stream(body.clone(), Split::Whole)).await;
        let (_, message) = failing_turn(&server, &config_for(&server, "test-model"), &[]).await;
        assert!(message.contains("empty stream"), "{message}");
    }
}

#[tokio::test]
async fn a_stream_cut_before_done_is_reported_after_the_text_it_sent() {
    let server = LlmServer::chat(|_request| {
        Reply::stream(stream_head(&["The answer ", "is "]), Split::Every(9))
    })
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "q").await;
    assert_eq!(agent_text(&seen, &session), "The answer is ");
    let message = error_message(&response);
    assert!(message.contains("ended before"), "{message}");
}

#[tokio::test]
async fn a_server_error_is_passed_on_with_its_message() {
    let server = LlmServer::chat(|_request| {
        Reply::json(500, json!({"error":{"message":"CUDA out of memory"}}))
    })
    .await;
    let (_, message) = failing_turn(&server, &config_for(&server, "test-model"), &[]).await;
    assert!(
        message.contains("500") && message.contains("CUDA out of memory"),
        "{message}"
    );
    assert!(message.contains("gave up after 4 attempts"), "{message}");
    // Two turns (the helper checks the session survives), four attempts each.
    assert_eq!(server.chat_requests().len(), 8);
}

#[tokio::test]
async fn a_stream_that_goes_silent_times_out_with_a_clear_message() {
    let server = LlmServer::chat(|_request| {
        Reply::stream(stream_head(&["Partial "]), Split::Whole).hanging()
    })
    .await;
    let config = format!("{}timeout_secs = 1\n", config_for(&server, "test-model"));
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "q").await;
    assert_eq!(agent_text(&seen, &session), "Partial ");
    let message = error_message(&response);
    assert!(
        message.contains("no data for 1 s") && message.contains("timeout_secs"),
        "{message}"
    );
    server.wait_disconnect().await;
}

#[tokio::test]
async fn a_slow_but_steady_stream_is_not_cut() {
    let server = LlmServer::chat(|_request| {
        // Pieces 400 ms apart: each gap is under the 1 s idle limit, the whole far over it.
        Reply::stream(harness::text_stream(&["a", "b", "c"]), Split::Every(120))
            .paced(std::time::Duration::from_millis(400))
    })
    .await;
    let config = format!("{}timeout_secs = 1\n", config_for(&server, "test-model"));
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "q").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(agent_text(&seen, &session), "abc");
}

/// A stream that never finishes: one chunk of text, then `lines` SSE
/// comment lines of 1 MiB each (comments carry nothing; a server may send
/// them as keep-alives).
fn padded_events(lines: usize) -> Vec<u8> {
    let mut out = stream_head(&["Hello"]);
    let pad = format!(": {}\n", "x".repeat(1 << 20));
    for _ in 0..lines {
        out.extend_from_slice(pad.as_bytes());
    }
    out
}

#[tokio::test]
async fn a_response_past_64_mib_is_cut_off_with_a_clear_error_and_the_agent_serves_on() {
    let server = LlmServer::start(|request| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model"]);
        }
        Reply::stream(padded_events(80), Split::Every(1 << 20))
    })
    .await;
    let (mut agent, message) = failing_turn(&server, &config_for(&server, "test-model"), &[]).await;
    assert!(message.contains("passed 64 MiB"), "{message}");
    let session = agent.new_session().await;
    let (_, response) = agent.prompt(&session, "again").await;
    assert!(response.get("error").is_some(), "{response}");
}

#[tokio::test]
async fn one_line_that_never_ends_is_cut_off_at_4_mib() {
    let server = LlmServer::start(|request| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model"]);
        }
        let mut body = b"data: {\"pad\": \"".to_vec();
        body.extend(std::iter::repeat_n(b'y', 6 << 20));
        Reply::stream(body, Split::Every(1 << 20))
    })
    .await;
    let (_, message) = failing_turn(&server, &config_for(&server, "test-model"), &[]).await;
    assert!(
        message.contains("one line of the stream passed 4 MiB"),
        "{message}"
    );
}

/// LM Studio's answer to a prompt past the context the model was loaded
/// with: HTTP 200, and an error object inside the stream.
const LM_STUDIO_OVERFLOW: &str = "Trying to keep the first 6261 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input";

#[tokio::test]
async fn an_error_inside_a_200_stream_ends_the_turn_with_what_the_server_said() {
    let overflow = format!("data: {}\n\n", json!({ "error": LM_STUDIO_OVERFLOW }));
    let other = format!(
        "data: {}\n\n",
        json!({"error": {"message": "invalid grammar in response_format", "type": "invalid_request_error"}})
    );
    for (body, says) in [
        (
            overflow,
            vec![
                "context length of only 4096 tokens",
                "32768 tokens",
                "context_window",
                "[llm.providers.local]",
            ],
        ),
        (other, vec!["invalid grammar in response_format"]),
    ] {
        let server = LlmServer::chat(move |_request| {
            Reply::stream(body.clone().into_bytes(), Split::Every(7))
        })
        .await;
        let config = format!(
            "{}context_window = 32768\n",
            config_for(&server, "test-model")
        );
        let (_, message) = failing_turn(&server, &config, &[]).await;
        for said in says {
            assert!(message.contains(said), "{said}: {message}");
        }
        // Not retried: the same prompt would meet the same answer.
        assert_eq!(server.chat_requests().len(), 2);
    }
}

#[tokio::test]
async fn an_empty_200_stream_says_the_window_the_agent_assumed() {
    let server = LlmServer::chat(|_request| Reply::stream(Vec::new(), Split::Whole)).await;
    let config = format!(
        "{}context_window = 16384\n",
        config_for(&server, "test-model")
    );
    let (_, message) = failing_turn(&server, &config, &[]).await;
    assert!(message.contains("empty stream"), "{message}");
    assert!(message.contains("16384 tokens"), "{message}");
    assert!(message.contains("context_window"), "{message}");
}
