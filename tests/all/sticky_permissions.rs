//! Permissions that stick (issue 18, item 3): "Always allow in this
//! project" and "everywhere" write a rule exactly as narrow as the
//! question, which later sessions obey without asking; `/permissions`
//! lists the rules with their origin and revokes one.

use serde_json::{Value, json};

use crate::support::homes::agent_with_config_home;

use crate::support::harness::{
    Agent, LlmServer, Recorded, Reply, Split, agent_text, config_for, models_reply, openai_stream,
};

/// A model that runs the prompt's text as a shell command, then says "done".
fn runs_the_prompt(request: &Recorded) -> Reply {
    if request.path.ends_with("/models") {
        return models_reply(&["test-model"]);
    }
    let messages = request.body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    let reply = if last["role"] == "tool" {
        openai_stream(
            &[json!({"content": format!("done: {}", last["content"].as_str().unwrap_or(""))})],
            "stop",
            (10, 2),
        )
    } else {
        let command = request.last_user_text();
        openai_stream(
            &[
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "shell", "arguments": json!({"command": command}).to_string()}}]}),
            ],
            "tool_calls",
            (10, 2),
        )
    };
    Reply::stream(reply, Split::Whole)
}

fn asked(seen: &[Value]) -> usize {
    seen.iter()
        .filter(|m| m["method"] == "session/request_permission")
        .count()
}

/// Run `command` in `session`, answering a question (if one comes) with `answer`.
async fn run(agent: &mut Agent, session: &str, command: &str, answer: &str) -> (bool, String) {
    let id = agent.start_prompt(session, command).await;
    let first = agent
        .wait_for(|m| {
            m["method"] == "session/request_permission" || m.get("id") == Some(&json!(id))
        })
        .await;
    let was_asked = first["method"] == "session/request_permission";
    if was_asked {
        agent
            .send(&json!({"jsonrpc": "2.0", "id": first["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": answer}}}))
            .await;
    } else {
        agent.backlog.push(first);
    }
    let (seen, response) = agent.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(asked(&seen), 0, "asked twice");
    (was_asked, agent_text(&seen, session))
}

async fn slash(agent: &mut Agent, session: &str, text: &str) -> String {
    let (seen, response) = agent.prompt(session, text).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    agent_text(&seen, session)
}

#[tokio::test]
async fn a_project_rule_is_written_as_narrow_as_asked_and_obeyed_by_new_sessions() {
    let server = LlmServer::start(runs_the_prompt).await;
    let (mut agent, config_home) = agent_with_config_home(&config_for(&server, "test-model")).await;
    let first = agent.start_session().await;
    let (was_asked, text) = run(&mut agent, &first, "echo sticky", "allow_project").await;
    assert!(was_asked);
    assert!(text.contains("sticky"), "{text}");
    let file = agent.cwd().join(".crucible/permissions.toml");
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.starts_with("# Permission rules"), "{written}");
    assert!(
        written.contains("[[permissions.rules]]\ntool = \"shell\"\ncommand = \"echo sticky\"\ndecision = \"allow\""),
        "{written}"
    );
    assert!(
        written.contains("# Allowed in this project on "),
        "{written}"
    );

    // A new session obeys it without asking, and only for that command.
    let second = agent.new_session().await;
    let (was_asked, text) = run(&mut agent, &second, "echo sticky", "reject_once").await;
    assert!(!was_asked, "the project rule was not obeyed");
    assert!(text.contains("sticky"), "{text}");
    let (was_asked, _) = run(&mut agent, &second, "echo sticky; echo more", "reject_once").await;
    assert!(was_asked, "a broader command ran under the narrow rule");

    // "Everywhere" goes to the user's file.
    let (was_asked, _) = run(&mut agent, &second, "echo everywhere", "allow_everywhere").await;
    assert!(was_asked);
    let user_file = config_home.path().join("crucible/permissions.toml");
    let written = std::fs::read_to_string(&user_file).unwrap();
    assert!(
        written.contains("command = \"echo everywhere\""),
        "{written}"
    );

    // Listed with their origin; revoked from their files.
    let listing = slash(&mut agent, &second, "/permissions").await;
    assert!(
        listing.contains("`p1` allow `shell` running exactly `echo sticky`")
            && listing.contains(&file.display().to_string())
            && listing.contains("`u1` allow `shell` running exactly `echo everywhere`")
            && listing.contains(&user_file.display().to_string()),
        "{listing}"
    );
    let revoked = slash(&mut agent, &second, "/permissions revoke p1").await;
    assert!(revoked.contains("Revoked `p1`"), "{revoked}");
    assert!(
        !std::fs::read_to_string(&file)
            .unwrap()
            .contains("echo sticky")
    );
    let unknown = slash(&mut agent, &second, "/permissions revoke p9").await;
    assert!(unknown.contains("no rule `p9`"), "{unknown}");
    let third = agent.new_session().await;
    let (was_asked, _) = run(&mut agent, &third, "echo sticky", "reject_once").await;
    assert!(was_asked, "the revoked rule still held");
    let (was_asked, _) = run(&mut agent, &third, "echo everywhere", "reject_once").await;
    assert!(!was_asked, "the user's rule holds in every project");

    // A file that does not parse is not used, and /permissions says why.
    std::fs::write(
        &file,
        "[[permissions.rules]]\ntool = \"shell\"\ndecision = \"alow\"\n",
    )
    .unwrap();
    let fourth = agent.new_session().await;
    let listing = slash(&mut agent, &fourth, "/permissions").await;
    assert!(
        listing.contains("Not used (fix the file)")
            && listing.contains("permissions.rules[0].decision"),
        "{listing}"
    );
}

/// The model cannot widen its own permissions: a project rules file that
/// the model (here through an approved shell command), another program or
/// a checkout wrote has its allow rules listed but not applied, and the
/// user is told, until `/permissions trust`. Its deny rules apply at once.
#[tokio::test]
async fn allow_rules_the_model_wrote_into_the_project_file_wait_for_the_users_trust() {
    let server = LlmServer::start(runs_the_prompt).await;
    let (mut agent, _config_home) =
        agent_with_config_home(&config_for(&server, "test-model")).await;
    let first = agent.start_session().await;
    let widen = "mkdir -p .crucible && printf '[[permissions.rules]]\\ntool = \"shell\"\\ncommand = \"echo widened\"\\ndecision = \"allow\"\\n\\n[[permissions.rules]]\\ntool = \"shell\"\\ncommand = \"echo narrowed\"\\ndecision = \"deny\"\\n' > .crucible/permissions.toml";
    let (was_asked, _) = run(&mut agent, &first, widen, "allow_once").await;
    assert!(was_asked, "act mode asks before the command");
    let file = agent.cwd().join(".crucible/permissions.toml");
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("echo widened")
    );

    let second = agent.new_session().await;
    let (seen, response) = agent.prompt(&second, "/permissions").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let everything: String = seen.iter().map(Value::to_string).collect();
    assert!(
        everything.contains("Not applied: the allow rule in"),
        "the user is told: {seen:?}"
    );
    let listing = agent_text(&seen, &second);
    assert!(
        listing.contains("running exactly `echo widened` (not applied")
            && listing.contains("/permissions trust"),
        "{listing}"
    );
    let (was_asked, _) = run(&mut agent, &second, "echo widened", "reject_once").await;
    assert!(was_asked, "the model's own allow rule was applied");
    let (was_asked, text) = run(&mut agent, &second, "echo narrowed", "allow_once").await;
    assert!(
        !was_asked && !text.contains("narrowed\n"),
        "the deny rule applies: {text}"
    );

    let trusted = slash(&mut agent, &second, "/permissions trust").await;
    assert!(
        trusted.contains("Trusted") && trusted.contains("(1)"),
        "{trusted}"
    );
    let (was_asked, _) = run(&mut agent, &second, "echo widened", "reject_once").await;
    assert!(!was_asked, "trusted: the rule applies in this session");
    let third = agent.new_session().await;
    let (was_asked, _) = run(&mut agent, &third, "echo widened", "reject_once").await;
    assert!(!was_asked, "and in new ones");

    // A later change by anyone but the agent's own answers needs trust again.
    let changed = std::fs::read_to_string(&file)
        .unwrap()
        .replace("widened", "changed");
    std::fs::write(&file, changed).unwrap();
    let fourth = agent.new_session().await;
    let (was_asked, _) = run(&mut agent, &fourth, "echo changed", "reject_once").await;
    assert!(was_asked, "a changed file is not trusted");
}
