//! The test client speaking ACP v2 (`protocolVersion: 2`), on top of
//! [`super::harness::Agent`]: initialize with `info` and `capabilities`,
//! prompts acknowledged with a `messageId`, the turn followed through
//! `state_update`s until `idle`, and a client's view of the upserts
//! (messages by `messageId`, tool calls by `toolCallId`). Every
//! `session/update` it reads is also parsed with the schema crate's v2
//! types, so a shape the spec does not allow fails the test. The v1 helpers
//! in `harness.rs` are unchanged.

use std::collections::BTreeMap;
use std::path::Path;

use agent_client_protocol_schema::v2;
use serde_json::{Value, json};

use super::harness::Agent;

/// What a v2 editor says about itself in `initialize`.
pub fn initialize_v2_params() -> Value {
    json!({"protocolVersion": 2, "info": {"name": "harness-v2", "title": "Harness v2", "version": "0"},
        "capabilities": {}})
}

/// `[acp] unstable = ["steering"]` added to `config`.
pub fn with_steering(config: &str) -> String {
    format!("{config}\n[acp]\nunstable = [\"steering\"]\n")
}

impl Agent {
    /// `initialize` as a v2 client; the whole answer, checked to be a v2
    /// `InitializeResponse`.
    pub async fn initialize_v2(&mut self) -> Value {
        let (_, response) = self.call("initialize", initialize_v2_params()).await;
        if let Some(result) = response.get("result") {
            v2_parse::<v2::InitializeResponse>(result, "the initialize answer");
        }
        response
    }

    /// v2 `initialize` (which must answer version 2), then a session in
    /// the agent's dir; returns its id.
    pub async fn start_session_v2(&mut self) -> String {
        let response = self.initialize_v2().await;
        assert_eq!(response["result"]["protocolVersion"], 2, "{response}");
        self.new_session().await
    }

    /// Send a text prompt; returns its request id (v2 answers it with the
    /// message's id once accepted, not at the turn's end).
    pub async fn start_prompt_v2(&mut self, session: &str, text: &str) -> i64 {
        self.start_prompt(session, text).await
    }

    /// Send a text prompt for `session`'s running turn (steering) and wait
    /// until the session holds it: sent with an idempotency key, then
    /// again, the retry is answered at once with the first one's id, and
    /// only once the session has taken the first (it reads them in order).
    /// The key is the text: steer different texts in one session. Returns
    /// the first request's id and the messages read meanwhile.
    pub async fn steer_v2(&mut self, session: &str, text: &str) -> (i64, Vec<Value>) {
        let params = json!({"sessionId": session, "prompt": [{"type": "text", "text": text}],
            "idempotencyKey": format!("steer: {text}")});
        let id = self.request("session/prompt", params.clone()).await;
        let (seen, retry) = self.call("session/prompt", params).await;
        let held = retry
            .get("result")
            .unwrap_or_else(|| panic!("the retry of a waiting prompt was refused: {retry}"));
        v2_parse::<v2::PromptResponse>(held, "the retry's answer");
        (id, seen)
    }

    /// Wait for the answer to prompt `id`; returns the messages read on the
    /// way and the `messageId` it acknowledges (the test fails on an error
    /// or an answer without one).
    pub async fn prompt_ack(&mut self, id: i64) -> (Vec<Value>, String) {
        let (seen, response) = self.response(id).await;
        let result = response
            .get("result")
            .unwrap_or_else(|| panic!("the prompt was not accepted: {response}"));
        let ack: v2::PromptResponse = v2_parse(result, "the prompt's answer");
        (seen, ack.message_id.to_string())
    }

    /// Every message from the agent, in order, until (and with) `session`'s
    /// next `state_update` `idle` that carries a stop reason: the end of
    /// its foreground work. Requests from the agent are left unanswered.
    pub async fn until_idle(&mut self, session: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.next_message().await;
            let ends = is_idle_end(&message, session);
            seen.push(message);
            if ends {
                return seen;
            }
        }
    }

    /// Every message until the answer to `id` arrives, that answer last.
    pub async fn until_answer(&mut self, id: i64) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.next_message().await;
            let ends = message.get("method").is_none() && message["id"] == id;
            seen.push(message);
            if ends {
                return seen;
            }
        }
    }

    /// `session/resume` of `session` in `cwd` with `replayFrom: start`:
    /// what it replayed, and its answer.
    pub async fn resume_replaying(&mut self, session: &str, cwd: &Path) -> (Vec<Value>, Value) {
        self.call(
            "session/resume",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": [], "replayFrom": {"type": "start"}}),
        )
        .await
    }

    /// This agent's stdin closed and its exit awaited, then a second agent
    /// on the same data dir (with `config`), initialized as a v2 client.
    pub async fn restarted_v2(&mut self, config: &str) -> Agent {
        self.close_stdin();
        self.wait_exit().await;
        let mut again = Agent::spawn_sharing(config, self).await;
        let response = again.initialize_v2().await;
        assert_eq!(response["result"]["protocolVersion"], 2, "{response}");
        again
    }
}

/// `value` as the v2 type `T`; fails the test naming `what` when the
/// schema crate's v2 types do not read it.
pub fn v2_parse<T: serde::de::DeserializeOwned>(value: &Value, what: &str) -> T {
    serde_json::from_value(value.clone())
        .unwrap_or_else(|err| panic!("{what} is not v2 ({err}): {value}"))
}

pub fn is_idle_end(message: &Value, session: &str) -> bool {
    let update = &message["params"]["update"];
    message["method"] == "session/update"
        && message["params"]["sessionId"] == session
        && update["sessionUpdate"] == "state_update"
        && update["state"] == "idle"
        && update
            .get("stopReason")
            .is_some_and(|reason| !reason.is_null())
}

/// The `update`s of `session`'s `session/update` notifications, in order,
/// each checked to parse as a v2 notification.
pub fn v2_updates(messages: &[Value], session: &str) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session)
        .map(|m| {
            v2_parse::<v2::UpdateSessionNotification>(&m["params"], "a session/update");
            m["params"]["update"].clone()
        })
        .collect()
}

/// `session`'s foreground states in order: `running`, `requires_action`,
/// and `idle:STOP_REASON` (`idle` alone for a snapshot without one).
pub fn states(messages: &[Value], session: &str) -> Vec<String> {
    v2_updates(messages, session)
        .iter()
        .filter(|u| u["sessionUpdate"] == "state_update")
        .map(|u| {
            let state = u["state"].as_str().unwrap_or_default().to_string();
            match u["stopReason"].as_str() {
                Some(reason) => format!("{state}:{reason}"),
                None => state,
            }
        })
        .collect()
}

/// One message of the conversation as a v2 client holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// `user`, `agent` or `thought`.
    pub role: &'static str,
    pub message_id: String,
    /// Its text blocks joined.
    pub text: String,
}

/// What a message update is about: its role, and whether it appends.
fn message_kind(kind: &str) -> Option<(&'static str, bool)> {
    match kind {
        "user_message_chunk" => Some(("user", true)),
        "agent_message_chunk" => Some(("agent", true)),
        "agent_thought_chunk" => Some(("thought", true)),
        "user_message" => Some(("user", false)),
        "agent_message" => Some(("agent", false)),
        "agent_thought" => Some(("thought", false)),
        _ => None,
    }
}

fn text_of(blocks: &[&Value]) -> String {
    blocks
        .iter()
        .filter_map(|block| block["text"].as_str())
        .collect()
}

/// `session`'s messages by `messageId`, in the order each first appeared,
/// with v2's rules: a chunk appends, a whole-message update replaces (an
/// omitted `content` leaves it, `null` clears it). Fails the test on a
/// message update without a `messageId`.
pub fn messages(all: &[Value], session: &str) -> Vec<Message> {
    let mut order: Vec<String> = Vec::new();
    let mut held: BTreeMap<String, (&'static str, Vec<Value>)> = BTreeMap::new();
    for update in v2_updates(all, session) {
        let Some((role, appends)) = message_kind(update["sessionUpdate"].as_str().unwrap_or(""))
        else {
            continue;
        };
        let id = update["messageId"]
            .as_str()
            .unwrap_or_else(|| panic!("a message update without a messageId: {update}"))
            .to_string();
        let entry = held.entry(id.clone()).or_insert_with(|| {
            order.push(id.clone());
            (role, Vec::new())
        });
        if appends {
            entry.1.push(update["content"].clone());
        } else if let Some(content) = update.get("content") {
            entry.1 = content.as_array().cloned().unwrap_or_default();
        }
    }
    order
        .into_iter()
        .map(|id| {
            let (role, blocks) = &held[&id];
            Message {
                role,
                message_id: id.clone(),
                text: text_of(&blocks.iter().collect::<Vec<_>>()),
            }
        })
        .collect()
}

/// `session`'s tool calls by `toolCallId` as a v2 client builds them from
/// `tool_call_update` upserts (omitted = unchanged, `null` = cleared, a
/// value replaces) and `tool_call_content_chunk`s (appended to `content`).
pub fn tool_calls(all: &[Value], session: &str) -> BTreeMap<String, Value> {
    let mut calls: BTreeMap<String, Value> = BTreeMap::new();
    for update in v2_updates(all, session) {
        let kind = update["sessionUpdate"].as_str().unwrap_or_default();
        let Some(id) = update["toolCallId"].as_str() else {
            continue;
        };
        let call = calls
            .entry(id.to_string())
            .or_insert_with(|| json!({"toolCallId": id}));
        match kind {
            "tool_call_update" => {
                for (key, value) in update.as_object().into_iter().flatten() {
                    if key == "sessionUpdate" {
                        continue;
                    }
                    if value.is_null() {
                        call.as_object_mut().unwrap().remove(key);
                    } else {
                        call[key] = value.clone();
                    }
                }
            }
            "tool_call_content_chunk" => {
                let content = call
                    .as_object_mut()
                    .unwrap()
                    .entry("content")
                    .or_insert_with(|| json!([]));
                if let Some(items) = content.as_array_mut() {
                    items.push(update["content"].clone());
                }
            }
            _ => {}
        }
    }
    calls
}

/// `session`'s one tool call (its agent-given `toolCallId`, and the call as
/// [`tool_calls`] builds it); fails the test unless there is exactly one.
pub fn only_tool_call(all: &[Value], session: &str) -> (String, Value) {
    let calls = tool_calls(all, session);
    assert_eq!(calls.len(), 1, "not one tool call: {calls:#?}");
    calls.into_iter().next().unwrap()
}

/// Where (the index among `session`'s updates) the first update for which
/// `pred` holds is; fails the test when none does.
pub fn position(updates: &[Value], what: &str, pred: impl Fn(&Value) -> bool) -> usize {
    updates
        .iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no {what} among {updates:#?}"))
}

/// Where the answer to request `id` is among `messages`.
pub fn answer_position(messages: &[Value], id: i64) -> usize {
    messages
        .iter()
        .position(|m| m.get("method").is_none() && m["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {id} among {messages:#?}"))
}
