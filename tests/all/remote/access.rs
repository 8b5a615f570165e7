//! Who may use `serve`, and how much: the bearer token on every request
//! (from the environment, a file, or generated owner-only), the Origins a
//! browser page may come from, the body and connection limits, connection
//! ids no one else can use, a public address only with a token the user
//! set, and sessions only inside the roots.

use std::process::Stdio;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crucible_agent::transport::stdio::MAX_LINE_BYTES;

use crate::support::harness::{LlmServer, PATIENCE, Reply, Split, agent_binary, config_for};
use crate::support::harness::{error_message, text_stream};
use crate::support::remote::{HttpClient, Server, TOKEN, post};

/// A well-formed connection id that no server handed out.
const UNKNOWN_CONNECTION: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}})
}

async fn model() -> LlmServer {
    LlmServer::chat(|_| Reply::stream(text_stream(&["ok"]), Split::Whole)).await
}

/// `method /acp` with `authorization` (when given) and these headers.
async fn send(
    method: Method,
    url: &str,
    authorization: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> reqwest::Response {
    let mut request = reqwest::Client::new().request(method, url);
    if let Some(authorization) = authorization {
        request = request.header("authorization", authorization);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn every_request_without_the_token_is_401_with_a_bearer_challenge() {
    let model = model().await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (client, _) = HttpClient::connect(&server.url, 1).await;
    let connection = client.connection.as_str();
    let init = initialize();
    let wrong = format!("Bearer {TOKEN}x");
    let basic = format!("Basic {TOKEN}");
    for authorization in [None, Some(wrong.as_str()), Some(basic.as_str())] {
        let asks = [
            (Method::POST, Vec::new(), Some(&init)),
            (
                Method::GET,
                vec![
                    ("acp-connection-id", connection),
                    ("accept", "text/event-stream"),
                ],
                None,
            ),
            (
                Method::DELETE,
                vec![("acp-connection-id", connection)],
                None,
            ),
        ];
        for (method, headers, body) in asks {
            let what = format!("{method} with {authorization:?}");
            let response = send(method, &server.url, authorization, &headers, body).await;
            assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{what}");
            assert_eq!(response.headers()["www-authenticate"], "Bearer", "{what}");
            assert!(
                response.headers().get("acp-connection-id").is_none(),
                "{what}"
            );
        }
    }
    // Nothing of it touched the connection: it is still there.
    assert_eq!(client.delete().await, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn only_allowed_origins_come_in_and_native_clients_send_none() {
    let model = model().await;
    let config = format!(
        "{}\n[serve]\nallowed_origins = [\"https://app.example.com\"]\n",
        config_for(&model, "test-model")
    );
    let server = Server::start(&config).await;
    let bearer = format!("Bearer {TOKEN}");
    let init = initialize();
    for origin in [
        "https://evil.example",
        "http://app.example.com",
        "https://app.example.com.evil.example",
        "null",
    ] {
        let refused = send(
            Method::POST,
            &server.url,
            Some(&bearer),
            &[("origin", origin)],
            Some(&init),
        )
        .await;
        assert_eq!(refused.status(), StatusCode::FORBIDDEN, "Origin {origin}");
        assert!(
            refused.text().await.unwrap().contains("allowed_origins"),
            "says where to allow it"
        );
    }
    let allowed = send(
        Method::POST,
        &server.url,
        Some(&bearer),
        &[("origin", "https://app.example.com")],
        Some(&init),
    )
    .await;
    assert_eq!(allowed.status(), StatusCode::OK);
    let connection = allowed.headers()["acp-connection-id"]
        .to_str()
        .unwrap()
        .to_string();
    let answer: Value = allowed.json().await.unwrap();
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    // The same connection from a page on another site: 403 on its stream.
    let stream = send(
        Method::GET,
        &server.url,
        Some(&bearer),
        &[
            ("origin", "https://evil.example"),
            ("acp-connection-id", &connection),
            ("accept", "text/event-stream"),
        ],
        None,
    )
    .await;
    assert_eq!(stream.status(), StatusCode::FORBIDDEN);
    // A client that sends no Origin (not a browser) is let in.
    let native = post(&server.url, &[], &init).await;
    assert_eq!(native.status(), StatusCode::OK);
}

/// A notification padded with JSON whitespace to `size` bytes.
fn padded_notification(size: usize) -> Vec<u8> {
    let mut body =
        br#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":0}}"#.to_vec();
    body.resize(size, b' ');
    body
}

#[tokio::test]
async fn a_body_over_stdio_s_line_limit_is_413_and_the_server_goes_on() {
    let model = model().await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut client, _) = HttpClient::connect(&server.url, 1).await;
    let post_bytes = |body: Vec<u8>| {
        reqwest::Client::new()
            .post(&server.url)
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .header("acp-connection-id", &client.connection)
            .body(body)
            .send()
    };
    let at_limit = post_bytes(padded_notification(MAX_LINE_BYTES))
        .await
        .unwrap();
    assert_eq!(
        at_limit.status(),
        StatusCode::ACCEPTED,
        "a line as long as stdio takes"
    );
    let over = post_bytes(padded_notification(MAX_LINE_BYTES + 1))
        .await
        .unwrap();
    assert_eq!(over.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // The connection and the server are still there.
    let id = client
        .request(
            "session/new",
            json!({"cwd": server.work(), "mcpServers": []}),
        )
        .await;
    let (_, answer) = client.stream.until_answer(id).await;
    assert!(answer["result"]["sessionId"].is_string(), "{answer}");
}

#[tokio::test]
async fn initialize_past_max_connections_is_503_until_one_ends() {
    let model = model().await;
    let config = format!(
        "{}\n[serve]\nmax_connections = 2\n",
        config_for(&model, "test-model")
    );
    let server = Server::start(&config).await;
    let (first, _) = HttpClient::connect(&server.url, 1).await;
    let (_second, _) = HttpClient::connect(&server.url, 1).await;
    let third = post(&server.url, &[], &initialize()).await;
    assert_eq!(third.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(third.headers().get("acp-connection-id").is_none());
    assert!(
        third.text().await.unwrap().contains("max_connections"),
        "names the setting"
    );
    assert_eq!(first.delete().await, StatusCode::ACCEPTED);
    let (mut replacement, _) = HttpClient::connect(&server.url, 1).await;
    replacement.new_session(&server.work()).await;
}

#[tokio::test]
async fn a_connection_id_it_did_not_hand_out_is_404_even_with_the_token() {
    let model = model().await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (client, _) = HttpClient::connect(&server.url, 1).await;
    let bearer = format!("Bearer {TOKEN}");
    let new = json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
        "params": {"cwd": server.work(), "mcpServers": []}});
    // One digit off the real one: ids are compared whole.
    let mut near = client.connection.clone().into_bytes();
    near[31] = if near[31] == b'0' { b'1' } else { b'0' };
    let near = String::from_utf8(near).unwrap();
    for unknown in [UNKNOWN_CONNECTION, near.as_str()] {
        let posted = post(&server.url, &[("acp-connection-id", unknown)], &new).await;
        assert_eq!(posted.status(), StatusCode::NOT_FOUND, "POST as {unknown}");
        let read = send(
            Method::GET,
            &server.url,
            Some(&bearer),
            &[
                ("acp-connection-id", unknown),
                ("accept", "text/event-stream"),
            ],
            None,
        )
        .await;
        assert_eq!(read.status(), StatusCode::NOT_FOUND, "GET {unknown}");
        let deleted = send(
            Method::DELETE,
            &server.url,
            Some(&bearer),
            &[("acp-connection-id", unknown)],
            None,
        )
        .await;
        assert_eq!(deleted.status(), StatusCode::NOT_FOUND, "DELETE {unknown}");
    }
    // The real one is untouched by all that.
    assert_eq!(client.delete().await, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn a_public_address_needs_a_token_the_user_set() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), "").unwrap();
    let run = tokio::process::Command::new(agent_binary())
        .arg("--config")
        .arg(dir.path().join("config.toml"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["serve", "--listen", "0.0.0.0:0"])
        .current_dir(dir.path())
        .env_remove("CRUCIBLE_AGENT_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(*PATIENCE, run)
        .await
        .expect("serve refuses at once rather than listening")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("CRUCIBLE_AGENT_TOKEN"), "{stderr}");
    assert!(!stderr.contains("listening on"), "{stderr}");
    assert!(output.stdout.is_empty(), "stdout carries nothing");
}

#[tokio::test]
async fn a_generated_token_is_kept_owner_only_in_the_data_dir_and_is_the_token() {
    use std::os::unix::fs::PermissionsExt;
    let model = model().await;
    let server = Server::start_with(&config_for(&model, "test-model"), &[], &[]).await;
    let path = server.data().join("serve-token");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "owner-only");
    assert!(
        server.stderr().contains(&path.display().to_string()),
        "serve says where the token is: {}",
        server.stderr()
    );
    let token = std::fs::read_to_string(&path).unwrap();
    let token = token.trim();
    assert!(token.len() >= 32, "a long random token: {token:?}");
    assert!(
        !server.stderr().contains(token),
        "the token itself is not printed"
    );
    only_this_token_initializes(&server.url, token).await;
}

#[tokio::test]
async fn the_token_file_s_token_is_the_token() {
    let model = model().await;
    let secrets = tempfile::tempdir().unwrap();
    let file = secrets.path().join("token");
    std::fs::write(&file, "from-the-token-file-0123456789abcdef\n").unwrap();
    let config = format!(
        "{}\n[serve]\ntoken_file = \"{}\"\n",
        config_for(&model, "test-model"),
        file.display()
    );
    let server = Server::start_with(&config, &[], &[]).await;
    assert!(
        !server.data().join("serve-token").exists(),
        "none generated"
    );
    only_this_token_initializes(&server.url, "from-the-token-file-0123456789abcdef").await;
}

/// `token` opens a connection; the tests' usual one does not.
async fn only_this_token_initializes(url: &str, token: &str) {
    let init = initialize();
    let theirs = send(
        Method::POST,
        url,
        Some(&format!("Bearer {token}")),
        &[],
        Some(&init),
    )
    .await;
    assert_eq!(theirs.status(), StatusCode::OK);
    let other = send(
        Method::POST,
        url,
        Some(&format!("Bearer {TOKEN}")),
        &[],
        Some(&init),
    )
    .await;
    assert_eq!(other.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn sessions_outside_the_roots_are_refused_naming_the_roots() {
    let model = model().await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut client, _) = HttpClient::connect(&server.url, 1).await;
    let outside = tempfile::tempdir().unwrap();
    let escape = server.work().join("escape");
    std::os::unix::fs::symlink(outside.path(), &escape).unwrap();
    let root = std::fs::canonicalize(server.work()).unwrap();
    for cwd in [
        outside.path().to_path_buf(),
        server.work().join(".."),
        escape,
    ] {
        let id = client
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        let (_, answer) = client.stream.until_answer(id).await;
        let message = error_message(&answer);
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert!(
            message.contains(&root.display().to_string()),
            "names the roots: {message}"
        );
    }
    let inside = server.work().join("project");
    std::fs::create_dir(&inside).unwrap();
    let id = client
        .request("session/new", json!({"cwd": inside, "mcpServers": []}))
        .await;
    let (_, answer) = client.stream.until_answer(id).await;
    assert!(answer["result"]["sessionId"].is_string(), "{answer}");
}

/// The status a WebSocket upgrade gets with `authorization` and `origin`
/// (101 when it opens).
async fn upgrade_status(url: &str, authorization: Option<&str>, origin: Option<&str>) -> u16 {
    use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest};
    let mut request = url.into_client_request().unwrap();
    if let Some(authorization) = authorization {
        request
            .headers_mut()
            .insert("authorization", authorization.parse().unwrap());
    }
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("origin", origin.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((_, response)) => {
            assert!(
                response.headers().contains_key("acp-connection-id"),
                "{response:?}"
            );
            response.status().as_u16()
        }
        Err(tungstenite::Error::Http(response)) => {
            assert!(response.headers().get("acp-connection-id").is_none());
            response.status().as_u16()
        }
        Err(err) => panic!("the upgrade failed otherwise: {err}"),
    }
}

#[tokio::test]
async fn the_websocket_upgrade_needs_the_token_and_an_allowed_origin_too() {
    let model = model().await;
    let config = format!(
        "{}\n[serve]\nallowed_origins = [\"http://localhost:3000\"]\n",
        config_for(&model, "test-model")
    );
    let server = Server::start(&config).await;
    let url = server.ws_url();
    let bearer = format!("Bearer {TOKEN}");
    assert_eq!(upgrade_status(&url, None, None).await, 401);
    assert_eq!(upgrade_status(&url, Some("Bearer wrong"), None).await, 401);
    assert_eq!(
        upgrade_status(&url, Some(&bearer), Some("http://localhost:3001")).await,
        403
    );
    assert_eq!(
        upgrade_status(&url, Some(&bearer), Some("http://localhost:3000")).await,
        101
    );
    assert_eq!(upgrade_status(&url, Some(&bearer), None).await, 101);
}
