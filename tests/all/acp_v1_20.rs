//! What ACP 1.20 made stable, and its new unstable parts this agent
//! serves: the client system prompt for every client, a terminal sign-in
//! method (for clients that run one) and `authenticate` with it, `auth/status` behind `[acp] unstable`,
//! and the todo list as a plan by id (`plan_update`, `plan_removed`) for
//! clients that declare `plan`, the old `plan` for the rest.

use serde_json::{Value, json};

use crate::support::harness::{
    Agent, LlmServer, config_for, error_message, scripted_model, tool_updates,
};

/// A hosted provider (Anthropic's API) as the only one: it needs a key.
const HOSTED: &str = "[chat]\ndefault_provider = \"claude\"\n\n[llm.providers.claude]\ntype = \"anthropic\"\ndefault_model = \"claude-test\"\n";

async fn init(agent: &mut Agent, capabilities: Value) -> Value {
    let (_, response) = agent
        .call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities,
                "clientInfo": {"name": "acp-1.20", "version": "0"}}),
        )
        .await;
    assert!(response["result"].is_object(), "{response}");
    response["result"].clone()
}

#[tokio::test]
async fn every_client_gets_the_system_prompt_and_a_terminal_sign_in() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    // The old opt-in still reads (it is a no-op now).
    let config = format!(
        "{}\n[acp]\nunstable = [\"system_prompt\"]\n",
        config_for(&server, "test-model")
    );
    for config in [config_for(&server, "test-model"), config] {
        let mut agent = Agent::spawn(&config).await;
        let result = init(&mut agent, json!({"auth": {"terminal": true}})).await;
        let caps = &result["agentCapabilities"]["sessionCapabilities"];
        assert!(
            caps["systemPrompt"]["mode"]["override"].is_object(),
            "{caps}"
        );
        assert_eq!(
            result["authMethods"],
            json!([{"type": "terminal", "id": "setup", "name": "Set up in a terminal",
                "description": result["authMethods"][0]["description"], "args": ["setup"]}]),
            "{result}"
        );
        // A local model needs no sign-in: the method leaves the agent ready.
        let (_, answer) = agent
            .call("authenticate", json!({"methodId": "setup"}))
            .await;
        assert_eq!(answer["result"], json!({}), "{answer}");
        let (_, unknown) = agent
            .call("authenticate", json!({"methodId": "oauth"}))
            .await;
        assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
        assert!(error_message(&unknown).contains("`setup`"), "{unknown}");
        let (_, created) = agent
            .call(
                "session/new",
                json!({"cwd": agent.cwd(), "mcpServers": [],
                    "systemPrompt": {"mode": "append", "content": [{"type": "text", "text": "Answer in haiku."}]}}),
            )
            .await;
        assert!(created["result"]["sessionId"].is_string(), "{created}");
    }
}

#[tokio::test]
async fn a_client_that_runs_no_terminal_is_offered_no_terminal_sign_in() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let result = init(&mut agent, json!({"auth": {"terminal": false}})).await;
    assert_eq!(result["authMethods"], json!([]), "{result}");
    // A client on a schema without `auth` (Crucible's 0.11, tests/all/crucible_client.rs) neither.
    let result = init(&mut agent, json!({})).await;
    assert_eq!(result["authMethods"], json!([]), "{result}");
}

/// The ACP registry's validator (and clients before 1.20) say they run
/// terminal sign-ins with the `_meta` flag `terminal-auth`, not `auth`.
#[tokio::test]
async fn the_registry_validators_initialize_is_offered_the_terminal_sign_in() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let result = init(
        &mut agent,
        json!({"terminal": true, "fs": {"readTextFile": true, "writeTextFile": true},
            "_meta": {"terminal_output": true, "terminal-auth": true}}),
    )
    .await;
    assert_eq!(result["authMethods"][0]["type"], "terminal", "{result}");
    assert_eq!(
        result["authMethods"][0]["args"],
        json!(["setup"]),
        "{result}"
    );
    let result = init(&mut agent, json!({"_meta": {"terminal-auth": false}})).await;
    assert_eq!(result["authMethods"], json!([]), "{result}");
}

#[tokio::test]
async fn a_hosted_provider_without_its_key_is_unauthenticated_and_says_which() {
    let config = format!("{HOSTED}\n[acp]\nunstable = [\"auth_status\"]\n");
    let mut agent = Agent::spawn(&config).await;
    let result = init(&mut agent, json!({})).await;
    assert!(
        result["agentCapabilities"]["auth"]["status"].is_object(),
        "{result}"
    );
    let (_, status) = agent.call("auth/status", json!({})).await;
    assert_eq!(status["result"]["state"], "unauthenticated", "{status}");
    let accounts = &status["result"]["accounts"];
    assert_eq!(accounts[0]["label"], "claude", "{status}");
    let description = accounts[0]["description"].as_str().unwrap_or_default();
    assert!(description.contains("ANTHROPIC_API_KEY"), "{status}");
    let (_, answer) = agent
        .call("authenticate", json!({"methodId": "setup"}))
        .await;
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    let message = error_message(&answer);
    assert!(
        message.contains("claude") && message.contains("crucible-agent setup"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_hosted_provider_with_its_key_is_authenticated_and_a_local_one_needs_none() {
    let config = format!("{HOSTED}\n[acp]\nunstable = [\"auth_status\"]\n");
    let mut agent = Agent::spawn_with(&config, &[], &[("ANTHROPIC_API_KEY", "sk-ant-test")]).await;
    init(&mut agent, json!({})).await;
    let (_, status) = agent.call("auth/status", json!({})).await;
    assert_eq!(status["result"]["state"], "authenticated", "{status}");
    let described = status.to_string();
    assert!(
        !described.contains("sk-ant-test"),
        "the key leaked: {status}"
    );
    let (_, answer) = agent
        .call("authenticate", json!({"methodId": "setup"}))
        .await;
    assert_eq!(answer["result"], json!({}), "{answer}");

    let server = LlmServer::start(scripted_model(vec![])).await;
    let config = format!(
        "{}\n[acp]\nunstable = [\"auth_status\"]\n",
        config_for(&server, "test-model")
    );
    let mut local = Agent::spawn(&config).await;
    init(&mut local, json!({})).await;
    let (_, status) = local.call("auth/status", json!({})).await;
    assert_eq!(status["result"]["state"], "not_required", "{status}");
}

#[tokio::test]
async fn a_client_declaring_plan_gets_the_todo_list_as_a_plan_by_id_also_on_load() {
    let server = LlmServer::start(scripted_model(vec![(
        "todo",
        json!({"todos": [
            {"content": "Read the code", "status": "completed"},
            {"content": "Fix the bug", "status": "in_progress", "priority": "high"},
        ]}),
    )]))
    .await;
    let config = config_for(&server, "test-model");
    let mut agent = Agent::spawn(&config).await;
    init(&mut agent, json!({"plan": {}})).await;
    let session = agent.new_session().await;
    let (seen, _) = agent.prompt(&session, "plan it").await;
    assert!(tool_updates(&seen, "plan").is_empty(), "{seen:?}");
    let plans = tool_updates(&seen, "plan_update");
    assert_eq!(plans.len(), 1, "{seen:?}");
    assert_eq!(plans[0]["plan"]["type"], "items", "{}", plans[0]);
    assert_eq!(plans[0]["plan"]["planId"], "todos", "{}", plans[0]);
    let entries = &plans[0]["plan"]["entries"];
    assert_eq!(entries[1]["content"], "Fix the bug", "{}", plans[0]);
    assert_eq!(entries[1]["status"], "in_progress", "{}", plans[0]);
    agent.close_stdin();
    agent.wait_exit().await;

    // A load shows it again the same way, under the same id.
    let mut again = Agent::spawn_sharing(&config, &agent).await;
    init(&mut again, json!({"plan": {}})).await;
    let (replay, loaded) = again.load(&session, agent.cwd()).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    let plans = tool_updates(&replay, "plan_update");
    assert_eq!(plans.len(), 1, "{replay:?}");
    assert_eq!(plans[0]["plan"]["planId"], "todos");
    assert!(tool_updates(&replay, "plan").is_empty(), "{replay:?}");
    again.close_stdin();
    again.wait_exit().await;

    // A client on an older schema (no `plan`) loads the same session as before.
    let mut old = Agent::spawn_sharing(&config, &agent).await;
    init(&mut old, json!({})).await;
    let (replay, loaded) = old.load(&session, agent.cwd()).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    assert_eq!(tool_updates(&replay, "plan").len(), 1, "{replay:?}");
    assert!(
        tool_updates(&replay, "plan_update").is_empty(),
        "{replay:?}"
    );
    drop(server);
}

#[tokio::test]
async fn an_emptied_todo_list_is_a_removed_plan() {
    let server = LlmServer::start(scripted_model(vec![
        (
            "todo",
            json!({"todos": [{"content": "Fix the bug", "status": "pending"}]}),
        ),
        ("todo", json!({"todos": []})),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    init(&mut agent, json!({"plan": {}})).await;
    let session = agent.new_session().await;
    let (seen, _) = agent.prompt(&session, "plan and drop it").await;
    let kinds: Vec<&str> = seen
        .iter()
        .filter_map(|m| m["params"]["update"]["sessionUpdate"].as_str())
        .filter(|kind| kind.starts_with("plan"))
        .collect();
    assert_eq!(kinds, ["plan_update", "plan_removed"], "{seen:?}");
    let removed = tool_updates(&seen, "plan_removed");
    assert_eq!(removed[0]["planId"], "todos", "{}", removed[0]);
}

/// The ids `session/list` answers with `params`, and the `archived` each says.
async fn listed(agent: &mut Agent, params: Value) -> Vec<(String, Value)> {
    let (_, response) = agent.call("session/list", params).await;
    let sessions = response["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{response}"));
    sessions
        .iter()
        .map(|s| {
            (
                s["sessionId"].as_str().unwrap_or("").to_string(),
                s["archived"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn an_archived_session_leaves_the_list_keeps_its_files_and_loads_once_unarchived() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let config = format!(
        "{}\n[acp]\nunstable = [\"archive\"]\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let result = init(&mut agent, json!({})).await;
    let caps = &result["agentCapabilities"]["sessionCapabilities"];
    assert_eq!(caps["archive"], json!({}), "{result}");
    assert!(caps["list"].is_object(), "{result}");
    let kept = agent.new_session().await;
    let archived = agent.new_session().await;
    agent.prompt(&archived, "hello").await;
    let files = agent.cwd().join("data").join("sessions").join(&archived);

    // Open here: archiving closes it first.
    let (_, answer) = agent
        .call("session/archive", json!({"sessionId": archived}))
        .await;
    assert_eq!(answer["result"], json!({}), "{answer}");
    // Closed by then: everything it wrote is on disk.
    let history = std::fs::read_to_string(files.join("history.jsonl")).unwrap();
    assert!(history.contains("hello"), "{history}");
    let default = listed(&mut agent, json!({})).await;
    assert_eq!(default, [(kept.clone(), json!(false))]);
    let only = listed(&mut agent, json!({"archived": "only"})).await;
    assert_eq!(only, [(archived.clone(), json!(true))]);
    let all = listed(&mut agent, json!({"archived": "include"})).await;
    assert_eq!(all.len(), 2, "{all:?}");
    let (_, prompt) = agent.prompt(&archived, "still there?").await;
    assert!(prompt["error"].is_object(), "closed: {prompt}");
    assert_eq!(
        std::fs::read_to_string(files.join("history.jsonl")).unwrap(),
        history,
        "the files stay as they were"
    );
    // Archived, it does not open; archiving again succeeds.
    let load = json!({"sessionId": archived, "cwd": agent.cwd(), "mcpServers": []});
    let (_, refused) = agent.call("session/load", load.clone()).await;
    assert!(error_message(&refused).contains("unarchive"), "{refused}");
    let (_, again) = agent
        .call("session/archive", json!({"sessionId": archived}))
        .await;
    assert_eq!(again["result"], json!({}), "{again}");
    let (_, unknown) = agent
        .call("session/archive", json!({"sessionId": "no-such-session"}))
        .await;
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");

    let (_, answer) = agent
        .call("session/unarchive", json!({"sessionId": archived}))
        .await;
    assert_eq!(answer["result"], json!({}), "{answer}");
    assert_eq!(listed(&mut agent, json!({})).await.len(), 2);
    let (replay, loaded) = agent.call("session/load", load).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    assert!(
        !crate::support::harness::agent_text(&replay, &archived).is_empty(),
        "the old answer comes back: {replay:?}"
    );
    agent.close_stdin();
    agent.wait_exit().await;
}

#[tokio::test]
async fn a_client_without_the_archive_opt_in_sees_no_change() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let result = init(&mut agent, json!({})).await;
    let caps = &result["agentCapabilities"]["sessionCapabilities"];
    assert!(caps.get("archive").is_none(), "{result}");
    let session = agent.new_session().await;
    let (_, answer) = agent
        .call("session/archive", json!({"sessionId": session}))
        .await;
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    let (_, answer) = agent
        .call("session/unarchive", json!({"sessionId": session}))
        .await;
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    // The list as before: no `archived` on its sessions.
    let (_, response) = agent
        .call("session/list", json!({"archived": "only"}))
        .await;
    let sessions = response["result"]["sessions"].as_array().unwrap().clone();
    assert_eq!(sessions.len(), 1, "{response}");
    assert!(sessions[0].get("archived").is_none(), "{response}");
    agent.close_stdin();
    agent.wait_exit().await;
}

/// A second provider on the same server whose default model reasons, so a
/// session on it offers a thinking level the first one does not.
fn two_providers(server: &LlmServer, unstable: &str) -> String {
    format!(
        "{}\n[llm.providers.deep]\ntype = \"openai\"\nendpoint = \"{}\"\ndefault_model = \"o3-mini\"\n\n[acp]\nunstable = [{unstable}]\n",
        config_for(server, "test-model"),
        server.base_url()
    )
}

fn current(answer: &Value, id: &str) -> Value {
    let options = answer["configOptions"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"));
    options
        .iter()
        .find(|o| o["id"] == id)
        .map(|o| o["currentValue"].clone())
        .unwrap_or(Value::Null)
}

fn session_files(agent: &Agent) -> usize {
    std::fs::read_dir(agent.cwd().join("data").join("sessions"))
        .map(|dir| dir.count())
        .unwrap_or(0)
}

#[tokio::test]
async fn session_options_answers_what_session_new_would_and_creates_nothing() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&two_providers(&server, "\"options\"")).await;
    let result = init(&mut agent, json!({})).await;
    let caps = &result["agentCapabilities"]["sessionCapabilities"];
    assert_eq!(caps["options"], json!({}), "{result}");
    let (before, options) = agent
        .call("session/options", json!({"cwd": agent.cwd()}))
        .await;
    assert!(before.is_empty(), "no update before the answer: {before:?}");
    let options = options["result"].clone();
    assert!(options["modes"]["availableModes"].is_array(), "{options}");
    assert_eq!(current(&options, "model"), "test-model", "{options}");
    // Nothing made: no session listed, no file, no update since.
    let (since, list) = agent.call("session/list", json!({})).await;
    assert!(since.is_empty(), "{since:?}");
    assert_eq!(list["result"]["sessions"], json!([]), "{list}");
    assert_eq!(session_files(&agent), 0);
    let (_, created) = agent
        .call("session/new", json!({"cwd": agent.cwd(), "mcpServers": []}))
        .await;
    let created = &created["result"];
    assert_eq!(session_files(&agent), 1, "a real session is saved there");
    assert_eq!(created["modes"], options["modes"], "{created}");
    assert_eq!(created["configOptions"], options["configOptions"]);
    // A relative cwd is refused, naming the field.
    let (_, refused) = agent
        .call("session/options", json!({"cwd": "relative/dir"}))
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(error_message(&refused).contains("cwd"), "{refused}");
    agent.close_stdin();
    agent.wait_exit().await;
}

#[tokio::test]
async fn initial_config_options_apply_in_order_and_a_duplicate_creates_nothing() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&two_providers(&server, "\"options\"")).await;
    init(&mut agent, json!({})).await;
    let (_, options) = agent
        .call("session/options", json!({"cwd": agent.cwd()}))
        .await;
    let modes = &options["result"]["modes"];
    let other_mode = modes["availableModes"]
        .as_array()
        .and_then(|all| all.iter().find(|m| m["id"] != modes["currentModeId"]))
        .map(|m| m["id"].clone())
        .unwrap_or_else(|| panic!("{options}"));
    // `thought_level` exists only once the provider is `deep` (a reasoning
    // model): given after it, it applies; an unknown option is skipped.
    let (before, created) = agent
        .call(
            "session/new",
            json!({"cwd": agent.cwd(), "mcpServers": [], "configOptions": [
                {"configId": "provider", "value": "deep"},
                {"configId": "no_such_option", "value": "x"},
                {"configId": "thought_level", "value": "low"},
                {"configId": "mode", "value": other_mode},
            ]}),
        )
        .await;
    assert!(before.is_empty(), "no update for them: {before:?}");
    let answer = &created["result"];
    let session = answer["sessionId"].as_str().unwrap().to_string();
    assert_eq!(current(answer, "provider"), "deep", "{answer}");
    assert_eq!(current(answer, "model"), "o3-mini", "{answer}");
    assert_eq!(current(answer, "thought_level"), "low", "{answer}");
    assert_eq!(current(answer, "mode"), other_mode, "{answer}");
    assert_eq!(answer["modes"]["currentModeId"], other_mode, "{answer}");
    // A prompt goes to the model they chose.
    let (_, prompted) = agent.prompt(&session, "hello").await;
    assert!(prompted["result"].is_object(), "{prompted}");
    let chats = server.chat_requests();
    assert_eq!(chats.last().unwrap().body["model"], "o3-mini", "{chats:?}");

    // The other way round, the thinking level is not there yet: skipped.
    let (_, reversed) = agent
        .call(
            "session/new",
            json!({"cwd": agent.cwd(), "mcpServers": [], "configOptions": [
                {"configId": "thought_level", "value": "low"},
                {"configId": "provider", "value": "deep"},
            ]}),
        )
        .await;
    let reversed = &reversed["result"];
    assert_eq!(current(reversed, "provider"), "deep", "{reversed}");
    assert_ne!(current(reversed, "thought_level"), "low", "{reversed}");

    // A duplicate is refused, naming the field, and nothing is made.
    let files = session_files(&agent);
    let (_, refused) = agent
        .call(
            "session/new",
            json!({"cwd": agent.cwd(), "mcpServers": [], "configOptions": [
                {"configId": "mode", "value": other_mode},
                {"configId": "mode", "value": other_mode},
            ]}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        error_message(&refused).contains("configOptions[1]"),
        "{refused}"
    );
    assert_eq!(session_files(&agent), files);
    let (_, list) = agent.call("session/list", json!({})).await;
    assert_eq!(
        list["result"]["sessions"].as_array().unwrap().len(),
        2,
        "{list}"
    );
    agent.close_stdin();
    agent.wait_exit().await;
}

#[tokio::test]
async fn initial_config_options_apply_on_load_and_fork() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&two_providers(&server, "\"options\", \"fork\"")).await;
    init(&mut agent, json!({})).await;
    let session = agent.new_session().await;
    agent.prompt(&session, "hello").await;
    let (_, closed) = agent
        .call("session/close", json!({"sessionId": session}))
        .await;
    assert!(closed["result"].is_object(), "{closed}");
    let (_, loaded) = agent
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": agent.cwd(), "mcpServers": [],
                "configOptions": [{"configId": "provider", "value": "deep"}]}),
        )
        .await;
    assert_eq!(current(&loaded["result"], "model"), "o3-mini", "{loaded}");
    // An open session's options are its own; an unknown one is not found.
    let (_, options) = agent
        .call(
            "session/options",
            json!({"cwd": agent.cwd(), "sessionId": session}),
        )
        .await;
    assert_eq!(
        options["result"]["configOptions"], loaded["result"]["configOptions"],
        "{options}"
    );
    let (_, unknown) = agent
        .call(
            "session/options",
            json!({"cwd": agent.cwd(), "sessionId": "no-such-session"}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
    let (_, forked) = agent
        .call(
            "session/fork",
            json!({"sessionId": session, "cwd": agent.cwd(), "mcpServers": [],
                "configOptions": [{"configId": "provider", "value": "local"}]}),
        )
        .await;
    assert_eq!(
        current(&forked["result"], "model"),
        "test-model",
        "{forked}"
    );
    let (_, duplicate) = agent
        .call(
            "session/resume",
            json!({"sessionId": session, "cwd": agent.cwd(), "mcpServers": [],
                "configOptions": [{"configId": "provider", "value": "deep"},
                    {"configId": "provider", "value": "local"}]}),
        )
        .await;
    assert_eq!(duplicate["error"]["code"], -32602, "{duplicate}");
    assert!(
        error_message(&duplicate).contains("session/resume"),
        "{duplicate}"
    );
    agent.close_stdin();
    agent.wait_exit().await;
}

/// Every file under a session's directory with its size and mtime.
fn file_stamps(dir: &std::path::Path) -> Vec<(std::path::PathBuf, u64, std::time::SystemTime)> {
    let mut stamps = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                dirs.push(entry.path());
            } else {
                stamps.push((entry.path(), meta.len(), meta.modified().unwrap()));
            }
        }
    }
    stamps.sort();
    stamps
}

#[tokio::test]
async fn session_options_for_a_saved_session_answers_what_a_load_would_and_touches_nothing() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&two_providers(&server, "\"options\"")).await;
    init(&mut agent, json!({})).await;
    // A session whose settings are not the defaults: another provider, a
    // thinking level, another mode.
    let (_, created) = agent
        .call("session/new", json!({"cwd": agent.cwd(), "mcpServers": []}))
        .await;
    let created = &created["result"];
    let session = created["sessionId"].as_str().unwrap().to_string();
    let modes = &created["modes"];
    let other_mode = modes["availableModes"]
        .as_array()
        .and_then(|all| all.iter().find(|m| m["id"] != modes["currentModeId"]))
        .map(|m| m["id"].clone())
        .unwrap_or_else(|| panic!("{created}"));
    for (option, value) in [
        ("provider", json!("deep")),
        ("thought_level", json!("low")),
        ("mode", other_mode.clone()),
    ] {
        let (_, set) = agent
            .call(
                "session/set_config_option",
                json!({"sessionId": session, "configId": option, "value": value}),
            )
            .await;
        assert!(set["result"].is_object(), "{set}");
    }
    agent.prompt(&session, "hello").await;
    let (_, closed) = agent
        .call("session/close", json!({"sessionId": session}))
        .await;
    assert!(closed["result"].is_object(), "{closed}");
    let dir = agent.cwd().join("data").join("sessions").join(&session);
    let stamps = file_stamps(&dir);
    assert!(!stamps.is_empty(), "saved in {}", dir.display());

    let (before, options) = agent
        .call(
            "session/options",
            json!({"cwd": agent.cwd(), "sessionId": session}),
        )
        .await;
    assert!(before.is_empty(), "no update before the answer: {before:?}");
    let options = &options["result"];
    assert_eq!(current(options, "provider"), "deep", "{options}");
    assert_eq!(current(options, "model"), "o3-mini", "{options}");
    assert_eq!(current(options, "thought_level"), "low", "{options}");
    assert_eq!(options["modes"]["currentModeId"], other_mode, "{options}");
    // Nothing opened: no update since, the files as they were, still saved
    // and not open (a prompt is refused until a load).
    let (since, status) = agent.call("session/list", json!({})).await;
    assert!(since.is_empty(), "{since:?}");
    assert_eq!(
        status["result"]["sessions"].as_array().map(Vec::len),
        Some(1),
        "{status}"
    );
    assert_eq!(file_stamps(&dir), stamps, "no store file written");
    let (_, prompted) = agent.prompt(&session, "still closed?").await;
    assert!(prompted["error"].is_object(), "{prompted}");

    // What the load then answers is what the options said.
    let (_, loaded) = agent.load(&session, agent.cwd()).await;
    let loaded = &loaded["result"];
    assert_eq!(loaded["modes"], options["modes"], "{loaded}");
    assert_eq!(
        loaded["configOptions"], options["configOptions"],
        "{loaded}"
    );
    agent.close_stdin();
    agent.wait_exit().await;
}

#[tokio::test]
async fn a_client_without_the_options_opt_in_sees_no_change() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&two_providers(&server, "")).await;
    let result = init(&mut agent, json!({})).await;
    let caps = &result["agentCapabilities"]["sessionCapabilities"];
    assert!(caps.get("options").is_none(), "{result}");
    let (_, answer) = agent
        .call("session/options", json!({"cwd": agent.cwd()}))
        .await;
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    // `configOptions` is ignored, duplicates and all, as before.
    let (_, created) = agent
        .call(
            "session/new",
            json!({"cwd": agent.cwd(), "mcpServers": [], "configOptions": [
                {"configId": "provider", "value": "deep"},
                {"configId": "provider", "value": "deep"},
            ]}),
        )
        .await;
    assert_eq!(
        current(&created["result"], "provider"),
        "local",
        "{created}"
    );
    agent.close_stdin();
    agent.wait_exit().await;
}
