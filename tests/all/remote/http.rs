//! Streamable HTTP: `initialize` answered in its POST with the connection
//! id, everything else 202 with its answer on a stream, as the RFD routes it;
//! the statuses a client gets when it does not; a permission question and
//! its answer across the streams; a client that never reads, one that never
//! opens a stream, and malformed requests, none of which stop the server.

use std::io::{Read, Write};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::harness::{
    LlmServer, PATIENCE, Reply, Split, config_for, scripted_model, text_stream,
};
use crate::support::remote::{HttpClient, Server, Stream, TOKEN, post, prompt_params};

/// A well-formed connection id that no server handed out.
const UNKNOWN_CONNECTION: &str = "5f0c7d2e9a4b4c1d8e3f60718293a4b5";

/// `method /acp` with the token and exactly these other headers.
fn request(method: Method, url: &str, headers: &[(&str, &str)]) -> reqwest::RequestBuilder {
    let mut request = reqwest::Client::new()
        .request(method, url)
        .bearer_auth(TOKEN);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request
}

async fn status_of(request: reqwest::RequestBuilder) -> StatusCode {
    request.send().await.unwrap().status()
}

fn prompt(id: i64, session: &str, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
        "params": prompt_params(session, text)})
}

/// The agent's message text among `updates`.
fn agent_text(updates: &[Value]) -> String {
    updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["params"]["update"]["content"]["text"].as_str())
        .collect()
}

/// Polls `status` until it is 404: the server ended the connection.
async fn wait_until_gone(url: &str, connection: &str) {
    let deadline = tokio::time::Instant::now() + *PATIENCE;
    let cancel =
        json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 0}});
    loop {
        let status = post(url, &[("acp-connection-id", connection)], &cancel)
            .await
            .status();
        if status == StatusCode::NOT_FOUND {
            return;
        }
        assert_eq!(status, StatusCode::ACCEPTED, "while the connection lives");
        assert!(
            tokio::time::Instant::now() < deadline,
            "connection {connection} still served after {:?}",
            *PATIENCE
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_prompt_over_http_streams_its_updates_and_answer_on_the_session_stream() {
    let model =
        LlmServer::chat(|_| Reply::stream(text_stream(&["Hello ", "remote"]), Split::Whole)).await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut client, init) = HttpClient::connect(&server.url, 1).await;
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert_eq!(client.connection.len(), 32, "128 random bits as hex");
    let session = client.new_session(&server.work()).await;
    let mut stream = client.session_stream(&session).await;
    let id = client
        .request("session/prompt", prompt_params(&session, "hi"))
        .await;
    let (updates, answer) = stream.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&updates), "Hello remote");
    assert!(
        updates
            .iter()
            .all(|u| u["params"]["sessionId"] == session.as_str()),
        "only this session's messages on its stream"
    );
}

/// One stream's messages over `client` (a GET that stays open).
async fn stream_over(
    client: &reqwest::Client,
    url: &str,
    connection: &str,
    session: Option<&str>,
) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
    use futures::StreamExt;
    let mut get = client
        .get(url)
        .bearer_auth(TOKEN)
        .header("accept", "text/event-stream")
        .header("acp-connection-id", connection);
    if let Some(session) = session {
        get = get.header("acp-session-id", session);
    }
    let response = get.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut events = eventsource_stream::EventStream::new(response.bytes_stream());
        while let Some(Ok(event)) = events.next().await {
            if let Ok(message) = serde_json::from_str(&event.data)
                && tx.send(message).is_err()
            {
                return;
            }
        }
    });
    rx
}

/// The answer to request `id` among `messages` (what came before it too).
async fn answer_over(
    messages: &mut tokio::sync::mpsc::UnboundedReceiver<Value>,
    id: i64,
) -> (Vec<Value>, Value) {
    let mut before = Vec::new();
    loop {
        let message = tokio::time::timeout(*PATIENCE, messages.recv())
            .await
            .expect("a message in time")
            .expect("the stream goes on");
        if message["id"] == id && message.get("method").is_none() {
            return (before, message);
        }
        before.push(message);
    }
}

#[tokio::test]
async fn a_whole_session_over_one_http2_connection() {
    let model =
        LlmServer::chat(|_| Reply::stream(text_stream(&["over ", "h2"]), Split::Whole)).await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    // Cleartext HTTP/2 (h2c): every POST and both streams multiplexed on
    // one TCP connection, as the RFD has it.
    let client = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let post = |headers: &[(&str, &str)], body: Value| {
        let mut request = client
            .post(&server.url)
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send()
    };
    let init = post(
        &[],
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
    )
    .await
    .unwrap();
    assert_eq!(init.version(), reqwest::Version::HTTP_2);
    assert_eq!(init.status(), StatusCode::OK);
    let connection = init.headers()["acp-connection-id"]
        .to_str()
        .unwrap()
        .to_string();
    let mut main = stream_over(&client, &server.url, &connection, None).await;
    let created = post(
        &[("acp-connection-id", &connection)],
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
            "params": {"cwd": server.work(), "mcpServers": []}}),
    )
    .await
    .unwrap();
    assert_eq!(created.status(), StatusCode::ACCEPTED);
    let (_, answer) = answer_over(&mut main, 1).await;
    let session = answer["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_string();
    let mut updates = stream_over(&client, &server.url, &connection, Some(&session)).await;
    let prompted = post(
        &[
            ("acp-connection-id", &connection),
            ("acp-session-id", &session),
        ],
        prompt(2, &session, "hi"),
    )
    .await
    .unwrap();
    assert_eq!(prompted.status(), StatusCode::ACCEPTED);
    let (seen, answer) = answer_over(&mut updates, 2).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&seen), "over h2");
}

#[tokio::test]
async fn session_new_is_answered_on_the_connection_stream() {
    let model = LlmServer::chat(|_| Reply::stream(text_stream(&["ok"]), Split::Whole)).await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut client, _) = HttpClient::connect(&server.url, 1).await;
    let id = client
        .request(
            "session/new",
            json!({"cwd": server.work(), "mcpServers": []}),
        )
        .await;
    let (_, answer) = client.stream.until_answer(id).await;
    let session = answer["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"));
    // The id it answered with names a session this connection can prompt.
    let mut stream = client.session_stream(session).await;
    let id = client
        .request("session/prompt", prompt_params(session, "hi"))
        .await;
    let (_, answer) = stream.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}

#[tokio::test]
async fn a_permission_question_comes_on_the_session_stream_and_its_answer_allows_the_write() {
    let model = LlmServer::start(scripted_model(vec![(
        "write_file",
        json!({"path": "remote.txt", "content": "written over HTTP\n"}),
    )]))
    .await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut client, _) = HttpClient::connect(&server.url, 1).await;
    let session = client.new_session(&server.work()).await;
    let mut stream = client.session_stream(&session).await;
    let id = client
        .request("session/prompt", prompt_params(&session, "write it"))
        .await;
    let asked = loop {
        let message = stream.next().await;
        if message["method"] == "session/request_permission" {
            break message;
        }
        assert!(
            message.get("result").is_none(),
            "answered unasked: {message}"
        );
    };
    assert_eq!(asked["params"]["sessionId"], session.as_str(), "{asked}");
    assert_eq!(asked["params"]["toolCall"]["title"], "Write remote.txt");
    assert!(
        !server.work().join("remote.txt").exists(),
        "written before it was allowed"
    );
    let allow = json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}});
    let answered = post(
        &server.url,
        &[
            ("acp-connection-id", client.connection.as_str()),
            ("acp-session-id", session.as_str()),
        ],
        &allow,
    )
    .await;
    assert_eq!(answered.status(), StatusCode::ACCEPTED);
    let (_, answer) = stream.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        std::fs::read_to_string(server.work().join("remote.txt")).unwrap(),
        "written over HTTP\n"
    );
}

#[tokio::test]
async fn posts_without_the_ids_the_rfd_asks_for_are_400_and_do_not_reach_the_agent() {
    let model = LlmServer::chat(|_| Reply::stream(text_stream(&["fine"]), Split::Whole)).await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut client, _) = HttpClient::connect(&server.url, 1).await;
    let session = client.new_session(&server.work()).await;
    let connection = client.connection.clone();
    let url = server.url.as_str();

    let no_connection = post(url, &[], &prompt(10, &session, "refused")).await;
    assert_eq!(no_connection.status(), StatusCode::BAD_REQUEST);
    assert!(
        no_connection
            .text()
            .await
            .unwrap()
            .contains("Acp-Connection-Id"),
        "says which header is missing"
    );
    let init = json!({"jsonrpc": "2.0", "id": 11, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    let reinitialize = post(url, &[("acp-connection-id", &connection)], &init).await;
    assert_eq!(reinitialize.status(), StatusCode::BAD_REQUEST);
    assert!(
        reinitialize.headers().get("acp-connection-id").is_none(),
        "no second connection opened"
    );
    let no_session = post(
        url,
        &[("acp-connection-id", &connection)],
        &prompt(12, &session, "refused"),
    )
    .await;
    assert_eq!(no_session.status(), StatusCode::BAD_REQUEST);
    assert!(no_session.text().await.unwrap().contains("Acp-Session-Id"));
    let other_session = post(
        url,
        &[
            ("acp-connection-id", &connection),
            ("acp-session-id", "another-session"),
        ],
        &prompt(13, &session, "refused"),
    )
    .await;
    assert_eq!(other_session.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        status_of(request(Method::DELETE, url, &[])).await,
        StatusCode::BAD_REQUEST,
        "DELETE without a connection id"
    );
    assert_eq!(
        status_of(request(
            Method::GET,
            url,
            &[("accept", "text/event-stream")]
        ))
        .await,
        StatusCode::BAD_REQUEST,
        "GET without a connection id"
    );

    // The connection is as it was: a proper prompt runs, and only it.
    let mut stream = client.session_stream(&session).await;
    let answered = client.send(&prompt(14, &session, "accepted")).await;
    assert_eq!(answered.status(), StatusCode::ACCEPTED);
    let (updates, answer) = stream.until_answer(14).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&updates), "fine");
    let asked: Vec<String> = model
        .chat_requests()
        .iter()
        .map(|r| r.last_user_text())
        .collect();
    assert!(
        asked.iter().all(|text| !text.contains("refused")),
        "{asked:?}"
    );
}

#[tokio::test]
async fn unknown_connections_are_404_and_a_deleted_one_ends_with_its_streams() {
    let model = LlmServer::chat(|_| Reply::stream(text_stream(&["ok"]), Split::Whole)).await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let url = server.url.as_str();
    let cancel =
        json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}});
    for unknown in [UNKNOWN_CONNECTION, "not-a-connection-id"] {
        let posted = post(url, &[("acp-connection-id", unknown)], &cancel).await;
        assert_eq!(posted.status(), StatusCode::NOT_FOUND, "POST as {unknown}");
        let read = request(
            Method::GET,
            url,
            &[
                ("acp-connection-id", unknown),
                ("accept", "text/event-stream"),
            ],
        );
        assert_eq!(
            status_of(read).await,
            StatusCode::NOT_FOUND,
            "GET {unknown}"
        );
        let delete = request(Method::DELETE, url, &[("acp-connection-id", unknown)]);
        assert_eq!(
            status_of(delete).await,
            StatusCode::NOT_FOUND,
            "DELETE {unknown}"
        );
    }

    let (mut client, _) = HttpClient::connect(url, 1).await;
    let session = client.new_session(&server.work()).await;
    let mut session_stream = client.session_stream(&session).await;
    assert_eq!(client.delete().await, StatusCode::ACCEPTED);
    assert!(client.stream.ended().await, "the connection's stream ends");
    assert!(session_stream.ended().await, "the session's stream ends");
    let connection = client.connection.as_str();
    let after = client.send(&prompt(20, &session, "too late")).await;
    assert_eq!(after.status(), StatusCode::NOT_FOUND);
    let read = request(
        Method::GET,
        url,
        &[
            ("acp-connection-id", connection),
            ("accept", "text/event-stream"),
        ],
    );
    assert_eq!(status_of(read).await, StatusCode::NOT_FOUND);
    assert_eq!(client.delete().await, StatusCode::NOT_FOUND, "deleted once");
    // The server goes on: a new connection works.
    let (mut again, _) = HttpClient::connect(url, 1).await;
    again.new_session(&server.work()).await;
}

#[tokio::test]
async fn wrong_media_types_batches_and_second_readers_are_refused_by_their_status() {
    let model = LlmServer::chat(|_| Reply::stream(text_stream(&["ok"]), Split::Whole)).await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let url = server.url.as_str();
    let (mut client, _) = HttpClient::connect(url, 1).await;
    let session = client.new_session(&server.work()).await;
    let connection = client.connection.as_str();
    let new = json!({"jsonrpc": "2.0", "id": 30, "method": "session/new",
        "params": {"cwd": server.work(), "mcpServers": []}});

    let as_text = request(
        Method::POST,
        url,
        &[
            ("acp-connection-id", connection),
            ("content-type", "text/plain"),
        ],
    )
    .body(new.to_string());
    assert_eq!(status_of(as_text).await, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let untyped =
        request(Method::POST, url, &[("acp-connection-id", connection)]).body(new.to_string());
    assert_eq!(status_of(untyped).await, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    let batch =
        json!([new, {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}}]);
    let batched = post(url, &[("acp-connection-id", connection)], &batch).await;
    assert_eq!(batched.status(), StatusCode::NOT_IMPLEMENTED);

    for accept in [None, Some("application/json")] {
        let mut headers = vec![("acp-connection-id", connection)];
        headers.extend(accept.map(|accept| ("accept", accept)));
        assert_eq!(
            status_of(request(Method::GET, url, &headers)).await,
            StatusCode::NOT_ACCEPTABLE,
            "GET with Accept {accept:?}"
        );
    }

    let second_reader = request(
        Method::GET,
        url,
        &[
            ("acp-connection-id", connection),
            ("accept", "text/event-stream"),
        ],
    );
    assert_eq!(status_of(second_reader).await, StatusCode::CONFLICT);
    let _session_stream = client.session_stream(&session).await;
    let second_session_reader = request(
        Method::GET,
        url,
        &[
            ("acp-connection-id", connection),
            ("acp-session-id", session.as_str()),
            ("accept", "text/event-stream"),
        ],
    );
    assert_eq!(status_of(second_session_reader).await, StatusCode::CONFLICT);

    // None of it reached the agent: the only answer on the connection's
    // stream is the next request's.
    let id = client
        .request(
            "session/new",
            json!({"cwd": server.work(), "mcpServers": []}),
        )
        .await;
    let (before, answer) = client.stream.until_answer(id).await;
    assert!(answer["result"]["sessionId"].is_string(), "{answer}");
    assert!(before.is_empty(), "{before:?}");
}

#[tokio::test]
async fn a_body_that_is_no_message_is_answered_on_the_connection_stream_as_on_stdio() {
    let model = LlmServer::chat(|_| Reply::stream(text_stream(&["ok"]), Split::Whole)).await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut client, _) = HttpClient::connect(&server.url, 1).await;
    let as_json = [
        ("acp-connection-id", client.connection.as_str()),
        ("content-type", "application/json"),
    ];
    let empty = request(Method::POST, &server.url, &as_json).body("");
    assert_eq!(status_of(empty).await, StatusCode::BAD_REQUEST);
    for (body, code) in [("{not json", -32700), ("42", -32600)] {
        let posted = request(Method::POST, &server.url, &as_json).body(body);
        assert_eq!(status_of(posted).await, StatusCode::ACCEPTED, "{body}");
        let answer = client.stream.next().await;
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
        assert_eq!(answer["id"], Value::Null, "{answer}");
    }
    // The connection goes on.
    client.new_session(&server.work()).await;
}

#[tokio::test]
async fn a_client_that_never_reads_is_disconnected_and_others_are_served() {
    // Twice the streams' 8 MiB bound, in 64 KiB pieces, for a prompt that
    // asks for a lot; a line for any other.
    let piece = "x".repeat(64 << 10);
    let pieces: Vec<&str> = std::iter::repeat_n(piece.as_str(), 256).collect();
    let flood = text_stream(&pieces);
    let model = LlmServer::chat(move |request| {
        if request.last_user_text().contains("a lot") {
            Reply::stream(flood.clone(), Split::Every(1 << 20))
        } else {
            Reply::stream(text_stream(&["still here"]), Split::Whole)
        }
    })
    .await;
    let config = format!(
        "{}\n[serve]\nstall_timeout_secs = 1\n",
        config_for(&model, "test-model")
    );
    let server = Server::start(&config).await;
    let (mut stalled, _) = HttpClient::connect(&server.url, 1).await;
    let session = stalled.new_session(&server.work()).await;
    // Its session's stream is never opened: the turn's updates pile up.
    stalled
        .request("session/prompt", prompt_params(&session, "say a lot"))
        .await;
    assert!(
        stalled.stream.ended().await,
        "the stalled connection is ended, its connection stream with it"
    );
    wait_until_gone(&server.url, &stalled.connection).await;

    let (mut other, _) = HttpClient::connect(&server.url, 1).await;
    let session = other.new_session(&server.work()).await;
    let mut stream = other.session_stream(&session).await;
    let id = other
        .request("session/prompt", prompt_params(&session, "hello"))
        .await;
    let (updates, answer) = stream.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&updates), "still here");
}

#[tokio::test]
async fn a_connection_that_never_opens_a_stream_is_closed_when_idle() {
    let model = LlmServer::chat(|_| Reply::stream(text_stream(&["ok"]), Split::Whole)).await;
    let config = format!(
        "{}\n[serve]\nidle_timeout_secs = 1\n",
        config_for(&model, "test-model")
    );
    let server = Server::start(&config).await;
    // One that reads its stream, opened first, so it has been there longer.
    let (mut reading, _) = HttpClient::connect(&server.url, 1).await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    let opened = post(&server.url, &[], &init).await;
    assert_eq!(opened.status(), StatusCode::OK);
    let silent = opened.headers()["acp-connection-id"]
        .to_str()
        .unwrap()
        .to_string();
    wait_until_gone(&server.url, &silent).await;
    let read = request(
        Method::GET,
        &server.url,
        &[
            ("acp-connection-id", &silent),
            ("accept", "text/event-stream"),
        ],
    );
    assert_eq!(status_of(read).await, StatusCode::NOT_FOUND);
    // The one with its stream open is still served.
    reading.new_session(&server.work()).await;
}

/// How a request's `Content-Length` is written.
#[derive(Debug, Clone, Copy)]
enum Length {
    Exact,
    Missing,
    /// Any number, true or not.
    Claimed(u64),
    Invalid(&'static str),
}

/// One HTTP exchange's bytes: mostly requests that pass the HTTP parser
/// and reach the endpoint with something wrong in them (a header, the
/// token, the body, the length), the rest cut short or garbage.
fn raw_request() -> impl Strategy<Value = Vec<u8>> {
    let method = prop_oneof![
        16 => prop::sample::select(vec!["POST", "GET", "DELETE"]).prop_map(str::to_string),
        1 => prop::sample::select(vec!["PUT", "OPTIONS", "HEAD", "PATCH", "PRI", "CONNECT"])
            .prop_map(str::to_string),
        1 => "[A-Za-z]{0,12}",
        1 => "[ -~]{0,20}",
    ];
    let path = prop_oneof![
        16 => Just("/acp".to_string()),
        1 => prop::sample::select(vec!["/acp?x=1", "*", "/", "/acp/", "http://127.0.0.1/acp"])
            .prop_map(str::to_string),
        1 => "/[ -~]{0,40}",
        1 => "[^\r\n]{0,40}",
    ];
    let version = prop_oneof![
        16 => Just("HTTP/1.1"),
        1 => prop::sample::select(vec!["HTTP/1.0", "HTTP/2.0", "HTTP/9.9", "", "http/1.1"]),
    ];
    let header = prop_oneof![
        12 => prop::sample::select(vec![
            "Content-Type: application/json; charset=utf-8",
            "Content-Type: text/plain",
            "Accept: text/event-stream",
            "Accept: */*",
            "Acp-Session-Id: s",
            "Origin: https://evil.example",
            "Origin: null",
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Connection: close",
            "Sec-WebSocket-Version: 13",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            "Transfer-Encoding: chunked",
            "Expect: 100-continue",
            "Authorization: Bearer wrong",
            "Authorization: Basic Zm9vOmJhcg==",
        ])
        .prop_map(str::to_string),
        2 => Just(format!("Acp-Connection-Id: {UNKNOWN_CONNECTION}")),
        1 => "Acp-Connection-Id: [0-9a-f]{0,40}",
        1 => "[A-Za-z-]{1,20}: [ -~]{0,40}",
        1 => "[^\r\n]{0,60}",
    ];
    let message = prop_oneof![
        Just(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}})),
        Just(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
            "params": {"cwd": "/", "mcpServers": []}})),
        Just(
            json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
            "params": {"sessionId": "s", "prompt": []}})
        ),
        Just(json!({"jsonrpc": "2.0", "id": 4, "result": null})),
        Just(json!([{"jsonrpc": "2.0", "id": 5, "method": "x"}])),
        Just(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}})),
    ];
    let body = prop_oneof![
        1 => Just(String::new()),
        3 => message.clone().prop_map(|m| m.to_string()),
        // A message cut or spliced anywhere.
        2 => (message, any::<prop::sample::Index>(), "[ -~]{0,8}").prop_map(|(m, at, splice)| {
            let text = m.to_string();
            let at = at.index(text.len() + 1);
            format!("{}{splice}", &text[..at])
        }),
        1 => Just("5\r\nhello\r\n0\r\n\r\n".to_string()),
        1 => Just("zz\r\nnot a chunk\r\n".to_string()),
        1 => "[ -~]{0,200}",
        1 => ".{0,100}",
    ];
    let length = prop_oneof![
        4 => Just(Length::Exact),
        1 => Just(Length::Missing),
        1 => any::<u64>().prop_map(Length::Claimed),
        1 => (0u64..300).prop_map(Length::Claimed),
        1 => prop::sample::select(vec!["-1", "1, 2", "0x10", "", "99999999999999999999999"])
            .prop_map(Length::Invalid),
    ];
    let composed = (
        (method, path, version),
        prop::collection::vec(header, 0..5),
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.7),
        body,
        length,
        prop::option::weighted(0.2, any::<prop::sample::Index>()),
    )
        .prop_map(
            |((method, path, version), headers, token, json, body, length, cut)| {
                let mut text = format!("{method} {path} {version}\r\nHost: 127.0.0.1\r\n");
                if token {
                    text.push_str(&format!("Authorization: Bearer {TOKEN}\r\n"));
                }
                if json {
                    text.push_str("Content-Type: application/json\r\n");
                }
                for header in headers {
                    text.push_str(&header);
                    text.push_str("\r\n");
                }
                match length {
                    Length::Exact => text.push_str(&format!("Content-Length: {}\r\n", body.len())),
                    Length::Missing => {}
                    Length::Claimed(n) => text.push_str(&format!("Content-Length: {n}\r\n")),
                    Length::Invalid(n) => text.push_str(&format!("Content-Length: {n}\r\n")),
                }
                text.push_str("\r\n");
                text.push_str(&body);
                let mut bytes = text.into_bytes();
                if let Some(cut) = cut {
                    bytes.truncate(cut.index(bytes.len() + 1));
                }
                bytes
            },
        );
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    prop_oneof![
        8 => composed,
        1 => prop::collection::vec(any::<u8>(), 0..300),
        1 => prop::collection::vec(any::<u8>(), 0..200).prop_map(move |garbage| {
            let mut bytes = preface.clone();
            bytes.extend(garbage);
            bytes
        }),
    ]
}

/// Sends `bytes` on a new socket, says no more, and reads whatever comes
/// back until the server closes (or the patience runs out: not a failure
/// here; what matters is that the server serves the next one).
fn exchange(address: &str, bytes: &[u8]) {
    let mut socket = std::net::TcpStream::connect(address).unwrap();
    socket.set_read_timeout(Some(*PATIENCE)).unwrap();
    // The server may answer and close before it has read everything.
    let _ = socket.write_all(bytes);
    let _ = socket.shutdown(std::net::Shutdown::Write);
    let mut answer = Vec::new();
    let _ = socket.read_to_end(&mut answer);
}

/// A well-formed request the server must still answer: no token, 401.
fn still_serving(address: &str) -> bool {
    let Ok(mut socket) = std::net::TcpStream::connect(address) else {
        return false;
    };
    socket.set_read_timeout(Some(*PATIENCE)).unwrap();
    let request = "DELETE /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if socket.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let _ = socket.read_to_end(&mut answer);
    answer.starts_with(b"HTTP/1.1 401")
}

#[test]
fn malformed_http_requests_leave_the_server_serving() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (model, mut server) = runtime.block_on(async {
        let model = LlmServer::chat(|_| Reply::stream(text_stream(&["ok"]), Split::Whole)).await;
        let server = Server::start(&config_for(&model, "test-model")).await;
        (model, server)
    });
    let address = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/acp")
        .to_string();
    // PROPTEST_CASES changes the count, as for tests/all/fuzz.rs. No
    // shrinking: once the server is down every input fails, and the one
    // that brought it down is the one to see.
    let mut runner = TestRunner::new(ProptestConfig {
        max_shrink_iters: 0,
        ..ProptestConfig::default()
    });
    let outcome = runner.run(&raw_request(), |bytes| {
        exchange(&address, &bytes);
        prop_assert!(
            still_serving(&address),
            "the server stopped answering after {:?}",
            String::from_utf8_lossy(&bytes)
        );
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}\nserver stderr:\n{}", server.stderr());
    }
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server exited:\n{}",
        server.stderr()
    );
    assert!(
        !server.stderr().contains("panicked"),
        "a request made the server panic:\n{}",
        server.stderr()
    );
    runtime.block_on(async {
        let (mut client, init) = HttpClient::connect(&server.url, 1).await;
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        let session = client.new_session(&server.work()).await;
        let mut stream: Stream = client.session_stream(&session).await;
        let id = client
            .request("session/prompt", prompt_params(&session, "hi"))
            .await;
        let (_, answer) = stream.until_answer(id).await;
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    });
    drop(server);
    drop(model);
}
