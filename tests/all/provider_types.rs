//! Each provider type through the binary, as an editor sees it: thoughts and
//! text stream in order, usage is reported against the model's window,
//! retries are announced instead of leaving the turn silent, and a session
//! can switch providers.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use crate::support::harness::{
    Agent, LlmServer, Reply, Split, WIRES, Wire, agent_text, thought_text, updates,
};

/// A server speaking every wire format at once: chat from `scenario`, model
/// lists, and Ollama's model details with a 4096 window.
async fn server(scenario: &'static str) -> LlmServer {
    LlmServer::start(move |request| {
        let path = request.path.as_str();
        match path {
            "/v1/chat/completions" => Wire::OpenAi.stream(scenario, Split::InsideCharacters),
            "/v1/messages" => Wire::Anthropic.stream(scenario, Split::InsideCharacters),
            "/api/chat" => Wire::Ollama.stream(scenario, Split::InsideCharacters),
            "/api/tags" => Wire::Ollama.models(),
            "/api/show" => Reply::json(200, json!({"parameters": "num_ctx 4096"})),
            // Both `/v1/models`: the OpenAI list carries llama.cpp's n_ctx.
            _ => Wire::OpenAi.models(),
        }
    })
    .await
}

fn provider_table(name: &str, wire: Wire, server: &LlmServer) -> String {
    let model = match wire {
        Wire::Anthropic => "claude-test-model",
        _ => "test-model",
    };
    format!(
        "[llm.providers.{name}]\ntype = \"{}\"\nendpoint = \"{}\"\ndefault_model = \"{model}\"\napi_key = \"sk-test\"\nretry_base_delay_ms = 20\n",
        wire.kind(),
        wire.endpoint(server)
    )
}

#[tokio::test]
async fn every_provider_type_streams_thoughts_then_text_and_reports_usage() {
    for wire in WIRES {
        let server = server("thinking").await;
        let config = format!(
            "[chat]\ndefault_provider = \"p\"\n{}",
            provider_table("p", wire, &server)
        );
        let mut agent = Agent::spawn(&config).await;
        let session = agent.start_session().await;
        let (seen, response) = agent.prompt(&session, "What is 2+2?").await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{wire:?}");
        assert_eq!(
            thought_text(&seen, &session),
            "Let me think. 2+2=4.",
            "{wire:?}"
        );
        assert_eq!(agent_text(&seen, &session), "The answer is 4.", "{wire:?}");
        let kinds: Vec<&str> = seen
            .iter()
            .filter_map(|m| m["params"]["update"]["sessionUpdate"].as_str())
            .filter(|kind| kind.ends_with("_chunk") || *kind == "usage_update")
            .collect();
        let first_text = kinds.iter().position(|k| *k == "agent_message_chunk");
        let last_thought = kinds.iter().rposition(|k| *k == "agent_thought_chunk");
        assert!(last_thought < first_text, "{wire:?}: {kinds:?}");
        assert_eq!(kinds.last(), Some(&"usage_update"), "{wire:?}: {kinds:?}");
        let usage = updates(&seen, &session, "usage_update");
        assert_eq!(usage.len(), 1, "{wire:?}");
        assert_eq!(usage[0]["used"], 30, "{wire:?}");
        let window = match wire {
            // From the table of well-known models (claude: 200k).
            Wire::Anthropic => 200_000,
            // llama.cpp's n_ctx, and Ollama's num_ctx.
            Wire::OpenAi | Wire::Ollama => 4096,
        };
        assert_eq!(usage[0]["size"], window, "{wire:?}");
        let chat = server.chat_requests();
        assert_eq!(chat.len(), 1, "{wire:?}");
        assert_eq!(chat[0].path, wire.chat_path(), "{wire:?}");
        // The model list is fetched once: the menu and the window share it.
        let listings = server
            .requests()
            .iter()
            .filter(|r| wire.is_metadata(&r.path) && !r.path.ends_with("/api/show"))
            .count();
        assert_eq!(listings, 1, "{wire:?}");
    }
}

#[tokio::test]
async fn a_retry_is_announced_and_the_answer_is_not_repeated() {
    for wire in WIRES {
        let failures = AtomicUsize::new(0);
        let server = LlmServer::start(move |request| {
            if wire.is_metadata(&request.path) {
                return wire.models();
            }
            if failures.fetch_add(1, Ordering::SeqCst) == 0 {
                wire.error(503, "busy")
            } else {
                wire.stream("text", Split::Every(9))
            }
        })
        .await;
        let config = format!(
            "[chat]\ndefault_provider = \"p\"\n{}",
            provider_table("p", wire, &server)
        );
        let mut agent = Agent::spawn(&config).await;
        let session = agent.start_session().await;
        let (seen, response) = agent.prompt(&session, "hi").await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{wire:?}");
        let thought = thought_text(&seen, &session);
        assert!(thought.contains("HTTP 503"), "{wire:?}: {thought}");
        assert!(thought.contains("retrying in"), "{wire:?}: {thought}");
        assert_eq!(agent_text(&seen, &session), "Hello, world!", "{wire:?}");
        assert_eq!(server.chat_requests().len(), 2, "{wire:?}");
    }
}

#[tokio::test]
async fn a_session_can_switch_provider_and_keeps_its_conversation() {
    let server = server("text").await;
    let config = format!(
        "[chat]\ndefault_provider = \"local\"\n{}{}",
        provider_table("local", Wire::OpenAi, &server),
        provider_table("claude", Wire::Anthropic, &server)
    );
    let mut agent = Agent::spawn(&config).await;
    agent.initialize().await;
    let (_, created) = agent
        .call("session/new", json!({"cwd": agent.cwd(), "mcpServers": []}))
        .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    let options = created["result"]["configOptions"].as_array().unwrap();
    let provider = options.iter().find(|o| o["id"] == "provider").unwrap();
    assert_eq!(provider["currentValue"], "local");
    assert_eq!(provider["category"], "_provider");
    let values: Vec<&str> = provider["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["claude", "local"]);

    let (_, first) = agent.prompt(&session, "first").await;
    assert_eq!(first["result"]["stopReason"], "end_turn");

    let (_, switched) = agent
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "provider", "value": "claude"}),
        )
        .await;
    let options = switched["result"]["configOptions"].as_array().unwrap();
    let model = options.iter().find(|o| o["id"] == "model").unwrap();
    assert_eq!(model["currentValue"], "claude-test-model", "{switched}");
    // The new provider's model list follows as an update.
    agent
        .wait_for(|m| {
            let model = &m["params"]["update"]["configOptions"][0];
            m["params"]["update"]["sessionUpdate"] == "config_option_update"
                && model["description"]
                    .as_str()
                    .is_some_and(|d| d.contains("`claude`"))
                && model["options"]
                    .as_array()
                    .is_some_and(|values| values.iter().any(|v| v["value"] == "other-model"))
        })
        .await;

    let (seen, second) = agent.prompt(&session, "second").await;
    assert_eq!(second["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&seen, &session), "Hello, world!");
    let chat = server.chat_requests();
    assert_eq!(chat.len(), 2);
    assert_eq!(chat[1].path, "/v1/messages");
    assert_eq!(chat[1].body["model"], "claude-test-model");
    // The first turn, answered by the other provider, went along.
    let messages = chat[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(messages[1]["role"], "assistant");
}
