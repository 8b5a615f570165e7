//! Resource bounds a user relies on without knowing (the fault matrix's
//! limits): a command that prints 30 MB reaches the model as its head and
//! tail within the output cap (100 KiB by default), cut again to fit the
//! model's window when that is smaller, with a note of what was cut; the
//! editor is shown the same. A command and everything it started end with
//! the agent, however the agent is ended.

use serde_json::json;

use crate::support::harness::{Agent, LlmServer, config_for, scripted_model, tool_updates};

#[tokio::test]
async fn thirty_megabytes_of_output_reach_the_model_as_head_and_tail_with_a_note() {
    let command = "printf HEAD-MARK; head -c 31457280 /dev/zero | tr '\\0' a; printf TAIL-MARK";
    let server =
        LlmServer::start(scripted_model(vec![("shell", json!({"command": command}))])).await;
    let config = format!(
        "{}\n[agent]\ndefault_mode = \"auto\"\n",
        config_for(&server, "test-model")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "print a lot").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    let requests = server.chat_requests();
    let last = requests.last().unwrap();
    let tool_message = last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let text = tool_message["content"].as_str().unwrap();
    // It fits the 8192-token window beside the fixed prompt (before, the
    // whole round was dropped to fit and the model never saw the result).
    assert!(
        text.len() < 8192 * 4 / 2,
        "{} bytes reached the model",
        text.len()
    );
    assert!(text.contains("HEAD-MARK") && text.contains("TAIL-MARK"));
    // The first line says how much the command printed that is not there.
    let omitted: u64 = text
        .split("(output cut: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no note of the cut: {}", &text[..200]));
    assert!(omitted > 31_000_000, "{omitted}");
    assert!(
        text.starts_with("Exit code: 0 (output cut"),
        "{}",
        &text[..200]
    );

    // The editor's view is bounded the same way.
    let shown = tool_updates(&seen, "tool_call_update")
        .into_iter()
        .map(|u| u.to_string().len())
        .max()
        .unwrap();
    assert!(shown < 1024 * 1024, "an update of {shown} bytes");
}

/// What a running command started: the shell's pid, a background child
/// and a foreground one, each written to a file in `dir` once it runs.
const SPAWNING: &str =
    "echo $$ > sh.pid; sleep 600 & echo $! > bg.pid; sleep 600 & echo $! > fg.pid; wait";

fn pids(dir: &std::path::Path) -> Option<Vec<u32>> {
    ["sh.pid", "bg.pid", "fg.pid"]
        .iter()
        .map(|name| {
            std::fs::read_to_string(dir.join(name))
                .ok()?
                .trim()
                .parse()
                .ok()
        })
        .collect()
}

/// However the agent is ended mid-command (the client closes stdin or
/// stdout, or sends SIGTERM), the command and everything it started are
/// gone afterwards: no orphans keep running, no zombies are left.
#[tokio::test]
async fn a_running_command_and_its_children_end_with_the_agent_however_it_ends() {
    use crate::mcp::{alive, eventually};
    for ending in ["stdin closed", "stdout closed", "SIGTERM"] {
        let server = LlmServer::start(scripted_model(vec![(
            "shell",
            json!({"command": SPAWNING}),
        )]))
        .await;
        let config = format!(
            "{}\n[agent]\ndefault_mode = \"auto\"\n",
            config_for(&server, "test-model")
        );
        let mut agent = Agent::spawn(&config).await;
        let session = agent.start_session().await;
        agent.start_prompt(&session, "start something long").await;
        let cwd = agent.cwd();
        let mut started = None;
        eventually(&format!("{ending}: the command runs"), || {
            started = pids(&cwd);
            started.is_some()
        })
        .await;
        let started = started.unwrap_or_default();
        assert!(
            started.iter().all(|pid| alive(*pid)),
            "{ending}: {started:?}"
        );
        match ending {
            "stdin closed" => agent.close_stdin(),
            "stdout closed" => agent.close_stdout(),
            _ => agent.terminate(),
        }
        agent.wait_exit().await;
        for pid in &started {
            eventually(&format!("{ending}: {pid} is gone"), || !alive(*pid)).await;
        }
    }
}
