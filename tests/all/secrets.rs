//! No key leaks: a whole scripted session at `RUST_LOG=trace` (a tool call,
//! a failing turn, a second provider configured) and `doctor`, then every
//! artefact is searched for the keys: stderr, the log file, everything on
//! stdout, every file in the data dir, what the model was sent, doctor's
//! output.

use std::path::Path;

use serde_json::{Value, json};

use crate::subagents::{Step, routed};
use crate::support::harness::{Agent, LlmServer, config_for};

const ENV_KEY: &str = "sk-env-SECRET-9f3a61";
const FILE_KEY: &str = "sk-file-SECRET-77c1d0";

fn files_under(dir: &Path, out: &mut Vec<(String, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((
                path.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
}

#[tokio::test]
async fn keys_appear_in_no_log_answer_stored_session_or_doctor_output_even_at_trace() {
    let server = LlmServer::start(routed(vec![
        (
            "Show the environment",
            vec![
                Step::Calls(vec![("shell", json!({"command": "env; echo listed"}))]),
                Step::Answer("done:"),
            ],
        ),
        ("Fail now", vec![Step::Fail]),
    ]))
    .await;
    let config = format!(
        "{}api_key = \"${{MY_LLM_KEY}}\"\n\n\
         [llm.providers.spare]\ntype = \"anthropic\"\nendpoint = \"{}\"\napi_key = \"{FILE_KEY}\"\ndefault_model = \"claude-x\"\n\n\
         [agent]\ndefault_mode = \"auto\"\n",
        config_for(&server, "test-model"),
        server.base_url()
    );
    let logs = tempfile::tempdir().unwrap();
    let log_file = logs.path().join("agent.log");
    let mut agent = Agent::spawn_with(
        &config,
        &["--log-file", log_file.to_str().unwrap()],
        &[("MY_LLM_KEY", ENV_KEY), ("RUST_LOG", "trace")],
    )
    .await;
    let session = agent.start_session().await;
    let mut stdout: Vec<Value> = Vec::new();
    let (seen, response) = agent.prompt(&session, "Show the environment").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    stdout.extend(seen);
    stdout.push(response);
    // A failing turn (its own session: the model server routes by the first prompt).
    let failing = agent.new_session().await;
    let (seen, response) = agent.prompt(&failing, "Fail now").await;
    assert!(response.get("error").is_some(), "{response}");
    stdout.extend(seen);
    stdout.push(response);
    let (seen, response) = agent
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "provider", "value": "spare"}),
        )
        .await;
    stdout.extend(seen);
    stdout.push(response);
    agent.close_stdin();
    agent.wait_exit().await;

    // The key was used: the model server got it.
    let sent = server.chat_requests();
    assert_eq!(
        sent[0].header("authorization"),
        Some(format!("Bearer {ENV_KEY}").as_str())
    );
    // The shell ran, and listed its environment.
    let listed = stdout
        .iter()
        .any(|m| m.to_string().contains("listed") && m.to_string().contains("PATH="));
    assert!(listed, "the command did not run: {stdout:?}");

    let doctor = tokio::process::Command::new(env!("CARGO_BIN_EXE_crucible-agent"))
        .arg("--config")
        .arg(agent.cwd().join("../config.toml"))
        .arg("--data-dir")
        .arg(agent.data_dir())
        .arg("doctor")
        .env("MY_LLM_KEY", ENV_KEY)
        .env("RUST_LOG", "trace")
        .output()
        .await
        .unwrap();

    let mut artefacts: Vec<(String, String)> = vec![
        ("stderr".into(), agent.stderr()),
        ("stdout".into(), serde_json::to_string(&stdout).unwrap()),
        (
            "doctor".into(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&doctor.stdout),
                String::from_utf8_lossy(&doctor.stderr)
            ),
        ),
        (
            "model requests".into(),
            sent.iter().map(|r| r.body.to_string()).collect(),
        ),
    ];
    files_under(logs.path(), &mut artefacts);
    files_under(&agent.data_dir(), &mut artefacts);
    assert!(
        artefacts
            .iter()
            .any(|(name, _)| name.ends_with("history.jsonl")),
        "the session was stored"
    );
    assert!(
        artefacts[0].1.contains("TRACE"),
        "the trace log was captured"
    );
    assert!(
        artefacts
            .iter()
            .any(|(name, text)| name.ends_with("agent.log") && !text.is_empty()),
        "the log file was written"
    );
    for (name, text) in &artefacts {
        for key in [ENV_KEY, FILE_KEY] {
            assert!(!text.contains(key), "{key} leaked into {name}");
        }
    }
}
