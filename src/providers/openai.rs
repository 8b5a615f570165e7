//! OpenAI-compatible chat completions: `POST {endpoint}/chat/completions`
//! with `stream: true`, read as server-sent events. Serves OpenAI, llama.cpp,
//! vLLM, LM Studio, OpenRouter, and Ollama's `/v1`.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::{
    ChatRequest, EventStream, FinishReason, Message, ModelInfo, Part, Provider, ProviderError,
    ProviderEvent, Role, ToolChoice, Usage, connect_error, error_chain, key_hint, retry_after,
};
use crate::config::{ProviderConfig, ProviderKind};

pub struct OpenAiProvider {
    config: ProviderConfig,
    /// `/v1` base: the endpoint for OpenAI-type servers; Ollama and Anthropic
    /// serve their OpenAI-compatible API under `{host}/v1`.
    base_url: String,
    client: OnceLock<reqwest::Client>,
}

impl OpenAiProvider {
    pub fn new(config: ProviderConfig) -> Self {
        let base_url = match config.kind {
            ProviderKind::OpenAi => config.endpoint.clone(),
            ProviderKind::Ollama | ProviderKind::Anthropic => format!("{}/v1", config.endpoint),
        };
        Self {
            config,
            base_url,
            client: OnceLock::new(),
        }
    }

    fn client(&self) -> Result<&reqwest::Client, ProviderError> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        // Built on first use: TLS set-up costs milliseconds that `initialize` should not pay.
        let client = reqwest::Client::builder()
            .connect_timeout(self.config.connect_timeout)
            .build()
            .map_err(|err| ProviderError::Setup {
                provider: self.config.name.clone(),
                detail: error_chain(&err),
            })?;
        Ok(self.client.get_or_init(|| client))
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.config.api_key {
            Some(key) => request.bearer_auth(key.secret.expose()),
            None => request,
        }
    }

    /// A hosted API with no key can only fail; say so before sending anything.
    fn check_key(&self) -> Result<(), ProviderError> {
        if self.config.api_key.is_some() {
            return Ok(());
        }
        if let Some(var) = &self.config.missing_key_variable {
            return Err(ProviderError::MissingKey {
                provider: self.config.name.clone(),
                fix: format!(
                    "the config asks for ${{{var}}}, which is not set. Export {var} in the environment the editor starts the agent from."
                ),
            });
        }
        let hosted = self.config.endpoint.starts_with("https://api.openai.com")
            || self
                .config
                .endpoint
                .starts_with("https://api.anthropic.com");
        if hosted && let Some(var) = self.config.kind.conventional_key_variable() {
            return Err(ProviderError::MissingKey {
                provider: self.config.name.clone(),
                fix: format!(
                    "{} requires one. Export {var}, or set api_key = \"${{VARIABLE}}\" in [llm.providers.{}].",
                    self.config.endpoint, self.config.name
                ),
            });
        }
        Ok(())
    }

    async fn start(&self, request: ChatRequest) -> Result<EventStream, ProviderError> {
        self.check_key()?;
        let client = self.client()?;
        let body = request_body(&request);
        let url = format!("{}/chat/completions", self.base_url);
        tracing::debug!(%url, model = %request.model, messages = request.messages.len(), "chat request");
        let response = self
            .authorized(client.post(&url))
            .json(&body)
            .send()
            .await
            .map_err(|err| connect_error(&self.config, &err))?;
        let status = response.status();
        if !status.is_success() {
            return Err(self.status_error(response, &request.model).await);
        }
        Ok(self.events(response))
    }

    async fn status_error(&self, response: reqwest::Response, model: &str) -> ProviderError {
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let body = response.text().await.unwrap_or_default();
        let detail = error_message(&body).unwrap_or_else(|| truncate(&body, 300));
        let provider = self.config.name.clone();
        if status == 401 || status == 403 {
            let (from, hint) = key_hint(&self.config);
            return ProviderError::Auth {
                provider,
                status,
                from,
                hint,
                detail,
            };
        }
        if mentions_unknown_model(status, &body) {
            let listing = match self.list_models().await {
                Ok(models) if !models.is_empty() => format!(
                    "; it offers: {}",
                    models
                        .iter()
                        .map(|m| m.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                _ => String::new(),
            };
            return ProviderError::ModelNotFound {
                provider,
                model: model.to_string(),
                listing,
            };
        }
        ProviderError::Http {
            provider,
            status,
            detail,
            retry_after,
        }
    }

    fn events(&self, response: reqwest::Response) -> EventStream {
        let provider = self.config.name.clone();
        let idle = self.config.timeout;
        let mut sse = response.bytes_stream().eventsource();
        let mut decoder = StreamDecoder::default();
        let stream = async_stream(move |tx| async move {
            loop {
                let next = match tokio::time::timeout(idle, sse.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        let _ = tx.send(Err(ProviderError::IdleTimeout {
                            provider: provider.clone(),
                            seconds: idle.as_secs(),
                        }));
                        return;
                    }
                };
                let event = match next {
                    Some(Ok(event)) => event,
                    Some(Err(err)) => {
                        let _ = tx.send(Err(ProviderError::Truncated {
                            provider: provider.clone(),
                            detail: error_chain(&err),
                        }));
                        return;
                    }
                    None => {
                        for item in decoder.finish(&provider) {
                            let _ = tx.send(item);
                        }
                        return;
                    }
                };
                for item in decoder.on_data(&event.data, &provider) {
                    let failed = item.is_err();
                    if tx.send(item).is_err() || failed {
                        return;
                    }
                }
                if decoder.done {
                    return;
                }
            }
        });
        stream.boxed()
    }
}

/// Run `body` as a task feeding a channel, and yield what it sends. Dropping
/// the stream aborts the task (and with it the HTTP response).
fn async_stream<F, Fut>(
    body: F,
) -> impl futures::Stream<Item = Result<ProviderEvent, ProviderError>>
where
    F: FnOnce(tokio::sync::mpsc::UnboundedSender<Result<ProviderEvent, ProviderError>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(body(tx));
    let abort = AbortOnDrop(task);
    futures::stream::unfold((rx, abort), |(mut rx, abort)| async move {
        rx.recv().await.map(|item| (item, (rx, abort)))
    })
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn kind(&self) -> ProviderKind {
        self.config.kind
    }

    fn default_model(&self) -> &str {
        &self.config.default_model
    }

    fn configured_context_window(&self) -> Option<u64> {
        self.config.context_window
    }

    fn stream_chat(
        &self,
        request: ChatRequest,
    ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
        Box::pin(self.start(request))
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<ModelInfo>, ProviderError>> {
        Box::pin(async move {
            self.check_key()?;
            let client = self.client()?;
            let url = format!("{}/models", self.base_url);
            let response = self
                .authorized(client.get(&url))
                .timeout(Duration::from_secs(10))
                .send()
                .await
                .map_err(|err| connect_error(&self.config, &err))?;
            let status = response.status().as_u16();
            let body = response
                .text()
                .await
                .map_err(|err| ProviderError::Truncated {
                    provider: self.config.name.clone(),
                    detail: error_chain(&err),
                })?;
            if !(200..300).contains(&status) {
                return Err(ProviderError::Http {
                    provider: self.config.name.clone(),
                    status,
                    detail: error_message(&body).unwrap_or_else(|| truncate(&body, 300)),
                    retry_after: None,
                });
            }
            parse_models(&body).map_err(|detail| ProviderError::Malformed {
                provider: self.config.name.clone(),
                detail,
            })
        })
    }
}

/// The JSON body of a streamed chat completion.
pub fn request_body(request: &ChatRequest) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(json!({ "role": "system", "content": system }));
    }
    for message in &request.messages {
        encode_message(message, &mut messages);
    }
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    if let Some(max) = request.max_output_tokens {
        body["max_tokens"] = json!(max);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    }
                })
            })
            .collect();
        body["tool_choice"] = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Required => json!("required"),
            ToolChoice::None => json!("none"),
            ToolChoice::Specific(name) => {
                json!({ "type": "function", "function": { "name": name } })
            }
        };
    }
    body
}

fn encode_message(message: &Message, out: &mut Vec<Value>) {
    match message.role {
        Role::User => {
            // Tool results are separate `tool` messages; the rest is one user message.
            let mut content = Vec::new();
            for part in &message.parts {
                match part {
                    Part::Text { text } => content.push(json!({ "type": "text", "text": text })),
                    Part::Image { mime_type, data } => content.push(json!({
                        "type": "image_url",
                        "image_url": { "url": format!("data:{mime_type};base64,{data}") }
                    })),
                    Part::ToolResult {
                        call_id,
                        content: result,
                        ..
                    } => out.push(json!({
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": result,
                    })),
                    Part::Thinking { .. } | Part::ToolCall { .. } => {}
                }
            }
            match content.as_slice() {
                [] => {}
                // Plain string content is what every server accepts.
                [only] if only["type"] == "text" => {
                    out.push(json!({ "role": "user", "content": only["text"] }));
                }
                _ => out.push(json!({ "role": "user", "content": content })),
            }
        }
        Role::Assistant => {
            let text = message.text();
            let calls: Vec<Value> = message
                .parts
                .iter()
                .filter_map(|part| match part {
                    Part::ToolCall {
                        id,
                        name,
                        arguments,
                    } => Some(json!({
                        "id": id,
                        "type": "function",
                        "function": { "name": name, "arguments": arguments },
                    })),
                    _ => None,
                })
                .collect();
            let mut entry = json!({ "role": "assistant", "content": text });
            if !calls.is_empty() {
                entry["tool_calls"] = Value::Array(calls);
            }
            out.push(entry);
        }
    }
}

/// Turns the `data:` payloads of a chat-completions stream into events.
/// Pure, so every quirk is tested without a server.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    /// `[DONE]` arrived.
    pub done: bool,
    saw_anything: bool,
    finished: bool,
    /// Tool calls by the server's `index`: whether each has been announced.
    open_calls: BTreeMap<usize, bool>,
    pending_args: BTreeMap<usize, String>,
}

impl StreamDecoder {
    pub fn on_data(
        &mut self,
        data: &str,
        provider: &str,
    ) -> Vec<Result<ProviderEvent, ProviderError>> {
        let data = data.trim();
        if data.is_empty() {
            return Vec::new();
        }
        if data == "[DONE]" {
            self.done = true;
            let mut out: Vec<_> = self.close_calls().into_iter().map(Ok).collect();
            if !self.saw_anything {
                out.push(Err(ProviderError::EmptyStream {
                    provider: provider.to_string(),
                }));
            }
            return out;
        }
        let chunk: Value = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(err) => {
                return vec![Err(ProviderError::Malformed {
                    provider: provider.to_string(),
                    detail: format!(
                        "a stream event is not JSON ({err}): {}",
                        truncate(data, 200)
                    ),
                })];
            }
        };
        if let Some(error) = chunk.get("error") {
            let detail = error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| error.to_string());
            return vec![Err(ProviderError::Remote {
                provider: provider.to_string(),
                detail,
            })];
        }
        let mut out = Vec::new();
        if let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) {
            if let Some(delta) = choice.get("delta") {
                self.on_delta(delta, &mut out);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                out.extend(self.close_calls());
                self.saw_anything = true;
                self.finished = true;
                out.push(ProviderEvent::Finish(match reason {
                    "stop" => FinishReason::Stop,
                    "length" => FinishReason::Length,
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "content_filter" => FinishReason::Refusal,
                    other => FinishReason::Other(other.to_string()),
                }));
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
            out.push(ProviderEvent::Usage(Usage {
                prompt_tokens: count("prompt_tokens"),
                completion_tokens: count("completion_tokens"),
            }));
        }
        out.into_iter().map(Ok).collect()
    }

    fn on_delta(&mut self, delta: &Value, out: &mut Vec<ProviderEvent>) {
        // llama.cpp and vLLM send `reasoning_content`; OpenRouter sends `reasoning`.
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta
                .get(key)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                self.saw_anything = true;
                out.push(ProviderEvent::ThinkingDelta(text.to_string()));
            }
        }
        if let Some(text) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            self.saw_anything = true;
            out.push(ProviderEvent::TextDelta(text.to_string()));
        }
        let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) else {
            return;
        };
        for (position, call) in calls.iter().enumerate() {
            self.saw_anything = true;
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .map(|i| i as usize)
                .unwrap_or(position);
            let function = call.get("function");
            let arguments = function
                .and_then(|f| f.get("arguments"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let announced = self.open_calls.get(&index).copied().unwrap_or(false);
            if !announced {
                let id = call.get("id").and_then(Value::as_str);
                let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
                match (id, name) {
                    (Some(id), Some(name)) if !name.is_empty() => {
                        self.open_calls.insert(index, true);
                        out.push(ProviderEvent::ToolCallStart {
                            index,
                            id: id.to_string(),
                            name: name.to_string(),
                        });
                        if let Some(early) = self.pending_args.remove(&index) {
                            out.push(ProviderEvent::ToolCallArgumentsDelta {
                                index,
                                delta: early,
                            });
                        }
                    }
                    _ => {
                        // Arguments before the name arrived: hold them until it does.
                        self.open_calls.entry(index).or_insert(false);
                        self.pending_args
                            .entry(index)
                            .or_default()
                            .push_str(arguments);
                        continue;
                    }
                }
            }
            if !arguments.is_empty() {
                out.push(ProviderEvent::ToolCallArgumentsDelta {
                    index,
                    delta: arguments.to_string(),
                });
            }
        }
    }

    fn close_calls(&mut self) -> Vec<ProviderEvent> {
        let calls = std::mem::take(&mut self.open_calls);
        self.pending_args.clear();
        calls
            .into_iter()
            .filter(|(_, announced)| *announced)
            .map(|(index, _)| ProviderEvent::ToolCallEnd { index })
            .collect()
    }

    /// The byte stream ended. Without `[DONE]` the answer may be cut off.
    pub fn finish(&mut self, provider: &str) -> Vec<Result<ProviderEvent, ProviderError>> {
        if self.done {
            return Vec::new();
        }
        if !self.saw_anything {
            return vec![Err(ProviderError::EmptyStream {
                provider: provider.to_string(),
            })];
        }
        if self.finished {
            // Some servers end after the finish chunk without `[DONE]`; nothing is lost.
            let out = self.close_calls();
            return out.into_iter().map(Ok).collect();
        }
        vec![Err(ProviderError::Truncated {
            provider: provider.to_string(),
            detail: "the connection closed without a finish reason or [DONE]".into(),
        })]
    }
}

fn mentions_unknown_model(status: u16, body: &str) -> bool {
    if status == 404 {
        return true;
    }
    let lower = body.to_ascii_lowercase();
    (status == 400 || status == 422)
        && lower.contains("model")
        && (lower.contains("not found")
            || lower.contains("does not exist")
            || lower.contains("model_not_found")
            || lower.contains("unknown model"))
}

/// The `error.message` of an OpenAI-style error body.
fn error_message(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let error = value.get("error")?;
    match error {
        Value::String(text) => Some(text.clone()),
        _ => error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

fn truncate(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// `GET /models`: `{"data":[{"id":…}]}`. llama.cpp adds `meta.n_ctx` (the
/// window one request gets) and `meta.n_ctx_train`; LM Studio adds
/// `max_context_length`.
pub fn parse_models(body: &str) -> Result<Vec<ModelInfo>, String> {
    let value: Value =
        serde_json::from_str(body).map_err(|err| format!("the model list is not JSON: {err}"))?;
    let list = value
        .get("data")
        .or_else(|| value.get("models"))
        .and_then(Value::as_array)
        .ok_or_else(|| "the model list has no `data` array".to_string())?;
    Ok(list
        .iter()
        .filter_map(|entry| {
            let id = entry
                .get("id")
                .or_else(|| entry.get("name"))
                .and_then(Value::as_str)?;
            let context_window = entry
                .pointer("/meta/n_ctx")
                .or_else(|| entry.get("max_context_length"))
                .or_else(|| entry.get("context_length"))
                .or_else(|| entry.pointer("/meta/n_ctx_train"))
                .and_then(Value::as_u64);
            Some(ModelInfo {
                id: id.to_string(),
                context_window,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn decode(events: &[&str]) -> Vec<Result<ProviderEvent, String>> {
        let mut decoder = StreamDecoder::default();
        let mut out = Vec::new();
        for data in events {
            out.extend(decoder.on_data(data, "p"));
        }
        out.extend(decoder.finish("p"));
        out.into_iter()
            .map(|r| r.map_err(|e| e.to_string()))
            .collect()
    }

    #[test]
    fn text_reasoning_finish_and_usage() {
        let events = decode(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#,
            "[DONE]",
        ]);
        assert_eq!(
            events,
            vec![
                Ok(ProviderEvent::ThinkingDelta("hmm".into())),
                Ok(ProviderEvent::TextDelta("Hel".into())),
                Ok(ProviderEvent::TextDelta("lo".into())),
                Ok(ProviderEvent::Finish(FinishReason::Length)),
                Ok(ProviderEvent::Usage(Usage {
                    prompt_tokens: 12,
                    completion_tokens: 3
                })),
            ]
        );
    }

    #[test]
    fn tool_call_fragments_are_assembled_by_index() {
        let events = decode(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_b","function":{"name":"grep","arguments":"{\"q\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.rs\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        let start = |index, id: &str, name: &str| {
            Ok(ProviderEvent::ToolCallStart {
                index,
                id: id.into(),
                name: name.into(),
            })
        };
        let args = |index, delta: &str| {
            Ok(ProviderEvent::ToolCallArgumentsDelta {
                index,
                delta: delta.into(),
            })
        };
        assert_eq!(
            events,
            vec![
                start(0, "call_a", "read_file"),
                start(1, "call_b", "grep"),
                args(1, "{\"q\""),
                args(0, "{\"path\":"),
                args(0, "\"a.rs\"}"),
                Ok(ProviderEvent::ToolCallEnd { index: 0 }),
                Ok(ProviderEvent::ToolCallEnd { index: 1 }),
                Ok(ProviderEvent::Finish(FinishReason::ToolCalls)),
            ]
        );
    }

    #[test]
    fn endings_that_lose_data_are_errors() {
        let cut = decode(&[r#"{"choices":[{"delta":{"content":"Hel"}}]}"#]);
        assert!(matches!(cut.last(), Some(Err(e)) if e.contains("ended before")));
        let empty = decode(&["[DONE]"]);
        assert!(matches!(empty.last(), Some(Err(e)) if e.contains("empty stream")));
        let nothing = decode(&[]);
        assert!(matches!(nothing.last(), Some(Err(e)) if e.contains("empty stream")));
        let remote = decode(&[r#"{"error":{"message":"overloaded"}}"#]);
        assert!(matches!(remote.first(), Some(Err(e)) if e.contains("overloaded")));
        let garbage = decode(&["{not json"]);
        assert!(matches!(garbage.first(), Some(Err(e)) if e.contains("not JSON")));
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
        let request = ChatRequest {
            model: "m".into(),
            system: Some("be brief".into()),
            messages: vec![
                Arc::new(Message::user_text("hi")),
                Arc::new(Message::assistant_text("hello")),
                Arc::new(Message {
                    role: Role::User,
                    parts: vec![
                        Part::Text {
                            text: "look".into(),
                        },
                        Part::Image {
                            mime_type: "image/png".into(),
                            data: "AAAA".into(),
                        },
                    ],
                }),
            ],
            tools: vec![],
            tool_choice: ToolChoice::Auto,
            max_output_tokens: None,
        };
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
    fn models_list_reads_context_windows() {
        let body = r#"{"object":"list","data":[{"id":"smollm2-135m","object":"model","meta":{"n_ctx":4096,"n_ctx_train":8192}},{"id":"gpt-4o"}]}"#;
        assert_eq!(
            parse_models(body).unwrap(),
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
        assert!(parse_models("[]").is_err());
    }
}
