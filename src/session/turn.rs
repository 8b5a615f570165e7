//! A running turn. Its [`TurnContext`] is taken from the actor once, when
//! the turn starts, and completed in the turn's own task (MCP tools once
//! the servers are up, the context window, the layered system prompt over
//! the tools offered) into the agent loop's input. A turn's task may die;
//! what it journaled is kept so the session and a later load agree.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::cursors;
use super::runtime::with_children;
use super::settings::Settings;
use super::shared::{Defaults, Journaled, Shared, TurnKind};
use super::steering::TurnInbox;
use super::subagents::TurnDelegator;
use super::{PromptReply, SessionActor, SessionError, TurnEnd};
use crate::util::lock;

use crate::agent_loop::{
    self, FromSession, Journal, JournalFn, ModelSetup, TurnInput, TurnLimits, TurnOutcome,
};
use crate::agents::AgentCard;
use crate::client::{ClientAbilities, ClientSink, Update};
use crate::events::{AgentEvent, Notice, Severity};
use crate::mcp::McpManager;
use crate::model::{Message, Part, Role};
use crate::modes::ModePolicy;
use crate::permissions::PermissionGate;
use crate::prompt::{PromptLayers, PromptVars};
use crate::providers::pricing::{CostMeter, price_of};
use crate::providers::{FALLBACK_CONTEXT_WINDOW, Provider, ProviderError, Providers};
use crate::tools::{Descriptions, ToolContext, ToolRegistry};

pub(super) struct RunningTurn {
    pub cancel: CancellationToken,
    /// None when the prompt was answered as it was inserted (ACP v2).
    pub reply: Option<PromptReply>,
    pub started: Started,
}

/// A turn's task, just spawned.
pub(super) struct Started {
    /// Aborted if dropped unawaited: a session that stops (even on a panic)
    /// takes its turn with it rather than leaving it running detached.
    pub task: AbortOnDropHandle<TurnOutcome>,
    /// A slash command's context operations are recorded when it ends (a
    /// prompt turn records its own as they happen).
    pub kind: TurnKind,
    pub journaled: Journaled,
    /// Messages sent while it runs, for its loop's next safe point.
    pub inbox: Arc<TurnInbox>,
}

/// What a turn reads of its session: handles that live as long as the
/// session, shared with each turn's task as it starts.
struct SessionHandles {
    id: crate::model::SessionId,
    cwd: PathBuf,
    client: Arc<dyn ClientSink>,
    abilities: ClientAbilities,
    defaults: Arc<Defaults>,
    providers: Arc<Providers>,
    mcp: watch::Receiver<Option<McpManager>>,
    /// The built-in tools (and `delegate`); MCP tools join once the servers are up.
    tools: ToolRegistry,
    skills: Arc<crate::skills::Catalog>,
    permissions: Arc<dyn PermissionGate>,
    /// The session's writer: asked at the turn's end whether saving failed.
    recorder: Option<crate::store::Recorder>,
    /// The session's running cost, which the turn's meters add to.
    spending: crate::providers::pricing::Spending,
    tokens: crate::context::spend::TokenTally,
}

/// What is told once per session, in its first prompt turn.
struct ToldOnce {
    mcp_failures: bool,
    /// Why the session is not saved.
    save_failure: Option<String>,
}

/// Everything one turn (a prompt, a command that calls the model, a
/// warm-up) runs with, taken from the session when it starts: the
/// session's handles, and what is this turn's alone.
pub(super) struct TurnContext {
    session: SessionHandles,
    kind: TurnKind,
    provider: Arc<dyn Provider>,
    settings: Settings,
    told_once: ToldOnce,
    read_only: bool,
    /// What the active agent card offers and allows.
    card: Option<AgentCard>,
    layers: PromptLayers,
    /// The session's tool context with this turn's delegator.
    tool_context: ToolContext,
    /// Prices the model's calls, where the config has its price.
    cost: Option<CostMeter>,
    /// Saves finished rounds and context operations at once, and keeps them.
    pub journal: JournalFn,
    /// The limits in force; the session's may be lifted for one turn.
    pub budgets: crate::context::spend::Budgets,
    /// The turn's cursors, for a client that takes them.
    cursors: Option<cursors::Shared>,
    /// Where messages for this turn wait (steering).
    pub inbox: Arc<TurnInbox>,
}

/// The tools a turn offers the model, and the skills it names among them.
struct Offered {
    tools: ToolRegistry,
    skills: Vec<crate::skills::Skill>,
}

impl TurnContext {
    /// The turn's events, sent to the client as the session's updates.
    pub fn emitter(&self) -> impl Fn(AgentEvent) + Send + Sync + 'static {
        let client = Arc::clone(&self.session.client);
        let session_id = self.session.id.clone();
        let abilities = self.session.abilities;
        let cursors = self.cursors.clone();
        move |event: AgentEvent| {
            let Some(update) = super::live::for_client(Update::Agent(event), abilities) else {
                return;
            };
            match &cursors {
                Some(cursors) => {
                    for update in lock(cursors).observe(update) {
                        client.send(&session_id, update);
                    }
                }
                None => client.send(&session_id, update),
            }
        }
    }

    /// The agent loop's input: waits for the MCP servers (bounded by their
    /// start timeout) and the model's context window, unless cancelled.
    pub async fn input(
        mut self,
        context: crate::context::ContextManager,
        cancel: CancellationToken,
        emit: &(dyn Fn(AgentEvent) + Send + Sync),
    ) -> TurnInput {
        let fallback = self.fallback();
        self.add_mcp_tools(&cancel, emit).await;
        self.tell_once(emit);
        let Offered { mut tools, skills } = self.offered();
        let window = self.context_window(&cancel).await;
        // A small window gets the short base prompt and brief tools, so
        // the fixed part leaves room for the conversation.
        let small = window <= crate::prompt::SMALL_WINDOW;
        tools.set_descriptions(if small {
            Descriptions::Brief
        } else {
            Descriptions::Full
        });
        self.layers.small = small;
        let system = self.system_prompt(&tools, &skills);
        let defaults = &self.session.defaults;
        TurnInput {
            session: FromSession {
                model: ModelSetup {
                    provider: self.provider,
                    // Read before the model's name moves out of the settings.
                    reasoning: self.settings.reasoning(),
                    name: self.settings.model,
                    cost: self.cost,
                    fallback,
                    cache_key: Some(self.session.id.to_string()),
                    first_token_notice: defaults.first_token_notice,
                    outbound: Some(self.session.client),
                },
                limits: TurnLimits {
                    context_settings: defaults.context,
                    max_turn_requests: (self.card.as_ref())
                        .and_then(|card| card.max_turns)
                        .unwrap_or(defaults.max_turn_requests),
                    loop_guard: defaults.loop_guard,
                    budgets: self.budgets,
                    session_tokens: self.session.tokens,
                },
                permissions: self.session.permissions,
            },
            system: Some(system),
            context,
            context_window: window,
            cancel,
            tools,
            tool_context: self.tool_context,
            journal: Some(self.journal),
            steering: Some(self.inbox),
        }
    }

    /// Waits for the MCP servers and adds their tools; the first prompt
    /// turn tells which failed to start.
    async fn add_mcp_tools(
        &mut self,
        cancel: &CancellationToken,
        emit: &(dyn Fn(AgentEvent) + Send + Sync),
    ) {
        let manager = tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            ready = self.session.mcp.wait_for(Option::is_some) => ready.ok().and_then(|m| m.clone()),
        };
        let Some(manager) = manager else {
            return;
        };
        if self.told_once.mcp_failures {
            for (server, reason) in manager.failures() {
                emit(AgentEvent::Notice(Notice {
                    severity: Severity::Warning,
                    title: format!("MCP server `{server}` is unavailable"),
                    detail: Some(reason.to_string()),
                    thought: format!("{reason}\n"),
                }));
            }
        }
        let declared_reads = &self.session.defaults.declared_reads;
        for tool in manager.tools() {
            self.session.tools.register(declared_reads.apply(tool));
        }
    }

    /// Why the session is not saved (its first prompt turn), and what the
    /// sandbox cannot do here (once per session; never in a warm-up).
    fn tell_once(&mut self, emit: &(dyn Fn(AgentEvent) + Send + Sync)) {
        if let Some(failure) = self.told_once.save_failure.take() {
            emit(AgentEvent::Notice(super::record::saving_notice(
                "This session is not saved",
                failure,
            )));
        }
        if self.kind != TurnKind::Warmup
            && let Some(notice) = self.tool_context.sandbox.notice()
        {
            emit(AgentEvent::Thought(notice));
        }
    }

    /// The tools the model is offered: the session's, with the skills
    /// tool, less what the editor, the mode and the card rule out.
    fn offered(&self) -> Offered {
        let mut tools = self.session.tools.clone();
        let skills = self.session.skills.skills();
        if !skills.is_empty() {
            tools.register(Arc::new(crate::skills::tool::SkillTool {
                catalog: Arc::clone(&self.session.skills),
            }));
        }
        if !self.session.abilities.ask_user {
            // Only an editor that shows forms can ask the user.
            tools = tools.filtered(|tool| tool.name() != crate::tools::builtin::ask_user::NAME);
        }
        if self.read_only {
            tools = tools.filtered(|tool| !tool.mutates());
        } else {
            // The plan is proposed before acting; once acting, the todo
            // list tracks it (the plan stays shown and in the context).
            tools = tools.filtered(|tool| tool.name() != crate::tools::builtin::write_plan::NAME);
        }
        if let Some(card) = &self.card {
            tools = tools.filtered(|tool| card.offers(tool.name()));
        }
        Offered { tools, skills }
    }

    /// The model's context window, asked once per model (Ollama:
    /// /api/show), then cached; the fallback size if cancelled first.
    async fn context_window(&self, cancel: &CancellationToken) -> u64 {
        let window =
            (self.session.providers).context_window(&self.settings.provider, &self.settings.model);
        tokio::select! {
            biased;
            _ = cancel.cancelled() => FALLBACK_CONTEXT_WINDOW,
            window = window => window,
        }
    }

    /// The layered system prompt over the tools offered.
    fn system_prompt(&self, tools: &ToolRegistry, skills: &[crate::skills::Skill]) -> String {
        let names: Vec<String> = tools.names().map(str::to_string).collect();
        let mut system = self.layers.render(&PromptVars {
            provider: &self.settings.provider,
            model: &self.settings.model,
            cwd: &self.session.cwd,
            mode: &self.settings.mode,
            tools: &names,
        });
        // Last, so the layers before it stay a stable prefix for prompt caches.
        if !skills.is_empty() && names.iter().any(|n| n == crate::skills::tool::NAME) {
            system.push_str("\n\n");
            system.push_str(&crate::skills::prompt_layer(skills));
        }
        system
    }

    /// The chain of the turn's provider, when it has one.
    fn fallback(&self) -> Option<agent_loop::Fallback> {
        let providers = &self.session.providers;
        let chain = &providers.config(&self.settings.provider)?.fallback;
        if chain.is_empty() {
            return None;
        }
        let prices = Arc::clone(&self.session.defaults);
        let spending = self.session.spending.clone();
        Some(agent_loop::Fallback {
            providers: Arc::clone(providers),
            chain: chain.iter().cloned().collect(),
            thought_level: self.settings.thought_level,
            cost_for: Arc::new(move |model: &str| {
                price_of(&prices.prices, model).map(|price| CostMeter {
                    price: price.clone(),
                    spending: spending.clone(),
                })
            }),
        })
    }
}

impl SessionActor {
    /// The context of a turn of `kind` starting now.
    pub(super) fn turn_context(
        &mut self,
        kind: TurnKind,
    ) -> Result<(TurnContext, Journaled), SessionError> {
        let settings = self.settings.current.clone();
        let Some(provider) = self.services.providers.get(&settings.provider) else {
            return Err(SessionError::Provider(ProviderError::Setup {
                provider: settings.provider,
                detail: "this provider is not configured".into(),
            }));
        };
        let card = self.active_card();
        let mut layers = PromptLayers::load_with(
            &self.services.cwd,
            &self.services.defaults.rules_files,
            &settings.mode,
            card.map(|c| (c.name.as_str(), c.body.as_str())),
            self.services.defaults.system_prompt.as_deref(),
        );
        layers.client = self.services.client_prompt.clone();
        let card = card.cloned();
        let told_once = self.told_once(kind);
        let journaled: Journaled = Arc::default();
        let services = &self.services;
        let mut tool_context = services.tool_context.clone();
        tool_context.delegator = Some(Arc::new(self.delegator(&settings)));
        let context = TurnContext {
            session: self.session_handles(),
            kind,
            provider,
            cost: price_of(&services.defaults.prices, &settings.model).map(|price| CostMeter {
                price: price.clone(),
                spending: services.spending.clone(),
            }),
            settings,
            told_once,
            read_only: services.permissions.policy() == ModePolicy::ReadOnly,
            card,
            layers,
            tool_context,
            journal: self.journal(Arc::clone(&journaled)),
            budgets: self.budgets(),
            cursors: None,
            inbox: Arc::new(TurnInbox::new(
                Arc::clone(&services.client),
                services.id.clone(),
            )),
        };
        Ok((context, journaled))
    }

    /// The session's handles as a turn reads them.
    fn session_handles(&self) -> SessionHandles {
        let services = &self.services;
        SessionHandles {
            id: services.id.clone(),
            cwd: services.cwd.clone(),
            client: Arc::clone(&services.client),
            abilities: services.abilities,
            defaults: Arc::clone(&services.defaults),
            providers: Arc::clone(&services.providers),
            mcp: services.mcp.clone(),
            tools: services.tools.clone(),
            skills: Arc::clone(&services.skills),
            permissions: Arc::clone(&services.permissions) as Arc<dyn PermissionGate>,
            recorder: services.recorder.clone(),
            spending: services.spending.clone(),
            tokens: services.tokens.clone(),
        }
    }

    /// MCP start failures and why the session is not saved are told in
    /// the session's first prompt turn, never in a command or a warm-up.
    fn told_once(&mut self, kind: TurnKind) -> ToldOnce {
        let first = kind == TurnKind::Prompt
            && !std::mem::replace(&mut self.conversation.mcp_failures_told, true);
        ToldOnce {
            mcp_failures: first,
            save_failure: first.then(|| self.services.save_failure.take()).flatten(),
        }
    }

    /// Starts children for this turn, from the session as it is now.
    fn delegator(&self, settings: &Settings) -> TurnDelegator {
        let services = &self.services;
        TurnDelegator {
            shared: Shared {
                defaults: Arc::clone(&services.defaults),
                providers: Arc::clone(&services.providers),
                client: Arc::clone(&services.client),
                runtime: Arc::clone(&services.runtime),
                // Children speak through their parent's client port.
                attachments: None,
            },
            parent_id: services.id.clone(),
            cwd: services.cwd.clone(),
            settings: settings.clone(),
            depth: services.depth,
            agents: services.agents.clone(),
            permissions: Arc::clone(&services.permissions),
            client: Arc::clone(&services.client),
            recorder: services.recorder.clone(),
            tally: Arc::clone(&services.tally),
            fs: Arc::clone(&services.tool_context.fs),
            shell: Arc::clone(&services.tool_context.shell),
            mcp: services.mcp.clone(),
            expose: services.abilities.subagents,
        }
    }

    /// Start what a prompt asks for: a slash command, an MCP prompt, or a
    /// model turn. `cancel` stops it.
    pub(super) fn start_turn(
        &mut self,
        content: Vec<Part>,
        cancel: CancellationToken,
        ids: &crate::store::PromptIds,
    ) -> Result<Started, SessionError> {
        self.services.tally.reset();
        self.refresh_skills();
        if let Some(command) = crate::commands::from_parts(&content) {
            return self.start_command(command, cancel);
        }
        if let Some((command, args)) = self.find_prompt_command(&content) {
            return self.start_prompt_command(command, &args, cancel);
        }
        let content = self.expand_skill_command(content);
        let over_budget = self.over_budget();
        let (mut turn, journaled) = self.turn_context(TurnKind::Prompt)?;
        self.conversation.context.push(Arc::new(Message {
            role: Role::User,
            parts: content,
        }));
        self.record_prompt(ids);
        (self.services.files).set_turn(self.conversation.context.last_turn());
        turn.cursors = self.prompt_cursor();
        let context = self.conversation.context.clone();
        let warming = self.conversation.warming.take();
        self.conversation.prompted = true;
        let inbox = Arc::clone(&turn.inbox);
        // A task of its own: a panic inside a turn must not take the session with it.
        let task = tokio::spawn(async move {
            let emit = turn.emitter();
            if let Some(over) = over_budget {
                match over.go_on(&cancel).await {
                    // Past the session's limit by the user's leave: this turn only.
                    Ok(()) => turn.budgets = turn.budgets.turn_only(),
                    Err(stopped) => {
                        emit(AgentEvent::AgentText(stopped.to_string()));
                        return TurnOutcome {
                            new_messages: Vec::new(),
                            result: Ok(crate::events::StopReason::MaxTokens),
                            usage: None,
                            context,
                            context_ops: Vec::new(),
                            switched: None,
                        };
                    }
                }
            }
            let recorder = turn.session.recorder.clone();
            if let Some(warming) = warming {
                warming.wait(&cancel).await;
            }
            let cursors = turn.cursors.clone();
            let (client, session_id) = (Arc::clone(&turn.session.client), turn.session.id.clone());
            let journal = turn.journal.clone();
            let input = turn.input(context, cancel, &emit).await;
            let mut outcome = agent_loop::run_turn(input, &emit).await;
            // Saved with the turn's rounds, before its answer goes out.
            if let Some(cursors) = &cursors
                && outcome.result.is_ok()
                && let Some(update) = cursors::end_of_turn(cursors, &mut outcome.context, &journal)
            {
                client.send(&session_id, update);
            }
            // Told within the turn whose work could not be saved.
            if let Some(recorder) = recorder
                && let Some(why) = recorder.failure_to_tell().await
            {
                emit(AgentEvent::Notice(super::record::write_failure_notice(
                    &why,
                )));
            }
            outcome
        });
        Ok(Started {
            task: AbortOnDropHandle::new(task),
            kind: TurnKind::Prompt,
            journaled,
            inbox,
        })
    }

    /// The prompt's cursor, for a client that takes them: a checkpoint of
    /// the context just after the prompt, saved like `/context checkpoint`.
    /// Delegated agents' sessions have none (their parent shows them).
    fn prompt_cursor(&mut self) -> Option<cursors::Shared> {
        let uses = self
            .services
            .abilities
            .cursors
            .filter(|_| self.services.depth == 0)?;
        let id = cursors::new_id();
        let op = cursors::checkpoint(&id);
        if let Err(err) = self.conversation.context.apply(&op) {
            tracing::warn!(%err, "the prompt's cursor was not saved");
            return None;
        }
        if let Some(recorder) = &self.services.recorder {
            recorder.context_op(&op);
        }
        Some(cursors::TurnCursors::new(id, uses).shared())
    }

    /// The turn's end: saved and taken into the session; then the next
    /// turn, if messages wait for one.
    pub(super) fn finish_turn(
        &mut self,
        turn: RunningTurn,
        outcome: Result<TurnOutcome, tokio::task::JoinError>,
    ) -> Option<RunningTurn> {
        let result = match outcome {
            Ok(outcome) => {
                let children = self.services.tally.take_usage();
                let tokens = |u: &Option<crate::providers::Usage>| {
                    u.as_ref()
                        .map_or(0, |u| u.prompt_tokens + u.completion_tokens)
                };
                let kind = turn.started.kind;
                if kind == TurnKind::Prompt {
                    // Delegated agents' tokens count for the session too, once their turn is over.
                    self.services.tokens.add(tokens(&children));
                    self.conversation.last_turn_tokens = tokens(&outcome.usage) + tokens(&children);
                }
                self.record_turn(&outcome, kind);
                // The turn's copy holds its messages, compactions and drops.
                self.conversation.context = outcome.context;
                if let Some(switched) = outcome.switched {
                    self.adopt_fallback(switched);
                }
                let usage = with_children(outcome.usage, children);
                // Before the answer, so the client has them when the turn ends.
                if kind == TurnKind::Prompt
                    && let Ok(stop) = outcome.result
                {
                    self.suggest(stop);
                }
                outcome
                    .result
                    .map(|stop| TurnEnd { stop, usage })
                    .map_err(SessionError::from)
            }
            Err(err) => {
                tracing::error!(session = %self.services.id, %err, "turn task failed");
                // Keep what the turn finished (and saved) before it died, so
                // this context and the one a load rebuilds stay the same.
                for entry in lock(&turn.started.journaled).drain(..) {
                    match entry {
                        Journal::Round(messages) => {
                            for message in messages {
                                self.conversation.context.push(message);
                            }
                        }
                        Journal::Op(op) => {
                            if let Err(err) = self.conversation.context.apply(&op) {
                                tracing::warn!(%err, "a journaled context operation does not apply");
                            }
                        }
                        Journal::Steered(steered) => {
                            self.conversation.context.push(steered.message);
                        }
                    }
                }
                let detail = crash_detail(err);
                self.record_crashed_turn(&detail);
                Err(SessionError::Crashed(detail))
            }
        };
        self.turn_ended(turn, result)
    }
}

/// What a failed turn task says: the panic's own message where there is one.
fn crash_detail(err: tokio::task::JoinError) -> String {
    if err.is_panic() {
        format!("a panic: {}", super::panic_message(&*err.into_panic()))
    } else {
        err.to_string()
    }
}
