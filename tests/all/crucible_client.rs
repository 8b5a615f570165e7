//! Crucible's own ACP client (`crates/crucible-daemon/src/acp/client/` in
//! Mootikins/crucible), as it behaves: outside a turn it reads exactly one
//! line after a request and takes it as the answer; it sends no
//! `clientInfo`, offers neither `fs` nor `terminal`, uses its own mode ids
//! (`normal`, `plan`, `auto`), switches models with `session/set_model`,
//! always passes an MCP server named `crucible` (here one that cannot
//! start), answers permission requests by option kind, sends
//! `session/cancel` only when an update arrives, and parses every frame
//! with schema 0.11.4 (`acp_crucible`), the version it is built on.
//!
//! `make test` runs this module once more against the release binary
//! (`CRUCIBLE_AGENT_BIN`).

use std::sync::{Arc, Mutex};

use acp_crucible as old;
use serde_json::{Value, json};

use crate::support::harness::{
    Agent, LlmServer, Recorded, Reply, Split, agent_binary, models_reply, openai_stream,
    stream_head,
};

/// Crucible's client over the agent's pipes, keeping the transcript.
struct Crucible {
    agent: Agent,
    next_id: u64,
    transcript: Vec<String>,
}

impl Crucible {
    fn new(agent: Agent) -> Self {
        Self {
            agent,
            next_id: 0,
            transcript: Vec::new(),
        }
    }

    async fn write(&mut self, frame: Value) {
        self.transcript.push(format!("→ {frame}"));
        self.agent.send(&frame).await;
    }

    async fn read(&mut self) -> Value {
        let frame = self.agent.next_message().await;
        self.transcript.push(format!("← {frame}"));
        frame
    }

    /// `send_request`: write the request, take the next line as its answer.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.write(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let answer = self.read().await;
        assert!(
            answer.get("method").is_none() && answer["id"] == json!(id),
            "Crucible takes the next line as the answer to {method}, and got: {answer}"
        );
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{method}: Crucible needs a result, got {answer}"))
    }

    /// `send_prompt_with_streaming`: reads until the prompt's answer,
    /// answering permission requests by option kind; `cancel_after_update`
    /// sends `session/cancel` at the first update (Crucible cancels only
    /// when a frame arrives). Returns the updates and the parsed result.
    async fn prompt(
        &mut self,
        session: &str,
        text: &str,
        cancel_after_update: bool,
    ) -> (Vec<Value>, old::PromptResponse, Value) {
        let id = self.next_id;
        self.next_id += 1;
        self.write(
            json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}}),
        )
        .await;
        let mut updates = Vec::new();
        let mut cancelled = false;
        loop {
            let frame = self.read().await;
            assert!(
                frame.get("error").is_none(),
                "an error frame ends Crucible's turn: {frame}"
            );
            match frame["method"].as_str() {
                Some("session/update") => {
                    let update = frame["params"]["update"].clone();
                    if must_parse(&update) {
                        serde_json::from_value::<old::SessionNotification>(frame["params"].clone())
                            .unwrap_or_else(|err| {
                                panic!("schema 0.11.4 cannot read {frame}: {err}")
                            });
                    }
                    updates.push(update);
                    if cancel_after_update && !cancelled {
                        cancelled = true;
                        self.write(json!({"jsonrpc": "2.0", "method": "session/cancel",
                            "params": {"sessionId": session}}))
                            .await;
                    }
                }
                Some("session/request_permission") => {
                    // Unanswerable otherwise: Crucible would not reply at all.
                    let request_id = frame["id"]
                        .as_u64()
                        .unwrap_or_else(|| panic!("Crucible answers only numeric ids: {frame}"));
                    let request: old::RequestPermissionRequest =
                        serde_json::from_value(frame["params"].clone()).unwrap_or_else(|err| {
                            panic!("schema 0.11.4 cannot read {frame}: {err}")
                        });
                    let option = request
                        .options
                        .iter()
                        .find(|option| option.kind == old::PermissionOptionKind::AllowOnce)
                        .unwrap_or_else(|| panic!("no allow_once option: {frame}"));
                    let choice = option.option_id.to_string();
                    self.write(json!({"jsonrpc": "2.0", "id": request_id,
                        "result": {"outcome": {"outcome": "selected", "optionId": choice}}}))
                        .await;
                }
                Some(method) => {
                    assert!(frame.get("id").is_none(), "Crucible cannot serve {method}");
                }
                None if frame["id"] == json!(id) => {
                    let result = frame["result"].clone();
                    let parsed = serde_json::from_value(result.clone())
                        .unwrap_or_else(|err| panic!("schema 0.11.4 cannot read {frame}: {err}"));
                    return (updates, parsed, result);
                }
                None => {}
            }
        }
    }
}

/// The updates Crucible acts on; others it may skip with a warning.
fn must_parse(update: &Value) -> bool {
    matches!(
        update["sessionUpdate"].as_str(),
        Some("agent_message_chunk" | "agent_thought_chunk" | "tool_call" | "tool_call_update")
    )
}

fn text_of(updates: &[Value], kind: &str) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// The model: a shell call, then an answer; then a reply that never ends
/// (the cancelled turn); then a plain answer.
fn model() -> impl Fn(&Recorded) -> Reply {
    let calls = Arc::new(Mutex::new(0usize));
    move |request| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model", "other-model"]);
        }
        let mut n = calls.lock().unwrap();
        *n += 1;
        let bytes = match *n {
            1 => openai_stream(
                &[
                    json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "shell", "arguments": json!({"command": "echo from-crucible"}).to_string()}}]}),
                ],
                "tool_calls",
                (50, 10),
            ),
            2 => openai_stream(
                &[json!({"content": "The command printed it."})],
                "stop",
                (60, 5),
            ),
            3 => {
                return Reply::stream(stream_head(&["Thinking ", "about "]), Split::Every(9))
                    .hanging();
            }
            _ => openai_stream(&[json!({"content": "Still here."})], "stop", (70, 3)),
        };
        Reply::stream(bytes, Split::Every(17))
    }
}

#[tokio::test]
async fn a_whole_chat_with_crucibles_client_discipline() {
    let server = LlmServer::start(model()).await;
    let config = format!(
        "[llm]\ndefault = \"local\"\n\n[llm.providers.local]\ntype = \"openai\"\nendpoint = \"{}\"\ndefault_model = \"test-model\"\ncontext_window = 32768\n",
        server.base_url()
    );
    let mut crucible = Crucible::new(Agent::spawn(&config).await);
    let cwd = crucible.agent.cwd();

    // Exactly the frame Crucible sends: a number, no clientInfo, no fs or terminal.
    let init = crucible
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false}}),
        )
        .await;
    let init: old::InitializeResponse = serde_json::from_value(init).unwrap();
    assert!(init.agent_capabilities.mcp_capabilities.http);

    // The `crucible` MCP server Crucible always passes: here its `cru` is missing.
    let cru = cwd.join("no-such-dir").join("cru");
    let new = crucible
        .request(
            "session/new",
            json!({"cwd": cwd, "mcpServers": [{"name": "crucible", "command": cru,
                "args": ["mcp", "--stdio", "--standalone"], "env": []}]}),
        )
        .await;
    let new: old::NewSessionResponse = serde_json::from_value(new).unwrap();
    let session = new.session_id.to_string();
    let models = new.models.expect("the model list Crucible reads");
    assert_eq!(models.current_model_id.to_string(), "test-model");
    assert!(
        models
            .available_models
            .iter()
            .any(|m| m.model_id.to_string() == "test-model")
    );

    // Crucible re-applies its own mode ids and a model, one line each.
    for mode in ["plan", "normal"] {
        let answer = crucible
            .request(
                "session/set_mode",
                json!({"sessionId": session, "modeId": mode}),
            )
            .await;
        assert_eq!(answer, json!({}));
        serde_json::from_value::<old::SetSessionModeResponse>(answer).unwrap();
    }
    let answer = crucible
        .request(
            "session/set_model",
            json!({"sessionId": session, "modelId": "other-model"}),
        )
        .await;
    serde_json::from_value::<old::SetSessionModelResponse>(answer).unwrap();

    // A prompt with a tool call: asks, runs, shows the result from rawOutput.
    let (updates, result, raw) = crucible
        .prompt(&session, "Run echo from-crucible", false)
        .await;
    assert_eq!(result.stop_reason, old::StopReason::EndTurn);
    assert_eq!(raw["usage"]["inputTokens"], 110, "{raw}");
    assert_eq!(raw["usage"]["outputTokens"], 15, "{raw}");
    assert!(text_of(&updates, "agent_message_chunk").contains("The command printed it."));
    // The dead `crucible` server is told about, and the turn went on.
    assert!(
        text_of(&updates, "agent_thought_chunk").contains("crucible"),
        "{updates:?}"
    );
    let done: Vec<&Value> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .collect();
    assert_eq!(done.len(), 1, "{updates:?}");
    let raw_output = &done[0]["rawOutput"];
    assert!(
        raw_output["output"]
            .as_str()
            .is_some_and(|o| o.contains("from-crucible")),
        "{raw_output}"
    );
    assert!(
        raw_output.get("error").is_none(),
        "Crucible reads `error` as failure"
    );
    // What changed before the turn (mode back to act, the model) came in it.
    let options = updates
        .iter()
        .rfind(|u| u["sessionUpdate"] == "config_option_update")
        .expect("the settings made before the turn");
    let current = |id: &str| {
        options["configOptions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == id)
            .map(|o| o["currentValue"].clone())
    };
    assert_eq!(current("model"), Some(json!("other-model")));
    assert_eq!(current("mode"), Some(json!("act")));
    let chats = server.chat_requests();
    assert!(
        chats.iter().all(|r| r.body["model"] == "other-model"),
        "{:?}",
        chats.iter().map(|r| &r.body["model"]).collect::<Vec<_>>()
    );

    // Cancel, as Crucible does it: at the next update.
    let (_, result, _) = crucible.prompt(&session, "Tell me a story", true).await;
    assert_eq!(result.stop_reason, old::StopReason::Cancelled);

    // The session goes on.
    let (updates, result, _) = crucible.prompt(&session, "Are you there?", false).await;
    assert_eq!(result.stop_reason, old::StopReason::EndTurn);
    assert_eq!(text_of(&updates, "agent_message_chunk"), "Still here.");

    // Outside a turn, still one line per request.
    let answer = crucible
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "auto"}),
        )
        .await;
    assert_eq!(answer, json!({}));

    eprintln!("transcript:\n{}", crucible.transcript.join("\n"));
}

#[tokio::test]
async fn handshakes_older_and_odder_clients_send_are_tolerated() {
    let server = LlmServer::start(model()).await;
    let config = format!(
        "[llm.providers.local]\ntype = \"openai\"\nendpoint = \"{}\"\ndefault_model = \"test-model\"\ncontext_window = 32768\n",
        server.base_url()
    );
    for version in [json!("1"), json!(7), json!("2025-01-01"), json!(70000)] {
        let mut crucible = Crucible::new(Agent::spawn(&config).await);
        // Unknown fields anywhere are ignored.
        let init = crucible
            .request(
                "initialize",
                json!({"protocolVersion": version, "clientCapabilities": {"fs": {"readTextFile": false, "later": true}, "terminal": false, "shinyNew": {}}, "extra": 1}),
            )
            .await;
        assert_eq!(init["protocolVersion"], 1, "asked {version}: {init}");
        let new = crucible
            .request(
                "session/new",
                json!({"cwd": crucible.agent.cwd(), "mcpServers": [], "unknownField": [1, 2]}),
            )
            .await;
        let session = new["sessionId"].as_str().unwrap().to_string();
        // An old draft's `content` instead of `prompt`: told which field.
        crucible
            .write(
                json!({"jsonrpc": "2.0", "id": 99, "method": "session/prompt",
                "params": {"sessionId": session, "content": [{"type": "text", "text": "hi"}]}}),
            )
            .await;
        let answer = crucible.read().await;
        assert_eq!(answer["id"], 99);
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("`content`") && message.contains("`prompt`"),
            "{message}"
        );
    }
}

/// Crucible's agent discovery runs `<agent> --version` with stdin closed
/// (and gives it 2 s): it must answer without reading a config or stdin,
/// even when the config is broken.
#[tokio::test]
async fn version_answers_with_stdin_closed_and_a_broken_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[llm.providers.x]\ntype = \"nonsense\"\n").unwrap();
    let output = tokio::process::Command::new(agent_binary())
        .arg("--version")
        .env("CRUCIBLE_CONFIG", &config)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.starts_with("crucible-agent ") && stdout.contains(env!("CARGO_PKG_VERSION")),
        "{stdout}"
    );
}
