//! Delegated agents: a `delegate` call starts a child session (its own
//! actor, turn machinery and stored files) with the card's prompt, model,
//! provider and tools, the parent's mode or a stricter one, and the
//! parent's permissions as a ceiling. Its one prompt is the task; its last
//! text is the call's result. The child's client is the parent's, seen
//! through [`ChildClient`]: questions go to the user under the parent's
//! session, and what the child does becomes the running summary of the
//! parent's call.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::runtime::{AgentRuntime, AgentState, TurnTally};
use super::settings::Settings;
use super::shared::Shared;
use super::{SessionMsg, SessionStart, TurnEnd};
use crate::agents::AgentCard;
use crate::client::{
    ClientAbilities, ClientFuture, ClientSink, CreateTerminal, PermissionChoice, ReadTextFile,
    SessionMessage, SubagentInfo, SubagentState, TerminalExit, TerminalId, TerminalOutput, Update,
    WriteTextFile,
};
use crate::context::ContextManager;
use crate::events::{AgentEvent, StopReason, ToolCallInfo, ToolContent, ToolStatus};
use crate::mcp::McpManager;
use crate::model::{Part, SessionId};
use crate::modes::ModePolicy;
use crate::permissions::SessionPermissions;
use crate::store::{Metadata, Recorder};
use crate::tools::sandbox::SessionSandbox;
use crate::tools::{
    Delegation, Delegator, FileSystem, ParentCall, Progress, Shell, ToolError, ToolFuture,
    ToolOutput, shorten,
};
use crate::util::lock;

/// What a child session inherits from the session that started it.
/// (Who the parent is and which call started the child is in the child's
/// stored metadata.)
pub(crate) struct Lineage {
    /// 1 for a child of a session the user started.
    pub depth: u32,
    /// The parent's permissions: the child never gets past them.
    pub ceiling: Arc<SessionPermissions>,
    /// Files and commands go where the parent's go (the editor's, under
    /// the parent's session id, when it offers them).
    pub fs: Arc<dyn FileSystem>,
    pub shell: Arc<dyn Shell>,
    /// The parent's sandbox: a child's commands are confined as the
    /// parent's are, and leaving it is asked through the parent.
    pub sandbox: Arc<SessionSandbox>,
    /// The parent's MCP servers, offered to the child as the card allows
    /// (the parent's session stops them, never the child's).
    pub mcp: watch::Receiver<Option<McpManager>>,
}

/// Starts children for one turn of a session (a snapshot of the parent
/// as the turn started).
pub(super) struct TurnDelegator {
    pub shared: Shared,
    pub parent_id: SessionId,
    pub cwd: PathBuf,
    pub settings: Settings,
    pub depth: u32,
    pub agents: Vec<AgentCard>,
    pub permissions: Arc<SessionPermissions>,
    /// The parent's client (recorded): where the child's questions go.
    pub client: Arc<dyn ClientSink>,
    pub recorder: Option<Recorder>,
    pub tally: Arc<TurnTally>,
    pub fs: Arc<dyn FileSystem>,
    pub shell: Arc<dyn Shell>,
    pub mcp: watch::Receiver<Option<McpManager>>,
    /// The client shows children as sessions of their own (ACP unstable
    /// subagents): announce them, forward their updates under their ids.
    pub expose: bool,
}

impl Delegator for TurnDelegator {
    fn delegate<'a>(&'a self, delegation: Delegation, parent: ParentCall<'a>) -> ToolFuture<'a> {
        Box::pin(self.run(delegation, parent))
    }
}

impl TurnDelegator {
    fn runtime(&self) -> &Arc<AgentRuntime> {
        &self.shared.runtime
    }

    async fn run(
        &self,
        delegation: Delegation,
        parent: ParentCall<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let card = self.card(&delegation)?;
        let limits = self.runtime().settings;
        if !self.tally.try_start(limits.max_per_turn) {
            return Err(ToolError::Failed(format!(
                "this turn already started {} agents, the most one turn may (`[subagents] max_per_turn`); do the rest yourself or in the next turn",
                limits.max_per_turn
            )));
        }
        let id = SessionId::random();
        let budget_cancel = parent.cancel.child_token();
        let view = Arc::new(Mutex::new(ChildView::new(&card.name)));
        let client = Arc::new(ChildClient {
            parent_id: self.parent_id.clone(),
            child_id: id.clone(),
            agent: card.name.clone(),
            parent: Arc::clone(&self.client),
            runtime: Arc::clone(self.runtime()),
            view: Arc::clone(&view),
            progress: parent.progress.clone(),
            budget: limits.token_budget,
            over_budget: budget_cancel.clone(),
            expose: self.expose,
        });
        let start = self.child_start(&id, card, &delegation.call_id, &parent);
        let shared = Shared {
            client: Arc::clone(&client) as Arc<dyn ClientSink>,
            ..self.shared.clone()
        };
        self.runtime().started(&id, &self.parent_id, &card.name);
        tracing::info!(parent = %self.parent_id, child = %id, agent = %card.name, "delegating");
        client.report();
        if self.expose {
            self.announce(&id, card, &delegation);
        }
        let handle = super::spawn(start, shared);
        let (reply, answer) = oneshot::channel();
        handle.send(SessionMsg::Prompt(
            super::PromptSubmission::answered_at_end(
                vec![Part::Text {
                    text: delegation.task.clone(),
                }],
                budget_cancel.clone(),
                reply,
            ),
        ));
        let ended = answer
            .await
            .unwrap_or_else(|_| Err(super::SessionError::Crashed("the agent stopped".into())));
        self.runtime().set_state(&id, AgentState::Idle);
        handle.close().await;
        if let Ok(TurnEnd {
            usage: Some(usage), ..
        }) = &ended
        {
            self.tally.add_usage(*usage);
        }
        let result = self.outcome(
            &ended,
            &view,
            &budget_cancel,
            parent.cancel,
            limits.token_budget,
        );
        self.settle(&id, &view, &result);
        if self.expose {
            self.report_end(&id, &delegation.call_id, &ended, &result);
        }
        let summary = lock(&view).render();
        result.map(|answer| ToolOutput {
            for_model: answer,
            content: vec![ToolContent::Text(summary)],
            raw_output: json!({
                "sessionId": id,
                "agent": card.name,
                "usage": ended.as_ref().ok().and_then(|end| end.usage),
            }),
            locations: Vec::new(),
            plan: None,
        })
    }

    /// The card a delegation names, or the model's error listing them.
    fn card(&self, delegation: &Delegation) -> Result<&AgentCard, ToolError> {
        self.agents
            .iter()
            .find(|c| c.name == delegation.agent)
            .ok_or_else(|| {
                let names: Vec<&str> = self.agents.iter().map(|c| c.name.as_str()).collect();
                ToolError::InvalidArguments(format!(
                    "no agent card named `{}`; choose one of: {}",
                    delegation.agent,
                    names.join(", ")
                ))
            })
    }

    /// What the child session starts from: the card's settings, its own
    /// stored session, and what it inherits from the parent.
    fn child_start(
        &self,
        id: &SessionId,
        card: &AgentCard,
        call_id: &str,
        parent: &ParentCall<'_>,
    ) -> SessionStart {
        let settings = self.child_settings(card);
        let recorder = self.child_recorder(id, &settings, call_id);
        SessionStart {
            id: id.clone(),
            cwd: self.cwd.clone(),
            // The child reaches the parent's workspace roots, no more.
            additional_directories: parent.roots.to_vec(),
            notices: Vec::new(),
            client_prompt: None,
            idempotency_keys: Default::default(),
            client: ClientAbilities::default(),
            mcp_servers: Vec::new(),
            settings,
            agent_restored: true,
            history: ContextManager::new(),
            files: Default::default(),
            spent: Default::default(),
            todos: Vec::new(),
            recorder,
            save_failure: None,
            lineage: Some(Lineage {
                depth: self.depth + 1,
                ceiling: Arc::clone(&self.permissions),
                fs: Arc::clone(&self.fs),
                shell: Arc::clone(&self.shell),
                sandbox: Arc::clone(parent.sandbox),
                mcp: self.mcp.clone(),
            }),
        }
    }

    /// The child's last state, in the runtime and in its summary; the
    /// runtime forgets it.
    fn settle(&self, id: &SessionId, view: &Mutex<ChildView>, result: &Result<String, ToolError>) {
        self.runtime().set_state(
            id,
            match result {
                Ok(_) => AgentState::Done,
                Err(err) => AgentState::Failed(err.to_string()),
            },
        );
        lock(view).state = self.runtime().state(id).unwrap_or(AgentState::Done);
        self.runtime().finished(id);
    }

    /// Tell a client that shows subagents of the child before any of its
    /// traffic: what it is, where it works, and the task it was sent.
    fn announce(&self, child: &SessionId, card: &AgentCard, delegation: &Delegation) {
        self.client.send(
            &self.parent_id,
            Update::Subagent(SubagentInfo {
                session_id: child.clone(),
                title: Some(card.name.clone()),
                description: Some(shorten(&delegation.task, 200)),
                state: Some(SubagentState::Running),
                cwd: Some(self.cwd.clone()),
            }),
        );
        let task = SessionMessage {
            message_id: format!("{}:task", delegation.call_id),
            sender: self.parent_id.clone(),
            recipient: child.clone(),
            text: delegation.task.clone(),
        };
        // The parent's outgoing view, then the child's incoming one.
        self.client
            .send(&self.parent_id, Update::SessionMessage(task.clone()));
        self.client.send(child, Update::SessionMessage(task));
    }

    /// The child's last state, and its answer as a message to the parent.
    fn report_end(
        &self,
        child: &SessionId,
        call_id: &str,
        ended: &Result<TurnEnd, super::SessionError>,
        result: &Result<String, ToolError>,
    ) {
        let state = match (ended, result) {
            (Ok(end), Ok(_)) => SubagentState::Idle(end.stop),
            (Ok(end), Err(_)) if end.stop == StopReason::Cancelled => {
                SubagentState::Idle(StopReason::Cancelled)
            }
            (_, Err(err)) => SubagentState::Failed(err.to_string()),
            (Err(err), Ok(_)) => SubagentState::Failed(err.to_string()),
        };
        self.client.send(
            &self.parent_id,
            Update::Subagent(SubagentInfo {
                session_id: child.clone(),
                title: None,
                description: None,
                state: Some(state),
                cwd: None,
            }),
        );
        if let Ok(answer) = result {
            let answer = SessionMessage {
                message_id: format!("{call_id}:answer"),
                sender: child.clone(),
                recipient: self.parent_id.clone(),
                text: answer.clone(),
            };
            self.client
                .send(child, Update::SessionMessage(answer.clone()));
            self.client
                .send(&self.parent_id, Update::SessionMessage(answer));
        }
    }

    /// The card's provider and model when it names them, and the parent's
    /// mode unless the card's is stricter.
    fn child_settings(&self, card: &AgentCard) -> Settings {
        let providers = &self.shared.providers;
        let mut settings = Settings {
            agent: Some(card.name.clone()),
            ..self.settings.clone()
        };
        if let Some(provider) = card.provider.as_ref()
            && let Some(config) = providers.config(provider)
            && *provider != settings.provider
        {
            settings.provider = provider.clone();
            settings.model = config.default_model.clone();
        }
        if let Some(model) = &card.model {
            settings.model = model.clone();
        }
        let modes = &self.shared.defaults.modes;
        let rank = |mode: &str| {
            modes.find(mode).map(|m| match m.policy {
                ModePolicy::ReadOnly => 0,
                ModePolicy::Ask => 1,
                ModePolicy::Auto => 2,
            })
        };
        if let (Some(mode), Some(parent)) = (card.mode.as_deref(), rank(&settings.mode))
            && let Some(card_rank) = rank(mode)
            && card_rank <= parent
            && let Some(found) = modes.find(mode)
        {
            settings.mode = found.id.clone();
        }
        settings
    }

    /// The child's own stored session, naming its parent; the parent's
    /// metadata lists it.
    fn child_recorder(
        &self,
        id: &SessionId,
        settings: &Settings,
        call_id: &str,
    ) -> Option<Recorder> {
        let store = self.runtime().store.as_ref()?;
        let mut metadata = Metadata::new(
            id,
            self.cwd.clone(),
            &settings.provider,
            &settings.model,
            &settings.mode,
        );
        metadata.agent = settings.agent.clone();
        metadata.parent_id = Some(self.parent_id.clone());
        metadata.parent_tool_call_id = Some(call_id.to_string());
        match store.create(&metadata) {
            Ok(open) => {
                if let Some(parent) = &self.recorder {
                    parent.child_started(id);
                }
                Some(Recorder::start(open, metadata))
            }
            Err(err) => {
                tracing::warn!(session = %id, %err, "cannot save the delegated session");
                None
            }
        }
    }

    /// The call's result: the child's last text, or why there is none.
    fn outcome(
        &self,
        ended: &Result<TurnEnd, super::SessionError>,
        view: &Mutex<ChildView>,
        budget_cancel: &CancellationToken,
        call_cancel: &CancellationToken,
        budget: Option<u64>,
    ) -> Result<String, ToolError> {
        let answer = lock(view).text.trim().to_string();
        let stop = match ended {
            Err(err) => return Err(ToolError::Failed(format!("the agent failed: {err}"))),
            Ok(end) => end.stop,
        };
        if stop == StopReason::Cancelled {
            if call_cancel.is_cancelled() {
                return Err(ToolError::Cancelled);
            }
            if budget_cancel.is_cancelled() {
                return Err(ToolError::Failed(format!(
                    "the agent used more than its {} tokens (`[subagents] token_budget`) and was stopped. What it said last: {}",
                    budget.unwrap_or_default(),
                    if answer.is_empty() {
                        "(nothing)"
                    } else {
                        &answer
                    }
                )));
            }
        }
        let note = match stop {
            StopReason::EndTurn => None,
            StopReason::MaxTokens => Some("its answer was cut at the model's output limit"),
            StopReason::MaxTurnRequests => Some("it reached its limit of model calls"),
            StopReason::Refusal => Some("the model refused"),
            StopReason::Cancelled => Some("it was cancelled"),
        };
        match (answer.is_empty(), note) {
            (true, Some(note)) => Err(ToolError::Failed(format!(
                "the agent stopped without an answer: {note}"
            ))),
            (true, None) => Err(ToolError::Failed(
                "the agent finished without an answer".into(),
            )),
            (false, Some(note)) => Ok(format!("{answer}\n\n[The agent stopped early: {note}.]")),
            (false, None) => Ok(answer),
        }
    }
}

/// What the user is shown of a child while it runs.
struct ChildView {
    agent: String,
    state: AgentState,
    /// Its tool calls: id, title, status.
    calls: Vec<(String, String, Option<ToolStatus>)>,
    /// Its text since its last tool call (the last is its answer).
    text: String,
    /// Tokens its model calls used so far.
    tokens: u64,
}

/// The most of the child's current text the summary shows.
const SHOWN_TEXT: usize = 400;
/// The most tool calls the summary lists (the latest ones).
const SHOWN_CALLS: usize = 12;

impl ChildView {
    fn new(agent: &str) -> Self {
        Self {
            agent: agent.to_string(),
            state: AgentState::Running,
            calls: Vec::new(),
            text: String::new(),
            tokens: 0,
        }
    }

    fn render(&self) -> String {
        let mut out = format!("{} · {}", self.agent, self.state.label());
        if let AgentState::Failed(reason) = &self.state {
            let _ = write!(out, ": {}", shorten(reason, 200));
        }
        let hidden = self.calls.len().saturating_sub(SHOWN_CALLS);
        if hidden > 0 {
            let _ = write!(out, "\n… {hidden} earlier calls");
        }
        for (_, title, status) in self.calls.iter().skip(hidden) {
            let mark = match status {
                Some(ToolStatus::Completed) => "✓",
                Some(ToolStatus::Failed) => "✗",
                _ => "…",
            };
            let _ = write!(out, "\n{mark} {title}");
        }
        let text = self.text.trim();
        if !text.is_empty() {
            let _ = write!(out, "\n\n{}", shorten(text, SHOWN_TEXT));
        }
        out
    }

    /// Take one event; whether the summary changed enough to show again
    /// (text shows when a line ends, not on every chunk).
    fn take(&mut self, event: &AgentEvent) -> bool {
        match event {
            AgentEvent::ToolCall(call) => {
                self.calls.push((call.id.clone(), call.title.clone(), None));
                self.text.clear();
                true
            }
            AgentEvent::ToolCallUpdate(progress) => {
                let Some(entry) = self.calls.iter_mut().find(|(id, ..)| *id == progress.id) else {
                    return false;
                };
                let changed = entry.2 != Some(progress.status);
                entry.2 = Some(progress.status);
                changed && progress.status != ToolStatus::InProgress
            }
            AgentEvent::AgentText(text) => {
                self.text.push_str(text);
                text.contains('\n')
            }
            AgentEvent::Usage { .. }
            | AgentEvent::Thought(_)
            | AgentEvent::Plan(_)
            | AgentEvent::PlanDocument(_)
            | AgentEvent::Notice(_)
            | AgentEvent::Compaction(_) => false,
        }
    }
}

/// The parent's client as a child sees it.
struct ChildClient {
    parent_id: SessionId,
    child_id: SessionId,
    agent: String,
    parent: Arc<dyn ClientSink>,
    runtime: Arc<AgentRuntime>,
    view: Arc<Mutex<ChildView>>,
    /// The parent's `delegate` call: its running summary.
    progress: Progress,
    budget: Option<u64>,
    /// Cancelled when the child goes over its budget.
    over_budget: CancellationToken,
    /// Forward the child's updates under its own session id, and its
    /// waits for the user as its state on the parent's session.
    expose: bool,
}

impl ChildClient {
    fn report(&self) {
        let summary = ToolContent::Text(lock(&self.view).render());
        // A client that shows the child links the call to its session
        // (the end carries it too: see `live::with_child_session`).
        self.progress.report(if self.expose {
            let session_id = self.child_id.clone();
            vec![ToolContent::Session { session_id }, summary]
        } else {
            vec![summary]
        });
    }

    fn set_state(&self, state: AgentState) {
        if self.expose {
            let shown = match state {
                AgentState::WaitingForPermission => SubagentState::WaitingForUser,
                _ => SubagentState::Running,
            };
            self.parent.send(
                &self.parent_id,
                Update::Subagent(SubagentInfo {
                    session_id: self.child_id.clone(),
                    title: None,
                    description: None,
                    state: Some(shown),
                    cwd: None,
                }),
            );
        }
        self.runtime.set_state(&self.child_id, state.clone());
        lock(&self.view).state = state;
        self.report();
    }
}

impl ClientSink for ChildClient {
    fn room(&self) -> futures::future::BoxFuture<'_, ()> {
        self.parent.room()
    }

    /// The child's own updates went to the parent's client under its id.
    fn session_ended(&self, _session_id: &SessionId) {
        self.parent.session_ended(&self.child_id);
    }

    fn send(&self, _session_id: &SessionId, update: Update) {
        if self.expose && matches!(update, Update::Agent(_)) {
            self.parent.send(&self.child_id, update.clone());
        }
        let Update::Agent(event) = update else {
            // Settings, commands, titles: the child's own, nobody shows them.
            return;
        };
        let show = {
            let mut view = lock(&self.view);
            if let AgentEvent::Usage { used, .. } = event {
                view.tokens += used;
                if self.budget.is_some_and(|budget| view.tokens > budget) {
                    tracing::info!(child = %self.child_id, tokens = view.tokens, "subagent over its token budget");
                    self.over_budget.cancel();
                }
            }
            view.take(&event)
        };
        if show {
            self.report();
        }
    }

    fn request_permission(
        &self,
        _session_id: &SessionId,
        call: &ToolCallInfo,
    ) -> ClientFuture<'_, PermissionChoice> {
        let mut asked = call.clone();
        asked.title = format!("[{}] {}", self.agent, call.title);
        Box::pin(async move {
            self.set_state(AgentState::WaitingForPermission);
            let answer = self
                .parent
                .request_permission(&self.parent_id, &asked)
                .await;
            self.set_state(AgentState::Running);
            answer
        })
    }

    fn read_text_file(&self, request: ReadTextFile) -> ClientFuture<'_, String> {
        self.parent.read_text_file(request)
    }

    fn write_text_file(&self, request: WriteTextFile) -> ClientFuture<'_, ()> {
        self.parent.write_text_file(request)
    }

    fn create_terminal(&self, request: CreateTerminal) -> ClientFuture<'_, TerminalId> {
        self.parent.create_terminal(request)
    }

    fn terminal_output(&self, terminal: &TerminalId) -> ClientFuture<'_, TerminalOutput> {
        self.parent.terminal_output(terminal)
    }

    fn wait_for_terminal_exit(&self, terminal: &TerminalId) -> ClientFuture<'_, TerminalExit> {
        self.parent.wait_for_terminal_exit(terminal)
    }

    fn kill_terminal(&self, terminal: &TerminalId) -> ClientFuture<'_, ()> {
        self.parent.kill_terminal(terminal)
    }

    fn release_terminal(&self, terminal: &TerminalId) -> ClientFuture<'_, ()> {
        self.parent.release_terminal(terminal)
    }
}
