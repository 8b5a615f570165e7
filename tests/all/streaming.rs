//! A prompt turn as a client sees it: the model's text and thoughts stream
//! back in order, byte-exact, from a real HTTP server; the model can be
//! switched; sessions run side by side.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::Notify;

use crate::support::harness::{
    self, Agent, LlmServer, Reply, Split, agent_text, config_for, error_message, models_reply,
    openai_stream, text_stream, thought_text, updates,
};

const TRICKY: [&str; 6] = ["Hé", "llo, ", "wörld ", "✓ ", "日本語 ", "🦀!"];

#[tokio::test]
async fn text_streams_in_order_even_when_split_inside_characters() {
    for split in [
        Split::InsideCharacters,
        Split::Every(3),
        Split::Every(1),
        Split::Whole,
    ] {
        let server = LlmServer::start(move |request| {
            if request.path.ends_with("/models") {
                models_reply(&["test-model"])
            } else {
                Reply::stream(text_stream(&TRICKY), split)
            }
        })
        .await;
        let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
        let session = agent.start_session().await;
        let (seen, response) = agent.prompt(&session, "Say hello").await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        assert_eq!(agent_text(&seen, &session), TRICKY.concat());
        // One chunk per delta, in the order the server sent them.
        let chunks: Vec<String> = updates(&seen, &session, "agent_message_chunk")
            .iter()
            .map(|u| u["content"]["text"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(chunks, TRICKY);
        // Usage from the final chunk.
        let usage = updates(&seen, &session, "usage_update");
        assert_eq!(usage.last().unwrap()["used"], 42 + TRICKY.len() as u64);

        let chat = server.chat_requests();
        assert_eq!(chat.len(), 1);
        let body = &chat[0].body;
        assert_eq!(body["model"], "test-model");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(chat[0].last_user_text(), "Say hello");
    }
}

#[tokio::test]
async fn the_conversation_carries_over_between_turns() {
    let server = LlmServer::chat(|request| {
        let answer = format!("You said: {}", request.last_user_text());
        Reply::stream(text_stream(&[&answer]), Split::Every(7))
    })
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    agent.prompt(&session, "first").await;
    let (seen, _) = agent.prompt(&session, "second").await;
    assert_eq!(agent_text(&seen, &session), "You said: second");
    let chat = server.chat_requests();
    let messages = chat[1].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(messages[2]["content"], "You said: first");
}

#[tokio::test]
async fn reasoning_becomes_thought_chunks_and_length_is_max_tokens() {
    let server = LlmServer::chat(|_request| {
        let deltas = [
            json!({"reasoning_content": "The user "}),
            json!({"reasoning_content": "wants ✓"}),
            json!({"content": "Answer that is cut"}),
        ];
        Reply::stream(
            openai_stream(&deltas, "length", (10, 3)),
            Split::InsideCharacters,
        )
    })
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "think").await;
    assert_eq!(response["result"]["stopReason"], "max_tokens");
    assert_eq!(thought_text(&seen, &session), "The user wants ✓");
    assert_eq!(agent_text(&seen, &session), "Answer that is cut");
    // Thoughts came before the answer.
    let first_kind = seen
        .iter()
        .find_map(|m| {
            let kind = m["params"]["update"]["sessionUpdate"].as_str()?;
            kind.ends_with("_chunk").then(|| kind.to_string())
        })
        .unwrap();
    assert_eq!(first_kind, "agent_thought_chunk");
}

#[tokio::test]
async fn the_model_is_a_config_option_the_client_can_change() {
    let server = LlmServer::start(|request| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model", "bigger-model"]);
        }
        let model = request.body["model"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Reply::stream(text_stream(&["from ", &model]), Split::Whole)
    })
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    // Wait for the model list so the new value is offered.
    agent.wait_for_update("config_option_update").await;
    let (_, response) = agent
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "bigger-model"}),
        )
        .await;
    let options = response["result"]["configOptions"].as_array().unwrap();
    assert_eq!(options[0]["currentValue"], "bigger-model");
    let (seen, _) = agent.prompt(&session, "who are you").await;
    assert_eq!(agent_text(&seen, &session), "from bigger-model");

    let (_, response) = agent
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "no-such-model"}),
        )
        .await;
    assert_eq!(response["error"]["code"], -32602);
    assert!(
        error_message(&response).contains("bigger-model"),
        "{response}"
    );
    let (_, response) = agent
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "colour", "value": "red"}),
        )
        .await;
    assert_eq!(response["error"]["code"], -32602);
}

#[tokio::test]
async fn the_model_flag_sets_the_default() {
    let server =
        LlmServer::chat(|_request| Reply::stream(text_stream(&["ok"]), Split::Whole)).await;
    let mut agent = Agent::spawn_with(
        &config_for(&server, "test-model"),
        &["--model", "flag-model"],
        &[],
    )
    .await;
    let session = agent.start_session().await;
    agent.prompt(&session, "hi").await;
    assert_eq!(server.chat_requests()[0].body["model"], "flag-model");
}

#[tokio::test]
async fn two_sessions_stream_at_the_same_time() {
    // Session A's stream is held until session B's request reached the
    // server: A can only finish if B was not blocked behind it.
    let gate = Arc::new(Notify::new());
    let server = {
        let gate = Arc::clone(&gate);
        LlmServer::chat(move |request| {
            let user = request.last_user_text();
            let pieces: Vec<String> = (0..20).map(|i| format!("{user}-{i} ")).collect();
            let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
            let reply = Reply::stream(text_stream(&pieces), Split::Every(5))
                .paced(Duration::from_millis(3));
            if user == "A" {
                reply.gated(Arc::clone(&gate))
            } else {
                gate.notify_one();
                reply
            }
        })
        .await
    };
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let a = agent.start_session().await;
    let b = agent.new_session().await;
    let id_a = agent.start_prompt(&a, "A").await;
    let id_b = agent.start_prompt(&b, "B").await;
    let (seen_a, response_a) = agent.response(id_a).await;
    let (seen_b, response_b) = agent.response(id_b).await;
    let all: Vec<_> = seen_a.iter().chain(seen_b.iter()).cloned().collect();
    assert_eq!(response_a["result"]["stopReason"], "end_turn");
    assert_eq!(response_b["result"]["stopReason"], "end_turn");
    let expected = |name: &str| (0..20).map(|i| format!("{name}-{i} ")).collect::<String>();
    assert_eq!(agent_text(&all, &a), expected("A"));
    assert_eq!(agent_text(&all, &b), expected("B"));
}

#[tokio::test]
async fn a_second_prompt_while_one_runs_gets_a_clear_error() {
    let server = LlmServer::chat(|_request| {
        Reply::stream(harness::stream_head(&["thinking..."]), Split::Whole).hanging()
    })
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let first = agent.start_prompt(&session, "one").await;
    agent.wait_for_update("agent_message_chunk").await;
    let (_, second) = agent.prompt(&session, "two").await;
    assert!(error_message(&second).contains("already"), "{second}");
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (_, first) = agent.response(first).await;
    assert_eq!(first["result"]["stopReason"], "cancelled");
}
