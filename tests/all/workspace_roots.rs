//! `additionalDirectories`: extra workspace roots a client gives a session.
//! The file tools reach them and nothing beyond them; they are saved with
//! the session, listed, shown by `/context`, and replaced by a later load.

use serde_json::json;

use crate::support::harness::{
    Agent, LlmServer, agent_text, config_for, error_message, scripted_model, tool_updates,
};

fn statuses(seen: &[serde_json::Value]) -> Vec<String> {
    tool_updates(seen, "tool_call_update")
        .iter()
        .filter_map(|u| u["status"].as_str())
        .filter(|s| *s != "in_progress")
        .map(str::to_string)
        .collect()
}

/// A session with `root` as its one additional directory; its id.
async fn session_with_root(agent: &mut Agent, root: &std::path::Path) -> String {
    let response = agent
        .new_session_answer(json!({"additionalDirectories": [root]}))
        .await;
    let id = response["result"]["sessionId"].as_str();
    id.unwrap_or_else(|| panic!("{response}")).to_string()
}

#[tokio::test]
async fn the_file_tools_reach_every_root_and_nothing_else() {
    let extra = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(extra.path().join("note.txt"), "from the extra root\n").unwrap();
    std::fs::write(outside.path().join("secret.txt"), "not yours\n").unwrap();
    let server = LlmServer::start(scripted_model(vec![
        ("read_file", json!({"path": extra.path().join("note.txt")})),
        (
            "read_file",
            json!({"path": outside.path().join("secret.txt")}),
        ),
    ]))
    .await;
    let mut agent = Agent::spawn(&config_for(&server, "test-model")).await;
    let init = agent.initialize().await;
    assert!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"]
            .is_object(),
        "{init}"
    );
    let session = session_with_root(&mut agent, extra.path()).await;

    let (seen, _) = agent.prompt(&session, "read both").await;
    assert_eq!(statuses(&seen), ["completed", "failed"], "{seen:?}");
    let chat = server.chat_requests();
    let results: Vec<String> = chat[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(results[0].contains("from the extra root"), "{results:?}");
    assert!(!results[1].contains("not yours"), "{results:?}");

    let (seen, _) = agent.prompt(&session, "/context").await;
    let shown = agent_text(&seen, &session);
    assert!(
        shown.contains(&extra.path().display().to_string()),
        "{shown}"
    );

    let (_, listed) = agent.call("session/list", json!({})).await;
    assert_eq!(
        listed["result"]["sessions"][0]["additionalDirectories"],
        json!([extra.path()]),
        "{listed}"
    );
}

#[tokio::test]
async fn a_resume_replaces_the_roots_and_bad_roots_are_refused() {
    let extra = tempfile::tempdir().unwrap();
    let server = LlmServer::start(scripted_model(vec![])).await;
    let config = config_for(&server, "test-model");
    let mut agent = Agent::spawn(&config).await;
    agent.initialize().await;
    let refused = agent
        .new_session_answer(json!({"additionalDirectories": ["relative/dir"]}))
        .await;
    assert!(
        error_message(&refused).contains("additionalDirectories[0]"),
        "{refused}"
    );
    let session = session_with_root(&mut agent, extra.path()).await;
    agent.prompt(&session, "hello").await;
    let (mut again, resumed) = agent.resumed_elsewhere(&config, &session).await;
    assert!(resumed.get("result").is_some(), "{resumed}");
    let (seen, _) = again.prompt(&session, "/context").await;
    let shown = agent_text(&seen, &session);
    assert!(
        !shown.contains(&extra.path().display().to_string()),
        "{shown}"
    );
    let (_, listed) = again.call("session/list", json!({})).await;
    assert!(
        listed["result"]["sessions"][0]
            .get("additionalDirectories")
            .is_none(),
        "{listed}"
    );
}

/// TOCTOU: a directory on the way to the file is swapped for a symlink to
/// somewhere else, over and over, while a turn writes, reads and greps
/// through it. Every check of the path may pass just before a swap; the file tools
/// still never write or read outside the roots.
#[tokio::test]
async fn a_symlink_swapped_in_during_a_turn_never_leads_a_tool_outside() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    let extra = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let (sub, away) = (extra.path().join("sub"), extra.path().join("sub.away"));
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("f.txt"), "inside").unwrap();
    std::fs::write(outside.path().join("f.txt"), "SECRET-OUTSIDE").unwrap();
    let target = sub.join("f.txt");
    let calls: Vec<_> = (0..42)
        .map(|n| match n % 3 {
            0 => (
                "write_file",
                json!({"path": target, "content": format!("write {n}")}),
            ),
            1 => ("read_file", json!({"path": target})),
            _ => ("grep", json!({"pattern": "OUTSIDE", "path": sub})),
        })
        .collect();
    let server = LlmServer::start(scripted_model(calls)).await;
    let config = format!(
        "{}\n[agent]\ndefault_mode = \"auto\"\nmax_turn_requests = 100\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    agent.initialize().await;
    let session = session_with_root(&mut agent, extra.path()).await;

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = std::thread::spawn({
        let (stop, swaps) = (Arc::clone(&stop), Arc::clone(&swaps));
        let outside = outside.path().to_path_buf();
        // The agent may create `sub` again while it is away, so any step
        // may fail; the swaps that happen are counted.
        move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::rename(&sub, &away);
                if std::os::unix::fs::symlink(&outside, &sub).is_ok() {
                    swaps.fetch_add(1, Ordering::Relaxed);
                    std::thread::yield_now();
                    let _ = std::fs::remove_file(&sub);
                }
                let _ = std::fs::rename(&away, &sub);
                // A moment with `sub` real, or an agent scheduled only
                // while it is away sees every call fail.
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    });
    let (seen, response) = agent
        .prompt(&session, "write and read, again and again")
        .await;
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();

    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let ended = statuses(&seen);
    assert_eq!(ended.len(), 42, "every call ends: {ended:?}");
    assert!(swaps.load(Ordering::Relaxed) > 0);
    assert!(ended.iter().any(|s| s == "completed"), "{ended:?}");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("f.txt")).unwrap(),
        "SECRET-OUTSIDE"
    );
    let left_outside: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(left_outside, ["f.txt"], "nothing was written outside");
    let requests = server.chat_requests();
    let sent = serde_json::to_string(&requests.last().unwrap().body).unwrap();
    assert!(!sent.contains("SECRET-OUTSIDE"), "a read reached outside");
}
