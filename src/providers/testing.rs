//! Helpers for unit tests: feed payloads to a decoder as the pump does,
//! write requests, expected events and messages briefly, and a model
//! ([`TestModel`]) for the tests of the layers above that need one.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use super::settings::ProviderSettings;
use super::stream::{Decoded, WireDecoder};
use super::{
    ChatRequest, EventStream, Message, ModelInfo, Part, Provider, ProviderError, ProviderEvent,
    ToolChoice, Usage,
};

/// Feeds payloads (`event:` name, data) to a fresh decoder as
/// [`super::stream::event_stream`] does: stop at the first error or at the
/// end marker, `finish` only when the input runs out; blank payloads are
/// skipped and the rest trimmed. Errors name provider `p`.
pub fn decode_all<D: WireDecoder>(
    events: &[(&str, &str)],
) -> Vec<Result<ProviderEvent, ProviderError>> {
    let mut decoder = D::default();
    let mut out: Vec<Decoded> = Vec::new();
    for (event, data) in events.iter().filter(|(_, data)| !data.trim().is_empty()) {
        let items = decoder.on_event(event, data.trim());
        let failed = items.iter().any(Result::is_err);
        out.extend(items);
        if failed || decoder.done() {
            return named(out);
        }
    }
    out.extend(decoder.finish());
    named(out)
}

fn named(items: Vec<Decoded>) -> Vec<Result<ProviderEvent, ProviderError>> {
    items
        .into_iter()
        .map(|item| item.map_err(|err| err.for_provider("p")))
        .collect()
}

pub fn call_start(index: usize, id: &str, name: &str) -> ProviderEvent {
    ProviderEvent::ToolCallStart {
        index,
        id: id.into(),
        name: name.into(),
    }
}

pub fn call_args(index: usize, delta: &str) -> ProviderEvent {
    ProviderEvent::ToolCallArgumentsDelta {
        index,
        delta: delta.into(),
    }
}

/// Counts with nothing cached.
pub fn usage(prompt_tokens: u64, completion_tokens: u64) -> Usage {
    Usage {
        prompt_tokens,
        completion_tokens,
        cached_prompt_tokens: 0,
        cache_written_prompt_tokens: 0,
    }
}

pub fn usage_event(prompt_tokens: u64, completion_tokens: u64) -> ProviderEvent {
    ProviderEvent::Usage(usage(prompt_tokens, completion_tokens))
}

/// A request for `model` with no tools, limits, reasoning or cache key.
pub fn chat_request(model: &str, system: Option<&str>, messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        model: model.into(),
        system: system.map(Into::into),
        messages: messages.into_iter().map(Arc::new).collect(),
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_output_tokens: None,
        context_window: None,
        reasoning: None,
        cache_key: None,
    }
}

pub fn text(text: &str) -> Part {
    Part::Text { text: text.into() }
}

/// A PNG whose data is `data`.
pub fn png(data: &str) -> Part {
    Part::Image {
        mime_type: "image/png".into(),
        data: data.into(),
    }
}

pub fn tool_call(id: &str, name: &str, arguments: &str) -> Part {
    Part::ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

pub fn tool_result(call_id: &str, content: &str, is_error: bool) -> Part {
    Part::ToolResult {
        call_id: call_id.into(),
        content: content.into(),
        is_error,
    }
}

/// How a [`TestModel`] answers its `n`th request (counting from 1).
type Answer =
    Box<dyn Fn(usize) -> BoxFuture<'static, Result<EventStream, ProviderError>> + Send + Sync>;

/// A model for tests: a local Ollama by its settings, which keeps every
/// request it gets and answers each as the test says.
pub struct TestModel {
    /// The requests, in the order they came.
    pub seen: Mutex<Vec<ChatRequest>>,
    config: ProviderSettings,
    answer: Answer,
}

impl TestModel {
    /// `answer` gets the request's number (from 1).
    pub fn new<F>(answer: F) -> Self
    where
        F: Fn(usize) -> BoxFuture<'static, Result<EventStream, ProviderError>>
            + Send
            + Sync
            + 'static,
    {
        Self {
            seen: Mutex::default(),
            config: ProviderSettings::local_ollama(),
            answer: Box::new(answer),
        }
    }
}

impl Provider for TestModel {
    fn config(&self) -> &ProviderSettings {
        &self.config
    }

    fn stream_chat(
        &self,
        request: ChatRequest,
    ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
        let number = {
            let mut seen = self.seen.lock().unwrap();
            seen.push(request);
            seen.len()
        };
        (self.answer)(number)
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<ModelInfo>, ProviderError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}
