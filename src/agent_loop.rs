//! One prompt turn: prompt → LLM (streaming) → tools → LLM … until the
//! model answers without asking for tools, the turn is cancelled, the
//! provider fails or `max_turn_requests` is reached. Emits [`AgentEvent`]s in
//! the order they happen; knows nothing of ACP.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::context::{self, ContextManager, ContextOp, ContextSettings};
use crate::events::{
    AgentEvent, StopReason, ToolCallInfo, ToolCallProgress, ToolContent, ToolKind, ToolStatus,
};
use crate::model::{Message, Part, Role};
use crate::permissions::{Permission, PermissionGate};
use crate::providers::dialects::{self, AnswerEnd, SettledCall, TextCallDecoder, TextCalls};
use crate::providers::{
    ChatRequest, FinishReason, Provider, ProviderError, ProviderEvent, ToolChoice, ToolDefinition,
    Usage, retry, tool_calling,
};
use crate::tools::redact::Redactor;
use crate::tools::{Progress, Tool, ToolContext, ToolError, ToolRegistry};

pub mod fallback;
mod first_token;
mod fit;
mod keep_alive;
pub mod loop_guard;
pub use fallback::{Fallback, Switched};
use first_token::FirstTokenWait;
use fit::fit;
use loop_guard::{LoopGuard, LoopGuardSettings};

/// What a turn reports for the session store the moment it happens, so a
/// crash loses only the round in flight.
#[derive(Debug, Clone, PartialEq)]
pub enum Journal {
    /// A finished model round: its answer, and its tool results if it made calls.
    Round(Vec<Arc<Message>>),
    /// A compaction or drop, applied to the context before the next call.
    Op(ContextOp),
}

pub type JournalFn = Arc<dyn Fn(Journal) + Send + Sync>;

pub struct TurnInput {
    pub provider: Arc<dyn Provider>,
    pub model: String,
    /// The session's reasoning effort, where the model reasons.
    pub reasoning: Option<crate::providers::Reasoning>,
    /// Prices the model's calls, where the config has its price.
    pub cost: Option<crate::providers::pricing::CostMeter>,
    pub system: Option<String>,
    /// The conversation so far, ending with the user's new message.
    pub context: ContextManager,
    pub context_window: u64,
    /// Answer reserve and compaction threshold.
    pub context_settings: ContextSettings,
    pub cancel: CancellationToken,
    /// The tools offered to the model (already filtered by the mode).
    pub tools: ToolRegistry,
    pub tool_context: ToolContext,
    pub permissions: Arc<dyn PermissionGate>,
    /// Model calls allowed in one turn before it stops with `max_turn_requests`.
    pub max_turn_requests: u32,
    /// How many identical calls in a row stop the turn.
    pub loop_guard: LoopGuardSettings,
    /// Told of every round and context operation as it happens.
    pub journal: Option<JournalFn>,
    /// After this long without a first token from the model, and again at
    /// each multiple, the client is told the turn is still alive (a local
    /// model can read a long prompt for minutes; clients give up on silence).
    pub first_token_notice: Option<Duration>,
    /// Where the turn goes on when its provider keeps failing.
    pub fallback: Option<Fallback>,
    /// Token and cost limits: past one, the turn stops with `max_tokens`.
    pub budgets: crate::context::spend::Budgets,
    /// The session's tokens so far, which this turn's calls add to.
    pub session_tokens: crate::context::spend::TokenTally,
    /// Sent with every request as the provider's prompt-cache key.
    pub cache_key: Option<String>,
    /// Where the turn's updates go: the model's stream is read only as fast
    /// as it takes them ([`ClientSink::room`]).
    pub outbound: Option<Arc<dyn crate::client::ClientSink>>,
}

impl TurnInput {
    /// What bounds each of the turn's model calls besides its request.
    fn limits(&self) -> Limits<'_> {
        Limits {
            context_window: self.context_window,
            first_token_notice: self.first_token_notice,
            outbound: self.outbound.as_deref(),
        }
    }

    /// A model call of this turn: the model, system prompt, tools and cache
    /// key every call shares (the prefix a provider's cache keeps), then
    /// `messages`. The warm-up sends the same, so the two cannot drift.
    pub fn request(&self, tools: Vec<ToolDefinition>, messages: Vec<Arc<Message>>) -> ChatRequest {
        ChatRequest {
            model: self.model.clone(),
            system: self.system.clone(),
            messages,
            tools,
            tool_choice: ToolChoice::Auto,
            max_output_tokens: self.provider.config().max_output_tokens,
            context_window: Some(self.context_window),
            reasoning: self.reasoning,
            cache_key: self.cache_key.clone(),
        }
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
    let mut context = std::mem::take(&mut input.context);
    let mut context_ops = Vec::new();
    let mut budget = input.context_settings.budget(input.context_window);
    let mut switched = None;
    let mut new_messages: Vec<Arc<Message>> = Vec::new();
    let mut usage_total: Option<Usage> = None;
    let mut requests = 0;
    let mut guard = LoopGuard::new(input.loop_guard);
    let result = loop {
        if let Some(stop) = stop_before_call(&input, requests, &usage_total, emit) {
            break Ok(stop);
        }
        requests += 1;
        let tools = input.tools.definitions();
        let fixed_chars = context::budget::fixed_chars(input.system.as_deref(), &tools);
        // Before every call, also between tool rounds: the request must fit.
        let kept = (&mut context, &mut context_ops);
        if let Err(err) = fit(kept, &input, fixed_chars, &budget, emit).await {
            break Err(err);
        }
        let request_chars = fixed_chars + context.chars();
        let offered = tools.clone();
        let request = input.request(tools, context.messages());
        let mut call = call_model(
            &*input.provider,
            request,
            &offered,
            &input.cancel,
            input.limits(),
            input.cost.as_ref(),
            emit,
        )
        .await;
        if let Some(usage) = call.usage {
            count_usage(&input, &mut usage_total, &mut context, request_chars, usage);
        }
        let end = match call.result {
            Ok(CallEnd::Finished(FinishReason::Length)) => AnswerEnd::OutputLimit,
            _ => AnswerEnd::Stopped,
        };
        let calls = dialects::settle(&mut call.message.parts, &offered, end);
        let finished = match call.result {
            Ok(CallEnd::Finished(reason)) => reason,
            Ok(CallEnd::Cancelled) => {
                // Calls the model asked for but never got a result would make
                // the next request invalid: drop them from what is kept.
                push_without_calls(&mut new_messages, &mut context, call.message, &input);
                break Ok(StopReason::Cancelled);
            }
            Err(err) => {
                // The same request again at once, with its tools as text.
                if call.message.parts.is_empty() && switched_to_prompted(&input, &err, emit) {
                    requests -= 1;
                    continue;
                }
                // Only before the user saw any of the answer: a second one would repeat it.
                if call.message.parts.is_empty()
                    && let Some(next) = fallback::fall_back(&mut input, &err, emit).await
                {
                    budget = input.context_settings.budget(input.context_window);
                    switched = Some(next);
                    requests -= 1;
                    continue;
                }
                push_without_calls(&mut new_messages, &mut context, call.message, &input);
                break Err(err);
            }
        };
        let message = (!call.message.parts.is_empty()).then(|| Arc::new(call.message));
        if let Some(message) = &message {
            context.push(Arc::clone(message));
            new_messages.push(Arc::clone(message));
        }
        if calls.is_empty() {
            if let Some(message) = message {
                journal(&input, Journal::Round(vec![message]));
            }
            break Ok(stop_reason(finished, &input, &usage_total, emit));
        }
        let results = run_tools(&input, calls, &mut guard, emit).await;
        let room = budget.results_chars(fixed_chars);
        let kept = (&mut context, &mut new_messages);
        keep_round(&input, kept, message, results, room);
        if input.cancel.is_cancelled() {
            break Ok(StopReason::Cancelled);
        }
        if let Some(why) = guard.stopped() {
            emit(AgentEvent::AgentText(why.to_string()));
            break Ok(StopReason::EndTurn);
        }
    };
    TurnOutcome {
        new_messages,
        result,
        usage: usage_total,
        context,
        context_ops,
        switched,
    }
}

/// A round's tool results, fitted to `room` chars, kept in the context
/// after the answer that asked for them, and stored with it: the calls and
/// their results are stored together or not at all.
fn keep_round(
    input: &TurnInput,
    (context, new_messages): (&mut ContextManager, &mut Vec<Arc<Message>>),
    answer: Option<Arc<Message>>,
    mut results: Vec<Part>,
    room: usize,
) {
    context::budget::fit_results(&mut results, room);
    let results = Arc::new(Message {
        role: Role::User,
        parts: results,
    });
    context.push(Arc::clone(&results));
    new_messages.push(Arc::clone(&results));
    journal(
        input,
        Journal::Round(answer.into_iter().chain([results]).collect()),
    );
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
    if requests >= input.max_turn_requests {
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
    (input.session_tokens).add(usage.prompt_tokens + usage.completion_tokens);
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
    let config = input.provider.config();
    match tool_calling::switch_on_refusal(config, &input.model, err, sent) {
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
    let Some(why) = input.budgets.crossed(&spent(input, usage)) else {
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
        session_tokens: input.session_tokens.total(),
        session_cost: input.cost.as_ref().map(|meter| meter.so_far()),
    }
}

fn journal(input: &TurnInput, entry: Journal) {
    if let Some(journal) = &input.journal {
        journal(entry);
    }
}

fn push_without_calls(
    messages: &mut Vec<Arc<Message>>,
    context: &mut ContextManager,
    mut message: Message,
    input: &TurnInput,
) {
    message
        .parts
        .retain(|part| !matches!(part, Part::ToolCall { .. }));
    if !message.parts.is_empty() {
        let message = Arc::new(message);
        context.push(Arc::clone(&message));
        messages.push(Arc::clone(&message));
        journal(input, Journal::Round(vec![message]));
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
        let guarded = guard.admit(&call.info, runnable, &*input.permissions, &input.cancel);
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
                    answer = input.permissions.check(&call.info, &**tool) => answer,
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
        }))
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

enum CallEnd {
    Finished(FinishReason),
    Cancelled,
}

struct CallResult {
    message: Message,
    usage: Option<Usage>,
    result: Result<CallEnd, ProviderError>,
}

/// What bounds a model call besides its request.
struct Limits<'a> {
    context_window: u64,
    first_token_notice: Option<Duration>,
    /// Read the stream no faster than this client takes updates.
    outbound: Option<&'a dyn crate::client::ClientSink>,
}

/// One streamed LLM call. Text and thoughts are forwarded as they arrive and
/// collected into the assistant message.
async fn call_model(
    provider: &dyn Provider,
    request: ChatRequest,
    offered: &[ToolDefinition],
    cancel: &CancellationToken,
    limits: Limits<'_>,
    meter: Option<&crate::providers::pricing::CostMeter>,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> CallResult {
    let Limits {
        context_window,
        first_token_notice,
        outbound,
    } = limits;
    let mut builder = AssistantBuilder::reading_text_calls(offered);
    let mut usage = None;
    let notify = |notice: retry::RetryNotice| emit(retry_notice(notice));
    let mut waiting = FirstTokenWait::new(first_token_notice);
    let start = retry::start_stream(provider, &request, &notify);
    tokio::pin!(start);
    let started = loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break None,
            started = &mut start => break Some(started),
            () = waiting.next_notice() => emit(waiting.notice()),
        }
    };
    let mut stream = match started {
        None => return builder.finish(usage, Ok(CallEnd::Cancelled)),
        Some(Err(err)) => return builder.finish(usage, Err(err)),
        Some(Ok(stream)) => stream,
    };
    let mut finish = None;
    let result = loop {
        // Back-pressure: a client that is not reading holds the stream here.
        if let Some(client) = outbound {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break Ok(CallEnd::Cancelled),
                () = client.room() => {}
            }
        }
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => break Ok(CallEnd::Cancelled),
            next = stream.next() => next,
            () = waiting.next_notice() => {
                emit(waiting.notice());
                continue;
            }
        };
        if matches!(
            next,
            Some(Ok(ProviderEvent::TextDelta(_)
                | ProviderEvent::ThinkingDelta(_)
                | ProviderEvent::ToolCallStart { .. }))
        ) {
            waiting.done();
        }
        match next {
            Some(Ok(event)) => match builder.take(event, emit) {
                None => {}
                Some(ProviderEvent::Usage(reported)) => {
                    usage = Some(reported);
                    let cost = meter.map(|meter| {
                        let (amount, currency) = meter.charge(&reported);
                        crate::events::Cost { amount, currency }
                    });
                    emit(AgentEvent::Usage {
                        used: reported.prompt_tokens + reported.completion_tokens,
                        size: context_window,
                        cost,
                    });
                }
                Some(ProviderEvent::Finish(reason)) => finish = Some(reason),
                Some(_) => {}
            },
            Some(Err(err)) => break Err(err),
            None => {
                break Ok(CallEnd::Finished(
                    finish.take().unwrap_or(FinishReason::Stop),
                ));
            }
        }
    };
    // Dropping the stream here aborts the HTTP response at once on cancel.
    drop(stream);
    builder.end_text(&result, emit);
    builder.finish(usage, result)
}

/// What the user is told while a failed or rate-limited call waits to retry.
fn retry_notice(notice: retry::RetryNotice) -> AgentEvent {
    let thought = notice.message();
    AgentEvent::Notice(crate::events::Notice {
        severity: crate::events::Severity::Warning,
        title: match notice.until {
            Some(_) => format!("Provider `{}` is rate limited; waiting", notice.provider),
            None => format!("Provider `{}` failed; retrying", notice.provider),
        },
        detail: Some(thought.trim().to_string()),
        thought,
    })
}

/// Collects what the model said, in the order it said it, so thinking
/// blocks keep their signatures and place (Anthropic checks both).
#[derive(Default)]
struct AssistantBuilder {
    /// Reads calls the server passed through as text out of it.
    text_calls: Option<TextCallDecoder>,
    parts: Vec<Part>,
    /// Tool calls by the provider's index: their position in `parts`.
    calls: Vec<(usize, usize)>,
}

impl AssistantBuilder {
    /// A builder that reads calls to the `offered` tools out of the text.
    fn reading_text_calls(offered: &[ToolDefinition]) -> Self {
        Self {
            text_calls: (!offered.is_empty()).then(|| TextCallDecoder::new(offered)),
            ..Self::default()
        }
    }

    /// Adds what the model said; returns the events that are not part of
    /// the answer (usage, finish).
    fn take(
        &mut self,
        event: ProviderEvent,
        emit: &(dyn Fn(AgentEvent) + Send + Sync),
    ) -> Option<ProviderEvent> {
        match event {
            ProviderEvent::TextDelta(text) => match &mut self.text_calls {
                Some(decoder) => {
                    let shown = decoder.push(&text);
                    self.say(shown, emit);
                }
                None => self.say(text, emit),
            },
            ProviderEvent::ThinkingDelta(text) => {
                self.thinking(&text);
                emit(AgentEvent::Thought(text));
            }
            ProviderEvent::ThinkingSignature(signature) => self.sign(signature),
            ProviderEvent::RedactedThinking(data) => {
                self.parts.push(Part::RedactedThinking { data })
            }
            ProviderEvent::ToolCallStart { index, id, name } => self.start_call(index, id, name),
            ProviderEvent::ToolCallArgumentsDelta { index, delta } => self.call_args(index, &delta),
            ProviderEvent::ToolCallEnd { .. } => {}
            other => return Some(other),
        }
        None
    }

    /// The answer ended: the text held back is shown, or its calls join
    /// the answer (unless it has structured calls, or was cut short).
    fn end_text(
        &mut self,
        result: &Result<CallEnd, ProviderError>,
        emit: &(dyn Fn(AgentEvent) + Send + Sync),
    ) {
        let Some(decoder) = self.text_calls.take() else {
            return;
        };
        let end = match result {
            Ok(CallEnd::Finished(FinishReason::Length)) => AnswerEnd::OutputLimit,
            _ => AnswerEnd::Stopped,
        };
        let calls = match (self.calls.is_empty(), result) {
            (true, Ok(CallEnd::Finished(_))) => TextCalls::Run,
            _ => TextCalls::ShowAsText,
        };
        let (text, calls) = decoder.finish(end).into_parts(calls);
        self.say(text, emit);
        self.parts.extend(calls);
    }

    /// Text the user sees as it is added.
    fn say(&mut self, text: String, emit: &(dyn Fn(AgentEvent) + Send + Sync)) {
        if !text.is_empty() {
            self.text(&text);
            emit(AgentEvent::AgentText(text));
        }
    }

    fn text(&mut self, delta: &str) {
        match self.parts.last_mut() {
            Some(Part::Text { text }) => text.push_str(delta),
            _ => self.parts.push(Part::Text {
                text: delta.to_string(),
            }),
        }
    }

    fn thinking(&mut self, delta: &str) {
        match self.parts.last_mut() {
            Some(Part::Thinking {
                text,
                signature: None,
            }) => text.push_str(delta),
            _ => self.parts.push(Part::Thinking {
                text: delta.to_string(),
                signature: None,
            }),
        }
    }

    fn sign(&mut self, value: String) {
        let open = self.parts.iter_mut().rev().find_map(|part| match part {
            Part::Thinking {
                signature: signature @ None,
                ..
            } => Some(signature),
            _ => None,
        });
        match open {
            Some(signature) => *signature = Some(value),
            // A block with a signature but no visible text is still a block.
            None => self.parts.push(Part::Thinking {
                text: String::new(),
                signature: Some(value),
            }),
        }
    }

    fn start_call(&mut self, index: usize, id: String, name: String) {
        self.calls.push((index, self.parts.len()));
        self.parts.push(Part::ToolCall {
            id,
            name,
            arguments: String::new(),
        });
    }

    fn call_args(&mut self, index: usize, delta: &str) {
        let Some(&(_, position)) = self.calls.iter().rev().find(|(i, _)| *i == index) else {
            return;
        };
        if let Some(Part::ToolCall { arguments, .. }) = self.parts.get_mut(position) {
            arguments.push_str(delta);
        }
    }

    fn finish(self, usage: Option<Usage>, result: Result<CallEnd, ProviderError>) -> CallResult {
        CallResult {
            message: Message {
                role: Role::Assistant,
                parts: self.parts,
            },
            usage,
            result,
        }
    }
}

#[cfg(test)]
mod tests;
