//! A full disk (the fault matrix's disk cell), on a small tmpfs mounted
//! over the data dir: prompts are still answered and say that saving
//! failed; what was saved before stays whole (no torn line, nothing cut);
//! once there is room again the session saves and loads after a restart.
//! Mounting needs root (CI and this machine have it); elsewhere the test
//! says it was skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::harness::{Agent, LlmServer, config_for, scripted_model};

/// A tmpfs mounted for the test's length.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Self> {
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .ok()?;
        mounted.status.success().then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fill the file system holding `dir` to the last byte.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let block = vec![b'f'; 4096];
    while file.write_all(&block).is_ok() {}
    let mut byte = [b'f'];
    while file.write_all(&byte).is_ok() {
        byte[0] = b'f';
    }
    path
}

fn said(seen: &[Value]) -> String {
    seen.iter().map(Value::to_string).collect()
}

#[tokio::test]
async fn a_full_disk_still_answers_says_saving_failed_and_keeps_the_saved_history_whole() {
    let server = LlmServer::start(scripted_model(Vec::new())).await;
    let config = config_for(&server, "test-model");
    let mut agent = Agent::spawn(&config).await;
    let data = agent.data_dir();
    std::fs::create_dir_all(&data).unwrap();
    let Some(_tmpfs) = Tmpfs::mount(&data, "256k") else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let session = agent.start_session().await;
    let (_, first) = agent.prompt(&session, "before the disk fills").await;
    assert_eq!(first["result"]["stopReason"], "end_turn", "{first}");
    let history = agent.session_dir(&session).join("history.jsonl");
    let saved = std::fs::read_to_string(&history).unwrap();
    assert!(saved.contains("before the disk fills"));

    let filler = fill(&data);
    // Long enough to need new pages (a file's last page may have room left).
    let long = format!("while the disk is full {}", "x".repeat(9_000));
    let (seen, full) = agent.prompt(&session, &long).await;
    assert_eq!(full["result"]["stopReason"], "end_turn", "{full}");
    let told = said(&seen);
    assert!(
        told.contains("Saving this session failed") && told.contains("No space left"),
        "the user is told: {seen:?}"
    );
    // Told once, not on every turn.
    let (seen, again) = agent
        .prompt(&session, &long.replace("while", "still"))
        .await;
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again}");
    assert!(!said(&seen).contains("Saving this session failed"));

    // What was saved is whole: every line reads, and it starts as it did.
    let now = std::fs::read_to_string(&history).unwrap();
    assert!(now.starts_with(&saved), "the saved history changed");
    for line in now.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("torn line {line:?}: {e}"));
    }

    // Room again: the next turn is saved, and the session loads after a restart.
    std::fs::remove_file(filler).unwrap();
    let (_, freed) = agent.prompt(&session, "after the disk is freed").await;
    assert_eq!(freed["result"]["stopReason"], "end_turn", "{freed}");
    agent.kill().await;
    let mut second = Agent::spawn_sharing(&config, &agent).await;
    second.initialize().await;
    let cwd = second.cwd();
    let (replayed, loaded) = second
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let replay = said(&replayed);
    assert!(
        replay.contains("before the disk fills") && replay.contains("after the disk is freed"),
        "{replay}"
    );
}
