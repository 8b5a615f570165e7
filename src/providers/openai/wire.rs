//! The chat-completions wire format as serde types: the request body and
//! the chunks of its stream. Only what the agent sends and reads is here;
//! unknown fields are ignored, and fields servers fill differently
//! (llama.cpp, vLLM, LM Studio, OpenRouter, Ollama's `/v1`) are optional
//! or [`Lenient`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::providers::function_tools::{FunctionEntry, FunctionTool};
use crate::providers::lenient::Lenient;
use crate::providers::slots::SlotId;

/// Everything in the body but the messages (which are encoded apart, once
/// per message, see `providers::encoded`).
#[derive(Debug, Serialize)]
pub struct Envelope<'a> {
    pub model: &'a str,
    pub stream: bool,
    pub stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<&'a str>,
    /// llama.cpp: the server slot to run on, so a session's requests find
    /// their prefix in that slot's cache (see `providers::slots`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id_slot: Option<SlotId>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<FunctionTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice<'a>>,
}

#[derive(Debug, Serialize)]
pub struct StreamOptions {
    /// The last chunk carries the token counts.
    pub include_usage: bool,
}

/// `"auto"`, `"required"`, `"none"`, or one named function.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ToolChoice<'a> {
    Mode(ChoiceMode),
    Function(FunctionEntry<FunctionName<'a>>),
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChoiceMode {
    Auto,
    Required,
    None,
}

#[derive(Debug, Serialize)]
pub struct FunctionName<'a> {
    pub name: &'a str,
}

/// One entry of `messages`.
#[derive(Debug, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        content: String,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall<'a>>,
    },
    /// A tool's result, answering the call `tool_call_id`.
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

/// Plain text (what every server accepts), or parts when there is more.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum UserContent<'a> {
    Text(&'a str),
    Parts(Vec<ContentPart<'a>>),
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Debug, Serialize)]
pub struct ImageUrl {
    /// A `data:` URL.
    pub url: String,
}

/// A past call, as `tool_calls` holds it.
#[derive(Debug, Serialize)]
pub struct ToolCall<'a> {
    pub id: &'a str,
    #[serde(flatten)]
    pub call: FunctionEntry<CalledFunction<'a>>,
}

#[derive(Debug, Serialize)]
pub struct CalledFunction<'a> {
    pub name: &'a str,
    /// JSON text, not an object.
    pub arguments: &'a str,
}

/// One `data:` payload of the stream (all but `[DONE]`).
#[derive(Debug, Default, Deserialize)]
pub struct Chunk {
    /// An error inside a 200 stream (LM Studio, OpenRouter, vLLM): kept as
    /// sent, since its form varies and an unreadable one is quoted.
    #[serde(default)]
    pub error: Option<Value>,
    #[serde(default)]
    pub choices: Option<Vec<Choice>>,
    /// `null` in every chunk but the last (llama.cpp adds `timings` beside it).
    #[serde(default)]
    pub usage: Lenient<ChunkUsage>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Choice {
    #[serde(default)]
    pub delta: Option<Delta>,
    #[serde(default)]
    pub finish_reason: Lenient<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Delta {
    #[serde(default)]
    pub content: Lenient<String>,
    /// llama.cpp and vLLM's thinking.
    #[serde(default)]
    pub reasoning_content: Lenient<String>,
    /// OpenRouter's thinking.
    #[serde(default)]
    pub reasoning: Lenient<String>,
    #[serde(default)]
    pub tool_calls: Lenient<Vec<CallFragment>>,
}

/// A piece of a streamed call: its start (id and name), arguments, or both.
#[derive(Debug, Default, Deserialize)]
pub struct CallFragment {
    /// Missing on servers that send each call whole (its position counts).
    #[serde(default)]
    pub index: Lenient<usize>,
    #[serde(default)]
    pub id: Lenient<String>,
    #[serde(default)]
    pub function: Option<FunctionFragment>,
}

#[derive(Debug, Default, Deserialize)]
pub struct FunctionFragment {
    #[serde(default)]
    pub name: Lenient<String>,
    #[serde(default)]
    pub arguments: Lenient<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ChunkUsage {
    #[serde(default)]
    pub prompt_tokens: Lenient<u64>,
    #[serde(default)]
    pub completion_tokens: Lenient<u64>,
    #[serde(default)]
    pub prompt_tokens_details: Lenient<PromptTokensDetails>,
}

#[derive(Debug, Default, Deserialize)]
pub struct PromptTokensDetails {
    /// The part of the prompt read from the prompt cache.
    #[serde(default)]
    pub cached_tokens: Lenient<u64>,
}

/// An error object: `{"message": "…", "code": 429}`, each part optional.
#[derive(Debug, Default, Deserialize)]
pub struct ErrorObject {
    #[serde(default)]
    pub message: Lenient<String>,
    /// OpenRouter and vLLM put an HTTP-like status here; OpenAI a word.
    #[serde(default)]
    pub code: Lenient<u64>,
}

/// `GET /models`: `{"data": [{"id": …}]}`; some servers say `models`
/// and `name`. Entries that are not models are skipped.
#[derive(Debug, Default, Deserialize)]
pub struct ModelList {
    #[serde(default)]
    pub data: Lenient<Vec<Lenient<ModelEntry>>>,
    #[serde(default)]
    pub models: Lenient<Vec<Lenient<ModelEntry>>>,
}

#[derive(Debug, Deserialize)]
pub struct ModelEntry {
    #[serde(default)]
    pub id: Lenient<String>,
    #[serde(default)]
    pub name: Lenient<String>,
    /// llama.cpp: `n_ctx`, the window one request gets, and `n_ctx_train`.
    #[serde(default)]
    pub meta: Lenient<ModelMeta>,
    /// LM Studio.
    #[serde(default)]
    pub max_context_length: Lenient<u64>,
    #[serde(default)]
    pub context_length: Lenient<u64>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ModelMeta {
    #[serde(default)]
    pub n_ctx: Lenient<u64>,
    #[serde(default)]
    pub n_ctx_train: Lenient<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::ToolDefinition;
    use serde_json::json;

    /// The body's text is what `json!` made before these types: the same
    /// keys in the same order, so prompt caches see the same bytes.
    #[test]
    fn a_full_request_is_written_as_before() {
        let tool = ToolDefinition {
            name: "read_file".into(),
            description: "reads".into(),
            parameters: json!({"type": "object"}),
        };
        let envelope = Envelope {
            model: "m",
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            max_tokens: Some(100),
            temperature: Some(0.5),
            reasoning_effort: Some("low"),
            prompt_cache_key: Some("s"),
            id_slot: Some(SlotId(1)),
            tools: vec![FunctionTool::new(&tool)],
            tool_choice: Some(ToolChoice::Function(FunctionEntry::of(FunctionName {
                name: "read_file",
            }))),
        };
        let mut before = json!({
            "model": "m",
            "stream": true,
            "stream_options": { "include_usage": true },
        });
        before["max_tokens"] = json!(100);
        before["temperature"] = json!(0.5);
        before["reasoning_effort"] = json!("low");
        before["prompt_cache_key"] = json!("s");
        before["id_slot"] = json!(1);
        before["tools"] = json!([{"type": "function", "function": {"name": "read_file", "description": "reads", "parameters": {"type": "object"}}}]);
        before["tool_choice"] = json!({ "type": "function", "function": { "name": "read_file" } });
        assert_eq!(json!(envelope).to_string(), before.to_string());
        let messages = [
            (
                json!(WireMessage::User {
                    content: UserContent::Parts(vec![
                        ContentPart::Text { text: "look" },
                        ContentPart::ImageUrl {
                            image_url: ImageUrl {
                                url: "data:x".into()
                            }
                        },
                    ])
                }),
                json!({"role": "user", "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:x"}},
                ]}),
            ),
            (
                json!(WireMessage::Tool {
                    tool_call_id: "c",
                    content: "r"
                }),
                json!({"role": "tool", "tool_call_id": "c", "content": "r"}),
            ),
            (
                json!(WireMessage::Assistant {
                    content: "t".into(),
                    tool_calls: vec![ToolCall {
                        id: "c",
                        call: FunctionEntry::of(CalledFunction {
                            name: "n",
                            arguments: "{}"
                        }),
                    }],
                }),
                json!({"role": "assistant", "content": "t", "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "n", "arguments": "{}"}},
                ]}),
            ),
        ];
        for (now, before) in messages {
            assert_eq!(now.to_string(), before.to_string());
        }
    }

    /// Every recorded stream reads into chunks.
    #[test]
    fn recorded_streams_read_as_chunks() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/openai");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let payloads = text.lines().filter_map(|line| line.strip_prefix("data: "));
            for data in payloads.filter(|data| *data != "[DONE]") {
                let chunk: Result<Chunk, _> = serde_json::from_str(data);
                assert!(chunk.is_ok(), "{}: {data}: {chunk:?}", path.display());
            }
        }
    }
}
