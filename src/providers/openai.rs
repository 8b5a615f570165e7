//! OpenAI-compatible chat completions: `POST {endpoint}/chat/completions`
//! with `stream: true`, read as server-sent events. Serves OpenAI, llama.cpp,
//! vLLM, LM Studio, OpenRouter, and Ollama's `/v1`. The wire types are in
//! [`wire`]; here they are made from a [`ChatRequest`] and read into
//! [`ProviderEvent`]s.

pub mod wire;

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::Reasoning;
use super::encoded::{EncodedMessages, with_array_field};
use super::function_tools::{FunctionEntry, function_tools};
use super::http::{ModelListError, WireFormat};
use super::lenient::Lenient;
use super::settings::ProviderSettings;
use super::slots::SlotId;
use super::stream::{Decoded, Framing, Progress, StreamError, WireDecoder};
use super::{
    ChatRequest, FinishReason, Message, ModelInfo, Part, ProviderEvent, Role, ToolChoice, Usage,
};
use wire::{
    CallFragment, CalledFunction, ChoiceMode, Chunk, ContentPart, Delta, Envelope, ErrorObject,
    FunctionName, ImageUrl, ModelList, StreamOptions, UserContent, WireMessage,
};

/// Chat completions over server-sent events.
#[derive(Default)]
pub struct OpenAiFormat {
    /// Past messages as already-encoded JSON (see `encoded`).
    encoded: EncodedMessages,
}

impl WireFormat for OpenAiFormat {
    type Decoder = StreamDecoder;
    const CHAT_PATH: &'static str = "/chat/completions";
    const MODELS_PATH: &'static str = "/models";
    const CHOOSES_SLOT: bool = true;

    fn request_text(
        &self,
        request: &ChatRequest,
        settings: &ProviderSettings,
        slot: Option<SlotId>,
    ) -> String {
        let cache_key = (request.cache_key.as_deref()).filter(|_| settings.sends_cache_key());
        let extras = Extras {
            temperature: settings.temperature,
            cache_key,
            slot,
        };
        request_text(request, &extras, &self.encoded)
    }

    fn parse_models(&self, body: &Value) -> Result<Vec<ModelInfo>, ModelListError> {
        parse_models(body)
    }
}

/// The JSON body of a streamed chat completion.
pub fn request_body(request: &ChatRequest) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(system_message(system));
    }
    for message in &request.messages {
        encode_message(message, &mut messages);
    }
    let mut body = json!(envelope(request, &Extras::default()));
    body["messages"] = Value::Array(messages);
    body
}

/// What the sent body adds to [`request_body`]: the configured
/// `temperature`, the `prompt_cache_key` for servers that take one, and
/// llama.cpp's `id_slot`.
#[derive(Debug, Default)]
pub struct Extras<'a> {
    pub temperature: Option<f64>,
    pub cache_key: Option<&'a str>,
    pub slot: Option<SlotId>,
}

/// [`request_body`] as the text sent, with its [`Extras`], and past
/// messages copied from `cache` instead of encoded again.
pub fn request_text(request: &ChatRequest, extras: &Extras, cache: &EncodedMessages) -> String {
    let past = cache.join(&request.messages, encode_message);
    let items = match &request.system {
        Some(system) if past.is_empty() => system_message(system).to_string(),
        Some(system) => format!("{},{past}", system_message(system)),
        None => past,
    };
    with_array_field(&json!(envelope(request, extras)), "messages", &items)
}

fn system_message(system: &str) -> Value {
    json!(WireMessage::System { content: system })
}

/// Everything in the body but the messages.
fn envelope<'a>(request: &'a ChatRequest, extras: &Extras<'a>) -> Envelope<'a> {
    let tool_choice = match &request.tool_choice {
        _ if request.tools.is_empty() => None,
        ToolChoice::Auto => Some(wire::ToolChoice::Mode(ChoiceMode::Auto)),
        ToolChoice::Required => Some(wire::ToolChoice::Mode(ChoiceMode::Required)),
        ToolChoice::None => Some(wire::ToolChoice::Mode(ChoiceMode::None)),
        ToolChoice::Specific(name) => Some(wire::ToolChoice::Function(FunctionEntry::of(
            FunctionName { name },
        ))),
    };
    Envelope {
        model: &request.model,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        max_tokens: request.max_output_tokens,
        temperature: extras.temperature,
        reasoning_effort: request.reasoning.and_then(Reasoning::effort),
        prompt_cache_key: extras.cache_key,
        id_slot: extras.slot,
        tools: function_tools(&request.tools),
        tool_choice,
    }
}

fn encode_message(message: &Message, out: &mut Vec<Value>) {
    match message.role {
        Role::User => {
            // Tool results are separate `tool` messages; the rest is one user message.
            let mut content = Vec::new();
            for part in &message.parts {
                match part {
                    Part::Text { text } => content.push(ContentPart::Text { text }),
                    Part::Image { mime_type, data } => content.push(ContentPart::ImageUrl {
                        image_url: ImageUrl {
                            url: format!("data:{mime_type};base64,{data}"),
                        },
                    }),
                    Part::ToolResult {
                        call_id,
                        content: result,
                        ..
                    } => out.push(json!(WireMessage::Tool {
                        tool_call_id: call_id,
                        content: result,
                    })),
                    Part::Thinking { .. }
                    | Part::RedactedThinking { .. }
                    | Part::ToolCall { .. } => {}
                }
            }
            let content = match content.as_slice() {
                [] => return,
                // Plain string content is what every server accepts.
                [ContentPart::Text { text }] => UserContent::Text(text),
                _ => UserContent::Parts(content),
            };
            out.push(json!(WireMessage::User { content }));
        }
        Role::Assistant => out.push(json!(WireMessage::Assistant {
            content: message.text(),
            tool_calls: message.parts.iter().filter_map(tool_call_entry).collect(),
        })),
    }
}

/// A `tool_calls` entry for a call part.
fn tool_call_entry(part: &Part) -> Option<wire::ToolCall<'_>> {
    let Part::ToolCall {
        id,
        name,
        arguments,
    } = part
    else {
        return None;
    };
    // Arguments the model cut short were already answered with an error;
    // servers that parse the history (llama-server) reject them, so send an
    // empty object.
    let valid = serde_json::from_str::<Value>(arguments).is_ok_and(|value| value.is_object());
    let arguments = if valid { arguments.as_str() } else { "{}" };
    Some(wire::ToolCall {
        id,
        call: FunctionEntry::of(CalledFunction { name, arguments }),
    })
}

/// Turns the `data:` payloads of a chat-completions stream into events.
/// Pure, so every quirk is tested without a server.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    progress: Progress,
    /// Tool calls by the server's `index`.
    open_calls: BTreeMap<usize, OpenCall>,
    /// The index the next new call goes out under.
    next_index: usize,
}

/// A streamed call not yet closed.
#[derive(Debug)]
struct OpenCall {
    /// The index its events carry (the server's may be reused).
    index: usize,
    /// Its id, once announced.
    id: Option<String>,
    /// Arguments that came before its name.
    early: String,
}

impl WireDecoder for StreamDecoder {
    const FRAMING: Framing = Framing::Sse;
    const CUT_OFF: &'static str = "the connection closed without a finish reason or [DONE]";

    fn on_event(&mut self, event: &str, data: &str) -> Vec<Decoded> {
        if data == "[DONE]" {
            self.progress.done = true;
            let mut out: Vec<_> = self.close_calls().into_iter().map(Ok).collect();
            if !self.progress.saw_anything {
                out.push(Err(StreamError::Empty));
            }
            return out;
        }
        let chunk: Chunk = match serde_json::from_str(data) {
            // serde reads a struct from an array too; a chunk is an object.
            Ok(chunk) if data.starts_with('{') => chunk,
            Err(err) if !err.is_data() => {
                return vec![Err(StreamError::not_json("event", &err, data))];
            }
            // JSON, but no chunk (not an object): it carries nothing.
            _ => Chunk::default(),
        };
        if let Some(error) = &chunk.error {
            return vec![Err(remote_error(error))];
        }
        // An `error` event whose data is the error object itself.
        if event == "error" {
            let error = serde_json::from_str(data).unwrap_or_default();
            return vec![Err(remote_error(&error))];
        }
        let mut out = Vec::new();
        if let Some(choice) = chunk.choices.into_iter().flatten().next() {
            if let Some(delta) = choice.delta {
                self.on_delta(delta, &mut out);
            }
            if let Some(reason) = choice.finish_reason.as_ref() {
                self.on_finish(reason, &mut out);
            }
        }
        if let Some(usage) = chunk.usage.into_option() {
            let count = |count: Lenient<u64>| count.into_option().unwrap_or(0);
            let details = usage
                .prompt_tokens_details
                .into_option()
                .unwrap_or_default();
            out.push(ProviderEvent::Usage(Usage {
                prompt_tokens: count(usage.prompt_tokens),
                completion_tokens: count(usage.completion_tokens),
                cached_prompt_tokens: count(details.cached_tokens),
                cache_written_prompt_tokens: 0,
            }));
        }
        out.into_iter().map(Ok).collect()
    }

    fn progress(&self) -> Progress {
        self.progress
    }

    /// Some servers end after the finish chunk without `[DONE]`; nothing is lost.
    fn close(&mut self) -> Vec<ProviderEvent> {
        self.close_calls()
    }
}

/// An `error` chunk: the message, and whether the code says to retry.
fn remote_error(error: &Value) -> StreamError {
    let object = ErrorObject::deserialize(error).unwrap_or_default();
    // LM Studio sends the message as the error itself.
    let detail = (object.message.into_option())
        .or_else(|| error.as_str().map(str::to_string))
        .unwrap_or_else(|| error.to_string());
    // OpenRouter and vLLM report upstream overloads this way.
    let transient = (object.code.into_option()).is_some_and(|code| code == 429 || code >= 500);
    StreamError::Remote { detail, transient }
}

impl StreamDecoder {
    fn on_finish(&mut self, reason: &str, out: &mut Vec<ProviderEvent>) {
        out.extend(self.close_calls());
        self.progress.saw_anything = true;
        self.progress.finished = true;
        out.push(ProviderEvent::Finish(match reason {
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "tool_calls" | "function_call" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::Refusal,
            other => FinishReason::Other(other.to_string()),
        }));
    }

    fn on_delta(&mut self, delta: Delta, out: &mut Vec<ProviderEvent>) {
        let text = |field: &Lenient<String>| field.text().map(str::to_string);
        // llama.cpp and vLLM send `reasoning_content`; OpenRouter sends `reasoning`.
        let said: Vec<_> = [&delta.reasoning_content, &delta.reasoning]
            .into_iter()
            .filter_map(text)
            .map(ProviderEvent::ThinkingDelta)
            .chain(text(&delta.content).map(ProviderEvent::TextDelta))
            .collect();
        self.progress.saw_anything |= !said.is_empty();
        out.extend(said);
        let calls = delta.tool_calls.into_option().into_iter().flatten();
        for (position, call) in calls.enumerate() {
            self.on_call_fragment(position, call, out);
        }
    }

    /// A piece of a tool call: its start (id and name), arguments, or both.
    fn on_call_fragment(
        &mut self,
        position: usize,
        call: CallFragment,
        out: &mut Vec<ProviderEvent>,
    ) {
        self.progress.saw_anything = true;
        let index = call.index.into_option().unwrap_or(position);
        let function = call.function.unwrap_or_default();
        let arguments = function.arguments.as_ref().map_or("", String::as_str);
        let id = call.id.text();
        // Ollama's `/v1` gives every call of an answer index 0 (ollama
        // #15457, after #7881 where it gave none): a new id at an index in
        // use starts a new call.
        if let Some(open) = self.open_calls.get(&index)
            && let (Some(new), Some(current)) = (id, open.id.as_deref())
            && new != current
        {
            out.push(ProviderEvent::ToolCallEnd { index: open.index });
            self.open_calls.remove(&index);
        }
        let next = self.next_index;
        let open = self.open_calls.entry(index).or_insert_with(|| OpenCall {
            index: next,
            id: None,
            early: String::new(),
        });
        if open.index == next {
            self.next_index += 1;
        }
        let index = open.index;
        if open.id.is_none() {
            let (Some(id), Some(name)) = (id, function.name.text()) else {
                // Arguments before the name arrived: hold them until it does.
                open.early.push_str(arguments);
                return;
            };
            open.id = Some(id.to_string());
            out.push(ProviderEvent::ToolCallStart {
                index,
                id: id.to_string(),
                name: name.to_string(),
            });
            if !open.early.is_empty() {
                out.push(ProviderEvent::ToolCallArgumentsDelta {
                    index,
                    delta: std::mem::take(&mut open.early),
                });
            }
        }
        if !arguments.is_empty() {
            out.push(ProviderEvent::ToolCallArgumentsDelta {
                index,
                delta: arguments.to_string(),
            });
        }
    }

    fn close_calls(&mut self) -> Vec<ProviderEvent> {
        let calls = std::mem::take(&mut self.open_calls);
        calls
            .into_values()
            .filter(|call| call.id.is_some())
            .map(|call| ProviderEvent::ToolCallEnd { index: call.index })
            .collect()
    }
}

/// `GET /models`: `{"data":[{"id":…}]}`. llama.cpp adds `meta.n_ctx` (the
/// window one request gets) and `meta.n_ctx_train`; LM Studio adds
/// `max_context_length`.
pub fn parse_models(value: &Value) -> Result<Vec<ModelInfo>, ModelListError> {
    let list = ModelList::deserialize(value).unwrap_or_default();
    let entries = (list.data.into_option())
        .or(list.models.into_option())
        .ok_or(ModelListError::NoArray("data"))?;
    Ok(entries
        .into_iter()
        .filter_map(Lenient::into_option)
        .filter_map(|entry| {
            let meta = entry.meta.into_option().unwrap_or_default();
            let context_window = (meta.n_ctx.into_option())
                .or(entry.max_context_length.into_option())
                .or(entry.context_length.into_option())
                .or(meta.n_ctx_train.into_option());
            Some(ModelInfo {
                id: entry.id.into_option().or(entry.name.into_option())?,
                context_window,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::ProviderError;
    use crate::providers::testing::*;
    use std::sync::Arc;

    fn decode(events: &[&str]) -> Vec<Result<ProviderEvent, ProviderError>> {
        let events: Vec<(&str, &str)> = events.iter().map(|data| ("", *data)).collect();
        decode_all::<StreamDecoder>(&events)
    }

    /// The payloads decode to `expected`, and to nothing else.
    fn assert_decodes(payloads: &[&str], expected: Vec<ProviderEvent>) {
        let expected: Vec<_> = expected.into_iter().map(Ok).collect();
        assert_eq!(decode(payloads), expected);
    }

    #[test]
    fn errors_inside_the_stream_say_what_the_server_said() {
        for (event, data) in [
            // LM Studio: the message as the error itself.
            ("", r#"{"error":"context length of only 4096 tokens"}"#),
            (
                "",
                r#"{"error":{"message":"context length of only 4096 tokens"}}"#,
            ),
            (
                "error",
                r#"{"message":"context length of only 4096 tokens"}"#,
            ),
        ] {
            let decoded = StreamDecoder::default().on_event(event, data);
            assert_eq!(
                decoded,
                vec![Err(StreamError::Remote {
                    detail: "context length of only 4096 tokens".into(),
                    transient: false,
                })],
                "{event} {data}"
            );
        }
    }

    #[test]
    fn text_reasoning_finish_and_usage() {
        assert_decodes(
            &[
                r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}"#,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#,
                "[DONE]",
            ],
            vec![
                ProviderEvent::ThinkingDelta("hmm".into()),
                ProviderEvent::TextDelta("Hel".into()),
                ProviderEvent::TextDelta("lo".into()),
                ProviderEvent::Finish(FinishReason::Length),
                usage_event(12, 3),
            ],
        );
    }

    #[test]
    fn tool_call_fragments_are_assembled_by_index() {
        assert_decodes(
            &[
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":""}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_b","function":{"name":"grep","arguments":"{\"q\""}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.rs\"}"}}]}}]}"#,
                r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
                "[DONE]",
            ],
            vec![
                call_start(0, "call_a", "read_file"),
                call_start(1, "call_b", "grep"),
                call_args(1, "{\"q\""),
                call_args(0, "{\"path\":"),
                call_args(0, "\"a.rs\"}"),
                ProviderEvent::ToolCallEnd { index: 0 },
                ProviderEvent::ToolCallEnd { index: 1 },
                ProviderEvent::Finish(FinishReason::ToolCalls),
            ],
        );
    }

    /// Ollama's `/v1` streams every call of an answer at index 0, each with
    /// its own id (ollama #15457): they are separate calls.
    #[test]
    fn calls_that_all_carry_index_zero_are_split_by_id() {
        assert_decodes(
            &[
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"a.py\"}"}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"write_file","arguments":"{\"path\":"}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"b.py\"}"}}]}}]}"#,
                r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
                "[DONE]",
            ],
            vec![
                call_start(0, "call_a", "write_file"),
                call_args(0, "{\"path\":\"a.py\"}"),
                ProviderEvent::ToolCallEnd { index: 0 },
                call_start(1, "call_b", "write_file"),
                call_args(1, "{\"path\":"),
                call_args(1, "\"b.py\"}"),
                ProviderEvent::ToolCallEnd { index: 1 },
                ProviderEvent::Finish(FinishReason::ToolCalls),
            ],
        );
    }

    #[test]
    fn endings_that_lose_data_are_errors() {
        let cut = decode(&[r#"{"choices":[{"delta":{"content":"Hel"}}]}"#]);
        assert!(matches!(cut.last(), Some(Err(e)) if e.to_string().contains("ended before")));
        let empty = decode(&["[DONE]"]);
        assert!(matches!(empty.last(), Some(Err(e)) if e.to_string().contains("empty stream")));
        let nothing = decode(&[]);
        assert!(matches!(nothing.last(), Some(Err(e)) if e.to_string().contains("empty stream")));
        let remote = decode(&[r#"{"error":{"message":"overloaded"}}"#]);
        assert!(matches!(remote.first(), Some(Err(e)) if e.to_string().contains("overloaded")));
        let garbage = decode(&["{not json"]);
        assert!(matches!(garbage.first(), Some(Err(e)) if e.to_string().contains("not JSON")));
    }

    #[test]
    fn finish_without_done_is_tolerated() {
        let events = decode(&[
            r#"{"choices":[{"delta":{"content":"ok"}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        ]);
        assert!(events.iter().all(Result::is_ok), "{events:?}");
    }

    #[test]
    fn request_body_carries_system_history_and_usage_option() {
        let request = chat_request(
            "m",
            Some("be brief"),
            vec![
                Message::user_text("hi"),
                Message::assistant_text("hello"),
                Message {
                    role: Role::User,
                    parts: vec![text("look"), png("AAAA")],
                },
            ],
        );
        let body = request_body(&request);
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(
            body["messages"][0],
            json!({"role":"system","content":"be brief"})
        );
        assert_eq!(body["messages"][1], json!({"role":"user","content":"hi"}));
        assert_eq!(
            body["messages"][2],
            json!({"role":"assistant","content":"hello"})
        );
        assert_eq!(
            body["messages"][3]["content"][1]["image_url"]["url"],
            "data:image/png;base64,AAAA"
        );
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn cut_off_tool_arguments_go_back_as_an_empty_object() {
        let request = chat_request(
            "m",
            None,
            vec![Message {
                role: Role::Assistant,
                parts: vec![
                    tool_call("a", "read_file", r#"{"path":"x"}"#),
                    tool_call("b", "read_file", r#"{"path":"#),
                ],
            }],
        );
        let body = request_body(&request);
        let calls = &body["messages"][0]["tool_calls"];
        assert_eq!(calls[0]["function"]["arguments"], r#"{"path":"x"}"#);
        assert_eq!(calls[1]["function"]["arguments"], "{}");
    }

    #[test]
    fn the_sent_text_is_the_body_and_reuses_past_messages() {
        use super::super::ToolDefinition;
        let cache = EncodedMessages::default();
        let mut messages = vec![
            Arc::new(Message::user_text("look at \"this\"")),
            Arc::new(Message {
                role: Role::Assistant,
                parts: vec![tool_call("a", "read_file", r#"{"path":"#)],
            }),
            Arc::new(Message {
                role: Role::User,
                parts: vec![tool_result("a", "x", false), png("AAAA")],
            }),
        ];
        for turn in 0..3 {
            let request = ChatRequest {
                model: "m".into(),
                system: (turn != 1).then(|| "be brief".to_string()),
                messages: messages.clone(),
                tools: vec![ToolDefinition {
                    name: "read_file".into(),
                    description: "reads".into(),
                    parameters: json!({"type": "object"}),
                }],
                tool_choice: ToolChoice::Required,
                max_output_tokens: Some(100),
                context_window: None,
                reasoning: None,
                cache_key: None,
            };
            let sent: Value =
                serde_json::from_str(&request_text(&request, &Extras::default(), &cache)).unwrap();
            assert_eq!(sent, request_body(&request), "turn {turn}");
            assert!(sent.get("prompt_cache_key").is_none());
            assert!(sent.get("id_slot").is_none());
            // The configured temperature, the cache key and the slot are the differences.
            let extras = Extras {
                temperature: Some(0.3),
                cache_key: Some("session-1"),
                slot: Some(SlotId(1)),
            };
            let warm: Value =
                serde_json::from_str(&request_text(&request, &extras, &cache)).unwrap();
            assert_eq!(warm["temperature"], 0.3);
            assert_eq!(warm["prompt_cache_key"], "session-1");
            assert_eq!(warm["id_slot"], 1);
            assert_eq!(warm["messages"], sent["messages"]);
            messages.push(Arc::new(Message::assistant_text(format!("answer {turn}"))));
        }
    }

    #[test]
    fn models_list_reads_context_windows() {
        let body = r#"{"object":"list","data":[{"id":"smollm2-135m","object":"model","meta":{"n_ctx":4096,"n_ctx_train":8192}},{"id":"gpt-4o"}]}"#;
        let body: Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            parse_models(&body).unwrap(),
            vec![
                ModelInfo {
                    id: "smollm2-135m".into(),
                    context_window: Some(4096)
                },
                ModelInfo {
                    id: "gpt-4o".into(),
                    context_window: None
                },
            ]
        );
        assert!(parse_models(&json!([])).is_err());
    }
}
