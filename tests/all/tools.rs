//! Tools as an editor sees them: the model asks, the agent announces the
//! call, runs it (asking the user first when it writes or executes), shows
//! the result, and the model's next request carries it.

use serde_json::{Value, json};

use crate::support::client::{initialize_with_terminal, respond_until, result_for};
use crate::support::harness::{
    Agent, LlmServer, Recorded, Reply, Split, agent_text, answer_permission, config_for,
    models_reply, openai_stream, scripted_model, tool_updates,
};

#[tokio::test]
async fn a_read_is_announced_run_and_its_result_reaches_the_model() {
    let server = LlmServer::start(scripted_model(vec![(
        "read_file",
        json!({"path": "hello.txt"}),
    )]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    std::fs::write(agent.cwd().join("hello.txt"), "greetings from disk\n").unwrap();
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "What does hello.txt say?").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    let calls = tool_updates(&seen, "tool_call");
    assert_eq!(calls.len(), 1, "{seen:?}");
    let call = calls[0];
    assert_eq!(call["title"], "Read hello.txt");
    assert_eq!(call["kind"], "read");
    // `pending` is the default status, which the schema leaves out.
    assert!(
        call["status"].is_null() || call["status"] == "pending",
        "{call}"
    );
    assert_eq!(call["rawInput"]["path"], "hello.txt");
    let expected_path = agent.cwd().join("hello.txt");
    assert_eq!(
        call["locations"][0]["path"].as_str().unwrap(),
        expected_path.to_str().unwrap()
    );
    let updates = tool_updates(&seen, "tool_call_update");
    let statuses: Vec<&str> = updates
        .iter()
        .filter(|u| u["toolCallId"] == call["toolCallId"])
        .map(|u| u["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["in_progress", "completed"]);
    let done = updates.last().unwrap();
    assert!(
        done["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("greetings from disk"),
        "{done}"
    );
    // No permission was asked for a read.
    assert!(
        !seen
            .iter()
            .any(|m| m["method"] == "session/request_permission")
    );
    // The result went back to the model, which then answered.
    let chat = server.chat_requests();
    assert_eq!(chat.len(), 2);
    let last = chat[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_0");
    assert!(agent_text(&seen, &session).contains("greetings from disk"));
}

#[tokio::test]
async fn writes_ask_first_and_always_allowed_is_not_asked_again() {
    let server = LlmServer::start(scripted_model(vec![
        ("write_file", json!({"path": "a.txt", "content": "one\n"})),
        (
            "edit_file",
            json!({"path": "a.txt", "old_text": "one", "new_text": "two"}),
        ),
        ("write_file", json!({"path": "b.txt", "content": "three\n"})),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let prompt = agent.start_prompt(&session, "Write then edit a.txt").await;
    let asked = answer_permission(&mut agent, "allow_always").await;
    let params = &asked["params"];
    assert_eq!(params["sessionId"], session.as_str());
    assert_eq!(params["toolCall"]["title"], "Write a.txt");
    assert_eq!(params["toolCall"]["kind"], "edit");
    let options: Vec<&str> = params["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    // "Always" for this session, this project or everywhere.
    assert_eq!(
        options,
        [
            "allow_once",
            "allow_always",
            "allow_always",
            "allow_always",
            "reject_once",
            "reject_always"
        ]
    );
    // Another tool is another question.
    let edit = answer_permission(&mut agent, "allow_once").await;
    assert_eq!(edit["params"]["toolCall"]["title"], "Edit a.txt");
    let (seen, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // The second write_file was not asked about: "always" held.
    let asked_again = seen
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .count();
    assert_eq!(asked_again, 0, "{seen:?}");
    assert_eq!(
        std::fs::read_to_string(agent.cwd().join("a.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(
        std::fs::read_to_string(agent.cwd().join("b.txt")).unwrap(),
        "three\n"
    );
    let diffs: Vec<&Value> = tool_updates(&seen, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "completed")
        .map(|u| &u["content"][0])
        .collect();
    assert_eq!(diffs.len(), 3);
    assert!(diffs.iter().all(|d| d["type"] == "diff"), "{diffs:?}");
    assert!(diffs[0]["oldText"].is_null(), "a new file has no old text");
    assert_eq!(diffs[1]["oldText"], "one\n");
    assert_eq!(diffs[1]["newText"], "two\n");
    assert_eq!(diffs[2]["newText"], "three\n");
}

#[tokio::test]
async fn a_rejected_command_does_not_run_and_the_model_hears_why() {
    let server = LlmServer::start(scripted_model(vec![(
        "shell",
        json!({"command": "touch ran.txt"}),
    )]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let prompt = agent.start_prompt(&session, "Run it").await;
    let asked = answer_permission(&mut agent, "reject_once").await;
    assert_eq!(asked["params"]["toolCall"]["kind"], "execute");
    let (seen, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!agent.cwd().join("ran.txt").exists());
    let failed = tool_updates(&seen, "tool_call_update")
        .into_iter()
        .find(|u| u["status"] == "failed")
        .expect("a failed update");
    assert!(
        failed["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("declined")
    );
    let chat = server.chat_requests();
    let last = chat[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last["content"].as_str().unwrap().contains("declined"),
        "{last}"
    );
}

#[tokio::test]
async fn cancel_while_a_permission_question_waits_ends_the_turn_cancelled() {
    let server = LlmServer::start(scripted_model(vec![(
        "shell",
        json!({"command": "touch ran.txt"}),
    )]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let prompt = agent.start_prompt(&session, "Run it").await;
    agent
        .wait_for(|m| m["method"] == "session/request_permission")
        .await;
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (_, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert!(!agent.cwd().join("ran.txt").exists());
    // The session still works afterwards (the model's next answer is text).
    let (_, again) = agent.prompt(&session, "never mind").await;
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again}");
}

#[tokio::test]
async fn a_model_that_never_stops_calling_tools_ends_at_max_turn_requests() {
    // Each call different: identical ones would meet the loop guard first.
    let calls = (0..10)
        .map(|i| ("list_dir", json!({ "path": format!("dir{i}") })))
        .collect();
    let server = LlmServer::start(scripted_model(calls)).await;
    let config = format!(
        "{}\n[agent]\nmax_turn_requests = 3\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (_, response) = agent.prompt(&session, "loop").await;
    assert_eq!(response["result"]["stopReason"], "max_turn_requests");
    assert_eq!(server.chat_requests().len(), 3);
}

#[tokio::test]
async fn the_todo_tool_becomes_a_plan() {
    let server = LlmServer::start(scripted_model(vec![(
        "todo",
        json!({"todos": [
            {"content": "Read the code", "status": "completed"},
            {"content": "Fix the bug", "status": "in_progress", "priority": "high"},
        ]}),
    )]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let (seen, _) = agent.prompt(&session, "plan it").await;
    let plans = tool_updates(&seen, "plan");
    assert_eq!(plans.len(), 1, "{seen:?}");
    let entries = plans[0]["entries"].as_array().unwrap();
    assert_eq!(entries[0]["content"], "Read the code");
    assert_eq!(entries[0]["status"], "completed");
    assert_eq!(entries[1]["priority"], "high");
    assert_eq!(entries[1]["status"], "in_progress");
}

#[tokio::test]
async fn cancel_while_a_command_runs_kills_it_and_answers_cancelled() {
    let server = LlmServer::start(scripted_model(vec![(
        "shell",
        json!({"command": "sleep 31.25 && touch finished.txt"}),
    )]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    let prompt = agent.start_prompt(&session, "Run the slow thing").await;
    answer_permission(&mut agent, "allow_once").await;
    agent
        .wait_for(|m| m["params"]["update"]["status"] == "in_progress")
        .await;
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (seen, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    let failed = tool_updates(&seen, "tool_call_update")
        .into_iter()
        .find(|u| u["status"] == "failed")
        .expect("the call is marked failed");
    assert!(
        failed["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("cancelled")
    );
    // The command was killed, not left running.
    let running = std::process::Command::new("pgrep")
        .args(["-f", "sleep 31.25"])
        .output()
        .unwrap();
    assert!(
        running.stdout.is_empty(),
        "still running: {}",
        String::from_utf8_lossy(&running.stdout)
    );
}

#[tokio::test]
async fn sessions_offer_modes_and_plan_mode_neither_offers_nor_runs_changes() {
    let server = LlmServer::start(scripted_model(vec![(
        "write_file",
        json!({"path": "plan.txt", "content": "x"}),
    )]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    agent.initialize().await;
    let (_, created) = agent
        .call("session/new", json!({"cwd": agent.cwd(), "mcpServers": []}))
        .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    let modes = &created["result"]["modes"];
    assert_eq!(modes["currentModeId"], "act");
    let ids: Vec<&str> = modes["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["plan", "act", "auto"]);
    let options = created["result"]["configOptions"].as_array().unwrap();
    let mode = options.iter().find(|o| o["id"] == "mode").unwrap();
    assert_eq!(mode["category"], "mode");
    assert_eq!(mode["currentValue"], "act");

    let (seen, answer) = agent
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "plan"}),
        )
        .await;
    assert!(answer["result"].is_object(), "{answer}");
    let is_plan = |m: &Value| m["params"]["update"]["currentModeId"] == "plan";
    if !seen.iter().any(is_plan) {
        agent.wait_for(is_plan).await;
    }

    let (seen, response) = agent.prompt(&session, "write plan.txt").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!agent.cwd().join("plan.txt").exists());
    assert!(
        !seen
            .iter()
            .any(|m| m["method"] == "session/request_permission")
    );
    let chat = server.chat_requests();
    let offered: Vec<&str> = chat[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"read_file"), "{offered:?}");
    assert!(!offered.contains(&"write_file"), "{offered:?}");
    assert!(!offered.contains(&"shell"), "{offered:?}");
    let result = chat[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("no tool named `write_file`"),
        "{result}"
    );

    let (_, bad) = agent
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "yolo"}),
        )
        .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}

#[tokio::test]
async fn auto_mode_asks_nothing_but_keeps_rejections() {
    let server = LlmServer::start(scripted_model(vec![
        ("shell", json!({"command": "touch first.txt"})),
        ("shell", json!({"command": "touch second.txt"})),
        ("write_file", json!({"path": "auto.txt", "content": "ok"})),
    ]))
    .await;
    let config = format!(
        "{}\n[agent]\ndefault_mode = \"act\"\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let prompt = agent.start_prompt(&session, "go").await;
    answer_permission(&mut agent, "reject_always").await;
    agent
        .wait_for(|m| m["params"]["update"]["status"] == "failed")
        .await;
    // Switch to auto while the turn goes on: the next calls ask nothing.
    agent
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "mode", "value": "auto"}),
        )
        .await;
    let (seen, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        !seen
            .iter()
            .any(|m| m["method"] == "session/request_permission")
    );
    assert!(!agent.cwd().join("first.txt").exists());
    assert!(!agent.cwd().join("second.txt").exists(), "rejected always");
    assert_eq!(
        std::fs::read_to_string(agent.cwd().join("auto.txt")).unwrap(),
        "ok"
    );
}

#[tokio::test]
async fn the_default_mode_comes_from_the_config() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let config = format!(
        "{}\n[agent]\ndefault_mode = \"plan\"\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    agent.initialize().await;
    let (_, created) = agent
        .call("session/new", json!({"cwd": agent.cwd(), "mcpServers": []}))
        .await;
    assert_eq!(created["result"]["modes"]["currentModeId"], "plan");
}

#[tokio::test]
async fn files_go_through_the_editor_when_it_offers_them() {
    let server = LlmServer::start(scripted_model(vec![
        ("read_file", json!({"path": "buffer.txt"})),
        (
            "write_file",
            json!({"path": "buffer.txt", "content": "rewritten\n"}),
        ),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    std::fs::write(agent.cwd().join("buffer.txt"), "saved on disk\n").unwrap();
    agent
        .call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": false}}),
        )
        .await;
    let (_, created) = agent
        .call("session/new", json!({"cwd": agent.cwd(), "mcpServers": []}))
        .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    let prompt = agent.start_prompt(&session, "rewrite buffer.txt").await;

    let read = agent.wait_for(|m| m["method"] == "fs/read_text_file").await;
    assert_eq!(read["params"]["sessionId"], session.as_str());
    let path = agent.cwd().join("buffer.txt");
    assert_eq!(
        read["params"]["path"].as_str().unwrap(),
        path.to_str().unwrap()
    );
    agent
        .send(&json!({"jsonrpc": "2.0", "id": read["id"], "result": {"content": "unsaved edit in the editor\n"}}))
        .await;
    answer_permission(&mut agent, "allow_once").await;
    // write_file first reads the old text (for the diff), then writes.
    let old = agent.wait_for(|m| m["method"] == "fs/read_text_file").await;
    agent
        .send(&json!({"jsonrpc": "2.0", "id": old["id"], "result": {"content": "unsaved edit in the editor\n"}}))
        .await;
    let write = agent
        .wait_for(|m| m["method"] == "fs/write_text_file")
        .await;
    assert_eq!(write["params"]["content"], "rewritten\n");
    agent
        .send(&json!({"jsonrpc": "2.0", "id": write["id"], "result": null}))
        .await;
    let (seen, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // The editor did the writing; the disk copy is the editor's business.
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "saved on disk\n");
    let chat = server.chat_requests();
    let first_result = chat[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        first_result["content"]
            .as_str()
            .unwrap()
            .contains("unsaved edit in the editor")
    );
    let diff = tool_updates(&seen, "tool_call_update")
        .into_iter()
        .find(|u| u["content"][0]["type"] == "diff")
        .expect("a diff");
    assert_eq!(
        diff["content"][0]["oldText"],
        "unsaved edit in the editor\n"
    );
}

#[tokio::test]
async fn config_rules_allow_and_deny_without_asking() {
    let server = LlmServer::start(scripted_model(vec![
        ("shell", json!({"command": "echo allowed > ok.txt"})),
        ("shell", json!({"command": "touch denied.txt"})),
    ]))
    .await;
    let config = format!(
        "{}\n[[permissions.rules]]\ntool = \"shell\"\ncommand_prefix = \"echo \"\ndecision = \"allow\"\n\n[[permissions.rules]]\ntool = \"shell\"\ncommand_prefix = \"touch \"\ndecision = \"deny\"\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "go").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        !seen
            .iter()
            .any(|m| m["method"] == "session/request_permission")
    );
    assert!(agent.cwd().join("ok.txt").exists());
    assert!(!agent.cwd().join("denied.txt").exists());
    let chat = server.chat_requests();
    let last = chat[2].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last["content"].as_str().unwrap().contains("forbids"),
        "{last}"
    );
}

/// A config in auto mode, so commands run without a permission question.
fn auto_config(server: &LlmServer) -> String {
    format!(
        "{}\n[agent]\ndefault_mode = \"auto\"\n",
        config_for(server, "test-model")
    )
}

/// Auto mode without the sandbox: only then do commands run in the
/// editor's terminal (which cannot be confined).
fn terminal_config(server: &LlmServer) -> String {
    format!("{}\n[sandbox]\nmode = \"off\"\n", auto_config(server))
}

#[tokio::test]
async fn shell_runs_in_the_editors_terminal_when_it_offers_one() {
    let server = LlmServer::start(scripted_model(vec![(
        "shell",
        json!({"command": "cargo test"}),
    )]))
    .await;
    let mut agent = Agent::spawn(&terminal_config(&server)).await;
    let session = initialize_with_terminal(&mut agent).await;
    let prompt = agent.start_prompt(&session, "run the tests").await;
    let mut methods = Vec::new();
    let (seen, response) = respond_until(&mut agent, prompt, |message| {
        let Some(method) = message["method"].as_str() else {
            return Vec::new();
        };
        if method.starts_with("terminal/") {
            methods.push(method.to_string());
        }
        let result = match method {
            "terminal/create" => json!({"terminalId": "term-7"}),
            "terminal/wait_for_exit" => json!({"exitCode": 1}),
            "terminal/output" => {
                json!({"output": "test result: FAILED. 1 passed; 1 failed\n", "truncated": false})
            }
            "terminal/release" => json!({}),
            _ => return Vec::new(),
        };
        vec![result_for(message, result)]
    })
    .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        methods,
        [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release"
        ]
    );
    let create = seen
        .iter()
        .find(|m| m["method"] == "terminal/create")
        .unwrap();
    assert_eq!(create["params"]["sessionId"], session.as_str());
    assert_eq!(create["params"]["command"], "sh");
    assert_eq!(create["params"]["args"], json!(["-c", "cargo test"]));
    assert_eq!(
        create["params"]["cwd"].as_str().unwrap(),
        agent.cwd().to_str().unwrap()
    );
    assert!(create["params"]["outputByteLimit"].as_u64().unwrap() > 0);
    // The editor is told to show the terminal while the command runs.
    let live = tool_updates(&seen, "tool_call_update")
        .into_iter()
        .find(|u| u["status"] == "in_progress" && u["content"][0]["type"] == "terminal")
        .expect("an in_progress update embedding the terminal");
    assert_eq!(live["content"][0]["terminalId"], "term-7");
    // No process ran here: the editor ran it.
    let chat = server.chat_requests();
    let result = chat[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let text = result["content"].as_str().unwrap();
    assert!(text.starts_with("Exit code: 1\n"), "{text}");
    assert!(text.contains("1 passed; 1 failed"), "{text}");
}

#[tokio::test]
async fn cancel_during_a_terminal_command_kills_and_releases_it() {
    let server = LlmServer::start(scripted_model(vec![(
        "shell",
        json!({"command": "sleep 600"}),
    )]))
    .await;
    let mut agent = Agent::spawn(&terminal_config(&server)).await;
    let session = initialize_with_terminal(&mut agent).await;
    let prompt = agent.start_prompt(&session, "wait a while").await;
    let mut methods = Vec::new();
    let (_, response) = respond_until(&mut agent, prompt, |message| {
        let Some(method) = message["method"].as_str() else {
            return Vec::new();
        };
        if method.starts_with("terminal/") {
            methods.push(method.to_string());
        }
        match method {
            "terminal/create" => vec![result_for(message, json!({"terminalId": "term-9"}))],
            // The command never ends by itself: the user cancels.
            "terminal/wait_for_exit" => vec![json!({"jsonrpc": "2.0", "method": "session/cancel",
                "params": {"sessionId": message["params"]["sessionId"]}})],
            "terminal/kill" | "terminal/release" => vec![result_for(message, json!({}))],
            _ => Vec::new(),
        }
    })
    .await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert_eq!(
        methods,
        [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/release"
        ]
    );
}

#[tokio::test]
async fn a_config_mode_is_offered_and_its_policy_applies() {
    let server = LlmServer::start(scripted_model(vec![(
        "shell",
        json!({"command": "touch made.txt"}),
    )]))
    .await;
    let config = format!(
        "{}\n[modes.hands-off]\nname = \"Hands off\"\ndescription = \"Runs everything without asking\"\npolicy = \"auto\"\n\n[modes.review]\nname = \"Review\"\npolicy = \"read_only\"\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    agent.initialize().await;
    let (_, created) = agent
        .call("session/new", json!({"cwd": agent.cwd(), "mcpServers": []}))
        .await;
    let result = &created["result"];
    let session = result["sessionId"].as_str().unwrap().to_string();
    assert_eq!(result["modes"]["currentModeId"], "act");
    let ids: Vec<&str> = result["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["plan", "act", "auto", "hands-off", "review"]);
    let hands_off = &result["modes"]["availableModes"][3];
    assert_eq!(hands_off["name"], "Hands off");
    assert_eq!(hands_off["description"], "Runs everything without asking");
    let option = result["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "mode")
        .unwrap();
    assert!(
        option["options"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["value"] == "review"),
        "{option}"
    );

    // The auto policy of the config mode: the command runs without a question.
    let (_, switched) = agent
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "hands-off"}),
        )
        .await;
    assert!(switched.get("error").is_none(), "{switched}");
    let (seen, response) = agent.prompt(&session, "make a file").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        !seen
            .iter()
            .any(|m| m["method"] == "session/request_permission")
    );
    assert!(agent.cwd().join("made.txt").exists());

    // The read-only policy: commands are not even offered.
    agent
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "review"}),
        )
        .await;
    agent.prompt(&session, "anything").await;
    let chat = server.chat_requests();
    let offered: Vec<&str> = chat.last().unwrap().body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(!offered.contains(&"shell"), "{offered:?}");
    assert!(offered.contains(&"read_file"), "{offered:?}");
}

#[tokio::test]
async fn rules_are_checked_by_scope_then_priority() {
    let server = LlmServer::start(scripted_model(vec![
        ("shell", json!({"command": "echo a > allowed.txt"})),
        ("shell", json!({"command": "touch denied.txt"})),
        ("shell", json!({"command": "touch keep.txt"})),
    ]))
    .await;
    // Written first but lower priority: the deny below wins for `touch`;
    // the user's own rule comes before both.
    let rules = r#"
[[permissions.rules]]
tool = "shell"
decision = "allow"

[[permissions.rules]]
tool = "shell"
command_prefix = ["rm ", "touch "]
priority = 10
decision = "deny"

[[permissions.rules]]
scope = "user"
command_prefix = "touch keep"
decision = "allow"
"#;
    let config = format!("{}\n{rules}", config_for(&server, "test-model"));
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "go").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        !seen
            .iter()
            .any(|m| m["method"] == "session/request_permission")
    );
    assert!(agent.cwd().join("allowed.txt").exists());
    assert!(!agent.cwd().join("denied.txt").exists());
    assert!(agent.cwd().join("keep.txt").exists());
}

#[tokio::test]
async fn an_always_reject_answer_outranks_a_config_allow() {
    let server = LlmServer::start(scripted_model(vec![
        ("write_file", json!({"path": "a.txt", "content": "a"})),
        ("write_file", json!({"path": "b.txt", "content": "b"})),
    ]))
    .await;
    // Asks for a.txt only; the answer then covers every later write.
    let config = format!(
        "{}\n[[permissions.rules]]\ntool = \"write_file\"\npattern = \"b\\\\.txt\"\ndecision = \"allow\"\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let prompt = agent.start_prompt(&session, "write both").await;
    answer_permission(&mut agent, "reject_always").await;
    let (seen, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        !seen
            .iter()
            .any(|m| m["method"] == "session/request_permission"),
        "asked only once"
    );
    assert!(!agent.cwd().join("a.txt").exists());
    assert!(!agent.cwd().join("b.txt").exists());
}

#[tokio::test]
async fn agent_scoped_rules_apply_only_while_that_agent_card_runs() {
    // Each prompt asks for one command (its own words after "touch"), then answers.
    let server = LlmServer::start(|request: &Recorded| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model"]);
        }
        let last = request.body["messages"].as_array().unwrap().last().unwrap();
        let reply = if last["role"] == "user" {
            let command = last["content"].as_str().unwrap_or("").to_string();
            openai_stream(
                &[json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "shell", "arguments": json!({"command": command}).to_string()}}]})],
                "tool_calls",
                (50, 10),
            )
        } else {
            openai_stream(&[json!({"content": "done"})], "stop", (60, 5))
        };
        Reply::stream(reply, Split::Whole)
    })
    .await;
    let config = format!(
        "{}\n[[permissions.rules]]\nscope = \"agent\"\nagent = \"coder\"\ntool = \"shell\"\ndecision = \"allow\"\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn_with(&config, &["--agent", "coder"], &[]).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "touch coder.txt").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        !seen
            .iter()
            .any(|m| m["method"] == "session/request_permission"),
        "the coder card's rule allows the command"
    );
    assert!(agent.cwd().join("coder.txt").exists());

    // Without the card the rule no longer applies: the command asks.
    agent.prompt(&session, "/agent none").await;
    let prompt = agent.start_prompt(&session, "touch plain.txt").await;
    answer_permission(&mut agent, "reject_once").await;
    let (_, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!agent.cwd().join("plain.txt").exists());
}

/// Secret-looking variables in the agent's environment.
const SECRETS: [(&str, &str); 4] = [
    ("OPENAI_API_KEY", "sk-test-value-1"),
    ("MY_SERVICE_API_KEY", "svc-test-value-2"),
    ("GITHUB_TOKEN", "ghp-test-value-3"),
    ("DB_PASSWORD", "pw-test-value-4"),
];

/// What the model read back from its one tool call.
fn first_tool_result(server: &LlmServer) -> String {
    let chat = server.chat_requests();
    let last = chat[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    last["content"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn commands_get_no_secret_named_variables_and_do_get_set_ones() {
    let server = LlmServer::start(scripted_model(vec![("shell", json!({"command": "env"}))])).await;
    let config = format!(
        "{}\n[shell_environment]\nset = {{ CRUCIBLE_TEST_SET = \"from-config\" }}\n",
        auto_config(&server)
    );
    let mut env: Vec<(&str, &str)> = SECRETS.to_vec();
    env.push(("PATH", env!("PATH")));
    let mut agent = Agent::spawn_with(&config, &[], &env).await;
    let session = agent.new_session().await;
    let (_, response) = agent.prompt(&session, "show the environment").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let text = first_tool_result(&server);
    assert!(text.starts_with("Exit code: 0\n"), "{text}");
    assert!(text.contains("\nPATH="), "{text}");
    assert!(text.contains("\nHOME="), "{text}");
    assert!(text.contains("CRUCIBLE_TEST_SET=from-config"), "{text}");
    for (name, value) in SECRETS {
        assert!(!text.contains(name), "{name} reached the model: {text}");
        assert!(!text.contains(value), "{name} reached the model: {text}");
    }
}

#[tokio::test]
async fn include_only_keeps_just_the_named_variables() {
    let server = LlmServer::start(scripted_model(vec![("shell", json!({"command": "env"}))])).await;
    let config = format!(
        "{}\n[shell_environment]\ninclude_only = [\"PATH\", \"shown_*\"]\n",
        auto_config(&server)
    );
    let env = [
        ("SHOWN_A", "visible"),
        ("HIDDEN_B", "invisible"),
        ("PATH", env!("PATH")),
    ];
    let mut agent = Agent::spawn_with(&config, &[], &env).await;
    let session = agent.new_session().await;
    let (_, response) = agent.prompt(&session, "show the environment").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let text = first_tool_result(&server);
    assert!(text.contains("SHOWN_A=visible"), "{text}");
    assert!(text.contains("PATH="), "{text}");
    assert!(!text.contains("HIDDEN_B"), "{text}");
    assert!(!text.contains("HOME="), "{text}");
}

#[tokio::test]
async fn the_editors_terminal_is_given_the_filtered_environment() {
    let server = LlmServer::start(scripted_model(vec![("shell", json!({"command": "env"}))])).await;
    let config = format!(
        "{}\n[shell_environment]\nset = {{ CRUCIBLE_TEST_SET = \"from-config\" }}\n",
        terminal_config(&server)
    );
    let mut agent = Agent::spawn_with(&config, &[], &SECRETS).await;
    let session = initialize_with_terminal(&mut agent).await;
    let prompt = agent.start_prompt(&session, "show the environment").await;
    let (seen, response) = respond_until(&mut agent, prompt, |message| {
        let result = match message["method"].as_str() {
            Some("terminal/create") => json!({"terminalId": "term-env"}),
            Some("terminal/wait_for_exit") => json!({"exitCode": 0}),
            Some("terminal/output") => json!({"output": "", "truncated": false}),
            Some("terminal/release") => json!({}),
            _ => return Vec::new(),
        };
        vec![result_for(message, result)]
    })
    .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let create = seen
        .iter()
        .find(|m| m["method"] == "terminal/create")
        .unwrap();
    let env: Vec<(String, String)> = create["params"]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|var| {
            (
                var["name"].as_str().unwrap().to_string(),
                var["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let has = |name: &str| env.iter().any(|(n, _)| n == name);
    assert!(has("PATH") && has("HOME"), "{env:?}");
    assert!(env.contains(&("CRUCIBLE_TEST_SET".into(), "from-config".into())));
    for (name, value) in SECRETS {
        assert!(!has(name), "{name}: {env:?}");
        assert!(!env.iter().any(|(_, v)| v == value), "{name}: {env:?}");
    }
}

#[tokio::test]
async fn a_secret_printed_by_a_command_arrives_redacted() {
    let server = LlmServer::start(scripted_model(vec![(
        "shell",
        json!({"command": "echo \"found: $(cat leak.txt)\""}),
    )]))
    .await;
    let mut agent = Agent::spawn_with(&auto_config(&server), &[], &SECRETS).await;
    let (name, value) = SECRETS[1];
    std::fs::write(agent.cwd().join("leak.txt"), value).unwrap();
    let session = agent.new_session().await;
    let (seen, response) = agent.prompt(&session, "read the file").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let text = first_tool_result(&server);
    assert!(text.contains("found: [redacted]"), "{text}");
    assert!(!text.contains(value), "{name}: {text}");
    // Nor does the editor (or the store, which records what it is shown).
    let shown = serde_json::to_string(&seen).unwrap();
    assert!(!shown.contains(value), "{name}: {shown}");
    assert!(shown.contains("found: [redacted]"), "{shown}");
    let dir = agent.session_dir(&session);
    let mut stored = String::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            stored.push_str(&String::from_utf8_lossy(&std::fs::read(path).unwrap()));
        }
    }
    assert!(stored.contains("found: [redacted]"), "{dir:?}: {stored}");
    assert!(!stored.contains(value), "{name}: {stored}");
}

#[tokio::test]
async fn reading_a_dotenv_file_asks_in_act_mode_and_says_why() {
    let server = LlmServer::start(scripted_model(vec![
        ("read_file", json!({"path": "notes.txt"})),
        ("read_file", json!({"path": ".env"})),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    std::fs::write(agent.cwd().join(".env"), "LOCAL_VALUE=1\n").unwrap();
    std::fs::write(agent.cwd().join("notes.txt"), "plain\n").unwrap();
    let session = agent.new_session().await;
    let prompt = agent.start_prompt(&session, "read them").await;
    // The plain read runs at once; only the .env read asks.
    let asked = answer_permission(&mut agent, "allow_once").await;
    let title = asked["params"]["toolCall"]["title"].as_str().unwrap();
    assert!(title.contains(".env"), "{title}");
    assert!(title.contains("may hold secrets"), "{title}");
    let (_, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let chat = server.chat_requests();
    assert!(chat[2].body.to_string().contains("LOCAL_VALUE=1"));
}

#[tokio::test]
async fn grep_and_glob_skip_secret_files_unless_named() {
    let server = LlmServer::start(scripted_model(vec![
        ("grep", json!({"pattern": "MARKER"})),
        ("glob", json!({"pattern": "*"})),
        ("grep", json!({"pattern": "MARKER", "glob": ".env"})),
    ]))
    .await;
    let config = format!(
        "{}\n[sensitive_files]\nadd = [\"*.secret\"]\n",
        auto_config(&server)
    );
    let mut agent = Agent::spawn(&config).await;
    std::fs::write(agent.cwd().join(".env"), "MARKER=in-dotenv\n").unwrap();
    std::fs::write(agent.cwd().join("x.secret"), "MARKER in added\n").unwrap();
    std::fs::write(agent.cwd().join("notes.txt"), "MARKER in notes\n").unwrap();
    let session = agent.new_session().await;
    let (_, response) = agent.prompt(&session, "search").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let chat = server.chat_requests();
    let result = |index: usize| {
        chat[index].body["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let grep = result(1);
    assert!(grep.contains("notes.txt"), "{grep}");
    assert!(!grep.contains("in-dotenv"), "{grep}");
    assert!(!grep.contains("in added"), "{grep}");
    let glob = result(2);
    assert!(glob.contains("notes.txt"), "{glob}");
    assert!(!glob.contains(".env"), "{glob}");
    assert!(!glob.contains("x.secret"), "{glob}");
    let named = result(3);
    assert!(named.contains("in-dotenv"), "{named}");
}
