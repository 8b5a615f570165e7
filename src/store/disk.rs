//! The session files' format, version 1: the store's own types, so that a
//! rename inside the agent cannot change what is on disk. Every type here
//! mirrors, field for field, the JSON that the first stored sessions hold
//! (`tests/fixtures/sessions/` has one). Those declared with
//! `mirrored_enum!` / `mirrored_struct!` also convert to and from the
//! agent's type of the same shape (`disk/mirror.rs`).
//!
//! A change that old readers would misread bumps [`FORMAT_VERSION`]; adding
//! an event kind does not (readers skip kinds they do not know).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::{self, TokenEstimator, rewind, spend};
use crate::model::SessionId;
use crate::{events, model};

#[macro_use]
mod mirror;
use mirror::Across;

/// The format this version writes, and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;

/// `metadata.json`: who a session is. Never holds secrets (MCP servers, with
/// their tokens, come from the client on every load).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    pub id: SessionId,
    pub cwd: PathBuf,
    #[serde(default)]
    pub title: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub provider: String,
    pub model: String,
    #[serde(default)]
    pub agent: Option<String>,
    pub mode: String,
    /// "Always" answers by tool name: true allows, false rejects.
    #[serde(default)]
    pub permissions: BTreeMap<String, bool>,
    /// The session this one was started from (a subagent's parent).
    #[serde(default)]
    pub parent_id: Option<SessionId>,
    /// The parent's `delegate` call that started this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_tool_call_id: Option<String>,
    /// Sessions this one delegated to, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<SessionId>,
    /// Workspace roots besides `cwd` (ACP `additionalDirectories`), as last
    /// activated; absent in sessions saved before they existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_directories: Vec<PathBuf>,
    /// The reasoning effort chosen (`off`…`high`); absent: the config's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_level: Option<String>,
    /// The client's `systemPrompt` (unstable ACP), applied again on load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<crate::model::ClientPrompt>,
    /// The session this one was forked from (`session/fork`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<SessionId>,
    /// The budgets `/budget` set for this session (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<Budgets>,
    /// Set when a turn or the session itself stopped on an internal error
    /// (a bug), until a later turn ends normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken: Option<Broken>,
    /// Archived (`session/archive`): left out of the default list and not
    /// opened until unarchived; its files stay. Readers before it skip it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub archived: bool,
}

/// An internal error that stopped a turn or the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Broken {
    pub at: String,
    /// The panic's message.
    pub detail: String,
}

/// `metadata.json` as written: the format first, then the metadata.
#[derive(Serialize)]
pub(super) struct MetadataOut<'a> {
    pub format_version: u32,
    #[serde(flatten)]
    pub metadata: &'a Metadata,
}

/// `metadata.json` as read: files from before the version field are version 1.
#[derive(Deserialize)]
pub(super) struct MetadataIn {
    #[serde(default = "first_version")]
    pub format_version: u32,
    #[serde(flatten)]
    pub metadata: Metadata,
}

fn first_version() -> u32 {
    1
}

/// One line of `history.jsonl`. New kinds may be added; a line of a kind
/// this version does not know reads as `Unknown` and is skipped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum StoredEvent {
    /// The user's prompt, as the model got it (images kept): a turn starts.
    UserPrompt {
        at: String,
        message: Message,
        /// The id the client knows it by; a prompt saved before ids were
        /// kept has none and goes by its place ([`prompt_id`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// The client's key for the submission, so a retry after a
        /// restart still inserts nothing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idempotency_key: Option<String>,
    },
    /// A user message that joined a running turn (steering), where it went
    /// in: after the round before it, before the next.
    SteeredPrompt {
        at: String,
        message: Message,
        message_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idempotency_key: Option<String>,
    },
    /// Something the client was shown.
    Update {
        update: StoredUpdate,
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
        estimator: Option<Estimator>,
        /// What the session had used by then, for its budgets.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        spent: Option<Totals>,
    },
    ModeChanged {
        mode: String,
    },
    ModelChanged {
        provider: String,
        model: String,
    },
    /// The agent wrote a file; the content it replaced is in `blobs/`.
    FileChanged {
        change: FileChange,
    },
    /// A rewind (or a rollback with files) took turns back.
    Rewound {
        rewind: Rewind,
    },
    /// That rewind was undone.
    RewindUndone {
        id: u64,
    },
    /// A turn or the session stopped on an internal error (a bug). What was
    /// written before it is intact.
    Crashed {
        at: String,
        detail: String,
    },
    /// A kind this version does not know (from a newer one): skipped.
    #[serde(other)]
    Unknown,
}

/// What a user message is known by: its id, and the client's key for it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PromptIds {
    pub message_id: String,
    pub idempotency_key: Option<String>,
}

/// The id of a prompt saved without one: its place among the history's
/// prompts (`n` from 0), the same on every load.
pub fn prompt_id(n: usize) -> String {
    format!("prompt-{n}")
}

impl StoredEvent {
    /// The name of the checkpoint this event made, if it made one.
    pub fn checkpoint(&self) -> Option<&str> {
        match self {
            StoredEvent::Context {
                op: ContextOp::Checkpoint { name },
            } => Some(name),
            _ => None,
        }
    }
}

mirrored_struct! {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Message = model::Message {
        role: Role,
        parts: Vec<Part>,
    }
}

/// What the client was shown (the replayable part).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StoredUpdate {
    AgentText { text: String },
    Thought { text: String },
    ToolCall { call: ToolCall },
    ToolCallUpdate { progress: ToolCallProgress },
    Plan { entries: Vec<TodoItem> },
}

impl StoredUpdate {
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

mirrored_struct! {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct ToolCall = events::ToolCallInfo {
        id: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        name: String,
        title: String,
        kind: ToolKind,
        raw_input: Value,
        locations: Vec<Location>,
    }
}

mirrored_struct! {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct ToolCallProgress = events::ToolCallProgress {
        id: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        name: String,
        status: ToolStatus,
        content: Vec<ToolContent>,
        locations: Vec<Location>,
        raw_output: Option<Value>,
    }
}

mirrored_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Role = model::Role {
        User,
        Assistant,
    }
}

mirrored_enum! {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    pub enum Part = model::Part {
        Text { text: String },
        Image { mime_type: String, data: String },
        Thinking {
            text: String,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            signature: Option<String>,
        },
        RedactedThinking { data: String },
        ToolCall { id: String, name: String, arguments: String },
        ToolResult {
            call_id: String,
            content: String,
            #[serde(default)]
            is_error: bool,
        },
    }
}

mirrored_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum ToolKind = events::ToolKind {
        Read, Edit, Delete, Move, Search, Execute, Fetch, Think, Other,
    }
}

mirrored_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum ToolStatus = events::ToolStatus {
        InProgress,
        Completed,
        Failed,
    }
}

mirrored_enum! {
    /// Externally tagged: `{"text": "…"}`, `{"diff": {…}}`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum ToolContent = events::ToolContent {
        Text(text: String),
        Image { mime_type: String, data: String },
        Diff { path: PathBuf, old_text: Option<String>, new_text: String },
        Terminal { terminal_id: String },
        // Never written: the recorder leaves it out (see `Recorder::shown`).
        Session { session_id: SessionId },
    }
}

mirrored_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum TodoStatus = events::TodoStatus {
        Pending,
        InProgress,
        Completed,
    }
}

mirrored_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum TodoPriority = events::TodoPriority {
        High,
        #[default]
        Medium,
        Low,
    }
}

mirrored_enum! {
    /// A change to the context stack.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "op", rename_all = "snake_case")]
    pub enum ContextOp = context::ContextOp {
        Compact {
            entries: usize,
            summary: String,
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            elided: Vec<String>,
        },
        Drop { start: usize, count: usize },
        Checkpoint { name: String },
        Rollback { name: String },
        Pop { count: usize },
        Reset,
    }
}

mirrored_struct! {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Location = events::Location {
        path: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        line: Option<u32>,
    }
}

mirrored_struct! {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct TodoItem = events::TodoItem {
        content: String,
        status: TodoStatus,
        #[serde(default)]
        priority: TodoPriority,
    }
}

mirrored_struct! {
    /// The limits `/budget` set; absent ones are not set.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    pub struct Budgets = spend::Budgets {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_turn_tokens: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_session_tokens: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_session_cost: Option<f64>,
    }
}

mirrored_struct! {
    /// The tokens and cost spent, at a turn's end.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    pub struct Totals = spend::Totals {
        turn_tokens: u64,
        session_tokens: u64,
        #[serde(default)]
        session_cost: f64,
    }
}

mirrored_struct! {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct FileChange = rewind::FileChange {
        turn: u64,
        path: PathBuf,
        /// None: the file did not exist.
        before: Option<String>,
        #[serde(default)]
        before_kept: bool,
        after: String,
    }
}

mirrored_struct! {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct RestoredFile = rewind::RestoredFile {
        path: PathBuf,
        restored: Option<String>,
        replaced: Option<String>,
    }
}

mirrored_struct! {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Rewind = rewind::Rewind {
        id: u64,
        checkpoint: String,
        turns: Vec<u64>,
        files: Vec<RestoredFile>,
        at_turn: u64,
    }
}

mirrored_struct! {
    /// What the provider's usage reports taught the token estimate.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    pub struct Estimator = context::TokenEstimator {
        drift: f64,
        observations: u32,
    }
}

impl StoredUpdate {
    /// What of `event` is worth replaying: not the usage, which is state
    /// the next turn reports again, not conversation.
    pub fn from_event(event: &events::AgentEvent) -> Option<Self> {
        use events::AgentEvent as Event;
        Some(match event {
            Event::AgentText(text) => Self::AgentText { text: text.clone() },
            Event::Thought(text) => Self::Thought { text: text.clone() },
            Event::ToolCall(call) => Self::ToolCall {
                call: call.clone().into(),
            },
            Event::ToolCallUpdate(progress) => Self::ToolCallUpdate {
                progress: progress.clone().into(),
            },
            Event::Plan(entries) => Self::Plan {
                entries: entries.clone().across(),
            },
            // Live events, not history. The Markdown plan is state: its
            // file is what a load shows (the call keeps the text).
            Event::Usage { .. }
            | Event::Notice(_)
            | Event::Compaction(_)
            | Event::PlanDocument(_) => return None,
        })
    }

    pub fn into_event(self) -> events::AgentEvent {
        use events::AgentEvent as Event;
        match self {
            Self::AgentText { text } => Event::AgentText(text),
            Self::Thought { text } => Event::Thought(text),
            Self::ToolCall { call } => Event::ToolCall(call.into()),
            Self::ToolCallUpdate { progress } => Event::ToolCallUpdate(progress.into()),
            Self::Plan { entries } => Event::Plan(entries.across()),
        }
    }
}

// ------------------------------------------------ from the agent's values

/// The lines the recorder writes, made from the agent's own values.
impl StoredEvent {
    pub fn prompt(at: String, message: &model::Message) -> Self {
        Self::UserPrompt {
            at,
            message: message.clone().into(),
            message_id: None,
            idempotency_key: None,
        }
    }

    /// A prompt with the id it is known by (and the key it was sent with).
    pub fn prompt_with_id(at: String, message: &model::Message, ids: &PromptIds) -> Self {
        Self::UserPrompt {
            at,
            message: message.clone().into(),
            message_id: Some(ids.message_id.clone()),
            idempotency_key: ids.idempotency_key.clone(),
        }
    }

    /// A message that joined the running turn.
    pub fn steered(at: String, message: &model::Message, ids: &PromptIds) -> Self {
        Self::SteeredPrompt {
            at,
            message: message.clone().into(),
            message_id: ids.message_id.clone(),
            idempotency_key: ids.idempotency_key.clone(),
        }
    }

    pub fn round(messages: &[Arc<model::Message>]) -> Self {
        Self::Round {
            messages: messages
                .iter()
                .map(|m| Message::from((**m).clone()))
                .collect(),
        }
    }

    pub fn context(op: &context::ContextOp) -> Self {
        Self::Context {
            op: op.clone().into(),
        }
    }

    pub fn turn_end(estimator: Option<TokenEstimator>) -> Self {
        Self::TurnEnd {
            estimator: estimator.map(Estimator::from),
            spent: None,
        }
    }

    /// A turn's end with what the session had spent by then.
    pub fn turn_end_spent(estimator: Option<TokenEstimator>, spent: spend::Totals) -> Self {
        Self::TurnEnd {
            estimator: estimator.map(Estimator::from),
            spent: Some(spent.into()),
        }
    }

    /// An event the client was shown, when it is worth replaying.
    pub fn shown(event: &events::AgentEvent) -> Option<Self> {
        StoredUpdate::from_event(event).map(|update| Self::Update { update })
    }
}
