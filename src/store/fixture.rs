//! The session directory checked in under `tests/fixtures/sessions/`, written
//! by the binary of commit a899df2 (before the store had types of its own),
//! must read, re-encode and rebuild exactly as that binary did: what users
//! have on disk keeps loading. The expectations beside it were captured from
//! that binary's `session/load`; see the README there.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::disk::{Metadata, MetadataOut, StoredEvent};
use super::{Store, context_from, replay_from};
use crate::client::Update;
use crate::context::ContextSettings;
use crate::events::AgentEvent;
use crate::model::{Message, Part, Role};

const ID: &str = "1a16db45-1483-4fb1-ae8c-5d2f2067f4a5";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn expected(name: &str) -> String {
    let path = fixtures().join("sessions").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn read() -> (Metadata, Vec<StoredEvent>) {
    Store::new(&fixtures()).read(&ID.into()).unwrap()
}

/// Every line reads as a known event and encodes back to the same bytes
/// (the same values, for floats); the metadata only gains its format
/// version.
#[test]
fn the_fixture_reencodes_byte_for_byte() {
    let history = expected(&format!("{ID}/history.jsonl"));
    let (metadata, events) = read();
    let lines: Vec<&str> = history.lines().collect();
    assert_eq!(events.len(), lines.len());
    for (event, line) in events.iter().zip(lines) {
        assert_ne!(*event, StoredEvent::Unknown, "{line}");
        let encoded = serde_json::to_string(event).unwrap();
        if matches!(event, StoredEvent::TurnEnd { .. }) {
            // serde_json parses floats to within an ulp (no `float_roundtrip`),
            // so the drift's last digits may differ: the values are the same.
            let parsed: Value = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_value(event).unwrap(), parsed);
        } else {
            assert_eq!(encoded, line);
        }
    }

    let on_disk: Value = serde_json::from_str(&expected(&format!("{ID}/metadata.json"))).unwrap();
    assert!(on_disk.get("format_version").is_none());
    let written = serde_json::to_value(MetadataOut {
        format_version: 1,
        metadata: &metadata,
    })
    .unwrap();
    let mut with_version = on_disk;
    with_version["format_version"] = json!(1);
    assert_eq!(written, with_version);
    assert_eq!(metadata.permissions.get("write_file"), Some(&true));
}

/// A replayed update reduced to what identifies it, in the terms of the
/// ACP notification the original binary sent for it.
/// A replayed prompt is one chunk per part, as ACP v1 shows it.
fn identify(update: &Update) -> Vec<Value> {
    let text = |kind: &str, text: &str| json!([kind, text]);
    let Update::UserPrompt(prompt) = update else {
        return vec![identify_one(update)];
    };
    assert_eq!(prompt.origin, crate::client::PromptOrigin::Replayed);
    (prompt.content.iter())
        .map(|part| match part {
            Part::Text { text: t } => text("user_message_chunk", t),
            Part::Image { data, .. } => text("user_message_chunk", data),
            other => panic!("not a replayed part: {other:?}"),
        })
        .collect()
}

fn identify_one(update: &Update) -> Value {
    let text = |kind: &str, text: &str| json!([kind, text]);
    match update {
        Update::Agent(AgentEvent::AgentText(t)) => text("agent_message_chunk", t),
        Update::Agent(AgentEvent::Thought(t)) => text("agent_thought_chunk", t),
        Update::Agent(AgentEvent::ToolCall(call)) => {
            json!(["tool_call", call.id, call.title, call.kind.as_str()])
        }
        Update::Agent(AgentEvent::ToolCallUpdate(progress)) => {
            let status = serde_json::to_value(progress.status).unwrap();
            json!(["tool_call_update", progress.id, status])
        }
        Update::Agent(AgentEvent::Plan(entries)) => {
            let entries: Vec<&str> = entries.iter().map(|e| e.content.as_str()).collect();
            json!(["plan", entries])
        }
        other => panic!("not a replayed update: {other:?}"),
    }
}

fn identify_notification(update: &Value) -> Value {
    let kind = update["sessionUpdate"].as_str().unwrap();
    match kind {
        "user_message_chunk" | "agent_message_chunk" | "agent_thought_chunk" => {
            let content = &update["content"];
            let text = content.get("text").unwrap_or(&content["data"]);
            json!([kind, text])
        }
        "tool_call" => json!([kind, update["toolCallId"], update["title"], update["kind"]]),
        "tool_call_update" => json!([kind, update["toolCallId"], update["status"]]),
        "plan" => {
            let entries: Vec<&Value> = update["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| &e["content"])
                .collect();
            json!([kind, entries])
        }
        other => panic!("unexpected notification {other}"),
    }
}

#[test]
fn the_fixture_replays_what_the_original_binary_replayed() {
    let (_, events) = read();
    let replay: Vec<Value> = replay_from(&events).iter().flat_map(identify).collect();
    let expected: Vec<Value> =
        serde_json::from_str::<Vec<Value>>(&expected("expected_replay.json"))
            .unwrap()
            .iter()
            .map(identify_notification)
            .collect();
    assert_eq!(replay, expected);
}

/// A context message as the OpenAI-compatible request carries it (the
/// fixture has one tool result per message).
fn as_request(message: &Message) -> Value {
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let mut out = json!({"role": role, "content": message.text()});
    let mut calls = Vec::new();
    for part in &message.parts {
        if let Part::ToolResult { call_id, .. } = part {
            let content = part_text(part);
            out = json!({"role": "tool", "tool_call_id": call_id, "content": content});
        } else if let Part::ToolCall { id, name, .. } = part {
            let function = json!({"name": name, "arguments": part_text(part)});
            calls.push(json!({"id": id, "type": "function", "function": function}));
        }
    }
    if !calls.is_empty() {
        out["tool_calls"] = Value::from(calls);
    }
    out
}

/// A tool result's content, or a tool call's arguments.
fn part_text(part: &Part) -> &str {
    match part {
        Part::ToolResult { content: text, .. }
        | Part::ToolCall {
            arguments: text, ..
        } => text,
        _ => "",
    }
}

/// The context rebuilt from the fixture: the messages the original binary
/// sent the model after loading it, and its `/context` report (entries,
/// token estimates with the learned drift, checkpoints).
#[test]
fn the_fixture_rebuilds_the_context_the_original_binary_rebuilt() {
    let (_, events) = read();
    let restored = context_from(&events);
    assert_eq!(restored.cut_short, None);
    let context = restored.context;

    let request: Value = serde_json::from_str(&expected("expected_request.json")).unwrap();
    let mut sent = request["messages"].as_array().unwrap().clone();
    // The prompt typed after the load.
    assert_eq!(sent.pop().unwrap()["content"], "Continue");
    let rebuilt: Vec<Value> = context.messages().iter().map(|m| as_request(m)).collect();
    assert_eq!(rebuilt, sent);

    let report = expected("expected_context.txt");
    let fixed: u64 = report
        .split("System prompt and tools: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    let budget = ContextSettings::default().budget(32_768);
    assert_eq!(context.report(fixed, &budget).trim_end(), report.trim_end());
}
