//! The unstable `providers/list`, `set` and `disable`, turned on with
//! `[acp] unstable = ["providers"]`: the client sees the configured
//! providers, reroutes one to another server with its own key (the next
//! model call goes there), and turns one off; the default one stays.

use serde_json::{Value, json};

use crate::support::harness::{Agent, LlmServer, config_for, error_message, scripted_model};

fn listed(response: &Value, name: &str) -> Value {
    response["result"]["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["providerId"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} not listed: {response}"))
}

#[tokio::test]
async fn a_client_lists_reroutes_and_disables_providers() {
    let first = LlmServer::start(scripted_model(vec![])).await;
    let second = LlmServer::start(scripted_model(vec![])).await;
    let config = format!(
        "{}\n[llm.providers.spare]\ntype = \"openai\"\nendpoint = \"{}\"\ndefault_model = \"test-model\"\n\n[acp]\nunstable = [\"providers\"]\n",
        config_for(&first, "test-model"),
        first.base_url()
    );
    let mut agent = Agent::spawn(&config).await;
    let init = agent.initialize().await;
    assert!(
        init["result"]["agentCapabilities"]["providers"].is_object(),
        "{init}"
    );

    let (_, list) = agent.call("providers/list", json!({})).await;
    let local = listed(&list, "local");
    assert_eq!(local["required"], true, "{list}");
    assert_eq!(local["current"]["apiType"], "openai", "{list}");
    assert_eq!(local["current"]["baseUrl"], first.base_url(), "{list}");
    assert_eq!(listed(&list, "spare")["required"], false, "{list}");

    // Rerouted, with a key of the client's: the next call goes there.
    let session = agent.new_session().await;
    let (_, set) = agent
        .call(
            "providers/set",
            json!({"providerId": "local", "apiType": "openai", "baseUrl": second.base_url(),
                "headers": {"Authorization": "Bearer sk-client-set-42"}}),
        )
        .await;
    assert!(set["result"].is_object(), "{set}");
    let (_, answer) = agent.prompt(&session, "where do you run?").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let sent = second.chat_requests();
    assert_eq!(sent.len(), 1, "the call went to the new server");
    assert_eq!(
        sent[0].header("authorization"),
        Some("Bearer sk-client-set-42")
    );
    assert!(first.chat_requests().is_empty());
    let (_, list) = agent.call("providers/list", json!({})).await;
    assert_eq!(
        listed(&list, "local")["current"]["baseUrl"],
        second.base_url()
    );
    assert!(!list.to_string().contains("sk-client-set-42"), "{list}");

    // Off: listed without a current config; the default cannot be.
    let (_, off) = agent
        .call("providers/disable", json!({"providerId": "spare"}))
        .await;
    assert!(off["result"].is_object(), "{off}");
    let (_, list) = agent.call("providers/list", json!({})).await;
    assert!(
        listed(&list, "spare")
            .get("current")
            .is_none_or(Value::is_null),
        "{list}"
    );
    let (_, refused) = agent
        .call("providers/disable", json!({"providerId": "local"}))
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        error_message(&refused).contains("default provider"),
        "{refused}"
    );

    // What it cannot do is refused, saying why, never echoing a header's value.
    let (_, odd) = agent
        .call(
            "providers/set",
            json!({"providerId": "spare", "apiType": "openai", "baseUrl": second.base_url(),
                "headers": {"X-Route": "route-secret-7"}}),
        )
        .await;
    assert_eq!(odd["error"]["code"], -32602, "{odd}");
    assert!(!odd.to_string().contains("route-secret-7"), "{odd}");
    let (_, unknown) = agent
        .call(
            "providers/set",
            json!({"providerId": "nope", "apiType": "openai", "baseUrl": second.base_url(), "headers": {}}),
        )
        .await;
    assert!(
        error_message(&unknown).contains("providers/list"),
        "{unknown}"
    );
}
