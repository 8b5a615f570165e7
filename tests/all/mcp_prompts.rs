//! MCP prompts as slash commands, through the binary: a session's servers'
//! prompts are advertised once the servers start (a name a built-in has is
//! offered as `/SERVER:NAME`), running one sends its messages to the model as
//! the user's turn, a missing argument is reported without calling the model,
//! and `notifications/prompts/list_changed` advertises the commands again.

use serde_json::{Value, json};

use crate::support::harness::{
    Agent, LlmServer, agent_text, answer_permission, config_for, echo_mcp_server, scripted_model,
};

fn commands(update: &Value) -> Vec<Value> {
    update["params"]["update"]["availableCommands"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The first `available_commands_update` that offers `name`.
async fn commands_with(agent: &mut Agent, name: &str) -> Vec<Value> {
    let update = agent
        .wait_for(|m| {
            m["params"]["update"]["sessionUpdate"] == "available_commands_update"
                && commands(m).iter().any(|c| c["name"] == name)
        })
        .await;
    commands(&update)
}

fn find<'a>(commands: &'a [Value], name: &str) -> &'a Value {
    commands
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no /{name} in {commands:?}"))
}

#[tokio::test]
async fn prompts_are_commands_that_feed_the_model() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session_with(json!([echo_mcp_server()])).await;

    let offered = commands_with(&mut agent, "greet").await;
    let greet = find(&offered, "greet");
    assert_eq!(greet["input"]["hint"], "name");
    assert!(
        greet["description"]
            .as_str()
            .unwrap()
            .starts_with("Greets someone."),
        "{greet}"
    );
    assert_eq!(
        find(&offered, "translate")["input"]["hint"],
        "lang [style] text"
    );
    // The built-in keeps `/compact`; the server's is namespaced.
    assert!(
        find(&offered, "compact")["description"]
            .as_str()
            .unwrap()
            .starts_with("Summarize")
    );
    assert!(
        find(&offered, "fx:compact")["description"]
            .as_str()
            .unwrap()
            .contains("fixture's own compact prompt")
    );

    // A missing argument: reported, and the model is not called.
    let (seen, response) = agent.prompt(&session, "/greet").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let text = agent_text(&seen, &session);
    assert!(text.contains("needs `name`"), "{text}");
    assert!(server.chat_requests().is_empty());

    let (seen, response) = agent.prompt(&session, "/greet Ann Lee").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let chat = server.chat_requests();
    assert_eq!(chat.len(), 1);
    assert!(
        chat[0]
            .last_user_text()
            .contains("PROMPT-GREET: please greet Ann Lee warmly."),
        "{}",
        chat[0].body
    );
    assert!(!chat[0].body.to_string().contains("/greet"));
    assert!(agent_text(&seen, &session).contains("Done."));

    agent.prompt(&session, "/fx:compact").await;
    agent
        .prompt(&session, "/translate fr text=\"hello world\"")
        .await;
    let chat = server.chat_requests();
    assert_eq!(chat.len(), 3);
    assert!(chat[1].last_user_text().contains("PROMPT-COMPACT"));
    let translate = chat[2].last_user_text();
    assert!(
        translate.contains("PROMPT-TRANSLATE to fr (plain):"),
        "{translate}"
    );
    assert!(translate.contains("mem://text"), "{translate}");
    assert!(translate.contains("hello world"), "{translate}");
    // The earlier prompt's messages stay in the context.
    assert!(chat[2].body.to_string().contains("PROMPT-GREET"));

    // `/compact` is still the built-in; `/help` lists the prompts.
    let (seen, _) = agent.prompt(&session, "/help").await;
    let help = agent_text(&seen, &session);
    assert!(help.contains("/fx:compact"), "{help}");
    assert!(help.contains("/greet name`"), "{help}");
    assert!(help.contains("/translate lang [style] text`"), "{help}");
    assert_eq!(server.chat_requests().len(), 3);
}

#[tokio::test]
async fn a_changed_prompt_list_is_advertised_again() {
    let server = LlmServer::start(scripted_model(vec![(
        "fx__add_prompt",
        json!({"name": "later"}),
    )]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session_with(json!([echo_mcp_server()])).await;
    commands_with(&mut agent, "greet").await;
    let prompt = agent.start_prompt(&session, "add a prompt").await;
    answer_permission(&mut agent, "allow_once").await;
    let (seen, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // The update may come during the turn or after it.
    let during = seen.iter().rev().find(|m| {
        m["params"]["update"]["sessionUpdate"] == "available_commands_update"
            && commands(m).iter().any(|c| c["name"] == "later")
    });
    let offered = match during {
        Some(update) => commands(update),
        None => commands_with(&mut agent, "later").await,
    };
    find(&offered, "greet");
    let (_, response) = agent.prompt(&session, "/later").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let chat = server.chat_requests();
    assert!(
        chat.last()
            .unwrap()
            .last_user_text()
            .contains("PROMPT-DYNAMIC later")
    );
}
