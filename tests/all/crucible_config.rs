//! The config file Crucible users already have, through the binary: each of
//! the three shapes (the seed's, the design document's, Crucible's own)
//! starts a real session against a local model server, and the provider's
//! `temperature` and `max_tokens` arrive in the request; `available_models`
//! is the model option; `[[mcp.servers]]` prefixes and filters tools;
//! `doctor` names the keys used, ignored and which won; a provider the
//! agent cannot use is named at start-up.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::harness::{Agent, LlmServer, Reply, Split, Wire, agent_text, scripted_model};

const KEY: &str = "sk-crucible-config-test";

/// Answers every wire format with its recorded "text" stream, and lists models.
async fn server() -> LlmServer {
    LlmServer::start(|request| match request.path.as_str() {
        "/v1/chat/completions" => Wire::OpenAi.stream("text", Split::Whole),
        "/api/chat" => Wire::Ollama.stream("text", Split::Whole),
        "/api/tags" => Wire::Ollama.models(),
        "/api/show" => Reply::json(200, json!({"parameters": "num_ctx 4096"})),
        _ => Wire::OpenAi.models(),
    })
    .await
}

/// One turn through the binary; the chat request the server saw.
async fn one_turn(config: &str) -> Value {
    let server = server().await;
    let config = config
        .replace("BASE_V1", &server.base_url())
        .replace("BASE_ROOT", &Wire::Ollama.endpoint(&server));
    let mut agent = Agent::spawn_with(&config, &[], &[("CFG_TEST_KEY", KEY)]).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "hello").await;
    assert_eq!(
        response["result"]["stopReason"],
        "end_turn",
        "{response}\n{}",
        agent.stderr()
    );
    assert!(!agent_text(&seen, &session).is_empty());
    let chat = server.chat_requests();
    assert_eq!(chat.len(), 1, "{}", agent.stderr());
    let body = chat[0].body.clone();
    json!({"path": chat[0].path, "auth": chat[0].header("authorization"), "body": body})
}

#[tokio::test]
async fn the_seed_shape_starts_a_session_with_its_sampling() {
    let seen = one_turn(
        r#"
[chat]
default_provider = "local"
default_backend = "internal"

[llm.providers.local]
type = "openai"
endpoint = "BASE_V1"
default_model = "test-model"
api_key = "${CFG_TEST_KEY}"
max_output_tokens = 300
temperature = 0.3
"#,
    )
    .await;
    assert_eq!(seen["path"], "/v1/chat/completions");
    assert_eq!(seen["auth"], format!("Bearer {KEY}"));
    assert_eq!(seen["body"]["temperature"], 0.3);
    assert_eq!(seen["body"]["max_tokens"], 300);
}

#[tokio::test]
async fn the_design_document_shape_talks_to_its_provider_not_a_default_ollama() {
    // The design document's OpenAI-compatible table, pointed at the test server.
    let seen = one_turn(
        r#"
[llm]
default_provider = "openai"

[llm.ollama]
url = "http://127.0.0.1:9"
model = "llama3.2"

[llm.openai]
url = "BASE_V1"
model = "test-model"
api_key = "${CFG_TEST_KEY}"
temperature = 0.4
max_tokens = 200

[chat]
default_backend = "internal"
default_agent = "general"
default_acp_agent = "claude-code"
"#,
    )
    .await;
    assert_eq!(seen["path"], "/v1/chat/completions");
    assert_eq!(seen["body"]["model"], "test-model");
    assert_eq!(seen["body"]["temperature"], 0.4);
    assert_eq!(seen["body"]["max_tokens"], 200);
    // And its Ollama table, when it is the default: options carry them.
    let seen = one_turn(
        "[llm]\ndefault_provider = \"ollama\"\n\n[llm.ollama]\nurl = \"BASE_ROOT\"\nmodel = \"test-model\"\ntemperature = 0.6\nmax_tokens = 64\n",
    )
    .await;
    assert_eq!(seen["path"], "/api/chat");
    assert_eq!(seen["body"]["options"]["temperature"], 0.6);
    assert_eq!(seen["body"]["options"]["num_predict"], 64);
}

/// Crucible's own shape with the sections only the TUI reads around it.
const CRUCIBLE: &str = r#"
default_kiln = "docs"

[kilns]
docs = "."

[llm]
default = "cloud"

[llm.providers.cloud]
type = "custom"
endpoint = "BASE_V1"
default_model = "test-model"
api_key = "{env:CFG_TEST_KEY}"
temperature = 0.2
max_tokens = 100
timeout_secs = 30
available_models = ["test-model", "listed-only"]
trust_level = "cloud"

[llm.models]
coder = "qwen2.5-coder"

[enrichment.provider]
type = "fastembed"

[chat]
enable_markdown = true
show_thinking = false
agent_preference = "crucible"

[acp]
streaming_timeout_minutes = 15

[cli.highlighting]
enabled = true

[context]
rules_files = ["AGENTS.md", ".rules"]

[logging]
level = "info"
"#;

#[tokio::test]
async fn crucibles_shape_starts_a_session_with_its_sampling() {
    let seen = one_turn(CRUCIBLE).await;
    assert_eq!(seen["path"], "/v1/chat/completions");
    assert_eq!(seen["auth"], format!("Bearer {KEY}"));
    assert_eq!(seen["body"]["temperature"], 0.2);
    assert_eq!(seen["body"]["max_tokens"], 100);
}

#[tokio::test]
async fn available_models_are_the_model_option_and_spare_the_server_the_question() {
    let server = server().await;
    let config = CRUCIBLE.replace("BASE_V1", &server.base_url());
    let mut agent = Agent::spawn_with(&config, &[], &[("CFG_TEST_KEY", KEY)]).await;
    let session = agent.start_session().await;
    let offered = agent
        .wait_for(|m| {
            m["params"]["update"]["sessionUpdate"] == "config_option_update"
                && m.to_string().contains("\"listed-only\"")
        })
        .await;
    // The server lists other-model; the configured list does not.
    assert!(!offered.to_string().contains("other-model"), "{offered}");
    let (_, response) = agent
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "listed-only"}),
        )
        .await;
    assert!(response.get("result").is_some(), "{response}");
    agent.prompt(&session, "hello").await;
    let chat = server.chat_requests();
    assert_eq!(chat.last().unwrap().body["model"], "listed-only");
    let asked_for_models = server
        .requests()
        .iter()
        .any(|r| r.path.ends_with("/models"));
    assert!(!asked_for_models, "{:?}", server.requests());
}

#[tokio::test]
async fn crucible_mcp_servers_prefix_and_filter_their_tools() {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/echo_server.py");
    let server = LlmServer::start(scripted_model(vec![("fx_add", json!({"a": 2, "b": 3}))])).await;
    let config = format!(
        r#"
[llm]
default = "local"

[llm.providers.local]
type = "openai"
endpoint = "{}"
default_model = "test-model"

[[mcp.servers]]
name = "fixture"
prefix = "fx_"
allowed_tools = ["add", "echo", "odd*"]
blocked_tools = ["echo", "*/tool"]
timeout_secs = 20

[mcp.servers.transport]
type = "stdio"
command = "python3"
args = ["{}"]
"#,
        server.base_url(),
        script.display()
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "add them").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let chat = server.chat_requests();
    let offered: Vec<&str> = chat[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .filter(|name| name.starts_with("fx_"))
        .collect();
    assert_eq!(offered, ["fx_add"]);
    assert!(agent_text(&seen, &session).contains('5'), "{seen:?}");
}

#[tokio::test]
async fn a_provider_the_agent_cannot_use_is_named_at_start_up() {
    let server = server().await;
    let config = format!(
        "[llm]\ndefault = \"cloud\"\n[llm.providers.cloud]\ntype = \"openrouter\"\nendpoint = \"{}\"\ndefault_model = \"test-model\"\napi_key = \"{{env:CFG_TEST_KEY}}\"\n[llm.providers.copilot]\ntype = \"github-copilot\"\n[web]\nport = 3000\n",
        server.base_url()
    );
    let mut agent = Agent::spawn_with(&config, &[], &[("CFG_TEST_KEY", KEY)]).await;
    let session = agent.start_session().await;
    // The other provider works; the one it cannot use is named, not replaced.
    let (_, response) = agent.prompt(&session, "hello").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(server.chat_requests()[0].path, "/v1/chat/completions");
    let stderr = agent.stderr();
    assert!(
        stderr.contains("llm.providers.copilot.type") && stderr.contains("left out"),
        "{stderr}"
    );
    // What it reads past is one debug line.
    assert!(
        stderr.contains("config key ignored: the browser UI of `cru web` key=web"),
        "{stderr}"
    );
}

#[tokio::test]
async fn doctor_names_keys_used_ignored_and_which_won() {
    let server = server().await;
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.toml");
    let text = format!(
        "{}\n[llm.ollama]\nurl = \"{}\"\nmodel = \"test-model\"\n",
        CRUCIBLE
            .replace("BASE_V1", &server.base_url())
            .replace("[chat]\n", "[chat]\ndefault_provider = \"cloud\"\n"),
        Wire::Ollama.endpoint(&server)
    );
    std::fs::write(&config, text).unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_crucible-agent"))
        .args(["--config", config.to_str().unwrap(), "doctor"])
        .env("HOME", home.path())
        .env("CFG_TEST_KEY", KEY)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .await
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{report}");
    let line = |what: &str| {
        report
            .lines()
            .filter(|l| l.starts_with(what))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let used = line("keys used");
    for key in [
        "llm.default",
        "llm.providers.cloud.temperature",
        "llm.providers.cloud.max_tokens",
        "llm.providers.cloud.available_models",
        "llm.ollama",
        "context.rules_files",
    ] {
        assert!(used.contains(key), "{key}: {report}");
    }
    let ignored = line("keys ignored");
    for key in [
        "enrichment",
        "acp.streaming_timeout_minutes",
        "cli",
        "logging",
        "llm.providers.cloud.trust_level",
    ] {
        assert!(ignored.contains(key), "{key}: {report}");
    }
    assert!(
        line("key won").contains("`chat.default_provider` = \"cloud\" wins over `llm.default`"),
        "{report}"
    );
    assert!(!report.contains(KEY), "{report}");
}

/// Crucible's whole reference config (rebuilt from its docs), its cloud
/// provider pointed at the test's server: the agent starts, talks to it,
/// and obeys the file's `[permissions]`: `bash:echo *` runs without asking,
/// `bash:rm *` is refused without asking.
#[tokio::test]
async fn the_whole_reference_config_starts_the_agent_and_obeys_its_permissions() {
    let server = LlmServer::start(scripted_model(vec![
        ("shell", json!({"command": "echo allowed-by-crucible"})),
        ("shell", json!({"command": "rm -rf precious"})),
    ]))
    .await;
    let reference = include_str!("../fixtures/crucible/reference.toml");
    let config = reference
        .replace("default = \"local\"", "default = \"cloud\"")
        .replace(
            "default_model = \"gpt-4o\"",
            &format!(
                "default_model = \"test-model\"\nendpoint = \"{}\"",
                server.base_url()
            ),
        );
    assert_ne!(
        config, reference,
        "the fixture still has its cloud provider"
    );
    let mut agent = Agent::spawn_with(&config, &[], &[("OPENAI_API_KEY", KEY)]).await;
    let session = agent.start_session().await;
    let dir = agent.cwd();
    std::fs::write(dir.join("precious"), "keep me").unwrap();
    let (seen, response) = agent.prompt(&session, "echo, then clean up").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        !seen
            .iter()
            .any(|m| m["method"] == "session/request_permission"),
        "nothing was asked: {seen:?}"
    );
    assert!(dir.join("precious").exists(), "the denied rm did not run");
    let chats = server.chat_requests();
    let results: Vec<String> = chats
        .iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert!(
        results.iter().any(|r| r.contains("allowed-by-crucible")),
        "{results:?}"
    );
    assert!(
        results.iter().any(|r| r.contains("bash:rm *")),
        "the model hears which rule refused: {results:?}"
    );
    assert_eq!(
        chats[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    // Its GitHub MCP server needs GITHUB_TOKEN, unset here: left out and
    // named, while the agent works.
    assert!(
        agent.stderr().contains("GITHUB_TOKEN, which is not set"),
        "{}",
        agent.stderr()
    );
}
