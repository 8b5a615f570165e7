//! MCP over ACP (unstable `mcp_over_acp`): the editor serves an MCP server
//! on the ACP connection itself, each MCP request an `mcp/message` request
//! to it. The test client plays the editor and its server.

use serde_json::{Value, json};

use crate::support::client::{respond_until, result_for};
use crate::support::harness::{
    Agent, LlmServer, config_for, error_message, scripted_model, tool_updates,
};

fn editor_entry() -> Value {
    json!([{"type": "acp", "name": "editor", "serverId": "ed-1"}])
}

/// The editor's MCP server: `lookup` answers, `broken` makes the editor
/// fail the ACP request, `silent` is never answered (until the agent
/// cancels it: then -32800, as the spec asks). Returns the replies for
/// `message` (nothing for what is not an `mcp/message` request).
fn editor_server(message: &Value, methods: &mut Vec<String>) -> Vec<Value> {
    if message["method"] == "$/cancel_request" {
        return vec![
            json!({"jsonrpc": "2.0", "id": message["params"]["requestId"],
            "error": {"code": -32800, "message": "Request cancelled"}}),
        ];
    }
    if message["method"] != "mcp/message" || message.get("id").is_none() {
        return Vec::new();
    }
    let params = &message["params"];
    assert_eq!(params["serverId"], "ed-1", "{message}");
    assert!(params["requestId"].is_string(), "{message}");
    let method = params["method"].as_str().unwrap_or_default().to_string();
    methods.push(method.clone());
    let inner = match method.as_str() {
        "initialize" => json!({
            "protocolVersion": params["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "editor-tools", "version": "1.0.0"}
        }),
        "tools/list" => json!({"tools": [
            tool("lookup"), tool("broken"), tool("silent")
        ]}),
        "tools/call" => match params["params"]["name"].as_str() {
            Some("lookup") => {
                let word = params["params"]["arguments"]["word"].as_str().unwrap_or("");
                json!({"content": [{"type": "text", "text": format!("{word}: containing iron")}]})
            }
            Some("broken") => {
                return vec![json!({"jsonrpc": "2.0", "id": message["id"],
                    "error": {"code": -32603, "message": "the editor's tool host crashed"}})];
            }
            _ => return Vec::new(),
        },
        other => {
            return vec![result_for(
                message,
                json!({"error": {"code": -32601, "message": format!("no method {other}")}}),
            )];
        }
    };
    vec![result_for(message, json!({"result": inner}))]
}

fn tool(name: &str) -> Value {
    json!({
        "name": name,
        "description": format!("The editor's {name}"),
        "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}},
        "annotations": {"readOnlyHint": true}
    })
}

fn config(server: &LlmServer, unstable: bool) -> String {
    let mut config = format!(
        "{}\n[mcp]\ncall_timeout_secs = 2\n",
        config_for(server, "test-model")
    );
    if unstable {
        config.push_str("[acp]\nunstable = [\"mcp_over_acp\"]\n");
    }
    config
}

#[tokio::test]
async fn the_editors_server_serves_a_tool_and_a_failing_call_fails_alone() {
    let server = LlmServer::start(scripted_model(vec![
        ("editor__lookup", json!({"word": "ferrous"})),
        ("editor__broken", json!({})),
        ("editor__silent", json!({})),
        ("editor__lookup", json!({"word": "cupric"})),
    ]))
    .await;
    let mut agent = Agent::spawn(&config(&server, true)).await;
    let init = agent.initialize().await;
    let caps = &init["result"]["agentCapabilities"]["mcpCapabilities"];
    assert_eq!(caps["acp"], true, "{caps}");
    // The servers start at once: the editor is asked before the answer comes.
    let mut methods = Vec::new();
    let cwd = agent.cwd();
    let id = agent
        .request(
            "session/new",
            json!({"cwd": cwd, "mcpServers": editor_entry()}),
        )
        .await;
    let (_, created) = respond_until(&mut agent, id, |m| editor_server(m, &mut methods)).await;
    let session = created["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_string();
    let id = agent.start_prompt(&session, "define ferrous").await;
    let (seen, answer) = respond_until(&mut agent, id, |m| editor_server(m, &mut methods)).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(methods[..2], ["initialize", "tools/list"], "{methods:?}");
    assert_eq!(
        methods.iter().filter(|m| *m == "tools/call").count(),
        4,
        "{methods:?}"
    );

    // The model saw the editor's tools and their results.
    let first = &server.chat_requests()[0];
    let offered: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(offered.contains(&"editor__lookup"), "{offered:?}");
    let finished: Vec<&Value> = tool_updates(&seen, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "completed" || u["status"] == "failed")
        .collect();
    let statuses: Vec<&str> = finished
        .iter()
        .map(|u| u["status"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        statuses,
        ["completed", "failed", "failed", "completed"],
        "{finished:?}"
    );
    let text = |u: &Value| u.to_string();
    assert!(
        text(finished[0]).contains("ferrous: containing iron"),
        "{}",
        finished[0]
    );
    assert!(text(finished[1]).contains("crashed"), "{}", finished[1]);
    assert!(
        text(finished[2]).contains("did not answer within 2 s"),
        "{}",
        finished[2]
    );
    // The timed-out call's request, and only it, was cancelled at the editor.
    let silent: Vec<&Value> = seen
        .iter()
        .filter(|m| m["method"] == "mcp/message" && m["params"]["params"]["name"] == "silent")
        .collect();
    assert_eq!(silent.len(), 1, "{seen:?}");
    let cancels: Vec<&Value> = seen
        .iter()
        .filter(|m| m["method"] == "$/cancel_request")
        .collect();
    assert_eq!(cancels.len(), 1, "{cancels:?}");
    assert_eq!(
        cancels[0]["params"]["requestId"], silent[0]["id"],
        "{cancels:?}"
    );
    assert!(
        cancels[0].get("id").is_none(),
        "a notification: {}",
        cancels[0]
    );
    // The server still works after a failed and a timed-out call.
    assert!(
        text(finished[3]).contains("cupric: containing iron"),
        "{}",
        finished[3]
    );
    let requests = server.chat_requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(last.contains("cupric: containing iron"), "{last}");
}

#[tokio::test]
async fn without_opting_in_acp_servers_are_refused_and_not_advertised() {
    let server = LlmServer::start(scripted_model(vec![])).await;
    let mut agent = Agent::spawn(&config(&server, false)).await;
    let init = agent.initialize().await;
    let caps = &init["result"]["agentCapabilities"]["mcpCapabilities"];
    assert_ne!(caps["acp"], true, "{caps}");
    let (_, refused) = agent
        .call(
            "session/new",
            json!({"cwd": agent.cwd(), "mcpServers": editor_entry()}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        error_message(&refused).contains("mcpServers[0]"),
        "{refused}"
    );
    // Nothing was sent to the editor on the way.
    let session = agent.new_session().await;
    let (seen, answer) = agent.prompt(&session, "hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(
        seen.iter().all(|m| m["method"] != "mcp/message"),
        "{seen:?}"
    );
}
