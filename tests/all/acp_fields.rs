//! ACP 1.15.1 fields on the updates a turn sends: the tool's `name` on
//! `tool_call` and `tool_call_update`, and the session's `cost` on
//! `usage_update` when the config prices the model (none otherwise); and
//! fields outside the stable v1 schema (`models`, the prompt answer's
//! `usage`) only for a client that asks (Crucible's gets them unasked:
//! crucible_client.rs).

use serde_json::json;

use crate::support::harness::{Agent, LlmServer, config_for, scripted_model, tool_updates};

async fn read_turn(extra_config: &str) -> Vec<serde_json::Value> {
    let server = LlmServer::start(scripted_model(vec![(
        "read_file",
        json!({"path": "hello.txt"}),
    )]))
    .await;
    let config = format!("{}{extra_config}", config_for(&server, "test-model"));
    let mut agent = Agent::spawn(&config).await;
    std::fs::write(agent.cwd().join("hello.txt"), "hi\n").unwrap();
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "read it").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    seen
}

#[tokio::test]
async fn tool_updates_name_the_tool_and_usage_carries_the_priced_cost() {
    let seen = read_turn(
        "\n[prices.\"test-model\"]\ninput = 1000.0\noutput = 2000.0\ncurrency = \"EUR\"\n",
    )
    .await;
    let call = tool_updates(&seen, "tool_call");
    assert_eq!(call[0]["name"], "read_file", "{:?}", call[0]);
    let updates = tool_updates(&seen, "tool_call_update");
    assert!(!updates.is_empty());
    for update in updates {
        assert_eq!(update["name"], "read_file", "{update}");
    }
    // The scripted model reports 50+10 tokens, then 60+5.
    let costs: Vec<f64> = tool_updates(&seen, "usage_update")
        .iter()
        .map(|u| {
            assert_eq!(u["cost"]["currency"], "EUR", "{u}");
            u["cost"]["amount"].as_f64().unwrap()
        })
        .collect();
    assert_eq!(costs.len(), 2, "{costs:?}");
    assert!((costs[0] - 0.07).abs() < 1e-9, "{costs:?}");
    assert!((costs[1] - 0.14).abs() < 1e-9, "cumulative: {costs:?}");
}

#[tokio::test]
async fn without_a_price_no_cost_is_sent() {
    let seen = read_turn("").await;
    let usage = tool_updates(&seen, "usage_update");
    assert!(!usage.is_empty());
    assert!(usage.iter().all(|u| u.get("cost").is_none()), "{usage:?}");
}

#[tokio::test]
async fn models_and_usage_go_only_to_a_client_that_asks() {
    let opt_in = "\n[acp]\nunstable = [\"models\", \"usage\"]\n";
    for (extra_config, asked) in [("", false), (opt_in, true)] {
        let server = LlmServer::start(scripted_model(Vec::new())).await;
        let config = format!("{}{extra_config}", config_for(&server, "test-model"));
        let mut agent = Agent::spawn(&config).await;
        agent.initialize().await;
        let cwd = agent.cwd();
        let (_, new) = agent
            .call("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        assert!(new["result"]["configOptions"].is_array(), "{new}");
        assert_eq!(new["result"].get("models").is_some(), asked, "{new}");
        if asked {
            assert_eq!(new["result"]["models"]["currentModelId"], "test-model");
        }
        let session = new["result"]["sessionId"].as_str().unwrap().to_string();
        let (_, answer) = agent.prompt(&session, "hi").await;
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        assert_eq!(answer["result"].get("usage").is_some(), asked, "{answer}");
        // A resumed session's answer follows the same rule.
        let (_, closed) = agent
            .call("session/close", json!({"sessionId": session}))
            .await;
        assert!(closed.get("result").is_some(), "{closed}");
        let (_, resumed) = agent
            .call(
                "session/resume",
                json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
            )
            .await;
        assert!(resumed["result"]["configOptions"].is_array(), "{resumed}");
        assert_eq!(
            resumed["result"].get("models").is_some(),
            asked,
            "{resumed}"
        );
    }
}
