//! Compaction: older turns are summarized by the session's own model with
//! the dedicated prompt in `prompts/compact.md`. The model reads the turns
//! as a plain transcript (not as chat history), so tool calls need no
//! pairing and long tool output can be shortened to fit its window.

use futures::StreamExt;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use super::budget::{ContextBudget, TokenEstimator};
use super::{ContextError, ContextManager, ContextOp, Entry, SUMMARY_PREFIX};
use crate::model::{Message, Part, Role};
use crate::providers::{ChatRequest, Provider, ProviderError, ProviderEvent, ToolChoice, retry};

pub const COMPACT_PROMPT: &str = include_str!("../../prompts/compact.md");

/// Longest piece of one message kept in the transcript: the summary needs
/// what was done and found, not whole files.
const PART_CHARS: usize = 2_000;
/// Tokens asked for the summary itself.
const SUMMARY_TOKENS: u64 = 1_024;

#[derive(Debug, Error)]
pub enum CompactError {
    #[error("compaction was cancelled; the context is unchanged")]
    Cancelled,
    #[error("the model returned an empty summary; the context is unchanged")]
    Empty,
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
/// the `keep_recent` latest turns, or at least all but the latest one.
pub fn compactable(context: &ContextManager, keep_recent: usize) -> Option<usize> {
    context
        .compactable(keep_recent)
        .or_else(|| context.compactable(1))
}

/// What the summary is asked to focus on, who hears it as it streams, and
/// whose cache it goes to.
#[derive(Clone, Copy)]
pub struct SummaryWanted<'a> {
    /// The user's focus (`/compact FOCUS`).
    pub focus: Option<&'a str>,
    /// Each piece of the summary as the model writes it.
    pub on_text: &'a (dyn Fn(&str) + Send + Sync),
    /// The session's cache key, as its turns send it: the summary request
    /// goes where they go (llama.cpp: the session's slot).
    pub cache_key: Option<&'a str>,
}

impl Default for SummaryWanted<'_> {
    fn default() -> Self {
        Self {
            focus: None,
            on_text: &|_| {},
            cache_key: None,
        }
    }
}

/// Summarize the oldest `entries` with the session's model and put the
/// summary in their place. The one compaction routine: `/compact`, `/context
/// summarize` and the automatic one before a request that would not fit.
pub async fn compact(
    context: &mut ContextManager,
    entries: usize,
    provider: &dyn Provider,
    model: &str,
    wanted: SummaryWanted<'_>,
    budget: &ContextBudget,
    cancel: &CancellationToken,
) -> Result<Compacted, CompactError> {
    let request = ChatRequest {
        cache_key: wanted.cache_key.map(str::to_string),
        ..request(
            model,
            &context.entries()[..entries],
            wanted.focus,
            budget,
            &context.estimator,
        )
    };
    let summary = summarize(provider, request, cancel, wanted.on_text).await?;
    let op = ContextOp::Compact { entries, summary };
    let report = context.apply(&op)?;
    Ok(Compacted { op, report })
}

/// The entries as a transcript, each part cut to `PART_CHARS`, the whole
/// cut (oldest first) to `max_chars`.
fn transcript(entries: &[Entry], max_chars: usize) -> String {
    let mut blocks: Vec<String> = Vec::new();
    for entry in entries {
        for message in &entry.messages {
            for part in &message.parts {
                let who = match message.role {
                    Role::User => "User",
                    Role::Assistant => "Assistant",
                };
                let block = match part {
                    Part::Text { text } => match text.strip_prefix(SUMMARY_PREFIX) {
                        Some(summary) => {
                            format!("Summary of what came before:\n{}", summary.trim())
                        }
                        None => format!("{who}: {}", shorten(text)),
                    },
                    Part::Image { .. } => format!("{who}: [image]"),
                    Part::ToolCall {
                        name, arguments, ..
                    } => format!("Assistant called tool `{name}` with {}", shorten(arguments)),
                    Part::ToolResult {
                        content, is_error, ..
                    } => format!(
                        "Tool {}: {}",
                        if *is_error { "error" } else { "result" },
                        shorten(content)
                    ),
                    Part::Thinking { .. } | Part::RedactedThinking { .. } => continue,
                };
                blocks.push(block);
            }
        }
    }
    // Too long even so: the oldest blocks go; the latest matter most.
    let mut total: usize = blocks.iter().map(|b| b.len() + 2).sum();
    let mut skip = 0;
    while total > max_chars && skip < blocks.len() {
        total -= blocks[skip].len() + 2;
        skip += 1;
    }
    let mut out = String::new();
    if skip > 0 {
        out.push_str("[… earliest part of the conversation omitted …]\n\n");
    }
    out.push_str(&blocks[skip..].join("\n\n"));
    out
}

fn shorten(text: &str) -> String {
    if text.len() <= PART_CHARS {
        return text.to_string();
    }
    let mut cut = PART_CHARS;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{} […{} more characters]", &text[..cut], text.len() - cut)
}

/// The summarizing request, sized to fit the window.
fn request(
    model: &str,
    entries: &[Entry],
    focus: Option<&str>,
    budget: &ContextBudget,
    estimator: &TokenEstimator,
) -> ChatRequest {
    let answer = SUMMARY_TOKENS.min(budget.window / 4);
    let room_tokens = budget
        .window
        .saturating_sub(answer)
        .saturating_sub(estimator.tokens(COMPACT_PROMPT.len() as u64) + 64);
    // Tokens → chars with the learned drift, and a margin for its error.
    let max_chars = (room_tokens as f64 * 4.0 / estimator.drift.max(0.25) * 0.9) as usize;
    let mut text = String::from("Summarize this conversation as instructed.\n\n");
    if let Some(focus) = focus.map(str::trim).filter(|f| !f.is_empty()) {
        text.push_str(&format!(
            "The user asks the summary to focus on: {focus}\n\n"
        ));
    }
    text.push_str("<conversation>\n");
    text.push_str(&transcript(
        entries,
        max_chars.saturating_sub(text.len() + 40),
    ));
    text.push_str("\n</conversation>");
    ChatRequest {
        model: model.to_string(),
        system: Some(COMPACT_PROMPT.trim().to_string()),
        messages: vec![std::sync::Arc::new(Message::user_text(text))],
        tools: Vec::new(),
        tool_choice: ToolChoice::None,
        max_output_tokens: Some(answer as u32),
        context_window: Some(budget.window),
        reasoning: None,
        cache_key: None,
    }
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
