//! Anthropic Messages API: `POST {endpoint}/v1/messages` with `stream: true`,
//! read as server-sent events. Serves api.anthropic.com and servers that speak
//! the same format (llama-server's `/v1/messages`, proxies). The request
//! and stream types are in [`wire`]; here they are made from a
//! [`ChatRequest`] and read into [`ProviderEvent`]s.

pub mod wire;

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::Reasoning;
use super::http::{ModelListError, WireFormat};
use super::lenient::Lenient;
use super::settings::ProviderSettings;
use super::slots::SlotId;
use super::stream::{Decoded, Framing, Progress, StreamError, WireDecoder};
use super::{
    ChatRequest, FinishReason, Message, ModelInfo, Part, ProviderEvent, Role, ToolChoice, Usage,
};
use crate::util::truncate;
use wire::{
    BlockDelta, BlockStart, CacheControl, ContentBlock, ErrorObject, Event, ImageSource,
    MessageDeltaBody, MessagesRequest, ModelList, SystemPrompt, Thinking, Tool, Turn, TurnRole,
    WireUsage,
};

/// The Messages API version this client speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The Messages API over server-sent events.
#[derive(Default)]
pub struct AnthropicFormat;

impl WireFormat for AnthropicFormat {
    type Decoder = StreamDecoder;
    const CHAT_PATH: &'static str = "/v1/messages";
    // The list is paged (20 by default); one page of the maximum size holds them all.
    const MODELS_PATH: &'static str = "/v1/models?limit=1000";

    fn request_text(
        &self,
        request: &ChatRequest,
        settings: &ProviderSettings,
        _slot: Option<SlotId>,
    ) -> String {
        json!(messages_request(request, settings)).to_string()
    }

    fn parse_models(&self, body: &Value) -> Result<Vec<ModelInfo>, ModelListError> {
        parse_models(body)
    }

    /// Anthropic's own headers; a local server without a key gets no key header.
    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        key: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let request = request.header("anthropic-version", ANTHROPIC_VERSION);
        match key {
            Some(key) => request.header("x-api-key", key),
            None => request,
        }
    }
}

/// `max_tokens` when neither the request nor the config sets it (the API
/// requires one): the Claude 3 generation caps output at 4096, later ones
/// allow at least 8192.
pub fn default_max_tokens(model: &str) -> u32 {
    let claude_3 = model.starts_with("claude-3-")
        && !model.starts_with("claude-3-5")
        && !model.starts_with("claude-3-7");
    if claude_3 { 4096 } else { 8192 }
}

/// The body as sent: [`request_body`]'s with the configured `temperature`
/// and the prompt-cache breakpoints.
pub fn messages_request<'a>(
    request: &'a ChatRequest,
    settings: &ProviderSettings,
) -> MessagesRequest<'a> {
    let mut body = typed_body(request, settings.max_output_tokens);
    body.temperature = settings.temperature;
    mark_cache_breakpoints(&mut body);
    // The `json!` body this replaces ended in `"tools": null` when it had no
    // tools; the same bytes keep the prompt cache and the servers' view as before.
    body.no_tools = body.tools.is_empty().then_some(());
    body
}

/// The JSON body of a streamed Messages call, before the configured
/// temperature and the cache breakpoints. `configured_max_tokens` is the
/// provider config's `max_output_tokens`.
pub fn request_body(request: &ChatRequest, configured_max_tokens: Option<u32>) -> Value {
    json!(typed_body(request, configured_max_tokens))
}

fn typed_body(request: &ChatRequest, configured_max_tokens: Option<u32>) -> MessagesRequest<'_> {
    let max_tokens = request
        .max_output_tokens
        .or(configured_max_tokens)
        .unwrap_or_else(|| default_max_tokens(&request.model));
    let tools: Vec<Tool<'_>> = (request.tools.iter())
        .map(|tool| Tool {
            name: &tool.name,
            description: &tool.description,
            input_schema: &tool.parameters,
            cache_control: None,
        })
        .collect();
    let tool_choice = (!tools.is_empty()).then(|| tool_choice(&request.tool_choice));
    // Extended thinking cannot be combined with a forced tool choice.
    let free_choice = matches!(request.tool_choice, ToolChoice::Auto | ToolChoice::None);
    let budget = (request.reasoning.and_then(Reasoning::thinking_budget)).filter(|_| free_choice);
    MessagesRequest {
        model: &request.model,
        max_tokens: match budget {
            // `max_tokens` counts the thinking too and must exceed its budget.
            Some(budget) if max_tokens <= budget => budget + max_tokens,
            _ => max_tokens,
        },
        stream: true,
        messages: encode_messages(&request.messages),
        system: (request.system.as_deref())
            .filter(|system| !system.is_empty())
            .map(SystemPrompt::Text),
        tools,
        tool_choice,
        thinking: budget.map(|budget_tokens| Thinking::Enabled { budget_tokens }),
        temperature: None,
        no_tools: None,
    }
}

fn tool_choice(choice: &ToolChoice) -> wire::ToolChoice<'_> {
    match choice {
        ToolChoice::Auto => wire::ToolChoice::Auto,
        ToolChoice::Required => wire::ToolChoice::Any,
        ToolChoice::None => wire::ToolChoice::None,
        ToolChoice::Specific(name) => wire::ToolChoice::Tool { name },
    }
}

/// Prompt caching: a breakpoint after the tools, after the system prompt
/// and at the end of the latest turn (the API allows four). The tools and
/// system prompt are the same in every call, and each call's history starts
/// with the last one's, so each request reads what the one before wrote.
fn mark_cache_breakpoints(body: &mut MessagesRequest<'_>) {
    if let Some(tool) = body.tools.last_mut() {
        tool.cache_control = Some(CacheControl::Ephemeral);
    }
    if let Some(SystemPrompt::Text(text)) = body.system {
        body.system = Some(SystemPrompt::Blocks(vec![ContentBlock::Text {
            text,
            cache_control: Some(CacheControl::Ephemeral),
        }]));
    }
    // Thinking blocks cannot carry a breakpoint; the block before them can.
    let latest = (body.messages.last_mut())
        .and_then(|turn| (turn.content.iter_mut().rev()).find_map(ContentBlock::cache_control_mut));
    if let Some(mark) = latest {
        *mark = Some(CacheControl::Ephemeral);
    }
}

/// The history as alternating user/assistant turns: the API rejects two
/// turns of the same role in a row and turns with no content.
fn encode_messages(messages: &[std::sync::Arc<Message>]) -> Vec<Turn<'_>> {
    let mut turns: Vec<(Role, Vec<ContentBlock<'_>>)> = Vec::new();
    for message in messages {
        let blocks = encode_blocks(message);
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((role, existing)) if *role == message.role => existing.extend(blocks),
            _ => turns.push((message.role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, mut content)| {
            let role = match role {
                Role::User => TurnRole::User,
                Role::Assistant => TurnRole::Assistant,
            };
            // Tool results must open the user turn; keep the rest in order after them.
            content.sort_by_key(|block| !matches!(block, ContentBlock::ToolResult { .. }));
            Turn { role, content }
        })
        .collect()
}

/// The blocks a message contributes to its turn; parts the API would
/// reject in this role are left out.
fn encode_blocks(message: &Message) -> Vec<ContentBlock<'_>> {
    let mut blocks = Vec::with_capacity(message.parts.len());
    for part in &message.parts {
        let block = match (message.role, part) {
            // The API rejects empty text blocks.
            (_, Part::Text { text }) if text.is_empty() => continue,
            (_, Part::Text { text }) => ContentBlock::Text {
                text,
                cache_control: None,
            },
            (Role::User, Part::Image { mime_type, data }) => ContentBlock::Image {
                source: ImageSource::Base64 {
                    media_type: mime_type,
                    data,
                },
                cache_control: None,
            },
            (
                Role::User,
                Part::ToolResult {
                    call_id,
                    content,
                    is_error,
                },
            ) => ContentBlock::ToolResult {
                tool_use_id: call_id,
                content,
                is_error: *is_error,
                cache_control: None,
            },
            (
                Role::Assistant,
                Part::Thinking {
                    text,
                    signature: Some(signature),
                },
            ) => ContentBlock::Thinking {
                thinking: text,
                signature,
            },
            (Role::Assistant, Part::RedactedThinking { data }) => {
                ContentBlock::RedactedThinking { data }
            }
            (
                Role::Assistant,
                Part::ToolCall {
                    id,
                    name,
                    arguments,
                },
            ) => ContentBlock::ToolUse {
                id,
                name,
                input: tool_input(arguments),
                cache_control: None,
            },
            // Unsigned thinking came from another provider and would be
            // rejected; the rest has no place in this role.
            _ => continue,
        };
        blocks.push(block);
    }
    blocks
}

/// `input` must be an object; arguments the model left empty or broken become `{}`.
fn tool_input(arguments: &str) -> Map<String, Value> {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(object)) => object,
        _ => Map::new(),
    }
}

/// What is still open at a block index.
#[derive(Debug)]
enum Block {
    ToolUse {
        /// A complete `input` sent with the start, used if no deltas follow.
        start_input: Option<String>,
        streamed: bool,
    },
    Thinking {
        /// A signature sent with the start, used if no `signature_delta` follows.
        start_signature: Option<String>,
        signed: bool,
    },
}

/// Turns the events of a Messages stream into [`ProviderEvent`]s. Pure, so
/// every quirk is tested without a server. Events are told apart by the
/// `type` in their data: llama-server and proxies differ in `event:` names.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    /// The end marker is `message_stop`; the finish, a stop reason in `message_delta`.
    progress: Progress,
    usage_seen: bool,
    usage_sent: bool,
    prompt_tokens: u64,
    cached_prompt_tokens: u64,
    cache_written_prompt_tokens: u64,
    completion_tokens: u64,
    /// Open blocks by the server's `index`; blocks may interleave.
    blocks: BTreeMap<usize, Block>,
}

impl WireDecoder for StreamDecoder {
    const FRAMING: Framing = Framing::Sse;
    const CUT_OFF: &'static str = "the connection closed before message_stop";

    fn on_event(&mut self, event: &str, data: &str) -> Vec<Decoded> {
        let mut value: Value = match serde_json::from_str(data) {
            Ok(value) => value,
            Err(err) => return vec![Err(StreamError::not_json("event", &err, data))],
        };
        // Data without a `type` is told by its `event:` name.
        if let Value::Object(fields) = &mut value
            && !event.is_empty()
        {
            fields.entry("type").or_insert_with(|| Value::from(event));
        }
        let mut out = Vec::new();
        match Event::deserialize(&value).unwrap_or(Event::Other) {
            Event::MessageStart { message } => {
                if let Some(usage) = message.into_option().and_then(|m| m.usage.into_option()) {
                    self.usage_seen = true;
                    self.prompt_tokens = prompt_tokens(&usage);
                    self.cached_prompt_tokens = count(&usage.cache_read_input_tokens);
                    self.cache_written_prompt_tokens = count(&usage.cache_creation_input_tokens);
                    self.completion_tokens = count(&usage.output_tokens);
                }
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => self.on_block_start(block_index(&index), content_block.into_option(), &mut out),
            Event::ContentBlockDelta { index, delta } => {
                self.on_block_delta(block_index(&index), delta.into_option(), &mut out);
            }
            Event::ContentBlockStop { index } => {
                let index = block_index(&index);
                if let Some(block) = self.blocks.remove(&index) {
                    close_block(index, block, &mut out);
                }
            }
            Event::MessageDelta { usage, delta } => {
                self.on_message_delta(usage.into_option(), delta.into_option(), &mut out);
            }
            Event::MessageStop => {
                self.progress.done = true;
                self.close_blocks(&mut out);
                self.push_usage(&mut out);
            }
            Event::Error { error } => {
                return vec![Err(remote_error(error.as_ref().unwrap_or(&value)))];
            }
            // `ping` and event types added later carry nothing for us.
            Event::Other => return Vec::new(),
        }
        self.progress.saw_anything = true;
        out.into_iter().map(Ok).collect()
    }

    fn progress(&self) -> Progress {
        self.progress
    }

    /// The stop reason arrived, only the end marker is missing: nothing is lost.
    fn close(&mut self) -> Vec<ProviderEvent> {
        let mut out = Vec::new();
        self.close_blocks(&mut out);
        self.push_usage(&mut out);
        out
    }
}

impl StreamDecoder {
    fn on_message_delta(
        &mut self,
        usage: Option<WireUsage>,
        delta: Option<MessageDeltaBody>,
        out: &mut Vec<ProviderEvent>,
    ) {
        if let Some(usage) = usage {
            self.usage_seen = true;
            if let Some(output) = usage.output_tokens.as_ref() {
                self.completion_tokens = *output;
            }
            if count(&usage.input_tokens) > 0 {
                self.prompt_tokens = prompt_tokens(&usage);
                self.cached_prompt_tokens = count(&usage.cache_read_input_tokens);
                self.cache_written_prompt_tokens = count(&usage.cache_creation_input_tokens);
            }
        }
        if let Some(reason) = delta.and_then(|delta| delta.stop_reason.into_option()) {
            self.close_blocks(out);
            self.progress.finished = true;
            out.push(ProviderEvent::Finish(match reason.as_str() {
                "end_turn" | "stop_sequence" => FinishReason::Stop,
                "max_tokens" => FinishReason::Length,
                "tool_use" => FinishReason::ToolCalls,
                "refusal" => FinishReason::Refusal,
                other => FinishReason::Other(other.to_string()),
            }));
        }
    }

    fn on_block_start(
        &mut self,
        index: usize,
        block: Option<BlockStart>,
        out: &mut Vec<ProviderEvent>,
    ) {
        // A start on an index still open: the server skipped the stop.
        if let Some(previous) = self.blocks.remove(&index) {
            close_block(index, previous, out);
        }
        match block {
            Some(BlockStart::Text { text }) => push_text(out, &text, ProviderEvent::TextDelta),
            Some(BlockStart::Thinking {
                thinking,
                signature,
            }) => {
                push_text(out, &thinking, ProviderEvent::ThinkingDelta);
                self.blocks.insert(
                    index,
                    Block::Thinking {
                        start_signature: signature.text().map(str::to_string),
                        signed: false,
                    },
                );
            }
            Some(BlockStart::RedactedThinking { data }) => {
                push_text(out, &data, ProviderEvent::RedactedThinking);
            }
            Some(BlockStart::ToolUse { id, name, input }) => {
                let id =
                    (id.text().map(str::to_string)).unwrap_or_else(|| format!("toolu_{index}"));
                let name = name.into_option().unwrap_or_default();
                // llama-server may leave `input` out; the real API sends `{}`.
                let start_input = (input.into_option())
                    .filter(|input| !input.is_empty())
                    .map(|input| Value::Object(input).to_string());
                out.push(ProviderEvent::ToolCallStart { index, id, name });
                self.blocks.insert(
                    index,
                    Block::ToolUse {
                        start_input,
                        streamed: false,
                    },
                );
            }
            // Server-side tools run on Anthropic's side; nothing for the agent to do.
            Some(BlockStart::Other) | None => {}
        }
    }

    fn on_block_delta(
        &mut self,
        index: usize,
        delta: Option<BlockDelta>,
        out: &mut Vec<ProviderEvent>,
    ) {
        match delta {
            Some(BlockDelta::TextDelta { text }) => push_text(out, &text, ProviderEvent::TextDelta),
            Some(BlockDelta::ThinkingDelta { thinking }) => {
                push_text(out, &thinking, ProviderEvent::ThinkingDelta);
            }
            Some(BlockDelta::SignatureDelta { signature }) => {
                if let Some(signature) = signature.text() {
                    if let Some(Block::Thinking { signed, .. }) = self.blocks.get_mut(&index) {
                        *signed = true;
                    }
                    out.push(ProviderEvent::ThinkingSignature(signature.to_string()));
                }
            }
            Some(BlockDelta::InputJsonDelta { partial_json }) => {
                let Some(partial) = partial_json.text() else {
                    return;
                };
                // Arguments for a call that never started have nowhere to go.
                if let Some(Block::ToolUse { streamed, .. }) = self.blocks.get_mut(&index) {
                    *streamed = true;
                    out.push(ProviderEvent::ToolCallArgumentsDelta {
                        index,
                        delta: partial.to_string(),
                    });
                }
            }
            // `citations_delta` and later kinds are not shown.
            Some(BlockDelta::Other) | None => {}
        }
    }

    fn close_blocks(&mut self, out: &mut Vec<ProviderEvent>) {
        for (index, block) in std::mem::take(&mut self.blocks) {
            close_block(index, block, out);
        }
    }

    fn push_usage(&mut self, out: &mut Vec<ProviderEvent>) {
        if self.usage_seen && !self.usage_sent {
            self.usage_sent = true;
            out.push(ProviderEvent::Usage(Usage {
                prompt_tokens: self.prompt_tokens,
                completion_tokens: self.completion_tokens,
                cached_prompt_tokens: self.cached_prompt_tokens,
                cache_written_prompt_tokens: self.cache_written_prompt_tokens,
            }));
        }
    }
}

/// `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
fn remote_error(error: &Value) -> StreamError {
    let object = ErrorObject::deserialize(error).unwrap_or_default();
    let detail =
        (object.message.into_option()).unwrap_or_else(|| truncate(&error.to_string(), 300));
    let transient = matches!(
        object.kind.as_ref().map(String::as_str),
        Some("overloaded_error" | "api_error" | "rate_limit_error")
    );
    StreamError::Remote { detail, transient }
}

fn close_block(index: usize, block: Block, out: &mut Vec<ProviderEvent>) {
    match block {
        Block::ToolUse {
            start_input,
            streamed,
        } => {
            if let (Some(input), false) = (start_input, streamed) {
                out.push(ProviderEvent::ToolCallArgumentsDelta {
                    index,
                    delta: input,
                });
            }
            out.push(ProviderEvent::ToolCallEnd { index });
        }
        Block::Thinking {
            start_signature: Some(signature),
            signed: false,
        } => out.push(ProviderEvent::ThinkingSignature(signature)),
        Block::Thinking { .. } => {}
    }
}

fn block_index(index: &Lenient<usize>) -> usize {
    index.as_ref().copied().unwrap_or(0)
}

/// The text, as `event`, unless it is empty.
fn push_text(
    out: &mut Vec<ProviderEvent>,
    text: &Lenient<String>,
    event: fn(String) -> ProviderEvent,
) {
    if let Some(text) = text.text() {
        out.push(event(text.to_string()));
    }
}

fn count(count: &Lenient<u64>) -> u64 {
    count.as_ref().copied().unwrap_or(0)
}

/// Cached prompt tokens are counted apart from `input_tokens`; the window holds all of them.
fn prompt_tokens(usage: &WireUsage) -> u64 {
    count(&usage.input_tokens)
        + count(&usage.cache_creation_input_tokens)
        + count(&usage.cache_read_input_tokens)
}

/// `GET /v1/models`: `{"data":[{"id":…,"display_name":…}]}`. llama-server
/// adds `meta.n_ctx`, the window one request gets.
pub fn parse_models(value: &Value) -> Result<Vec<ModelInfo>, ModelListError> {
    let list = ModelList::deserialize(value).unwrap_or_default();
    let entries = list
        .data
        .into_option()
        .ok_or(ModelListError::NoArray("data"))?;
    Ok(entries
        .into_iter()
        .filter_map(Lenient::into_option)
        .filter_map(|entry| {
            let window = entry
                .meta
                .into_option()
                .and_then(|meta| meta.n_ctx.into_option());
            Some(ModelInfo {
                id: entry.id.into_option()?,
                context_window: window,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolDefinition;
    use crate::providers::Provider;
    use crate::providers::ProviderError;
    use crate::providers::http::HttpProvider;
    use crate::providers::stream::event_stream;
    use crate::providers::testing::*;
    use std::sync::Arc;

    type AnthropicProvider = HttpProvider<AnthropicFormat>;

    fn decode(events: &[(&str, &str)]) -> Vec<Result<ProviderEvent, ProviderError>> {
        decode_all::<StreamDecoder>(events)
    }

    /// SSE blocks separated by blank lines, with `event:` and `data:` lines.
    fn parse_sse(text: &str) -> Vec<(String, String)> {
        text.split("\n\n")
            .filter(|block| !block.trim().is_empty())
            .map(|block| {
                let mut event = String::new();
                let mut data: Vec<&str> = Vec::new();
                for line in block.lines() {
                    if let Some(name) = line.strip_prefix("event:") {
                        event = name.trim().to_string();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push(value.strip_prefix(' ').unwrap_or(value));
                    }
                }
                (event, data.join("\n"))
            })
            .collect()
    }

    /// What a stream added up to.
    #[derive(Debug, Default, PartialEq)]
    struct Outcome {
        text: String,
        thought: String,
        signatures: Vec<String>,
        /// (id, name, parsed arguments), in start order.
        calls: Vec<(String, String, Value)>,
        usage: Option<Usage>,
        finish: Option<FinishReason>,
        error: Option<String>,
    }

    fn outcome(events: Vec<Result<ProviderEvent, ProviderError>>) -> Outcome {
        let mut result = Outcome::default();
        let mut calls: Vec<(usize, String, String, String, bool)> = Vec::new();
        let mut usages = 0;
        for event in events {
            match event {
                Ok(ProviderEvent::TextDelta(text)) => result.text.push_str(&text),
                Ok(ProviderEvent::ThinkingDelta(text)) => result.thought.push_str(&text),
                Ok(ProviderEvent::ThinkingSignature(s)) => result.signatures.push(s),
                Ok(ProviderEvent::RedactedThinking(_)) => {}
                Ok(ProviderEvent::ToolCallStart { index, id, name }) => {
                    calls.push((index, id, name, String::new(), false));
                }
                Ok(ProviderEvent::ToolCallArgumentsDelta { index, delta }) => {
                    let call = calls.iter_mut().rev().find(|c| c.0 == index).unwrap();
                    assert!(!call.4, "arguments after the end of call {index}");
                    call.3.push_str(&delta);
                }
                Ok(ProviderEvent::ToolCallEnd { index }) => {
                    let call = calls.iter_mut().rev().find(|c| c.0 == index).unwrap();
                    assert!(!call.4, "call {index} ended twice");
                    call.4 = true;
                }
                Ok(ProviderEvent::Usage(usage)) => {
                    assert!(result.finish.is_some(), "usage before the finish");
                    usages += 1;
                    result.usage = Some(usage);
                }
                Ok(ProviderEvent::Finish(reason)) => {
                    assert!(result.finish.is_none(), "two finishes");
                    result.finish = Some(reason);
                }
                Err(err) => result.error = Some(err.to_string()),
            }
        }
        assert!(usages <= 1, "{usages} usage events");
        for (index, id, name, arguments, ended) in calls {
            if result.error.is_none() {
                assert!(ended, "call {index} never ended");
            }
            let arguments = serde_json::from_str(&arguments)
                .unwrap_or_else(|e| panic!("arguments of {name} ({arguments}): {e}"));
            result.calls.push((id, name, arguments));
        }
        result
    }

    fn fixture(name: &str) -> Outcome {
        let path = format!(
            "{}/tests/fixtures/anthropic/{name}.sse",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n'), "{path} must end with a newline");
        let events = parse_sse(&text);
        let borrowed: Vec<(&str, &str)> = events
            .iter()
            .map(|(e, d)| (e.as_str(), d.as_str()))
            .collect();
        outcome(decode(&borrowed))
    }

    #[test]
    fn fixtures_match_the_scenario_table() {
        let text = fixture("text");
        assert_eq!(
            text,
            Outcome {
                text: "Hello, world!".into(),
                usage: Some(usage(12, 4)),
                finish: Some(FinishReason::Stop),
                ..Outcome::default()
            }
        );

        let thinking = fixture("thinking");
        assert_eq!(
            thinking,
            Outcome {
                text: "The answer is 4.".into(),
                thought: "Let me think. 2+2=4.".into(),
                signatures: vec!["sig-abc123".into()],
                usage: Some(usage(20, 10)),
                finish: Some(FinishReason::Stop),
                ..Outcome::default()
            }
        );

        let tool_call = fixture("tool_call");
        assert_eq!(tool_call.text, "Reading the file.");
        assert_eq!(tool_call.calls.len(), 1);
        assert_eq!(tool_call.calls[0].1, "read_file");
        assert_eq!(tool_call.calls[0].2, json!({"path": "src/main.rs"}));
        assert_eq!(tool_call.usage, Some(usage(30, 15)));
        assert_eq!(tool_call.finish, Some(FinishReason::ToolCalls));
        assert_eq!(tool_call.error, None);

        let parallel = fixture("parallel_tool_calls");
        let calls: Vec<(&str, &Value)> = parallel
            .calls
            .iter()
            .map(|(_, name, args)| (name.as_str(), args))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("read_file", &json!({"path": "a.rs"})),
                ("grep", &json!({"pattern": "fn main", "path": "."})),
            ]
        );
        assert_ne!(parallel.calls[0].0, parallel.calls[1].0, "distinct ids");
        assert_eq!(parallel.usage, Some(usage(40, 20)));
        assert_eq!(parallel.finish, Some(FinishReason::ToolCalls));
        assert_eq!(parallel.error, None);

        let utf8 = fixture("utf8_arguments");
        assert_eq!(utf8.calls.len(), 1);
        assert_eq!(utf8.calls[0].1, "write_file");
        assert_eq!(
            utf8.calls[0].2,
            json!({"path": "é.txt", "content": "héllo wörld ✓ 🎉"})
        );
        assert_eq!(utf8.usage, Some(usage(25, 18)));
        assert_eq!(utf8.finish, Some(FinishReason::ToolCalls));
        assert_eq!(utf8.error, None);

        // Cut short: the text so far, no finish or usage, and why.
        for (name, says) in [
            ("error_mid_stream", "Overloaded"),
            ("dropped", "ended before it was complete"),
        ] {
            let cut = fixture(name);
            assert_eq!(cut.text, "Partial", "{name}");
            assert_eq!((cut.usage, cut.finish.as_ref()), (None, None), "{name}");
            let error = cut.error.unwrap_or_default();
            assert!(error.contains(says), "{name}: {error}");
        }
    }

    /// The same files through the real SSE framing, cut every 3 bytes (inside
    /// UTF-8 characters too): the outcome must not change.
    #[tokio::test]
    async fn fixtures_survive_real_framing_cut_into_small_chunks() {
        use futures::StreamExt;
        for name in [
            "text",
            "thinking",
            "tool_call",
            "parallel_tool_calls",
            "utf8_arguments",
            "error_mid_stream",
            "dropped",
        ] {
            let path = format!(
                "{}/tests/fixtures/anthropic/{name}.sse",
                env!("CARGO_MANIFEST_DIR")
            );
            let bytes = std::fs::read(&path).unwrap();
            let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
                bytes.chunks(3).map(|c| Ok(c.to_vec())).collect();
            let body = reqwest::Body::wrap_stream(futures::stream::iter(chunks));
            let response = reqwest::Response::from(axum::http::Response::new(body));
            let stream = event_stream(
                response,
                std::time::Duration::from_secs(5),
                "p".into(),
                StreamDecoder::default(),
            );
            let events: Vec<_> = stream.collect().await;
            assert_eq!(outcome(events), fixture(name), "{name}");
        }
    }

    #[test]
    fn cache_breakpoints_mark_tools_system_and_the_latest_turn_not_thinking() {
        let mut request = chat(vec![
            Message::user_text("hi"),
            Message {
                role: Role::Assistant,
                parts: vec![
                    text("ok"),
                    Part::Thinking {
                        text: "t".into(),
                        signature: Some("s".into()),
                    },
                ],
            },
        ]);
        request.system = Some("You are Crucible.".into());
        let tool = |name: &str| ToolDefinition {
            name: name.into(),
            description: String::new(),
            parameters: json!({}),
        };
        request.tools = vec![tool("a"), tool("b")];
        let mut typed = typed_body(&request, None);
        mark_cache_breakpoints(&mut typed);
        let body = json!(typed);
        let ephemeral = json!({"type": "ephemeral"});
        assert_eq!(body["tools"][1]["cache_control"], ephemeral);
        assert!(body["tools"][0].get("cache_control").is_none());
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "You are Crucible.", "cache_control": ephemeral}])
        );
        assert_eq!(
            body["messages"][1]["content"][0]["cache_control"],
            ephemeral
        );
        assert!(
            body["messages"][1]["content"][1]
                .get("cache_control")
                .is_none()
        );
        assert!(
            body["messages"][0]["content"][0]
                .get("cache_control")
                .is_none()
        );
        let marks = body.to_string().matches("cache_control").count();
        assert!(marks <= 4, "{marks} breakpoints");
    }

    /// The requests [`request_bodies_are_written_as_before`] sends: every
    /// block kind, each tool choice, thinking, temperature, and the bodies
    /// with nothing optional.
    fn capture_requests() -> Vec<(ChatRequest, ProviderSettings)> {
        let full = chat(vec![
            Message {
                role: Role::User,
                parts: vec![text("look"), png("AAAA")],
            },
            Message {
                role: Role::Assistant,
                parts: vec![
                    Part::Thinking {
                        text: "hmm".into(),
                        signature: Some("sig".into()),
                    },
                    Part::RedactedThinking { data: "ENC".into() },
                    text("reading"),
                    tool_call("toolu_1", "read_file", r#"{"path":"a"}"#),
                    tool_call("toolu_2", "read_file", "{broken"),
                ],
            },
            Message {
                role: Role::User,
                parts: vec![
                    text("and"),
                    tool_result("toolu_1", "A", false),
                    tool_result("toolu_2", "bad", true),
                ],
            },
            Message {
                role: Role::Assistant,
                parts: vec![
                    text("done"),
                    Part::Thinking {
                        text: "after".into(),
                        signature: Some("sig2".into()),
                    },
                ],
            },
        ]);
        let tools = vec![
            ToolDefinition {
                name: "read_file".into(),
                description: "Read a file".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            },
            ToolDefinition {
                name: "ls".into(),
                description: "List".into(),
                parameters: json!({"type": "object"}),
            },
        ];
        let settings = config("http://x".into(), None);
        let mut plain_settings = config("http://x".into(), None);
        plain_settings.temperature = None;
        plain_settings.max_output_tokens = None;
        let mut out = Vec::new();
        let choices = [
            ToolChoice::Auto,
            ToolChoice::Required,
            ToolChoice::None,
            ToolChoice::Specific("ls".into()),
        ];
        for choice in choices {
            let mut request = full.clone();
            request.system = Some("You are Crucible.".into());
            request.tools = tools.clone();
            request.tool_choice = choice;
            request.reasoning = Some(Reasoning::Medium);
            out.push((request, settings.clone()));
        }
        // Thinking whose budget fits under the request's own max_tokens.
        let mut roomy = full;
        roomy.max_output_tokens = Some(20_000);
        roomy.reasoning = Some(Reasoning::Low);
        out.push((roomy, plain_settings.clone()));
        // Nothing optional: no system (empty), tools, thinking or temperature.
        let mut plain = chat(vec![Message::user_text("hi")]);
        plain.system = Some(String::new());
        out.push((plain, plain_settings.clone()));
        // No messages at all, and a turn of thinking only.
        out.push((chat(vec![]), plain_settings));
        let thinking_only = chat(vec![Message {
            role: Role::Assistant,
            parts: vec![Part::RedactedThinking { data: "X".into() }],
        }]);
        out.push((thinking_only, settings));
        out
    }

    /// The exact text of each body as `json!` wrote it before the request
    /// became serde types: the same keys in the same order, so prompt
    /// caches see the same bytes. Bodies without tools end in
    /// `"tools":null`: the old breakpoint marking's `body["tools"]` put it there.
    #[test]
    fn request_bodies_are_written_as_before() {
        let expected: [&str; 8] = [
            r#"{"model":"claude-sonnet-4-5","max_tokens":4417,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"redacted_thinking","data":"ENC"},{"type":"text","text":"reading"},{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a"}},{"type":"tool_use","id":"toolu_2","name":"read_file","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"A","is_error":false},{"type":"tool_result","tool_use_id":"toolu_2","content":"bad","is_error":true},{"type":"text","text":"and"}]},{"role":"assistant","content":[{"type":"text","text":"done","cache_control":{"type":"ephemeral"}},{"type":"thinking","thinking":"after","signature":"sig2"}]}],"system":[{"type":"text","text":"You are Crucible.","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"read_file","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}},{"name":"ls","description":"List","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],"tool_choice":{"type":"auto"},"thinking":{"type":"enabled","budget_tokens":4096},"temperature":0.25}"#,
            r#"{"model":"claude-sonnet-4-5","max_tokens":321,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"redacted_thinking","data":"ENC"},{"type":"text","text":"reading"},{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a"}},{"type":"tool_use","id":"toolu_2","name":"read_file","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"A","is_error":false},{"type":"tool_result","tool_use_id":"toolu_2","content":"bad","is_error":true},{"type":"text","text":"and"}]},{"role":"assistant","content":[{"type":"text","text":"done","cache_control":{"type":"ephemeral"}},{"type":"thinking","thinking":"after","signature":"sig2"}]}],"system":[{"type":"text","text":"You are Crucible.","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"read_file","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}},{"name":"ls","description":"List","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],"tool_choice":{"type":"any"},"temperature":0.25}"#,
            r#"{"model":"claude-sonnet-4-5","max_tokens":4417,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"redacted_thinking","data":"ENC"},{"type":"text","text":"reading"},{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a"}},{"type":"tool_use","id":"toolu_2","name":"read_file","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"A","is_error":false},{"type":"tool_result","tool_use_id":"toolu_2","content":"bad","is_error":true},{"type":"text","text":"and"}]},{"role":"assistant","content":[{"type":"text","text":"done","cache_control":{"type":"ephemeral"}},{"type":"thinking","thinking":"after","signature":"sig2"}]}],"system":[{"type":"text","text":"You are Crucible.","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"read_file","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}},{"name":"ls","description":"List","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],"tool_choice":{"type":"none"},"thinking":{"type":"enabled","budget_tokens":4096},"temperature":0.25}"#,
            r#"{"model":"claude-sonnet-4-5","max_tokens":321,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"redacted_thinking","data":"ENC"},{"type":"text","text":"reading"},{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a"}},{"type":"tool_use","id":"toolu_2","name":"read_file","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"A","is_error":false},{"type":"tool_result","tool_use_id":"toolu_2","content":"bad","is_error":true},{"type":"text","text":"and"}]},{"role":"assistant","content":[{"type":"text","text":"done","cache_control":{"type":"ephemeral"}},{"type":"thinking","thinking":"after","signature":"sig2"}]}],"system":[{"type":"text","text":"You are Crucible.","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"read_file","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}},{"name":"ls","description":"List","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],"tool_choice":{"type":"tool","name":"ls"},"temperature":0.25}"#,
            r#"{"model":"claude-sonnet-4-5","max_tokens":20000,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"redacted_thinking","data":"ENC"},{"type":"text","text":"reading"},{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a"}},{"type":"tool_use","id":"toolu_2","name":"read_file","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"A","is_error":false},{"type":"tool_result","tool_use_id":"toolu_2","content":"bad","is_error":true},{"type":"text","text":"and"}]},{"role":"assistant","content":[{"type":"text","text":"done","cache_control":{"type":"ephemeral"}},{"type":"thinking","thinking":"after","signature":"sig2"}]}],"thinking":{"type":"enabled","budget_tokens":1024},"tools":null}"#,
            r#"{"model":"claude-sonnet-4-5","max_tokens":8192,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}],"tools":null}"#,
            r#"{"model":"claude-sonnet-4-5","max_tokens":8192,"stream":true,"messages":[],"tools":null}"#,
            r#"{"model":"claude-sonnet-4-5","max_tokens":321,"stream":true,"messages":[{"role":"assistant","content":[{"type":"redacted_thinking","data":"X"}]}],"temperature":0.25,"tools":null}"#,
        ];
        let requests = capture_requests();
        assert_eq!(requests.len(), expected.len());
        for ((request, settings), expected) in requests.iter().zip(expected) {
            let text = AnthropicFormat.request_text(request, settings, None);
            assert_eq!(text, expected);
        }
    }

    fn config(endpoint: String, key: Option<&str>) -> ProviderSettings {
        use crate::providers::settings::{
            ApiKey, KeySource, ProviderKind, ProviderType, RetryPolicy, Secret,
        };
        ProviderSettings {
            name: "claude".into(),
            kind: ProviderKind::Anthropic,
            service: ProviderType::Anthropic,
            endpoint,
            default_model: "claude-sonnet-4-5".into(),
            api_key: key.map(|key| ApiKey {
                secret: Secret::new(key),
                source: KeySource::ConfigLiteral,
            }),
            missing_key_variable: None,
            context_window: None,
            timeout: std::time::Duration::from_secs(5),
            connect_timeout: std::time::Duration::from_secs(5),
            max_output_tokens: Some(321),
            temperature: Some(0.25),
            available_models: Vec::new(),
            retry: RetryPolicy::default(),
            fallback: Vec::new(),
            keep_alive: serde_json::Value::Null,
            prewarm: None,
            prompt_cache_key: None,
            pin_slots: None,
            tool_calling: Default::default(),
            model_tool_calling: Default::default(),
        }
    }

    /// Path, headers and body as a server sees them, and the hosted API
    /// refused before sending when no key is set.
    #[tokio::test]
    async fn requests_carry_version_key_and_body() {
        use axum::extract::{Json, State};
        use axum::http::HeaderMap;
        use futures::StreamExt;
        type Seen = Arc<std::sync::Mutex<Vec<(String, Option<String>, Option<String>, Value)>>>;
        let seen: Seen = Arc::default();
        let header = |headers: &HeaderMap, name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let app =
            axum::Router::new()
                .route(
                    "/v1/messages",
                    axum::routing::post(
                        move |State(seen): State<Seen>,
                              headers: HeaderMap,
                              Json(body): Json<Value>| async move {
                            seen.lock().unwrap().push((
                                "messages".into(),
                                header(&headers, "x-api-key"),
                                header(&headers, "anthropic-version"),
                                body,
                            ));
                            std::fs::read_to_string(concat!(
                                env!("CARGO_MANIFEST_DIR"),
                                "/tests/fixtures/anthropic/text.sse"
                            ))
                            .unwrap()
                        },
                    ),
                )
                .route(
                    "/v1/models",
                    axum::routing::get(
                        move |State(seen): State<Seen>, headers: HeaderMap| async move {
                            seen.lock().unwrap().push((
                                "models".into(),
                                header(&headers, "x-api-key"),
                                header(&headers, "anthropic-version"),
                                Value::Null,
                            ));
                            Json(json!({"data": [{"id": "claude-sonnet-4-5"}]}))
                        },
                    ),
                )
                .with_state(Arc::clone(&seen));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });

        let provider = AnthropicProvider::new(config(endpoint.clone(), Some("sk-test")));
        let stream = provider
            .stream_chat(chat(vec![Message::user_text("hi")]))
            .await
            .unwrap();
        let events: Vec<_> = stream.collect().await;
        assert_eq!(outcome(events).text, "Hello, world!");
        let models = provider.list_models().await.unwrap();
        assert_eq!(models[0].id, "claude-sonnet-4-5");
        // A local server without a key: no `x-api-key` header at all.
        let keyless = AnthropicProvider::new(config(endpoint, None));
        keyless.list_models().await.unwrap();

        let seen = seen.lock().unwrap().clone();
        let version = Some("2023-06-01".to_string());
        let key = Some("sk-test".to_string());
        assert_eq!(seen.len(), 3);
        assert_eq!(
            (&seen[0].0, &seen[0].1, &seen[0].2),
            (&"messages".into(), &key, &version)
        );
        assert_eq!(seen[0].3["max_tokens"], 321);
        assert_eq!(seen[0].3["temperature"], 0.25);
        // The latest turn ends on a cache breakpoint.
        assert_eq!(
            seen[0].3["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "hi",
                "cache_control": {"type": "ephemeral"}}]}])
        );
        assert_eq!(
            (&seen[1].0, &seen[1].1, &seen[1].2),
            (&"models".into(), &key, &version)
        );
        assert_eq!(
            (&seen[2].0, &seen[2].1, &seen[2].2),
            (&"models".into(), &None, &version)
        );

        let hosted = AnthropicProvider::new(config("https://api.anthropic.com".into(), None));
        let refused = hosted
            .stream_chat(chat(vec![Message::user_text("hi")]))
            .await;
        assert!(matches!(refused, Err(ProviderError::MissingKey { .. })));
    }

    #[test]
    fn overloaded_mid_stream_is_transient() {
        let items = decode_all::<StreamDecoder>(&[(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )]);
        assert!(matches!(
            items.as_slice(),
            [Err(ProviderError::Remote { transient: true, detail, .. })] if detail == "Overloaded"
        ));
        let items = decode_all::<StreamDecoder>(&[(
            "error",
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#,
        )]);
        assert!(matches!(
            items.as_slice(),
            [Err(ProviderError::Remote {
                transient: false,
                ..
            })]
        ));
    }

    #[test]
    fn llama_server_quirks_are_tolerated() {
        // No `input` on the start, interleaved starts, no `event:` names, one
        // call whose whole input came with its start.
        let events = decode(&[
            (
                "",
                r#"{"type":"message_start","message":{"usage":{"input_tokens":7}}}"#,
            ),
            (
                "",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"a","name":"read_file"}}"#,
            ),
            (
                "",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"b","name":"grep","input":{"pattern":"x"}}}"#,
            ),
            (
                "",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"a\"}"}}"#,
            ),
            ("", r#"{"type":"content_block_stop","index":0}"#),
            ("", r#"{"type":"content_block_stop","index":1}"#),
            (
                "",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"input_tokens":9,"output_tokens":3}}"#,
            ),
            ("", r#"{"type":"message_stop"}"#),
        ]);
        assert_eq!(
            events,
            vec![
                Ok(call_start(0, "a", "read_file")),
                Ok(call_start(1, "b", "grep")),
                Ok(call_args(0, r#"{"path":"a"}"#)),
                Ok(ProviderEvent::ToolCallEnd { index: 0 }),
                Ok(call_args(1, r#"{"pattern":"x"}"#)),
                Ok(ProviderEvent::ToolCallEnd { index: 1 }),
                Ok(ProviderEvent::Finish(FinishReason::ToolCalls)),
                Ok(usage_event(9, 3)),
            ]
        );
    }

    #[test]
    fn stop_reason_without_message_stop_closes_quietly() {
        let events = decode(&[
            (
                "",
                r#"{"type":"message_start","message":{"usage":{"input_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":20}}}"#,
            ),
            (
                "",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"a","name":"ls","input":{}}}"#,
            ),
            (
                "",
                r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":2}}"#,
            ),
        ]);
        assert_eq!(
            events,
            vec![
                Ok(call_start(0, "a", "ls")),
                Ok(ProviderEvent::ToolCallEnd { index: 0 }),
                Ok(ProviderEvent::Finish(FinishReason::Length)),
                // Cache reads and writes count in the prompt, and apart for pricing.
                Ok(ProviderEvent::Usage(Usage {
                    prompt_tokens: 125,
                    completion_tokens: 2,
                    cached_prompt_tokens: 100,
                    cache_written_prompt_tokens: 20,
                })),
            ]
        );
    }

    #[test]
    fn stop_reasons_redacted_thinking_and_bad_endings() {
        let reason = |reason: &str| {
            let data =
                format!(r#"{{"type":"message_delta","delta":{{"stop_reason":"{reason}"}}}}"#);
            let events = decode(&[("", &data), ("", r#"{"type":"message_stop"}"#)]);
            match events.as_slice() {
                [Ok(ProviderEvent::Finish(reason))] => reason.clone(),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(reason("end_turn"), FinishReason::Stop);
        assert_eq!(reason("stop_sequence"), FinishReason::Stop);
        assert_eq!(reason("max_tokens"), FinishReason::Length);
        assert_eq!(reason("tool_use"), FinishReason::ToolCalls);
        assert_eq!(reason("refusal"), FinishReason::Refusal);
        assert_eq!(
            reason("pause_turn"),
            FinishReason::Other("pause_turn".into())
        );

        let redacted = decode(&[(
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"ENC"}}"#,
        )]);
        assert_eq!(
            redacted[0],
            Ok(ProviderEvent::RedactedThinking("ENC".into()))
        );

        let nothing = decode(&[]);
        assert!(matches!(nothing.as_slice(), [Err(e)] if e.to_string().contains("empty stream")));
        let pings = decode(&[("ping", r#"{"type":"ping"}"#)]);
        assert!(matches!(pings.as_slice(), [Err(e)] if e.to_string().contains("empty stream")));
        let garbage = decode(&[("message_start", "{not json")]);
        assert!(matches!(garbage.as_slice(), [Err(e)] if e.to_string().contains("not JSON")));
        let unknown = decode(&[
            ("", r#"{"type":"something_new","x":1}"#),
            ("", r#"{"type":"message_stop"}"#),
        ]);
        assert_eq!(unknown, vec![]);
    }

    fn chat(messages: Vec<Message>) -> ChatRequest {
        ChatRequest {
            context_window: Some(1000),
            ..chat_request("claude-sonnet-4-5", None, messages)
        }
    }

    #[test]
    fn thinking_signatures_round_trip() {
        let request = chat(vec![
            Message::user_text("2+2?"),
            Message {
                role: Role::Assistant,
                parts: vec![
                    Part::Thinking {
                        text: "from elsewhere".into(),
                        signature: None,
                    },
                    Part::Thinking {
                        text: "Let me think.".into(),
                        signature: Some("sig-abc123".into()),
                    },
                    Part::RedactedThinking { data: "ENC".into() },
                    text(""),
                    text("4"),
                    tool_call("toolu_1", "calc", r#"{"expr":"2+2"}"#),
                    tool_call("toolu_2", "ls", ""),
                    tool_call("toolu_3", "ls", "{broken"),
                ],
            },
        ]);
        let body = request_body(&request, None);
        assert_eq!(
            body["messages"][1],
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Let me think.", "signature": "sig-abc123"},
                {"type": "redacted_thinking", "data": "ENC"},
                {"type": "text", "text": "4"},
                {"type": "tool_use", "id": "toolu_1", "name": "calc", "input": {"expr": "2+2"}},
                {"type": "tool_use", "id": "toolu_2", "name": "ls", "input": {}},
                {"type": "tool_use", "id": "toolu_3", "name": "ls", "input": {}},
            ]})
        );
    }

    #[test]
    fn same_roles_merge_and_tool_results_come_first() {
        let request = chat(vec![
            Message::user_text("hi"),
            Message::user_text("there"),
            Message {
                role: Role::Assistant,
                parts: vec![Part::Thinking {
                    text: "unsigned".into(),
                    signature: None,
                }],
            },
            Message::user_text("again"),
            Message {
                role: Role::User,
                parts: vec![
                    text("note"),
                    png("AAAA"),
                    tool_result("toolu_1", "done", true),
                ],
            },
        ]);
        let body = request_body(&request, None);
        // The assistant turn held only unsigned thinking: dropped, so all users merge.
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done", "is_error": true},
                {"type": "text", "text": "hi"},
                {"type": "text", "text": "there"},
                {"type": "text", "text": "again"},
                {"type": "text", "text": "note"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            ]}])
        );
        assert!(body.get("system").is_none());
        assert!(body.get("tools").is_none());
        assert!(body.get("tool_choice").is_none());
        assert!(body.get("context_window").is_none());
    }

    #[test]
    fn tools_and_tool_choice_are_mapped() {
        let mut request = chat(vec![Message::user_text("go")]);
        request.system = Some("be brief".into());
        request.tools = vec![ToolDefinition {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object"}),
        }];
        let choice = |request: &mut ChatRequest, choice: ToolChoice| {
            request.tool_choice = choice;
            request_body(request, None)["tool_choice"].clone()
        };
        assert_eq!(
            choice(&mut request, ToolChoice::Auto),
            json!({"type": "auto"})
        );
        assert_eq!(
            choice(&mut request, ToolChoice::Required),
            json!({"type": "any"})
        );
        assert_eq!(
            choice(&mut request, ToolChoice::None),
            json!({"type": "none"})
        );
        assert_eq!(
            choice(&mut request, ToolChoice::Specific("read_file".into())),
            json!({"type": "tool", "name": "read_file"})
        );
        let body = request_body(&request, None);
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["stream"], true);
        assert_eq!(
            body["tools"],
            json!([{"name": "read_file", "description": "Read a file", "input_schema": {"type": "object"}}])
        );
    }

    #[test]
    fn max_tokens_comes_from_request_config_or_model() {
        assert_eq!(default_max_tokens("claude-3-haiku-20240307"), 4096);
        assert_eq!(default_max_tokens("claude-3-opus-latest"), 4096);
        assert_eq!(default_max_tokens("claude-3-5-sonnet-latest"), 8192);
        assert_eq!(default_max_tokens("claude-3-7-sonnet-latest"), 8192);
        assert_eq!(default_max_tokens("claude-sonnet-4-5"), 8192);
        assert_eq!(default_max_tokens("qwen3-8b"), 8192);

        let mut request = chat(vec![Message::user_text("hi")]);
        request.model = "claude-3-haiku-20240307".into();
        assert_eq!(request_body(&request, None)["max_tokens"], 4096);
        assert_eq!(request_body(&request, Some(1000))["max_tokens"], 1000);
        request.max_output_tokens = Some(200);
        assert_eq!(request_body(&request, Some(1000))["max_tokens"], 200);
    }

    #[test]
    fn models_list_reads_ids_and_llama_windows() {
        let body = json!({
            "data": [
                {"type": "model", "id": "claude-sonnet-4-5-20250929", "display_name": "Claude Sonnet 4.5", "created_at": "2025-09-29T00:00:00Z"},
                {"id": "qwen3-8b", "meta": {"n_ctx": 32768}},
                {"display_name": "no id"},
            ],
            "has_more": false,
        });
        assert_eq!(
            parse_models(&body).unwrap(),
            vec![
                ModelInfo {
                    id: "claude-sonnet-4-5-20250929".into(),
                    context_window: None
                },
                ModelInfo {
                    id: "qwen3-8b".into(),
                    context_window: Some(32768)
                },
            ]
        );
        assert!(parse_models(&json!({"models": []})).is_err());
    }
}
