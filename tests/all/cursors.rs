//! Session cursors (unstable `cursors`): a checkpoint after each prompt and
//! each answer, announced to clients that take them, and `session/fork` at
//! one giving a session whose history ends there.

use serde_json::{Value, json};

use crate::support::harness::{Agent, LlmServer, config_for, scripted_model, updates};

fn config(server: &LlmServer, features: &str) -> String {
    format!(
        "{}\n[acp]\nunstable = [{features}]\n",
        config_for(server, "test-model")
    )
}

async fn initialize_with_cursors(agent: &mut Agent) {
    let (_, response) = agent
        .call(
            "initialize",
            json!({"protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false},
                    "terminal": false, "session": {"cursors": {}}},
                "clientInfo": {"name": "cursors", "version": "0"}}),
        )
        .await;
    assert!(response.get("result").is_some(), "{response}");
}

/// The turn's cursors: (before the answer, after it), checked against the
/// answer's message id.
fn turn_cursors(seen: &[Value], session: &str) -> (String, String) {
    let chunks = updates(seen, session, "agent_message_chunk");
    let message = chunks[0]["messageId"]
        .as_str()
        .expect("no messageId")
        .to_string();
    assert!(
        chunks.iter().all(|c| c["messageId"] == message.as_str()),
        "{chunks:?}"
    );
    let cursors = updates(seen, session, "cursor_update");
    assert_eq!(cursors.len(), 2, "{cursors:?}");
    for (cursor, position) in cursors.iter().zip(["before", "after"]) {
        assert_eq!(
            cursor["anchor"],
            json!({"type": "agent_message", "messageId": message, "position": position}),
            "{cursor}"
        );
        assert_eq!(cursor["capabilities"], json!({"fork": {}}), "{cursor}");
    }
    let id = |c: &Value| c["cursorId"].as_str().unwrap().to_string();
    (id(&cursors[0]), id(&cursors[1]))
}

async fn fork_at(agent: &mut Agent, session: &str, cursor: &str) -> String {
    let (_, forked) = agent
        .call(
            "session/fork",
            json!({"sessionId": session, "cwd": agent.cwd(), "mcpServers": [], "cursorId": cursor}),
        )
        .await;
    forked["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{forked}"))
        .to_string()
}

/// The messages of the newest chat request: (role, text).
fn last_messages(server: &LlmServer) -> Vec<(String, String)> {
    let requests = server.chat_requests();
    requests.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_string(),
                m["content"].to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_fork_at_a_cursor_has_only_the_history_before_it() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&config(&server, "\"cursors\", \"fork\"")).await;
    initialize_with_cursors(&mut agent).await;
    let session = agent.new_session().await;
    let (seen, _) = agent.prompt(&session, "first question").await;
    let (after_prompt, after_answer) = turn_cursors(&seen, &session);
    assert_ne!(after_prompt, after_answer);
    let (seen, _) = agent.prompt(&session, "second question").await;
    let (later, _) = turn_cursors(&seen, &session);
    assert!(
        ![&after_prompt, &after_answer].contains(&&later),
        "cursor ids are never reused"
    );

    // After the first answer: the first exchange, not the second.
    let fork = fork_at(&mut agent, &session, &after_answer).await;
    agent.prompt(&fork, "third question").await;
    let seen = last_messages(&server);
    let roles: Vec<&str> = seen.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{seen:?}");
    assert!(seen[0].1.contains("first question"), "{seen:?}");
    assert!(seen[2].1.contains("third question"), "{seen:?}");
    // Its replay shows the same.
    agent
        .call("session/close", json!({"sessionId": fork}))
        .await;
    let (replayed, loaded) = agent.load(&fork, agent.cwd()).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let shown: Vec<String> = updates(&replayed, &fork, "user_message_chunk")
        .iter()
        .map(|u| {
            u["content"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(shown, ["first question", "third question"], "{replayed:?}");

    // After the first prompt: the question without its answer.
    let fork = fork_at(&mut agent, &session, &after_prompt).await;
    agent.prompt(&fork, "again").await;
    let seen = last_messages(&server);
    let roles: Vec<&str> = seen.iter().map(|(role, _)| role.as_str()).collect();
    assert!(!roles.contains(&"assistant"), "{seen:?}");
    assert!(seen[0].1.contains("first question"), "{seen:?}");
    assert!(
        !seen
            .iter()
            .any(|(_, text)| text.contains("second question")),
        "{seen:?}"
    );

    // The source goes on with its whole history.
    agent.prompt(&session, "fourth question").await;
    let seen = last_messages(&server);
    assert!(
        seen.iter()
            .any(|(_, text)| text.contains("second question")),
        "{seen:?}"
    );
}

#[tokio::test]
async fn clients_that_do_not_take_cursors_see_no_change() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    // Turned on, but this client does not say it takes cursors.
    let mut agent = Agent::spawn(&config(&server, "\"cursors\", \"fork\"")).await;
    agent.initialize().await;
    let session = agent.new_session().await;
    let (seen, _) = agent.prompt(&session, "hello").await;
    assert!(
        updates(&seen, &session, "cursor_update").is_empty(),
        "{seen:?}"
    );
    let chunks = updates(&seen, &session, "agent_message_chunk");
    assert!(!chunks.is_empty());
    assert!(
        chunks.iter().all(|c| c.get("messageId").is_none()),
        "{chunks:?}"
    );
    let (_, unknown) = agent
        .call(
            "session/fork",
            json!({"sessionId": session, "cwd": agent.cwd(), "mcpServers": [], "cursorId": "cursor-nope"}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cursor-nope"),
        "{unknown}"
    );

    // Not turned on: a cursor-taking client gets none, and cursorId is refused.
    let mut agent = Agent::spawn(&config(&server, "\"fork\"")).await;
    initialize_with_cursors(&mut agent).await;
    let session = agent.new_session().await;
    let (seen, _) = agent.prompt(&session, "hello").await;
    assert!(
        updates(&seen, &session, "cursor_update").is_empty(),
        "{seen:?}"
    );
    let (_, refused) = agent
        .call(
            "session/fork",
            json!({"sessionId": session, "cwd": agent.cwd(), "mcpServers": [], "cursorId": "cursor-x"}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cursorId"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_load_after_a_restart_announces_the_cursors_again_and_a_fork_at_one_works() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let config = config(&server, "\"cursors\", \"fork\"");
    let mut first = Agent::spawn(&config).await;
    initialize_with_cursors(&mut first).await;
    let session = first.new_session().await;
    let (seen, _) = first.prompt(&session, "first question").await;
    let mut live = updates(&seen, &session, "cursor_update");
    let (_, after_first_answer) = turn_cursors(&seen, &session);
    let (seen, _) = first.prompt(&session, "second question").await;
    live.extend(updates(&seen, &session, "cursor_update"));
    first.close_stdin();
    first.wait_exit().await;

    // Another process: the replay carries the same cursors, anchored on
    // the replayed messages' ids.
    let mut second = Agent::spawn_sharing(&config, &first).await;
    initialize_with_cursors(&mut second).await;
    let (replayed, loaded) = second.load(&session, first.cwd()).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let cursors = updates(&replayed, &session, "cursor_update");
    assert_eq!(cursors, live, "{replayed:?}");
    let messages: Vec<Value> = updates(&replayed, &session, "agent_message_chunk")
        .iter()
        .map(|chunk| chunk["messageId"].clone())
        .collect();
    assert_eq!(messages.len(), 2, "{replayed:?}");
    for cursor in &cursors {
        assert!(
            messages.contains(&cursor["anchor"]["messageId"]),
            "{cursor} is anchored on a replayed message: {messages:?}"
        );
    }

    // A fork there has the first exchange only.
    let fork = fork_at(&mut second, &session, &after_first_answer).await;
    second.prompt(&fork, "third question").await;
    let seen = last_messages(&server);
    let roles: Vec<&str> = seen.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{seen:?}");
    assert!(seen[0].1.contains("first question"), "{seen:?}");
    assert!(seen[2].1.contains("third question"), "{seen:?}");
    second.close_stdin();
    second.wait_exit().await;

    // A client that does not take cursors gets the replay as before.
    let mut third = Agent::spawn_sharing(&config, &first).await;
    third.initialize().await;
    let (replayed, _) = third.load(&session, first.cwd()).await;
    assert!(
        updates(&replayed, &session, "cursor_update").is_empty(),
        "{replayed:?}"
    );
    let chunks = updates(&replayed, &session, "agent_message_chunk");
    assert_eq!(chunks.len(), 2, "{replayed:?}");
    assert!(
        chunks.iter().all(|c| c.get("messageId").is_none()),
        "{chunks:?}"
    );
}
