//! The command sandbox through the binary, in `auto` mode: what a command
//! the model runs may change, what the model reads when the sandbox blocks
//! it, and when the user is asked to let it out. The project and HOME live
//! under the build's temp directory, not /tmp (which every confined command
//! may write to). The attacks tried are listed in docs/sandbox-attacks.md.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;

use serde_json::{Value, json};

use crate::support::client::{initialize_with_terminal, respond_until, result_for};
use crate::support::harness::{
    Agent, LlmServer, agent_binary, config_for, outside_temp_base, scripted_model, thought_text,
};

/// A project directory and a HOME, both outside the temp directories.
struct Dirs {
    project: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Self {
        let base = outside_temp_base();
        Self {
            project: tempfile::tempdir_in(&base).unwrap(),
            home: tempfile::tempdir_in(&base).unwrap(),
        }
    }

    fn project(&self) -> &Path {
        self.project.path()
    }

    fn home(&self) -> &Path {
        self.home.path()
    }
}

fn auto_config(server: &LlmServer) -> String {
    format!(
        "{}\n[agent]\ndefault_mode = \"auto\"\n",
        config_for(server, "test-model")
    )
}

/// What a run of commands showed.
struct Run {
    seen: Vec<Value>,
    session: String,
    /// The titles of the permission requests, in order.
    asked: Vec<String>,
    /// The tool results the model read, in order.
    results: Vec<String>,
}

/// Runs `commands` as `shell` calls in one prompt, in `mode`, with
/// `sandbox` as the `[sandbox]` table, answering every permission request
/// with `answers` in turn (then `reject_once`).
async fn run(
    mode: &str,
    dirs: &Dirs,
    commands: &[&str],
    sandbox: &str,
    env: &[(&str, &str)],
    answers: &[&str],
) -> Run {
    let calls = commands
        .iter()
        .map(|command| ("shell", json!({ "command": command })))
        .collect();
    let server = LlmServer::start(scripted_model(calls)).await;
    let config = format!(
        "{}\n[agent]\ndefault_mode = {mode:?}\n\n[sandbox]\n{sandbox}\n",
        config_for(&server, "test-model")
    );
    let (mut agent, created) = start(dirs, &config, env).await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    let prompt = agent
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
        )
        .await;
    let mut asked = Vec::new();
    let (seen, response) = respond_until(&mut agent, prompt, |message| {
        if message["method"] != "session/request_permission" {
            return Vec::new();
        }
        let title = message["params"]["toolCall"]["title"]
            .as_str()
            .unwrap_or("");
        asked.push(title.to_string());
        let answer = answers
            .get(asked.len() - 1)
            .copied()
            .unwrap_or("reject_once");
        vec![result_for(
            message,
            json!({"outcome": {"outcome": "selected", "optionId": answer}}),
        )]
    })
    .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let results = server.chat_requests().last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    Run {
        seen,
        session,
        asked,
        results,
    }
}

/// The agent under `config` with HOME at `dirs.home()` (and `env`), and
/// the answer to `session/new` in `dirs.project()`.
async fn start(dirs: &Dirs, config: &str, env: &[(&str, &str)]) -> (Agent, Value) {
    let home = dirs.home().to_str().unwrap();
    let mut env = env.to_vec();
    env.push(("HOME", home));
    let mut agent = Agent::spawn_with(config, &[], &env).await;
    agent.initialize().await;
    let (_, created) = agent
        .call(
            "session/new",
            json!({"cwd": dirs.project(), "mcpServers": []}),
        )
        .await;
    (agent, created)
}

fn assert_starts(result: &str, start: &str) {
    assert!(result.starts_with(start), "{result}");
}

fn assert_blocked(result: &str, what: &str) {
    assert!(!result.starts_with("Exit code: 0"), "{result}");
    assert!(
        result.contains(&format!("blocked by the workspace sandbox: {what}")),
        "{result}"
    );
}

/// Puts /etc/hosts back if a test wrote to it after all (and fails then).
struct HostsGuard(String);

impl HostsGuard {
    fn new() -> Self {
        Self(std::fs::read_to_string("/etc/hosts").unwrap_or_default())
    }
}

impl Drop for HostsGuard {
    fn drop(&mut self) {
        let now = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        if now != self.0 {
            std::fs::write("/etc/hosts", &self.0).unwrap();
            panic!("a sandboxed command changed /etc/hosts (restored)");
        }
    }
}

#[tokio::test]
async fn workspace_write_keeps_writes_inside_the_project() {
    let dirs = Dirs::new();
    let hosts = HostsGuard::new();
    let escape = dirs.home().join("escape.txt");
    std::os::unix::fs::symlink(&escape, dirs.project().join("link")).unwrap();
    let run = run(
        "auto",
        &dirs,
        &[
            "echo inside > inside.txt && cat inside.txt && mktemp",
            "touch ~/outside",
            "echo x >> /etc/hosts",
            "echo x > link",
        ],
        "",
        &[],
        &[],
    )
    .await;
    assert_starts(&run.results[0], "Exit code: 0\ninside\n/tmp/");
    assert!(dirs.project().join("inside.txt").exists());
    let outside = dirs.home().join("outside");
    assert_blocked(&run.results[1], &format!("writing {}", outside.display()));
    assert!(!outside.exists());
    assert_blocked(&run.results[2], "writing /etc/hosts");
    assert_blocked(
        &run.results[3],
        &format!("writing {}", dirs.project().join("link").display()),
    );
    assert!(!escape.exists(), "the symlink led nowhere");
    for result in &run.results[1..] {
        assert!(
            result.contains(&dirs.project().display().to_string()),
            "names where it may write: {result}"
        );
        assert!(
            result.contains("declined to run it outside the sandbox"),
            "{result}"
        );
    }
    // The write inside ran unasked; each blocked command offered a way out.
    assert_eq!(run.asked.len(), 3, "{:?}", run.asked);
    assert!(
        run.asked
            .iter()
            .all(|title| title.starts_with("Run outside the sandbox? Run `")),
        "{:?}",
        run.asked
    );
    drop(hosts);
}

/// A TCP server on localhost that answers one line to whoever connects.
fn greeter() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\nhello\n");
        }
    });
    port
}

#[tokio::test]
async fn the_network_is_off_unless_the_config_allows_it() {
    let port = greeter();
    let python = format!(
        "/usr/bin/python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port})); print('connected')\""
    );
    let curl = format!("curl -sS http://127.0.0.1:{port}/");
    let dirs = Dirs::new();
    let off = run("auto", &dirs, &[&python, &curl], "", &[], &[]).await;
    for result in &off.results {
        assert_blocked(result, "a network connection");
        assert!(
            !result.contains("connected\n") && !result.contains("hello"),
            "{result}"
        );
    }
    let on = run("auto", &dirs, &[&python, &curl], "network = true", &[], &[]).await;
    assert_starts(&on.results[0], "Exit code: 0\nconnected");
    assert_starts(&on.results[1], "Exit code: 0\nhello");
    assert!(on.asked.is_empty(), "{:?}", on.asked);
}

#[tokio::test]
async fn read_only_blocks_writes_in_the_project_but_not_in_temp() {
    let dirs = Dirs::new();
    let mine = dirs.project().join("mine.txt");
    let commands = ["touch mine.txt", "mktemp"];
    let run = run("auto", &dirs, &commands, "mode = \"read-only\"", &[], &[]).await;
    assert!(
        run.results[0].contains(&format!(
            "blocked by the read-only sandbox: writing {}",
            mine.display()
        )),
        "{}",
        run.results[0]
    );
    assert!(!mine.exists());
    assert_starts(&run.results[1], "Exit code: 0\n/tmp/");
}

#[tokio::test]
async fn a_granted_escalation_runs_the_command_outside_once() {
    let dirs = Dirs::new();
    let run = run(
        "auto",
        &dirs,
        &["touch ~/granted", "touch ~/again"],
        "",
        &[],
        &["allow_once", "reject_once"],
    )
    .await;
    assert_eq!(
        run.asked.len(),
        2,
        "asked again for the second: {:?}",
        run.asked
    );
    assert!(dirs.home().join("granted").exists());
    assert_starts(&run.results[0], "Exit code: 0\n");
    assert!(
        run.results[0].contains("let it run once outside the sandbox"),
        "{}",
        run.results[0]
    );
    assert!(!dirs.home().join("again").exists(), "only once");
    assert_blocked(&run.results[1], "writing");
}

#[tokio::test]
async fn act_mode_asks_first_and_still_confines_the_approved_command() {
    let dirs = Dirs::new();
    let run = run(
        "act",
        &dirs,
        &["touch ~/approved"],
        "",
        &[],
        &["allow_once", "reject_once"],
    )
    .await;
    assert_eq!(run.asked.len(), 2, "{:?}", run.asked);
    assert_eq!(run.asked[0], "Run `touch ~/approved`");
    assert_starts(
        &run.asked[1],
        "Run outside the sandbox? Run `touch ~/approved` — blocked by the workspace sandbox: writing ",
    );
    assert!(!dirs.home().join("approved").exists());
    assert_blocked(&run.results[0], "writing");
}

#[tokio::test]
async fn an_allow_rule_lets_a_blocked_command_out_without_asking() {
    let dirs = Dirs::new();
    let rule = "\n[[permissions.rules]]\ntool = \"shell\"\ncommand_prefix = \"touch ~/ruled\"\ndecision = \"allow\"\n";
    let run = run("auto", &dirs, &["touch ~/ruled"], rule, &[], &[]).await;
    assert!(run.asked.is_empty(), "{:?}", run.asked);
    assert!(dirs.home().join("ruled").exists());
}

#[tokio::test]
async fn without_landlock_auto_asks_before_each_command() {
    let dirs = Dirs::new();
    let unavailable = [("CRUCIBLE_AGENT_SANDBOX_UNAVAILABLE", "1")];
    let run = run(
        "auto",
        &dirs,
        &["touch ~/asked", "touch ~/refused"],
        "",
        &unavailable,
        &["allow_once", "reject_once"],
    )
    .await;
    assert_eq!(run.asked, ["Run `touch ~/asked`", "Run `touch ~/refused`"]);
    assert!(
        dirs.home().join("asked").exists(),
        "allowed: ran unconfined"
    );
    assert!(!dirs.home().join("refused").exists());
    let thoughts = thought_text(&run.seen, &run.session);
    assert_eq!(
        thoughts.matches("sandbox is not available").count(),
        1,
        "{thoughts}"
    );

    // With the sandbox off, auto runs commands unasked, as the user chose.
    let off = run_off(&dirs).await;
    assert!(off.asked.is_empty(), "{:?}", off.asked);
}

async fn run_off(dirs: &Dirs) -> Run {
    let unavailable = [("CRUCIBLE_AGENT_SANDBOX_UNAVAILABLE", "1")];
    run(
        "auto",
        dirs,
        &["touch ~/free"],
        "mode = \"off\"",
        &unavailable,
        &[],
    )
    .await
}

#[tokio::test]
async fn the_session_option_switches_the_sandbox() {
    let server = LlmServer::start(scripted_model(vec![(
        "shell",
        json!({"command": "touch ~/switched"}),
    )]))
    .await;
    let dirs = Dirs::new();
    let config = auto_config(&server);
    let (mut agent, created) = start(&dirs, &config, &[]).await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    let options = created["result"]["configOptions"].as_array().unwrap();
    let sandbox = options.iter().find(|o| o["id"] == "sandbox").unwrap();
    assert_eq!(sandbox["currentValue"], "workspace-write");
    let offered = &sandbox["options"];
    for (index, value) in ["read-only", "workspace-write", "off"].iter().enumerate() {
        assert_eq!(offered[index]["value"], *value, "{offered}");
    }
    let (_, set) = agent
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "sandbox", "value": "off"}),
        )
        .await;
    let now = set["result"]["configOptions"].as_array().unwrap();
    assert!(
        now.iter()
            .any(|o| o["id"] == "sandbox" && o["currentValue"] == "off"),
        "{set}"
    );
    let (seen, response) = agent.prompt(&session, "go").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let asked = seen
        .iter()
        .filter(|m| m["method"] == "session/request_permission");
    assert_eq!(asked.count(), 0, "auto runs it unasked");
    assert!(dirs.home().join("switched").exists(), "unconfined");
}

#[tokio::test]
async fn a_sandboxed_command_runs_here_even_when_the_editor_offers_a_terminal() {
    let dirs = Dirs::new();
    let server = LlmServer::start(scripted_model(vec![
        ("shell", json!({"command": "echo here > here.txt"})),
        ("shell", json!({"command": "touch ~/there"})),
    ]))
    .await;
    let config = auto_config(&server);
    let home = dirs.home().to_str().unwrap();
    let mut agent = Agent::spawn_with(&config, &[], &[("HOME", home)]).await;
    let session = initialize_with_terminal(&mut agent).await;
    let prompt = agent.start_prompt(&session, "go").await;
    let mut methods = Vec::new();
    let (_, response) = respond_until(&mut agent, prompt, |message| {
        let Some(method) = message["method"].as_str() else {
            return Vec::new();
        };
        methods.push(method.to_string());
        if method == "session/request_permission" {
            let reject = json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}});
            return vec![result_for(message, reject)];
        }
        Vec::new()
    })
    .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        !methods.iter().any(|m| m.starts_with("terminal/")),
        "{methods:?}"
    );
    assert!(agent.cwd().join("here.txt").exists());
    assert!(!dirs.home().join("there").exists(), "confined");
}

/// `doctor`'s sandbox line under `config`, with `env` set.
async fn doctor_sandbox_line(config: &str, env: &[(&str, &str)]) -> String {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("config.toml");
    std::fs::write(&path, config).unwrap();
    let mut command = tokio::process::Command::new(agent_binary());
    command
        .args(["--config", path.to_str().unwrap(), "doctor"])
        .env("HOME", home.path())
        .env_remove("CRUCIBLE_AGENT_SANDBOX_UNAVAILABLE");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().await.unwrap();
    let report = String::from_utf8_lossy(&output.stdout).into_owned();
    report
        .lines()
        .find(|line| line.starts_with("sandbox "))
        .unwrap_or_else(|| panic!("{report}"))
        .to_string()
}

#[tokio::test]
async fn doctor_shows_whether_the_sandbox_is_available_and_its_abi() {
    let line = doctor_sandbox_line("", &[]).await;
    assert!(line.contains("available (Landlock ABI "), "{line}");
    assert!(
        line.contains("commands run workspace-write, network off"),
        "{line}"
    );
    let line = doctor_sandbox_line("[sandbox]\nnetwork = true\n", &[]).await;
    assert!(line.contains("network on"), "{line}");
    let missing = [("CRUCIBLE_AGENT_SANDBOX_UNAVAILABLE", "1")];
    let line = doctor_sandbox_line("", &missing).await;
    assert!(
        line.contains("not available: disabled by CRUCIBLE_AGENT_SANDBOX_UNAVAILABLE"),
        "{line}"
    );
}

/// A config whose `fx` MCP server (the echo server) asks for the sandbox
/// and first tries to write to `$HOME/mcp-outside`.
fn sandboxed_mcp_config(server: &LlmServer) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/echo_server.py");
    let start = format!(
        "touch \"$HOME/mcp-outside\" 2>/dev/null; exec /usr/bin/python3 {}",
        script.display()
    );
    format!(
        "{}\n[mcp_servers.fx]\ncommand = \"sh\"\nargs = [\"-c\", {start:?}]\nsandbox = true\n",
        auto_config(server)
    )
}

#[tokio::test]
async fn an_mcp_server_may_opt_in_to_the_sandbox() {
    let server = LlmServer::start(scripted_model(vec![("fx__echo", json!({"text": "hi"}))])).await;
    let dirs = Dirs::new();
    let home = dirs.home().to_str().unwrap();
    let mut agent = Agent::spawn_with(&sandboxed_mcp_config(&server), &[], &[("HOME", home)]).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "echo").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let results = crate::support::harness::tool_updates(&seen, "tool_call_update");
    assert!(
        results.iter().any(|u| u["status"] == "completed"),
        "the confined server works: {seen:?}"
    );
    assert!(!dirs.home().join("mcp-outside").exists(), "confined");

    // Without Landlock it does not start unconfined.
    let mut agent = Agent::spawn_with(
        &sandboxed_mcp_config(&server),
        &[],
        &[("HOME", home), ("CRUCIBLE_AGENT_SANDBOX_UNAVAILABLE", "1")],
    )
    .await;
    let session = agent.start_session().await;
    let (seen, _) = agent.prompt(&session, "echo").await;
    let thoughts = thought_text(&seen, &session);
    assert!(thoughts.contains("asks for the sandbox"), "{thoughts}");
    assert!(!dirs.home().join("mcp-outside").exists());
}
