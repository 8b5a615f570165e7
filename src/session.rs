//! One actor task per session. It owns the session's state, split by how
//! long each part lives: the services it works with (fixed for its life),
//! its settings (changed by the client), the conversation, and the running
//! turn (one at a time, with its cancellation token). Everything else talks
//! to it through its mailbox, so sessions never lock or block each other.

pub mod attachments;
mod between_turns;
mod budget;
mod cursors;
mod fallback;
mod foreground;
mod live;
pub mod manager;
mod permissions_command;
mod pick;
mod prewarm;
mod prompts;
mod record;
mod rewind;
mod rule_files;
pub mod runtime;
mod sandbox;
mod services;
mod settings;
mod shared;
mod skills;
mod slash;
mod steering;
mod subagents;
mod suggestions;
#[cfg(test)]
mod tests;
mod turn;

use std::path::PathBuf;

use thiserror::Error;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use prompts::Advertise;
pub use settings::{InitialOption, Settings};
use settings::{Notify, SettingChange};
pub use shared::{Defaults, Shared};

use services::Services;
use settings::SettingsState;
use turn::RunningTurn;

use crate::client::{ClientAbilities, CommandInfo, MODE_OPTION, SelectOption, Update};
use crate::context::ContextManager;
use crate::events::{AgentEvent, Notice, StopReason};
use crate::mcp::McpServerSpec;
use crate::model::{Part, SessionId};
use crate::providers::{ModelInfo, ProviderError, Usage};
use crate::store::Recorder;

#[derive(Debug, Error)]
pub enum SessionError {
    #[error(
        "session {0} is already answering a prompt; wait for it to finish or send session/cancel first"
    )]
    Busy(SessionId),
    #[error("unknown config option `{0}`; this session has: {1}")]
    UnknownOption(String, String),
    #[error("`{value}` is not a value of option `{option}`; choose one of: {choices}")]
    UnknownValue {
        option: String,
        value: String,
        choices: String,
    },
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(
        "the turn failed unexpectedly: {0}. The session is still usable; please report this with the log"
    )]
    Crashed(String),
    #[error(
        "session {0} already has 16 messages waiting to join the running turn; wait until the turn takes them"
    )]
    SteeringFull(SessionId),
    #[error(
        "the steering message was not delivered: the turn was cancelled before it could join; send it again as a new prompt"
    )]
    SteeringCancelled,
    #[error("the request was cancelled before its message joined the turn; nothing was sent")]
    RequestCancelled,
    #[error("a prompt with idempotency key `{0}` was already taken; it is not sent twice")]
    Duplicate(String),
}

/// How a prompt turn ended, and the tokens its model calls used in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnEnd {
    pub stop: StopReason,
    pub usage: Option<Usage>,
}

pub type PromptReply = oneshot::Sender<Result<TurnEnd, SessionError>>;

/// A prompt for a session, and how its sender wants the answer.
pub struct PromptSubmission {
    pub content: Vec<Part>,
    /// Cancelled by `$/cancel_request` for this prompt request.
    pub request_cancel: CancellationToken,
    /// The client's key for this submission (ACP v2 `idempotencyKey`): a
    /// retry with a key the session already took gets the original
    /// message's id, and nothing is inserted twice.
    pub idempotency_key: Option<String>,
    pub when_busy: WhenBusy,
    pub answer: PromptAnswer,
}

impl PromptSubmission {
    /// A prompt answered when its turn ends, refused while another runs
    /// (ACP v1, and delegated agents).
    pub fn answered_at_end(
        content: Vec<Part>,
        request_cancel: CancellationToken,
        reply: PromptReply,
    ) -> Self {
        Self {
            content,
            request_cancel,
            idempotency_key: None,
            when_busy: WhenBusy::Refuse,
            answer: PromptAnswer::AtEnd(reply),
        }
    }
}

/// What a prompt that comes while a turn runs does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenBusy {
    /// It is refused ([`SessionError::Busy`]).
    Refuse,
    /// It joins the running turn at its next safe point (ACP steering).
    Steer,
}

/// When the sender of a prompt hears back.
pub enum PromptAnswer {
    /// When the turn ends, with how it ended (ACP v1).
    AtEnd(PromptReply),
    /// As soon as the message is in the conversation, with its id; the
    /// turn's end is told by `Update::State` (ACP v2).
    AtInsertion(InsertReply),
}

impl PromptAnswer {
    pub fn refuse(self, err: SessionError) {
        match self {
            PromptAnswer::AtEnd(reply) => {
                let _ = reply.send(Err(err));
            }
            PromptAnswer::AtInsertion(reply) => reply.send(Err(err)),
        }
    }
}

/// A user message the conversation took in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inserted {
    pub message_id: String,
}

/// What a prompt answered at insertion hears: called once, by the session
/// itself, as the message goes in (or is refused), so the answer is out
/// before anything the session shows after it (an `Idle` after a cancel's
/// refusals above all). One dropped unanswered tells the session stopped.
pub struct InsertReply(std::sync::Mutex<Option<InsertAnswer>>);

type InsertAnswer = Box<dyn FnOnce(Result<Inserted, SessionError>) + Send>;

impl InsertReply {
    pub fn new(answer: impl FnOnce(Result<Inserted, SessionError>) + Send + 'static) -> Self {
        Self(std::sync::Mutex::new(Some(Box::new(answer))))
    }

    /// Answered through a channel (tests, and callers that wait).
    pub fn channel() -> (Self, oneshot::Receiver<Result<Inserted, SessionError>>) {
        let (reply, answer) = oneshot::channel();
        let reply = Self::new(move |result| {
            let _ = reply.send(result);
        });
        (reply, answer)
    }

    pub fn send(self, result: Result<Inserted, SessionError>) {
        if let Some(answer) = self.take() {
            answer(result);
        }
    }

    fn take(&self) -> Option<InsertAnswer> {
        crate::util::lock(&self.0).take()
    }
}

impl Drop for InsertReply {
    fn drop(&mut self) {
        if let Some(answer) = self.take() {
            answer(Err(SessionError::Crashed(
                "the session stopped before the message went in".into(),
            )));
        }
    }
}

pub enum SessionMsg {
    Prompt(PromptSubmission),
    Cancel,
    SetOption {
        id: String,
        value: String,
        reply: oneshot::Sender<Result<Vec<SelectOption>, SessionError>>,
    },
    /// `session/set_mode`: the mode option by another name.
    SetMode {
        mode: String,
        reply: oneshot::Sender<Result<(), SessionError>>,
    },
    /// `session/set_model` (an extension older clients use): any model the
    /// provider serves, listed or not.
    SetModel {
        model: String,
        reply: oneshot::Sender<Result<(), SessionError>>,
    },
    Options {
        reply: oneshot::Sender<Vec<SelectOption>>,
    },
    /// The initial `configOptions` (option id, value id) of `session/new`,
    /// `load`, `resume` or `fork`, applied in order; unknown ones skipped.
    InitialOptions(Vec<InitialOption>),
    /// The client has the `session/new` answer; the session may now send
    /// updates, as the client takes them.
    Started {
        delivery: Delivery,
    },
    /// The MCP servers are up, or one's prompts changed: advertise the commands again.
    CommandsChanged,
    ModelsLoaded {
        provider: String,
        models: Vec<ModelInfo>,
    },
    /// The client's `systemPrompt` from session/new, load or resume; saved.
    SystemPrompt(crate::model::ClientPrompt),
    /// `session/set_title`: the title now (as stored).
    SetTitle {
        title: String,
        reply: oneshot::Sender<String>,
    },
    /// Cancel any turn, wait for it to answer, then stop.
    Close {
        reply: oneshot::Sender<()>,
    },
    /// Its connection went (`serve`): once idle, an orphan closes.
    Detached,
    /// Where its foreground work stands now (a resume tells the client:
    /// a turn may be running, or waiting for the user).
    State {
        reply: oneshot::Sender<crate::client::SessionState>,
    },
}

/// What the client asks a session to be opened with: the same for
/// `session/new`, `load`, `resume` and `fork`.
pub struct OpenRequest {
    pub cwd: PathBuf,
    /// Workspace roots besides `cwd` the tools may reach (ACP `additionalDirectories`).
    pub additional_directories: Vec<PathBuf>,
    /// What the client offers to do for tools.
    pub client: ClientAbilities,
    /// The request's MCP servers; they replace config servers of the same name.
    pub mcp_servers: Vec<McpServerSpec>,
    /// The client's `systemPrompt`; None keeps a stored session's own.
    pub client_prompt: Option<crate::model::ClientPrompt>,
    /// The initial `configOptions`, applied in order; unknown ones skipped.
    pub initial_options: Vec<InitialOption>,
}

/// When a client takes a session's updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// At any time, notifications between a request and its answer too.
    Interleaved,
    /// It reads the next line after a request as the answer: changes made
    /// outside a turn are told when its next turn starts.
    InTurns,
}

/// What a session starts from: a new session's defaults, or what a loaded
/// one was saved with.
pub struct SessionStart {
    pub id: SessionId,
    pub cwd: PathBuf,
    /// Workspace roots besides `cwd` the tools may reach (ACP `additionalDirectories`).
    pub additional_directories: Vec<PathBuf>,
    /// What the client offers to do for tools.
    pub client: ClientAbilities,
    /// Started in the background; the first prompt waits for them.
    pub mcp_servers: Vec<McpServerSpec>,
    pub settings: Settings,
    /// A loaded session: the card's model, provider and mode were saved
    /// with it after the card applied them, so only its prompt, tools and
    /// rules are applied again.
    pub agent_restored: bool,
    /// The context a loaded session continues from (empty for a new one).
    pub history: ContextManager,
    /// The files its agent changed and its rewinds (empty for a new one).
    pub files: crate::context::rewind::FileHistory,
    /// What it had spent (zero for a new one).
    pub spent: crate::context::spend::Totals,
    /// Its todo list as last shown (empty for a new one): the `todo` tool's
    /// state, so what reads it after a load sees what a live session would.
    pub todos: Vec<crate::events::TodoItem>,
    /// Where the session is saved; None keeps it in memory only.
    pub recorder: Option<Recorder>,
    /// Why the session could not be saved at all, told in its first turn.
    pub save_failure: Option<String>,
    /// A delegated agent's parent and what it inherits; None for a session
    /// the client started.
    pub(crate) lineage: Option<subagents::Lineage>,
    /// Problems with the saved session (it cannot be saved, a setting it
    /// was saved with is gone), told once the client has the session.
    pub notices: Vec<Notice>,
    /// The client's `systemPrompt` (a loaded session's saved one).
    pub client_prompt: Option<crate::model::ClientPrompt>,
    /// The idempotency keys its user messages were saved with, and their
    /// ids (empty for a new session).
    pub idempotency_keys: std::collections::HashMap<String, String>,
}

/// The session manager's handle on an actor.
pub struct SessionHandle {
    pub id: SessionId,
    pub tx: mpsc::UnboundedSender<SessionMsg>,
    pub task: JoinHandle<()>,
}

impl SessionHandle {
    pub fn send(&self, msg: SessionMsg) -> bool {
        self.tx.send(msg).is_ok()
    }

    /// Ask the actor to close (its running turn is cancelled and answers
    /// first) and wait until it has.
    pub async fn close(self) {
        let (reply, done) = oneshot::channel();
        if self.send(SessionMsg::Close { reply }) {
            let _ = done.await;
        }
        let _ = self.task.await;
    }
}

/// Start a session actor. Its model list loads in the background and the
/// client hears about it through a config-option update.
pub fn spawn(start: SessionStart, shared: Shared) -> SessionHandle {
    let (tx, rx) = mpsc::unbounded_channel();
    let id = start.id.clone();
    let actor = SessionActor::new(start, shared, tx.downgrade());
    let task = tokio::spawn(actor.run_guarded(rx));
    SessionHandle { id, tx, task }
}

/// Run a session on a mailbox made before it (a loaded session's handle
/// exists while its files are still being read).
pub(crate) async fn run(
    start: SessionStart,
    shared: Shared,
    mailbox: mpsc::WeakUnboundedSender<SessionMsg>,
    rx: mpsc::UnboundedReceiver<SessionMsg>,
) {
    SessionActor::new(start, shared, mailbox)
        .run_guarded(rx)
        .await;
}

/// A panic's message, as `panic!` was given it.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "(no message)".into()
    }
}

/// The conversation and what the client has been told of the session.
struct Conversation {
    context: ContextManager,
    /// The commands last advertised; None until the client has the session.
    commands_sent: Option<Vec<CommandInfo>>,
    /// Servers that failed to start are reported once, in the first turn.
    mcp_failures_told: bool,
    /// Updates waiting for the client's next turn (see `SessionMsg::Started`);
    /// None once the client takes them at any time.
    held: Option<Vec<Update>>,
    in_turn: bool,
    /// The limits `/budget` set for this session.
    budgets: crate::context::spend::Budgets,
    /// The tokens the last prompt turn used.
    last_turn_tokens: u64,
    /// The idempotency keys its user messages were sent with, and their
    /// ids: kept for the session's life, and saved with the messages.
    keys: std::collections::HashMap<String, String>,
    /// The prompt-cache warm-up the first turn waits for.
    warming: Option<prewarm::Warming>,
    /// A prompt has started: the server has read the prefix, no warm-up.
    prompted: bool,
    /// The client is offered prompt suggestions (the last list sent was not empty).
    suggested: bool,
    /// A compaction between turns under way (`session/between_turns.rs`).
    background: Option<between_turns::Background>,
    /// The last state the client was told (`SessionState`), for a resume.
    state: crate::client::SessionState,
}

struct SessionActor {
    services: Services,
    settings: SettingsState,
    conversation: Conversation,
}

impl SessionActor {
    fn new(
        mut start: SessionStart,
        shared: Shared,
        mailbox: mpsc::WeakUnboundedSender<SessionMsg>,
    ) -> Self {
        let services = Services::start(&mut start, shared, mailbox);
        let budgets = (services.recorder.as_ref()).map(crate::store::Recorder::saved_budgets);
        let agent = start.settings.agent.take();
        let mut actor = SessionActor {
            services,
            settings: SettingsState {
                current: start.settings,
                models: None,
            },
            conversation: Conversation {
                context: start.history,
                commands_sent: None,
                mcp_failures_told: false,
                held: Some(Vec::new()),
                in_turn: false,
                budgets: budgets.unwrap_or_default(),
                last_turn_tokens: start.spent.turn_tokens,
                keys: std::mem::take(&mut start.idempotency_keys),
                warming: None,
                prompted: false,
                suggested: false,
                background: None,
                state: crate::client::SessionState::Ready,
            },
        };
        for notice in std::mem::take(&mut start.notices) {
            actor.send(Update::Agent(AgentEvent::Notice(notice)));
        }
        if let Some(name) = agent {
            if start.agent_restored {
                actor.restore_agent(&name);
            } else if let Err(err) = actor.apply(SettingChange::Agent(name), Notify::Quietly) {
                // Applied before the client hears anything, so no update is
                // sent; saved, so a load keeps the card's model and mode.
                tracing::warn!(session = %actor.services.id, %err, "default agent not used");
            }
        }
        actor
    }

    /// Everything the client is shown goes out (and is recorded) here, or
    /// waits for the next turn when the client cannot take it now. Of the
    /// waiting state updates only the newest of each kind is kept.
    fn send(&mut self, update: Update) {
        if let Update::State(state) = &update {
            self.conversation.state = *state;
        }
        let Some(update) = live::for_client(update, self.services.abilities) else {
            return;
        };
        let conversation = &mut self.conversation;
        match conversation.held.as_mut() {
            Some(held) if !conversation.in_turn => {
                if is_state(&update) {
                    let kind = std::mem::discriminant(&update);
                    held.retain(|waiting| std::mem::discriminant(waiting) != kind);
                }
                held.push(update);
            }
            _ => self.services.client.send(&self.services.id, update),
        }
    }

    /// A turn starts: what waited for it goes out first.
    fn begin_turn(&mut self) {
        self.conversation.in_turn = true;
        self.release_held();
    }

    fn release_held(&mut self) {
        let waiting = self.conversation.held.as_mut().map(std::mem::take);
        for update in waiting.into_iter().flatten() {
            self.services.client.send(&self.services.id, update);
        }
    }

    /// Runs the actor. A panic in it (a bug) stops this session only: it
    /// is logged and marked in the session's store, the running turn is
    /// aborted, and every request waiting on the session is answered with
    /// an error by its waiter (its reply is dropped). The others go on.
    async fn run_guarded(self, rx: mpsc::UnboundedReceiver<SessionMsg>) {
        let id = self.services.id.clone();
        let recorder = self.services.recorder.clone();
        let run = std::panic::AssertUnwindSafe(self.run(rx));
        if let Err(panic) = futures::FutureExt::catch_unwind(run).await {
            let detail = format!("a panic: {}", panic_message(&*panic));
            tracing::error!(session = %id, %detail, "the session stopped on an internal error");
            if let Some(recorder) = recorder {
                recorder.crashed(&detail);
                recorder.close().await;
            }
        }
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<SessionMsg>) {
        let mut running: Option<RunningTurn> = None;
        loop {
            let steered = foreground::steered_requests(running.as_ref());
            tokio::select! {
                msg = rx.recv() => {
                    let Some(msg) = msg else { break };
                    if let Some(closing) = self.handle(msg, &mut running) {
                        self.end_turn(&mut running).await;
                        // What the client port kept for it (v2's translation
                        // state) goes before the close is answered, so a
                        // resume that follows starts afresh, untouched.
                        self.services.client.session_ended(&self.services.id);
                        let _ = closing.send(());
                        break;
                    }
                }
                outcome = async {
                    match running.as_mut() {
                        Some(turn) => (&mut turn.started.task).await,
                        None => std::future::pending().await,
                    }
                } => {
                    if let Some(turn) = running.take() {
                        let kind = turn.started.kind;
                        running = self.finish_turn(turn, outcome);
                        // Messages steered too late start the next turn at
                        // once; only a session left idle compacts.
                        if running.is_none() {
                            self.after_turn(kind);
                        }
                    }
                }
                step = between_turns::next(&mut self.conversation.background) => {
                    self.between_turns_step(step, &mut running);
                }
                // `$/cancel_request` for a steering message still waiting.
                () = crate::util::any_cancelled(&steered) => {
                    self.withdraw_steered(running.as_ref());
                }
            }
            if running.is_none() && self.orphan_to_close() {
                tracing::debug!(session = %self.services.id, "orphaned and idle: closing (it stays saved)");
                break;
            }
        }
        // The mailbox closed (the manager dropped us): end any turn cleanly.
        self.end_turn(&mut running).await;
        if let Some(recorder) = &self.services.recorder {
            recorder.close().await;
        }
        // Its server slot (llama.cpp) may go to the next session.
        self.services
            .providers
            .session_ended(self.services.id.as_str());
        // MCP servers are children of the session: stop them with it
        // (a delegated agent's belong to its parent, who goes on).
        let manager = (self.services.owns_mcp)
            .then(|| self.services.mcp.borrow().clone())
            .flatten();
        if let Some(manager) = manager {
            manager.shutdown().await;
        }
        tracing::debug!(session = %self.services.id, "session actor stopped");
    }

    /// Idle, with no connection attached: nobody is left to prompt it,
    /// and a later `session/load` opens it again from the store.
    fn orphan_to_close(&self) -> bool {
        self.conversation.background.is_none()
            && (self.services.attachments.as_ref())
                .is_some_and(|attachments| attachments.release_if_orphaned(&self.services.id))
    }

    /// Cancel the running turn, if any, and wait for it to answer.
    async fn end_turn(&mut self, running: &mut Option<RunningTurn>) {
        self.end_between_turns(running).await;
        // Cancelled, it starts no other: what waited is refused.
        while let Some(mut turn) = running.take() {
            turn.cancel.cancel();
            let outcome = (&mut turn.started.task).await;
            *running = self.finish_turn(turn, outcome);
        }
    }

    /// Handle one message; returns the close reply when the session must stop.
    fn handle(
        &mut self,
        msg: SessionMsg,
        running: &mut Option<RunningTurn>,
    ) -> Option<oneshot::Sender<()>> {
        match msg {
            SessionMsg::Prompt(submission) => {
                // Held while a compaction between turns finishes.
                if let Some(submission) = self.hold_prompt(submission) {
                    self.take_prompt(submission, running);
                }
            }
            SessionMsg::Cancel => {
                self.cancel_between_turns();
                if let Some(turn) = running {
                    turn.cancel.cancel();
                }
            }
            SessionMsg::SetOption { id, value, reply } => {
                let _ = reply.send(self.set_option(&id, &value));
            }
            SessionMsg::SetMode { mode, reply } => {
                let mode = self.services.defaults.modes.resolve(&mode).to_string();
                let _ = reply.send(self.set_option(MODE_OPTION, &mode).map(|_| ()));
            }
            SessionMsg::SetModel { model, reply } => {
                let _ = reply.send(self.set_model(model));
            }
            SessionMsg::Options { reply } => {
                let _ = reply.send(self.options());
            }
            SessionMsg::InitialOptions(options) => self.initial_options(options),
            SessionMsg::Started { delivery } => {
                if delivery == Delivery::Interleaved {
                    self.release_held();
                    self.conversation.held = None;
                }
                self.advertise_commands(Advertise::Started);
                self.load_models();
                self.prewarm();
            }
            SessionMsg::CommandsChanged => self.advertise_commands(Advertise::Changed),
            SessionMsg::ModelsLoaded { provider, models } => self.models_loaded(provider, models),
            SessionMsg::SystemPrompt(prompt) => {
                if let Some(recorder) = &self.services.recorder {
                    recorder.system_prompt(Some(&prompt));
                }
                self.services.client_prompt = Some(prompt);
            }
            SessionMsg::SetTitle { title, reply } => {
                let _ = reply.send(self.retitle(title));
            }
            SessionMsg::Close { reply } => return Some(reply),
            // Checked once the loop is idle (see `orphan_to_close`).
            SessionMsg::Detached => {}
            SessionMsg::State { reply } => {
                let now = match &self.conversation.state {
                    crate::client::SessionState::Idle(_) => crate::client::SessionState::Ready,
                    state => *state,
                };
                let _ = reply.send(now);
            }
        }
        None
    }
}

/// Updates that say how things stand now: a newer one replaces an older one.
fn is_state(update: &Update) -> bool {
    matches!(
        update,
        Update::ConfigOptions(_)
            | Update::CurrentMode(_)
            | Update::AvailableCommands(_)
            | Update::SessionInfo { .. }
    )
}
