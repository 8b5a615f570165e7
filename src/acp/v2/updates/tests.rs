//! The v2 translation table-tested: updates in, v2 JSON out, ids stable
//! across a replay through a fresh translation.

use serde_json::{Value, json};

use super::*;
use crate::client::{
    Cursor, OptionCategory, OptionValue, PromptOrigin, SelectOption, SessionMessage, Shown,
    SubagentInfo, UserPrompt,
};
use crate::events::{
    Compaction, CompactionOutcome, Cost, Location, Notice, PlanDocument, Severity, TodoItem,
    TodoPriority, TodoStatus, ToolCallProgress, ToolContent, ToolKind, ToolStatus,
};

/// Every update `updates` become, in order, as JSON.
fn feed(translation: &mut SessionUpdates, updates: &[Update]) -> Vec<Value> {
    updates
        .iter()
        .flat_map(|update| translation.translate(update))
        .map(|update| serde_json::to_value(update).unwrap())
        .collect()
}

/// What one update becomes in a fresh translation.
fn alone(update: Update) -> Vec<Value> {
    feed(&mut SessionUpdates::new(), &[update])
}

fn text(t: &str) -> Update {
    Update::Agent(AgentEvent::AgentText(t.into()))
}

fn thought(t: &str) -> Update {
    Update::Agent(AgentEvent::Thought(t.into()))
}

fn prompt(id: &str, t: &str, origin: PromptOrigin) -> Update {
    Update::UserPrompt(UserPrompt {
        message_id: id.into(),
        content: vec![Part::Text { text: t.into() }],
        origin,
    })
}

fn call(id: &str, name: &str, kind: ToolKind, raw_input: Value) -> Update {
    Update::Agent(AgentEvent::ToolCall(ToolCallInfo {
        id: id.into(),
        name: name.into(),
        title: format!("Run {name}"),
        kind,
        raw_input,
        locations: Vec::new(),
    }))
}

fn progress(id: &str, name: &str, status: ToolStatus, content: Vec<ToolContent>) -> Update {
    progress_with(id, name, status, content, None)
}

fn progress_with(
    id: &str,
    name: &str,
    status: ToolStatus,
    content: Vec<ToolContent>,
    raw_output: Option<Value>,
) -> Update {
    Update::Agent(AgentEvent::ToolCallUpdate(ToolCallProgress {
        id: id.into(),
        name: name.into(),
        status,
        content,
        locations: Vec::new(),
        raw_output,
    }))
}

/// A replay's whole message.
fn whole(kind: MessageKind, t: &str) -> Update {
    Update::AgentMessage(AgentMessage {
        kind,
        text: t.into(),
        message_id: None,
    })
}

/// The ids of the messages among `wire` (whole or chunks), in order.
fn message_ids(wire: &[Value]) -> Vec<String> {
    (wire.iter())
        .filter_map(|update| update["messageId"].as_str())
        .map(str::to_string)
        .collect()
}

/// The message ids of the chunks among `wire`, in order.
fn chunk_ids(wire: &[Value]) -> Vec<String> {
    wire.iter()
        .filter(|update| {
            update["sessionUpdate"]
                .as_str()
                .is_some_and(|kind| kind.ends_with("_chunk") || kind == "user_message")
        })
        .map(|update| update["messageId"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn agent_messages_are_named_after_the_prompt_they_answer() {
    let live = [
        text("before any prompt"),
        prompt("u1", "hi", PromptOrigin::Live),
        thought("let me"),
        thought(" see"),
        text("Looking"),
        Update::Agent(AgentEvent::Usage {
            used: 10,
            size: 100,
            cost: None,
        }),
        text(" now."),
        call("c1", "read_file", ToolKind::Read, json!({"path": "a"})),
        progress("c1", "read_file", ToolStatus::Completed, Vec::new()),
        text("Done."),
        prompt("u2", "more", PromptOrigin::Steered),
        text("Also"),
    ];
    let wire = feed(&mut SessionUpdates::new(), &live);
    assert_eq!(
        chunk_ids(&wire),
        [
            "session:m1",
            "u1",
            "u1:t1",
            "u1:t1",
            "u1:m2",
            "u1:m2",
            "u1:m3",
            "u2",
            "u2:m1"
        ]
    );
    assert_eq!(
        wire[1],
        json!({"sessionUpdate": "user_message", "messageId": "u1",
            "content": [{"type": "text", "text": "hi"}]})
    );
    assert_eq!(
        wire[2],
        json!({"sessionUpdate": "agent_thought_chunk", "messageId": "u1:t1",
            "content": {"type": "text", "text": "let me"}})
    );
}

#[test]
fn a_replay_through_a_fresh_translation_gives_the_same_ids() {
    // Live: the state, usage and notices the store does not keep come
    // between; the replay has the stored prompt and the chunks joined.
    let notice = Update::Agent(AgentEvent::Notice(Notice {
        severity: Severity::Warning,
        title: "Retrying".into(),
        detail: None,
        thought: "Retrying\n".into(),
    }));
    let live = [
        prompt("u1", "fix it", PromptOrigin::Live),
        Update::State(SessionState::Running),
        thought("hm"),
        text("I will"),
        notice,
        text(" edit."),
        call("c1", "edit_file", ToolKind::Edit, json!({})),
        Update::State(SessionState::RequiresAction),
        Update::State(SessionState::Running),
        progress("c1", "edit_file", ToolStatus::InProgress, Vec::new()),
        prompt("u2", "and the tests", PromptOrigin::Steered),
        progress("c1", "edit_file", ToolStatus::Completed, Vec::new()),
        text("Edited."),
        Update::State(SessionState::Idle(StopReason::EndTurn)),
    ];
    let replay = [
        prompt("u1", "fix it", PromptOrigin::Replayed),
        whole(MessageKind::Thought, "hm"),
        whole(MessageKind::Answer, "I will edit."),
        call("c1", "edit_file", ToolKind::Edit, json!({})),
        progress("c1", "edit_file", ToolStatus::InProgress, Vec::new()),
        prompt("u2", "and the tests", PromptOrigin::Replayed),
        progress("c1", "edit_file", ToolStatus::Completed, Vec::new()),
        whole(MessageKind::Answer, "Edited."),
    ];
    let live_ids = chunk_ids(&feed(&mut SessionUpdates::new(), &live));
    assert_eq!(live_ids, ["u1", "u1:t1", "u1:m2", "u1:m2", "u2", "u2:m1"]);
    let replayed = feed(&mut SessionUpdates::new(), &replay);
    let mut expected = live_ids;
    expected.dedup();
    assert_eq!(message_ids(&replayed), expected);
    // Whole messages, never chunks: v2 wants whole-message updates in a
    // replay (ACP-RESUME-205: no chunk without its message first).
    let kinds: Vec<&str> = (replayed.iter())
        .filter_map(|update| update["sessionUpdate"].as_str())
        .filter(|kind| kind.starts_with("agent_") || kind.starts_with("user_"))
        .collect();
    assert_eq!(
        kinds,
        [
            "user_message",
            "agent_thought",
            "agent_message",
            "user_message",
            "agent_message"
        ]
    );
    assert_eq!(
        replayed[2],
        json!({"sessionUpdate": "agent_message", "messageId": "u1:m2",
            "content": [{"type": "text", "text": "I will edit."}]})
    );
    // Twice the same replay, twice the same updates.
    assert_eq!(
        feed(&mut SessionUpdates::new(), &replay),
        feed(&mut SessionUpdates::new(), &replay)
    );
}

#[test]
fn a_message_the_replay_gives_in_two_parts_goes_out_whole_both_times() {
    let plan = Update::Agent(AgentEvent::Plan(Vec::new()));
    let tagged = |t: &str| {
        Update::AgentMessage(AgentMessage {
            kind: MessageKind::Answer,
            text: t.into(),
            message_id: Some("msg-7".into()),
        })
    };
    let replay = [
        prompt("u1", "go", PromptOrigin::Replayed),
        whole(MessageKind::Answer, "Step one, "),
        plan.clone(),
        whole(MessageKind::Answer, "step two."),
        tagged("Tagged, "),
        plan,
        tagged("twice."),
    ];
    let wire = feed(&mut SessionUpdates::new(), &replay);
    let messages: Vec<(&str, &str)> = (wire.iter())
        .filter(|update| update["sessionUpdate"] == "agent_message")
        .map(|update| {
            (
                update["messageId"].as_str().unwrap(),
                update["content"][0]["text"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        messages,
        [
            ("u1:m1", "Step one, "),
            ("u1:m1", "Step one, step two."),
            ("msg-7", "Tagged, "),
            ("msg-7", "Tagged, twice."),
        ]
    );
}

#[test]
fn a_replayed_image_prompt_is_one_message_and_tagged_chunks_keep_their_id() {
    let updates = [
        Update::UserPrompt(UserPrompt {
            message_id: "u1".into(),
            content: vec![
                Part::Text { text: "see".into() },
                Part::Image {
                    mime_type: "image/png".into(),
                    data: "AAAA".into(),
                },
            ],
            origin: PromptOrigin::Replayed,
        }),
        text("A cat."),
        Update::Tagged {
            message_id: "msg-7".into(),
            event: AgentEvent::AgentText("Tagged.".into()),
        },
    ];
    let wire = feed(&mut SessionUpdates::new(), &updates);
    assert_eq!(
        wire[0],
        json!({"sessionUpdate": "user_message", "messageId": "u1",
            "content": [{"type": "text", "text": "see"},
                {"type": "image", "mimeType": "image/png", "data": "AAAA"}]})
    );
    assert_eq!(chunk_ids(&wire), ["u1", "u1:m1", "msg-7"]);
}

#[test]
fn a_tool_call_is_created_by_its_first_upsert_and_patched_to_completed_with_its_diff() {
    let updates = [
        Update::Agent(AgentEvent::ToolCall(ToolCallInfo {
            id: "c1".into(),
            name: "edit_file".into(),
            title: "Edit a.txt".into(),
            kind: ToolKind::Edit,
            raw_input: json!({"path": "/p/a.txt"}),
            locations: vec![Location::at_line("/p/a.txt", 2)],
        })),
        progress("c1", "edit_file", ToolStatus::InProgress, Vec::new()),
        progress(
            "c1",
            "edit_file",
            ToolStatus::Completed,
            vec![ToolContent::Diff {
                path: "/p/a.txt".into(),
                old_text: Some("one\ntwo\n".into()),
                new_text: "one\n2\n".into(),
            }],
        ),
    ];
    let wire = feed(&mut SessionUpdates::new(), &updates);
    assert_eq!(
        wire,
        [
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "name": "edit_file",
                "title": "Edit a.txt", "kind": "edit", "status": "pending",
                "rawInput": {"path": "/p/a.txt"},
                "locations": [{"path": "/p/a.txt", "line": 2}]}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
                "content": [{"type": "diff",
                    "changes": [{"operation": "modify", "path": "/p/a.txt", "fileType": "text"}],
                    "patch": {"format": "git_patch", "text":
                        "diff --git /p/a.txt /p/a.txt\n--- /p/a.txt\n+++ /p/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"}}]}),
        ]
    );
    // A new file is an `add`, from /dev/null.
    let created = alone(progress(
        "c2",
        "write_file",
        ToolStatus::Completed,
        vec![ToolContent::Diff {
            path: "/p/new.txt".into(),
            old_text: None,
            new_text: "hi\n".into(),
        }],
    ));
    assert_eq!(
        created[0]["content"][0]["changes"],
        json!([{"operation": "add", "path": "/p/new.txt", "fileType": "text"}])
    );
    // First heard of at its end: it still gets a name and a title.
    assert_eq!(created[0]["title"], "write_file");
}

#[test]
fn content_that_grows_is_appended_and_content_that_changes_is_replaced() {
    let shown = |texts: &[&str]| {
        progress(
            "c1",
            "fetch",
            ToolStatus::InProgress,
            texts
                .iter()
                .map(|t| ToolContent::Text(t.to_string()))
                .collect(),
        )
    };
    let updates = [
        call("c1", "fetch", ToolKind::Fetch, json!({})),
        shown(&["page 1"]),
        shown(&["page 1", "page 2"]),
        shown(&["page 1", "page 2"]),
        shown(&["summary"]),
        // A v1 editor terminal has no v2 equivalent.
        shown(&[]),
        progress(
            "c1",
            "fetch",
            ToolStatus::Failed,
            vec![
                ToolContent::Terminal {
                    terminal_id: "editor-term".into(),
                },
                ToolContent::Text("gone".into()),
            ],
        ),
    ];
    let wire = feed(&mut SessionUpdates::new(), &updates);
    let item = |t: &str| json!({"type": "content", "content": {"type": "text", "text": t}});
    assert_eq!(
        wire[1..],
        [
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress",
                "content": [item("page 1")]}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}),
            json!({"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c1",
                "content": item("page 2")}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress",
                "content": [item("summary")]}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "failed",
                "content": [item("gone")]}),
        ]
    );
}

fn base64_of(text: &str) -> String {
    super::shell::base64(text.as_bytes())
}

#[test]
fn the_shell_shows_its_output_in_a_display_terminal() {
    let updates = [
        call(
            "c1",
            "shell",
            ToolKind::Execute,
            json!({"command": "cargo test"}),
        ),
        progress("c1", "shell", ToolStatus::InProgress, Vec::new()),
        progress(
            "c1",
            "shell",
            ToolStatus::InProgress,
            vec![ToolContent::Text("compiling\n".into())],
        ),
        progress(
            "c1",
            "shell",
            ToolStatus::InProgress,
            vec![
                ToolContent::Text("compiling\nrunning\n".into()),
                ToolContent::Text("Still running (30 s so far; latest output: running)".into()),
            ],
        ),
        progress_with(
            "c1",
            "shell",
            ToolStatus::Completed,
            vec![ToolContent::Text(
                "Exit code: 0\ncompiling\nrunning\nok\n".into(),
            )],
            Some(json!({"output": "compiling\nrunning\nok\n", "exit_code": 0,
                "signal": null, "omitted_bytes": 0})),
        ),
    ];
    let wire = feed(&mut SessionUpdates::new(), &updates);
    let terminal = json!({"type": "terminal", "terminalId": "terminal-c1"});
    assert_eq!(
        wire[1..],
        [
            json!({"sessionUpdate": "terminal_update", "terminalId": "terminal-c1",
                "command": "cargo test"}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress",
                "content": [terminal]}),
            json!({"sessionUpdate": "terminal_output_chunk", "terminalId": "terminal-c1",
                "data": base64_of("compiling\n")}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}),
            json!({"sessionUpdate": "terminal_output_chunk", "terminalId": "terminal-c1",
                "data": base64_of("running\n")}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}),
            json!({"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c1",
                "content": {"type": "content", "content": {"type": "text",
                    "text": "Still running (30 s so far; latest output: running)"}}}),
            json!({"sessionUpdate": "terminal_output_chunk", "terminalId": "terminal-c1",
                "data": base64_of("ok\n")}),
            json!({"sessionUpdate": "terminal_update", "terminalId": "terminal-c1",
                "exitStatus": {"exitCode": 0}}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
                "content": [terminal],
                "rawOutput": {"output": "compiling\nrunning\nok\n", "exit_code": 0,
                    "signal": null, "omitted_bytes": 0}}),
        ]
    );
}

#[test]
fn a_shell_snapshot_that_lost_its_start_replaces_the_output() {
    let updates = [
        call("c1", "shell", ToolKind::Execute, json!({"command": "yes"})),
        progress(
            "c1",
            "shell",
            ToolStatus::InProgress,
            vec![ToolContent::Text("y\ny\n".into())],
        ),
        progress(
            "c1",
            "shell",
            ToolStatus::InProgress,
            vec![ToolContent::Text("y\n[...]\ny\n".into())],
        ),
        progress_with(
            "c1",
            "shell",
            ToolStatus::Completed,
            Vec::new(),
            Some(
                json!({"output": "y\n[...]\ny\n", "exit_code": null, "signal": "SIGTERM",
                "omitted_bytes": 10, "sandbox": "[blocked]"}),
            ),
        ),
    ];
    let wire = feed(&mut SessionUpdates::new(), &updates);
    assert_eq!(
        wire[4],
        json!({"sessionUpdate": "terminal_update", "terminalId": "terminal-c1",
            "output": {"data": base64_of("y\n[...]\ny\n")}})
    );
    assert_eq!(
        wire[6],
        json!({"sessionUpdate": "terminal_update", "terminalId": "terminal-c1",
            "exitStatus": {"signal": "SIGTERM"}})
    );
    // The sandbox's note follows the terminal the call already shows.
    assert_eq!(wire[7]["status"], "completed");
    assert_eq!(
        wire[8],
        json!({"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c1",
            "content": {"type": "content", "content": {"type": "text", "text": "[blocked]"}}})
    );
}

#[test]
fn a_shell_call_that_never_ran_has_no_terminal() {
    let updates = [
        call(
            "c1",
            "shell",
            ToolKind::Execute,
            json!({"command": "rm -rf /"}),
        ),
        progress(
            "c1",
            "shell",
            ToolStatus::Failed,
            vec![ToolContent::Text("rejected".into())],
        ),
    ];
    let wire = feed(&mut SessionUpdates::new(), &updates);
    assert_eq!(
        wire[1..],
        [
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": "rejected"}}]})
        ]
    );
}

#[test]
fn plans_are_updates_by_id_and_removals() {
    let todo = TodoItem {
        content: "Fix".into(),
        status: TodoStatus::InProgress,
        priority: TodoPriority::High,
    };
    let items = json!({"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "todos",
        "entries": [{"content": "Fix", "priority": "high", "status": "in_progress"}]}});
    let markdown = json!({"sessionUpdate": "plan_update", "plan": {"type": "markdown",
        "planId": "plan", "content": "# Plan\n", "path": "/s/plan.md"}});
    let table = [
        (
            Update::Agent(AgentEvent::Plan(vec![todo.clone()])),
            items.clone(),
        ),
        (
            Update::Agent(AgentEvent::Plan(Vec::new())),
            json!({"sessionUpdate": "plan_removed", "planId": "todos"}),
        ),
        (
            Update::Plan {
                plan_id: "todos".into(),
                plan: PlanContent::Items(vec![todo]),
            },
            items,
        ),
        (
            Update::Agent(AgentEvent::PlanDocument(Some(PlanDocument {
                markdown: "# Plan\n".into(),
                path: Some("/s/plan.md".into()),
            }))),
            markdown.clone(),
        ),
        (
            Update::Plan {
                plan_id: "plan".into(),
                plan: PlanContent::Markdown {
                    content: "# Plan\n".into(),
                    path: Some("/s/plan.md".into()),
                },
            },
            markdown,
        ),
        (
            Update::Agent(AgentEvent::PlanDocument(None)),
            json!({"sessionUpdate": "plan_removed", "planId": "plan"}),
        ),
        (
            Update::PlanRemoved {
                plan_id: "plan".into(),
            },
            json!({"sessionUpdate": "plan_removed", "planId": "plan"}),
        ),
    ];
    for (update, expected) in table {
        assert_eq!(alone(update.clone()), [expected], "{update:?}");
    }
}

#[test]
fn states_are_state_updates_with_the_stop_reason() {
    let table = [
        (SessionState::Running, json!({"state": "running"})),
        (
            SessionState::RequiresAction,
            json!({"state": "requires_action"}),
        ),
        (
            SessionState::Idle(StopReason::EndTurn),
            json!({"state": "idle", "stopReason": "end_turn"}),
        ),
        (
            SessionState::Idle(StopReason::Cancelled),
            json!({"state": "idle", "stopReason": "cancelled"}),
        ),
        (
            SessionState::Idle(StopReason::MaxTurnRequests),
            json!({"state": "idle", "stopReason": "max_turn_requests"}),
        ),
    ];
    for (state, mut expected) in table {
        expected["sessionUpdate"] = json!("state_update");
        assert_eq!(alone(Update::State(state)), [expected], "{state:?}");
    }
}

#[test]
fn session_settings_and_live_events_on_the_wire() {
    let model = SelectOption {
        id: "model".into(),
        name: "Model".into(),
        description: "d".into(),
        category: OptionCategory::Model,
        current: "a".into(),
        values: vec![OptionValue {
            id: "a".into(),
            name: "A".into(),
            description: None,
        }],
    };
    let table = vec![
        (
            Update::ConfigOptions(vec![model]),
            vec![
                json!({"sessionUpdate": "config_option_update", "configOptions": [
                    {"configId": "model", "name": "Model", "description": "d", "category": "model",
                     "type": "select", "currentValue": "a", "options": [{"value": "a", "name": "A"}]}
                ]}),
            ],
        ),
        (Update::CurrentMode("plan".into()), Vec::new()),
        (
            Update::AvailableCommands(crate::acp::translate::same_shape::two_commands()),
            vec![
                json!({"sessionUpdate": "available_commands_update", "availableCommands": [
                    {"type": "command", "name": "help", "description": "List"},
                    {"type": "command", "name": "compact", "description": "Sum",
                     "input": {"type": "text", "hint": "focus"}}
                ]}),
            ],
        ),
        (
            Update::SessionInfo {
                title: Some("Fix".into()),
                updated_at: "2026-01-01T00:00:00Z".into(),
            },
            vec![
                json!({"sessionUpdate": "session_info_update", "title": "Fix",
                "updatedAt": "2026-01-01T00:00:00Z"}),
            ],
        ),
        (
            Update::Agent(AgentEvent::Usage {
                used: 120,
                size: 8192,
                cost: Some(Cost {
                    amount: 0.25,
                    currency: "USD".into(),
                }),
            }),
            vec![
                json!({"sessionUpdate": "usage_update", "used": 120, "size": 8192,
                "cost": {"amount": 0.25, "currency": "USD"}}),
            ],
        ),
        (
            Update::Agent(AgentEvent::Notice(Notice {
                severity: Severity::Error,
                title: "MCP server down".into(),
                detail: Some("why".into()),
                thought: "t".into(),
            })),
            vec![json!({"sessionUpdate": "notice", "severity": "error",
                "title": "MCP server down", "description": "why"})],
        ),
        (
            Update::Agent(AgentEvent::Compaction(Compaction::Ended {
                id: "k1".into(),
                outcome: CompactionOutcome::Failed("too big".into()),
                thought: None,
            })),
            vec![
                json!({"sessionUpdate": "compaction_update", "compactionId": "k1",
                "status": "failed", "error": "too big"}),
            ],
        ),
        (
            Update::Agent(AgentEvent::Compaction(Compaction::SummaryChunk {
                id: "k1".into(),
                text: "so far".into(),
            })),
            vec![
                json!({"sessionUpdate": "compaction_summary_chunk", "compactionId": "k1",
                "content": {"type": "text", "text": "so far"}}),
            ],
        ),
        (
            Update::PromptSuggestions(vec!["Continue".into()]),
            vec![json!({"sessionUpdate": "prompt_suggestions_update",
                "suggestions": [{"prompt": [{"type": "text", "text": "Continue"}]}]})],
        ),
    ];
    for (update, expected) in table {
        assert_eq!(alone(update.clone()), expected, "{update:?}");
    }
}

#[test]
fn delegated_agents_and_cursors_on_the_wire() {
    let table = vec![
        (
            Update::Subagent(SubagentInfo {
                session_id: "child-1".into(),
                title: Some("explorer".into()),
                description: None,
                state: Some(SubagentState::Idle(StopReason::EndTurn)),
                cwd: Some("/work".into()),
            }),
            json!({"sessionUpdate": "subagent_update", "sessionId": "child-1",
                "title": "explorer", "cwd": "/work",
                "state": {"state": "idle", "stopReason": "end_turn"}}),
        ),
        (
            Update::SessionMessage(SessionMessage {
                message_id: "task-1".into(),
                sender: "parent".into(),
                recipient: "child-1".into(),
                text: "Find alpha".into(),
            }),
            json!({"sessionUpdate": "session_message", "messageId": "task-1",
                "senderSessionId": "parent", "recipientSessionId": "child-1",
                "content": [{"type": "text", "text": "Find alpha"}]}),
        ),
        (
            Update::Cursor(Cursor {
                id: "cursor-1".into(),
                at: Shown::ToolCall("c1".into()),
                after: true,
                fork: true,
            }),
            json!({"sessionUpdate": "cursor_update", "cursorId": "cursor-1",
                "capabilities": {"fork": {}},
                "anchor": {"type": "tool_call", "toolCallId": "c1", "position": "after"}}),
        ),
    ];
    for (update, expected) in table {
        assert_eq!(alone(update.clone()), [expected], "{update:?}");
    }
    let failed = alone(Update::Subagent(SubagentInfo {
        session_id: "child-1".into(),
        title: None,
        description: None,
        state: Some(SubagentState::Failed("model broke".into())),
        cwd: None,
    }));
    assert_eq!(failed[0]["state"]["stopReason"], "error", "{failed:?}");
    assert_eq!(
        failed[0]["state"]["error"]["data"], "model broke",
        "{failed:?}"
    );
}
