//! One prompt turn: prompt → LLM (streaming) → tools → LLM … until the
//! model answers without asking for tools, the turn is cancelled, the
//! provider fails or `max_turn_requests` is reached. Emits [`AgentEvent`]s in
//! the order they happen; knows nothing of ACP.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::context::{self, ContextBudget, ContextManager, ContextOp, ContextSettings};
use crate::events::{
    AgentEvent, StopReason, ToolCallInfo, ToolCallProgress, ToolContent, ToolKind, ToolStatus,
};
use crate::model::{Message, Part, Role};
use crate::permissions::{Permission, PermissionGate};
use crate::providers::dialects::{self, AnswerEnd, SettledCall};
use crate::providers::{
    ChatRequest, FinishReason, Provider, ProviderError, ToolChoice, ToolDefinition, Usage,
    tool_calling,
};
use crate::tools::redact::Redactor;
use crate::tools::{Progress, Tool, ToolContext, ToolError, ToolRegistry};

pub mod fallback;
mod first_token;
mod fit;
mod keep_alive;
pub mod loop_guard;
mod model_call;
mod steering;
pub use fallback::{Fallback, Switched};
use fit::fit;
use loop_guard::{LoopGuard, LoopGuardSettings};
use model_call::{CallEnd, CallResult, Limits, call_model};
pub use steering::{SteeredMessage, SteeringInbox};

/// What a turn reports for the session store the moment it happens, so a
/// crash loses only the round in flight.
#[derive(Debug, Clone, PartialEq)]
pub enum Journal {
    /// A finished model round: its answer, and its tool results if it made calls.
    Round(Vec<Arc<Message>>),
    /// A compaction or drop, applied to the context before the next call.
    Op(ContextOp),
    /// A user message that joined the turn, after the rounds before it.
    Steered(SteeredMessage),
}

pub type JournalFn = Arc<dyn Fn(Journal) + Send + Sync>;

/// What one turn runs with: what its session lends it, and what is the
/// turn's own (built for it, used up or changed by it).
pub struct TurnInput {
    /// Lent by the session for this turn: the same for every turn until a
    /// setting changes.
    pub session: FromSession,
    /// This turn's system prompt, layered over the tools it offers.
    pub system: Option<String>,
    /// The conversation so far, ending with the user's new message; the
    /// turn takes it and hands it back in its outcome.
    pub context: ContextManager,
    /// The model's window, asked when the turn starts; a fallback changes it.
    pub context_window: u64,
    /// Cancels this turn alone (a child of its request's token).
    pub cancel: CancellationToken,
    /// The tools offered to the model this turn (already filtered by the mode).
    pub tools: ToolRegistry,
    /// The session's tool context with this turn's delegator.
    pub tool_context: ToolContext,
    /// Told of every round and context operation of this turn as it happens.
    pub journal: Option<JournalFn>,
    /// Messages the user sends while the turn runs, taken before each request.
    pub steering: Option<Arc<dyn SteeringInbox>>,
}

/// What the session lends each of its turns: settings and handles that
/// outlive the turn (a turn changes only the model, by falling back).
pub struct FromSession {
    /// The model and how it is called.
    pub model: ModelSetup,
    /// The limits the turn runs under.
    pub limits: TurnLimits,
    /// The session's gate, asked before each tool call.
    pub permissions: Arc<dyn PermissionGate>,
}

/// The session's model and how each call to it is made; lives as long as
/// the session's settings, but a fallback replaces it for the rest of a turn.
pub struct ModelSetup {
    /// The session's current provider, which serves the model.
    pub provider: Arc<dyn Provider>,
    /// The model's name at the provider.
    pub name: String,
    /// The session's reasoning effort, where the model reasons.
    pub reasoning: Option<crate::providers::Reasoning>,
    /// Prices the model's calls, where the config has its price.
    pub cost: Option<crate::providers::pricing::CostMeter>,
    /// Where the turn goes on when its provider keeps failing.
    pub fallback: Option<Fallback>,
    /// Sent with every request as the provider's prompt-cache key (the
    /// session's id: its prefix is the same for all its turns).
    pub cache_key: Option<String>,
    /// After this long without a first token from the model, and again at
    /// each multiple, the client is told the turn is still alive (a local
    /// model can read a long prompt for minutes; clients give up on silence).
    pub first_token_notice: Option<Duration>,
    /// Where the turn's updates go: the model's stream is read only as fast
    /// as it takes them ([`ClientSink::room`]); the session's client.
    pub outbound: Option<Arc<dyn crate::client::ClientSink>>,
}

/// What bounds a turn, set by the session's config, card and `/budget`.
pub struct TurnLimits {
    /// Answer reserve and compaction threshold.
    pub context_settings: ContextSettings,
    /// Model calls allowed in one turn before it stops with `max_turn_requests`.
    pub max_turn_requests: u32,
    /// How many identical calls in a row stop the turn.
    pub loop_guard: LoopGuardSettings,
    /// Token and cost limits: past one, the turn stops with `max_tokens`.
    pub budgets: crate::context::spend::Budgets,
    /// The session's tokens so far (shared with the session), which this
    /// turn's calls add to.
    pub session_tokens: crate::context::spend::TokenTally,
}

impl TurnInput {
    /// What bounds each of the turn's model calls besides its request.
    fn limits(&self) -> Limits<'_> {
        Limits {
            context_window: self.context_window,
            first_token_notice: self.session.model.first_token_notice,
            outbound: self.session.model.outbound.as_deref(),
        }
    }

    /// The window's budget under the session's context settings.
    pub fn budget(&self) -> ContextBudget {
        (self.session.limits.context_settings).budget(self.context_window)
    }

    /// A model call of this turn: the model, system prompt, tools and cache
    /// key every call shares (the prefix a provider's cache keeps), then
    /// `messages`. The warm-up sends the same, so the two cannot drift.
    pub fn request(&self, tools: Vec<ToolDefinition>, messages: Vec<Arc<Message>>) -> ChatRequest {
        let model = &self.session.model;
        ChatRequest {
            model: model.name.clone(),
            system: self.system.clone(),
            messages,
            tools,
            tool_choice: ToolChoice::Auto,
            max_output_tokens: model.provider.config().max_output_tokens,
            context_window: Some(self.context_window),
            reasoning: model.reasoning,
            cache_key: model.cache_key.clone(),
        }
    }

    /// The turn's request without messages: the prefix every call of it
    /// shares, which a summary request continues
    /// (`context::compact::LastRequest`).
    pub fn request_prefix(&self) -> ChatRequest {
        self.request(self.tools.definitions(), Vec::new())
    }
}

pub struct TurnOutcome {
    /// Messages the turn added after the user's (what the model said, even
    /// if cut short by cancel or an error: the user saw it).
    pub new_messages: Vec<Arc<Message>>,
    pub result: Result<StopReason, ProviderError>,
    /// The tokens of every model call in the turn, added up (None when the
    /// provider reported none).
    pub usage: Option<Usage>,
    /// The context after the turn: the new messages, any compaction or
    /// dropping, and what the provider's usage taught the estimator.
    pub context: ContextManager,
    /// Compactions and drops made during the turn, in order (for a store).
    pub context_ops: Vec<ContextOp>,
    /// The provider the turn fell back to, which the session adopts.
    pub switched: Option<Switched>,
}

/// A compaction's id, unique in the session.
pub fn compaction_id() -> String {
    format!("compaction-{}", uuid::Uuid::new_v4().simple())
}

pub async fn run_turn(
    mut input: TurnInput,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> TurnOutcome {
    let mut turn = TurnState::start(&mut input);
    let result = loop {
        if let Some(stop) = stop_before_call(&input, turn.requests, &turn.usage, emit) {
            break Ok(stop);
        }
        turn.take_steered(&input);
        turn.requests += 1;
        if let ControlFlow::Break(result) = turn.round(&mut input, emit).await {
            break result;
        }
    };
    turn.outcome(result)
}

/// What a turn gathers across its model calls.
struct TurnState {
    context: ContextManager,
    /// Compactions and drops made so far, in order.
    context_ops: Vec<ContextOp>,
    /// The window's budget, which a fallback to another provider changes.
    budget: ContextBudget,
    switched: Option<Switched>,
    new_messages: Vec<Arc<Message>>,
    /// The tokens of the turn's model calls so far.
    usage: Option<Usage>,
    requests: u32,
    guard: LoopGuard,
}

/// Whether a round leaves the turn going on to the next model call, or ended.
type RoundEnd = ControlFlow<Result<StopReason, ProviderError>>;

/// A model call's answer, ready for its tools to run.
struct Called {
    call: CallResult,
    /// The calls in the answer, settled against the tools offered.
    calls: Vec<SettledCall>,
    /// How many chars the round's tool results may take.
    results_room: usize,
}

impl TurnState {
    fn start(input: &mut TurnInput) -> Self {
        Self {
            context: std::mem::take(&mut input.context),
            context_ops: Vec::new(),
            budget: input.budget(),
            switched: None,
            new_messages: Vec::new(),
            usage: None,
            requests: 0,
            guard: LoopGuard::new(input.session.limits.loop_guard),
        }
    }

    /// One model call and the tools it asked for.
    async fn round(
        &mut self,
        input: &mut TurnInput,
        emit: &(dyn Fn(AgentEvent) + Send + Sync),
    ) -> RoundEnd {
        let Called {
            call,
            calls,
            results_room,
        } = match self.call(input, emit).await {
            Ok(called) => called,
            Err(err) => return ControlFlow::Break(Err(err)),
        };
        let finished = match call.result {
            Ok(CallEnd::Finished(reason)) => reason,
            Ok(CallEnd::Cancelled) => {
                // Calls the model asked for but never got a result would make
                // the next request invalid: drop them from what is kept.
                self.keep_without_calls(call.message, input);
                return ControlFlow::Break(Ok(StopReason::Cancelled));
            }
            Err(err) => return self.failed(input, call.message, err, emit).await,
        };
        let answer = (!call.message.parts.is_empty()).then(|| Arc::new(call.message));
        if let Some(message) = &answer {
            self.context.push(Arc::clone(message));
            self.new_messages.push(Arc::clone(message));
        }
        if calls.is_empty() {
            if let Some(message) = answer {
                journal(input, Journal::Round(vec![message]));
            }
            let stop = stop_reason(finished, input, &self.usage, emit);
            return ControlFlow::Break(Ok(stop));
        }
        let results = run_tools(input, calls, &mut self.guard, emit).await;
        self.keep_round(input, answer, results, results_room);
        if input.cancel.is_cancelled() {
            return ControlFlow::Break(Ok(StopReason::Cancelled));
        }
        if let Some(why) = self.guard.stopped() {
            emit(AgentEvent::AgentText(why.to_string()));
            return ControlFlow::Break(Ok(StopReason::EndTurn));
        }
        ControlFlow::Continue(())
    }

    /// The next model call, on a context made to fit it (the error: it
    /// cannot fit, and nothing was sent).
    async fn call(
        &mut self,
        input: &TurnInput,
        emit: &(dyn Fn(AgentEvent) + Send + Sync),
    ) -> Result<Called, ProviderError> {
        let tools = input.tools.definitions();
        let fixed_chars = context::budget::fixed_chars(input.system.as_deref(), &tools);
        // Before every call, also between tool rounds: the request must fit.
        let (context, ops) = (&mut self.context, &mut self.context_ops);
        fit(context, ops, input, fixed_chars, &self.budget, emit).await?;
        let request_chars = fixed_chars + self.context.chars();
        let offered = tools.clone();
        let request = input.request(tools, self.context.messages());
        let mut call = call_model(
            &*input.session.model.provider,
            request,
            &offered,
            &input.cancel,
            input.limits(),
            input.session.model.cost.as_ref(),
            emit,
        )
        .await;
        if let Some(usage) = call.usage {
            count_usage(
                input,
                &mut self.usage,
                &mut self.context,
                request_chars,
                usage,
            );
        }
        let end = match call.result {
            Ok(CallEnd::Finished(FinishReason::Length)) => AnswerEnd::OutputLimit,
            _ => AnswerEnd::Stopped,
        };
        let calls = dialects::settle(&mut call.message.parts, &offered, end);
        Ok(Called {
            call,
            calls,
            results_room: self.budget.results_chars(fixed_chars),
        })
    }

    /// A failed call is sent again at once, with its tools as text or to
    /// the fallback provider, only while the user has seen none of its
    /// answer (a second one would repeat it); else the turn ends with it.
    async fn failed(
        &mut self,
        input: &mut TurnInput,
        answer: Message,
        err: ProviderError,
        emit: &(dyn Fn(AgentEvent) + Send + Sync),
    ) -> RoundEnd {
        if answer.parts.is_empty() {
            if switched_to_prompted(input, &err, emit) {
                self.requests -= 1;
                return ControlFlow::Continue(());
            }
            if let Some(next) = fallback::fall_back(input, &err, emit).await {
                self.budget = input.budget();
                self.switched = Some(next);
                self.requests -= 1;
                return ControlFlow::Continue(());
            }
        }
        self.keep_without_calls(answer, input);
        ControlFlow::Break(Err(err))
    }

    /// A round's tool results, fitted to `room` chars, kept in the context
    /// after the answer that asked for them, and stored with it: the calls
    /// and their results are stored together or not at all.
    fn keep_round(
        &mut self,
        input: &TurnInput,
        answer: Option<Arc<Message>>,
        mut results: Vec<Part>,
        room: usize,
    ) {
        context::budget::fit_results(&mut results, room);
        let results = Arc::new(Message {
            role: Role::User,
            parts: results,
        });
        self.context.push(Arc::clone(&results));
        self.new_messages.push(Arc::clone(&results));
        journal(
            input,
            Journal::Round(answer.into_iter().chain([results]).collect()),
        );
    }

    /// What the model said before the turn ended, without the calls that
    /// will get no result.
    fn keep_without_calls(&mut self, mut message: Message, input: &TurnInput) {
        message
            .parts
            .retain(|part| !matches!(part, Part::ToolCall { .. }));
        if !message.parts.is_empty() {
            let message = Arc::new(message);
            self.context.push(Arc::clone(&message));
            self.new_messages.push(Arc::clone(&message));
            journal(input, Journal::Round(vec![message]));
        }
    }

    fn outcome(self, result: Result<StopReason, ProviderError>) -> TurnOutcome {
        TurnOutcome {
            new_messages: self.new_messages,
            result,
            usage: self.usage,
            context: self.context,
            context_ops: self.context_ops,
            switched: self.switched,
        }
    }
}

/// Why the turn stops before its next model call, if it does.
fn stop_before_call(
    input: &TurnInput,
    requests: u32,
    usage: &Option<Usage>,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> Option<StopReason> {
    if input.cancel.is_cancelled() {
        return Some(StopReason::Cancelled);
    }
    if requests >= input.session.limits.max_turn_requests {
        return Some(StopReason::MaxTurnRequests);
    }
    over_budget(input, usage, emit).then_some(StopReason::MaxTokens)
}

/// Why a turn whose model answered without calls ends.
fn stop_reason(
    finished: FinishReason,
    input: &TurnInput,
    usage: &Option<Usage>,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> StopReason {
    match finished {
        FinishReason::Length => StopReason::MaxTokens,
        FinishReason::Refusal => StopReason::Refusal,
        // The answer is whole, but a limit was crossed on the way.
        _ if over_budget(input, usage, emit) => StopReason::MaxTokens,
        FinishReason::Stop | FinishReason::ToolCalls | FinishReason::Other(_) => {
            StopReason::EndTurn
        }
    }
}

/// A call's tokens: added to the turn's and the session's, and taught to
/// the estimator.
fn count_usage(
    input: &TurnInput,
    total: &mut Option<Usage>,
    context: &mut ContextManager,
    request_chars: u64,
    usage: Usage,
) {
    (input.session.limits.session_tokens).add(usage.prompt_tokens + usage.completion_tokens);
    *total.get_or_insert_with(Usage::default) += usage;
    tracing::debug!(
        estimated = context.estimator.tokens(request_chars),
        reported = usage.prompt_tokens,
        drift = context.estimator.drift,
        "prompt tokens: estimate vs provider"
    );
    context
        .estimator
        .observe(request_chars, usage.prompt_tokens);
}

/// Whether the server refused the tools of a model under `auto`, which now
/// runs prompted (the user told): the request is sent again at once.
fn switched_to_prompted(
    input: &TurnInput,
    err: &ProviderError,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> bool {
    let sent = match input.tools.is_empty() {
        true => tool_calling::ToolsSent::No,
        false => tool_calling::ToolsSent::Yes,
    };
    let config = input.session.model.provider.config();
    match tool_calling::switch_on_refusal(config, &input.session.model.name, err, sent) {
        Some(notice) => {
            emit(AgentEvent::Notice(notice));
            true
        }
        None => false,
    }
}

/// Whether a budget is reached; if so the user is told which.
fn over_budget(
    input: &TurnInput,
    usage: &Option<Usage>,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> bool {
    let Some(why) = input.session.limits.budgets.crossed(&spent(input, usage)) else {
        return false;
    };
    emit(AgentEvent::AgentText(format!(
        "\n\nStopped: {why} Raise it with `/budget`, or send another prompt to go on.\n"
    )));
    true
}

/// The turn's and the session's use so far, for the budgets.
fn spent(input: &TurnInput, usage: &Option<Usage>) -> crate::context::spend::Spent {
    crate::context::spend::Spent {
        turn_tokens: usage
            .as_ref()
            .map_or(0, |u| u.prompt_tokens + u.completion_tokens),
        session_tokens: input.session.limits.session_tokens.total(),
        session_cost: (input.session.model.cost.as_ref()).map(|meter| meter.so_far()),
    }
}

fn journal(input: &TurnInput, entry: Journal) {
    if let Some(journal) = &input.journal {
        journal(entry);
    }
}

/// One call the model asked for, prepared for the editor and the tool.
struct PreparedCall {
    provider_id: String,
    info: ToolCallInfo,
    arguments: Result<Value, ToolError>,
    tool: Option<Arc<dyn Tool>>,
}

/// A call as the editor is told of it and the tool will get it.
fn prepare(input: &TurnInput, call: SettledCall) -> PreparedCall {
    let SettledCall {
        id,
        name,
        arguments,
    } = call;
    let tool = input.tools.get(&name).cloned();
    let arguments = arguments.map_err(|err| ToolError::InvalidArguments(err.to_string()));
    let raw_input = arguments.as_ref().cloned().unwrap_or(Value::Null);
    let (title, kind, locations) = match &tool {
        Some(tool) => (
            tool.title(&raw_input),
            tool.kind(),
            tool.locations(&raw_input, &input.tool_context),
        ),
        None => (name.clone(), ToolKind::Other, Vec::new()),
    };
    PreparedCall {
        provider_id: id,
        info: ToolCallInfo {
            id: format!("call-{}", uuid::Uuid::new_v4().simple()),
            name,
            title,
            kind,
            raw_input,
            locations,
        },
        arguments,
        tool,
    }
}

/// Run the calls of one model answer: announce each, ask permission one at
/// a time, run the allowed ones concurrently, and return their results in
/// the order the model asked (every call gets one, so the conversation stays
/// valid for every provider).
async fn run_tools(
    input: &TurnInput,
    calls: Vec<SettledCall>,
    guard: &mut LoopGuard,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> Vec<Part> {
    let prepared: Vec<PreparedCall> = calls.into_iter().map(|c| prepare(input, c)).collect();
    for call in &prepared {
        emit(AgentEvent::ToolCall(call.info.clone()));
    }

    // Decide every call before running any, so the user answers in order.
    // A decision to run carries the tool and its arguments.
    let mut decisions = Vec::with_capacity(prepared.len());
    for call in &prepared {
        let runnable = call.arguments.as_ref().ok().filter(|_| call.tool.is_some());
        let guarded = guard.admit(
            &call.info,
            runnable,
            &*input.session.permissions,
            &input.cancel,
        );
        if let Some(refused) = guarded.await {
            decisions.push(Err(refused));
            continue;
        }
        let decision = match (&call.tool, &call.arguments) {
            (None, _) => Err(ToolError::UnknownTool {
                name: call.info.title.clone(),
                available: input.tools.names().map(str::to_string).collect(),
            }),
            // Already an `invalid arguments` error; its text is what the model reads.
            (Some(_), Err(err)) => Err(ToolError::Failed(err.to_string())),
            (Some(_), Ok(_)) if input.cancel.is_cancelled() => Err(ToolError::Cancelled),
            (Some(tool), Ok(arguments)) => {
                let asked = tokio::select! {
                    biased;
                    _ = input.cancel.cancelled() => Permission::Cancelled,
                    answer = input.session.permissions.check(&call.info, &**tool) => answer,
                };
                match asked {
                    Permission::Allow => Ok((tool, arguments)),
                    Permission::Reject(reason) => Err(ToolError::Failed(reason)),
                    Permission::Cancelled => {
                        input.cancel.cancel();
                        Err(ToolError::Cancelled)
                    }
                }
            }
        };
        decisions.push(decision);
    }

    // Values the session's environment policy withholds from commands are
    // secrets: they are not read back either.
    let redactor = &Redactor::new(
        input
            .tool_context
            .settings
            .environment
            .for_command()
            .withheld,
    );
    let runs = prepared
        .iter()
        .zip(decisions)
        .map(|(call, decision)| async move {
            let outcome = match decision {
                Ok((tool, arguments)) => run_allowed(input, call, tool, arguments, emit).await,
                Err(err) => Err(err),
            };
            finish_call(call, outcome, redactor, emit)
        });
    futures::future::join_all(runs).await
}

/// Run one allowed call, its progress reports told as they come, all
/// before its final update.
async fn run_allowed(
    input: &TurnInput,
    call: &PreparedCall,
    tool: &Arc<dyn Tool>,
    arguments: &Value,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> Result<crate::tools::ToolOutput, ToolError> {
    emit(AgentEvent::ToolCallUpdate(ToolCallProgress {
        id: call.info.id.clone(),
        name: call.info.name.clone(),
        status: ToolStatus::InProgress,
        content: Vec::new(),
        locations: Vec::new(),
        raw_output: None,
    }));
    let (progress, mut reports) = Progress::channel();
    let context = input
        .tool_context
        .for_call(&call.info.id, input.cancel.child_token(), progress);
    let in_progress = |content| {
        emit(AgentEvent::ToolCallUpdate(ToolCallProgress {
            id: call.info.id.clone(),
            name: call.info.name.clone(),
            status: ToolStatus::InProgress,
            content,
            locations: Vec::new(),
            raw_output: None,
        }));
    };
    let run = tool.call(arguments.clone(), &context);
    tokio::pin!(run);
    let mut keep_alive = keep_alive::KeepAlive::new(keep_alive::EVERY);
    // Reports go out as they come, all before the final update.
    let outcome = loop {
        tokio::select! {
            biased;
            outcome = &mut run => break outcome,
            Some(content) = reports.recv() => {
                keep_alive.shown(&content);
                in_progress(content);
            }
            () = keep_alive.due() => in_progress(keep_alive.update()),
        }
    };
    while let Ok(content) = reports.try_recv() {
        in_progress(content);
    }
    match outcome.as_ref().ok().and_then(|out| out.plan.clone()) {
        Some(crate::tools::PlanChange::Todos(todos)) => emit(AgentEvent::Plan(todos)),
        Some(crate::tools::PlanChange::Document(plan)) => emit(AgentEvent::PlanDocument(plan)),
        None => {}
    }
    // Arguments that do not fit the tool: the model gets its schema.
    outcome.map_err(|err| match err {
        ToolError::InvalidArguments(why) => {
            ToolError::InvalidArguments(dialects::repair::unusable(&why, &tool.definition()))
        }
        other => other,
    })
}

fn finish_call(
    call: &PreparedCall,
    outcome: Result<crate::tools::ToolOutput, ToolError>,
    redactor: &Redactor,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> Part {
    let (progress, content, is_error) = match outcome.map(|output| redactor.output(output)) {
        Ok(output) => (
            ToolCallProgress {
                id: call.info.id.clone(),
                name: call.info.name.clone(),
                status: ToolStatus::Completed,
                content: output.content,
                locations: output.locations,
                raw_output: (!output.raw_output.is_null()).then_some(output.raw_output),
            },
            output.for_model,
            false,
        ),
        Err(err) => {
            let message = redactor.text(&err.to_string());
            if let ToolError::ServerDown { server, .. } = &err {
                emit(AgentEvent::Notice(crate::events::Notice {
                    severity: crate::events::Severity::Warning,
                    title: format!("MCP server `{server}` stopped"),
                    detail: Some(message.clone()),
                    thought: format!("{message}\n"),
                }));
            }
            (
                ToolCallProgress {
                    id: call.info.id.clone(),
                    name: call.info.name.clone(),
                    status: ToolStatus::Failed,
                    content: vec![ToolContent::Text(message.clone())],
                    locations: Vec::new(),
                    raw_output: Some(serde_json::json!({ "error": message })),
                },
                format!("Error: {message}"),
                true,
            )
        }
    };
    emit(AgentEvent::ToolCallUpdate(progress));
    Part::ToolResult {
        call_id: call.provider_id.clone(),
        content,
        is_error,
    }
}

#[cfg(test)]
mod tests;
