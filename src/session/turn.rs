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
use super::subagents::TurnDelegator;
use super::{Defaults, PromptReply, SessionActor, SessionError, Shared, TurnEnd};
use crate::util::lock;

use crate::agent_loop::{self, Journal, JournalFn, TurnInput, TurnOutcome};
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

/// What a turn journaled, kept for when its task dies without an outcome.
pub(super) type Journaled = Arc<std::sync::Mutex<Vec<Journal>>>;

pub(super) struct RunningTurn {
    pub cancel: CancellationToken,
    pub reply: PromptReply,
    pub started: Started,
}

/// A turn's task, just spawned.
pub(super) struct Started {
    /// Aborted if dropped unawaited: a session that stops (even on a panic)
    /// takes its turn with it rather than leaving it running detached.
    pub task: AbortOnDropHandle<TurnOutcome>,
    /// A slash command: its context operations are recorded when it ends
    /// (a prompt turn records its own as they happen).
    pub command: bool,
    pub journaled: Journaled,
}

/// Everything a turn (or a command that calls the model) runs with, taken
/// from the session when it starts.
pub(super) struct TurnContext {
    session_id: String,
    client: Arc<dyn ClientSink>,
    abilities: ClientAbilities,
    provider: Arc<dyn Provider>,
    settings: Settings,
    defaults: Arc<Defaults>,
    providers: Arc<Providers>,
    mcp: watch::Receiver<Option<McpManager>>,
    /// MCP start failures are told once, in the first turn.
    tell_failures: bool,
    /// Why the session is not saved: told with them.
    save_failure: Option<String>,
    tools: ToolRegistry,
    read_only: bool,
    /// What the active agent card offers and allows.
    card: Option<AgentCard>,
    layers: PromptLayers,
    cwd: PathBuf,
    tool_context: ToolContext,
    permissions: Arc<dyn PermissionGate>,
    /// Prices the model's calls, where the config has its price.
    cost: Option<CostMeter>,
    skills: Arc<crate::skills::Catalog>,
    /// The session's running total, which a fallback model's meter adds to.
    cost_spending: crate::providers::pricing::Spending,
    /// Saves finished rounds and context operations at once, and keeps them.
    pub journal: JournalFn,
    /// The session's writer: asked at the turn's end whether saving failed.
    recorder: Option<crate::store::Recorder>,
    /// The limits in force; the session's may be lifted for one turn.
    pub budgets: crate::context::spend::Budgets,
    session_tokens: crate::context::spend::TokenTally,
    /// Tells the client nothing (a cache warm-up): once-only notices wait
    /// for the first real turn.
    quiet: bool,
    /// The turn's cursors, for a client that takes them.
    cursors: Option<cursors::Shared>,
}

impl TurnContext {
    /// Make the context tell the client nothing (see `quiet`).
    pub fn quiet(mut self) -> Self {
        self.quiet = true;
        self
    }

    /// The turn's events, sent to the client as the session's updates.
    pub fn emitter(&self) -> impl Fn(AgentEvent) + Send + Sync + 'static {
        let client = Arc::clone(&self.client);
        let session_id = self.session_id.clone();
        let abilities = self.abilities;
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
        let manager = tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            ready = self.mcp.wait_for(Option::is_some) => ready.ok().and_then(|m| m.clone()),
        };
        if let Some(manager) = manager {
            if self.tell_failures && !self.quiet {
                for (server, reason) in manager.failures() {
                    emit(AgentEvent::Notice(Notice {
                        severity: Severity::Warning,
                        title: format!("MCP server `{server}` is unavailable"),
                        detail: Some(reason.to_string()),
                        thought: format!("{reason}\n"),
                    }));
                }
            }
            for tool in manager.tools() {
                self.tools
                    .register(self.defaults.declared_reads.apply(tool));
            }
        }
        if let Some(failure) = self.save_failure {
            emit(AgentEvent::Notice(super::record::saving_notice(
                "This session is not saved",
                failure,
            )));
        }
        // Once per session: what the sandbox cannot do here.
        if !self.quiet
            && let Some(notice) = self.tool_context.sandbox.notice()
        {
            emit(AgentEvent::Thought(notice));
        }
        let mut tools = self.tools;
        let skills = self.skills.skills();
        if !skills.is_empty() {
            tools.register(Arc::new(crate::skills::tool::SkillTool {
                catalog: Arc::clone(&self.skills),
            }));
        }
        if !self.abilities.ask_user {
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
        // Asked once per model (Ollama: /api/show), then cached.
        let window = self
            .providers
            .context_window(&self.settings.provider, &self.settings.model);
        let window = tokio::select! {
            biased;
            _ = cancel.cancelled() => FALLBACK_CONTEXT_WINDOW,
            window = window => window,
        };
        // A small window gets the short base prompt and brief tools, so
        // the fixed part leaves room for the conversation.
        let small = window <= crate::prompt::SMALL_WINDOW;
        tools.set_descriptions(if small {
            Descriptions::Brief
        } else {
            Descriptions::Full
        });
        self.layers.small = small;
        let names: Vec<String> = tools.names().map(str::to_string).collect();
        let mut system = self.layers.render(&PromptVars {
            provider: &self.settings.provider,
            model: &self.settings.model,
            cwd: &self.cwd,
            mode: &self.settings.mode,
            tools: &names,
        });
        // Last, so the layers before it stay a stable prefix for prompt caches.
        if !skills.is_empty() && names.iter().any(|n| n == crate::skills::tool::NAME) {
            system.push_str("\n\n");
            system.push_str(&crate::skills::prompt_layer(&skills));
        }
        TurnInput {
            provider: self.provider,
            reasoning: self.settings.reasoning(),
            cost: self.cost,
            model: self.settings.model,
            system: Some(system),
            context,
            context_window: window,
            context_settings: self.defaults.context,
            cancel,
            tools,
            tool_context: self.tool_context,
            permissions: self.permissions,
            max_turn_requests: (self.card.as_ref())
                .and_then(|card| card.max_turns)
                .unwrap_or(self.defaults.max_turn_requests),
            loop_guard: self.defaults.loop_guard,
            first_token_notice: self.defaults.first_token_notice,
            journal: Some(self.journal),
            fallback,
            budgets: self.budgets,
            session_tokens: self.session_tokens,
            cache_key: Some(self.session_id),
            outbound: Some(self.client),
        }
    }

    /// The chain of the turn's provider, when it has one.
    fn fallback(&self) -> Option<agent_loop::Fallback> {
        let chain = &self.providers.config(&self.settings.provider)?.fallback;
        if chain.is_empty() {
            return None;
        }
        let prices = Arc::clone(&self.defaults);
        let spending = self.cost_spending.clone();
        Some(agent_loop::Fallback {
            providers: Arc::clone(&self.providers),
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
    /// The context of a turn starting now. `turn`: a prompt (not a
    /// command), where MCP start failures are told once.
    pub(super) fn turn_context(
        &mut self,
        turn: bool,
    ) -> Result<(TurnContext, Journaled), SessionError> {
        let settings = self.settings.current.clone();
        let settings_model = settings.model.clone();
        let Some(provider) = self.services.providers.get(&settings.provider) else {
            return Err(SessionError::Provider(ProviderError::Setup {
                provider: settings.provider.clone(),
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
        let tell_failures =
            turn && !std::mem::replace(&mut self.conversation.mcp_failures_told, true);
        let journaled: Journaled = Arc::default();
        let save_failure = tell_failures
            .then(|| self.services.save_failure.take())
            .flatten();
        let services = &self.services;
        let mut tool_context = services.tool_context.clone();
        tool_context.delegator = Some(Arc::new(TurnDelegator {
            shared: Shared {
                defaults: Arc::clone(&services.defaults),
                providers: Arc::clone(&services.providers),
                client: Arc::clone(&services.client),
                runtime: Arc::clone(&services.runtime),
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
        }));
        let context = TurnContext {
            session_id: services.id.clone(),
            client: Arc::clone(&services.client),
            abilities: services.abilities,
            provider,
            settings,
            defaults: Arc::clone(&services.defaults),
            providers: Arc::clone(&services.providers),
            mcp: services.mcp.clone(),
            tell_failures,
            save_failure,
            tools: services.tools.clone(),
            read_only: services.permissions.policy() == ModePolicy::ReadOnly,
            card,
            layers,
            cwd: services.cwd.clone(),
            tool_context,
            permissions: Arc::clone(&services.permissions) as Arc<dyn PermissionGate>,
            cost: price_of(&services.defaults.prices, &settings_model).map(|price| CostMeter {
                price: price.clone(),
                spending: services.spending.clone(),
            }),
            cost_spending: services.spending.clone(),
            skills: Arc::clone(&services.skills),
            journal: self.journal(Arc::clone(&journaled)),
            recorder: services.recorder.clone(),
            budgets: self.budgets(),
            session_tokens: services.tokens.clone(),
            quiet: false,
            cursors: None,
        };
        Ok((context, journaled))
    }

    /// Start what a prompt asks for: a slash command, an MCP prompt, or a
    /// model turn. `cancel` stops it.
    pub(super) fn start_turn(
        &mut self,
        content: Vec<Part>,
        cancel: CancellationToken,
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
        let (mut turn, journaled) = self.turn_context(true)?;
        self.conversation.context.push(Arc::new(Message {
            role: Role::User,
            parts: content,
        }));
        self.record_prompt();
        (self.services.files).set_turn(self.conversation.context.last_turn());
        turn.cursors = self.prompt_cursor();
        let context = self.conversation.context.clone();
        let warming = self.conversation.warming.take();
        self.conversation.prompted = true;
        // A task of its own: a panic inside a turn must not take the session with it.
        let task = tokio::spawn(async move {
            let emit = turn.emitter();
            if let Some(over) = over_budget {
                match over.go_on(&cancel).await {
                    // Past the session's limit by the user's leave: this turn only.
                    Ok(()) => turn.budgets = turn.budgets.turn_only(),
                    Err(stopped) => {
                        emit(AgentEvent::AgentText(stopped));
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
            let recorder = turn.recorder.clone();
            if let Some(warming) = warming {
                warming.wait(&cancel).await;
            }
            let cursors = turn.cursors.clone();
            let (client, session_id) = (Arc::clone(&turn.client), turn.session_id.clone());
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
            command: false,
            journaled,
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

    pub(super) fn finish_turn(
        &mut self,
        turn: RunningTurn,
        outcome: Result<TurnOutcome, tokio::task::JoinError>,
    ) {
        let reply = turn.reply;
        let result = match outcome {
            Ok(outcome) => {
                let children = self.services.tally.take_usage();
                let tokens = |u: &Option<crate::providers::Usage>| {
                    u.as_ref()
                        .map_or(0, |u| u.prompt_tokens + u.completion_tokens)
                };
                if !turn.started.command {
                    // Delegated agents' tokens count for the session too, once their turn is over.
                    self.services.tokens.add(tokens(&children));
                    self.conversation.last_turn_tokens = tokens(&outcome.usage) + tokens(&children);
                }
                self.record_turn(&outcome, turn.started.command);
                // The turn's copy holds its messages, compactions and drops.
                self.conversation.context = outcome.context;
                if let Some(switched) = outcome.switched {
                    self.adopt_fallback(switched);
                }
                let usage = with_children(outcome.usage, children);
                // Before the answer, so the client has them when the turn ends.
                if !turn.started.command
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
                    }
                }
                let detail = crash_detail(err);
                self.record_crashed_turn(&detail);
                Err(SessionError::Crashed(detail))
            }
        };
        self.conversation.in_turn = false;
        let _ = reply.send(result);
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
