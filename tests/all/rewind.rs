//! `/rewind` through the binary: the conversation goes back N user turns
//! and the files the agent wrote in them get their earlier content again;
//! a file the user changed since is refused; the rewind survives a restart
//! and can be undone.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::support::harness::{
    Agent, LlmServer, Recorded, Reply, Split, agent_text, config_for, models_reply, openai_stream,
};

/// One model answer: a tool call, or text that ends the turn.
enum Step {
    Call(&'static str, Value),
    Say(&'static str),
}

/// A model that answers each chat request with the next step.
fn model(steps: Vec<Step>) -> impl Fn(&Recorded) -> Reply {
    let next = Arc::new(Mutex::new(0usize));
    move |request| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model"]);
        }
        let mut n = next.lock().unwrap();
        let bytes = match steps.get(*n) {
            Some(Step::Call(name, arguments)) => openai_stream(
                &[
                    json!({"tool_calls": [{"index": 0, "id": format!("call_{n}"), "type": "function",
                    "function": {"name": name, "arguments": arguments.to_string()}}]}),
                ],
                "tool_calls",
                (50, 10),
            ),
            Some(Step::Say(text)) => openai_stream(&[json!({"content": text})], "stop", (60, 5)),
            None => openai_stream(&[json!({"content": "nothing more"})], "stop", (60, 5)),
        };
        *n += 1;
        Reply::stream(bytes, Split::Whole)
    }
}

/// Auto mode: the file tools and the shell ask nothing.
fn config(server: &LlmServer) -> String {
    format!(
        "{}\n[agent]\ndefault_mode = \"auto\"\n",
        config_for(server, "test-model")
    )
}

fn read(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name)).ok()
}

/// A prompt that must end the turn normally; the agent's text.
/// The agent's text, and what the client saw, ending with the answer.
async fn say(agent: &mut Agent, session: &str, text: &str) -> (String, Vec<Value>) {
    let (mut seen, response) = agent.prompt(session, text).await;
    assert_eq!(
        response["result"]["stopReason"], "end_turn",
        "{text}: {response}"
    );
    let said = agent_text(&seen, session);
    seen.push(response);
    (said, seen)
}

#[tokio::test]
async fn a_rewind_of_two_turns_restores_three_files_and_undo_puts_them_back() {
    let server = LlmServer::start(model(vec![
        Step::Call("write_file", json!({"path": "d.txt", "content": "d1\n"})),
        Step::Say("one done"),
        Step::Call(
            "edit_file",
            json!({"path": "a.txt", "old_text": "a0", "new_text": "a1"}),
        ),
        Step::Call("write_file", json!({"path": "c.txt", "content": "c1\n"})),
        Step::Call("shell", json!({"command": "echo built"})),
        Step::Say("two done"),
        Step::Call("write_file", json!({"path": "b.txt", "content": "b1\n"})),
        Step::Call("write_file", json!({"path": "a.txt", "content": "a2\n"})),
        Step::Say("three done"),
    ]))
    .await;
    let mut agent = Agent::spawn(&config(&server)).await;
    let cwd = agent.cwd();
    std::fs::write(cwd.join("a.txt"), "a0\n").unwrap();
    std::fs::write(cwd.join("b.txt"), "b0\n").unwrap();
    let session = agent.start_session().await;
    say(&mut agent, &session, "PROMPT-ONE").await;
    say(&mut agent, &session, "PROMPT-TWO").await;
    say(&mut agent, &session, "PROMPT-THREE").await;
    let now = |cwd: &Path| ["a.txt", "b.txt", "c.txt", "d.txt"].map(|name| read(cwd, name));
    let changed = [
        Some("a2\n".to_string()),
        Some("b1\n".into()),
        Some("c1\n".into()),
        Some("d1\n".into()),
    ];
    assert_eq!(now(&cwd), changed);

    let mut transcript = Vec::new();
    let (plan, seen) = say(&mut agent, &session, "/rewind 2 --dry-run").await;
    transcript.push(("/rewind 2 --dry-run", seen));
    for expected in [
        "would go back 2 turns",
        "PROMPT-TWO",
        "a.txt: restored",
        "b.txt: restored",
        "c.txt: removed (the agent created it)",
        "`echo built`",
        "cannot be undone",
        "Nothing changed",
    ] {
        assert!(plan.contains(expected), "{expected}: {plan}");
    }
    assert!(!plan.contains("d.txt"), "{plan}");
    assert_eq!(now(&cwd), changed, "a dry run changes nothing");

    let (report, seen) = say(&mut agent, &session, "/rewind 2").await;
    transcript.push(("/rewind 2", seen));
    assert!(report.contains("Went back 2 turns"), "{report}");
    assert!(report.contains("`echo built`"), "{report}");
    assert_eq!(
        now(&cwd),
        [
            Some("a0\n".to_string()),
            Some("b0\n".into()),
            None,
            Some("d1\n".into())
        ]
    );
    let (context, _) = say(&mut agent, &session, "/context").await;
    assert!(context.contains("PROMPT-ONE"), "{context}");
    assert!(!context.contains("PROMPT-TWO"), "{context}");

    let (undone, seen) = say(&mut agent, &session, "/rewind undo").await;
    transcript.push(("/rewind undo", seen));
    assert!(undone.contains("Undid the last rewind"), "{undone}");
    assert_eq!(now(&cwd), changed);
    let (context, _) = say(&mut agent, &session, "/context").await;
    assert!(context.contains("PROMPT-THREE"), "{context}");
    let (again, _) = say(&mut agent, &session, "/rewind undo").await;
    assert!(again.contains("no rewind to undo"), "{again}");

    // The next prompt's request holds the whole conversation again.
    say(&mut agent, &session, "PROMPT-FOUR").await;
    let last = server.chat_requests().pop().unwrap();
    assert!(last.body.to_string().contains("PROMPT-THREE"));
    if let Some(path) = std::env::var_os("REWIND_TRANSCRIPT") {
        write_transcript(Path::new(&path), &transcript);
    }
}

/// The ACP messages of each command, for the record.
fn write_transcript(path: &Path, commands: &[(&str, Vec<Value>)]) {
    let mut out = String::from(
        "# Rewind transcript\n\nThe ACP messages the agent sent for each command (test `rewind::a_rewind_of_two_turns_restores_three_files_and_undo_puts_them_back`). Three turns first wrote d.txt; edited a.txt, created c.txt and ran `echo built`; wrote b.txt and a.txt.\n",
    );
    for (command, seen) in commands {
        let session = seen[0]["params"]["sessionId"].as_str().unwrap_or_default();
        let id = &seen[seen.len() - 1]["id"];
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": command}]}});
        let text = agent_text(seen, session);
        out.push_str(&format!(
            "\n## `{command}`\n\nAs the user reads it:\n\n```text\n{text}\n```\n\nOn the wire (client → agent, then agent → client):\n\n```json\n{request}\n"
        ));
        for message in seen {
            out.push_str(&message.to_string());
            out.push('\n');
        }
        out.push_str("```\n");
    }
    std::fs::write(path, out).unwrap();
}

#[tokio::test]
async fn a_file_the_user_changed_is_refused_unless_forced() {
    let server = LlmServer::start(model(vec![
        Step::Call("write_file", json!({"path": "a.txt", "content": "agent\n"})),
        Step::Call("write_file", json!({"path": "b.txt", "content": "agent\n"})),
        Step::Say("done"),
    ]))
    .await;
    let mut agent = Agent::spawn(&config(&server)).await;
    let cwd = agent.cwd();
    std::fs::write(cwd.join("a.txt"), "original\n").unwrap();
    let session = agent.start_session().await;
    say(&mut agent, &session, "write them").await;
    std::fs::write(cwd.join("a.txt"), "mine\n").unwrap();

    let (plan, _) = say(&mut agent, &session, "/rewind --dry-run").await;
    assert!(
        plan.contains("- a.txt: restored to its earlier content (changed since the agent wrote it"),
        "{plan}"
    );
    assert!(
        plan.contains("- b.txt: removed (the agent created it)\n"),
        "{plan}"
    );
    let (refused, _) = say(&mut agent, &session, "/rewind").await;
    assert!(refused.contains("Refused"), "{refused}");
    assert!(refused.contains("- a.txt"), "{refused}");
    assert!(!refused.contains("- b.txt"), "{refused}");
    assert!(refused.contains("/rewind 1 --force"), "{refused}");
    assert_eq!(read(&cwd, "a.txt").as_deref(), Some("mine\n"));
    assert_eq!(
        read(&cwd, "b.txt").as_deref(),
        Some("agent\n"),
        "nothing changed"
    );

    let (forced, _) = say(&mut agent, &session, "/rewind --force").await;
    assert!(forced.contains("Went back 1 turn"), "{forced}");
    assert_eq!(read(&cwd, "a.txt").as_deref(), Some("original\n"));
    assert_eq!(read(&cwd, "b.txt"), None);
    // The undo gives the user's text back, not the agent's.
    say(&mut agent, &session, "/rewind undo").await;
    assert_eq!(read(&cwd, "a.txt").as_deref(), Some("mine\n"));
}

async fn load(agent: &mut Agent, session: &str, cwd: &Path) {
    agent.initialize().await;
    let (_, response) = agent
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert!(response.get("result").is_some(), "{response}");
}

#[tokio::test]
async fn rewinds_and_their_undo_survive_a_restart() {
    let server = LlmServer::start(model(vec![
        Step::Call("write_file", json!({"path": "a.txt", "content": "new\n"})),
        Step::Say("done"),
    ]))
    .await;
    let config = config(&server);
    let mut first = Agent::spawn(&config).await;
    let cwd = first.cwd();
    std::fs::write(cwd.join("a.txt"), "old\n").unwrap();
    let session = first.start_session().await;
    say(&mut first, &session, "PROMPT-WRITE").await;
    first.close_stdin();
    first.wait_exit().await;

    // A new process rewinds the turn the first one ran.
    let mut second = Agent::spawn_sharing(&config, &first).await;
    load(&mut second, &session, &cwd).await;
    let (report, _) = say(&mut second, &session, "/rewind").await;
    assert!(report.contains("a.txt: restored"), "{report}");
    assert_eq!(read(&cwd, "a.txt").as_deref(), Some("old\n"));
    second.close_stdin();
    second.wait_exit().await;

    // A third one loads the rewound conversation and undoes the rewind.
    let mut third = Agent::spawn_sharing(&config, &first).await;
    load(&mut third, &session, &cwd).await;
    let (context, _) = say(&mut third, &session, "/context").await;
    assert!(!context.contains("PROMPT-WRITE"), "{context}");
    let (undone, _) = say(&mut third, &session, "/rewind undo").await;
    assert!(undone.contains("Undid the last rewind"), "{undone}");
    assert_eq!(read(&cwd, "a.txt").as_deref(), Some("new\n"));
    let (context, _) = say(&mut third, &session, "/context").await;
    assert!(context.contains("PROMPT-WRITE"), "{context}");
    let blobs = first.session_dir(&session).join("blobs");
    assert!(std::fs::read_dir(blobs).unwrap().count() >= 2);
}

#[tokio::test]
async fn a_rollback_to_a_checkpoint_restores_the_files_too() {
    let server = LlmServer::start(model(vec![
        Step::Call("write_file", json!({"path": "a.txt", "content": "later\n"})),
        Step::Say("done"),
    ]))
    .await;
    let mut agent = Agent::spawn(&config(&server)).await;
    let cwd = agent.cwd();
    std::fs::write(cwd.join("a.txt"), "early\n").unwrap();
    let session = agent.start_session().await;
    say(&mut agent, &session, "/context checkpoint start").await;
    say(&mut agent, &session, "change it").await;
    let (plan, _) = say(&mut agent, &session, "/context rollback start --dry-run").await;
    assert!(plan.contains("a.txt: restored"), "{plan}");
    assert_eq!(read(&cwd, "a.txt").as_deref(), Some("later\n"));
    let (report, _) = say(&mut agent, &session, "/context rollback start").await;
    assert!(
        report.contains("Rolled back to checkpoint `start`"),
        "{report}"
    );
    assert!(report.contains("a.txt: restored"), "{report}");
    assert_eq!(read(&cwd, "a.txt").as_deref(), Some("early\n"));
    say(&mut agent, &session, "/rewind undo").await;
    assert_eq!(read(&cwd, "a.txt").as_deref(), Some("later\n"));
}

#[tokio::test]
async fn a_content_that_was_not_kept_is_refused_by_name() {
    let server = LlmServer::start(model(vec![
        Step::Call("write_file", json!({"path": "a.txt", "content": "agent\n"})),
        Step::Say("done"),
    ]))
    .await;
    let mut agent = Agent::spawn(&config(&server)).await;
    let cwd = agent.cwd();
    std::fs::write(cwd.join("a.txt"), "original\n").unwrap();
    let session = agent.start_session().await;
    say(&mut agent, &session, "write it").await;
    std::fs::remove_dir_all(agent.session_dir(&session).join("blobs")).unwrap();
    let (refused, _) = say(&mut agent, &session, "/rewind").await;
    assert!(refused.contains("was not kept"), "{refused}");
    assert!(refused.contains("- a.txt"), "{refused}");
    let (forced, _) = say(&mut agent, &session, "/rewind --force").await;
    assert!(forced.contains("Went back 1 turn"), "{forced}");
    assert_eq!(
        read(&cwd, "a.txt").as_deref(),
        Some("agent\n"),
        "left as it is"
    );
}

#[tokio::test]
async fn a_sensitive_files_earlier_content_is_never_stored() {
    let server = LlmServer::start(model(vec![
        Step::Call(
            "write_file",
            json!({"path": ".env", "content": "TOKEN=new\n"}),
        ),
        Step::Say("done"),
    ]))
    .await;
    let mut agent = Agent::spawn(&config(&server)).await;
    let cwd = agent.cwd();
    std::fs::write(cwd.join(".env"), "TOKEN=s3cr3t-value\n").unwrap();
    let session = agent.start_session().await;
    say(&mut agent, &session, "rotate it").await;
    let (refused, _) = say(&mut agent, &session, "/rewind").await;
    assert!(refused.contains("a sensitive file"), "{refused}");
    assert!(refused.contains("- .env"), "{refused}");
    // (The history itself shows the write's diff, old text included, as
    // it always has; the blobs add no copy.)
    let blobs = agent.session_dir(&session).join("blobs");
    for entry in walk(&blobs) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("s3cr3t-value"),
            "{} holds the secret",
            entry.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
