//! The subcommands for people: `config init`/`config path`, `doctor` (on a
//! fresh HOME, and with each thing that breaks a first run), and
//! `sessions list|show|delete` over what an agent stored.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use tokio::process::Command;

use crate::support::harness::{
    self, Agent, LlmServer, Reply, Split, config_for, models_reply, text_stream,
};

/// Run the binary with `HOME` = `home` and no inherited config/data paths.
async fn run(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crucible-agent"));
    command
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("CRUCIBLE_CONFIG")
        .env_remove("CRUCIBLE_DATA_DIR")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY");
    for (key, value) in env {
        command.env(key, value);
    }
    tokio::time::timeout(*harness::PATIENCE, command.output())
        .await
        .expect("the command finished")
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn config_init_then_doctor_on_a_fresh_home() {
    let server = LlmServer::start(|_| models_reply(&["smollm2-135m", "other"])).await;
    let home = tempfile::tempdir().unwrap();
    let output = run(home.path(), &["config", "path"], &[]).await;
    assert!(output.status.success());
    let paths = stdout(&output);
    let config = home.path().join(".config/crucible/config.toml");
    assert!(paths.contains(&config.display().to_string()), "{paths}");
    assert!(paths.contains(".local/share/crucible"), "{paths}");

    let output = run(home.path(), &["config", "init"], &[]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let written = std::fs::read_to_string(&config).unwrap();
    assert_eq!(written, include_str!("../../config.sample.toml"));
    // Never overwritten by accident.
    let output = run(home.path(), &["config", "init"], &[]).await;
    assert!(!output.status.success());
    assert!(stderr(&output).contains("--force"), "{}", stderr(&output));
    let output = run(home.path(), &["config", "init", "--force"], &[]).await;
    assert!(output.status.success());

    // Point the sample's local provider at a server that answers.
    std::fs::write(
        &config,
        written.replace("http://127.0.0.1:8080/v1", &server.base_url()),
    )
    .unwrap();
    let output = run(home.path(), &["doctor"], &[]).await;
    let report = stdout(&output);
    assert!(output.status.success(), "{report}{}", stderr(&output));
    assert!(report.contains("provider local endpoint"), "{report}");
    assert!(report.contains("answers (2 models)"), "{report}");
    assert!(report.contains("data dir"), "{report}");
    assert!(report.contains("all good"), "{report}");
    assert!(home.path().join(".local/share/crucible/sessions").is_dir());
}

#[tokio::test]
async fn doctor_names_the_fix_for_each_broken_thing() {
    let refusing = LlmServer::start(|_| {
        Reply::json(
            401,
            json!({"error": {"message": "Incorrect API key provided"}}),
        )
    })
    .await;
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            r#"[chat]
default_provider = "down"

[llm.providers.down]
type = "openai"
endpoint = "http://127.0.0.1:{closed_port}/v1"
default_model = "m"

[llm.providers.badkey]
type = "openai"
endpoint = "{}"
default_model = "m"
api_key = "${{DOCTOR_TEST_KEY}}"

[llm.providers.nokey]
type = "anthropic"
default_model = "claude-x"
api_key = "${{DOCTOR_TEST_UNSET_KEY}}"

[mcp_servers.tools]
command = "no-such-mcp-command-anywhere"
"#,
            refusing.base_url()
        ),
    )
    .unwrap();
    let secret = "sk-this-must-never-be-printed";
    let output = run(
        home.path(),
        &["--config", config.to_str().unwrap(), "doctor"],
        &[("DOCTOR_TEST_KEY", secret)],
    )
    .await;
    let report = format!("{}{}", stdout(&output), stderr(&output));
    assert!(!output.status.success(), "{report}");
    // Unreachable endpoint.
    assert!(report.contains("cannot reach provider `down`"), "{report}");
    assert!(report.contains("[llm.providers.down]"), "{report}");
    // A key the server refuses, named by where it came from, never shown.
    assert!(
        report.contains("refused the API key (HTTP 401)"),
        "{report}"
    );
    assert!(
        report.contains("environment variable DOCTOR_TEST_KEY"),
        "{report}"
    );
    assert!(!report.contains(secret), "{report}");
    // A key variable that is not set.
    assert!(report.contains("export DOCTOR_TEST_UNSET_KEY"), "{report}");
    // A missing MCP command.
    assert!(report.contains("no-such-mcp-command-anywhere"), "{report}");
    assert!(report.contains("[mcp_servers.tools]"), "{report}");
    assert!(report.contains("problem(s) to fix"), "{report}");

    // A value of the wrong type names the key's path, its line and a fix
    // that edits the file rather than replacing it.
    std::fs::write(&config, "[agent]\nmax_turn_requests = \"many\"\n").unwrap();
    let output = run(
        home.path(),
        &["--config", config.to_str().unwrap(), "doctor"],
        &[],
    )
    .await;
    let report = stdout(&output);
    assert!(!output.status.success());
    assert!(
        report.contains("key `agent.max_turn_requests`: invalid type: string \"many\""),
        "{report}"
    );
    assert!(report.contains("(line 2)"), "{report}");
    assert!(
        report.contains("fix: follow the message for `agent.max_turn_requests` in"),
        "{report}"
    );
    assert!(!report.contains("--force"), "{report}");

    // A variable a server's header names, not set: the key, the variable,
    // and the same kind of fix.
    std::fs::write(
        &config,
        "[mcp_servers.remote]\ntype = \"http\"\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { Authorization = \"Bearer ${DOCTOR_TEST_UNSET_TOKEN}\" }\n",
    )
    .unwrap();
    let output = run(
        home.path(),
        &["--config", config.to_str().unwrap(), "doctor"],
        &[],
    )
    .await;
    let report = stdout(&output);
    assert!(!output.status.success());
    assert!(report.contains("DOCTOR_TEST_UNSET_TOKEN"), "{report}");
    assert!(
        report.contains("key `mcp_servers.remote.headers"),
        "{report}"
    );
    assert!(
        report.contains("fix: follow the message for `mcp_servers.remote.headers"),
        "{report}"
    );

    // A --provider the file lacks is the flag's fault, not a key's.
    std::fs::write(&config, "[llm.providers.local]\ntype = \"ollama\"\n").unwrap();
    let output = run(
        home.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--provider",
            "nosuch",
            "doctor",
        ],
        &[],
    )
    .await;
    let report = stdout(&output);
    assert!(!output.status.success());
    assert!(
        report.contains("--provider nosuch: no provider named `nosuch` is configured"),
        "{report}"
    );
    assert!(!report.contains("key `--provider`"), "{report}");
}

#[tokio::test]
async fn sessions_subcommands_list_show_and_delete_what_the_agent_stored() {
    let server =
        LlmServer::chat(|_| Reply::stream(text_stream(&["Hi ", "there"]), Split::Whole)).await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let session = agent.start_session().await;
    agent.prompt(&session, "say hello").await;
    agent.close_stdin();
    agent.wait_exit().await;
    let data = agent.data_dir();
    let data = data.to_str().unwrap();
    let home = tempfile::tempdir().unwrap();

    let output = run(
        home.path(),
        &["--data-dir", data, "sessions", "list", "--json"],
        &[],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(listed[0]["id"], session.as_str());
    assert_eq!(listed[0]["title"], "say hello");
    assert_eq!(listed[0]["model"], "test-model");
    let output = run(home.path(), &["--data-dir", data, "sessions", "list"], &[]).await;
    assert!(stdout(&output).contains(&session), "{}", stdout(&output));

    let output = run(
        home.path(),
        &["--data-dir", data, "sessions", "show", &session],
        &[],
    )
    .await;
    let shown = stdout(&output);
    assert!(
        shown.contains("> say hello") && shown.contains("Hi there"),
        "{shown}"
    );
    let output = run(
        home.path(),
        &["--data-dir", data, "sessions", "show", &session, "--json"],
        &[],
    )
    .await;
    let shown: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(shown["metadata"]["id"], session.as_str());
    assert_eq!(shown["events"][0]["event"], "user_prompt");

    let output = run(
        home.path(),
        &["--data-dir", data, "sessions", "delete", &session],
        &[],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!agent.session_dir(&session).exists());
    let output = run(
        home.path(),
        &["--data-dir", data, "sessions", "show", &session],
        &[],
    )
    .await;
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("no stored session"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn doctor_shows_the_environment_policy_as_counts_never_values() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.toml");
    std::fs::write(
        &config,
        "[shell_environment]\nexclude = [\"DOCTOR_HIDDEN_*\"]\nset = { CI = \"1\" }\n[mcp_servers.wide]\ncommand = \"sh\"\ninherit_env = true\n",
    )
    .unwrap();
    let secret = "doctor-secret-value-1";
    let output = run(
        home.path(),
        &["--config", config.to_str().unwrap(), "doctor"],
        &[
            ("DOCTOR_API_KEY", secret),
            ("DOCTOR_HIDDEN_X", "hidden-value-2"),
        ],
    )
    .await;
    let report = stdout(&output);
    assert!(report.contains("shell environment"), "{report}");
    assert!(report.contains("(1 set by the config)"), "{report}");
    // At least the two variables given here are left out by an exclude.
    let excluded: usize = report
        .split(" left out, ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("{report}"));
    assert!(excluded >= 2, "{report}");
    assert!(
        report.contains("the agent's whole environment: wide"),
        "{report}"
    );
    assert!(!report.contains(secret), "{report}");
    assert!(!report.contains("hidden-value-2"), "{report}");
}

#[tokio::test]
async fn doctor_shows_which_models_run_prompted() {
    let server = LlmServer::start(|_| models_reply(&["tiny", "big"])).await;
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "{}tool_calling = \"prompted\"\n[llm.providers.local.models.\"big\"]\ntool_calling = \"native\"\n",
            config_for(&server, "tiny")
        ),
    )
    .unwrap();
    let output = run(
        home.path(),
        &["--config", config.to_str().unwrap(), "doctor"],
        &[],
    )
    .await;
    let report = stdout(&output);
    let line = report
        .lines()
        .find(|line| line.contains("provider local tool calling"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(line.contains("tiny: prompted"), "{line}");
    assert!(line.contains("big: native"), "{line}");
}
