//! Slash commands through the binary: advertised after `session/new`,
//! answered without the model, and agent cards switch the system prompt,
//! the tools and the model.

use serde_json::{Value, json};

use crate::support::context::{config_with, system_text, talkative_model, tool_names};
use crate::support::harness::{Agent, LlmServer, agent_text, updates};

const BUILTINS: [&str; 10] = [
    "help",
    "compact",
    "context",
    "rewind",
    "budget",
    "agent",
    "mode",
    "model",
    "clear",
    "permissions",
];

#[tokio::test]
async fn commands_are_advertised_after_the_session_new_answer() {
    let server = LlmServer::start(talkative_model(10)).await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), 32_768, "")).await;
    agent.initialize().await;
    let cwd = agent.cwd();
    let (before, response) = agent
        .call("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    assert!(response["result"]["sessionId"].is_string());
    assert!(
        !before
            .iter()
            .any(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update"),
        "advertised before the session existed for the client"
    );
    let update = agent.wait_for_update("available_commands_update").await;
    let names: Vec<&str> = update["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, BUILTINS);
    let context = &update["params"]["update"]["availableCommands"][2];
    assert!(
        context["input"]["hint"]
            .as_str()
            .unwrap()
            .contains("checkpoint")
    );
    // The agent option is offered beside model, mode and provider.
    let options = response["result"]["configOptions"].as_array().unwrap();
    let agent_option = options.iter().find(|o| o["id"] == "agent").unwrap();
    assert_eq!(agent_option["currentValue"], "none");
}

#[tokio::test]
async fn each_command_answers_and_ends_the_turn_without_the_model() {
    let server = LlmServer::start(talkative_model(10)).await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), 32_768, "")).await;
    let session = agent.start_session().await;
    let (seen, _) = agent.prompt(&session, "hello").await;
    // The model list loads in the background; `/model other-model` picks
    // from it, so the test waits until the client has been offered it.
    let offered = |m: &Value| {
        m["params"]["update"]["sessionUpdate"] == "config_option_update"
            && m.to_string().contains("\"other-model\"")
    };
    if !seen.iter().any(offered) {
        agent.wait_for(offered).await;
    }
    let calls = server.chat_requests().len();
    for (command, expected) in [
        ("/help", "`/context [checkpoint NAME"),
        ("/crucible:help", "Commands:"),
        ("/agent", "`reviewer`"),
        ("/mode", "Mode: `act`"),
        ("/model", "Model: `test-model`"),
        ("/mode plan", "mode is now `plan`"),
        ("/model other-model", "model is now `other-model`"),
        ("/mode nonsense", "is not a value of option `mode`"),
        ("/agent nobody", "no agent card named `nobody`"),
        ("/clear", "Context reset"),
    ] {
        let (seen, response) = agent.prompt(&session, command).await;
        assert_eq!(
            response["result"]["stopReason"], "end_turn",
            "{command}: {response}"
        );
        let text = agent_text(&seen, &session);
        assert!(text.contains(expected), "{command}: {text}");
        if command == "/mode plan" {
            let mode = updates(&seen, &session, "current_mode_update");
            assert_eq!(mode.last().unwrap()["currentModeId"], "plan");
        }
        if command == "/model other-model" {
            let options = updates(&seen, &session, "config_option_update");
            assert!(!options.is_empty(), "{command}: no config_option_update");
        }
    }
    assert_eq!(
        server.chat_requests().len(),
        calls,
        "a command called the model"
    );

    // /clear emptied the context; the model switch and mode stay.
    agent.prompt(&session, "after clear").await;
    let last = server.chat_requests().last().cloned().unwrap();
    assert_eq!(last.body["messages"].as_array().unwrap().len(), 2);
    assert_eq!(last.body["model"], "other-model");
    assert!(system_text(&last).contains("# Plan mode"));

    // Unknown commands are text for the model.
    let (_, response) = agent.prompt(&session, "/frobnicate the widgets").await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let last = server.chat_requests().last().cloned().unwrap();
    assert_eq!(last.last_user_text(), "/frobnicate the widgets");
}

#[tokio::test]
async fn switching_agent_changes_the_system_prompt_tools_and_mode() {
    let server = LlmServer::start(talkative_model(10)).await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), 32_768, "")).await;
    let session = agent.start_session().await;
    agent.prompt(&session, "before").await;
    let before = server.chat_requests().last().cloned().unwrap();
    assert!(tool_names(&before).contains(&"write_file".to_string()));
    assert!(!system_text(&before).contains("careful code reviewer"));

    let (seen, _) = agent.prompt(&session, "/agent reviewer").await;
    let text = agent_text(&seen, &session);
    assert!(text.contains("Agent `reviewer`"), "{text}");
    assert_eq!(
        updates(&seen, &session, "current_mode_update")
            .last()
            .unwrap()["currentModeId"],
        "plan"
    );
    agent.prompt(&session, "after").await;
    let after = server.chat_requests().last().cloned().unwrap();
    assert!(system_text(&after).contains("careful code reviewer"));
    assert!(system_text(&after).contains("# Agent: reviewer"));
    let mut tools = tool_names(&after);
    tools.sort();
    assert_eq!(tools, ["glob", "grep", "list_dir", "read_file", "todo"]);
    // {{tools}} names what is really offered.
    let offered = format!(
        "Tools offered in this session: {}.",
        tool_names(&after).join(", ")
    );
    assert!(system_text(&after).contains(&offered), "{offered}");
    assert!(!system_text(&after).contains("write_file"));

    // The session config option switches too.
    let (_, response) = agent
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "agent", "value": "none"}),
        )
        .await;
    let options = response["result"]["configOptions"].as_array().unwrap();
    assert_eq!(
        options.iter().find(|o| o["id"] == "agent").unwrap()["currentValue"],
        "none"
    );
    agent.prompt(&session, "again").await;
    let last = server.chat_requests().last().cloned().unwrap();
    assert!(!system_text(&last).contains("careful code reviewer"));
}

#[tokio::test]
async fn user_cards_and_the_agent_flag_pick_model_and_tools() {
    let server = LlmServer::start(talkative_model(10)).await;
    let config_home = tempfile::tempdir().unwrap();
    let cards = config_home.path().join("crucible/agents");
    std::fs::create_dir_all(&cards).unwrap();
    std::fs::write(
        cards.join("scout.md"),
        "---\nname: scout\ndescription: Looks around\nmodel: other-model\ntools: [read_file]\n---\nYou are SCOUT, you only read.\n",
    )
    .unwrap();
    let home = config_home.path().to_str().unwrap();
    let mut agent = Agent::spawn_with(
        &config_with(&server.base_url(), 32_768, ""),
        &["--agent", "scout"],
        &[("XDG_CONFIG_HOME", home)],
    )
    .await;
    let session = agent.start_session().await;
    agent.prompt(&session, "hi").await;
    let last = server.chat_requests().last().cloned().unwrap();
    assert_eq!(last.body["model"], "other-model");
    assert_eq!(tool_names(&last), ["read_file"]);
    assert!(system_text(&last).contains("You are SCOUT"));

    let (seen, _) = agent.prompt(&session, "/agent").await;
    let list = agent_text(&seen, &session);
    assert!(list.contains("`scout` (active): Looks around"), "{list}");
    assert!(list.contains("`coder`"), "{list}");
}
