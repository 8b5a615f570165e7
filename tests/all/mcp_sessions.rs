//! MCP servers in a session, as an editor sees them: servers named in
//! `session/new` start beside the session, their tools reach the model under
//! namespaced names, calls show up like any tool call, a server that cannot
//! start is reported without breaking the session, and closing the session
//! stops its servers.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::harness::{
    Agent, LlmServer, agent_text, answer_permission, config_for, echo_mcp_server, scripted_model,
    thought_text, tool_updates,
};
use crate::support::wait::wait_until;

#[tokio::test]
async fn tools_of_a_session_server_are_offered_and_run() {
    let server = LlmServer::start(scripted_model(vec![
        ("fx__add", json!({"a": 2, "b": 3})),
        ("fx__echo", json!({"text": "hello over MCP"})),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session_with(json!([echo_mcp_server()])).await;
    let prompt = agent.start_prompt(&session, "use the server").await;
    // `add` says it is read-only: it runs at once. `echo` does not: asked.
    let asked = answer_permission(&mut agent, "allow_once").await;
    assert_eq!(asked["params"]["toolCall"]["title"], "fx: echo");
    let (seen, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    let chat = server.chat_requests();
    let offered: Vec<&str> = chat[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"fx__echo"), "{offered:?}");
    assert!(offered.contains(&"fx__odd_name_tool"), "{offered:?}");
    assert!(offered.contains(&"read_file"), "{offered:?}");
    let first = chat[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(first["content"], "5", "{first}");
    let completed: Vec<Value> = tool_updates(&seen, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "completed")
        .cloned()
        .collect();
    assert_eq!(completed.len(), 2, "{seen:?}");
    assert_eq!(completed[0]["rawOutput"]["structuredContent"]["sum"], 5);
    assert_eq!(
        completed[1]["content"][0]["content"]["text"],
        "hello over MCP"
    );
    assert!(agent_text(&seen, &session).contains("hello over MCP"));
}

#[tokio::test]
async fn a_server_that_cannot_start_is_reported_and_the_session_works() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let broken =
        json!({"name": "ghost", "command": "no-such-mcp-server-xyz", "args": [], "env": []});
    let session = agent
        .start_session_with(json!([broken, echo_mcp_server()]))
        .await;
    let (seen, response) = agent.prompt(&session, "hi").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let thoughts = thought_text(&seen, &session);
    assert!(thoughts.contains("ghost"), "{thoughts}");
    assert!(thoughts.contains("not found"), "{thoughts}");
    let offered = server.chat_requests()[0].body["tools"].to_string();
    assert!(
        offered.contains("fx__echo"),
        "the working server's tools are there"
    );
    // Reported once, not on every turn.
    let (seen, _) = agent.prompt(&session, "again").await;
    assert!(!thought_text(&seen, &session).contains("ghost"));
}

#[tokio::test]
async fn config_servers_start_with_every_session_and_stop_with_it() {
    let server = LlmServer::start(scripted_model(vec![("fx__child_pid", json!({}))])).await;
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/echo_server.py");
    let config = format!(
        "{}\n[agent]\ndefault_mode = \"auto\"\n\n[mcp_servers.fx]\ncommand = \"python3\"\nargs = [{:?}]\n",
        config_for(&server, "test-model"),
        script.display().to_string()
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session_with(json!([])).await;
    let (seen, response) = agent.prompt(&session, "which pid?").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let done = tool_updates(&seen, "tool_call_update")
        .into_iter()
        .find(|u| u["status"] == "completed")
        .cloned()
        .expect("the config server's tool ran");
    let pid: i32 = done["content"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(PathBuf::from(format!("/proc/{pid}")).exists());
    let (_, closed) = agent
        .call("session/close", json!({"sessionId": session}))
        .await;
    assert!(closed["result"].is_object(), "{closed}");
    // The server's process (and its child) are gone once the session is.
    let what = format!("MCP process {pid} to end with its session");
    wait_until(&what, || !PathBuf::from(format!("/proc/{pid}")).exists()).await;
}

#[tokio::test]
async fn server_progress_shows_as_in_progress_updates_of_the_call() {
    let server =
        LlmServer::start(scripted_model(vec![("fx__progress", json!({"steps": 3}))])).await;
    let config = format!(
        "{}\n[agent]\ndefault_mode = \"auto\"\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session_with(json!([echo_mcp_server()])).await;
    let (seen, response) = agent.prompt(&session, "report progress").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let updates = tool_updates(&seen, "tool_call_update");
    let texts: Vec<(&str, &str)> = updates
        .iter()
        .filter_map(|u| {
            Some((
                u["status"].as_str()?,
                u["content"][0]["content"]["text"].as_str()?,
            ))
        })
        .collect();
    // rmcp handles notifications concurrently, so one overtaken by a newer
    // one is dropped (progress only grows); the rest arrive in order, all
    // before the result.
    let expected = [
        "Progress 1/3: step 1",
        "Progress 2/3: step 2",
        "Progress 3/3: step 3",
    ];
    let (last, shown) = texts.split_last().unwrap();
    assert_eq!(*last, ("completed", "finished 3 steps"), "{updates:?}");
    assert!(shown.len() >= 2, "{updates:?}");
    let mut next = 0;
    for (status, text) in shown {
        assert_eq!(*status, "in_progress");
        let at = expected[next..]
            .iter()
            .position(|e| e == text)
            .unwrap_or_else(|| panic!("{text} out of order in {updates:?}"));
        next += at + 1;
    }
}

#[tokio::test]
async fn read_only_hints_of_an_untrusted_config_server_do_not_skip_the_question() {
    let server = LlmServer::start(scripted_model(vec![("fx__add", json!({"a": 1, "b": 2}))])).await;
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/echo_server.py");
    let config = format!(
        "{}\n[mcp_servers.fx]\ncommand = \"python3\"\nargs = [{:?}]\ntrust_read_only_hints = false\n",
        config_for(&server, "test-model"),
        script.display().to_string()
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session_with(json!([])).await;
    let prompt = agent.start_prompt(&session, "add").await;
    // `add` claims readOnlyHint, but this server is not trusted: asked.
    let asked = answer_permission(&mut agent, "allow_once").await;
    assert_eq!(asked["params"]["toolCall"]["title"], "fx: add");
    let (_, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
}

#[tokio::test]
async fn stdio_servers_get_the_base_environment_and_their_own_env_only() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/echo_server.py");
    let dumps = tempfile::tempdir().unwrap();
    let narrow = dumps.path().join("narrow.json");
    let wide = dumps.path().join("wide.json");
    let config = format!(
        "{}\n[mcp_servers.wide]\ncommand = \"python3\"\nargs = [{:?}, \"--dump-env\", {:?}]\ninherit_env = true\n",
        config_for(&server, "test-model"),
        script.display().to_string(),
        wide.display().to_string(),
    );
    let secret = "s3cr3t-value-for-mcp";
    // The interpreter itself: a version manager's `python3` shim adds
    // variables of its own.
    let python = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8(python.stdout).unwrap().trim().to_string();
    let mut agent = Agent::spawn_with(
        &config,
        &[],
        &[("MY_SERVICE_API_KEY", secret), ("PATH", env!("PATH"))],
    )
    .await;
    let editor_server = json!({
        "name": "fx",
        "command": python,
        "args": [script, "--dump-env", narrow],
        "env": [{"name": "GIVEN_BY_EDITOR", "value": "yes"}],
    });
    let session = agent.start_session_with(json!([editor_server])).await;
    // The first prompt waits for the servers to start.
    let (_, response) = agent.prompt(&session, "hi").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    let read = |path: &std::path::Path| -> serde_json::Map<String, Value> {
        let text = std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{path:?}: {err}"));
        serde_json::from_str(&text).unwrap()
    };
    let narrow = read(&narrow);
    assert_eq!(narrow["GIVEN_BY_EDITOR"], "yes");
    assert!(narrow.contains_key("PATH"), "{narrow:?}");
    assert!(!narrow.contains_key("MY_SERVICE_API_KEY"), "{narrow:?}");
    assert!(!narrow.contains_key("RUST_LOG"), "{narrow:?}");
    // Python sets LC_CTYPE itself when it coerces a C locale.
    let allowed = [
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "LANG",
        "TMPDIR",
        "GIVEN_BY_EDITOR",
        "LC_CTYPE",
    ];
    for name in narrow.keys() {
        assert!(
            allowed.contains(&name.as_str()),
            "{name} leaked: {narrow:?}"
        );
    }
    // inherit_env = true restores the agent's whole environment.
    let wide = read(&wide);
    assert_eq!(wide["MY_SERVICE_API_KEY"], secret);
    assert!(wide.contains_key("RUST_LOG"), "{wide:?}");
}

#[tokio::test]
async fn a_server_that_stops_mid_call_is_told_to_the_user_and_restarted_for_the_next() {
    let server = LlmServer::start(scripted_model(vec![
        ("fx__crash", json!({})),
        ("fx__add", json!({"a": 1, "b": 1})),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session_with(json!([echo_mcp_server()])).await;
    let prompt = agent.start_prompt(&session, "crash it").await;
    answer_permission(&mut agent, "allow_once").await;
    let (seen, response) = agent.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // The user hears of it (a thought, for a client that takes no notices)…
    let thoughts = thought_text(&seen, &session);
    assert!(
        thoughts.contains("MCP server `fx` stopped during the call")
            && thoughts.contains("restarted on the next call"),
        "{thoughts}"
    );
    // …and the next call of the same turn got a fresh server.
    let completed: Vec<&Value> = tool_updates(&seen, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "completed")
        .collect();
    assert_eq!(completed.len(), 1, "{seen:?}");
    assert_eq!(completed[0]["rawOutput"]["structuredContent"]["sum"], 2);
}
