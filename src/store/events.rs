//! What a history line holds, and the two views rebuilt from a history: the
//! updates to replay and the model's context.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::agent_loop::{AgentEvent, ToolCallInfo, ToolCallProgress};
use crate::providers::{Message, Part, Role};
use crate::session::Update;
use crate::tools::TodoItem;

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
    /// user's (assistant text, tool calls and their results).
    Messages {
        messages: Vec<Message>,
    },
    ModeChanged {
        mode: String,
    },
    ModelChanged {
        provider: String,
        model: String,
    },
    /// The context was compacted: from here on it is `messages`.
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

/// The model's context after `events`. A turn cut short by a crash keeps its
/// prompt and the text the user saw of the answer (as a cancel does); its
/// tool calls are dropped, since their results may never have been recorded.
pub fn context_from(events: &[StoredEvent]) -> Vec<Arc<Message>> {
    let mut context: Vec<Arc<Message>> = Vec::new();
    // The prompt of a turn whose messages are not recorded yet, and what was seen of its answer.
    let mut open: Option<(Message, String)> = None;
    let close_cut_short = |context: &mut Vec<Arc<Message>>,
                           open: &mut Option<(Message, String)>| {
        if let Some((prompt, seen)) = open.take() {
            context.push(Arc::new(prompt));
            if !seen.is_empty() {
                context.push(Arc::new(Message::assistant_text(seen)));
            }
        }
    };
    for event in events {
        match event {
            StoredEvent::UserPrompt { message, .. } => {
                close_cut_short(&mut context, &mut open);
                open = Some((message.clone(), String::new()));
            }
            StoredEvent::Update {
                update: StoredUpdate::AgentText { text },
            } => {
                if let Some((_, seen)) = open.as_mut() {
                    seen.push_str(text);
                }
            }
            StoredEvent::Messages { messages } => {
                if let Some((prompt, _)) = open.take() {
                    context.push(Arc::new(prompt));
                }
                context.extend(messages.iter().cloned().map(Arc::new));
            }
            StoredEvent::Compaction { messages, .. } => {
                open = None;
                context = messages.iter().cloned().map(Arc::new).collect();
            }
            _ => {}
        }
    }
    close_cut_short(&mut context, &mut open);
    context
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
    use crate::agent_loop::ToolStatus;
    use crate::tools::{ToolContent, ToolKind};
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
        let context = context_from(&events);
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
        let context = context_from(&compacted);
        assert_eq!(context.len(), 2);
        assert_eq!(context[0].text(), "summary");
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
