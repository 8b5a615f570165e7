//! One actor task per session. It owns the conversation, the model choice
//! and the running turn's cancellation token; everything else talks to it
//! through its mailbox, so sessions never lock or block each other.

pub mod manager;
mod prep;
mod prompts;
mod slash;

use std::path::PathBuf;
use std::sync::Arc;

use thiserror::Error;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agent_loop::{self, Journal, TurnOutcome};

use crate::agents::AgentCard;
use crate::client::CommandInfo;
use crate::client::{
    AGENT_OPTION, ClientAbilities, ClientSink, MODE_OPTION, MODEL_OPTION, OptionCategory,
    OptionValue, PROVIDER_OPTION, SelectOption, Update,
};
use crate::context::{ContextManager, ContextSettings};
use crate::events::StopReason;
use crate::mcp::{McpManager, McpOptions, McpServerSpec};
use crate::model::{Message, Part, Role};
use crate::modes::{ModePolicy, ModeRegistry};
use crate::permissions::SessionPermissions;
use crate::providers::{ModelInfo, ProviderError, Providers};
use crate::store::{self, Recorder};
use crate::tools::{ClientFs, ClientTerminal, LocalFs, ToolContext, ToolRegistry};

#[derive(Debug, Error)]
pub enum SessionError {
    #[error(
        "session {0} is already answering a prompt; wait for it to finish or send session/cancel first"
    )]
    Busy(String),
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
}

pub type PromptReply = oneshot::Sender<Result<StopReason, SessionError>>;

pub enum SessionMsg {
    Prompt {
        content: Vec<Part>,
        /// Cancelled by `$/cancel_request` for this prompt request.
        request_cancel: CancellationToken,
        reply: PromptReply,
    },
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
    Options {
        reply: oneshot::Sender<Vec<SelectOption>>,
    },
    /// The client has the `session/new` answer; the session may now send updates.
    Started,
    /// The MCP servers are up, or one's prompts changed: advertise the commands again.
    CommandsChanged,
    ModelsLoaded {
        provider: String,
        models: Vec<ModelInfo>,
    },
    /// Cancel any turn, wait for it to answer, then stop.
    Close {
        reply: oneshot::Sender<()>,
    },
}

pub struct SessionConfig {
    pub id: String,
    pub cwd: PathBuf,
    pub provider: String,
    pub model: String,
    pub max_turn_requests: u32,
    pub mode: String,
    /// The modes the session may switch between.
    pub modes: ModeRegistry,
    /// What the client offers to do for tools.
    pub client: ClientAbilities,
    pub rules: Arc<Vec<crate::permissions::Rule>>,
    /// Started in the background; the first prompt waits for them.
    pub mcp_servers: Vec<McpServerSpec>,
    pub mcp_options: McpOptions,
    /// Answer reserve and compaction threshold (`[context]`).
    pub context: ContextSettings,
    /// The agent card to start with (`--agent`, `[chat] default_agent`,
    /// or the one a loaded session was saved with).
    pub agent: Option<String>,
    /// A loaded session: the card's model, provider and mode were saved
    /// with it after the card applied them, so only its prompt, tools and
    /// rules are applied again.
    pub agent_restored: bool,
    /// `[chat] system_prompt`: the user's addition to the system prompt.
    pub system_prompt: Option<String>,
    /// The context a loaded session continues from (empty for a new one).
    pub history: ContextManager,
    /// Where the session is saved; None keeps it in memory only.
    pub recorder: Option<Recorder>,
}

/// The session manager's handle on an actor.
pub struct SessionHandle {
    pub id: String,
    pub tx: mpsc::UnboundedSender<SessionMsg>,
    pub task: JoinHandle<()>,
}

impl SessionHandle {
    pub fn send(&self, msg: SessionMsg) -> bool {
        self.tx.send(msg).is_ok()
    }
}

/// Start a session actor. Its model list loads in the background and the
/// client hears about it through a config-option update.
pub fn spawn(
    config: SessionConfig,
    providers: Arc<Providers>,
    sink: Arc<dyn ClientSink>,
) -> SessionHandle {
    let (tx, rx) = mpsc::unbounded_channel();
    let id = config.id.clone();
    let actor = build(config, providers, sink, tx.downgrade());
    let task = tokio::spawn(actor.run(rx));
    SessionHandle { id, tx, task }
}

/// Run a session on a mailbox made before it (a loaded session's handle
/// exists while its files are still being read).
pub(crate) async fn run(
    config: SessionConfig,
    providers: Arc<Providers>,
    sink: Arc<dyn ClientSink>,
    mailbox: mpsc::WeakUnboundedSender<SessionMsg>,
    rx: mpsc::UnboundedReceiver<SessionMsg>,
) {
    build(config, providers, sink, mailbox).run(rx).await
}

fn build(
    config: SessionConfig,
    providers: Arc<Providers>,
    sink: Arc<dyn ClientSink>,
    mailbox: mpsc::WeakUnboundedSender<SessionMsg>,
) -> SessionActor {
    // Everything the client is shown is also recorded, in the same order.
    let sink = match &config.recorder {
        Some(recorder) => recorder.wrap(sink),
        None => sink,
    };
    let policy = config
        .modes
        .find(&config.mode)
        .map(|mode| mode.policy)
        .unwrap_or(ModePolicy::Ask);
    let permissions = Arc::new(SessionPermissions::new(
        config.id.clone(),
        Arc::clone(&sink),
        Arc::clone(&config.rules),
        policy,
    ));
    if let Some(recorder) = &config.recorder {
        permissions.restore(recorder.metadata().permissions);
        let recorder = recorder.clone();
        permissions.on_remember(move |rules| recorder.permissions_remembered(rules));
    }
    let mut tool_context = ToolContext::local(config.cwd.clone());
    if config.client.read_text_file || config.client.write_text_file {
        tool_context.fs = Arc::new(ClientFs {
            session_id: config.id.clone(),
            sink: Arc::clone(&sink),
            read: config.client.read_text_file,
            write: config.client.write_text_file,
            local: LocalFs::default(),
        });
    }
    if config.client.terminal {
        tool_context.shell = Arc::new(ClientTerminal {
            session_id: config.id.clone(),
            sink: Arc::clone(&sink),
        });
    }
    // MCP servers start at once, beside the session: `session/new` is
    // answered without waiting, and the first prompt waits for them.
    let (mcp_ready, mcp) = tokio::sync::watch::channel(None);
    if config.mcp_servers.is_empty() {
        let _ = mcp_ready.send(Some(McpManager::new()));
    } else {
        let specs = config.mcp_servers;
        let options = config.mcp_options;
        let mailbox = mailbox.clone();
        tokio::spawn(async move {
            let manager = McpManager::start(specs, options).await;
            for (server, reason) in manager.failures() {
                tracing::warn!(%server, %reason, "MCP server failed to start");
            }
            let changes = manager.changes();
            let _ = mcp_ready.send(Some(manager));
            // Their prompts are slash commands.
            prompts::forward_changes(changes, mailbox);
        });
    }
    let mut actor = SessionActor {
        mcp,
        mcp_failures_told: false,
        tool_context,
        tools: ToolRegistry::builtin(),
        permissions,
        max_turn_requests: config.max_turn_requests,
        mode: config.mode,
        modes: config.modes,
        id: config.id,
        cwd: config.cwd,
        provider: config.provider,
        model: config.model,
        context: config.history,
        context_settings: config.context,
        agents: crate::agents::load_all(),
        agent: None,
        user_prompt: config.system_prompt,
        recorder: config.recorder,
        providers,
        sink,
        models: None,
        mailbox,
        commands_sent: None,
    };
    if let Some(name) = config.agent {
        if config.agent_restored {
            actor.restore_agent(&name);
        } else {
            // Before the client hears anything, so no update is sent for it.
            match actor.switch_agent(&name, false) {
                // The card's model and mode are the session's: saved so a load keeps them.
                Ok(_) => actor.record_settings(),
                Err(err) => tracing::warn!(session = %actor.id, %err, "default agent not used"),
            }
        }
    }
    actor
}

struct RunningTurn {
    cancel: CancellationToken,
    reply: PromptReply,
    task: JoinHandle<TurnOutcome>,
    /// A slash command: its context operations are recorded when it ends
    /// (a prompt turn records its own as they happen).
    command: bool,
    /// What the turn journaled, for when its task dies without an outcome.
    journaled: Arc<std::sync::Mutex<Vec<Journal>>>,
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

struct SessionActor {
    /// The session's MCP servers, once started.
    mcp: tokio::sync::watch::Receiver<Option<McpManager>>,
    /// Servers that failed to start are reported once, in the first turn.
    mcp_failures_told: bool,
    tools: ToolRegistry,
    /// Shared by every turn: the todo list lives here.
    tool_context: ToolContext,
    permissions: Arc<SessionPermissions>,
    max_turn_requests: u32,
    mode: String,
    modes: ModeRegistry,
    id: String,
    cwd: PathBuf,
    provider: String,
    model: String,
    context: ContextManager,
    context_settings: ContextSettings,
    /// Every agent card, loaded when the session starts.
    agents: Vec<AgentCard>,
    /// The active card's name.
    agent: Option<String>,
    user_prompt: Option<String>,
    recorder: Option<Recorder>,
    providers: Arc<Providers>,
    sink: Arc<dyn ClientSink>,
    /// The provider's model list, once it has loaded.
    models: Option<Vec<ModelInfo>>,
    mailbox: mpsc::WeakUnboundedSender<SessionMsg>,
    /// The commands last advertised; None until the client has the session.
    commands_sent: Option<Vec<CommandInfo>>,
}

impl SessionActor {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<SessionMsg>) {
        let mut running: Option<RunningTurn> = None;
        loop {
            tokio::select! {
                msg = rx.recv() => {
                    let Some(msg) = msg else { break };
                    if let Some(closing) = self.handle(msg, &mut running) {
                        if let Some(mut turn) = running.take() {
                            turn.cancel.cancel();
                            let outcome = (&mut turn.task).await;
                            self.finish_turn(turn, outcome);
                        }
                        let _ = closing.send(());
                        break;
                    }
                }
                outcome = async {
                    match running.as_mut() {
                        Some(turn) => (&mut turn.task).await,
                        None => std::future::pending().await,
                    }
                } => {
                    if let Some(turn) = running.take() {
                        self.finish_turn(turn, outcome);
                    }
                }
            }
        }
        // The mailbox closed (the manager dropped us): end any turn cleanly.
        if let Some(mut turn) = running.take() {
            turn.cancel.cancel();
            let outcome = (&mut turn.task).await;
            self.finish_turn(turn, outcome);
        }
        if let Some(recorder) = &self.recorder {
            recorder.close().await;
        }
        // MCP servers are children of the session: stop them with it.
        let manager = self.mcp.borrow().clone();
        if let Some(manager) = manager {
            manager.shutdown().await;
        }
        tracing::debug!(session = %self.id, "session actor stopped");
    }

    /// Handle one message; returns the close reply when the session must stop.
    fn handle(
        &mut self,
        msg: SessionMsg,
        running: &mut Option<RunningTurn>,
    ) -> Option<oneshot::Sender<()>> {
        match msg {
            SessionMsg::Prompt {
                content,
                request_cancel,
                reply,
            } => {
                if running.is_some() {
                    let _ = reply.send(Err(SessionError::Busy(self.id.clone())));
                } else {
                    *running = self.start_turn(content, request_cancel, reply);
                }
            }
            SessionMsg::Cancel => {
                if let Some(turn) = running {
                    turn.cancel.cancel();
                }
            }
            SessionMsg::SetOption { id, value, reply } => {
                let _ = reply.send(self.set_option(&id, &value));
            }
            SessionMsg::SetMode { mode, reply } => {
                let _ = reply.send(self.set_option(MODE_OPTION, &mode).map(|_| ()));
            }
            SessionMsg::Options { reply } => {
                let _ = reply.send(self.options());
            }
            SessionMsg::Started => {
                self.advertise_commands(true);
                self.load_models();
            }
            SessionMsg::CommandsChanged => self.advertise_commands(false),
            SessionMsg::ModelsLoaded { provider, models } => {
                if provider == self.provider {
                    let before = self.options();
                    self.models = Some(models);
                    let after = self.options();
                    if before != after {
                        self.sink.send(&self.id, Update::ConfigOptions(after));
                    }
                }
            }
            SessionMsg::Close { reply } => return Some(reply),
        }
        None
    }

    fn start_turn(
        &mut self,
        content: Vec<Part>,
        request_cancel: CancellationToken,
        reply: PromptReply,
    ) -> Option<RunningTurn> {
        // A child of the request's token: `$/cancel_request` and `session/cancel` both stop it.
        let cancel = request_cancel.child_token();
        if let Some(command) = crate::commands::from_parts(&content) {
            return self.start_command(command, cancel, reply);
        }
        if let Some((command, args)) = self.find_prompt_command(&content) {
            return self.start_prompt_command(command, &args, cancel, reply);
        }
        let prep = match self.prepare(true) {
            Ok(prep) => prep,
            Err(err) => {
                let _ = reply.send(Err(err));
                return None;
            }
        };
        self.context.push(Arc::new(Message {
            role: Role::User,
            parts: content,
        }));
        self.record_prompt();
        let context = self.context.clone();
        let turn_cancel = cancel.clone();
        let (kit, journaled) = self.turn_kit();
        // A task of its own: a panic inside a turn must not take the session with it.
        let task = tokio::spawn(async move {
            let emit = kit.emitter();
            let ready = prep.resolve(&turn_cancel, &emit).await;
            agent_loop::run_turn(kit.input(ready, context, turn_cancel), &emit).await
        });
        Some(RunningTurn {
            cancel,
            reply,
            task,
            command: false,
            journaled,
        })
    }

    fn finish_turn(
        &mut self,
        turn: RunningTurn,
        outcome: Result<TurnOutcome, tokio::task::JoinError>,
    ) {
        let reply = turn.reply;
        let result = match outcome {
            Ok(outcome) => {
                self.record_turn(&outcome, turn.command);
                // The turn's copy holds its messages, compactions and drops.
                self.context = outcome.context;
                outcome.result.map_err(SessionError::from)
            }
            Err(err) => {
                tracing::error!(session = %self.id, %err, "turn task failed");
                // Keep what the turn finished (and saved) before it died, so
                // this context and the one a load rebuilds stay the same.
                for entry in lock(&turn.journaled).drain(..) {
                    match entry {
                        Journal::Round(messages) => {
                            for message in messages {
                                self.context.push(message);
                            }
                        }
                        Journal::Op(op) => {
                            if let Err(err) = self.context.apply(&op) {
                                tracing::warn!(%err, "a journaled context operation does not apply");
                            }
                        }
                    }
                }
                if let Some(recorder) = &self.recorder {
                    recorder.turn_end(None);
                }
                Err(SessionError::Crashed(err.to_string()))
            }
        };
        let _ = reply.send(result);
    }

    fn load_models(&self) {
        let providers = Arc::clone(&self.providers);
        let provider = self.provider.clone();
        let mailbox = self.mailbox.clone();
        let session = self.id.clone();
        tokio::spawn(async move {
            match providers.models(&provider).await {
                Ok(models) => {
                    if let Some(mailbox) = mailbox.upgrade() {
                        let _ = mailbox.send(SessionMsg::ModelsLoaded { provider, models });
                    }
                }
                // Not fatal: the configured model still works; the error shows when a prompt fails.
                Err(err) => tracing::info!(%session, %err, "model list unavailable"),
            }
        });
    }

    fn options(&self) -> Vec<SelectOption> {
        let mut values: Vec<OptionValue> = Vec::new();
        let mut add = |id: &str| {
            if !values.iter().any(|v| v.id == id) {
                values.push(OptionValue {
                    id: id.to_string(),
                    name: id.to_string(),
                    description: None,
                });
            }
        };
        add(&self.model);
        if let Some(config) = self.providers.config(&self.provider) {
            add(&config.default_model);
        }
        for model in self.models.iter().flatten() {
            add(&model.id);
        }
        let model = SelectOption {
            id: MODEL_OPTION.into(),
            name: "Model".into(),
            description: format!("The model provider `{}` answers with", self.provider),
            category: OptionCategory::Model,
            current: self.model.clone(),
            values,
        };
        let provider = SelectOption {
            id: PROVIDER_OPTION.into(),
            name: "Provider".into(),
            description: "The configured LLM server this session talks to".into(),
            category: OptionCategory::Provider,
            current: self.provider.clone(),
            values: self
                .providers
                .names()
                .map(|name| OptionValue {
                    id: name.to_string(),
                    name: match self.providers.config(name) {
                        Some(config) => format!("{name} ({})", config.kind.as_str()),
                        None => name.to_string(),
                    },
                    description: None,
                })
                .collect(),
        };
        let mode = SelectOption {
            id: MODE_OPTION.into(),
            name: "Mode".into(),
            description: "How much the agent may do without asking".into(),
            category: OptionCategory::Mode,
            current: self.mode.clone(),
            values: self
                .modes
                .iter()
                .map(|mode| OptionValue {
                    id: mode.id.clone(),
                    name: mode.name.clone(),
                    description: Some(mode.description.clone()),
                })
                .collect(),
        };
        vec![model, mode, provider, self.agent_option()]
    }

    fn set_option(&mut self, id: &str, value: &str) -> Result<Vec<SelectOption>, SessionError> {
        let options = self.options();
        let option = options.iter().find(|o| o.id == id).ok_or_else(|| {
            SessionError::UnknownOption(
                id.to_string(),
                options
                    .iter()
                    .map(|o| o.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        })?;
        if !option.values.iter().any(|v| v.id == value) {
            return Err(SessionError::UnknownValue {
                option: id.to_string(),
                value: value.to_string(),
                choices: option
                    .values
                    .iter()
                    .map(|v| v.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        match id {
            MODEL_OPTION => self.model = value.to_string(),
            MODE_OPTION if value != self.mode => {
                if let Some(policy) = self.modes.find(value).map(|mode| mode.policy) {
                    self.mode = value.to_string();
                    self.permissions.set_policy(policy);
                    // Takes effect from the next model call; a running turn keeps its tools.
                    self.sink
                        .send(&self.id, Update::CurrentMode(self.mode.clone()));
                    self.sink
                        .send(&self.id, Update::ConfigOptions(self.options()));
                }
            }
            AGENT_OPTION => {
                if let Err(err) = self.switch_agent(value, true) {
                    tracing::warn!(session = %self.id, %err, "agent switch");
                }
            }
            PROVIDER_OPTION if value != self.provider => {
                // A new server: its own default model, and its model list
                // replaces the old one once it loads.
                self.provider = value.to_string();
                if let Some(config) = self.providers.config(value) {
                    self.model = config.default_model.clone();
                }
                self.models = None;
                self.load_models();
            }
            _ => {}
        }
        self.record_settings();
        Ok(self.options())
    }

    /// Save the prompt just added to the history; the first one names the session.
    fn record_prompt(&mut self) {
        let last = self
            .context
            .entries()
            .last()
            .and_then(|e| e.messages.last());
        let (Some(recorder), Some(message)) = (self.recorder.as_ref(), last) else {
            return;
        };
        if let Some(store::Titled { title, updated_at }) = recorder.prompt(message) {
            self.sink.send(
                &self.id,
                Update::SessionInfo {
                    title: Some(title),
                    updated_at,
                },
            );
        }
    }

    /// A turn's rounds and operations are already saved (the journal); its
    /// end is saved with what the estimator learned. A command's
    /// operations are saved now.
    fn record_turn(&self, outcome: &TurnOutcome, command: bool) {
        let Some(recorder) = self.recorder.as_ref() else {
            return;
        };
        if command {
            for op in &outcome.context_ops {
                recorder.context_op(op);
            }
        } else {
            recorder.turn_end(Some(outcome.context.estimator));
        }
    }

    fn record_settings(&mut self) {
        let Some(recorder) = self.recorder.as_ref() else {
            return;
        };
        recorder.settings(store::Settings {
            mode: &self.mode,
            provider: &self.provider,
            model: &self.model,
            agent: self.agent.as_deref(),
        });
    }
}
