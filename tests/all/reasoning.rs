//! Reasoning effort (the `thought_level` option): offered for models known
//! to reason, defaulted from `[agent] thought_level`, kept with the session,
//! and sent the way each provider type takes it.

use serde_json::{Value, json};

use crate::support::harness::{Agent, LlmServer, Reply, Split, WIRES, Wire};

async fn server() -> LlmServer {
    LlmServer::start(move |request| match request.path.as_str() {
        "/v1/chat/completions" => Wire::OpenAi.stream("thinking", Split::Whole),
        "/v1/messages" => Wire::Anthropic.stream("thinking", Split::Whole),
        "/api/chat" => Wire::Ollama.stream("thinking", Split::Whole),
        "/api/tags" => Wire::Ollama.models(),
        "/api/show" => Reply::json(200, json!({"parameters": "num_ctx 4096"})),
        _ => Wire::OpenAi.models(),
    })
    .await
}

fn config(wire: Wire, server: &LlmServer, model: &str, level: &str) -> String {
    format!(
        "[chat]\ndefault_provider = \"p\"\n[agent]\nthought_level = \"{level}\"\n[llm.providers.p]\ntype = \"{}\"\nendpoint = \"{}\"\ndefault_model = \"{model}\"\napi_key = \"sk-test\"\n",
        wire.kind(),
        wire.endpoint(server)
    )
}

fn reasoning_model(wire: Wire) -> &'static str {
    match wire {
        Wire::OpenAi => "o4-mini",
        Wire::Anthropic => "claude-sonnet-4-5",
        Wire::Ollama => "qwen3:8b",
    }
}

/// What the last chat request asked for, in the provider's own terms.
fn asked(wire: Wire, server: &LlmServer) -> Value {
    let requests = server.chat_requests();
    let body = &requests.last().unwrap().body;
    match wire {
        Wire::OpenAi => body.get("reasoning_effort").cloned().unwrap_or(Value::Null),
        Wire::Anthropic => body.get("thinking").cloned().unwrap_or(Value::Null),
        Wire::Ollama => body.get("think").cloned().unwrap_or(Value::Null),
    }
}

fn thought_option(response: &Value) -> Option<Value> {
    response["result"]["configOptions"]
        .as_array()?
        .iter()
        .find(|o| o["id"] == "thought_level")
        .cloned()
}

#[tokio::test]
async fn each_provider_type_is_asked_for_the_chosen_effort() {
    for wire in WIRES {
        let server = server().await;
        let cfg = config(wire, &server, reasoning_model(wire), "low");
        let mut agent = Agent::spawn(&cfg).await;
        agent.initialize().await;
        let created = agent.new_session_answer(json!({})).await;
        let option = thought_option(&created).unwrap_or_else(|| panic!("{wire:?}: {created}"));
        assert_eq!(option["category"], "thought_level", "{wire:?}");
        assert_eq!(option["currentValue"], "low", "{wire:?}");
        let session = created["result"]["sessionId"].as_str().unwrap().to_string();

        let expected = |level: &str| match (wire, level) {
            (Wire::OpenAi, "off") => Value::Null,
            (Wire::OpenAi, level) => json!(level),
            (Wire::Anthropic, "off") => Value::Null,
            (Wire::Anthropic, "low") => json!({"type": "enabled", "budget_tokens": 1024}),
            (Wire::Anthropic, _) => json!({"type": "enabled", "budget_tokens": 16384}),
            (Wire::Ollama, level) => json!(level != "off"),
        };
        agent.prompt(&session, "think a little").await;
        assert_eq!(asked(wire, &server), expected("low"), "{wire:?}");
        for level in ["high", "off"] {
            let (_, set) = agent
                .call(
                    "session/set_config_option",
                    json!({"sessionId": session, "configId": "thought_level", "value": level}),
                )
                .await;
            assert!(set.get("result").is_some(), "{wire:?}: {set}");
            agent.prompt(&session, "again").await;
            assert_eq!(asked(wire, &server), expected(level), "{wire:?} {level}");
        }
        if wire == Wire::Anthropic {
            // max_tokens stays above the thinking budget.
            let requests = server.chat_requests();
            let high = &requests[requests.len() - 2].body;
            assert!(high["max_tokens"].as_u64().unwrap() > 16384, "{high}");
        }
    }
}

#[tokio::test]
async fn models_that_do_not_reason_get_no_option_and_no_parameter() {
    for wire in WIRES {
        let server = server().await;
        let model = match wire {
            Wire::Anthropic => "claude-3-5-haiku-latest",
            _ => "test-model",
        };
        let mut agent = Agent::spawn(&config(wire, &server, model, "high")).await;
        agent.initialize().await;
        let created = agent.new_session_answer(json!({})).await;
        assert_eq!(thought_option(&created), None, "{wire:?}: {created}");
        let session = created["result"]["sessionId"].as_str().unwrap().to_string();
        agent.prompt(&session, "hi").await;
        assert_eq!(asked(wire, &server), Value::Null, "{wire:?}");
    }
}

#[tokio::test]
async fn the_chosen_effort_is_kept_with_the_session() {
    let server = server().await;
    let cfg = config(Wire::OpenAi, &server, "o4-mini", "off");
    let mut agent = Agent::spawn(&cfg).await;
    let session = agent.start_session().await;
    agent
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "thought_level", "value": "medium"}),
        )
        .await;
    agent.prompt(&session, "hi").await;
    let (mut again, resumed) = agent.resumed_elsewhere(&cfg, &session).await;
    assert_eq!(
        thought_option(&resumed).unwrap()["currentValue"],
        "medium",
        "{resumed}"
    );
    again.prompt(&session, "again").await;
    assert_eq!(asked(Wire::OpenAi, &server), json!("medium"));
}
