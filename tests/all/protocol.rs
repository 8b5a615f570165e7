//! What any ACP client sees of the protocol layer: initialize, framing
//! errors, unknown methods, bad params, session creation rules, start-up
//! config errors.

use serde_json::{Value, json};

use crate::support::harness::{Agent, LlmServer, Reply, config_for, error_message, models_reply};

async fn server() -> LlmServer {
    LlmServer::start(|request| {
        if request.path.ends_with("/models") {
            models_reply(&["test-model", "other-model"])
        } else {
            Reply::json(500, json!({"error":{"message":"not scripted"}}))
        }
    })
    .await
}

#[tokio::test]
async fn initialize_negotiates_version_and_advertises_truthfully() {
    let server = server().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let response = agent.initialize().await;
    let result = &response["result"];
    assert_eq!(result["protocolVersion"], 1);
    assert_eq!(result["agentInfo"]["name"], "crucible-agent");
    assert_eq!(result["agentInfo"]["version"], env!("CARGO_PKG_VERSION"));
    // The terminal sign-in goes only to clients that run one (acp_v1_20.rs).
    assert_eq!(result["authMethods"], json!([]));
    let caps = &result["agentCapabilities"];
    // Sessions are stored: load, list, resume, close and delete work (tests/all/sessions.rs).
    assert_eq!(caps["loadSession"], true);
    for capability in ["list", "resume", "close", "delete"] {
        assert!(
            caps["sessionCapabilities"][capability].is_object(),
            "{capability}"
        );
    }
    // MCP over streamable HTTP and legacy SSE both work (tests/all/mcp.rs).
    assert_eq!(caps["mcpCapabilities"]["http"], true);
    assert_eq!(caps["mcpCapabilities"]["sse"], true);
    // MCP over ACP is unstable: not offered unless `[acp] unstable` names it.
    assert_ne!(caps["mcpCapabilities"]["acp"], true);
    assert_eq!(caps["promptCapabilities"]["audio"], false);
    assert!(caps["sessionCapabilities"]["close"].is_object());
    // A future protocol version gets the one we speak.
    let (_, response) = agent
        .call("initialize", json!({"protocolVersion": 7}))
        .await;
    assert_eq!(response["result"]["protocolVersion"], 1);
}

#[tokio::test]
async fn malformed_lines_get_parse_errors_and_the_agent_keeps_serving() {
    let server = server().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    agent
        .send_raw("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":")
        .await;
    let error = agent.next_message().await;
    assert_eq!(error["id"], Value::Null);
    assert_eq!(error["error"]["code"], -32700);
    agent.send_raw("[]").await;
    assert_eq!(agent.next_message().await["error"]["code"], -32600);
    agent.send_raw("").await; // blank lines are ignored
    let response = agent.initialize().await;
    assert_eq!(response["result"]["protocolVersion"], 1);
}

#[tokio::test]
async fn unknown_methods_and_bad_params_are_reported_precisely() {
    let server = server().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    agent.initialize().await;

    let (_, response) = agent.call("session/teleport", json!({})).await;
    assert_eq!(response["error"]["code"], -32601);
    assert!(error_message(&response).contains("session/teleport"));

    // Unknown notifications are ignored: the next request is answered first.
    agent.notify("something/else", json!({})).await;
    let (seen, response) = agent.call("session/new", json!({"mcpServers": []})).await;
    assert!(seen.is_empty(), "unexpected: {seen:?}");
    assert_eq!(response["error"]["code"], -32602);
    assert!(error_message(&response).contains("cwd"), "{response}");

    let session = agent.new_session().await;
    let (_, response) = agent
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text"}]}),
        )
        .await;
    assert_eq!(response["error"]["code"], -32602);
    assert!(error_message(&response).contains("prompt"), "{response}");

    let (_, response) = agent
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": []}),
        )
        .await;
    assert_eq!(response["error"]["code"], -32602);
}

#[tokio::test]
async fn session_new_checks_cwd_and_offers_the_model_option() {
    let server = server().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    agent.initialize().await;
    for cwd in ["relative/path", "/no/such/directory/anywhere"] {
        let (_, response) = agent
            .call("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        assert_eq!(response["error"]["code"], -32602, "{cwd}: {response}");
        assert!(error_message(&response).contains(cwd));
    }
    let cwd = agent.cwd();
    let (_, response) = agent
        .call("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let session = response["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let options = response["result"]["configOptions"].as_array().unwrap();
    let model = options.iter().find(|o| o["category"] == "model").unwrap();
    assert_eq!(model["currentValue"], "test-model");
    assert_eq!(model["type"], "select");

    // The server's model list arrives afterwards as a config option update.
    let update = agent.wait_for_update("config_option_update").await;
    assert_eq!(update["params"]["sessionId"], session.as_str());
    let values: Vec<&str> = update["params"]["update"]["configOptions"][0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap())
        .collect();
    assert!(values.contains(&"other-model"), "{values:?}");
}

#[tokio::test]
async fn unknown_sessions_are_resource_not_found() {
    let server = server().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    agent.initialize().await;
    let (_, response) = agent.prompt("no-such-session", "hi").await;
    assert_eq!(response["error"]["code"], -32002);
    let (_, response) = agent
        .call("session/close", json!({"sessionId": "no-such-session"}))
        .await;
    assert_eq!(response["error"]["code"], -32002);
    let (_, response) = agent
        .call(
            "session/set_config_option",
            json!({"sessionId": "no-such-session", "configId": "model", "value": "x"}),
        )
        .await;
    assert_eq!(response["error"]["code"], -32002);
}

#[tokio::test]
async fn authenticate_and_logout_succeed_without_auth() {
    let server = server().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    agent.initialize().await;
    let (_, response) = agent
        .call("authenticate", json!({"methodId": "setup"}))
        .await;
    assert!(response.get("result").is_some(), "{response}");
    let (_, response) = agent.call("logout", json!({})).await;
    assert!(response.get("result").is_some(), "{response}");
}

#[tokio::test]
async fn a_broken_config_is_named_to_every_session_request_and_on_stderr() {
    let mut agent = Agent::spawn(
        "[llm.providers.local]\ntype = \"openai\"\nendpoint = \"http://127.0.0.1:1/v1\"\ndefault_modle = \"x\"\n",
    )
    .await;
    // The handshake needs no config; it is answered before the config is read.
    let response = agent.initialize().await;
    assert_eq!(response["result"]["protocolVersion"], 1, "{response}");
    let cwd = tempfile::tempdir().unwrap();
    let (_, response) = agent
        .call("session/new", json!({"cwd": cwd.path(), "mcpServers": []}))
        .await;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("config.toml"), "{response}");
    assert!(
        message.contains("llm.providers.local.default_modle"),
        "{response}"
    );
    let (_, response) = agent.call("session/list", json!({})).await;
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("default_modle"),
        "{response}"
    );
    // Still serving: the handshake works again, and the process ends cleanly.
    let (_, response) = agent
        .call("initialize", json!({"protocolVersion": 1}))
        .await;
    assert_eq!(response["result"]["protocolVersion"], 1, "{response}");
    agent.close_stdin();
    assert_eq!(agent.wait_exit().await.code(), Some(0));
    let stderr = agent.stderr();
    assert!(stderr.contains("config.toml"), "{stderr}");
    assert!(
        stderr.contains("llm.providers.local.default_modle"),
        "{stderr}"
    );
    // Nothing held the output open: it drained at EOF without a wait.
    assert!(!stderr.contains("did not drain"), "{stderr}");
}

#[tokio::test]
async fn requests_written_with_the_handshake_in_one_go_are_all_answered() {
    // `initialize` is read and answered before the runtime starts; whatever
    // came with it in the same write must still reach the router, in order.
    let server = server().await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let cwd = agent.cwd();
    let lines = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}),
        json!({"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":cwd,"mcpServers":[]}}),
        json!({"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}),
    ]
    .map(|line| line.to_string())
    .join("\n");
    agent.send_raw(&lines).await;
    let (_, first) = agent.response(1).await;
    assert_eq!(first["result"]["protocolVersion"], 1, "{first}");
    let (_, new) = agent.response(2).await;
    assert!(new["result"]["sessionId"].is_string(), "{new}");
    let (_, list) = agent.response(3).await;
    assert!(list["result"]["sessions"].is_array(), "{list}");
}

#[tokio::test]
async fn a_config_with_a_wrong_type_names_the_key() {
    let mut agent = Agent::spawn("[llm.providers.local]\ncontext_window = \"big\"\n").await;
    agent.initialize().await;
    let cwd = tempfile::tempdir().unwrap();
    let (_, response) = agent
        .call("session/new", json!({"cwd": cwd.path(), "mcpServers": []}))
        .await;
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("key `llm.providers.local.context_window`: invalid type"),
        "{response}"
    );
    agent.close_stdin();
    agent.wait_exit().await;
    assert!(agent.stderr().contains("context_window"));
}

#[tokio::test]
async fn the_seed_example_config_starts() {
    let config = r#"
[chat]
default_backend = "internal"
default_provider = "local"
default_agent = "assistant"
default_acp_agent = "claude"

[llm]
default = "local"

[llm.providers.local]
type = "ollama"
endpoint = "http://localhost:11434"
default_model = "llama3.2"
timeout_secs = 120

[llm.providers.openai-work]
type = "openai"
api_key = "${OPENAI_WORK_KEY}"
default_model = "gpt-4o"
"#;
    let mut agent = Agent::spawn(config).await;
    let response = agent.initialize().await;
    assert_eq!(response["result"]["protocolVersion"], 1);
}

#[tokio::test]
async fn logs_go_to_stderr_and_the_log_file_never_to_stdout() {
    let server = server().await;
    let log_dir = tempfile::tempdir().unwrap();
    let log_file = log_dir.path().join("logs/agent.log");
    let mut agent = Agent::spawn_with(
        &config_for(&server, "test-model"),
        &["--log-file", log_file.to_str().unwrap()],
        &[],
    )
    .await;
    agent.start_session().await;
    // Every stdout line so far was protocol (the harness checks each one).
    agent.close_stdin();
    assert_eq!(agent.wait_exit().await.code(), Some(0));
    for message in agent.drain().await {
        assert_eq!(message["jsonrpc"], "2.0");
    }
    let logged = std::fs::read_to_string(&log_file).unwrap();
    assert!(logged.contains("initialize"), "{logged}");
    assert!(agent.stderr().contains("initialize"));
    assert!(!logged.contains("\u{1b}["), "no colour codes in the file");
}
