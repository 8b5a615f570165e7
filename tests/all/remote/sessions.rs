//! Sessions outlive their connection: a turn whose client went runs to its
//! end and is saved (a question for the gone client counts as cancelled),
//! another connection loads it whole, a load takes a session over from the
//! connection that had it (which then gets an error for it, until it loads
//! it back; a load mid-turn takes the rest of the turn and its question),
//! a server asked to stop answers and keeps its running turns, and each connection has
//! its own session limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::harness::{
    LlmServer, PATIENCE, Recorded, Reply, Split, agent_text, config_for, conversation,
    scripted_model, stream_head, text_stream,
};
use crate::support::remote::{HttpClient, Server, prompt_params};
use crate::support::v2::{messages, states};
use crate::support::wait::wait_until;
use crate::support::websocket::{WsClient, allow_once, is_permission_request};

/// The answer the model gives to the first prompt, held until the test
/// opens its gate; later prompts are answered "Again." at once.
const WHOLE_ANSWER: &str = "All of the answer, streamed while nobody watched.";

async fn first_answer_gated(gate: Arc<Notify>) -> LlmServer {
    let calls = AtomicUsize::new(0);
    LlmServer::chat(move |_| {
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::stream(text_stream(&[WHOLE_ANSWER]), Split::Every(5)).gated(Arc::clone(&gate))
        } else {
            Reply::stream(text_stream(&["Again."]), Split::Whole)
        }
    })
    .await
}

/// A model that answers "answer to" the user's last words.
async fn answers_back() -> LlmServer {
    LlmServer::chat(|request: &Recorded| {
        let answer = format!("answer to {}", request.last_user_text());
        Reply::stream(text_stream(&[&answer]), Split::Whole)
    })
    .await
}

/// The events the server has saved in `session`'s history so far.
fn saved_events(server: &Server, session: &str) -> Vec<Value> {
    let history = server
        .data()
        .join("sessions")
        .join(session)
        .join("history.jsonl");
    std::fs::read_to_string(history)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The turns of `session` whose end the server has saved.
fn saved_turn_ends(server: &Server, session: &str) -> usize {
    saved_events(server, session)
        .iter()
        .filter(|event| event["event"] == "turn_end")
        .count()
}

async fn wait_saved_turn_ends(server: &Server, session: &str, turns: usize) {
    wait_until(&format!("{turns} turn ends saved in {session}"), || {
        saved_turn_ends(server, session) >= turns
    })
    .await;
}

/// Waits until the server has closed connection `id` (its sessions are
/// orphaned by then).
async fn wait_closed(server: &Server, id: &str) {
    wait_until(&format!("the server to close connection {id}"), || {
        server
            .stderr()
            .lines()
            .any(|line| line.contains("connection closed") && line.contains(id))
    })
    .await;
}

/// A model that writes `a.txt` with `content`, its server, and a
/// WebSocket client whose turn waits on the permission question for that
/// write: (model, server, client, session, the question).
async fn waiting_on_a_write(content: &str) -> (LlmServer, Server, WsClient, String, Value) {
    let model = LlmServer::start(scripted_model(vec![(
        "write_file",
        json!({"path": "a.txt", "content": content}),
    )]))
    .await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut client, _) = WsClient::connect(&server.ws_url(), 1).await;
    let session = client.new_session(&server.work()).await;
    client.start_prompt(&session, "Write a.txt").await;
    let (_, asked) = client.until(is_permission_request).await;
    (model, server, client, session, asked)
}

fn text_update(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
}

fn load_params(session: &str, server: &Server) -> Value {
    json!({"sessionId": session, "cwd": server.work(), "mcpServers": []})
}

// ------------------------------------------------------------ a turn with nobody connected

#[tokio::test]
async fn a_turn_whose_websocket_vanished_runs_to_its_end_and_a_new_connection_loads_it_whole() {
    let gate = Arc::new(Notify::new());
    let model = first_answer_gated(Arc::clone(&gate)).await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut gone, _) = WsClient::connect(&server.ws_url(), 1).await;
    let session = gone.new_session(&server.work()).await;
    gone.start_prompt(&session, "Tell me everything").await;
    wait_until("the model asked", || model.chat_requests().len() == 1).await;
    let connection = gone.connection.clone();
    gone.vanish();
    wait_closed(&server, &connection).await;

    // The model answers only now, to nobody.
    gate.notify_one();
    wait_saved_turn_ends(&server, &session, 1).await;

    let (mut next, _) = WsClient::connect(&server.ws_url(), 1).await;
    let (replay, loaded) = next.load(&session, &server.work()).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    assert_eq!(
        conversation(&replay, &session),
        [
            text_update("user_message_chunk", "Tell me everything"),
            text_update("agent_message_chunk", WHOLE_ANSWER),
        ]
    );
    // It is this connection's now.
    let prompt = next.start_prompt(&session, "And then?").await;
    let (seen, answer) = next.until_answer(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&seen, &session), "Again.");
}

#[tokio::test]
async fn a_turn_whose_http_connection_was_deleted_runs_to_its_end_and_loads_whole_over_http() {
    let gate = Arc::new(Notify::new());
    let model = first_answer_gated(Arc::clone(&gate)).await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut gone, _) = HttpClient::connect(&server.url, 1).await;
    let session = gone.new_session(&server.work()).await;
    let _unread = gone.session_stream(&session).await;
    gone.request(
        "session/prompt",
        prompt_params(&session, "Tell me everything"),
    )
    .await;
    wait_until("the model asked", || model.chat_requests().len() == 1).await;
    assert_eq!(gone.delete().await, 202);
    assert!(gone.stream.ended().await, "the connection's stream goes on");
    wait_closed(&server, &gone.connection).await;

    gate.notify_one();
    wait_saved_turn_ends(&server, &session, 1).await;

    // The session's stream is read: the load's answer follows its replay there.
    let (mut next, _) = HttpClient::connect(&server.url, 1).await;
    let mut stream = next.session_stream(&session).await;
    let load = next
        .request("session/load", load_params(&session, &server))
        .await;
    let (replay, loaded) = stream.until_answer(load).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    assert_eq!(
        conversation(&replay, &session),
        [
            text_update("user_message_chunk", "Tell me everything"),
            text_update("agent_message_chunk", WHOLE_ANSWER),
        ]
    );
    let prompt = next
        .request("session/prompt", prompt_params(&session, "And then?"))
        .await;
    let (seen, answer) = stream.until_answer(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&seen, &session), "Again.");
}

#[tokio::test]
async fn a_permission_question_pending_when_the_client_goes_counts_as_cancelled() {
    let (model, server, gone, session, asked) = waiting_on_a_write("never\n").await;
    let call_id = asked["params"]["toolCall"]["toolCallId"].clone();
    gone.vanish();

    // Nobody can answer: the turn ends as if the user had cancelled.
    wait_saved_turn_ends(&server, &session, 1).await;
    assert!(!server.work().join("a.txt").exists(), "written unallowed");
    let (mut next, _) = WsClient::connect(&server.ws_url(), 1).await;
    let (replay, loaded) = next.load(&session, &server.work()).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    let last = replay
        .iter()
        .map(|m| &m["params"]["update"])
        .rfind(|u| u["toolCallId"] == call_id)
        .unwrap_or_else(|| panic!("the call is not in the replay: {replay:#?}"));
    assert_eq!(last["status"], "failed", "{replay:#?}");
    assert_eq!(
        last["rawOutput"]["error"], "cancelled by the user",
        "{replay:#?}"
    );
    // The turn ended there, as a cancel ends it: the model was not asked on.
    assert_eq!(model.chat_requests().len(), 1);
    // The session is not stuck on the question: it takes a prompt.
    let prompt = next.start_prompt(&session, "Then say so").await;
    let (_, answer) = next.until_answer(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(!server.work().join("a.txt").exists(), "written unallowed");
}

#[tokio::test]
async fn a_permission_question_pending_at_a_takeover_is_asked_of_the_new_connection() {
    let (_model, server, first, session, asked_first) =
        waiting_on_a_write("allowed by the second\n").await;

    // The session moves before the first connection answers: the question
    // moves with it, to the connection that can show it now.
    let (mut second, _) = WsClient::connect(&server.ws_url(), 1).await;
    let load = second
        .request("session/load", load_params(&session, &server))
        .await;
    let (mut seen, asked) = second.until(is_permission_request).await;
    assert_eq!(
        asked["params"]["toolCall"]["toolCallId"], asked_first["params"]["toolCall"]["toolCallId"],
        "{asked}"
    );
    // The first connection goes; the question is the second's to answer.
    first.vanish();
    second.answer(&asked, allow_once()).await;
    let (more, completed) = second
        .until(|m| {
            m["params"]["update"]["sessionUpdate"] == "tool_call_update"
                && m["params"]["update"]["status"] == "completed"
        })
        .await;
    assert_eq!(
        completed["params"]["update"]["toolCallId"],
        asked["params"]["toolCall"]["toolCallId"]
    );
    seen.extend(more);
    assert!(
        seen.iter()
            .any(|m| m.get("method").is_none() && m["id"] == load),
        "the load was not answered: {seen:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(server.work().join("a.txt")).unwrap(),
        "allowed by the second\n"
    );
}

#[tokio::test]
async fn a_server_asked_to_stop_answers_the_running_turn_then_closes_its_websockets() {
    let model = LlmServer::chat(|_| {
        Reply::stream(stream_head(&["Once ", "upon "]), Split::Whole).hanging()
    })
    .await;
    let mut server = Server::start(&config_for(&model, "test-model")).await;
    let (mut client, _) = WsClient::connect(&server.ws_url(), 1).await;
    let session = client.new_session(&server.work()).await;
    let prompt = client.start_prompt(&session, "A story").await;
    client
        .until(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;

    let pid = server.child.id().expect("serve runs");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // The turn is answered (cancelled) before the socket closes.
    let last = client.until_closed().await;
    let answer = last
        .iter()
        .find(|m| m["id"] == prompt && m.get("method").is_none())
        .unwrap_or_else(|| panic!("no answer to the prompt before the close: {last:?}"));
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let status = tokio::time::timeout(*PATIENCE, server.child.wait())
        .await
        .expect("serve stops")
        .unwrap();
    assert!(status.success(), "{status}; stderr:\n{}", server.stderr());
    // The turn so far is kept, ended, for a later load.
    assert_eq!(saved_turn_ends(&server, &session), 1);
}

// ------------------------------------------------------------ takeover

#[tokio::test]
async fn a_load_takes_a_session_over_and_the_first_connection_can_take_it_back() {
    let model = answers_back().await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut first, _) = HttpClient::connect(&server.url, 1).await;
    let session = first.new_session(&server.work()).await;
    let mut first_stream = first.session_stream(&session).await;
    let prompt = first
        .request("session/prompt", prompt_params(&session, "one"))
        .await;
    let (_, answer) = first_stream.until_answer(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    // Another connection (a WebSocket) loads it: it gets it whole, and may prompt it.
    let (mut second, _) = WsClient::connect(&server.ws_url(), 1).await;
    let (replay, loaded) = second.load(&session, &server.work()).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    assert_eq!(
        conversation(&replay, &session),
        [
            text_update("user_message_chunk", "one"),
            text_update("agent_message_chunk", "answer to one"),
        ]
    );
    let prompt = second.start_prompt(&session, "two").await;
    let (seen, answer) = second.until_answer(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&seen, &session), "answer to two");

    // The first connection is told it is no longer its own.
    let prompt = first
        .request("session/prompt", prompt_params(&session, "three"))
        .await;
    let (_, refused) = first_stream.until_answer(prompt).await;
    assert_eq!(refused["error"]["code"], -32002, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("was loaded by another connection"),
        "{refused}"
    );

    // Loading it again takes it back, with the other's turn in it (the
    // answer after the replay, on the session's stream it reads).
    let load = first
        .request("session/load", load_params(&session, &server))
        .await;
    let (replay, loaded) = first_stream.until_answer(load).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    assert_eq!(
        conversation(&replay, &session),
        [
            text_update("user_message_chunk", "one"),
            text_update("agent_message_chunk", "answer to one"),
            text_update("user_message_chunk", "two"),
            text_update("agent_message_chunk", "answer to two"),
        ]
    );
    let prompt = first
        .request("session/prompt", prompt_params(&session, "four"))
        .await;
    let (seen, answer) = first_stream.until_answer(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&seen, &session), "answer to four");

    // Now the WebSocket is refused, whatever it asks of the session.
    let mode = loaded["result"]["modes"]["currentModeId"].clone();
    let (_, refused) = second
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": mode}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32002, "{refused}");
}

// ------------------------------------------------------------ limits

#[tokio::test]
async fn past_its_session_limit_a_connection_is_refused_and_another_is_not() {
    let model = answers_back().await;
    let config = format!(
        "{}\n[serve]\nmax_sessions_per_connection = 1\n",
        config_for(&model, "test-model")
    );
    let server = Server::start(&config).await;
    let (mut full, _) = WsClient::connect(&server.ws_url(), 1).await;
    let first = full.new_session(&server.work()).await;
    let new = json!({"cwd": server.work(), "mcpServers": []});
    let (_, refused) = full.call("session/new", new.clone()).await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("max_sessions_per_connection") && message.contains("has 1 session"),
        "{refused}"
    );

    let (mut other, _) = WsClient::connect(&server.ws_url(), 1).await;
    other.new_session(&server.work()).await;

    // Closing one makes room again.
    let (_, closed) = full
        .call("session/close", json!({"sessionId": first}))
        .await;
    assert!(closed["result"].is_object(), "{closed}");
    let (_, opened) = full.call("session/new", new).await;
    assert!(opened["result"]["sessionId"].is_string(), "{opened}");
}

#[tokio::test]
async fn a_load_mid_turn_takes_the_rest_of_the_turn_to_the_new_connection() {
    let gate = Arc::new(Notify::new());
    let model = first_answer_gated(Arc::clone(&gate)).await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut first, _) = WsClient::connect(&server.ws_url(), 1).await;
    let session = first.new_session(&server.work()).await;
    let prompt = first.start_prompt(&session, "Tell me everything").await;
    wait_until("the model asked", || model.chat_requests().len() == 1).await;
    // Its replay is read from the history: the prompt is there before the model answers.
    wait_until("the prompt saved", || {
        saved_events(&server, &session)
            .iter()
            .any(|event| event["event"] == "user_prompt")
    })
    .await;

    // A v2 client resumes it while the model is still to answer.
    let (mut second, _) = WsClient::connect(&server.ws_url(), 2).await;
    let (replay, resumed) = second.resume_replaying(&session, &server.work()).await;
    assert!(resumed["result"].is_object(), "{resumed}");
    let replayed = messages(&replay, &session);
    assert_eq!(replayed.len(), 1, "{replay:#?}");
    assert_eq!(
        (replayed[0].role, replayed[0].text.as_str()),
        ("user", "Tell me everything")
    );
    // The resume says the turn runs on, not that the session is ready.
    assert_eq!(states(&replay, &session), ["running"], "{replay:#?}");
    gate.notify_one();
    let live = second.until_idle(&session).await;
    let answer = messages(&live, &session);
    assert_eq!(answer.len(), 1, "{live:#?}");
    assert_eq!(
        (answer[0].role, answer[0].text.as_str()),
        ("agent", WHOLE_ANSWER)
    );
    assert_eq!(states(&live, &session), ["idle:end_turn"], "{live:#?}");

    // The first connection's request is still answered, but the answer's
    // words went to the connection that has the session now.
    let (seen, answer) = first.until_answer(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&seen, &session), "", "{seen:#?}");
}
