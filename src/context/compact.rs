//! Compaction: older turns are summarized by the session's own model, in a
//! request that continues the conversation as it was last sent (the same
//! system prompt, tools and messages, the instruction of
//! `prompts/compact.md` added as the last message), so a server's prompt
//! cache serves all of it but the instruction and the summary. A context
//! that already starts with a summary gets it updated with the turns
//! since; the compacted context keeps one summary, and the older tool
//! outputs of the turns kept after it become stubs (`super::elide`).

use futures::StreamExt;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use super::budget::{self, ContextBudget};
use super::elide::ElidePolicy;
use super::{ContextError, ContextManager, ContextOp, Entry, EntryKind};
use crate::model::Message;
use crate::providers::{ChatRequest, Provider, ProviderError, ProviderEvent, retry};

/// The instruction, sent as the summary request's last (user) message.
pub const COMPACT_PROMPT: &str = include_str!("../../prompts/compact.md");
/// How the instruction begins: what tells a summary request from a turn's.
pub const INSTRUCTION_MARK: &str = "[Compaction request]";

/// Tokens asked for the summary itself: a sixteenth of the window, within
/// these bounds. A small local window gets a short summary, which is
/// written in seconds and leaves room for turns before the next compaction.
const SUMMARY_TOKENS: std::ops::RangeInclusive<u64> = 128..=1_024;
/// The turns kept verbatim take at most this share of the window (fewer
/// turns are kept, the latest always).
const KEPT_SHARE_OF_WINDOW: u64 = 8;
/// Room kept for the parts of the instruction besides the prompt (the
/// scope, the update note, the focus's own words are counted apart).
const INSTRUCTION_EXTRA_CHARS: u64 = 400;

#[derive(Debug, Error)]
pub enum CompactError {
    #[error("compaction was cancelled; the context is unchanged")]
    Cancelled,
    #[error("the model returned an empty summary; the context is unchanged")]
    Empty,
    #[error("the conversation does not leave room to ask for a summary; the context is unchanged")]
    NoRoom,
    #[error("summarizing failed ({0}); the context is unchanged")]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Apply(#[from] ContextError),
}

/// A compaction made and applied: the operation (for the store) and what
/// the context reports of it (for the user).
#[derive(Debug)]
pub struct Compacted {
    pub op: ContextOp,
    pub report: String,
}

/// How many of the oldest entries a compaction would summarize: all but
/// the `keep_recent` latest turns, fewer of them where they would take
/// more than an eighth of `window`, and at least all but the latest one.
pub fn compactable(context: &ContextManager, keep_recent: usize, window: u64) -> Option<usize> {
    let kept_cap = window / KEPT_SHARE_OF_WINDOW;
    let all = context.entries();
    (1..=keep_recent.max(1)).rev().find_map(|keep| {
        let entries = context.compactable(keep)?;
        let kept: u64 = all[entries..].iter().map(|e| e.chars).sum();
        (keep == 1 || context.estimator.tokens(kept) <= kept_cap).then_some(entries)
    })
}

/// The most tokens the conversation (with the fixed prompt) may take for a
/// summary request to carry all of it: the window less the summary's
/// answer and the instruction. Past this, the latest entries are left out
/// of the summary request and a compaction frees little.
pub fn whole_summary_limit(budget: &ContextBudget, estimator: &budget::TokenEstimator) -> u64 {
    (budget.window)
        .saturating_sub(summary_tokens(budget.window))
        .saturating_sub(estimator.tokens(instruction_chars(None)))
}

/// The most the instruction can take, in chars, with the user's `focus`.
fn instruction_chars(focus: Option<&str>) -> u64 {
    (COMPACT_PROMPT.len() + focus.map_or(0, str::len)) as u64 + INSTRUCTION_EXTRA_CHARS
}

/// The summary's output limit for a window of `window` tokens.
fn summary_tokens(window: u64) -> u64 {
    (window / 16)
        .clamp(*SUMMARY_TOKENS.start(), *SUMMARY_TOKENS.end())
        .min(window / 4)
}

/// What the summary is asked to focus on, who hears it as it streams, and
/// whose cache it goes to.
#[derive(Clone, Copy)]
pub struct SummaryWanted<'a> {
    /// The user's focus (`/compact FOCUS`).
    pub focus: Option<&'a str>,
    /// Each piece of the summary as the model writes it.
    pub on_text: &'a (dyn Fn(&str) + Send + Sync),
}

impl Default for SummaryWanted<'_> {
    fn default() -> Self {
        Self {
            focus: None,
            on_text: &|_| {},
        }
    }
}

/// The request the conversation was last sent with, which the summary
/// request continues: its model, system prompt, tools, tool choice,
/// reasoning, window and cache key are sent again as they are; its
/// messages and output limit are replaced. A turn's
/// `TurnInput::request_prefix()` is one.
#[derive(Clone, Copy)]
pub struct LastRequest<'a> {
    /// The provider the conversation's requests go to.
    pub provider: &'a dyn Provider,
    pub request: &'a ChatRequest,
}

/// A compaction made on a copy of the context: the context after it, the
/// operation (for the store: applied to the context it was made on, it
/// gives `context`) and what the context reports of it (for the user).
#[derive(Debug)]
pub struct Recompacted {
    pub context: ContextManager,
    pub op: ContextOp,
    pub report: String,
}

/// Summarize the oldest `entries` (from [`compactable`]) of `context` and
/// return the context with the summary in their place; `context` itself is
/// not touched, so a compaction that fails or is cancelled (`cancel`)
/// changes nothing. Usable between turns: it needs only the provider and
/// the request the conversation was last sent with.
pub async fn compact_context(
    last: LastRequest<'_>,
    context: &ContextManager,
    entries: usize,
    wanted: SummaryWanted<'_>,
    budget: &ContextBudget,
    cancel: &CancellationToken,
) -> Result<Recompacted, CompactError> {
    let plan = plan(last.request, context, entries, wanted.focus, budget)?;
    let summary = summarize(last.provider, plan.request, cancel, wanted.on_text).await?;
    let policy = ElidePolicy {
        latest_max_chars: (budget.compact_at() / 2 * 4) as usize,
    };
    let op = ContextOp::Compact {
        entries: plan.summarized,
        summary,
        elided: policy.choose(&context.entries()[plan.summarized..]),
    };
    let mut compacted = context.clone();
    let report = compacted.apply(&op)?;
    Ok(Recompacted {
        context: compacted,
        op,
        report,
    })
}

/// [`compact_context`] in place, inside a turn or a command: the context
/// changes only if the compaction is made.
pub async fn compact(
    context: &mut ContextManager,
    entries: usize,
    last: LastRequest<'_>,
    wanted: SummaryWanted<'_>,
    budget: &ContextBudget,
    cancel: &CancellationToken,
) -> Result<Compacted, CompactError> {
    let made = compact_context(last, context, entries, wanted, budget, cancel).await?;
    *context = made.context;
    Ok(Compacted {
        op: made.op,
        report: made.report,
    })
}

/// A summary request and how many of the oldest entries its summary replaces.
struct Plan {
    request: ChatRequest,
    summarized: usize,
}

/// The summary request: the last request's prefix, the context's messages
/// (less a trailing prompt not answered yet, which is kept anyway; less
/// the latest entries if the whole would not fit the session's budget)
/// and the instruction.
fn plan(
    last: &ChatRequest,
    context: &ContextManager,
    entries: usize,
    focus: Option<&str>,
    budget: &ContextBudget,
) -> Result<Plan, CompactError> {
    let all = context.entries();
    let answer = summary_tokens(budget.window);
    let focus = focus.map(str::trim).filter(|f| !f.is_empty());
    let fixed = budget::fixed_chars(last.system.as_deref(), &last.tools) + instruction_chars(focus);
    // The window less the summary's own answer (at most a quarter of it).
    let room = budget.window.saturating_sub(answer);
    let mut end = all.len();
    if end > entries && all.last().is_some_and(|e| e.kind == EntryKind::User) {
        end -= 1;
    }
    let mut chars: u64 = fixed + all[..end].iter().map(|e| e.chars).sum::<u64>();
    while end > 0 && context.estimator.tokens(chars) > room {
        end -= 1;
        chars -= all[end].chars;
    }
    let summarized = entries.min(end);
    if !all[..summarized]
        .iter()
        .any(|e| e.kind != EntryKind::Summary)
    {
        return Err(CompactError::NoRoom);
    }
    let mut messages: Vec<_> = (all[..end].iter())
        .flat_map(|e| e.messages.iter().cloned())
        .collect();
    let text = instruction(all, summarized, end, focus, answer);
    messages.push(std::sync::Arc::new(Message::user_text(text)));
    let request = ChatRequest {
        messages,
        max_output_tokens: Some(answer as u32),
        ..last.clone()
    };
    Ok(Plan {
        request,
        summarized,
    })
}

/// The instruction: the prompt, then what this summary covers.
fn instruction(
    all: &[Entry],
    summarized: usize,
    end: usize,
    focus: Option<&str>,
    answer_tokens: u64,
) -> String {
    let mut text = COMPACT_PROMPT.trim().to_string();
    // About three words in four tokens, rounded down to tens: a summary
    // that ends by itself instead of being cut at the limit.
    let words = (answer_tokens * 3 / 4 / 10 * 10).max(50);
    text.push_str(&format!(" At most about {words} words: more is cut off."));
    if all.first().is_some_and(|e| e.kind == EntryKind::Summary) {
        text.push_str(
            "\n\nYour previous summary opens the conversation: update it with what happened since.",
        );
    }
    if summarized < end {
        let kept: usize = all[summarized..end].iter().map(|e| e.messages.len()).sum();
        text.push_str(&format!(
            "\n\nThe last {kept} messages (from “{}”) stay after your summary: summarize what comes before them.",
            all[summarized].preview(30)
        ));
    }
    if let Some(focus) = focus {
        text.push_str(&format!(
            "\n\nThe user asks the summary to focus on: {focus}"
        ));
    }
    text
}

/// Ask the model for the summary. Thinking is ignored; only text counts.
async fn summarize(
    provider: &dyn Provider,
    request: ChatRequest,
    cancel: &CancellationToken,
    on_text: &(dyn Fn(&str) + Send + Sync),
) -> Result<String, CompactError> {
    let notify = |_: retry::RetryNotice| {};
    let started = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(CompactError::Cancelled),
        started = retry::start_stream(provider, &request, &notify) => started?,
    };
    let mut stream = started;
    let mut summary = String::new();
    loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(CompactError::Cancelled),
            next = stream.next() => next,
        };
        match next {
            Some(Ok(ProviderEvent::TextDelta(text))) => {
                on_text(&text);
                summary.push_str(&text);
            }
            Some(Ok(_)) => {}
            Some(Err(err)) => return Err(err.into()),
            None => break,
        }
    }
    let summary = summary.trim().to_string();
    if summary.is_empty() {
        return Err(CompactError::Empty);
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{Part, Role, ToolDefinition};
    use crate::providers::testing::TestModel;
    use crate::providers::{EventStream, FinishReason, ToolChoice};

    /// Answers every request with `answer` (an error if None), and keeps
    /// the requests.
    fn summarizer(answer: Option<&'static str>) -> TestModel {
        TestModel::new(move |_| {
            Box::pin(async move {
                let Some(text) = answer else {
                    return Err(ProviderError::Setup {
                        provider: "p".into(),
                        detail: "down".into(),
                    });
                };
                let events = vec![
                    Ok(ProviderEvent::TextDelta(text.into())),
                    Ok(ProviderEvent::Finish(FinishReason::Stop)),
                ];
                let stream: EventStream = futures::stream::iter(events).boxed();
                Ok(stream)
            })
        })
    }

    fn turn_request() -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            system: Some("You are Crucible.".into()),
            messages: Vec::new(),
            tools: vec![ToolDefinition {
                name: "read_file".into(),
                description: "Read a file".into(),
                parameters: serde_json::json!({"type": "object"}),
            }],
            tool_choice: ToolChoice::Auto,
            max_output_tokens: None,
            context_window: Some(32_768),
            reasoning: None,
            cache_key: Some("session-1".into()),
        }
    }

    /// `turns` questions, each answered after a read_file call whose
    /// output is `output` chars; then a question not answered yet.
    fn conversation(context: &mut ContextManager, from: usize, turns: usize, output: usize) {
        for n in from..from + turns {
            context.push(Arc::new(Message::user_text(format!("question {n}"))));
            let id = format!("call-{n}");
            context.push(Arc::new(Message {
                role: Role::Assistant,
                parts: vec![Part::ToolCall {
                    id: id.clone(),
                    name: "read_file".into(),
                    arguments: format!(r#"{{"path":"file{n}.rs"}}"#),
                }],
            }));
            context.push(Arc::new(Message {
                role: Role::User,
                parts: vec![Part::ToolResult {
                    call_id: id,
                    content: format!("output {n} {}", "x".repeat(output)),
                    is_error: false,
                }],
            }));
            context.push(Arc::new(Message::assistant_text(format!("answer {n}"))));
        }
    }

    fn texts(request: &ChatRequest) -> String {
        let mut all = String::new();
        for message in &request.messages {
            for part in &message.parts {
                match part {
                    Part::Text { text } => all.push_str(text),
                    Part::ToolResult { content, .. } => all.push_str(content),
                    _ => {}
                }
                all.push('\n');
            }
        }
        all
    }

    async fn run(
        provider: &TestModel,
        context: &ContextManager,
        cancel: &CancellationToken,
    ) -> Result<Recompacted, CompactError> {
        let request = turn_request();
        let last = LastRequest {
            provider,
            request: &request,
        };
        let budget = ContextBudget::new(32_768, 4_096, 0.8);
        let entries = compactable(context, 2, 32_768).unwrap();
        let wanted = SummaryWanted::default();
        compact_context(last, context, entries, wanted, &budget, cancel).await
    }

    #[tokio::test]
    async fn the_summary_request_is_the_last_request_with_the_instruction_last() {
        let mut context = ContextManager::new();
        conversation(&mut context, 0, 4, 100);
        context.push(Arc::new(Message::user_text("the latest question")));
        let provider = summarizer(Some("SUMMARY ONE"));
        let made = run(&provider, &context, &CancellationToken::new())
            .await
            .unwrap();
        let seen = provider.seen.lock().unwrap();
        let sent = &seen[0];
        let turn = turn_request();
        assert_eq!(
            (
                &sent.system,
                &sent.tools,
                &sent.tool_choice,
                &sent.cache_key
            ),
            (
                &turn.system,
                &turn.tools,
                &turn.tool_choice,
                &turn.cache_key
            )
        );
        // Every message as the turn sent it, the same Arcs, but the
        // question not answered yet; then the instruction.
        let history = context.messages();
        let (instruction, before) = sent.messages.split_last().unwrap();
        assert_eq!(before.len(), history.len() - 1);
        assert!(before.iter().zip(&history).all(|(a, b)| Arc::ptr_eq(a, b)));
        assert_eq!(instruction.role, Role::User);
        let instruction = instruction.text();
        assert!(instruction.starts_with(INSTRUCTION_MARK), "{instruction}");
        assert!(
            instruction.contains("The last 4 messages (from"),
            "{instruction}"
        );
        assert!(
            !instruction.contains("Your previous summary"),
            "{instruction}"
        );
        assert_eq!(sent.max_output_tokens, Some(1_024));
        // The compacted context: the summary, then the kept turns.
        let kinds: Vec<&str> = (made.context.entries().iter())
            .map(|e| e.kind.label())
            .collect();
        assert_eq!(kinds, ["summary", "user", "tools", "assistant", "user"]);
        assert!(made.context.messages()[0].text().contains("SUMMARY ONE"));
        assert!(matches!(made.op, ContextOp::Compact { entries: 9, .. }));
        // The op gives the same context when replayed on the old one.
        let mut replayed = context.clone();
        replayed.apply(&made.op).unwrap();
        assert_eq!(replayed.messages(), made.context.messages());
    }

    #[tokio::test]
    async fn the_next_summary_updates_the_first_and_reads_old_outputs_as_stubs() {
        let mut context = ContextManager::new();
        conversation(&mut context, 0, 4, 3_000);
        let provider = summarizer(Some("SUMMARY ONE"));
        let first = run(&provider, &context, &CancellationToken::new())
            .await
            .unwrap();
        // Kept: turns 2 and 3; turn 2's output (not the latest turn's) is a stub.
        let mut context = first.context;
        let ContextOp::Compact { elided, .. } = &first.op else {
            panic!("{:?}", first.op)
        };
        assert_eq!(elided, &["call-2"]);
        assert!(
            first.report.contains("1 older tool output"),
            "{}",
            first.report
        );
        conversation(&mut context, 4, 3, 200);
        context.push(Arc::new(Message::user_text("the latest question")));

        let provider = summarizer(Some("SUMMARY TWO"));
        let second = run(&provider, &context, &CancellationToken::new())
            .await
            .unwrap();
        let seen = provider.seen.lock().unwrap();
        let sent = texts(&seen[0]);
        // The earlier summary, not the turns it replaced; turn 2's output as its stub.
        assert!(sent.contains("SUMMARY ONE"), "{sent}");
        assert!(
            !sent.contains("question 0") && !sent.contains("output 1"),
            "{sent}"
        );
        assert!(
            sent.contains(r#"[read_file {"path":"file2.rs"} → 3,009 bytes, elided]"#),
            "{sent}"
        );
        assert!(sent.contains(&format!("output 3 {}", "x".repeat(3_000))));
        let instruction = seen[0].messages.last().unwrap().text();
        assert!(
            instruction.contains("Your previous summary"),
            "{instruction}"
        );
        // One summary: the new one, folded over the old.
        let summaries: Vec<String> = (second.context.entries().iter())
            .filter(|e| e.kind == EntryKind::Summary)
            .map(|e| e.messages[0].text())
            .collect();
        assert_eq!(summaries.len(), 1);
        assert!(summaries[0].contains("SUMMARY TWO"));
        assert!(!summaries[0].contains("SUMMARY ONE"));
    }

    #[tokio::test]
    async fn a_failed_or_cancelled_compaction_changes_nothing() {
        let mut context = ContextManager::new();
        conversation(&mut context, 0, 4, 100);
        let before = context.clone();
        let request = turn_request();
        let budget = ContextBudget::new(32_768, 4_096, 0.8);
        let failing = summarizer(None);
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        for (provider, cancel) in [
            (&failing, CancellationToken::new()),
            (&summarizer(Some("S")), cancelled),
            (&summarizer(Some("  ")), CancellationToken::new()),
        ] {
            let last = LastRequest {
                provider,
                request: &request,
            };
            let wanted = SummaryWanted::default();
            let outcome = compact(&mut context, 9, last, wanted, &budget, &cancel).await;
            assert!(outcome.is_err());
            assert_eq!(context, before);
        }
    }

    #[test]
    fn a_small_window_asks_for_a_short_summary_and_keeps_fewer_turns() {
        let mut context = ContextManager::new();
        // Six turns of about 390 tokens each (3 entries a turn).
        conversation(&mut context, 0, 6, 1_500);
        // A hosted window keeps the two latest turns and asks for 1,024 tokens.
        assert_eq!(compactable(&context, 2, 131_072), Some(12));
        let big = ContextBudget::new(131_072, 4_096, 0.8);
        let plan_big = plan(&turn_request(), &context, 12, None, &big).unwrap();
        assert_eq!(plan_big.request.max_output_tokens, Some(1_024));
        let instruction = plan_big.request.messages.last().unwrap().text();
        assert!(
            instruction.contains("At most about 760 words"),
            "{instruction}"
        );
        // A 4k local window: two such turns would be a fifth of it, so only
        // the latest stays; the summary gets a sixteenth of the window.
        assert_eq!(compactable(&context, 2, 4_096), Some(15));
        let small = ContextBudget::new(4_096, 1_024, 0.8);
        let plan_small = plan(&turn_request(), &context, 15, None, &small).unwrap();
        assert_eq!(plan_small.request.max_output_tokens, Some(256));
        let instruction = plan_small.request.messages.last().unwrap().text();
        assert!(
            instruction.contains("At most about 190 words"),
            "{instruction}"
        );
        // Every compaction sends the instruction uncached, so it stays
        // short: about 200 tokens with what this summary covers.
        assert!(instruction.len() <= 900, "{}", instruction.len());
        // Kept turns that fit an eighth of the window stay as configured.
        let mut short = ContextManager::new();
        conversation(&mut short, 0, 6, 100);
        assert_eq!(compactable(&short, 2, 4_096), Some(12));
        assert_eq!(summary_tokens(2_048), 128);
        assert_eq!(summary_tokens(8_192), 512);
    }

    #[test]
    fn what_does_not_fit_the_window_is_left_out_from_the_end() {
        let mut context = ContextManager::new();
        conversation(&mut context, 0, 6, 5_000);
        let budget = ContextBudget::new(8_192, 2_048, 0.8);
        let entries = compactable(&context, 2, 8_192).unwrap();
        let plan = plan(&turn_request(), &context, entries, Some("the API"), &budget).unwrap();
        let sent = plan.request.messages.len() - 1;
        assert!(sent < context.messages().len(), "{sent}");
        assert_eq!(plan.request.messages[..sent], context.messages()[..sent]);
        assert!(plan.summarized <= entries);
        let instruction = plan.request.messages[sent].text();
        assert!(instruction.ends_with("focus on: the API"), "{instruction}");
        let chars = budget::fixed_chars(plan.request.system.as_deref(), &plan.request.tools)
            + (plan.request.messages.iter())
                .map(|m| budget::message_chars(m))
                .sum::<u64>();
        // The prompt and the summary's answer (a sixteenth) fit the window.
        assert_eq!(plan.request.max_output_tokens, Some(512));
        assert!(chars / 4 + 512 <= 8_192, "{chars}");
    }
}
