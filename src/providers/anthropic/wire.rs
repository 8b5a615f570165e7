//! The Messages API stream as serde types: one [`Event`] per `data:`,
//! told apart by its `type` (llama-server and proxies differ in `event:`
//! names). Unknown events and blocks read as `Other`; unknown fields are
//! ignored, and fields servers fill differently are [`Lenient`].

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::providers::lenient::Lenient;

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
