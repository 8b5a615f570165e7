//! Helpers for the wire formats' unit tests: feed payloads to a decoder as
//! the pump does, and write expected events and messages briefly.

use super::stream::{Decoded, WireDecoder};
use super::{Part, ProviderError, ProviderEvent, Usage};

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

pub fn usage_event(prompt_tokens: u64, completion_tokens: u64) -> ProviderEvent {
    ProviderEvent::Usage(Usage {
        prompt_tokens,
        completion_tokens,
        cached_prompt_tokens: 0,
        cache_written_prompt_tokens: 0,
    })
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
