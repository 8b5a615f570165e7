//! One streamed model call: its text and thoughts forwarded as they
//! arrive, its answer collected in the order the model said it.

use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::first_token::FirstTokenWait;
use crate::events::AgentEvent;
use crate::model::{Message, Part, Role};
use crate::providers::dialects::{AnswerEnd, TextCallDecoder, TextCalls};
use crate::providers::{
    ChatRequest, FinishReason, Provider, ProviderError, ProviderEvent, ToolDefinition, Usage, retry,
};

pub(super) enum CallEnd {
    Finished(FinishReason),
    Cancelled,
}

pub(super) struct CallResult {
    pub(super) message: Message,
    pub(super) usage: Option<Usage>,
    pub(super) result: Result<CallEnd, ProviderError>,
}

/// What bounds a model call besides its request.
pub(super) struct Limits<'a> {
    pub(super) context_window: u64,
    pub(super) first_token_notice: Option<Duration>,
    /// Read the stream no faster than this client takes updates.
    pub(super) outbound: Option<&'a dyn crate::client::ClientSink>,
}

/// One streamed LLM call. Text and thoughts are forwarded as they arrive and
/// collected into the assistant message.
pub(super) async fn call_model(
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
                self.parts.push(Part::RedactedThinking { data });
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
