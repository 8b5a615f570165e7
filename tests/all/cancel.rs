//! Every turn ends: on session/cancel, on $/cancel_request, on session/close,
//! and when the client closes stdin in the middle of a turn.

use serde_json::json;

use crate::support::harness::{
    Agent, LlmServer, Reply, Split, agent_text, config_for, stream_head, text_stream,
};
use crate::support::wait::wait_until;

/// The first prompt hangs mid-stream; later ones answer normally.
async fn hang_then_answer() -> LlmServer {
    let calls = std::sync::atomic::AtomicUsize::new(0);
    LlmServer::chat(move |_request| {
        if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            Reply::stream(stream_head(&["Once ", "upon ", "a "]), Split::Every(4)).hanging()
        } else {
            Reply::stream(text_stream(&["fresh ", "answer"]), Split::Every(4))
        }
    })
    .await
}

/// An agent whose first prompt is streaming (its first chunk has arrived)
/// and will not end by itself: the server, the agent, the session and the
/// prompt's request id.
async fn turn_in_progress() -> (LlmServer, Agent, String, i64) {
    let server = hang_then_answer().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let id = agent.start_prompt(&session, "story").await;
    agent.wait_for_update("agent_message_chunk").await;
    (server, agent, session, id)
}

#[tokio::test]
async fn cancel_mid_stream_answers_cancelled_and_the_next_prompt_works() {
    let (server, mut agent, session, id) = turn_in_progress().await;
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (_, response) = agent.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    // The provider connection was dropped, not left streaming.
    server.wait_disconnect().await;

    let (seen, response) = agent.prompt(&session, "again").await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&seen, &session), "fresh answer");
    // What the user saw of the cancelled answer stays in the conversation.
    let chat = server.chat_requests();
    let messages = chat[1].body["messages"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "assistant"
                && m["content"].as_str().unwrap_or("").starts_with("Once")),
        "{messages:?}"
    );
}

#[tokio::test]
async fn cancel_request_answers_the_prompt_with_request_cancelled() {
    let (server, mut agent, session, id) = turn_in_progress().await;
    agent
        .notify("$/cancel_request", json!({"requestId": id}))
        .await;
    let (_, response) = agent.response(id).await;
    assert_eq!(response["error"]["code"], -32800, "{response}");
    server.wait_disconnect().await;
    // Cancelling a request that already finished changes nothing.
    agent
        .notify("$/cancel_request", json!({"requestId": id}))
        .await;
    let (_, response) = agent.prompt(&session, "again").await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn closing_a_session_ends_its_turn() {
    let (_server, mut agent, session, id) = turn_in_progress().await;
    let (_, closed) = agent
        .call("session/close", json!({"sessionId": session}))
        .await;
    assert!(closed.get("result").is_some(), "{closed}");
    let (_, response) = agent.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled");
    let (_, response) = agent.prompt(&session, "still there?").await;
    assert_eq!(response["error"]["code"], -32002);
}

#[tokio::test]
async fn closing_stdin_mid_turn_answers_the_turn_and_exits_cleanly() {
    let (server, mut agent, _session, id) = turn_in_progress().await;
    agent.close_stdin();
    let status = agent.wait_exit().await;
    assert_eq!(status.code(), Some(0), "stderr:\n{}", agent.stderr());
    let rest = agent.drain().await;
    let answer = rest
        .iter()
        .find(|m| m["id"] == id)
        .expect("the prompt was answered before exit");
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    server.wait_disconnect().await;
}

#[tokio::test]
async fn cancel_before_the_server_answers_at_all() {
    // The server accepts the request but never sends headers.
    let server = LlmServer::chat(|_request| {
        Reply::stream(Vec::new(), Split::Whole)
            .gated(std::sync::Arc::new(tokio::sync::Notify::new()))
            .hanging()
    })
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let id = agent.start_prompt(&session, "x").await;
    // Wait until the request reached the server, then cancel.
    wait_until("the request reached the server", || {
        !server.chat_requests().is_empty()
    })
    .await;
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (_, response) = agent.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled");
}
