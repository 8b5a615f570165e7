//! One prompt turn: prompt → LLM (streaming) → tools → LLM … until the
//! model answers without asking for tools, the turn is cancelled, the
//! provider fails or `max_turn_requests` is reached. Emits [`AgentEvent`]s in
//! the order they happen; knows nothing of ACP.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::context::compact::{self, CompactError};
use crate::context::{self, ContextBudget, ContextManager, ContextOp, ContextSettings};
use crate::events::{
    AgentEvent, Compaction, CompactionOutcome, StopReason, ToolCallInfo, ToolCallProgress,
    ToolContent, ToolKind, ToolStatus,
};
use crate::model::{Message, Part, Role};
use crate::permissions::{Permission, PermissionGate};
use crate::providers::{
    ChatRequest, FinishReason, Provider, ProviderError, ProviderEvent, ToolChoice, ToolDefinition,
    Usage, retry,
};
use crate::tools::redact::Redactor;
use crate::tools::{Progress, Tool, ToolContext, ToolError, ToolRegistry, parse_arguments};

pub mod fallback;
mod keep_alive;
pub use fallback::{Fallback, Switched};

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
    let result = loop {
        if input.cancel.is_cancelled() {
            break Ok(StopReason::Cancelled);
        }
        if requests >= input.max_turn_requests {
            break Ok(StopReason::MaxTurnRequests);
        }
        if over_budget(&input, &usage_total, emit) {
            break Ok(StopReason::MaxTokens);
        }
        requests += 1;
        let tools = input.tools.definitions();
        let fixed_chars = context::budget::fixed_chars(input.system.as_deref(), &tools);
        // Before every call, also between tool rounds: the request must fit.
        if let Err(err) = fit(
            &mut context,
            &mut context_ops,
            &input,
            fixed_chars,
            &budget,
            emit,
        )
        .await
        {
            break Err(err);
        }
        let request_chars = fixed_chars + context.chars();
        let request = input.request(tools, context.messages());
        let call = call_model(
            &*input.provider,
            request,
            &input.cancel,
            Limits {
                context_window: input.context_window,
                first_token_notice: input.first_token_notice,
                outbound: input.outbound.as_deref(),
            },
            input.cost.as_ref(),
            emit,
        )
        .await;
        if let Some(usage) = call.usage {
            (input.session_tokens).add(usage.prompt_tokens + usage.completion_tokens);
            *usage_total.get_or_insert_with(Usage::default) += usage;
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
        let calls: Vec<(String, String, String)> = call
            .message
            .parts
            .iter()
            .filter_map(|part| match part {
                Part::ToolCall {
                    id,
                    name,
                    arguments,
                } => Some((id.clone(), name.clone(), arguments.clone())),
                _ => None,
            })
            .collect();
        let finished = match call.result {
            Ok(CallEnd::Finished(reason)) => reason,
            Ok(CallEnd::Cancelled) => {
                // Calls the model asked for but never got a result would make
                // the next request invalid: drop them from what is kept.
                push_without_calls(&mut new_messages, &mut context, call.message, &input);
                break Ok(StopReason::Cancelled);
            }
            Err(err) => {
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
            break Ok(match finished {
                FinishReason::Length => StopReason::MaxTokens,
                FinishReason::Refusal => StopReason::Refusal,
                // The answer is whole, but a limit was crossed on the way.
                _ if over_budget(&input, &usage_total, emit) => StopReason::MaxTokens,
                FinishReason::Stop | FinishReason::ToolCalls | FinishReason::Other(_) => {
                    StopReason::EndTurn
                }
            });
        }
        let mut results = run_tools(&input, calls, emit).await;
        context::budget::fit_results(&mut results, budget.results_chars(fixed_chars));
        let results = Arc::new(Message {
            role: Role::User,
            parts: results,
        });
        context.push(Arc::clone(&results));
        new_messages.push(Arc::clone(&results));
        // The calls and their results are stored together or not at all.
        journal(
            &input,
            Journal::Round(message.into_iter().chain([results]).collect()),
        );
        if input.cancel.is_cancelled() {
            break Ok(StopReason::Cancelled);
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

/// Make the next request fit: past the compaction threshold, summarize
/// older turns; past the budget even so, drop the oldest whole turns and
/// tell the user. A request that cannot fit is not sent.
async fn fit(
    context: &mut ContextManager,
    ops: &mut Vec<ContextOp>,
    input: &TurnInput,
    fixed_chars: u64,
    budget: &ContextBudget,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> Result<(), ProviderError> {
    let fixed = context.estimator.tokens(fixed_chars);
    let used = fixed + context.tokens();
    if used <= budget.compact_at() {
        return Ok(());
    }
    let keep = input.context_settings.keep_recent_turns;
    if let Some(entries) = compact::compactable(context, keep) {
        let id = compaction_id();
        emit(AgentEvent::Compaction(Compaction::Started {
            id: id.clone(),
            thought: Some(format!(
                "Context at ~{used} of {} tokens (compaction at {}): summarizing {entries} earlier entries…\n",
                budget.window,
                budget.compact_at()
            )),
        }));
        let on_text = |text: &str| {
            emit(AgentEvent::Compaction(Compaction::SummaryChunk {
                id: id.clone(),
                text: text.to_string(),
            }))
        };
        let wanted = compact::SummaryWanted {
            focus: None,
            on_text: &on_text,
        };
        let compacted = compact::compact(
            context,
            entries,
            &*input.provider,
            &input.model,
            wanted,
            budget,
            &input.cancel,
        )
        .await;
        let ended = |outcome, thought| {
            emit(AgentEvent::Compaction(Compaction::Ended {
                id: id.clone(),
                outcome,
                thought,
            }))
        };
        match compacted {
            Ok(compact::Compacted { op, report }) => {
                ended(CompactionOutcome::Completed, Some(format!("{report}\n")));
                journal(input, Journal::Op(op.clone()));
                ops.push(op);
            }
            // The call that follows sees the cancel and sends nothing.
            Err(CompactError::Cancelled) => {
                ended(CompactionOutcome::Cancelled, None);
                return Ok(());
            }
            Err(CompactError::Apply(err)) => {
                tracing::warn!(%err, "compaction could not be applied");
                ended(CompactionOutcome::Failed(err.to_string()), None);
            }
            Err(err) => ended(
                CompactionOutcome::Failed(err.to_string()),
                Some(format!("{err}\n")),
            ),
        }
    }
    let room = budget.limit().saturating_sub(fixed);
    let (drops, fits) = context.plan_drops(room);
    if !drops.is_empty() {
        let before = context.entries().len();
        for op in drops {
            if let Err(err) = context.apply(&op) {
                tracing::warn!(%err, "drop could not be applied");
                continue;
            }
            journal(input, Journal::Op(op.clone()));
            ops.push(op);
        }
        emit(AgentEvent::AgentText(format!(
            "\n[Context full: dropped the {} oldest entries to fit the {}-token window. `/context` shows what remains.]\n",
            before - context.entries().len(),
            budget.window
        )));
    }
    if fits {
        Ok(())
    } else {
        Err(ProviderError::ContextOverflow {
            needed: fixed + context.tokens(),
            limit: budget.limit(),
            window: budget.window,
        })
    }
}

/// One call the model asked for, prepared for the editor and the tool.
struct PreparedCall {
    provider_id: String,
    info: ToolCallInfo,
    arguments: Result<Value, ToolError>,
    tool: Option<Arc<dyn Tool>>,
}

/// Run the calls of one model answer: announce each, ask permission one at
/// a time, run the allowed ones concurrently, and return their results in
/// the order the model asked (every call gets one, so the conversation stays
/// valid for every provider).
async fn run_tools(
    input: &TurnInput,
    calls: Vec<(String, String, String)>,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> Vec<Part> {
    let prepared: Vec<PreparedCall> = calls
        .into_iter()
        .map(|(provider_id, name, arguments)| {
            let tool = input.tools.get(&name).cloned();
            let arguments = parse_arguments(&arguments);
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
                provider_id,
                info: ToolCallInfo {
                    id: format!("call-{}", uuid::Uuid::new_v4().simple()),
                    name: name.clone(),
                    title,
                    kind,
                    raw_input,
                    locations,
                },
                arguments,
                tool,
            }
        })
        .collect();
    for call in &prepared {
        emit(AgentEvent::ToolCall(call.info.clone()));
    }

    // Decide every call before running any, so the user answers in order.
    // A decision to run carries the tool and its arguments.
    let mut decisions = Vec::with_capacity(prepared.len());
    for call in &prepared {
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
                Ok((tool, arguments)) => {
                    emit(AgentEvent::ToolCallUpdate(ToolCallProgress {
                        id: call.info.id.clone(),
                        name: call.info.name.clone(),
                        status: ToolStatus::InProgress,
                        content: Vec::new(),
                        locations: Vec::new(),
                        raw_output: None,
                    }));
                    let (progress, mut reports) = Progress::channel();
                    let context = input.tool_context.for_call(
                        &call.info.id,
                        input.cancel.child_token(),
                        progress,
                    );
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
                    if let Some(plan) = outcome.as_ref().ok().and_then(|out| out.plan.clone()) {
                        emit(AgentEvent::Plan(plan));
                    }
                    outcome
                }
                Err(err) => Err(err),
            };
            finish_call(call, outcome, redactor, emit)
        });
    futures::future::join_all(runs).await
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
    let mut builder = AssistantBuilder::default();
    let mut usage = None;
    let notify = |notice: retry::RetryNotice| {
        let thought = notice.message();
        emit(AgentEvent::Notice(crate::events::Notice {
            severity: crate::events::Severity::Warning,
            title: match notice.until {
                Some(_) => format!("Provider `{}` is rate limited; waiting", notice.provider),
                None => format!("Provider `{}` failed; retrying", notice.provider),
            },
            detail: Some(thought.trim().to_string()),
            thought,
        }))
    };
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
            Some(Ok(event)) => match event {
                ProviderEvent::TextDelta(text) => {
                    builder.text(&text);
                    emit(AgentEvent::AgentText(text));
                }
                ProviderEvent::ThinkingDelta(text) => {
                    builder.thinking(&text);
                    emit(AgentEvent::Thought(text));
                }
                ProviderEvent::ThinkingSignature(signature) => builder.sign(signature),
                ProviderEvent::RedactedThinking(data) => {
                    builder.parts.push(Part::RedactedThinking { data })
                }
                ProviderEvent::ToolCallStart { index, id, name } => {
                    builder.start_call(index, id, name)
                }
                ProviderEvent::ToolCallArgumentsDelta { index, delta } => {
                    builder.call_args(index, &delta)
                }
                ProviderEvent::ToolCallEnd { .. } => {}
                ProviderEvent::Usage(reported) => {
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
                ProviderEvent::Finish(reason) => finish = Some(reason),
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
    builder.finish(usage, result)
}

/// The wait for a model call's first token, and the notices sent during it.
struct FirstTokenWait {
    every: Option<Duration>,
    since: tokio::time::Instant,
    next: Option<tokio::time::Instant>,
}

impl FirstTokenWait {
    fn new(every: Option<Duration>) -> Self {
        let since = tokio::time::Instant::now();
        Self {
            every,
            since,
            next: every.map(|every| since + every),
        }
    }

    /// Ready when the next notice is due; never once the first token came.
    async fn next_notice(&self) {
        match self.next {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }

    /// The notice now due; the one after it is due a period later.
    fn notice(&mut self) -> AgentEvent {
        if let (Some(next), Some(every)) = (self.next.as_mut(), self.every) {
            *next += every;
        }
        let waited = self.since.elapsed().as_secs();
        AgentEvent::Thought(format!(
            "Still waiting for the model's first token ({waited} s so far; a local model can take minutes to read a long prompt).\n"
        ))
    }

    fn done(&mut self) {
        self.next = None;
    }
}

/// Collects what the model said, in the order it said it, so thinking
/// blocks keep their signatures and place (Anthropic checks both).
#[derive(Default)]
struct AssistantBuilder {
    parts: Vec<Part>,
    /// Tool calls by the provider's index: their position in `parts`.
    calls: Vec<(usize, usize)>,
}

impl AssistantBuilder {
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
mod tests {
    use super::*;
    use crate::config::DEFAULT_MAX_TURN_REQUESTS;
    use crate::permissions::AllowAll;
    use crate::providers::settings::ProviderSettings;
    use crate::providers::{EventStream, ModelInfo};
    use futures::future::BoxFuture;
    use std::sync::Mutex;

    /// A provider that replays scripted events, optionally never finishing.
    struct Scripted {
        events: Vec<Result<ProviderEvent, ProviderError>>,
        /// What calls after the first answer, if different.
        later: Option<Vec<Result<ProviderEvent, ProviderError>>>,
        hang_after: bool,
        seen: Mutex<Vec<ChatRequest>>,
        config: ProviderSettings,
    }

    impl Provider for Scripted {
        fn config(&self) -> &ProviderSettings {
            &self.config
        }
        fn stream_chat(
            &self,
            request: ChatRequest,
        ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
            let first = {
                let mut seen = self.seen.lock().unwrap();
                seen.push(request);
                seen.len() == 1
            };
            let script = match &self.later {
                Some(later) if !first => later,
                _ => &self.events,
            };
            let events: Vec<_> = script
                .iter()
                .map(|e| match e {
                    Ok(event) => Ok(event.clone()),
                    Err(err) => Err(ProviderError::Remote {
                        provider: "scripted".into(),
                        detail: err.to_string(),
                        transient: false,
                    }),
                })
                .collect();
            let hang = self.hang_after;
            Box::pin(async move {
                let head = futures::stream::iter(events);
                let stream: EventStream = if hang {
                    head.chain(futures::stream::pending()).boxed()
                } else {
                    head.boxed()
                };
                Ok(stream)
            })
        }
        fn list_models(&self) -> BoxFuture<'_, Result<Vec<ModelInfo>, ProviderError>> {
            Box::pin(async { Ok(Vec::new()) })
        }
    }

    fn input(provider: Arc<Scripted>, cancel: CancellationToken) -> TurnInput {
        TurnInput {
            provider,
            model: "m".into(),
            outbound: None,
            cache_key: None,
            reasoning: None,
            cost: None,
            system: Some("sys".into()),
            context: ContextManager::from_messages([Arc::new(Message::user_text("hi"))]),
            context_window: 100_000,
            context_settings: ContextSettings::default(),
            cancel,
            tools: ToolRegistry::builtin(),
            tool_context: ToolContext::local(std::env::temp_dir()),
            permissions: Arc::new(AllowAll),
            max_turn_requests: DEFAULT_MAX_TURN_REQUESTS,
            journal: None,
            first_token_notice: None,
            fallback: None,
            budgets: Default::default(),
            session_tokens: Default::default(),
        }
    }

    /// The thoughts a turn on `provider` sends until `wanted` of them came
    /// (or 10 s passed), with notices every 30 ms; then it is cancelled.
    async fn notices(provider: Arc<Scripted>, wanted: usize, wait: Duration) -> Vec<String> {
        let cancel = CancellationToken::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let turn = {
            let (cancel, seen) = (cancel.clone(), Arc::clone(&seen));
            let mut input = input(provider, cancel);
            input.first_token_notice = Some(Duration::from_millis(30));
            tokio::spawn(async move {
                run_turn(input, &move |event| {
                    if let AgentEvent::Thought(text) = event {
                        seen.lock().unwrap().push(text);
                    }
                })
                .await
            })
        };
        let deadline = tokio::time::Instant::now() + wait;
        while seen.lock().unwrap().len() < wanted && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        cancel.cancel();
        let outcome = turn.await.unwrap();
        assert_eq!(outcome.result.unwrap(), StopReason::Cancelled);
        seen.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn a_silent_model_gets_notices_until_its_first_token() {
        let silent = scripted(Vec::new(), true);
        let told = notices(silent, 2, Duration::from_secs(10)).await;
        assert!(told.len() >= 2, "{told:?}");
        assert!(
            told[0].contains("waiting for the model's first token"),
            "{told:?}"
        );
        // Once the model speaks, the notices stop.
        let speaking = scripted(vec![Ok(ProviderEvent::TextDelta("hi".into()))], true);
        let told = notices(speaking, 1, Duration::from_millis(200)).await;
        assert!(told.is_empty(), "{told:?}");
    }

    fn scripted(
        events: Vec<Result<ProviderEvent, ProviderError>>,
        hang_after: bool,
    ) -> Arc<Scripted> {
        Arc::new(Scripted {
            events,
            later: None,
            hang_after,
            seen: Mutex::default(),
            config: ProviderSettings::local_ollama(),
        })
    }

    #[tokio::test]
    async fn text_streams_in_order_and_is_kept() {
        let provider = scripted(
            vec![
                Ok(ProviderEvent::ThinkingDelta("think".into())),
                Ok(ProviderEvent::TextDelta("Hel".into())),
                Ok(ProviderEvent::TextDelta("lo".into())),
                Ok(ProviderEvent::Finish(FinishReason::Stop)),
                Ok(ProviderEvent::Usage(Usage {
                    prompt_tokens: 10,
                    completion_tokens: 2,
                    cached_prompt_tokens: 0,
                    cache_written_prompt_tokens: 0,
                })),
            ],
            false,
        );
        let events = Mutex::new(Vec::new());
        let outcome = run_turn(input(provider.clone(), CancellationToken::new()), &|e| {
            events.lock().unwrap().push(e)
        })
        .await;
        assert_eq!(outcome.result.unwrap(), StopReason::EndTurn);
        assert_eq!(
            events.into_inner().unwrap(),
            vec![
                AgentEvent::Thought("think".into()),
                AgentEvent::AgentText("Hel".into()),
                AgentEvent::AgentText("lo".into()),
                AgentEvent::Usage {
                    used: 12,
                    size: 100_000,
                    cost: None,
                },
            ]
        );
        assert_eq!(outcome.new_messages.len(), 1);
        assert_eq!(outcome.new_messages[0].text(), "Hello");
        let seen = provider.seen.lock().unwrap();
        assert_eq!(seen[0].system.as_deref(), Some("sys"));
        assert_eq!(seen[0].messages.len(), 1);
    }

    #[tokio::test]
    async fn length_is_max_tokens() {
        let provider = scripted(
            vec![
                Ok(ProviderEvent::TextDelta("a".into())),
                Ok(ProviderEvent::Finish(FinishReason::Length)),
            ],
            false,
        );
        let outcome = run_turn(input(provider, CancellationToken::new()), &|_| {}).await;
        assert_eq!(outcome.result.unwrap(), StopReason::MaxTokens);
    }

    #[tokio::test]
    async fn cancel_ends_a_hanging_stream_and_keeps_partial_text() {
        let provider = scripted(vec![Ok(ProviderEvent::TextDelta("partial".into()))], true);
        let cancel = CancellationToken::new();
        let turn = {
            let cancel = cancel.clone();
            tokio::spawn(async move { run_turn(input(provider, cancel), &|_| {}).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        cancel.cancel();
        let outcome = turn.await.unwrap();
        assert_eq!(outcome.result.unwrap(), StopReason::Cancelled);
        assert_eq!(outcome.new_messages[0].text(), "partial");
    }

    #[tokio::test]
    async fn provider_errors_end_the_turn_with_the_error() {
        let provider = scripted(
            vec![
                Ok(ProviderEvent::TextDelta("a".into())),
                Err(ProviderError::Remote {
                    provider: "p".into(),
                    detail: "overloaded".into(),
                    transient: false,
                }),
            ],
            false,
        );
        let outcome = run_turn(input(provider, CancellationToken::new()), &|_| {}).await;
        assert!(
            outcome
                .result
                .unwrap_err()
                .to_string()
                .contains("overloaded")
        );
        assert_eq!(outcome.new_messages[0].text(), "a");
    }

    fn tool_call(
        id: &str,
        name: &str,
        arguments: &str,
    ) -> Vec<Result<ProviderEvent, ProviderError>> {
        vec![
            Ok(ProviderEvent::ToolCallStart {
                index: 0,
                id: id.into(),
                name: name.into(),
            }),
            Ok(ProviderEvent::ToolCallArgumentsDelta {
                index: 0,
                delta: arguments.into(),
            }),
            Ok(ProviderEvent::ToolCallEnd { index: 0 }),
            Ok(ProviderEvent::Finish(FinishReason::ToolCalls)),
        ]
    }

    fn with_later(
        first: Vec<Result<ProviderEvent, ProviderError>>,
        later: Vec<Result<ProviderEvent, ProviderError>>,
    ) -> Arc<Scripted> {
        let mut provider = Arc::into_inner(scripted(first, false)).unwrap();
        provider.later = Some(later);
        Arc::new(provider)
    }

    #[tokio::test]
    async fn tool_calls_run_and_their_results_reach_the_next_request() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
        let provider = with_later(
            tool_call("call_1", "read_file", r#"{"path":"notes.txt"}"#),
            vec![
                Ok(ProviderEvent::TextDelta("It says alpha.".into())),
                Ok(ProviderEvent::Finish(FinishReason::Stop)),
            ],
        );
        let events = Mutex::new(Vec::new());
        let mut turn = input(provider.clone(), CancellationToken::new());
        turn.tool_context = ToolContext::local(dir.path().to_path_buf());
        let outcome = run_turn(turn, &|e| events.lock().unwrap().push(e)).await;
        assert_eq!(outcome.result.unwrap(), StopReason::EndTurn);
        let events = events.into_inner().unwrap();
        let AgentEvent::ToolCall(call) = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(call.title, "Read notes.txt");
        assert_eq!(call.kind, ToolKind::Read);
        assert_eq!(call.locations[0].path, dir.path().join("notes.txt"));
        let statuses: Vec<ToolStatus> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolCallUpdate(p) if p.id == call.id => Some(p.status),
                _ => None,
            })
            .collect();
        assert_eq!(statuses, [ToolStatus::InProgress, ToolStatus::Completed]);
        let seen = provider.seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert!(seen[0].tools.iter().any(|t| t.name == "read_file"));
        let last = seen[1].messages.last().unwrap();
        assert_eq!(last.role, Role::User);
        let Part::ToolResult {
            call_id,
            content,
            is_error,
        } = &last.parts[0]
        else {
            panic!("{last:?}")
        };
        assert_eq!(call_id, "call_1");
        assert!(content.contains("alpha"), "{content}");
        assert!(!is_error);
        // Assistant call, tool result, final answer.
        assert_eq!(outcome.new_messages.len(), 3);
    }

    #[tokio::test]
    async fn tool_errors_go_back_to_the_model_and_the_turn_goes_on() {
        let provider = with_later(
            tool_call("c", "read_file", r#"{"path":"../../etc/passwd"}"#),
            vec![
                Ok(ProviderEvent::TextDelta("I cannot read that.".into())),
                Ok(ProviderEvent::Finish(FinishReason::Stop)),
            ],
        );
        let outcome = run_turn(input(provider.clone(), CancellationToken::new()), &|_| {}).await;
        assert_eq!(outcome.result.unwrap(), StopReason::EndTurn);
        let seen = provider.seen.lock().unwrap();
        let result = &seen[1].messages.last().unwrap().parts[0];
        assert!(
            matches!(result, Part::ToolResult { is_error: true, content, .. } if content.contains("outside the workspace")),
            "{result:?}"
        );
    }

    #[tokio::test]
    async fn arguments_that_do_not_parse_are_one_clear_error_for_the_model() {
        let provider = with_later(
            tool_call("c", "read_file", r#"{"path": "#),
            vec![Ok(ProviderEvent::Finish(FinishReason::Stop))],
        );
        let outcome = run_turn(input(provider.clone(), CancellationToken::new()), &|_| {}).await;
        assert_eq!(outcome.result.unwrap(), StopReason::EndTurn);
        let seen = provider.seen.lock().unwrap();
        let Part::ToolResult {
            content, is_error, ..
        } = &seen[1].messages.last().unwrap().parts[0]
        else {
            panic!("{:?}", seen[1].messages)
        };
        assert!(is_error);
        assert!(content.starts_with("Error: invalid arguments"), "{content}");
        assert_eq!(content.matches("invalid arguments").count(), 1, "{content}");
    }

    #[tokio::test]
    async fn a_model_that_keeps_calling_tools_stops_at_max_turn_requests() {
        let provider = with_later(
            tool_call("c", "list_dir", "{}"),
            tool_call("c", "list_dir", "{}"),
        );
        let mut turn = input(provider.clone(), CancellationToken::new());
        turn.max_turn_requests = 3;
        let outcome = run_turn(turn, &|_| {}).await;
        assert_eq!(outcome.result.unwrap(), StopReason::MaxTurnRequests);
        assert_eq!(provider.seen.lock().unwrap().len(), 3);
        // Every call kept in history has its result.
        let calls = outcome
            .new_messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter(|p| matches!(p, Part::ToolCall { .. }))
            .count();
        let results = outcome
            .new_messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter(|p| matches!(p, Part::ToolResult { .. }))
            .count();
        assert_eq!((calls, results), (3, 3));
    }

    struct Refuse;

    impl PermissionGate for Refuse {
        fn check<'a>(&'a self, _: &'a ToolCallInfo, _: &'a dyn Tool) -> BoxFuture<'a, Permission> {
            Box::pin(async { Permission::Reject("the user said no".into()) })
        }
    }

    #[tokio::test]
    async fn a_refused_call_does_not_run_and_the_model_hears_why() {
        let dir = tempfile::tempdir().unwrap();
        let provider = with_later(
            tool_call("w", "write_file", r#"{"path":"x.txt","content":"hi"}"#),
            vec![
                Ok(ProviderEvent::TextDelta("OK, I will not.".into())),
                Ok(ProviderEvent::Finish(FinishReason::Stop)),
            ],
        );
        let mut turn = input(provider.clone(), CancellationToken::new());
        turn.tool_context = ToolContext::local(dir.path().to_path_buf());
        turn.permissions = Arc::new(Refuse);
        let outcome = run_turn(turn, &|_| {}).await;
        assert_eq!(outcome.result.unwrap(), StopReason::EndTurn);
        assert!(!dir.path().join("x.txt").exists());
        let seen = provider.seen.lock().unwrap();
        let result = &seen[1].messages.last().unwrap().parts[0];
        assert!(
            matches!(result, Part::ToolResult { is_error: true, content, .. } if content.contains("the user said no")),
            "{result:?}"
        );
    }

    fn long_history(turns: usize, chars: usize) -> ContextManager {
        let mut context = ContextManager::new();
        for n in 0..turns {
            context.push(Arc::new(Message::user_text(format!(
                "question {n} {}",
                "q".repeat(chars)
            ))));
            context.push(Arc::new(Message::assistant_text(format!(
                "answer {n} {}",
                "a".repeat(chars)
            ))));
        }
        context.push(Arc::new(Message::user_text("the latest question")));
        context
    }

    fn estimate(request: &ChatRequest) -> u64 {
        let chars = context::budget::fixed_chars(request.system.as_deref(), &request.tools)
            + request
                .messages
                .iter()
                .map(|m| context::budget::message_chars(m))
                .sum::<u64>();
        chars.div_ceil(4)
    }

    #[tokio::test]
    async fn past_the_threshold_older_turns_are_summarized_before_the_call() {
        let provider = with_later(
            vec![
                Ok(ProviderEvent::TextDelta("They asked six questions.".into())),
                Ok(ProviderEvent::Finish(FinishReason::Stop)),
            ],
            vec![
                Ok(ProviderEvent::TextDelta("answer".into())),
                Ok(ProviderEvent::Finish(FinishReason::Stop)),
            ],
        );
        let mut turn = input(provider.clone(), CancellationToken::new());
        turn.tools = ToolRegistry::new();
        turn.context = long_history(6, 2500);
        turn.context_window = 8192;
        let events = Mutex::new(Vec::new());
        let outcome = run_turn(turn, &|e| events.lock().unwrap().push(e)).await;
        assert_eq!(outcome.result.unwrap(), StopReason::EndTurn);
        let seen = provider.seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(
            seen[0].system.as_deref(),
            Some(context::compact::COMPACT_PROMPT.trim())
        );
        let sent = &seen[1];
        assert!(
            sent.messages[0]
                .text()
                .contains("They asked six questions.")
        );
        assert_eq!(sent.messages.last().unwrap().text(), "the latest question");
        // The request that went out is under the threshold (80 % of 8192).
        assert!(estimate(sent) <= 6553, "{}", estimate(sent));
        assert!(matches!(&outcome.context_ops[0], ContextOp::Compact { .. }));
        let thoughts: String = events
            .into_inner()
            .unwrap()
            .into_iter()
            .filter_map(|e| match e {
                // What a client without compaction updates is shown.
                AgentEvent::Compaction(Compaction::Started { thought, .. }) => thought,
                _ => None,
            })
            .collect();
        assert!(thoughts.contains("summarizing"), "{thoughts}");
    }

    /// Record what the turn journals.
    fn journaled(turn: &mut TurnInput) -> Arc<Mutex<Vec<Journal>>> {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&journal);
        turn.journal = Some(Arc::new(move |entry| sink.lock().unwrap().push(entry)));
        journal
    }

    /// What a store rebuilds from the journal is the context the turn ended with.
    fn assert_replays(start: ContextManager, journal: &Mutex<Vec<Journal>>, end: &ContextManager) {
        let mut replayed = start;
        for entry in journal.lock().unwrap().iter() {
            match entry {
                Journal::Round(messages) => {
                    for message in messages {
                        replayed.push(Arc::clone(message));
                    }
                }
                Journal::Op(op) => {
                    replayed.apply(op).unwrap();
                }
            }
        }
        assert_eq!(replayed.messages(), end.messages());
    }

    #[tokio::test]
    async fn a_failed_compaction_falls_back_to_dropping_and_never_overflows() {
        // Every call fails, so the summary fails; the turns must be dropped.
        let provider = with_later(
            vec![Err(ProviderError::Setup {
                provider: "p".into(),
                detail: "down".into(),
            })],
            vec![
                Ok(ProviderEvent::TextDelta("answer".into())),
                Ok(ProviderEvent::Finish(FinishReason::Stop)),
            ],
        );
        let mut turn = input(provider.clone(), CancellationToken::new());
        turn.tools = ToolRegistry::new();
        turn.context = long_history(6, 4000);
        turn.context_window = 8192;
        let start = turn.context.clone();
        let journal = journaled(&mut turn);
        let texts = Mutex::new(String::new());
        let outcome = run_turn(turn, &|e| match e {
            AgentEvent::AgentText(t)
            | AgentEvent::Compaction(Compaction::Ended {
                thought: Some(t), ..
            }) => texts.lock().unwrap().push_str(&t),
            _ => {}
        })
        .await;
        assert_eq!(outcome.result.unwrap(), StopReason::EndTurn);
        let texts = texts.into_inner().unwrap();
        assert!(texts.contains("the context is unchanged"), "{texts}");
        assert!(texts.contains("dropped the"), "{texts}");
        let seen = provider.seen.lock().unwrap();
        let sent = seen.last().unwrap();
        assert!(estimate(sent) <= 8192 - 2048, "{}", estimate(sent));
        assert_eq!(sent.messages.last().unwrap().text(), "the latest question");
        assert!(
            journal
                .lock()
                .unwrap()
                .iter()
                .any(|e| matches!(e, Journal::Op(ContextOp::Drop { .. })))
        );
        assert_replays(start, &journal, &outcome.context);
    }

    #[tokio::test]
    async fn a_request_that_cannot_fit_is_not_sent() {
        let provider = scripted(vec![], false);
        let mut turn = input(provider.clone(), CancellationToken::new());
        turn.context =
            ContextManager::from_messages([Arc::new(Message::user_text("x".repeat(100_000)))]);
        turn.context_window = 4096;
        let outcome = run_turn(turn, &|_| {}).await;
        assert!(matches!(
            outcome.result,
            Err(ProviderError::ContextOverflow { window: 4096, .. })
        ));
        assert!(provider.seen.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_tool_result_that_passes_the_threshold_compacts_before_the_next_call() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big.txt"), "line of text\n".repeat(700)).unwrap();
        let provider = with_later(
            tool_call("r", "read_file", r#"{"path":"big.txt"}"#),
            vec![
                Ok(ProviderEvent::TextDelta("SUMMARY".into())),
                Ok(ProviderEvent::Finish(FinishReason::Stop)),
            ],
        );
        let mut turn = input(provider.clone(), CancellationToken::new());
        turn.tools = ToolRegistry::builtin().filtered(|t| t.name() == "read_file");
        turn.tool_context = ToolContext::local(dir.path().to_path_buf());
        turn.context = long_history(4, 2000);
        turn.context_window = 8192;
        let start = turn.context.clone();
        let journal = journaled(&mut turn);
        let outcome = run_turn(turn, &|_| {}).await;
        assert_eq!(outcome.result.unwrap(), StopReason::EndTurn);
        // The tool round, the compaction, the answer: as they happened.
        let kinds: Vec<&str> = journal
            .lock()
            .unwrap()
            .iter()
            .map(|e| match e {
                Journal::Round(messages) if messages.len() == 2 => "tool round",
                Journal::Round(_) => "answer",
                Journal::Op(ContextOp::Compact { .. }) => "compact",
                Journal::Op(_) => "other op",
            })
            .collect();
        assert_eq!(kinds, ["tool round", "compact", "answer"]);
        assert_replays(start, &journal, &outcome.context);
        let seen = provider.seen.lock().unwrap();
        // tool call, then (inside the tool loop) the summary, then the answer
        assert_eq!(seen.len(), 3);
        assert_eq!(
            seen[1].system.as_deref(),
            Some(context::compact::COMPACT_PROMPT.trim())
        );
        let last = &seen[2];
        assert!(last.messages[0].text().contains("SUMMARY"));
        assert!(estimate(last) <= 6554, "{}", estimate(last));
        // The call and its result made it through together.
        let parts: Vec<&Part> = last.messages.iter().flat_map(|m| m.parts.iter()).collect();
        assert!(parts.iter().any(|p| matches!(p, Part::ToolCall { .. })));
        assert!(parts.iter().any(|p| matches!(p, Part::ToolResult { .. })));
    }
}
