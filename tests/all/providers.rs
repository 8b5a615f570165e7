//! The three wire formats against a real local HTTP server replaying
//! recorded streams (`tests/fixtures`), cut at awkward points. Every scenario
//! must come out the same from OpenAI-compatible, Anthropic and Ollama
//! servers: that is what lets the agent loop ignore which one it talks to.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crucible_agent::config::{Config, Overrides};
use crucible_agent::providers::retry::{self, RetryNotice};
use crucible_agent::providers::{
    ChatRequest, FinishReason, Message, Provider, ProviderEvent, Providers, ToolChoice,
    ToolDefinition, Usage,
};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::support::harness::{self, LlmServer, Recorded, Reply, Split, WIRES, Wire};

const SECRET: &str = "sk-test-secret-4f9a";
const SPLITS: [(&str, Split); 3] = [
    ("whole", Split::Whole),
    ("inside characters", Split::InsideCharacters),
    ("every 5 bytes", Split::Every(5)),
];

fn provider(wire: Wire, server: &LlmServer, extra: &str) -> Arc<dyn Provider> {
    let timeout = if extra.contains("timeout_secs") {
        ""
    } else {
        "timeout_secs = 5\n"
    };
    let text = format!(
        "[llm.providers.p]\ntype = \"{}\"\nendpoint = \"{}\"\ndefault_model = \"test-model\"\napi_key = \"${{TEST_KEY}}\"\nretry_base_delay_ms = 20\n{timeout}{extra}",
        wire.kind(),
        wire.endpoint(server)
    );
    let env = |name: &str| (name == "TEST_KEY").then(|| SECRET.to_string());
    let config = Config::from_toml(
        &text,
        Path::new("/test/config.toml"),
        &env,
        &Overrides::default(),
    )
    .unwrap();
    Providers::new(config.providers).get("p").unwrap()
}

fn request(tools: bool) -> ChatRequest {
    ChatRequest {
        model: "test-model".into(),
        system: Some("You are terse.".into()),
        messages: vec![Arc::new(Message::user_text("hi"))],
        tools: if tools {
            vec![ToolDefinition {
                name: "read_file".into(),
                description: "Read a file".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            }]
        } else {
            Vec::new()
        },
        tool_choice: ToolChoice::Auto,
        max_output_tokens: None,
        context_window: Some(4096),
        reasoning: None,
        cache_key: None,
    }
}

#[derive(Debug, Default)]
struct Outcome {
    text: String,
    thinking: String,
    signatures: Vec<String>,
    /// (id, name, arguments as parsed JSON)
    calls: Vec<(String, String, Value)>,
    usage: Vec<Usage>,
    finish: Option<FinishReason>,
    error: Option<String>,
    notices: Vec<RetryNotice>,
}

async fn run(provider: &dyn Provider, request: &ChatRequest) -> Outcome {
    let notices = std::sync::Mutex::new(Vec::new());
    let notify = |notice: RetryNotice| notices.lock().unwrap().push(notice);
    let mut outcome = Outcome::default();
    let started = tokio::time::timeout(
        *harness::PATIENCE,
        retry::start_stream(provider, request, &notify),
    )
    .await
    .expect("the provider never answered");
    let mut stream = match started {
        Ok(stream) => stream,
        Err(err) => {
            outcome.error = Some(err.to_string());
            outcome.notices = notices.into_inner().unwrap();
            return outcome;
        }
    };
    let mut arguments: Vec<(usize, String)> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    loop {
        let next = tokio::time::timeout(*harness::PATIENCE, stream.next())
            .await
            .expect("the stream never ended");
        match next {
            None => break,
            Some(Err(err)) => {
                outcome.error = Some(err.to_string());
                break;
            }
            Some(Ok(event)) => match event {
                ProviderEvent::TextDelta(text) => outcome.text.push_str(&text),
                ProviderEvent::ThinkingDelta(text) => outcome.thinking.push_str(&text),
                ProviderEvent::ThinkingSignature(signature) => outcome.signatures.push(signature),
                ProviderEvent::RedactedThinking(_) => {}
                ProviderEvent::ToolCallStart { index, id, name } => {
                    assert!(!open.contains(&index), "call {index} started twice");
                    open.push(index);
                    outcome.calls.push((id, name, Value::Null));
                    arguments.push((index, String::new()));
                }
                ProviderEvent::ToolCallArgumentsDelta { index, delta } => {
                    let entry = arguments.iter_mut().find(|(i, _)| *i == index);
                    entry
                        .unwrap_or_else(|| panic!("arguments for unknown call {index}"))
                        .1
                        .push_str(&delta);
                }
                ProviderEvent::ToolCallEnd { index } => {
                    assert!(
                        open.contains(&index),
                        "call {index} ended before it started"
                    );
                    open.retain(|i| *i != index);
                }
                ProviderEvent::Usage(usage) => outcome.usage.push(usage),
                ProviderEvent::Finish(reason) => {
                    assert!(outcome.finish.is_none(), "two finish events");
                    outcome.finish = Some(reason);
                }
            },
        }
    }
    if outcome.error.is_none() {
        assert!(open.is_empty(), "calls never ended: {open:?}");
    }
    for ((_, _, parsed), (_, text)) in outcome.calls.iter_mut().zip(&arguments) {
        *parsed = serde_json::from_str(text).unwrap_or(Value::String(text.clone()));
    }
    outcome.notices = notices.into_inner().unwrap();
    outcome
}

/// Serve `scenario` in every format and every split; check each outcome.
async fn each_wire(scenario: &str, tools: bool, check: impl Fn(Wire, &Outcome, &[Recorded])) {
    for wire in WIRES {
        for (split_name, split) in SPLITS {
            let server = LlmServer::start({
                let reply = wire.stream(scenario, split);
                move |_| reply.clone()
            })
            .await;
            let provider = provider(wire, &server, "");
            let outcome = run(&*provider, &request(tools)).await;
            let context = format!("{wire:?}, {scenario}, split {split_name}: {outcome:#?}");
            let requests = server.requests();
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                check(wire, &outcome, &requests);
            }))
            .unwrap_or_else(|_| panic!("failed for {context}"));
        }
    }
}

fn usage(prompt_tokens: u64, completion_tokens: u64) -> Vec<Usage> {
    vec![Usage {
        prompt_tokens,
        completion_tokens,
        cached_prompt_tokens: 0,
        cache_written_prompt_tokens: 0,
    }]
}

#[tokio::test]
async fn text_streams_with_usage_and_the_request_is_well_formed() {
    each_wire("text", false, |wire, outcome, requests| {
        assert_eq!(outcome.error, None);
        assert_eq!(outcome.text, "Hello, world!");
        assert_eq!(outcome.thinking, "");
        assert_eq!(outcome.usage, usage(12, 4));
        assert_eq!(outcome.finish, Some(FinishReason::Stop));
        assert_eq!(requests.len(), 1);
        let sent = &requests[0];
        assert_eq!(sent.method, "POST");
        assert_eq!(sent.path, wire.chat_path());
        assert_eq!(sent.body["model"], "test-model");
        assert_eq!(sent.body["stream"], true);
        match wire {
            Wire::OpenAi => {
                assert_eq!(
                    sent.header("authorization"),
                    Some(format!("Bearer {SECRET}").as_str())
                );
                assert_eq!(sent.body["messages"][0]["role"], "system");
                assert_eq!(sent.body["stream_options"]["include_usage"], true);
            }
            Wire::Anthropic => {
                assert_eq!(sent.header("x-api-key"), Some(SECRET));
                assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
                // The system prompt as a block, ending on a cache breakpoint.
                assert_eq!(sent.body["system"][0]["text"], "You are terse.");
                assert_eq!(sent.body["system"][0]["cache_control"]["type"], "ephemeral");
                assert_eq!(sent.body["messages"][0]["role"], "user");
                assert!(sent.body["max_tokens"].as_u64().unwrap() > 0);
            }
            Wire::Ollama => {
                assert_eq!(sent.body["options"]["num_ctx"], 4096);
                // The model stays loaded between the user's turns.
                assert_eq!(sent.body["keep_alive"], "30m");
                assert_eq!(sent.body["messages"][0]["role"], "system");
                assert_eq!(sent.body["messages"][1]["content"], "hi");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn thinking_becomes_thoughts_and_keeps_its_signature() {
    each_wire("thinking", false, |wire, outcome, _| {
        assert_eq!(outcome.error, None);
        assert_eq!(outcome.thinking, "Let me think. 2+2=4.");
        assert_eq!(outcome.text, "The answer is 4.");
        assert_eq!(outcome.usage, usage(20, 10));
        assert_eq!(outcome.finish, Some(FinishReason::Stop));
        if wire == Wire::Anthropic {
            assert_eq!(outcome.signatures, vec!["sig-abc123".to_string()]);
        }
    })
    .await;
}

#[tokio::test]
async fn one_tool_call_is_assembled() {
    each_wire("tool_call", true, |wire, outcome, requests| {
        assert_eq!(outcome.error, None);
        assert_eq!(outcome.text, "Reading the file.");
        assert_eq!(outcome.calls.len(), 1);
        let (id, name, arguments) = &outcome.calls[0];
        assert!(!id.is_empty());
        assert_eq!(name, "read_file");
        assert_eq!(arguments, &json!({"path": "src/main.rs"}));
        assert_eq!(outcome.usage, usage(30, 15));
        assert_eq!(outcome.finish, Some(FinishReason::ToolCalls));
        // The tool definition went out in the format's own shape.
        let tools = &requests[0].body["tools"][0];
        match wire {
            Wire::OpenAi | Wire::Ollama => {
                assert_eq!(tools["function"]["name"], "read_file");
                assert_eq!(tools["function"]["parameters"]["required"][0], "path");
            }
            Wire::Anthropic => {
                assert_eq!(tools["name"], "read_file");
                assert_eq!(tools["input_schema"]["required"][0], "path");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn parallel_tool_calls_keep_their_order_and_arguments() {
    each_wire("parallel_tool_calls", true, |_, outcome, _| {
        assert_eq!(outcome.error, None);
        let calls: Vec<(&str, &Value)> = outcome
            .calls
            .iter()
            .map(|(_, name, args)| (name.as_str(), args))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("read_file", &json!({"path": "a.rs"})),
                ("grep", &json!({"pattern": "fn main", "path": "."})),
            ]
        );
        assert_ne!(outcome.calls[0].0, outcome.calls[1].0, "ids must differ");
        assert_eq!(outcome.usage, usage(40, 20));
        assert_eq!(outcome.finish, Some(FinishReason::ToolCalls));
    })
    .await;
}

#[tokio::test]
async fn arguments_cut_inside_characters_arrive_intact() {
    each_wire("utf8_arguments", true, |_, outcome, _| {
        assert_eq!(outcome.error, None);
        assert_eq!(outcome.calls.len(), 1);
        assert_eq!(outcome.calls[0].1, "write_file");
        assert_eq!(
            outcome.calls[0].2,
            json!({"path": "é.txt", "content": "héllo wörld ✓ 🎉"})
        );
        assert_eq!(outcome.usage, usage(25, 18));
    })
    .await;
}

#[tokio::test]
async fn an_error_event_mid_stream_ends_the_stream_with_its_message() {
    each_wire("error_mid_stream", false, |_, outcome, requests| {
        assert_eq!(outcome.text, "Partial");
        let error = outcome.error.as_deref().unwrap_or_default();
        assert!(error.contains("Overloaded"), "{error}");
        // Text already reached the user: never retried.
        assert_eq!(requests.len(), 1);
        assert!(outcome.notices.is_empty());
    })
    .await;
}

#[tokio::test]
async fn a_dropped_connection_is_an_error_not_a_short_answer() {
    each_wire("dropped", false, |_, outcome, requests| {
        assert_eq!(outcome.text, "Partial");
        let error = outcome.error.as_deref().unwrap_or_default();
        assert!(error.contains("ended before it was complete"), "{error}");
        assert_eq!(outcome.finish, None);
        assert_eq!(requests.len(), 1);
    })
    .await;
}

/// A server that fails the first `failures` chat requests with `failure`,
/// then streams the `text` scenario.
async fn failing_then_ok(wire: Wire, failures: usize, failure: Reply) -> LlmServer {
    let seen = AtomicUsize::new(0);
    let ok = wire.stream("text", Split::InsideCharacters);
    LlmServer::start(move |request| {
        if wire.is_metadata(&request.path) {
            return wire.models();
        }
        if seen.fetch_add(1, Ordering::SeqCst) < failures {
            failure.clone()
        } else {
            ok.clone()
        }
    })
    .await
}

#[tokio::test]
async fn rate_limits_wait_for_retry_after_then_succeed() {
    for wire in WIRES {
        let failure = match wire.error(429, "Rate limit reached") {
            Reply::Full {
                status,
                content_type,
                body,
                ..
            } => Reply::Full {
                status,
                content_type,
                body,
                headers: vec![("Retry-After".into(), "1".into())],
            },
            other => other,
        };
        let server = failing_then_ok(wire, 1, failure).await;
        let provider = provider(wire, &server, "");
        let started = std::time::Instant::now();
        let outcome = run(&*provider, &request(false)).await;
        assert_eq!(outcome.error, None, "{wire:?}");
        assert_eq!(outcome.text, "Hello, world!", "{wire:?}");
        assert_eq!(server.chat_requests().len(), 2, "{wire:?}");
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "{wire:?}: Retry-After was not honoured"
        );
        assert_eq!(outcome.notices.len(), 1, "{wire:?}");
        let notice = outcome.notices[0].message();
        assert!(notice.contains("HTTP 429"), "{notice}");
        assert!(notice.contains("attempt 2 of 4"), "{notice}");
    }
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff_until_one_succeeds() {
    for wire in WIRES {
        let server = failing_then_ok(wire, 2, wire.error(500, "internal error")).await;
        let provider = provider(wire, &server, "");
        let outcome = run(&*provider, &request(false)).await;
        assert_eq!(outcome.error, None, "{wire:?}");
        assert_eq!(outcome.text, "Hello, world!", "{wire:?}");
        assert_eq!(server.chat_requests().len(), 3, "{wire:?}");
        assert_eq!(outcome.notices.len(), 2, "{wire:?}");
        assert!(outcome.notices[1].delay >= outcome.notices[0].delay / 2);
    }
}

#[tokio::test]
async fn retries_give_up_after_the_configured_attempts() {
    for wire in WIRES {
        let server = failing_then_ok(wire, 100, wire.error(503, "unavailable")).await;
        let provider = provider(wire, &server, "max_retries = 2\n");
        let outcome = run(&*provider, &request(false)).await;
        let error = outcome.error.unwrap_or_default();
        assert!(error.contains("HTTP 503"), "{wire:?}: {error}");
        assert!(
            error.contains("gave up after 3 attempts"),
            "{wire:?}: {error}"
        );
        assert_eq!(server.chat_requests().len(), 3, "{wire:?}");
    }
}

#[tokio::test]
async fn a_refused_key_is_tried_once_and_never_shown() {
    for wire in WIRES {
        let server = failing_then_ok(wire, 100, wire.error(401, "invalid x-api-key")).await;
        let provider = provider(wire, &server, "");
        let outcome = run(&*provider, &request(false)).await;
        let error = outcome.error.unwrap_or_default();
        assert!(error.contains("refused the API key"), "{wire:?}: {error}");
        assert!(error.contains("TEST_KEY"), "{wire:?}: {error}");
        assert!(!error.contains(SECRET), "{wire:?} leaked the key: {error}");
        assert_eq!(server.chat_requests().len(), 1, "{wire:?}");
        assert!(outcome.notices.is_empty());
    }
}

#[tokio::test]
async fn an_empty_200_body_is_a_clear_error() {
    for wire in WIRES {
        let server = failing_then_ok(wire, 100, Reply::stream(Vec::new(), Split::Whole)).await;
        let provider = provider(wire, &server, "");
        let outcome = run(&*provider, &request(false)).await;
        let error = outcome.error.unwrap_or_default();
        assert!(error.contains("empty stream"), "{wire:?}: {error}");
        assert_eq!(server.chat_requests().len(), 1, "{wire:?}");
    }
}

#[tokio::test]
async fn an_unknown_model_error_lists_what_the_server_offers() {
    for wire in WIRES {
        let server = failing_then_ok(wire, 100, wire.error(404, "model not found")).await;
        let provider = provider(wire, &server, "");
        let outcome = run(&*provider, &request(false)).await;
        let error = outcome.error.unwrap_or_default();
        assert!(
            error.contains("`test-model` is not available"),
            "{wire:?}: {error}"
        );
        assert!(error.contains("other-model"), "{wire:?}: {error}");
        assert_eq!(server.chat_requests().len(), 1, "{wire:?}");
    }
}

#[tokio::test]
async fn a_silent_server_times_out_but_a_slow_steady_one_does_not() {
    for wire in WIRES {
        let text = wire.fixture("text");
        let head = text[..text.len() / 2].to_vec();
        let server =
            LlmServer::start(move |_| Reply::stream(head.clone(), Split::Whole).hanging()).await;
        let silent = provider(wire, &server, "timeout_secs = 1\nmax_retries = 0\n");
        let outcome = run(&*silent, &request(false)).await;
        let error = outcome.error.unwrap_or_default();
        assert!(error.contains("sent no data for 1 s"), "{wire:?}: {error}");

        let slow = wire
            .stream("text", Split::Every(150))
            .paced(Duration::from_millis(400));
        let server = LlmServer::start(move |_| slow.clone()).await;
        let steady = provider(wire, &server, "timeout_secs = 1\n");
        let outcome = run(&*steady, &request(false)).await;
        assert_eq!(outcome.error, None, "{wire:?}");
        assert_eq!(outcome.text, "Hello, world!", "{wire:?}");
    }
}

#[tokio::test]
async fn context_windows_come_from_config_then_server_then_known_models() {
    let show = |num_ctx: &str| {
        json!({
            "parameters": format!("temperature 0.7\nnum_ctx {num_ctx}"),
            "model_info": {"llama.context_length": 131072},
        })
    };
    let server = LlmServer::start(move |request| match request.path.as_str() {
        "/v1/models" => Wire::OpenAi.models(),
        "/api/show" => Reply::json(200, show("6144")),
        _ => Reply::json(404, json!({"error": "no"})),
    })
    .await;
    let configs = format!(
        r#"
[llm.providers.openai]
type = "openai"
endpoint = "{openai}"
default_model = "test-model"
[llm.providers.pinned]
type = "openai"
endpoint = "{openai}"
default_model = "test-model"
context_window = 1234
[llm.providers.ollama]
type = "ollama"
endpoint = "{root}"
[llm.providers.anthropic]
type = "anthropic"
endpoint = "{root}"
default_model = "claude-sonnet-4-5"
api_key = "x"
[llm.providers.down]
type = "openai"
endpoint = "http://127.0.0.1:9"
default_model = "my-finetune"
"#,
        openai = server.base_url(),
        root = format!("http://127.0.0.1:{}", server.port)
    );
    let config = Config::from_toml(
        &configs,
        Path::new("/test/config.toml"),
        &|_| None,
        &Overrides::default(),
    )
    .unwrap();
    let providers = Providers::new(config.providers.clone());
    assert_eq!(providers.context_window("openai", "test-model").await, 4096);
    assert_eq!(providers.context_window("pinned", "test-model").await, 1234);
    assert_eq!(providers.context_window("ollama", "llama3.2").await, 6144);
    assert_eq!(
        providers
            .context_window("anthropic", "claude-sonnet-4-5")
            .await,
        200_000
    );
    assert_eq!(
        providers.context_window("down", "gpt-4o-mini").await,
        128_000
    );
    assert_eq!(providers.context_window("down", "my-finetune").await, 8192);
}
