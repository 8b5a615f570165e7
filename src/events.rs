//! What a turn reports while it runs, in the agent's own terms: text,
//! thoughts, tool calls and their progress, the plan, and why a turn
//! ended. The ACP adapter translates these; the store saves them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::SessionId;

/// What a turn tells the client while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    AgentText(String),
    Thought(String),
    /// Tokens in use after a call, and the window they live in; with the
    /// session's spending so far where the config prices the model.
    Usage {
        used: u64,
        size: u64,
        cost: Option<Cost>,
    },
    /// Something the user should hear of outside the conversation (ACP
    /// `notice` where the client takes them, a thought elsewhere).
    Notice(Notice),
    /// A compaction's start, streamed summary and end (ACP
    /// `compaction_update` / `compaction_summary_chunk` where the client
    /// takes them).
    Compaction(Compaction),
    /// The model asked for a tool (ACP `tool_call`, pending).
    ToolCall(ToolCallInfo),
    /// A tool call started, finished or failed (ACP `tool_call_update`).
    ToolCallUpdate(ToolCallProgress),
    /// The model's task list changed (ACP `plan`).
    Plan(Vec<TodoItem>),
    /// The plan the model wrote as Markdown (`write_plan`), or None once
    /// it is removed. Only clients that take plans by id are shown it.
    PlanDocument(Option<PlanDocument>),
}

/// A plan written as Markdown, and the file that holds it (None: a session
/// that is not saved keeps it in memory only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanDocument {
    pub markdown: String,
    pub path: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallInfo {
    /// Unique within the session (providers' own ids may repeat across turns).
    pub id: String,
    /// The tool's programmatic name (as the model called it).
    pub name: String,
    pub title: String,
    pub kind: ToolKind,
    pub raw_input: Value,
    pub locations: Vec<Location>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    InProgress,
    Completed,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallProgress {
    pub id: String,
    /// The tool's name, repeated so a client that joins late still knows it.
    pub name: String,
    pub status: ToolStatus,
    pub content: Vec<ToolContent>,
    pub locations: Vec<Location>,
    pub raw_output: Option<Value>,
}

/// A live message for the user: a retry wait, an MCP server down, a
/// session that cannot be saved. Not part of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub severity: Severity,
    /// Stands alone, plain text.
    pub title: String,
    pub detail: Option<String>,
    /// What a client that takes no notices is shown instead, as a thought.
    pub thought: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// One step of a compaction, named by its id (unique in the session).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compaction {
    /// `thought`: what a client without compaction updates is told instead.
    Started {
        id: String,
        thought: Option<String>,
    },
    SummaryChunk {
        id: String,
        text: String,
    },
    Ended {
        id: String,
        outcome: CompactionOutcome,
        thought: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactionOutcome {
    Completed,
    Failed(String),
    Cancelled,
}

/// Money (or credits) spent so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Cost {
    pub amount: f64,
    /// ISO 4217 code ("USD") or another unit ("credits").
    pub currency: String,
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    MaxTokens,
    MaxTurnRequests,
    Refusal,
    Cancelled,
}

/// ACP's tool kinds: how the editor groups and pictures a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Read,
    Edit,
    Delete,
    Move,
    Search,
    Execute,
    Fetch,
    Think,
    Other,
}

impl ToolKind {
    pub const ALL: [ToolKind; 9] = [
        ToolKind::Read,
        ToolKind::Edit,
        ToolKind::Delete,
        ToolKind::Move,
        ToolKind::Search,
        ToolKind::Execute,
        ToolKind::Fetch,
        ToolKind::Think,
        ToolKind::Other,
    ];

    /// The kind named by its ACP wire name (config rules use these).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }

    /// The ACP wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Read => "read",
            ToolKind::Edit => "edit",
            ToolKind::Delete => "delete",
            ToolKind::Move => "move",
            ToolKind::Search => "search",
            ToolKind::Execute => "execute",
            ToolKind::Fetch => "fetch",
            ToolKind::Think => "think",
            ToolKind::Other => "other",
        }
    }
}

/// A place the editor can follow: an absolute path, and a 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    pub path: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

impl Location {
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            line: None,
        }
    }

    pub fn at_line(path: impl Into<PathBuf>, line: u32) -> Self {
        Self {
            path: path.into(),
            line: Some(line),
        }
    }
}

/// What the editor shows for a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
// Stored in session history (externally tagged: `Text` is a newtype).
#[serde(rename_all = "snake_case")]
pub enum ToolContent {
    Text(String),
    /// An image a tool returned (MCP), base64 as the wire carries it.
    Image {
        mime_type: String,
        data: String,
    },
    /// An edit, with whole-file texts: `old_text` is None for a new file.
    Diff {
        path: PathBuf,
        old_text: Option<String>,
        new_text: String,
    },
    /// A terminal the editor runs (ACP `terminal/create`), shown live.
    Terminal {
        terminal_id: String,
    },
    /// Another session this call started (a delegated agent), for clients
    /// that show them; shown live, not kept in the history.
    Session {
        session_id: SessionId,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TodoPriority {
    High,
    #[default]
    Medium,
    Low,
}

/// One entry of the session's todo list (an ACP `plan` entry).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    pub content: String,
    pub status: TodoStatus,
    #[serde(default)]
    pub priority: TodoPriority,
}
