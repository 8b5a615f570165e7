//! A session written by an earlier binary (commit a899df2, see
//! `tests/fixtures/sessions/README.md`) loads in this one exactly as it did
//! in that one: the same `session/update` replay, the same settings, the
//! same context sent to the model, the same `sessions show`.

use std::path::{Path, PathBuf};

use crate::support::harness::{Agent, LlmServer, Reply, Split, config_for, text_stream};
use serde_json::{Value, json};

const SESSION: &str = "1a16db45-1483-4fb1-ae8c-5d2f2067f4a5";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sessions")
}

fn expected(name: &str) -> String {
    std::fs::read_to_string(fixtures().join(name)).unwrap()
}

fn expected_json(name: &str) -> Value {
    serde_json::from_str(&expected(name)).unwrap()
}

/// The fixture's session copied into `data`/sessions (loading writes to it).
fn copy_fixture(data: &Path) {
    let target = data.join("sessions").join(SESSION);
    std::fs::create_dir_all(&target).unwrap();
    for file in ["metadata.json", "history.jsonl"] {
        std::fs::copy(fixtures().join(SESSION).join(file), target.join(file)).unwrap();
    }
}

/// The model the original binary was loaded against: two models with a
/// 32k window, and one answer.
async fn model() -> LlmServer {
    LlmServer::start(|request| {
        if request.path.ends_with("/models") {
            return Reply::json(
                200,
                json!({"object": "list", "data": [
                    {"id": "test-model", "object": "model", "meta": {"n_ctx": 32768}},
                    {"id": "other-model", "object": "model", "meta": {"n_ctx": 32768}},
                ]}),
            );
        }
        Reply::stream(text_stream(&["Continuing."]), Split::Whole)
    })
    .await
}

fn agent_text(seen: &[Value]) -> String {
    seen.iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_session_from_an_earlier_binary_loads_as_it_did_there() {
    let server = model().await;
    let home = tempfile::tempdir().unwrap();
    let home_dir = home.path().to_str().unwrap();
    let config_dir = home.path().join(".config");
    let mut agent = Agent::spawn_with(
        &config_for(&server, "test-model"),
        &[],
        &[
            ("HOME", home_dir),
            ("XDG_CONFIG_HOME", config_dir.to_str().unwrap()),
        ],
    )
    .await;
    copy_fixture(&agent.data_dir());
    agent.initialize().await;
    let cwd = agent.cwd();
    let (seen, answer) = agent
        .call(
            "session/load",
            json!({"sessionId": SESSION, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    let result = &answer["result"];
    assert!(result.is_object(), "{answer}");

    // The replay, notification for notification.
    let replay: Vec<Value> = seen
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| {
            assert_eq!(m["params"]["sessionId"], SESSION);
            m["params"]["update"].clone()
        })
        .collect();
    assert_eq!(Value::from(replay), expected_json("expected_replay.json"));

    // The mode, model, provider and agent card it was saved with.
    let mut settings = json!({"mode": result["modes"]["currentModeId"]});
    for option in result["configOptions"].as_array().unwrap() {
        settings[option["id"].as_str().unwrap()] = option["currentValue"].clone();
    }
    assert_eq!(settings, expected_json("expected_settings.json"));

    // The context: entries, estimates with the learned drift, checkpoints.
    // The first lines also count the system prompt and tool definitions,
    // which are not the store's (they change with the tools).
    let (seen, _) = agent.prompt(SESSION, "/context").await;
    let report = agent_text(&seen);
    let expected_report = expected("expected_context.txt");
    let conversation = |report: &str| {
        let start = report.find("Conversation:").expect("a conversation line");
        report[start..].trim_end().to_string()
    };
    assert_eq!(conversation(&report), conversation(&expected_report));

    // What the model is sent next: the rebuilt context, then the prompt.
    let (_, answer) = agent.prompt(SESSION, "Continue").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let [request] = server.chat_requests().try_into().unwrap();
    let messages: Vec<Value> = request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .cloned()
        .collect();
    let sent = json!({"model": request.body["model"], "messages": messages});
    assert_eq!(sent, expected_json("expected_request.json"));
}

#[tokio::test]
async fn sessions_show_prints_an_earlier_binarys_session_as_it_did() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    copy_fixture(&data);
    for (args, name) in [
        (&[][..], "expected_show.txt"),
        (&["--json"][..], "expected_show.json"),
    ] {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_crucible-agent"))
            .arg("--data-dir")
            .arg(&data)
            .args(["sessions", "show", SESSION])
            .args(args)
            .env("HOME", home.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("CRUCIBLE_CONFIG")
            .env_remove("CRUCIBLE_DATA_DIR")
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(String::from_utf8(output.stdout).unwrap(), expected(name));
    }
}
