//! The turn loop against scripted providers (no HTTP).

use super::*;
use crate::config::DEFAULT_MAX_TURN_REQUESTS;
use crate::events::Compaction;
use crate::permissions::AllowAll;
use crate::providers::testing::TestModel;
use crate::providers::{EventStream, ProviderEvent};
use futures::StreamExt;
use futures::future::BoxFuture;
use std::sync::Mutex;

fn input(provider: Arc<TestModel>, cancel: CancellationToken) -> TurnInput {
    TurnInput {
        session: FromSession {
            model: ModelSetup {
                provider,
                name: "m".into(),
                reasoning: None,
                cost: None,
                fallback: None,
                cache_key: None,
                first_token_notice: None,
                outbound: None,
            },
            limits: TurnLimits {
                context_settings: ContextSettings::default(),
                max_turn_requests: DEFAULT_MAX_TURN_REQUESTS,
                loop_guard: LoopGuardSettings::default(),
                budgets: Default::default(),
                session_tokens: Default::default(),
            },
            permissions: Arc::new(AllowAll),
        },
        system: Some("sys".into()),
        context: ContextManager::from_messages([Arc::new(Message::user_text("hi"))]),
        context_window: 100_000,
        cancel,
        tools: ToolRegistry::builtin(),
        tool_context: ToolContext::local(std::env::temp_dir()),
        journal: None,
        steering: None,
    }
}

/// The thoughts a turn on `provider` sends until `wanted` of them came
/// (or 10 s passed), with notices every 30 ms; then it is cancelled.
async fn notices(provider: Arc<TestModel>, wanted: usize, wait: Duration) -> Vec<String> {
    let cancel = CancellationToken::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let turn = {
        let (cancel, seen) = (cancel.clone(), Arc::clone(&seen));
        let mut input = input(provider, cancel);
        input.session.model.first_token_notice = Some(Duration::from_millis(30));
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

/// A model that replays scripted events (errors as a `scripted` provider's
/// remote error), optionally never finishing.
fn scripted(events: Vec<Result<ProviderEvent, ProviderError>>, hang_after: bool) -> Arc<TestModel> {
    replaying(events, None, hang_after)
}

/// As [`scripted`]; calls after the first answer with `later`, if given.
fn replaying(
    events: Vec<Result<ProviderEvent, ProviderError>>,
    later: Option<Vec<Result<ProviderEvent, ProviderError>>>,
    hang_after: bool,
) -> Arc<TestModel> {
    Arc::new(TestModel::new(move |number| {
        let script = match &later {
            Some(later) if number > 1 => later,
            _ => &events,
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
        Box::pin(async move {
            let head = futures::stream::iter(events);
            let stream: EventStream = if hang_after {
                head.chain(futures::stream::pending()).boxed()
            } else {
                head.boxed()
            };
            Ok(stream)
        })
    }))
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
        events.lock().unwrap().push(e);
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

fn tool_call(id: &str, name: &str, arguments: &str) -> Vec<Result<ProviderEvent, ProviderError>> {
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
) -> Arc<TestModel> {
    replaying(first, Some(later), false)
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
    turn.session.limits.max_turn_requests = 3;
    // The same call each time: the loop guard would stop it first.
    turn.session.limits.loop_guard = LoopGuardSettings { limit: None };
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
    turn.session.permissions = Arc::new(Refuse);
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
    let start = turn.context.clone();
    let events = Mutex::new(Vec::new());
    let outcome = run_turn(turn, &|e| events.lock().unwrap().push(e)).await;
    assert_eq!(outcome.result.unwrap(), StopReason::EndTurn);
    let seen = provider.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    // The summary request is the turn's own, the instruction last: the
    // same system prompt and the history as it was sent, but the
    // unanswered question (kept anyway) and what does not fit the window.
    let (summary, sent) = (&seen[0], &seen[1]);
    assert_eq!(summary.system.as_deref(), Some("sys"));
    assert_eq!(summary.tools, sent.tools);
    let instruction = summary.messages.last().unwrap().text();
    assert!(
        instruction.starts_with(context::compact::INSTRUCTION_MARK),
        "{instruction}"
    );
    let history = start.messages();
    let sent_history = &summary.messages[..summary.messages.len() - 1];
    assert!(sent_history.len() >= 8, "{}", sent_history.len());
    assert_eq!(sent_history, &history[..sent_history.len()]);
    // It fits the window less the summary's answer (a sixteenth of it).
    assert_eq!(summary.max_output_tokens, Some(512));
    assert!(estimate(summary) <= 8192 - 512, "{}", estimate(summary));
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
            Journal::Steered(steered) => replayed.push(Arc::clone(&steered.message)),
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
            Journal::Steered(_) => "steered",
        })
        .collect();
    assert_eq!(kinds, ["tool round", "compact", "answer"]);
    assert_replays(start, &journal, &outcome.context);
    let seen = provider.seen.lock().unwrap();
    // tool call, then (inside the tool loop) the summary, then the answer
    assert_eq!(seen.len(), 3);
    // The summary request continues the tool call's request: its messages
    // unchanged, then the call, its result and the instruction.
    let (asked, summary) = (&seen[0], &seen[1]);
    assert_eq!(
        (&summary.system, &summary.tools),
        (&asked.system, &asked.tools)
    );
    assert_eq!(summary.messages[..asked.messages.len()], asked.messages[..]);
    // The call and its result were sent too, unless they did not fit.
    assert!(
        [1, 3].contains(&(summary.messages.len() - asked.messages.len())),
        "{} after {}",
        summary.messages.len(),
        asked.messages.len()
    );
    assert!(
        (summary.messages.last().unwrap().text()).starts_with(context::compact::INSTRUCTION_MARK)
    );
    let last = &seen[2];
    assert!(last.messages[0].text().contains("SUMMARY"));
    assert!(estimate(last) <= 6554, "{}", estimate(last));
    // The call and its result made it through together.
    let parts: Vec<&Part> = last.messages.iter().flat_map(|m| m.parts.iter()).collect();
    assert!(parts.iter().any(|p| matches!(p, Part::ToolCall { .. })));
    assert!(parts.iter().any(|p| matches!(p, Part::ToolResult { .. })));
}

mod steering;
