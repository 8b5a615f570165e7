//! Agent Skills (issue 18, item 5): found in the user's and the project's
//! folders, listed to the model by name and description only, loaded by
//! the `skill` tool, run as `/NAME args`, and seen again when added.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::context::{system_text, tool_names};
use crate::support::harness::{
    LlmServer, Recorded, Reply, Split, agent_text, config_for, models_reply, openai_stream,
};
use crate::support::homes::agent_with_config_home;

const NOTES: &str = "Write release notes: one line per change, newest first. Use template.md.";

fn write_skill(root: &Path, folder: &str, name: &str, description: &str, body: &str) {
    let dir = root.join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n\n{body}\n"),
    )
    .unwrap();
}

/// Loads the skill named after "load " in the prompt; otherwise answers.
fn skilled_model(request: &Recorded) -> Reply {
    if request.path.ends_with("/models") {
        return models_reply(&["test-model"]);
    }
    let last = request.body["messages"].as_array().unwrap().last().unwrap();
    let asked = request.last_user_text();
    let reply = match asked.strip_prefix("load ") {
        Some(name) if last["role"] == "user" => openai_stream(
            &[
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "skill", "arguments": json!({"name": name}).to_string()}}]}),
            ],
            "tool_calls",
            (10, 2),
        ),
        _ => openai_stream(&[json!({"content": "ok"})], "stop", (10, 2)),
    };
    Reply::stream(reply, Split::Whole)
}

fn command_names(update: &Value) -> Vec<String> {
    update["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn skills_are_listed_loaded_run_and_picked_up_when_added() {
    let server = LlmServer::start(skilled_model).await;
    let (mut agent, config_home) = agent_with_config_home(&config_for(&server, "test-model")).await;
    write_skill(
        &config_home.path().join("crucible/skills"),
        "tidy",
        "tidy",
        "Tidy imports in Rust files",
        "Sort the use lines.",
    );
    let project_skills = agent.cwd().join(".crucible/skills");
    write_skill(
        &project_skills,
        "release-notes",
        "release-notes",
        "Write release notes for a version",
        NOTES,
    );
    std::fs::write(project_skills.join("release-notes/template.md"), "## vX").unwrap();
    let session = agent.start_session().await;
    let commands = command_names(&agent.wait_for_update("available_commands_update").await);
    assert!(
        commands.contains(&"release-notes".to_string()) && commands.contains(&"tidy".to_string()),
        "{commands:?}"
    );

    // Listed by name and description; loaded by the tool when asked.
    let (seen, response) = agent.prompt(&session, "load release-notes").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        seen.iter()
            .all(|m| m["method"] != "session/request_permission")
    );
    let requests = server.chat_requests();
    let system = system_text(&requests[0]);
    assert!(
        system.contains("- `release-notes`: Write release notes for a version")
            && system.contains("- `tidy`: Tidy imports in Rust files"),
        "{system}"
    );
    assert!(
        !system.contains(NOTES),
        "the instructions are loaded on demand only"
    );
    assert!(tool_names(&requests[0]).contains(&"skill".to_string()));
    let messages = requests[1].body["messages"].as_array().unwrap();
    let result = messages[messages.len() - 1]["content"].to_string();
    assert!(
        result.contains(NOTES) && result.contains("template.md"),
        "{result}"
    );

    // Run as a command: the instructions and the arguments make the turn.
    let (seen, response) = agent.prompt(&session, "/release-notes v1.2").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(agent_text(&seen, &session), "ok");
    let asked = server.chat_requests().last().unwrap().last_user_text();
    assert!(asked.contains(NOTES) && asked.ends_with("v1.2"), "{asked}");

    // A skill added mid-session: advertised at the next turn, and listed.
    write_skill(
        &project_skills,
        "late",
        "late",
        "Arrived later",
        "Late body.",
    );
    let (seen, _) = agent.prompt(&session, "hello").await;
    let update = seen
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .expect("a fresh available_commands_update");
    assert!(command_names(update).contains(&"late".to_string()));
    let system = system_text(server.chat_requests().last().unwrap());
    assert!(system.contains("- `late`: Arrived later"), "{system}");
}
