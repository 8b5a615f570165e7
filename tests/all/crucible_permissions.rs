//! Crucible's `[permissions]` lists, its per-agent profiles and its agent
//! cards, through the binary: what the user sees is whether a command runs,
//! whether they were asked, and which model and tools a card brings.

use serde_json::{Value, json};

use crate::support::harness::{
    Agent, LlmServer, Recorded, Reply, Split, answer_permission, config_for, models_reply,
    openai_stream, scripted_model,
};

/// Crucible's documented `[permissions]` example, rebuilt, with an `echo`
/// allow so a command can be seen running.
const CRUCIBLE_EXAMPLE: &str = r#"
[permissions]
default = "ask"
allow = ["bash:cargo *", "bash:git *", "bash:echo *", "read_file:*"]
deny = ["bash:rm -rf *", "bash:sudo *"]
ask = ["write_file:*", "edit_file:*", "bash:*"]
"#;

fn asked(seen: &[Value]) -> usize {
    seen.iter()
        .filter(|m| m["method"] == "session/request_permission")
        .count()
}

/// The text of the tool results the model was sent in its last request.
fn tool_results(server: &LlmServer) -> Vec<String> {
    let chat = server.chat_requests();
    let last = chat.last().expect("a chat request");
    last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn a_deny_pattern_refuses_and_an_allow_pattern_runs_without_asking() {
    let server = LlmServer::start(scripted_model(vec![
        ("shell", json!({"command": "rm -rf keep"})),
        ("shell", json!({"command": "echo hi > allowed.txt"})),
        (
            "shell",
            json!({"command": "git status && sudo rm -rf keep"}),
        ),
    ]))
    .await;
    // The example without its `ask = ["bash:*"]`, which would outrank the
    // `allow` patterns (Crucible's order: deny, ask, allow).
    let permissions = CRUCIBLE_EXAMPLE.replace(", \"bash:*\"]", "]");
    let config = format!("{}{permissions}", config_for(&server, "test-model"));
    let mut agent = Agent::spawn(&config).await;
    std::fs::create_dir(agent.cwd().join("keep")).unwrap();
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "go").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(asked(&seen), 0, "neither the deny nor the allow asks");
    assert!(
        agent.cwd().join("keep").exists(),
        "the denied rm did not run"
    );
    assert!(
        agent.cwd().join("allowed.txt").exists(),
        "the allowed echo ran"
    );
    let results = tool_results(&server);
    assert!(
        results[0].contains("forbids") && results[0].contains("bash:rm -rf *"),
        "the model hears which rule refused: {results:?}"
    );
    assert!(
        results[2].contains("bash:sudo *"),
        "a chained command is refused by its worst statement: {results:?}"
    );
}

#[tokio::test]
async fn an_ask_pattern_outranks_an_allow_and_auto_mode_answers_it() {
    let command = || json!({"command": "echo hi > asked.txt"});
    let server = LlmServer::start(scripted_model(vec![("shell", command())])).await;
    let config = format!("{}{CRUCIBLE_EXAMPLE}", config_for(&server, "test-model"));
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let prompt = agent.start_prompt(&session, "go").await;
    answer_permission(&mut agent, "reject_once").await;
    let (_, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!agent.cwd().join("asked.txt").exists());

    // In auto mode, as in Crucible, the mode answers what a pattern asks.
    let server = LlmServer::start(scripted_model(vec![("shell", command())])).await;
    let config = format!(
        "{}{CRUCIBLE_EXAMPLE}\n[agent]\ndefault_mode = \"auto\"\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (seen, _) = agent.prompt(&session, "go").await;
    assert_eq!(asked(&seen), 0);
    assert!(agent.cwd().join("asked.txt").exists());
}

/// Global lists that ask about every command and deny `touch denied…`; the
/// `trusted` profile allows by default and denies only `rm`.
const PROFILES: &str = r#"
[permissions]
ask = ["bash:*"]
deny = ["bash:touch denied*"]

[acp.agents.trusted]
command = "crucible-agent"
args = ["--profile", "trusted"]

[acp.agents.trusted.permissions]
default = "allow"
deny = ["bash:rm *"]
"#;

#[tokio::test]
async fn a_profiles_permissions_replace_the_global_lists() {
    for launch in [
        (vec!["--profile", "trusted"], vec![]),
        (vec![], vec![("CRUCIBLE_AGENT_PROFILE", "trusted")]),
    ] {
        let server = LlmServer::start(scripted_model(vec![
            ("shell", json!({"command": "touch denied.txt"})),
            ("shell", json!({"command": "rm -f denied.txt"})),
        ]))
        .await;
        let config = format!("{}{PROFILES}", config_for(&server, "test-model"));
        let (args, env) = launch;
        let mut agent = Agent::spawn_with(&config, &args, &env).await;
        let session = agent.start_session().await;
        let (seen, response) = agent.prompt(&session, "go").await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        assert_eq!(
            asked(&seen),
            0,
            "{args:?} {env:?}: the profile allows by default"
        );
        assert!(
            agent.cwd().join("denied.txt").exists(),
            "{args:?} {env:?}: the global deny no longer applies"
        );
        let results = tool_results(&server);
        assert!(results[1].contains("bash:rm *"), "{results:?}");
    }
}

/// Answers with text, so only the requests matter; once a user says
/// "loop" it calls `read_file` for ever.
fn plain_model(request: &Recorded) -> Reply {
    if request.path.ends_with("/models") {
        return models_reply(&["test-model", "big-model"]);
    }
    let looping = request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["role"] == "user" && m["content"].as_str().is_some_and(|c| c.contains("loop")));
    let reply = if looping {
        let call = json!({"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\":\"x.txt\"}"}});
        openai_stream(&[json!({ "tool_calls": [call] })], "tool_calls", (10, 2))
    } else {
        openai_stream(&[json!({"content": "ok"})], "stop", (10, 2))
    };
    Reply::stream(reply, Split::Whole)
}

fn write_card(root: &std::path::Path, file: &str, text: &str) {
    let dir = root.join(".crucible").join("agents");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(file), text).unwrap();
}

fn tool_names(request: &Recorded) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn kiln_and_project_cards_bring_their_model_and_tool_policy() {
    let server = LlmServer::start(plain_model).await;
    let config = format!(
        "default_kiln = \"notes\"\n{}\n[kilns]\nnotes = \"kiln\"\n\n[llm.models]\nreasoning = \"big-model\"\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn_with(&config, &["--agent", "researcher"], &[]).await;
    // Crucible's documented card, in the kiln: no name (the file's), a
    // specialty, a tools map.
    write_card(
        &agent.cwd().join("kiln"),
        "researcher.md",
        "---\ndescription: Explores and synthesizes knowledge\ntools:\n  read_file: true\n  bash: deny\nmcps:\n  - context7\nspecialty: reasoning\n---\n\nYou are a research assistant.\n",
    );
    write_card(
        &agent.cwd(),
        "builder.md",
        "---\ndescription: Builds\ntools: [shell, read_file]\nmax_turns: 2\n---\nYou build.\n",
    );
    let session = agent.start_session().await;
    agent.prompt(&session, "hello").await;
    let first = &server.chat_requests()[0];
    assert_eq!(first.body["model"], "big-model", "specialty → [llm.models]");
    let tools = tool_names(first);
    assert!(tools.contains(&"read_file".to_string()), "{tools:?}");
    assert!(
        !tools.contains(&"shell".to_string()),
        "bash: deny hides the shell: {tools:?}"
    );
    assert!(
        first.body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("You are a research assistant."),
        "the card's body is in the system prompt"
    );

    // The project's card is there too.
    agent.prompt(&session, "/agent builder").await;
    agent.prompt(&session, "hello again").await;
    let last = server.chat_requests().pop().unwrap();
    let mut tools = tool_names(&last);
    tools.sort();
    assert_eq!(tools, ["read_file", "shell"]);
    // Its max_turns bounds a turn's model calls.
    let before = server.chat_requests().len();
    let (_, response) = agent.prompt(&session, "loop").await;
    assert_eq!(
        response["result"]["stopReason"], "max_turn_requests",
        "{response}"
    );
    assert_eq!(server.chat_requests().len() - before, 2);
}
