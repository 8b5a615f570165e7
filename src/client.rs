//! The client port: what the agent asks of the editor (show an update, ask
//! for a permission, files, terminals) in the agent's own terms. The ACP
//! adapter (`crate::acp`) implements it over JSON-RPC; tests record it
//! (`testing::RecordingClient`). Everything below the adapter talks to the
//! editor only through this port.

use std::path::PathBuf;

use futures::future::BoxFuture;
use thiserror::Error;

use crate::events::{AgentEvent, StopReason, TodoItem, ToolCallInfo};
use crate::model::{Part, SessionId};

#[cfg(test)]
pub mod testing;

/// What a request to the client comes back as.
pub type ClientFuture<'a, T> = BoxFuture<'a, Result<T, ClientError>>;

/// Everything a session sends to its client and asks of it. The seam that
/// keeps session logic free of stdio: the ACP adapter implements it, tests
/// record it. Files and terminals are asked for only when the client offered
/// them ([`ClientAbilities`]). Modelled on the ACP SDK's `Client` trait: one
/// typed request, one typed answer; a request's future owns what it needs.
pub trait ClientSink: Send + Sync {
    fn send(&self, session_id: &SessionId, update: Update);
    /// Resolves when the client can take more updates. A turn waits for it
    /// before reading more of its model's answer, so a client that stops
    /// reading holds the model back instead of filling the agent's memory.
    /// (No default: a wrapper that forgot to pass it on would lift the bound.)
    fn room(&self) -> BoxFuture<'_, ()>;
    /// Ask the user whether `call` may run.
    fn request_permission(
        &self,
        session_id: &SessionId,
        call: &ToolCallInfo,
    ) -> ClientFuture<'_, PermissionChoice>;
    /// A text file as the editor has it (unsaved changes included).
    fn read_text_file(&self, request: ReadTextFile) -> ClientFuture<'_, String>;
    fn write_text_file(&self, request: WriteTextFile) -> ClientFuture<'_, ()>;
    /// Start a command in a terminal of the editor's.
    fn create_terminal(&self, request: CreateTerminal) -> ClientFuture<'_, TerminalId>;
    /// What the terminal printed so far, and its exit if it has ended.
    fn terminal_output(&self, terminal: &TerminalId) -> ClientFuture<'_, TerminalOutput>;
    fn wait_for_terminal_exit(&self, terminal: &TerminalId) -> ClientFuture<'_, TerminalExit>;
    /// Stop the command; the terminal stays until it is released.
    fn kill_terminal(&self, terminal: &TerminalId) -> ClientFuture<'_, ()>;
    fn release_terminal(&self, terminal: &TerminalId) -> ClientFuture<'_, ()>;
    /// The session was closed (`session/close`, delete, archive; told
    /// before the close is answered): what the client kept for it may go.
    fn session_ended(&self, _session_id: &SessionId) {}
    /// Ask the user a question in a form of the editor's (ACP elicitation);
    /// only for clients that offer it ([`ClientAbilities::ask_user`]).
    fn ask_user(&self, _question: Question) -> ClientFuture<'_, Answer> {
        Box::pin(async {
            Err(ClientError::Failed(
                "this client cannot ask the user".into(),
            ))
        })
    }
}

/// A client port to nobody: for sessions whose clients come and go
/// (`serve` gives each its connection's), what is sent here is dropped and
/// what is asked fails as with a client that went away.
pub struct Nobody;

impl ClientSink for Nobody {
    fn send(&self, _session_id: &SessionId, _update: Update) {}

    fn room(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    fn request_permission(
        &self,
        _session_id: &SessionId,
        _call: &ToolCallInfo,
    ) -> ClientFuture<'_, PermissionChoice> {
        Box::pin(std::future::ready(Ok(PermissionChoice::Cancelled)))
    }

    fn read_text_file(&self, _request: ReadTextFile) -> ClientFuture<'_, String> {
        gone()
    }

    fn write_text_file(&self, _request: WriteTextFile) -> ClientFuture<'_, ()> {
        gone()
    }

    fn create_terminal(&self, _request: CreateTerminal) -> ClientFuture<'_, TerminalId> {
        gone()
    }

    fn terminal_output(&self, _terminal: &TerminalId) -> ClientFuture<'_, TerminalOutput> {
        gone()
    }

    fn wait_for_terminal_exit(&self, _terminal: &TerminalId) -> ClientFuture<'_, TerminalExit> {
        gone()
    }

    fn kill_terminal(&self, _terminal: &TerminalId) -> ClientFuture<'_, ()> {
        gone()
    }

    fn release_terminal(&self, _terminal: &TerminalId) -> ClientFuture<'_, ()> {
        gone()
    }
}

fn gone<'a, T: Send + 'a>() -> ClientFuture<'a, T> {
    Box::pin(std::future::ready(Err(ClientError::Disconnected)))
}

/// A question for the user: one answer, picked from `choices` when there
/// are any, else typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub session_id: SessionId,
    pub message: String,
    /// (value, label) pairs; empty asks for a short text.
    pub choices: Vec<(String, String)>,
}

/// What the user did with a [`Question`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Given(String),
    /// Said no (or answered with nothing).
    Declined,
    /// Dismissed the question.
    Cancelled,
}

/// Why a request to the client did not get the answer asked for. The
/// messages are the client's own (or say what was wrong with its answer).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClientError {
    /// What was asked for does not exist (a file, a terminal).
    #[error("{0}")]
    NotFound(String),
    /// The client refused or failed, or answered something unreadable.
    #[error("{0}")]
    Failed(String),
    /// The client went away before it answered.
    #[error("the client connection closed")]
    Disconnected,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadTextFile {
    pub session_id: SessionId,
    pub path: PathBuf,
    /// The first line to read, 1-based.
    pub line: Option<u32>,
    /// The most lines to read.
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteTextFile {
    pub session_id: SessionId,
    pub path: PathBuf,
    pub content: String,
}

/// A command to run in a terminal of the editor's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTerminal {
    pub session_id: SessionId,
    pub command: String,
    pub args: Vec<String>,
    /// Added to the terminal's environment.
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// The most output the editor keeps (it drops the start beyond that).
    pub output_byte_limit: Option<u64>,
}

/// Names one terminal the editor created (its ids are per session).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalId {
    pub session_id: SessionId,
    pub terminal_id: String,
}

/// A terminal's output so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TerminalOutput {
    pub output: String,
    /// The editor dropped the start to stay within its byte limit.
    pub truncated: bool,
    /// Set once the command has ended.
    pub exit: Option<TerminalExit>,
}

/// How a command in a terminal ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TerminalExit {
    pub exit_code: Option<u32>,
    /// The signal that ended it, as the editor names it ("SIGKILL", "9").
    pub signal: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    Agent(AgentEvent),
    /// A whole message of the agent's (its answer or its thinking), shown
    /// again by a replay; live it came as chunks (`Agent` text and
    /// thoughts, `Tagged`). ACP v1 shows it as one chunk, v2 as one
    /// `agent_message` or `agent_thought`, as v2 asks of a replay.
    AgentMessage(AgentMessage),
    ConfigOptions(Vec<SelectOption>),
    /// The session's mode changed (ACP `current_mode_update`).
    CurrentMode(String),
    /// The slash commands the session offers (ACP `available_commands_update`).
    AvailableCommands(Vec<CommandInfo>),
    /// A user message the conversation took in, with the id it is known by
    /// (ACP v2 `messageId`; v1 shows only a replayed one, as chunks).
    UserPrompt(UserPrompt),
    /// The session's foreground state (ACP v2 `state_update`; v1 has none:
    /// there the prompt's answer ends the turn).
    State(SessionState),
    /// The replay a resume asked for is over (ACP v2 `replay_complete`).
    ReplayComplete,
    /// The session's title or last activity changed (ACP `session_info_update`).
    SessionInfo {
        title: Option<String>,
        updated_at: String,
    },
    /// A delegated agent this session started, or its new state (ACP
    /// unstable `subagent_update`, for clients that take them).
    Subagent(SubagentInfo),
    /// A message this session sent to or got from another (ACP
    /// `session_message`): a delegated task and its answer.
    SessionMessage(SessionMessage),
    /// A plan by its id, for clients that take plan operations (ACP
    /// `plan_update`); others get the todo list as the old `plan`.
    Plan {
        plan_id: String,
        plan: PlanContent,
    },
    /// A plan that no longer exists (ACP `plan_removed`).
    PlanRemoved {
        plan_id: String,
    },
    /// Part of the agent's answer or thinking, with the id of the message
    /// it belongs to (ACP `messageId`), for clients that take cursors.
    Tagged {
        message_id: String,
        event: AgentEvent,
    },
    /// A point of the session the client may act at (ACP unstable
    /// `cursor_update`): a checkpoint of the context stack.
    Cursor(Cursor),
    /// The prompts the user is likely to send next, most likely first,
    /// replacing the ones offered before; empty withdraws them (ACP
    /// unstable `prompt_suggestions_update`, for clients that take them).
    /// Not part of the history: never recorded, never replayed.
    PromptSuggestions(Vec<String>),
}

/// One of the agent's messages, whole.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentMessage {
    pub kind: MessageKind,
    pub text: String,
    /// The id it was shown under live where the session named it (`Tagged`,
    /// for clients that take cursors); None: the client's translation
    /// names it as it named its chunks.
    pub message_id: Option<String>,
}

/// What the agent's message is: its answer, or its thinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    Answer,
    Thought,
}

impl AgentMessage {
    /// `update` as a whole message when it is the agent's text or thought
    /// (a replay's, whose chunks the store joined); anything else as it is.
    pub fn whole(update: Update) -> Update {
        let (message_id, event) = match update {
            Update::Agent(event) => (None, event),
            Update::Tagged { message_id, event } => (Some(message_id), event),
            other => return other,
        };
        let (kind, text) = match event {
            AgentEvent::AgentText(text) => (MessageKind::Answer, text),
            AgentEvent::Thought(text) => (MessageKind::Thought, text),
            event => {
                return match message_id {
                    Some(message_id) => Update::Tagged { message_id, event },
                    None => Update::Agent(event),
                };
            }
        };
        Update::AgentMessage(AgentMessage {
            kind,
            text,
            message_id,
        })
    }
}

/// A user message and the id it keeps for good: saved with it, so a
/// replay shows it under the same id.
#[derive(Debug, Clone, PartialEq)]
pub struct UserPrompt {
    pub message_id: String,
    pub content: Vec<Part>,
    pub origin: PromptOrigin,
}

/// How a user message came into the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptOrigin {
    /// A prompt that starts a turn, as the turn starts.
    Live,
    /// A prompt sent while a turn ran, as it joins that turn.
    Steered,
    /// A stored prompt shown again (a load, or a resume that replays).
    Replayed,
}

/// Whether the session works in the foreground (ACP v2 `state_update`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    Running,
    /// Waiting for the user (a permission question).
    RequiresAction,
    /// Ready for a prompt; the foreground work that ended, and why.
    Idle(StopReason),
    /// Ready for a prompt, with no work just ended: the state a resumed
    /// session reports after its replay (a snapshot, not a completion).
    Ready,
}

/// The plan the session keeps as a todo list (the `todo` tool's).
pub const TODO_PLAN_ID: &str = "todos";

/// The plan the model writes as Markdown (the `write_plan` tool's).
pub const MARKDOWN_PLAN_ID: &str = "plan";

/// What a plan holds.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanContent {
    Items(Vec<TodoItem>),
    /// The whole plan, and the absolute path of the file that holds it.
    Markdown {
        content: String,
        path: Option<PathBuf>,
    },
}

/// A named point of the session, just before or after something the
/// client was shown.
#[derive(Debug, Clone, PartialEq)]
pub struct Cursor {
    /// Unique in the session; also its checkpoint's name.
    pub id: String,
    pub at: Shown,
    /// Just after it (else just before).
    pub after: bool,
    /// `session/fork` takes it.
    pub fork: bool,
}

/// Something the client was shown, by the id it knows it by.
#[derive(Debug, Clone, PartialEq)]
pub enum Shown {
    AgentMessage(String),
    AgentThought(String),
    ToolCall(String),
    Compaction(String),
}

/// A child session as its parent shows it; None leaves a field as it was.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentInfo {
    pub session_id: SessionId,
    pub title: Option<String>,
    pub description: Option<String>,
    pub state: Option<SubagentState>,
    pub cwd: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SubagentState {
    Running,
    /// Waiting for the user (a permission question).
    WaitingForUser,
    /// Its turn ended.
    Idle(StopReason),
    /// It failed, and why.
    Failed(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct SessionMessage {
    /// Unique in the transcript it is shown in.
    pub message_id: String,
    pub sender: SessionId,
    pub recipient: SessionId,
    pub text: String,
}

/// A session setting the client can change (a select, in ACP terms).
#[derive(Debug, Clone, PartialEq)]
pub struct SelectOption {
    pub id: String,
    pub name: String,
    pub description: String,
    pub category: OptionCategory,
    pub current: String,
    pub values: Vec<OptionValue>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OptionValue {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionCategory {
    Model,
    Provider,
    Mode,
    Agent,
    /// How commands are confined (not a category ACP defines).
    Sandbox,
    /// Reasoning effort.
    ThoughtLevel,
}

pub const MODEL_OPTION: &str = "model";
pub const AGENT_OPTION: &str = "agent";
pub const PROVIDER_OPTION: &str = "provider";
pub const MODE_OPTION: &str = "mode";
pub const SANDBOX_OPTION: &str = "sandbox";
pub const THOUGHT_OPTION: &str = "thought_level";

/// The client capabilities tools can use instead of the local machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientAbilities {
    pub read_text_file: bool,
    pub write_text_file: bool,
    pub terminal: bool,
    /// Shows notices (ACP `session.notices`); else they go out as thoughts.
    pub notices: bool,
    /// Shows compactions (ACP `session.compaction`).
    pub compaction: bool,
    /// Asks the user questions in forms (ACP `elicitation.form`).
    pub ask_user: bool,
    /// Shows delegated agents as sessions of their own (ACP `subagents`):
    /// their updates go out under their own session ids.
    pub subagents: bool,
    /// Takes plans by id (ACP `plan`: `plan_update`, `plan_removed`).
    pub plans: bool,
    /// Takes cursors (ACP unstable `session.cursors`, when `[acp] unstable`
    /// names `cursors`); `fork` says whether they can be forked at.
    pub cursors: Option<CursorUse>,
    /// Takes prompt suggestions (ACP unstable `session.promptSuggestions`,
    /// when `[acp] unstable` names `prompt_suggestions`).
    pub prompt_suggestions: bool,
}

/// What a client that takes cursors can do with them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CursorUse {
    pub fork: bool,
}

/// The user's answer to one permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionChoice {
    AllowOnce,
    AllowAlways,
    /// Always, in this project: a rule written to the project's
    /// `.crucible/permissions.toml`, as narrow as the question.
    AllowInProject,
    /// Always, in every project: the same rule in the user's file.
    AllowEverywhere,
    RejectOnce,
    RejectAlways,
    /// The client cancelled the question (the user cancelled the turn).
    Cancelled,
}

impl PermissionChoice {
    /// The option ids offered to the client, in the order shown.
    pub const OFFERED: [(PermissionChoice, &'static str, &'static str); 6] = [
        (PermissionChoice::AllowOnce, "allow_once", "Allow"),
        (
            PermissionChoice::AllowAlways,
            "allow_always",
            "Always allow",
        ),
        (
            PermissionChoice::AllowInProject,
            "allow_project",
            "Always allow in this project",
        ),
        (
            PermissionChoice::AllowEverywhere,
            "allow_everywhere",
            "Always allow everywhere",
        ),
        (PermissionChoice::RejectOnce, "reject_once", "Reject"),
        (
            PermissionChoice::RejectAlways,
            "reject_always",
            "Always reject",
        ),
    ];

    pub fn from_option_id(id: &str) -> Option<Self> {
        Self::OFFERED
            .iter()
            .find(|(_, option, _)| *option == id)
            .map(|(choice, _, _)| *choice)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandInfo {
    pub name: String,
    pub description: String,
    /// Shown by clients for the text after the name.
    pub hint: Option<String>,
}
