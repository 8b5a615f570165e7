//! MCP servers that misbehave (the fault matrix's MCP cells), through the
//! client's public face: a server that hangs in `initialize`, one that
//! writes garbage and a tool with a broken schema, one that floods
//! notifications, one that vanishes while the session is idle. In each the
//! session's other servers and tools keep working and nothing hangs.

use std::time::Duration;

use crucible_agent::mcp::McpManager;
use serde_json::json;

use crate::mcp::{ctx, echo_spec, names, options, start, tool};
use crate::support::wait::wait_until;

fn echo_with(name: &str, args: &[&str]) -> crucible_agent::mcp::McpServerSpec {
    let mut all = vec![crate::mcp::fixture("echo_server.py").display().to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    crucible_agent::mcp::McpServerSpec::stdio(name, "python3").with_args(all)
}

#[tokio::test]
async fn a_server_hanging_in_initialize_is_given_up_on_and_the_others_work() {
    let mut opts = options(Duration::from_secs(5));
    // Long enough for the healthy server to start on a loaded machine (it gets
    // the same limit); the stuck one is given up on either way.
    opts.start_timeout = Duration::from_secs(3);
    let manager = McpManager::start(
        vec![
            echo_with("stuck", &["--hang-at-initialize"]),
            echo_spec("echo"),
        ],
        opts,
    )
    .await;
    let failures = manager.failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].0, "stuck");
    assert!(
        failures[0].1.contains("3 s") || failures[0].1.contains("did not"),
        "{failures:?}"
    );
    assert!(names(&manager).iter().all(|n| !n.starts_with("stuck__")));
    let output = tool(&manager, "echo__echo")
        .call(json!({"text": "fine"}), &ctx())
        .await
        .unwrap();
    assert_eq!(output.for_model, "fine");
    manager.shutdown().await;
}

#[tokio::test]
async fn garbage_lines_and_a_broken_schema_do_not_stop_the_good_tools() {
    let manager = start(vec![echo_with("odd", &["--garbage"])]).await;
    assert!(manager.failures().is_empty(), "{:?}", manager.failures());
    let listed = names(&manager);
    assert!(listed.contains(&"odd__echo".to_string()), "{listed:?}");
    assert!(!listed.contains(&"odd__broken".to_string()), "{listed:?}");
    let output = tool(&manager, "odd__echo")
        .call(json!({"text": "through"}), &ctx())
        .await
        .unwrap();
    assert_eq!(output.for_model, "through");
    manager.shutdown().await;
}

#[tokio::test]
async fn a_flood_of_notifications_leaves_the_server_answering() {
    // Far more than any channel between the server and the call holds (a
    // bounded one would stall); 100,000 took past the 20 s limits once on
    // a loaded machine, in a debug build.
    let manager = start(vec![echo_with("loud", &["--flood", "30000"])]).await;
    let output = tool(&manager, "loud__echo")
        .call(json!({"text": "heard"}), &ctx())
        .await
        .unwrap();
    assert_eq!(output.for_model, "heard");
    manager.shutdown().await;
}

#[tokio::test]
async fn a_server_that_vanished_while_idle_is_started_again_for_the_next_call() {
    let manager = start(vec![echo_with("shy", &["--exit-when-idle", "0.4"])]).await;
    let first = manager.process_ids()[0].1;
    wait_until("the idle fixture to leave", || !crate::mcp::alive(first)).await;
    assert!(!crate::mcp::alive(first), "the fixture left");
    let mut answer = tool(&manager, "shy__echo")
        .call(json!({"text": "again"}), &ctx())
        .await;
    if let Err(err) = &answer {
        // At most the first call may fail, saying it will be restarted.
        assert!(
            err.to_string().contains("restarted on the next call"),
            "{err}"
        );
        answer = tool(&manager, "shy__echo")
            .call(json!({"text": "again"}), &ctx())
            .await;
    }
    assert_eq!(answer.unwrap().for_model, "again");
    manager.shutdown().await;
}
