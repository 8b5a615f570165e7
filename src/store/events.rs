//! What a history line holds, and the two views rebuilt from a history: the
//! updates to replay and the model's context.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::client::Update;
use crate::context::{ContextManager, ContextOp, TokenEstimator};
use crate::events::TodoItem;
use crate::events::{AgentEvent, ToolCallInfo, ToolCallProgress};
use crate::model::{Message, Part, Role};

/// One line of `history.jsonl`. New kinds may be added; a line of a kind this
/// version does not know reads as `Unknown` and is skipped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum StoredEvent {
    /// The user's prompt, as the model got it (images kept).
    UserPrompt {
        at: String,
        message: Message,
    },
    /// Something the client was shown during a turn.
    Update {
        update: StoredUpdate,
    },
    /// The messages a finished turn added to the model's context after the
    /// user's (assistant text, tool calls and their results). Written by
    /// older versions; it also ends the turn.
    Messages {
        messages: Vec<Message>,
    },
    /// Messages one model round added, written as soon as the round is
    /// done: a model answer, with its tool calls' results when it made any.
    Round {
        messages: Vec<Message>,
    },
    /// A change to the context stack (compaction, drop, checkpoint…),
    /// replayed in order on top of the messages.
    Context {
        op: ContextOp,
    },
    /// The turn is over: everything it added is in the rounds before.
    TurnEnd {
        /// What the provider's usage taught the token estimate so far.
        #[serde(default)]
        estimator: Option<TokenEstimator>,
    },
    ModeChanged {
        mode: String,
    },
    ModelChanged {
        provider: String,
        model: String,
    },
    /// The context was compacted: from here on it is `messages`. Never
    /// written; read for files that may hold it.
    Compaction {
        #[serde(default)]
        summary: String,
        messages: Vec<Message>,
    },
    /// A named point in the context the user may return to.
    Checkpoint {
        name: String,
    },
    #[serde(other)]
    Unknown,
}

/// The replayable subset of what a session sends its client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StoredUpdate {
    AgentText { text: String },
    Thought { text: String },
    ToolCall { call: ToolCallInfo },
    ToolCallUpdate { progress: ToolCallProgress },
    Plan { entries: Vec<TodoItem> },
}

impl StoredUpdate {
    /// What of `update` is worth replaying. Usage, options and mode are
    /// state the load answer carries, not conversation.
    pub fn from_update(update: &Update) -> Option<Self> {
        match update {
            Update::Agent(event) => match event {
                AgentEvent::AgentText(text) => Some(Self::AgentText { text: text.clone() }),
                AgentEvent::Thought(text) => Some(Self::Thought { text: text.clone() }),
                AgentEvent::ToolCall(call) => Some(Self::ToolCall { call: call.clone() }),
                AgentEvent::ToolCallUpdate(progress) => Some(Self::ToolCallUpdate {
                    progress: progress.clone(),
                }),
                AgentEvent::Plan(entries) => Some(Self::Plan {
                    entries: entries.clone(),
                }),
                AgentEvent::Usage { .. } => None,
            },
            _ => None,
        }
    }

    pub fn into_update(self) -> Update {
        Update::Agent(match self {
            Self::AgentText { text } => AgentEvent::AgentText(text),
            Self::Thought { text } => AgentEvent::Thought(text),
            Self::ToolCall { call } => AgentEvent::ToolCall(call),
            Self::ToolCallUpdate { progress } => AgentEvent::ToolCallUpdate(progress),
            Self::Plan { entries } => AgentEvent::Plan(entries),
        })
    }

    /// Append `next` to `self` when both are chunks of the same stream.
    pub fn coalesce(&mut self, next: &StoredUpdate) -> bool {
        match (self, next) {
            (Self::AgentText { text }, Self::AgentText { text: more })
            | (Self::Thought { text }, Self::Thought { text: more }) => {
                text.push_str(more);
                true
            }
            _ => false,
        }
    }
}

/// The updates that show the conversation again, in the order the client
/// first saw them, with consecutive chunks joined.
pub fn replay_from(events: &[StoredEvent]) -> Vec<Update> {
    let mut out: Vec<StoredUpdateOrUser> = Vec::new();
    for event in events {
        match event {
            StoredEvent::UserPrompt { message, .. } => {
                for part in &message.parts {
                    if matches!(part, Part::Text { .. } | Part::Image { .. }) {
                        out.push(StoredUpdateOrUser::User(part.clone()));
                    }
                }
            }
            StoredEvent::Update { update } => {
                if let Some(StoredUpdateOrUser::Agent(last)) = out.last_mut()
                    && last.coalesce(update)
                {
                    continue;
                }
                out.push(StoredUpdateOrUser::Agent(update.clone()));
            }
            _ => {}
        }
    }
    out.into_iter()
        .map(|item| match item {
            StoredUpdateOrUser::User(part) => Update::UserMessage(part),
            StoredUpdateOrUser::Agent(update) => update.into_update(),
        })
        .collect()
}

enum StoredUpdateOrUser {
    User(Part),
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
            StoredEvent::UserPrompt { message, .. } => {
                close_cut_short(&mut context, &mut open);
                context.push(Arc::new(message.clone()));
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
                    context.push(Arc::new(message.clone()));
                }
                if let Some(seen) = open.as_mut() {
                    seen.clear();
                }
            }
            StoredEvent::Messages { messages } => {
                for message in messages {
                    context.push(Arc::new(message.clone()));
                }
                open = None;
            }
            StoredEvent::TurnEnd { estimator } => {
                open = None;
                if let Some(estimator) = estimator {
                    context.estimator = *estimator;
                }
            }
            StoredEvent::Context { op } => apply(&mut context, op),
            StoredEvent::Checkpoint { name } => {
                apply(&mut context, &ContextOp::Checkpoint { name: name.clone() })
            }
            StoredEvent::Compaction { messages, .. } => {
                open = None;
                apply(&mut context, &ContextOp::Reset);
                for message in messages {
                    context.push(Arc::new(message.clone()));
                }
            }
            _ => {}
        }
    }
    let cut_short = open.clone();
    close_cut_short(&mut context, &mut open);
    Restored { context, cut_short }
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
    use crate::events::ToolStatus;
    use crate::events::{ToolContent, ToolKind};
    use serde_json::json;

    fn text(t: &str) -> StoredEvent {
        StoredEvent::Update {
            update: StoredUpdate::AgentText { text: t.into() },
        }
    }

    fn prompt(t: &str) -> StoredEvent {
        StoredEvent::UserPrompt {
            at: "2026-01-01T00:00:00.000Z".into(),
            message: Message::user_text(t),
        }
    }

    fn call() -> ToolCallInfo {
        ToolCallInfo {
            id: "t1".into(),
            title: "Read a.txt".into(),
            kind: ToolKind::Read,
            raw_input: json!({"path": "a.txt"}),
            locations: Vec::new(),
        }
    }

    #[test]
    fn replay_joins_chunks_and_keeps_order() {
        let events = vec![
            prompt("hi"),
            text("Hel"),
            text("lo"),
            StoredEvent::Update {
                update: StoredUpdate::ToolCall { call: call() },
            },
            StoredEvent::Update {
                update: StoredUpdate::ToolCallUpdate {
                    progress: ToolCallProgress {
                        id: "t1".into(),
                        status: ToolStatus::Completed,
                        content: vec![ToolContent::Text("x".into())],
                        locations: Vec::new(),
                        raw_output: None,
                    },
                },
            },
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
            Update::UserMessage(Part::Text { text: "hi".into() })
        );
        assert_eq!(
            replay[1],
            Update::Agent(AgentEvent::AgentText("Hello".into()))
        );
        assert!(matches!(replay[2], Update::Agent(AgentEvent::ToolCall(_))));
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
            StoredEvent::Messages {
                messages: vec![Message::assistant_text("first answer")],
            },
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
        // A compaction replaces everything before it.
        let mut compacted = events.clone();
        compacted.push(StoredEvent::Compaction {
            summary: "s".into(),
            messages: vec![Message::user_text("summary")],
        });
        compacted.push(prompt("three"));
        let context = context_from(&compacted).context.messages();
        assert_eq!(context.len(), 2);
        assert_eq!(context[0].text(), "summary");
    }

    fn call_message(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall {
                id: id.into(),
                name: "read_file".into(),
                arguments: "{}".into(),
            }],
        }
    }

    fn result_message(id: &str) -> Message {
        Message {
            role: Role::User,
            parts: vec![Part::ToolResult {
                call_id: id.into(),
                content: "out".into(),
                is_error: false,
            }],
        }
    }

    fn texts(context: &ContextManager) -> Vec<String> {
        context.messages().iter().map(|m| m.text()).collect()
    }

    /// Rounds, operations and turn ends replay to the context the live
    /// session had, checkpoints included.
    #[test]
    fn rounds_and_context_operations_replay_in_order() {
        let round = |messages: Vec<Message>| StoredEvent::Round { messages };
        let op = |op: ContextOp| StoredEvent::Context { op };
        let end = StoredEvent::TurnEnd {
            estimator: Some(TokenEstimator {
                drift: 1.5,
                observations: 3,
            }),
        };
        let events = vec![
            prompt("one"),
            text("a1"),
            round(vec![Message::assistant_text("a1")]),
            end.clone(),
            op(ContextOp::Checkpoint { name: "cp".into() }),
            prompt("two"),
            round(vec![call_message("c1"), result_message("c1")]),
            // A compaction between rounds: the first turn becomes a summary.
            op(ContextOp::Compact {
                entries: 2,
                summary: "s".into(),
            }),
            text("a2"),
            round(vec![Message::assistant_text("a2")]),
            end.clone(),
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
        let mut cut = events.clone();
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
            StoredEvent::Context {
                op: ContextOp::Drop { start: 0, count: 2 },
            },
            StoredEvent::TurnEnd { estimator: None },
            StoredEvent::Round {
                messages: vec![Message::assistant_text("x")],
            },
        ];
        for event in events {
            let line = serde_json::to_string(&event).unwrap();
            assert_eq!(serde_json::from_str::<StoredEvent>(&line).unwrap(), event);
        }
        // A turn end written without an estimator still reads.
        let bare: StoredEvent = serde_json::from_value(json!({"event": "turn_end"})).unwrap();
        assert_eq!(bare, StoredEvent::TurnEnd { estimator: None });
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
}
