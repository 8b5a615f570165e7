//! The Messages API as serde types: the request body ([`MessagesRequest`])
//! and the stream, one [`Event`] per `data:`, told apart by its `type`
//! (llama-server and proxies differ in `event:` names). Unknown events and
//! blocks read as `Other`; unknown fields are ignored, and fields servers
//! fill differently are [`Lenient`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::providers::lenient::Lenient;

/// The body of `POST /v1/messages`. The fields are in the order the keys
/// had when the body was built with `json!`, so the text sent, and with it
/// what the prompt cache matches, is unchanged.
#[derive(Debug, Serialize)]
pub struct MessagesRequest<'a> {
    pub model: &'a str,
    /// Counts the thinking too, so it exceeds the thinking budget.
    pub max_tokens: u32,
    pub stream: bool,
    pub messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemPrompt<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool<'a>>,
    /// Sent only with tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// A body without tools has always ended in `"tools": null` (the
    /// breakpoint marking of the `json!` body added it); kept, so the bytes
    /// sent do not change with the types.
    #[serde(rename = "tools", skip_serializing_if = "Option::is_none")]
    pub no_tools: Option<()>,
}

/// A plain string, or text blocks when the prompt carries a cache breakpoint.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum SystemPrompt<'a> {
    Text(&'a str),
    Blocks(Vec<ContentBlock<'a>>),
}

#[derive(Debug, Serialize)]
pub struct Tool<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
}

/// A prompt-cache breakpoint: `{"type": "ephemeral"}`, the only kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CacheControl {
    Ephemeral,
}

/// `{"type": "auto" | "any" | "none"}`, or `{"type": "tool", "name": …}`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolChoice<'a> {
    Auto,
    /// Some tool must be called.
    Any,
    None,
    Tool {
        name: &'a str,
    },
}

/// Extended thinking, with the tokens it may spend.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Thinking {
    Enabled { budget_tokens: u32 },
}

/// One entry of `messages`: the roles alternate.
#[derive(Debug, Serialize)]
pub struct Turn<'a> {
    pub role: TurnRole,
    pub content: Vec<ContentBlock<'a>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnRole {
    User,
    Assistant,
}

/// A block of a turn's `content` (or of the system prompt). Each kind that
/// may carry a cache breakpoint has `cache_control` last, where the old
/// marking appended it; thinking blocks cannot carry one.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Image {
        source: ImageSource<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    /// A signed block from this API; the signature proves it unaltered.
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        /// Always an object, as the API requires.
        input: Map<String, Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
}

impl ContentBlock<'_> {
    /// Where a breakpoint goes, or `None` for the thinking blocks, which
    /// cannot carry one.
    pub fn cache_control_mut(&mut self) -> Option<&mut Option<CacheControl>> {
        match self {
            Self::Text { cache_control, .. }
            | Self::Image { cache_control, .. }
            | Self::ToolResult { cache_control, .. }
            | Self::ToolUse { cache_control, .. } => Some(cache_control),
            Self::Thinking { .. } | Self::RedactedThinking { .. } => None,
        }
    }
}

/// An image inline, as base64.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ImageSource<'a> {
    Base64 { media_type: &'a str, data: &'a str },
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    MessageStart {
        #[serde(default)]
        message: Lenient<MessageStart>,
    },
    ContentBlockStart {
        #[serde(default)]
        index: Lenient<usize>,
        #[serde(default)]
        content_block: Lenient<BlockStart>,
    },
    ContentBlockDelta {
        #[serde(default)]
        index: Lenient<usize>,
        #[serde(default)]
        delta: Lenient<BlockDelta>,
    },
    ContentBlockStop {
        #[serde(default)]
        index: Lenient<usize>,
    },
    MessageDelta {
        #[serde(default)]
        usage: Lenient<WireUsage>,
        #[serde(default)]
        delta: Lenient<MessageDeltaBody>,
    },
    MessageStop,
    Error {
        /// Kept as sent: an unreadable one is quoted.
        #[serde(default)]
        error: Option<Value>,
    },
    /// `ping`, and event types added later: nothing for the agent.
    #[serde(other)]
    Other,
}

#[derive(Debug, Default, Deserialize)]
pub struct MessageStart {
    #[serde(default)]
    pub usage: Lenient<WireUsage>,
}

/// Token counts; cached prompt tokens are counted apart from `input_tokens`.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct WireUsage {
    #[serde(default)]
    pub input_tokens: Lenient<u64>,
    #[serde(default)]
    pub output_tokens: Lenient<u64>,
    #[serde(default)]
    pub cache_read_input_tokens: Lenient<u64>,
    #[serde(default)]
    pub cache_creation_input_tokens: Lenient<u64>,
}

#[derive(Debug, Default, Deserialize)]
pub struct MessageDeltaBody {
    #[serde(default)]
    pub stop_reason: Lenient<String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockStart {
    Text {
        #[serde(default)]
        text: Lenient<String>,
    },
    Thinking {
        #[serde(default)]
        thinking: Lenient<String>,
        #[serde(default)]
        signature: Lenient<String>,
    },
    RedactedThinking {
        #[serde(default)]
        data: Lenient<String>,
    },
    ToolUse {
        #[serde(default)]
        id: Lenient<String>,
        #[serde(default)]
        name: Lenient<String>,
        /// llama-server may leave it out; the real API sends `{}`.
        #[serde(default)]
        input: Lenient<Map<String, Value>>,
    },
    /// Server-side tools run on Anthropic's side.
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockDelta {
    TextDelta {
        #[serde(default)]
        text: Lenient<String>,
    },
    ThinkingDelta {
        #[serde(default)]
        thinking: Lenient<String>,
    },
    SignatureDelta {
        #[serde(default)]
        signature: Lenient<String>,
    },
    InputJsonDelta {
        #[serde(default)]
        partial_json: Lenient<String>,
    },
    /// `citations_delta` and later kinds are not shown.
    #[serde(other)]
    Other,
}

/// `{"type": "overloaded_error", "message": "Overloaded"}`.
#[derive(Debug, Default, Deserialize)]
pub struct ErrorObject {
    #[serde(default, rename = "type")]
    pub kind: Lenient<String>,
    #[serde(default)]
    pub message: Lenient<String>,
}

/// `GET /v1/models`: `{"data": [{"id": …}]}`; llama-server adds
/// `meta.n_ctx`, the window one request gets.
#[derive(Debug, Default, Deserialize)]
pub struct ModelList {
    #[serde(default)]
    pub data: Lenient<Vec<Lenient<ModelEntry>>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ModelEntry {
    #[serde(default)]
    pub id: Lenient<String>,
    #[serde(default)]
    pub meta: Lenient<ModelMeta>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ModelMeta {
    #[serde(default)]
    pub n_ctx: Lenient<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every recorded event reads into a known event type (none is `Other`).
    #[test]
    fn recorded_streams_read_as_events() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/anthropic");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            for data in text.lines().filter_map(|line| line.strip_prefix("data: ")) {
                let event: Result<Event, _> = serde_json::from_str(data);
                let known = event
                    .as_ref()
                    .is_ok_and(|event| !matches!(event, Event::Other) || data.contains("ping"));
                assert!(known, "{}: {data}: {event:?}", path.display());
            }
        }
    }
}
