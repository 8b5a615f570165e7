//! WebSocket: `GET /acp` upgraded with the token (the connection id in the
//! 101), then one JSON-RPC message per text frame each way, in ACP v1 and
//! v2 alike; binary frames are not ACP and are ignored.

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::support::harness::{LlmServer, agent_text, config_for, scripted_model};
use crate::support::remote::Server;
use crate::support::v2::{messages, only_tool_call, states, v2_parse};
use crate::support::websocket::{
    WsClient, allow_once, is_permission_request, refused_without_token,
};

use agent_client_protocol_schema::v2;

const WRITTEN: &str = "written over a WebSocket\n";

/// A model that writes `a.txt` (a call that needs permission), then says
/// what the tool answered.
async fn writes_a_file() -> LlmServer {
    LlmServer::start(scripted_model(vec![(
        "write_file",
        json!({"path": "a.txt", "content": WRITTEN}),
    )]))
    .await
}

/// Where the first update of `session` whose `sessionUpdate` is `kind`
/// (and that `also` accepts) is among `messages`.
fn update_at(messages: &[Value], kind: &str, also: impl Fn(&Value) -> bool) -> usize {
    messages
        .iter()
        .position(|m| {
            m["method"] == "session/update"
                && m["params"]["update"]["sessionUpdate"] == kind
                && also(&m["params"]["update"])
        })
        .unwrap_or_else(|| panic!("no {kind} among {messages:#?}"))
}

#[tokio::test]
async fn a_v1_turn_over_a_websocket_asks_permission_in_a_frame_and_ends_end_turn() {
    let model = writes_a_file().await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut client, _) = WsClient::connect(&server.ws_url(), 1).await;
    assert_eq!(client.connection.len(), 32, "{}", client.connection);
    assert!(
        client.connection.bytes().all(|b| b.is_ascii_hexdigit()),
        "128 random bits as hex: {}",
        client.connection
    );
    // A binary frame is not ACP, even one that reads as a request: ignored,
    // and the connection goes on.
    let unseen = json!({"jsonrpc": "2.0", "id": 99, "method": "session/new",
        "params": {"cwd": server.work(), "mcpServers": []}});
    client
        .send_frame(Message::binary(unseen.to_string().into_bytes()))
        .await;
    let session = client.new_session(&server.work()).await;

    let prompt = client.start_prompt(&session, "Write a.txt").await;
    let (before, asked) = client.until(is_permission_request).await;
    assert_eq!(asked["params"]["sessionId"], session.as_str(), "{asked}");
    let file = server.work().join("a.txt");
    assert!(!file.exists(), "written before the user allowed it");
    client.answer(&asked, allow_once()).await;
    let (after, answer) = client.until_answer(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), WRITTEN);

    // In order: the call announced, the question, the call completed, then
    // the model's last word, then the answer.
    let call_id = &asked["params"]["toolCall"]["toolCallId"];
    update_at(&before, "tool_call", |u| u["toolCallId"] == *call_id);
    let completed = update_at(&after, "tool_call_update", |u| {
        u["toolCallId"] == *call_id && u["status"] == "completed"
    });
    let last_word = update_at(&after, "agent_message_chunk", |_| true);
    assert!(completed < last_word, "{after:#?}");
    assert!(
        agent_text(&after, &session).starts_with("Done. Last result: "),
        "{after:#?}"
    );
    let everything: Vec<&Value> = before.iter().chain(&after).collect();
    assert!(
        everything.iter().all(|m| m["id"] != 99),
        "the binary frame was read as a request: {everything:#?}"
    );
}

#[tokio::test]
async fn a_v2_turn_over_a_websocket_is_acknowledged_then_followed_to_idle_end_turn() {
    let model = writes_a_file().await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut client, init) = WsClient::connect(&server.ws_url(), 2).await;
    v2_parse::<v2::InitializeResponse>(&init["result"], "the initialize answer");
    let session = client.new_session(&server.work()).await;

    let prompt = client.start_prompt(&session, "Write a.txt").await;
    // Answered once the session holds it, not at the turn's end.
    let (mut log, ack) = client.until_answer(prompt).await;
    let ack: v2::PromptResponse = v2_parse(&ack["result"], "the prompt's answer");
    let asked = match log.iter().find(|m| is_permission_request(m)) {
        Some(asked) => asked.clone(),
        None => {
            let (seen, asked) = client.until(is_permission_request).await;
            log.extend(seen);
            log.push(asked.clone());
            asked
        }
    };
    v2_parse::<v2::RequestPermissionRequest>(&asked["params"], "the permission request");
    let file = server.work().join("a.txt");
    assert!(!file.exists(), "written before the user allowed it");
    client.answer(&asked, allow_once()).await;
    log.extend(client.until_idle(&session).await);

    assert_eq!(
        states(&log, &session),
        ["running", "requires_action", "running", "idle:end_turn"],
        "{log:#?}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), WRITTEN);
    let (call_id, call) = only_tool_call(&log, &session);
    assert_eq!(
        asked["params"]["subject"]["toolCall"]["toolCallId"],
        call_id.as_str(),
        "{asked}"
    );
    assert_eq!(call["status"], "completed", "{call}");
    let conversation = messages(&log, &session);
    assert_eq!(conversation.len(), 2, "{conversation:#?}");
    assert_eq!(
        (conversation[0].role, conversation[0].text.as_str()),
        ("user", "Write a.txt")
    );
    assert_eq!(conversation[0].message_id, ack.message_id.to_string());
    assert_eq!(conversation[1].role, "agent");
    assert!(
        conversation[1].text.starts_with("Done. Last result: "),
        "{conversation:#?}"
    );
}

#[tokio::test]
async fn an_upgrade_without_the_token_is_refused_with_401() {
    let model = writes_a_file().await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    assert_eq!(refused_without_token(&server.ws_url()).await, 401);
    // The agent still serves those with the token.
    let (mut client, _) = WsClient::connect(&server.ws_url(), 1).await;
    client.new_session(&server.work()).await;
}
