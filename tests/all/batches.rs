//! JSON-RPC 2.0 batches on stdio: a line that is an array of requests and
//! notifications gets one array line with every request's answer, once the
//! last is answered; invalid entries get their own `-32600` with `id: null`
//! in it; an empty array is one invalid request; notifications alone get no
//! reply at all; broken JSON is still one parse error.

use serde_json::{Value, json};

use crate::support::harness::{
    Agent, LlmServer, Reply, Split, config_for, scripted_model, stream_head,
};

/// An agent on a model that answers at once (kept alive beside it).
async fn agent() -> (LlmServer, Agent) {
    let server = LlmServer::start(scripted_model(Vec::new())).await;
    let agent = Agent::spawn(&config_for(&server, "test-model")).await;
    (server, agent)
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {"protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
        "clientInfo": {"name": "batcher", "version": "0"}}})
}

/// The next array line, skipping the notifications (session updates) before it.
async fn next_array(agent: &mut Agent) -> Vec<Value> {
    loop {
        let message = agent.next_message().await;
        match message {
            Value::Array(answers) => return answers,
            message if message.get("method").is_some() => continue,
            other => panic!("an answer outside the batch's array: {other}"),
        }
    }
}

fn by_id(answers: &[Value], id: Value) -> &Value {
    answers
        .iter()
        .find(|answer| answer["id"] == id)
        .unwrap_or_else(|| panic!("no answer with id {id} in {answers:?}"))
}

#[tokio::test]
async fn a_batch_of_requests_gets_one_array_with_every_answer() {
    let (_server, mut agent) = agent().await;
    // As the very first line: `initialize` in a batch is served like any other.
    agent
        .send(&json!([
            initialize(1),
            {"jsonrpc": "2.0", "id": "list", "method": "session/list", "params": {}},
        ]))
        .await;
    let answers = next_array(&mut agent).await;
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(by_id(&answers, json!(1))["result"]["protocolVersion"], 1);
    assert!(by_id(&answers, json!("list"))["result"]["sessions"].is_array());

    let cwd = agent.cwd();
    agent
        .send(&json!([
            {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}},
            {"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": {}},
        ]))
        .await;
    let answers = next_array(&mut agent).await;
    assert_eq!(answers.len(), 2, "{answers:?}");
    let session = by_id(&answers, json!(2))["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{answers:?}"))
        .to_string();
    assert!(by_id(&answers, json!(3))["result"]["sessions"].is_array());
    // The session works as any other.
    let (_, answer) = agent.prompt(&session, "hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}

#[tokio::test]
async fn a_batch_s_answer_waits_for_its_slow_prompt_and_other_lines_do_not() {
    // The model starts its answer and never ends it.
    let server = LlmServer::chat(|_request| {
        Reply::stream(stream_head(&["Once ", "upon "]), Split::Every(4)).hanging()
    })
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    agent
        .send(&json!([
            {"jsonrpc": "2.0", "id": 10, "method": "session/prompt",
                "params": {"sessionId": session, "prompt": [{"type": "text", "text": "story"}]}},
            {"jsonrpc": "2.0", "id": 11, "method": "session/list", "params": {}},
        ]))
        .await;
    agent.wait_for_update("agent_message_chunk").await;
    // A request on a line of its own is answered while the batch waits.
    let id = agent.request("session/list", json!({})).await;
    loop {
        let message = agent.next_message().await;
        assert!(!message.is_array(), "the batch answered early: {message}");
        if message.get("method").is_none() {
            assert_eq!(message["id"], id, "{message}");
            break;
        }
    }
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let answers = next_array(&mut agent).await;
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(
        by_id(&answers, json!(10))["result"]["stopReason"],
        "cancelled"
    );
    assert!(by_id(&answers, json!(11))["result"]["sessions"].is_array());
}

#[tokio::test]
async fn notifications_alone_get_no_reply() {
    let (_server, mut agent) = agent().await;
    agent.initialize().await;
    agent
        .send(&json!([
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nope"}},
            {"jsonrpc": "2.0", "method": "no/such/notification"},
        ]))
        .await;
    let id = agent.request("session/list", json!({})).await;
    // The very next line is the list's answer: nothing came for the batch.
    let next = agent.next_message().await;
    assert_eq!(next["id"], id, "{next}");
    assert!(next["result"]["sessions"].is_array(), "{next}");
}

#[tokio::test]
async fn invalid_entries_get_their_own_error_beside_the_valid_answers() {
    let (_server, mut agent) = agent().await;
    agent.initialize().await;
    agent
        .send(&json!([
            {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}},
            1,
            {"foo": "boo"},
            {"jsonrpc": "1.0", "id": 2, "method": "session/list"},
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nope"}},
            {"jsonrpc": "2.0", "id": 3, "method": "no/such"},
        ]))
        .await;
    let answers = next_array(&mut agent).await;
    assert_eq!(answers.len(), 5, "three invalid, two requests: {answers:?}");
    assert!(by_id(&answers, json!(1))["result"]["sessions"].is_array());
    assert_eq!(by_id(&answers, json!(3))["error"]["code"], -32601);
    let invalid: Vec<&Value> = answers.iter().filter(|a| a["id"].is_null()).collect();
    assert_eq!(invalid.len(), 3, "{answers:?}");
    for answer in invalid {
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
    }
}

#[tokio::test]
async fn an_empty_batch_is_one_error_and_broken_json_a_parse_error() {
    let (_server, mut agent) = agent().await;
    agent.initialize().await;
    agent.send_raw("[]").await;
    let answer = agent.next_message().await;
    assert!(answer.is_object(), "not an array: {answer}");
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    agent
        .send_raw(r#"[{"jsonrpc":"2.0","id":1,"method":"session/list"},"#)
        .await;
    let answer = agent.next_message().await;
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    // And the agent serves on.
    let (_, listed) = agent.call("session/list", json!({})).await;
    assert!(listed["result"]["sessions"].is_array(), "{listed}");
}
