//! Crucible, day to day (issue 33): a quiet command keeps the turn alive
//! with an update at least every 30 s, `[context] rules_files` chooses the
//! project's rules files, skills in the other harnesses' folders are
//! offered, and the reads of Crucible's kiln server run without a question.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::context::system_text;
use crate::support::harness::{
    Agent, LlmServer, answer_permission, config_for, scripted_model, tool_updates,
};

#[tokio::test]
async fn a_quiet_command_sends_an_update_while_it_runs() {
    let server = LlmServer::start(scripted_model(vec![(
        "shell",
        json!({"command": "sleep 75", "timeout_secs": 120}),
    )]))
    .await;
    let config = format!(
        "{}\n[agent]\ndefault_mode = \"auto\"\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    // Longer than a keep-alive's period: the silence in between is the point.
    agent.patience = Duration::from_secs(100);
    let session = agent.start_session().await;
    let prompt = agent.start_prompt(&session, "wait a while").await;
    let call = agent.wait_for_update("tool_call").await;
    let started = tokio::time::Instant::now();
    let id = call["params"]["update"]["toolCallId"].clone();
    // Every update of the call until it completes, with when it came.
    let mut updates: Vec<(Duration, Value)> = Vec::new();
    loop {
        let update = agent
            .wait_for(|m| {
                m["params"]["update"]["sessionUpdate"] == "tool_call_update"
                    && m["params"]["update"]["toolCallId"] == id
            })
            .await;
        let update = update["params"]["update"].clone();
        let done = update["status"] != "in_progress";
        updates.push((started.elapsed(), update));
        if done {
            break;
        }
    }
    let (_, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let (_, last) = updates.last().unwrap();
    assert_eq!(last["status"], "completed", "{updates:?}");
    let alive: Vec<&(Duration, Value)> = updates
        .iter()
        .filter(|(at, update)| {
            update["status"] == "in_progress"
                && *at >= Duration::from_secs(10)
                && *at <= Duration::from_secs(70)
        })
        .collect();
    let (_, first) = alive
        .first()
        .unwrap_or_else(|| panic!("no update between 10 and 70 s: {updates:?}"));
    let text = first["content"][0]["content"]["text"].as_str().unwrap();
    assert!(text.starts_with("Still running (30 s so far"), "{text}");
}

#[tokio::test]
async fn configured_rules_files_replace_agents_md_in_the_system_prompt() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let config = format!(
        "{}\n[context]\nrules_files = [\"TEAM-RULES.md\", \"MISSING.md\"]\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    std::fs::write(agent.cwd().join("TEAM-RULES.md"), "TEAM-RULE-MARK: tabs").unwrap();
    std::fs::write(agent.cwd().join("AGENTS.md"), "AGENTS-MARK: spaces").unwrap();
    let session = agent.start_session().await;
    let (_, response) = agent.prompt(&session, "hello").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let system = system_text(server.chat_requests().last().unwrap());
    assert!(system.contains("TEAM-RULE-MARK: tabs"), "{system}");
    assert!(!system.contains("AGENTS-MARK"), "{system}");
    // The key is used, not reported as ignored.
    assert!(
        !agent.stderr().contains("rules_files"),
        "{}",
        agent.stderr()
    );
}

fn write_skill(folder: &Path, name: &str, description: &str) {
    let dir = folder.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n\nDo it.\n"),
    )
    .unwrap();
}

#[tokio::test]
async fn skills_in_the_codex_and_opencode_folders_are_offered() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    write_skill(
        &agent.cwd().join(".codex/skills"),
        "codex-skill",
        "CODEX-SKILL-MARK",
    );
    write_skill(
        &agent.cwd().join(".opencode/skills"),
        "opencode-skill",
        "OPENCODE-SKILL-MARK",
    );
    let session = agent.start_session().await;
    let commands = agent.wait_for_update("available_commands_update").await;
    let names: Vec<&str> = commands["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for name in ["codex-skill", "opencode-skill"] {
        assert!(names.contains(&name), "{name}: {names:?}");
    }
    let (_, response) = agent.prompt(&session, "hello").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let system = system_text(server.chat_requests().last().unwrap());
    for mark in ["CODEX-SKILL-MARK", "OPENCODE-SKILL-MARK"] {
        assert!(system.contains(mark), "{mark}: {system}");
    }
}

/// The fixture MCP server playing Crucible's kiln server, named as the
/// Crucible TUI names it.
fn kiln_server() -> Value {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/echo_server.py");
    json!({"name": "crucible", "command": "python3", "args": [script, "--kiln"], "env": []})
}

#[tokio::test]
async fn kiln_reads_run_without_a_question_and_its_writes_ask() {
    let server = LlmServer::start(scripted_model(vec![
        ("crucible__read_note", json!({"path": "Index.md"})),
        ("crucible__update_note", json!({"path": "Index.md"})),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session_with(json!([kiln_server()])).await;
    let prompt = agent.start_prompt(&session, "read then update").await;
    // The first question is the update's: the read ran without one.
    let asked = answer_permission(&mut agent, "reject_once").await;
    assert_eq!(
        asked["params"]["toolCall"]["title"],
        "crucible: update_note"
    );
    let (seen, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let calls = tool_updates(&seen, "tool_call");
    let kind_of = |title: &str| {
        calls
            .iter()
            .find(|c| c["title"] == title)
            .map(|c| c["kind"].clone())
            .unwrap_or_else(|| panic!("no call {title}: {calls:?}"))
    };
    assert_eq!(kind_of("crucible: read_note"), "read");
    // Not a read: `other`, which ACP leaves out as the default.
    assert!(
        [Value::Null, json!("other")].contains(&kind_of("crucible: update_note")),
        "{calls:?}"
    );
    let read = &server.chat_requests()[1];
    let result = read.body["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(
        result["content"], "kiln read_note {\"path\": \"Index.md\"}",
        "{result}"
    );
}

#[tokio::test]
async fn a_rule_makes_a_kiln_read_ask_again() {
    let server = LlmServer::start(scripted_model(vec![(
        "crucible__read_note",
        json!({"path": "Private.md"}),
    )]))
    .await;
    let config = format!(
        "{}\n[[permissions.rules]]\ntool = \"crucible__read_note\"\ndecision = \"ask\"\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session_with(json!([kiln_server()])).await;
    let prompt = agent.start_prompt(&session, "read").await;
    let asked = answer_permission(&mut agent, "allow_once").await;
    assert_eq!(asked["params"]["toolCall"]["title"], "crucible: read_note");
    let (_, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
}
