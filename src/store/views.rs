//! The two views rebuilt from a history: the updates to replay and the
//! model's context.

use std::sync::Arc;

use std::collections::HashMap;

use super::disk::{self, StoredEvent, StoredUpdate};
use crate::client::{PromptOrigin, Update, UserPrompt};
use crate::context::rewind::FileHistory;
use crate::context::spend::Totals;
use crate::context::{ContextManager, ContextOp};
use crate::model::{Message, Role};

/// The updates that show the conversation again, in the order the client
/// first saw them, with consecutive chunks joined.
pub fn replay_from(events: &[StoredEvent]) -> Vec<Update> {
    replay_part(events, 0)
}

/// [`replay_from`] for a part of a history that has `prompts_before`
/// prompts before it, so each prompt keeps the id it has in the whole.
pub fn replay_part(events: &[StoredEvent], prompts_before: usize) -> Vec<Update> {
    let mut out: Vec<Shown> = Vec::new();
    let mut prompts = prompts_before;
    for event in events {
        match event {
            StoredEvent::UserPrompt {
                message,
                message_id,
                ..
            } => {
                let message_id = message_id
                    .clone()
                    .unwrap_or_else(|| disk::prompt_id(prompts));
                prompts += 1;
                out.push(Shown::User(message_id, shown_parts(message)));
            }
            StoredEvent::SteeredPrompt {
                message,
                message_id,
                ..
            } => out.push(Shown::User(message_id.clone(), shown_parts(message))),
            StoredEvent::Update { update } => {
                if let Some(Shown::Agent(last)) = out.last_mut()
                    && last.coalesce(update)
                {
                    continue;
                }
                out.push(Shown::Agent(update.clone()));
            }
            _ => {}
        }
    }
    out.into_iter()
        .map(|item| match item {
            Shown::User(message_id, parts) => Update::UserPrompt(UserPrompt {
                message_id,
                content: parts.into_iter().map(Into::into).collect(),
                origin: PromptOrigin::Replayed,
            }),
            Shown::Agent(update) => Update::Agent(update.into_event()),
        })
        .collect()
}

/// The parts of a prompt the user is shown again: its text and images.
fn shown_parts(message: &disk::Message) -> Vec<disk::Part> {
    (message.parts.iter())
        .filter(|part| matches!(part, disk::Part::Text { .. } | disk::Part::Image { .. }))
        .cloned()
        .collect()
}

/// The idempotency keys the history's user messages were sent with, and
/// their message ids: a retry after a restart still inserts nothing.
pub fn keys_from(events: &[StoredEvent]) -> HashMap<String, String> {
    let mut keys = HashMap::new();
    let mut prompts = 0;
    for event in events {
        let (key, message_id) = match event {
            StoredEvent::UserPrompt {
                idempotency_key,
                message_id,
                ..
            } => {
                prompts += 1;
                let id = message_id
                    .clone()
                    .unwrap_or_else(|| disk::prompt_id(prompts - 1));
                (idempotency_key, id)
            }
            StoredEvent::SteeredPrompt {
                idempotency_key,
                message_id,
                ..
            } => (idempotency_key, message_id.clone()),
            _ => continue,
        };
        if let Some(key) = key {
            keys.insert(key.clone(), message_id);
        }
    }
    keys
}

/// What the client was shown: a user message (its id and parts), or the
/// agent's updates.
enum Shown {
    User(String, Vec<disk::Part>),
    Agent(StoredUpdate),
}

/// The model's context rebuilt from a history.
#[derive(Debug, Default)]
pub struct Restored {
    pub context: ContextManager,
    /// The history ends inside a turn (the process died in it): what was
    /// seen of its unrecorded answer, already added to `context`. The
    /// loader records it and ends the turn, so the next load agrees.
    pub cut_short: Option<String>,
}

/// The model's context after `events`: messages and context operations
/// replayed in order, checkpoints included. A turn cut short by a crash
/// keeps its prompt, its finished rounds and the text the user saw of the
/// answer after them (as a cancel does); a tool call whose results were
/// not recorded is dropped with its round.
pub fn context_from(events: &[StoredEvent]) -> Restored {
    let mut context = ContextManager::new();
    // Some while a turn is open: the text shown since its last recorded round.
    let mut open: Option<String> = None;
    let close_cut_short = |context: &mut ContextManager, open: &mut Option<String>| {
        if let Some(seen) = open.take()
            && !seen.is_empty()
        {
            context.push(Arc::new(Message::assistant_text(seen)));
        }
    };
    let apply = |context: &mut ContextManager, op: &ContextOp| {
        if let Err(err) = context.apply(op) {
            // It applied live; failing here means the history lost lines.
            tracing::warn!(?op, %err, "a stored context operation does not apply; skipped");
        }
    };
    for event in events {
        match event {
            StoredEvent::UserPrompt { message, .. }
            | StoredEvent::SteeredPrompt { message, .. } => {
                close_cut_short(&mut context, &mut open);
                let message = Arc::new(message.clone().into());
                // A steered message goes in where it went in live, within its turn.
                if matches!(event, StoredEvent::SteeredPrompt { .. }) {
                    context.push_steered(message);
                } else {
                    context.push(message);
                }
                open = Some(String::new());
            }
            StoredEvent::Update {
                update: StoredUpdate::AgentText { text },
            } => {
                if let Some(seen) = open.as_mut() {
                    seen.push_str(text);
                }
            }
            StoredEvent::Round { messages } => {
                for message in messages {
                    context.push(Arc::new(message.clone().into()));
                }
                if let Some(seen) = open.as_mut() {
                    seen.clear();
                }
            }
            StoredEvent::TurnEnd { estimator, .. } => {
                open = None;
                if let Some(estimator) = estimator {
                    context.estimator = (*estimator).into();
                }
            }
            StoredEvent::Context { op } => apply(&mut context, &op.clone().into()),
            StoredEvent::ModeChanged { .. }
            | StoredEvent::ModelChanged { .. }
            | StoredEvent::Update { .. }
            | StoredEvent::FileChanged { .. }
            | StoredEvent::Rewound { .. }
            | StoredEvent::RewindUndone { .. }
            | StoredEvent::Crashed { .. }
            | StoredEvent::Unknown => {}
        }
    }
    let cut_short = open.clone();
    close_cut_short(&mut context, &mut open);
    Restored { context, cut_short }
}

/// The files the agent changed and the rewinds, as recorded.
pub fn files_from(events: &[StoredEvent]) -> FileHistory {
    let mut files = FileHistory::default();
    for event in events {
        match event {
            StoredEvent::FileChanged { change } => files.changed(change.clone().into()),
            StoredEvent::Rewound { rewind } => files.rewound(rewind.clone().into()),
            StoredEvent::RewindUndone { id } => files.undone(*id),
            _ => {}
        }
    }
    files
}

/// What the session had spent at its last recorded turn end (zero before any).
pub fn totals_from(events: &[StoredEvent]) -> Totals {
    events
        .iter()
        .rev()
        .find_map(|event| match event {
            StoredEvent::TurnEnd {
                spent: Some(spent), ..
            } => Some((*spent).into()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The todo list as the last update that showed it left it (empty when
/// none did, or the last one emptied it): what the session's `todo` state
/// starts from on a load, resume or fork.
pub fn todos_from(events: &[StoredEvent]) -> Vec<crate::events::TodoItem> {
    events
        .iter()
        .rev()
        .find_map(|event| match event {
            StoredEvent::Update {
                update: update @ StoredUpdate::Plan { .. },
            } => match update.clone().into_event() {
                crate::events::AgentEvent::Plan(items) => Some(items),
                _ => None,
            },
            _ => None,
        })
        .unwrap_or_default()
}

/// A session title from its first prompt: the first line of text, shortened.
pub fn title_from(message: &Message) -> Option<String> {
    const MAX: usize = 80;
    if message.role != Role::User {
        return None;
    }
    let text = message.text();
    let line = text.lines().map(str::trim).find(|line| !line.is_empty())?;
    if line.chars().count() <= MAX {
        return Some(line.to_string());
    }
    let mut short: String = line.chars().take(MAX - 1).collect();
    short = short.trim_end().to_string();
    short.push('…');
    Some(short)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::TokenEstimator;
    use crate::events::{AgentEvent, ToolCallInfo, ToolCallProgress};
    use crate::events::{ToolContent, ToolKind, ToolStatus};
    use crate::model::Part;
    use serde_json::json;

    fn text(t: &str) -> StoredEvent {
        StoredEvent::Update {
            update: StoredUpdate::AgentText { text: t.into() },
        }
    }

    fn prompt(t: &str) -> StoredEvent {
        StoredEvent::prompt("2026-01-01T00:00:00.000Z".into(), &Message::user_text(t))
    }

    fn round(messages: Vec<Message>) -> StoredEvent {
        let messages: Vec<Arc<Message>> = messages.into_iter().map(Arc::new).collect();
        StoredEvent::round(&messages)
    }

    fn shown(event: AgentEvent) -> StoredEvent {
        StoredEvent::shown(&event).unwrap()
    }

    fn call() -> ToolCallInfo {
        ToolCallInfo {
            id: "t1".into(),
            name: "read_file".into(),
            title: "Read a.txt".into(),
            kind: ToolKind::Read,
            raw_input: json!({"path": "a.txt"}),
            locations: Vec::new(),
        }
    }

    #[test]
    fn prompts_keep_their_saved_ids_and_older_ones_go_by_their_place() {
        let ids = |id: &str, key: Option<&str>| disk::PromptIds {
            message_id: id.into(),
            idempotency_key: key.map(str::to_string),
        };
        let at = || "2026-01-01T00:00:00.000Z".to_string();
        let events = vec![
            prompt("old"),
            text("a"),
            StoredEvent::prompt_with_id(at(), &Message::user_text("new"), &ids("m-new", Some("k"))),
            text("b"),
            StoredEvent::steered(at(), &Message::user_text("steer"), &ids("m-steer", None)),
            text("c"),
        ];
        let shown: Vec<(String, PromptOrigin)> = replay_from(&events)
            .into_iter()
            .filter_map(|update| match update {
                Update::UserPrompt(p) => Some((p.message_id, p.origin)),
                _ => None,
            })
            .collect();
        let replayed = PromptOrigin::Replayed;
        assert_eq!(
            shown,
            [
                ("prompt-0".into(), replayed),
                ("m-new".into(), replayed),
                ("m-steer".into(), replayed),
            ]
        );
        // A part of the history keeps the ids it has in the whole.
        assert!(matches!(
            &replay_part(&events[2..], 1)[0],
            Update::UserPrompt(p) if p.message_id == "m-new"
        ));
        assert_eq!(
            keys_from(&events).get("k").map(String::as_str),
            Some("m-new")
        );
        // The steered message is in the context where it went in.
        let texts: Vec<String> = (context_from(&events).context.messages().iter())
            .map(|m| m.text())
            .collect();
        assert_eq!(texts, ["old", "a", "new", "b", "steer", "c"]);
    }

    #[test]
    fn replay_joins_chunks_and_keeps_order() {
        let events = vec![
            prompt("hi"),
            text("Hel"),
            text("lo"),
            shown(AgentEvent::ToolCall(call())),
            shown(AgentEvent::ToolCallUpdate(ToolCallProgress {
                id: "t1".into(),
                name: "read_file".into(),
                status: ToolStatus::Completed,
                content: vec![ToolContent::Text("x".into())],
                locations: Vec::new(),
                raw_output: None,
            })),
            text("done"),
            StoredEvent::ModeChanged {
                mode: "auto".into(),
            },
            StoredEvent::Unknown,
        ];
        let replay = replay_from(&events);
        assert_eq!(replay.len(), 5, "{replay:?}");
        assert_eq!(
            replay[0],
            Update::UserPrompt(UserPrompt {
                message_id: "prompt-0".into(),
                content: vec![Part::Text { text: "hi".into() }],
                origin: PromptOrigin::Replayed,
            })
        );
        assert_eq!(
            replay[1],
            Update::Agent(AgentEvent::AgentText("Hello".into()))
        );
        assert_eq!(replay[2], Update::Agent(AgentEvent::ToolCall(call())));
        assert!(matches!(
            &replay[3],
            Update::Agent(AgentEvent::ToolCallUpdate(p)) if p.status == ToolStatus::Completed
        ));
        assert_eq!(
            replay[4],
            Update::Agent(AgentEvent::AgentText("done".into()))
        );
    }

    #[test]
    fn context_keeps_finished_turns_and_what_was_seen_of_a_cut_short_one() {
        let events = vec![
            prompt("one"),
            text("first answer"),
            round(vec![Message::assistant_text("first answer")]),
            StoredEvent::turn_end(None),
            prompt("two"),
            text("partial"),
        ];
        let restored = context_from(&events);
        assert_eq!(restored.cut_short.as_deref(), Some("partial"));
        let context = restored.context.messages();
        let texts: Vec<(Role, String)> = context.iter().map(|m| (m.role, m.text())).collect();
        assert_eq!(
            texts,
            vec![
                (Role::User, "one".into()),
                (Role::Assistant, "first answer".into()),
                (Role::User, "two".into()),
                (Role::Assistant, "partial".into()),
            ]
        );
        // The loader ends the cut-short turn; a compaction then replaces
        // everything before it.
        let mut compacted = events;
        compacted.push(round(vec![Message::assistant_text("partial")]));
        compacted.push(StoredEvent::turn_end(None));
        compacted.push(StoredEvent::context(&ContextOp::Compact {
            entries: 4,
            summary: "summary".into(),
            elided: Vec::new(),
        }));
        compacted.push(prompt("three"));
        let restored = context_from(&compacted);
        let kinds: Vec<&str> = restored
            .context
            .entries()
            .iter()
            .map(|e| e.kind.label())
            .collect();
        assert_eq!(kinds, ["summary", "user"]);
        let context = restored.context.messages();
        assert!(context[0].text().ends_with("summary"), "{context:?}");
        assert_eq!(context[1].text(), "three");
    }

    /// A tool call and its result: the messages of one tool round.
    fn tool_exchange(id: &str) -> Vec<Message> {
        let call = Part::ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: "{}".into(),
        };
        let result = Part::ToolResult {
            call_id: id.into(),
            content: "out".into(),
            is_error: false,
        };
        vec![
            Message {
                role: Role::Assistant,
                parts: vec![call],
            },
            Message {
                role: Role::User,
                parts: vec![result],
            },
        ]
    }

    fn texts(context: &ContextManager) -> Vec<String> {
        context.messages().iter().map(|m| m.text()).collect()
    }

    /// Rounds, operations and turn ends replay to the context the live
    /// session had, checkpoints included.
    #[test]
    fn rounds_and_context_operations_replay_in_order() {
        let op = |op: ContextOp| StoredEvent::context(&op);
        let end = StoredEvent::turn_end(Some(TokenEstimator {
            drift: 1.5,
            observations: 3,
        }));
        let events = vec![
            prompt("one"),
            text("a1"),
            round(vec![Message::assistant_text("a1")]),
            end.clone(),
            op(ContextOp::Checkpoint { name: "cp".into() }),
            prompt("two"),
            round(tool_exchange("c1")),
            // A compaction between rounds: the first turn becomes a summary.
            op(ContextOp::Compact {
                entries: 2,
                summary: "s".into(),
                elided: Vec::new(),
            }),
            text("a2"),
            round(vec![Message::assistant_text("a2")]),
            end,
            // Text shown outside a turn (a command's report) is not context.
            text("Context: 10 / 100 tokens"),
        ];
        let restored = context_from(&events);
        assert_eq!(restored.cut_short, None);
        let mut context = restored.context;
        assert_eq!(context.estimator.observations, 3);
        let kinds: Vec<&str> = context.entries().iter().map(|e| e.kind.label()).collect();
        assert_eq!(kinds, ["summary", "user", "tools", "assistant"]);
        assert_eq!(context.checkpoints().len(), 1);
        context
            .apply(&ContextOp::Rollback { name: "cp".into() })
            .unwrap();
        assert_eq!(texts(&context), ["one", "a1"]);

        // Killed after a round's tool results, before the answer: the round
        // stays, the unrecorded answer's shown text follows it.
        let mut cut = events;
        cut.truncate(7);
        cut.push(text("partial"));
        let restored = context_from(&cut);
        assert_eq!(restored.cut_short.as_deref(), Some("partial"));
        let messages = restored.context.messages();
        assert!(matches!(messages[3].parts[0], Part::ToolCall { .. }));
        assert!(matches!(messages[4].parts[0], Part::ToolResult { .. }));
        assert_eq!(messages[5].text(), "partial");
        assert_eq!(messages.len(), 6);
    }

    #[test]
    fn context_events_round_trip_as_json() {
        let events = vec![
            StoredEvent::context(&ContextOp::Drop { start: 0, count: 2 }),
            StoredEvent::turn_end(None),
            round(vec![Message::assistant_text("x")]),
        ];
        for event in events {
            let line = serde_json::to_string(&event).unwrap();
            assert_eq!(serde_json::from_str::<StoredEvent>(&line).unwrap(), event);
        }
        // A turn end written without an estimator still reads.
        let bare: StoredEvent = serde_json::from_value(json!({"event": "turn_end"})).unwrap();
        assert_eq!(bare, StoredEvent::turn_end(None));
    }

    #[test]
    fn file_changes_rewinds_and_spend_come_back_from_their_lines() {
        use crate::context::rewind::{FileChange, RestoredFile, Rewind};
        let change = FileChange {
            turn: 2,
            path: "/p/a.txt".into(),
            before: None,
            before_kept: true,
            after: "ab".into(),
        };
        let rewind = Rewind {
            id: 1,
            checkpoint: "before-rewind-1".into(),
            turns: vec![2],
            files: vec![RestoredFile {
                path: "/p/a.txt".into(),
                restored: None,
                replaced: Some("ab".into()),
            }],
            at_turn: 2,
        };
        let spent = Totals {
            turn_tokens: 5,
            session_tokens: 50,
            session_cost: 0.25,
        };
        let events: Vec<StoredEvent> = [
            StoredEvent::FileChanged {
                change: change.clone().into(),
            },
            StoredEvent::turn_end_spent(None, spent),
            StoredEvent::Rewound {
                rewind: rewind.clone().into(),
            },
        ]
        .iter()
        .map(|event| serde_json::from_str(&serde_json::to_string(event).unwrap()).unwrap())
        .collect();
        let files = files_from(&events);
        assert_eq!(files.changes(), [change]);
        assert_eq!(files.last_rewind(), Some(&rewind));
        assert_eq!(totals_from(&events), spent);
        let mut undone = events;
        undone.push(StoredEvent::RewindUndone { id: 1 });
        assert_eq!(files_from(&undone).last_rewind(), None);
        // Histories from before these lines: nothing changed, nothing spent.
        assert_eq!(
            totals_from(&[StoredEvent::turn_end(None)]),
            Totals::default()
        );
    }

    #[test]
    fn the_todo_list_is_the_last_one_shown() {
        use crate::events::{TodoItem, TodoPriority, TodoStatus};
        let item = |content: &str, status| TodoItem {
            content: content.into(),
            status,
            priority: TodoPriority::Medium,
        };
        let first = vec![item("Read", TodoStatus::Pending)];
        let second = vec![
            item("Read", TodoStatus::Completed),
            item("Fix", TodoStatus::InProgress),
        ];
        assert!(todos_from(&[prompt("hi"), text("no list")]).is_empty());
        let history = vec![
            prompt("plan it"),
            shown(AgentEvent::Plan(first)),
            text("working"),
            shown(AgentEvent::Plan(second.clone())),
            text("still working"),
        ];
        assert_eq!(todos_from(&history), second);
        // Emptied (by the model or `/clear`): nothing to restore.
        let mut cleared = history;
        cleared.push(shown(AgentEvent::Plan(Vec::new())));
        assert!(todos_from(&cleared).is_empty());
    }

    #[test]
    fn unknown_event_kinds_read_as_unknown() {
        let event: StoredEvent =
            serde_json::from_value(json!({"event": "from_the_future", "x": 1})).unwrap();
        assert_eq!(event, StoredEvent::Unknown);
        let line = serde_json::to_string(&prompt("hé")).unwrap();
        let back: StoredEvent = serde_json::from_str(&line).unwrap();
        assert_eq!(back, prompt("hé"));
    }

    #[test]
    fn titles_come_from_the_first_line() {
        assert_eq!(
            title_from(&Message::user_text("\n  Fix the build  \nmore")),
            Some("Fix the build".into())
        );
        let long = "x".repeat(200);
        let title = title_from(&Message::user_text(long)).unwrap();
        assert_eq!(title.chars().count(), 80);
        assert!(title_from(&Message::user_text("   ")).is_none());
    }

    /// A compaction line written before stubs existed reads as one without
    /// any; one with stubs writes them and replays them.
    #[test]
    fn compaction_lines_with_and_without_stubs_read_back() {
        let old: StoredEvent = serde_json::from_str(
            r#"{"event":"context","op":{"op":"compact","entries":2,"summary":"s"}}"#,
        )
        .unwrap();
        let op = ContextOp::Compact {
            entries: 2,
            summary: "s".into(),
            elided: Vec::new(),
        };
        assert_eq!(old, StoredEvent::context(&op));
        let line = serde_json::to_string(&old).unwrap();
        assert!(!line.contains("elided"), "{line}");
        let stubbed = ContextOp::Compact {
            entries: 2,
            summary: "s".into(),
            elided: vec!["c1".into()],
        };
        let line = serde_json::to_string(&StoredEvent::context(&stubbed)).unwrap();
        assert!(line.contains(r#""elided":["c1"]"#), "{line}");
        let back: StoredEvent = serde_json::from_str(&line).unwrap();
        assert_eq!(back, StoredEvent::context(&stubbed));
    }
}
