//! The layered system prompt as the model server receives it: project
//! instructions from the repository root down to the cwd, the mode layer,
//! the user's addition and a project's own base prompt.

use serde_json::json;

use crate::support::context::{config_with, system_text, talkative_model};
use crate::support::harness::{Agent, LlmServer};

#[tokio::test]
async fn agents_md_and_claude_md_reach_the_request_in_order() {
    let server = LlmServer::start(talkative_model(10)).await;
    let mut agent = Agent::spawn(&config_with(
        &server.base_url(),
        32_768,
        "[agent]\ndefault_mode = \"plan\"",
    ))
    .await;
    let repo = agent.cwd().join("repo");
    let sub = repo.join("crates/core");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::write(agent.cwd().join("AGENTS.md"), "ABOVE-THE-REPO").unwrap();
    std::fs::write(
        repo.join("AGENTS.md"),
        "Run `make check` before committing.",
    )
    .unwrap();
    std::fs::write(repo.join("CLAUDE.md"), "Prefer small functions.").unwrap();
    std::fs::write(sub.join("AGENTS.md"), "This crate has no unsafe code.").unwrap();
    agent.initialize().await;
    let (_, response) = agent
        .call("session/new", json!({"cwd": sub, "mcpServers": []}))
        .await;
    let session = response["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    agent.prompt(&session, "hello").await;
    let request = server.chat_requests().last().cloned().unwrap();
    let system = system_text(&request);
    let positions: Vec<usize> = [
        "You are Crucible",
        "# Plan mode",
        "# Project instructions",
        "Run `make check` before committing.",
        "Prefer small functions.",
        "This crate has no unsafe code.",
    ]
    .iter()
    .map(|needle| {
        system
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} missing:\n{system}"))
    })
    .collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "{positions:?}\n{system}"
    );
    assert!(!system.contains("ABOVE-THE-REPO"), "{system}");
    assert!(system.contains(&sub.display().to_string()));
    assert!(system.contains("test-model"));
    assert!(!system.contains("{{"), "{system}");
}

#[tokio::test]
async fn the_users_addition_comes_last_and_a_project_may_replace_the_base() {
    let server = LlmServer::start(talkative_model(10)).await;
    let config = format!(
        "[chat]\ndefault_provider = \"local\"\nsystem_prompt = \"Always answer in French.\"\n\n[llm.providers.local]\ntype = \"openai\"\nendpoint = \"{}\"\ndefault_model = \"test-model\"\n",
        server.base_url()
    );
    let mut agent = Agent::spawn(&config).await;
    std::fs::write(agent.cwd().join("AGENTS.md"), "PROJECT RULES").unwrap();
    let session = agent.start_session().await;
    agent.prompt(&session, "hello").await;
    let system = system_text(&server.chat_requests().last().cloned().unwrap());
    assert!(
        system.trim_end().ends_with("Always answer in French."),
        "{system}"
    );
    assert!(system.find("PROJECT RULES").unwrap() < system.find("Always answer").unwrap());
    assert!(system.contains("Act mode"), "{system}");

    std::fs::create_dir_all(agent.cwd().join(".crucible")).unwrap();
    std::fs::write(
        agent.cwd().join(".crucible/system_prompt.md"),
        "OWN BASE PROMPT for {{model}} in {{mode}} mode with {{tools}}.",
    )
    .unwrap();
    // Read per turn: the next prompt already uses it.
    agent.prompt(&session, "again").await;
    let system = system_text(&server.chat_requests().last().cloned().unwrap());
    assert!(
        system.starts_with("OWN BASE PROMPT for test-model in act mode with read_file"),
        "{system}"
    );
    assert!(!system.contains("You are Crucible"), "{system}");
    assert!(system.contains("PROJECT RULES"));
}
