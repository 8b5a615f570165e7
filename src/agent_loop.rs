//! One prompt turn: prompt → LLM (streaming) → … until the model answers,
//! the turn is cancelled or the provider fails. Emits [`AgentEvent`]s in the
//! order they happen; knows nothing of ACP.

use std::sync::Arc;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::providers::retry;
use crate::providers::{
    ChatRequest, FinishReason, Message, Part, Provider, ProviderError, ProviderEvent, Role,
    ToolChoice, Usage,
};

/// What a turn tells the client while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    AgentText(String),
    Thought(String),
    /// Tokens in use after a call, and the window they live in.
    Usage {
        used: u64,
        size: u64,
    },
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    MaxTokens,
    MaxTurnRequests,
    Refusal,
    Cancelled,
}

pub struct TurnInput {
    pub provider: Arc<dyn Provider>,
    pub model: String,
    pub system: Option<String>,
    /// The conversation so far, ending with the user's new message.
    pub history: Vec<Arc<Message>>,
    pub context_window: u64,
    pub cancel: CancellationToken,
}

pub struct TurnOutcome {
    /// Messages the turn added after the user's (what the model said, even
    /// if cut short by cancel or an error: the user saw it).
    pub new_messages: Vec<Message>,
    pub result: Result<StopReason, ProviderError>,
    pub last_usage: Option<Usage>,
}

pub async fn run_turn(input: TurnInput, emit: &(dyn Fn(AgentEvent) + Send + Sync)) -> TurnOutcome {
    if input.cancel.is_cancelled() {
        return TurnOutcome {
            new_messages: Vec::new(),
            result: Ok(StopReason::Cancelled),
            last_usage: None,
        };
    }
    // One model call per turn until tools exist; the tool loop (bounded by
    // `max_turn_requests`) wraps this call.
    let request = ChatRequest {
        model: input.model.clone(),
        system: input.system.clone(),
        messages: input.history.clone(),
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_output_tokens: input.provider.config().max_output_tokens,
        context_window: Some(input.context_window),
    };
    let call = call_model(
        &*input.provider,
        request,
        &input.cancel,
        input.context_window,
        emit,
    )
    .await;
    let mut new_messages = Vec::new();
    if !call.message.parts.is_empty() {
        new_messages.push(call.message);
    }
    let result = match call.result {
        Ok(CallEnd::Finished(reason)) => Ok(match reason {
            FinishReason::Length => StopReason::MaxTokens,
            FinishReason::Refusal => StopReason::Refusal,
            FinishReason::Stop | FinishReason::ToolCalls | FinishReason::Other(_) => {
                StopReason::EndTurn
            }
        }),
        Ok(CallEnd::Cancelled) => Ok(StopReason::Cancelled),
        Err(err) => Err(err),
    };
    TurnOutcome {
        new_messages,
        result,
        last_usage: call.usage,
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

/// One streamed LLM call. Text and thoughts are forwarded as they arrive and
/// collected into the assistant message.
async fn call_model(
    provider: &dyn Provider,
    request: ChatRequest,
    cancel: &CancellationToken,
    context_window: u64,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> CallResult {
    let mut builder = AssistantBuilder::default();
    let mut usage = None;
    let notify = |notice: retry::RetryNotice| emit(AgentEvent::Thought(notice.message()));
    let started = tokio::select! {
        biased;
        _ = cancel.cancelled() => None,
        started = retry::start_stream(provider, &request, &notify) => Some(started),
    };
    let mut stream = match started {
        None => return builder.finish(usage, Ok(CallEnd::Cancelled)),
        Some(Err(err)) => return builder.finish(usage, Err(err)),
        Some(Ok(stream)) => stream,
    };
    let mut finish = None;
    let result = loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => break Ok(CallEnd::Cancelled),
            next = stream.next() => next,
        };
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
                    emit(AgentEvent::Usage {
                        used: reported.prompt_tokens + reported.completion_tokens,
                        size: context_window,
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
    use crate::config::{Config, ProviderConfig};
    use crate::providers::{EventStream, ModelInfo};
    use futures::future::BoxFuture;
    use std::sync::Mutex;

    /// A provider that replays scripted events, optionally never finishing.
    struct Scripted {
        events: Vec<Result<ProviderEvent, ProviderError>>,
        hang_after: bool,
        seen: Mutex<Vec<ChatRequest>>,
        config: ProviderConfig,
    }

    impl Provider for Scripted {
        fn config(&self) -> &ProviderConfig {
            &self.config
        }
        fn stream_chat(
            &self,
            request: ChatRequest,
        ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
            self.seen.lock().unwrap().push(request);
            let events: Vec<_> = self
                .events
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
            system: Some("sys".into()),
            history: vec![Arc::new(Message::user_text("hi"))],
            context_window: 1000,
            cancel,
        }
    }

    fn scripted(
        events: Vec<Result<ProviderEvent, ProviderError>>,
        hang_after: bool,
    ) -> Arc<Scripted> {
        Arc::new(Scripted {
            events,
            hang_after,
            seen: Mutex::default(),
            config: Config::builtin_default()
                .default_provider()
                .cloned()
                .unwrap(),
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
                    size: 1000
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
}
