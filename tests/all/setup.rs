//! `crucible-agent setup` (issue 32's terminal sign-in method), through the
//! binary: it refuses without a terminal, and in a pseudo-terminal (driven
//! by `tests/fixtures/setup_pty.py`, as a person types) it finds a model
//! server, lists its models and writes the config, or takes a hosted
//! provider's key without showing it and keeps it in `secrets.toml`.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::json;
use tokio::process::Command;

use crate::support::harness::{self, LlmServer, models_reply};

/// The binary with `HOME` = `home` and nothing inherited that names a
/// config, a data dir or a key.
fn agent_in(home: &Path) -> Command {
    let mut command = Command::new(harness::agent_binary());
    command
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("CRUCIBLE_CONFIG")
        .env_remove("CRUCIBLE_DATA_DIR")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENROUTER_API_KEY");
    command
}

/// `setup` with `args`, in a pseudo-terminal answering `script`.
async fn setup_in_pty(home: &Path, script: serde_json::Value, args: &[&str]) -> Output {
    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/setup_pty.py");
    let mut command = Command::new("python3");
    command
        .arg(driver)
        .arg(script.to_string())
        .arg(harness::agent_binary())
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("CRUCIBLE_CONFIG")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENROUTER_API_KEY")
        .kill_on_drop(true);
    tokio::time::timeout(std::time::Duration::from_secs(90), command.output())
        .await
        .expect("the pty driver finished")
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn without_a_terminal_setup_refuses_and_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.toml");
    let output = tokio::time::timeout(
        *harness::PATIENCE,
        agent_in(home.path())
            .arg("--config")
            .arg(&config)
            .arg("setup")
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("setup answered at once")
    .unwrap();
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(stderr.contains("needs a terminal"), "{stderr}");
    assert!(stderr.contains("crucible-agent setup"), "{stderr}");
    assert!(!config.exists());
}

#[tokio::test]
async fn in_a_terminal_setup_finds_a_server_and_writes_the_chosen_model() {
    let server = LlmServer::start(|_| models_reply(&["pty-model-a", "pty-model-b"])).await;
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("conf/config.toml");
    let endpoint = server.base_url();
    let listed = regex_escape(&endpoint);
    let script = json!([
        [
            format!(r"(\d+)\. OpenAI-compatible server at {listed} \(2 models\)[\s\S]*Provider \["),
            "{1}"
        ],
        [r"(\d+)\. pty-model-b[\s\S]*Model \[", "{1}"],
        [r"Write it\? \[Y/n\]: ", "y"],
    ]);
    let output = setup_in_pty(
        home.path(),
        script,
        &[
            "--config",
            config.to_str().unwrap(),
            "setup",
            "--endpoint",
            &endpoint,
        ],
    )
    .await;
    let transcript = text(&output.stdout);
    assert!(
        output.status.success(),
        "{transcript}{}",
        text(&output.stderr)
    );
    assert!(transcript.contains("Wrote "), "{transcript}");
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(
        written.contains("default_provider = \"local\""),
        "{written}"
    );
    assert!(
        written.contains("default_model = \"pty-model-b\""),
        "{written}"
    );
    assert!(
        written.contains(&format!("endpoint = \"{endpoint}\"")),
        "{written}"
    );
    // What it wrote is what the agent starts with: doctor reaches the model.
    let doctor = agent_in(home.path())
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(home.path().join("data"))
        .arg("doctor")
        .output()
        .await
        .unwrap();
    let report = text(&doctor.stdout);
    assert!(doctor.status.success(), "{report}");
    assert!(
        report.contains(&format!("{endpoint} answers (2 models)")),
        "{report}"
    );
}

#[tokio::test]
async fn a_hosted_key_is_typed_unseen_and_kept_in_secrets_only() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("conf/config.toml");
    let script = json!([
        [r"(\d+)\. OpenAI\r?\n[\s\S]*Provider \[", "{1}"],
        [
            r"OpenAI API key \(not shown as you type\): ",
            "sk-PTY-SECRET-42",
            "hidden"
        ],
        [r"Model \[Enter for gpt-4o\]: ", ""],
        [r"Write it\? \[Y/n\]: ", ""],
    ]);
    let output = setup_in_pty(
        home.path(),
        script,
        &["--config", config.to_str().unwrap(), "setup"],
    )
    .await;
    let transcript = text(&output.stdout);
    assert!(
        output.status.success(),
        "{transcript}{}",
        text(&output.stderr)
    );
    assert!(!transcript.contains("sk-PTY-SECRET"), "{transcript}");
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(
        written.contains("default_provider = \"openai\""),
        "{written}"
    );
    assert!(!written.contains("sk-PTY-SECRET"), "{written}");
    let secrets = home.path().join("conf/secrets.toml");
    let stored = std::fs::read_to_string(&secrets).unwrap();
    assert!(
        stored.contains("[providers.openai]") && stored.contains("sk-PTY-SECRET-42"),
        "{stored}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&secrets).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// `text` as a regular expression matching itself (Python's `re`).
fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = ".^$*+?{}[]\\|()".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}
