//! Ollama's native chat API: `POST {endpoint}/api/chat` with `stream: true`,
//! read as one JSON object per line. Native rather than `/v1` because only
//! here can a request say how large a window it needs (`options.num_ctx`),
//! and only `/api/show` says how large a window a model gets. The wire
//! types are in [`wire`]; here they are made and read.

pub mod wire;

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{Value, json};

use super::Reasoning;
use super::function_tools::function_tools;
use super::http::{ModelListError, WireFormat};
use super::lenient::Lenient;
use super::settings::ProviderSettings;
use super::slots::SlotId;
use super::stream::{Decoded, Framing, Progress, StreamError, WireDecoder};
use super::{
    ChatRequest, FinishReason, Message, ModelInfo, Part, ProviderEvent, Role, ToolChoice, Usage,
};
use crate::util::truncate;
use wire::{ChatBody, ErrorObject, Line, LineCall, LineMessage, Options, SentCall, SentFunction};
use wire::{Show, ShowRequest, Tags, Think, WireMessage};

/// The most a model's trained window counts for when the server reports no
/// `num_ctx` of its own. Ollama reserves memory for the whole `num_ctx` it is
/// sent, so a 128k model would cost a 128k allocation nobody asked for; set
/// `context_window` in the provider's config to go higher.
pub const MAX_REPORTED_CONTEXT: u64 = 32768;

/// `/api/chat` over newline-delimited JSON.
#[derive(Default)]
pub struct OllamaFormat;

impl WireFormat for OllamaFormat {
    type Decoder = StreamDecoder;
    const CHAT_PATH: &'static str = "/api/chat";
    const MODELS_PATH: &'static str = "/api/tags";

    fn request_text(
        &self,
        request: &ChatRequest,
        settings: &ProviderSettings,
        _slot: Option<SlotId>,
    ) -> String {
        // Ollama takes sampling settings under `options`, beside num_ctx.
        let body = chat_body(request, settings.temperature, Some(&settings.keep_alive));
        json!(body).to_string()
    }

    fn parse_models(&self, body: &Value) -> Result<Vec<ModelInfo>, ModelListError> {
        parse_tags(body)
    }

    /// `/api/tags` carries no window; `/api/show` does.
    fn window_query(&self, model: &str) -> Option<(&'static str, Value)> {
        Some(("/api/show", json!(ShowRequest { model })))
    }

    fn parse_window(&self, body: &Value) -> Option<u64> {
        parse_show(body)
    }
}

/// The JSON body of a streamed `/api/chat` request.
pub fn request_body(request: &ChatRequest) -> Value {
    json!(chat_body(request, None, None))
}

/// The body with the configured `temperature` and `keep_alive`.
fn chat_body<'a>(
    request: &'a ChatRequest,
    temperature: Option<f64>,
    keep_alive: Option<&'a Value>,
) -> ChatBody<'a> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(WireMessage::System { content: system });
    }
    for (position, message) in request.messages.iter().enumerate() {
        encode_message(message, &request.messages[..position], &mut messages);
    }
    // Ollama has no `tool_choice`: `None` is honoured by sending no tools;
    // `Required` and `Specific` can only offer the tools and hope.
    let tools = match request.tool_choice {
        ToolChoice::None => Vec::new(),
        _ => function_tools(&request.tools),
    };
    ChatBody {
        model: &request.model,
        stream: true,
        messages,
        options: Options {
            num_ctx: request.context_window,
            num_predict: request.max_output_tokens,
            temperature,
        },
        think: (request.reasoning).and_then(|level| think(&request.model, level)),
        tools,
        keep_alive,
    }
}

/// Ollama's `think`: true or false, except gpt-oss, which takes a level
/// and cannot stop thinking (so off sends nothing).
fn think(model: &str, level: Reasoning) -> Option<Think> {
    let levelled = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .starts_with("gpt-oss");
    match (levelled, level.effort()) {
        (true, effort) => effort.map(Think::Level),
        (false, effort) => Some(Think::On(effort.is_some())),
    }
}

fn encode_message<'a>(
    message: &'a Message,
    earlier: &'a [std::sync::Arc<Message>],
    out: &mut Vec<WireMessage<'a>>,
) {
    match message.role {
        Role::User => {
            let mut texts = Vec::new();
            let mut images = Vec::new();
            for part in &message.parts {
                match part {
                    Part::Text { text } => texts.push(text.as_str()),
                    // Ollama takes bare base64, no data-URL prefix.
                    Part::Image { data, .. } => images.push(data.as_str()),
                    // Tool results go first: they answer the previous turn's calls.
                    Part::ToolResult {
                        call_id, content, ..
                    } => out.push(WireMessage::Tool {
                        content,
                        tool_name: tool_name(earlier, call_id),
                    }),
                    Part::Thinking { .. }
                    | Part::RedactedThinking { .. }
                    | Part::ToolCall { .. } => {}
                }
            }
            if texts.is_empty() && images.is_empty() {
                return;
            }
            // Separate blocks (prompt text, attached files) must not run together.
            out.push(WireMessage::User {
                content: texts.join("\n\n"),
                images,
            });
        }
        Role::Assistant => {
            let mut thinking = String::new();
            let mut tool_calls = Vec::new();
            for part in &message.parts {
                match part {
                    Part::Thinking { text, .. } => thinking.push_str(text),
                    Part::ToolCall {
                        name, arguments, ..
                    } => tool_calls.push(SentCall {
                        function: SentFunction {
                            name,
                            arguments: arguments_object(arguments),
                        },
                    }),
                    // Anthropic's encrypted reasoning means nothing to Ollama.
                    _ => {}
                }
            }
            out.push(WireMessage::Assistant {
                content: message.text(),
                thinking,
                tool_calls,
            });
        }
    }
}

/// The name of the call `call_id` answers. Synthesized ids repeat across
/// turns, so the latest matching call wins.
fn tool_name<'a>(earlier: &'a [std::sync::Arc<Message>], call_id: &str) -> Option<&'a str> {
    earlier
        .iter()
        .rev()
        .filter(|message| message.role == Role::Assistant)
        .flat_map(|message| message.parts.iter().rev())
        .find_map(|part| match part {
            Part::ToolCall { id, name, .. } if id == call_id => Some(name.as_str()),
            _ => None,
        })
}

/// Ollama wants arguments as an object, not JSON text; anything that is not
/// one (a call cut off mid-arguments) becomes `{}` rather than a 400.
fn arguments_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({}),
    }
}

/// Turns the lines of an `/api/chat` stream into events. Pure, so every
/// quirk is tested without a server.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    /// The end marker is the `done: true` line, which also carries the
    /// finish; anything is any JSON line.
    progress: Progress,
    /// Calls announced so far; the next call's index.
    calls: usize,
    ids: BTreeSet<String>,
}

impl WireDecoder for StreamDecoder {
    const FRAMING: Framing = Framing::Ndjson;
    const CUT_OFF: &'static str = "the connection closed before the final `done` line";

    fn on_event(&mut self, _event: &str, data: &str) -> Vec<Decoded> {
        if self.progress.done {
            return Vec::new();
        }
        let line: Line = match serde_json::from_str(data) {
            // serde reads a struct from an array too; a line must be an object.
            Ok(line) if data.starts_with('{') => line,
            Err(err) if !err.is_data() => {
                return vec![Err(StreamError::not_json("line", &err, data))];
            }
            // Every field is optional: only a line that is no object fails.
            _ => {
                return vec![Err(StreamError::Malformed(format!(
                    "a stream line is not a JSON object: {}",
                    truncate(data, 200)
                )))];
            }
        };
        self.progress.saw_anything = true;
        if let Some(error) = &line.error {
            return vec![Err(remote_error(error))];
        }
        let mut out = Vec::new();
        if let Some(message) = line.message.as_ref() {
            self.on_message(message, &mut out);
        }
        if line.done.as_ref() == Some(&true) {
            self.on_done(&line, &mut out);
        }
        out.into_iter().map(Ok).collect()
    }

    fn progress(&self) -> Progress {
        self.progress
    }
}

impl StreamDecoder {
    fn on_message(&mut self, message: &LineMessage, out: &mut Vec<ProviderEvent>) {
        if let Some(thinking) = message.thinking.text() {
            out.push(ProviderEvent::ThinkingDelta(thinking.to_string()));
        }
        if let Some(content) = message.content.text() {
            out.push(ProviderEvent::TextDelta(content.to_string()));
        }
        for call in message.tool_calls.as_ref().into_iter().flatten() {
            // A call that is no object still counts, as a call of nothing.
            self.on_tool_call(call.as_ref().unwrap_or(&LineCall::default()), out);
        }
    }

    /// The final line: why the model stopped, and the token counts.
    fn on_done(&mut self, line: &Line, out: &mut Vec<ProviderEvent>) {
        self.progress.done = true;
        // Ollama says `stop` even when the model called tools.
        let reason = if self.calls > 0 {
            FinishReason::ToolCalls
        } else {
            match line.done_reason.as_ref().map(String::as_str) {
                Some("length") => FinishReason::Length,
                // `stop`, `load`, none at all: the model had nothing more to say.
                _ => FinishReason::Stop,
            }
        };
        out.push(ProviderEvent::Finish(reason));
        out.push(ProviderEvent::Usage(Usage {
            prompt_tokens: line.prompt_eval_count.as_ref().copied().unwrap_or(0),
            completion_tokens: line.eval_count.as_ref().copied().unwrap_or(0),
            cached_prompt_tokens: 0,
            cache_written_prompt_tokens: 0,
        }));
    }

    /// Ollama sends each call whole, so start, arguments and end go out at once.
    fn on_tool_call(&mut self, call: &LineCall, out: &mut Vec<ProviderEvent>) {
        let index = self.calls;
        self.calls += 1;
        let function = call.function.as_ref();
        let name = function
            .and_then(|f| f.name.as_ref())
            .map_or("", String::as_str);
        let id = match call.id.as_ref() {
            Some(id) if !id.is_empty() && !self.ids.contains(id) => id.to_string(),
            _ => self.synthesized_id(index),
        };
        self.ids.insert(id.clone());
        let delta = match function.and_then(|f| f.arguments.as_ref()) {
            // Some servers send the arguments as JSON text already.
            Some(Value::String(text)) => text.clone(),
            Some(Value::Null) | None => "{}".to_string(),
            Some(value) => value.to_string(),
        };
        out.push(ProviderEvent::ToolCallStart {
            index,
            id,
            name: name.to_string(),
        });
        out.push(ProviderEvent::ToolCallArgumentsDelta { index, delta });
        out.push(ProviderEvent::ToolCallEnd { index });
    }

    /// Older Ollama sends no call ids; make up one not yet used in this stream.
    fn synthesized_id(&self, index: usize) -> String {
        let mut n = index;
        loop {
            let id = format!("call_{n}");
            if !self.ids.contains(&id) {
                return id;
            }
            n += 1;
        }
    }
}

/// `{"error": "…"}` or `{"error": {"message": "…"}}`.
fn remote_error(error: &Value) -> StreamError {
    let detail = match error {
        Value::String(text) => text.clone(),
        other => (ErrorObject::deserialize(other).unwrap_or_default())
            .message
            .into_option()
            .unwrap_or_else(|| other.to_string()),
    };
    let transient = is_transient(&detail);
    StreamError::Remote { detail, transient }
}

/// Whether an error line reads like a passing failure (overload, a runner
/// that crashed and will be restarted) rather than a bad request.
fn is_transient(detail: &str) -> bool {
    let lower = detail.to_lowercase();
    [
        "overloaded",
        "unexpectedly stopped",
        "server busy",
        "try again",
    ]
    .iter()
    .any(|hint| lower.contains(hint))
}

/// `GET /api/tags`: `{"models":[{"name":"llama3.2:latest",…}]}`. It says
/// nothing about windows; [`parse_show`] does.
pub fn parse_tags(value: &Value) -> Result<Vec<ModelInfo>, ModelListError> {
    let tags = Tags::deserialize(value).unwrap_or_default();
    let models = tags
        .models
        .into_option()
        .ok_or(ModelListError::NoArray("models"))?;
    Ok(models
        .into_iter()
        .filter_map(Lenient::into_option)
        .filter_map(|tag| {
            Some(ModelInfo {
                id: tag.name.into_option().or(tag.model.into_option())?,
                context_window: None,
            })
        })
        .collect())
}

/// `POST /api/show`: the window a request gets. A `num_ctx` the model was
/// created with wins; otherwise the trained length, capped at
/// [`MAX_REPORTED_CONTEXT`].
pub fn parse_show(value: &Value) -> Option<u64> {
    let show = Show::deserialize(value).unwrap_or_default();
    let configured = (show.parameters.as_ref())
        .and_then(|parameters| {
            parameters.lines().find_map(|line| {
                let mut words = line.split_whitespace();
                match (words.next(), words.next()) {
                    (Some("num_ctx"), Some(size)) => size.parse::<u64>().ok(),
                    _ => None,
                }
            })
        })
        .filter(|&size| size > 0);
    if configured.is_some() {
        return configured;
    }
    show.model_info
        .into_option()?
        .iter()
        .find_map(|(key, size)| {
            key.ends_with(".context_length")
                .then(|| size.as_u64())
                .flatten()
        })
        .filter(|&size| size > 0)
        .map(|size| size.min(MAX_REPORTED_CONTEXT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolDefinition;
    use crate::providers::ProviderError;
    use crate::providers::testing::*;

    fn decode(lines: &[&str]) -> Vec<Result<ProviderEvent, ProviderError>> {
        let lines: Vec<(&str, &str)> = lines.iter().map(|line| ("", *line)).collect();
        decode_all::<StreamDecoder>(&lines)
    }

    fn fixture(name: &str) -> Vec<Result<ProviderEvent, ProviderError>> {
        let path = format!(
            "{}/tests/fixtures/ollama/{name}.ndjson",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n'), "{path} must end with a newline");
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        decode(&lines)
    }

    /// The same summary for every scenario: text, thought, calls (name and
    /// parsed arguments), usage, finish, and the error, if any.
    #[derive(Debug, Default, PartialEq)]
    struct Outcome {
        text: String,
        thought: String,
        calls: Vec<(String, String, Value)>,
        usage: Option<Usage>,
        finish: Option<FinishReason>,
        error: Option<String>,
    }

    fn outcome(events: Vec<Result<ProviderEvent, ProviderError>>) -> Outcome {
        let mut outcome = Outcome::default();
        let mut args: Vec<String> = Vec::new();
        for event in events {
            match event {
                Ok(ProviderEvent::TextDelta(t)) => outcome.text.push_str(&t),
                Ok(ProviderEvent::ThinkingDelta(t)) => outcome.thought.push_str(&t),
                Ok(ProviderEvent::ToolCallStart { index, id, name }) => {
                    assert_eq!(index, outcome.calls.len());
                    outcome.calls.push((id, name, Value::Null));
                    args.push(String::new());
                }
                Ok(ProviderEvent::ToolCallArgumentsDelta { index, delta }) => {
                    args[index].push_str(&delta);
                }
                Ok(ProviderEvent::ToolCallEnd { index }) => {
                    outcome.calls[index].2 = serde_json::from_str(&args[index]).unwrap();
                }
                Ok(ProviderEvent::Usage(usage)) => outcome.usage = Some(usage),
                Ok(ProviderEvent::Finish(reason)) => outcome.finish = Some(reason),
                Ok(other) => panic!("unexpected event {other:?}"),
                Err(err) => {
                    assert!(outcome.error.is_none(), "two errors");
                    outcome.error = Some(err.to_string());
                }
            }
        }
        outcome
    }

    fn call(id: &str, name: &str, arguments: Value) -> (String, String, Value) {
        (id.into(), name.into(), arguments)
    }

    /// A stream that finished for `finish` after so many tokens.
    fn finished(finish: FinishReason, prompt_tokens: u64, completion_tokens: u64) -> Outcome {
        Outcome {
            usage: Some(usage(prompt_tokens, completion_tokens)),
            finish: Some(finish),
            ..Outcome::default()
        }
    }

    impl Outcome {
        fn said(mut self, text: &str) -> Self {
            self.text = text.into();
            self
        }

        fn thinking(mut self, thought: &str) -> Self {
            self.thought = thought.into();
            self
        }

        fn called(mut self, call: (String, String, Value)) -> Self {
            self.calls.push(call);
            self
        }
    }

    #[test]
    fn fixtures_decode_as_the_readme_says() {
        use FinishReason::{Stop, ToolCalls};
        let cases = [
            ("text", finished(Stop, 12, 4).said("Hello, world!")),
            (
                "thinking",
                finished(Stop, 20, 10)
                    .said("The answer is 4.")
                    .thinking("Let me think. 2+2=4."),
            ),
            (
                "tool_call",
                finished(ToolCalls, 30, 15)
                    .said("Reading the file.")
                    .called(call("call_0", "read_file", json!({"path": "src/main.rs"}))),
            ),
            (
                "parallel_tool_calls",
                finished(ToolCalls, 40, 20)
                    .called(call("call_0", "read_file", json!({"path": "a.rs"})))
                    .called(call(
                        "call_1",
                        "grep",
                        json!({"pattern": "fn main", "path": "."}),
                    )),
            ),
            (
                "utf8_arguments",
                finished(ToolCalls, 25, 18).called(call(
                    "call_0",
                    "write_file",
                    json!({"path": "é.txt", "content": "héllo wörld ✓ 🎉"}),
                )),
            ),
        ];
        for (name, expected) in cases {
            assert_eq!(outcome(fixture(name)), expected, "{name}");
        }
        // Cut short: the text so far, no finish or usage, and why.
        for (name, says) in [
            ("error_mid_stream", &["Overloaded"][..]),
            ("dropped", &["ended before", "`done`"]),
        ] {
            let cut = outcome(fixture(name));
            assert_eq!(cut.text, "Partial", "{name}");
            assert!(cut.finish.is_none() && cut.usage.is_none(), "{name}");
            let error = cut.error.unwrap_or_default();
            assert!(says.iter().all(|s| error.contains(s)), "{name}: {error}");
        }
    }

    #[test]
    fn error_mid_stream_is_transient_remote_error() {
        let events = fixture("error_mid_stream");
        assert!(matches!(
            events.last(),
            Some(Err(ProviderError::Remote {
                transient: true,
                ..
            }))
        ));
    }

    #[test]
    fn error_lines_say_whether_to_retry() {
        let remote = |line: &str| match decode(&[line]).into_iter().next() {
            Some(Err(ProviderError::Remote {
                detail, transient, ..
            })) => (detail, transient),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            remote(r#"{"error":"llama runner process has unexpectedly stopped"}"#),
            ("llama runner process has unexpectedly stopped".into(), true)
        );
        assert!(
            remote(
                r#"{"error":"server busy, please try again.  maximum pending requests exceeded"}"#
            )
            .1
        );
        assert_eq!(
            remote(r#"{"error":"invalid tool call arguments"}"#),
            ("invalid tool call arguments".into(), false)
        );
        assert_eq!(
            remote(r#"{"error":{"message":"Overloaded"}}"#),
            ("Overloaded".into(), true)
        );
    }

    #[test]
    fn lines_that_are_not_json_objects_are_malformed() {
        for line in ["{not json", "[1,2]", "<html>502 Bad Gateway</html>"] {
            let events = decode(&[line]);
            assert!(
                matches!(events.first(), Some(Err(ProviderError::Malformed { detail, .. })) if detail.contains("not")),
                "{line}: {events:?}"
            );
        }
        let long = format!("{{{}", "x".repeat(1000));
        let Some(Err(ProviderError::Malformed { detail, .. })) =
            decode(&[&long]).into_iter().next()
        else {
            panic!("not malformed");
        };
        assert!(detail.len() < 400, "{detail}");
    }

    #[test]
    fn endings_without_done_are_errors() {
        assert!(matches!(
            decode(&[]).as_slice(),
            [Err(ProviderError::EmptyStream { .. })]
        ));
        let cut = decode(&[r#"{"message":{"role":"assistant","content":""},"done":false}"#]);
        assert!(matches!(
            cut.as_slice(),
            [Err(ProviderError::Truncated { .. })]
        ));
        let finished = decode(&[r#"{"message":{"role":"assistant","content":""},"done":true}"#]);
        assert_eq!(
            finished.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
            vec![
                ProviderEvent::Finish(FinishReason::Stop),
                ProviderEvent::Usage(Usage::default()),
            ]
        );
    }

    #[test]
    fn done_reason_maps_to_finish() {
        let finish = |reason: &str| {
            let line = format!(
                r#"{{"message":{{"role":"assistant","content":"x"}},"done":true,"done_reason":"{reason}","prompt_eval_count":3,"eval_count":1}}"#
            );
            outcome(decode(&[&line])).finish
        };
        assert_eq!(finish("stop"), Some(FinishReason::Stop));
        assert_eq!(finish("length"), Some(FinishReason::Length));
        assert_eq!(finish("load"), Some(FinishReason::Stop));
    }

    #[test]
    fn decoder_is_done_after_the_done_line() {
        let mut decoder = StreamDecoder::default();
        assert!(!decoder.done());
        decoder.on_event("", r#"{"message":{"content":"a"},"done":false}"#);
        assert!(!decoder.done());
        decoder.on_event("", r#"{"message":{"content":""},"done":true}"#);
        assert!(decoder.done());
        assert!(decoder.finish().is_empty());
    }

    #[test]
    fn tool_calls_get_unique_ids_and_string_arguments_pass_through() {
        let events = outcome(decode(&[
            r#"{"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_1","function":{"index":0,"name":"a","arguments":{}}},{"function":{"index":1,"name":"b","arguments":"{\"x\":1}"}}]},"done":false}"#,
            r#"{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"c","arguments":{"y":[1,2]}}},{"id":"call_1","function":{"name":"d","arguments":{}}}]},"done":false}"#,
            r#"{"message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}"#,
        ]));
        assert_eq!(
            events.calls,
            vec![
                call("call_1", "a", json!({})),
                call("call_2", "b", json!({"x": 1})),
                call("call_3", "c", json!({"y": [1, 2]})),
                // A repeated server id would merge two calls downstream.
                call("call_4", "d", json!({})),
            ]
        );
        assert_eq!(events.finish, Some(FinishReason::ToolCalls));
        let ids: BTreeSet<_> = events.calls.iter().map(|c| c.0.clone()).collect();
        assert_eq!(ids.len(), 4);
    }

    #[test]
    fn thinking_and_content_in_one_line_keep_their_order() {
        let events = decode(&[
            r#"{"message":{"role":"assistant","content":"B","thinking":"A"},"done":false}"#,
        ]);
        assert_eq!(
            events
                .into_iter()
                .take(2)
                .map(Result::unwrap)
                .collect::<Vec<_>>(),
            vec![
                ProviderEvent::ThinkingDelta("A".into()),
                ProviderEvent::TextDelta("B".into()),
            ]
        );
    }

    fn request(messages: Vec<Message>) -> ChatRequest {
        chat_request("llama3.2", Some("be brief"), messages)
    }

    #[test]
    fn request_body_sets_window_and_output_cap() {
        let mut chat = request(vec![Message::user_text("hi")]);
        let body = request_body(&chat);
        assert_eq!(body["model"], "llama3.2");
        assert_eq!(body["stream"], true);
        assert!(body.get("options").is_none());
        assert!(body.get("tools").is_none());
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
            ])
        );
        chat.context_window = Some(16384);
        chat.max_output_tokens = Some(1024);
        let body = request_body(&chat);
        assert_eq!(
            body["options"],
            json!({"num_ctx": 16384, "num_predict": 1024})
        );
        // The configured temperature joins them under `options`.
        let mut settings = ProviderSettings::local_ollama();
        settings.temperature = Some(0.5);
        let sent: Value =
            serde_json::from_str(&OllamaFormat.request_text(&chat, &settings, None)).unwrap();
        assert_eq!(
            sent["options"],
            json!({"num_ctx": 16384, "num_predict": 1024, "temperature": 0.5})
        );
        let sent: Value =
            serde_json::from_str(&OllamaFormat.request_text(&request(vec![]), &settings, None))
                .unwrap();
        assert_eq!(sent["options"], json!({"temperature": 0.5}));
    }

    #[test]
    fn request_body_sends_images_as_bare_base64() {
        let body = request_body(&request(vec![Message {
            role: Role::User,
            parts: vec![
                text("look"),
                png("AAAA"),
                text("<context uri=\"file:///a.rs\">\nfn main() {}\n</context>"),
            ],
        }]));
        assert_eq!(
            body["messages"][1],
            json!({
                "role": "user",
                "content": "look\n\n<context uri=\"file:///a.rs\">\nfn main() {}\n</context>",
                "images": ["AAAA"],
            })
        );
    }

    #[test]
    fn request_body_round_trips_tool_calls_results_and_thinking() {
        let body = request_body(&request(vec![
            Message::user_text("read it"),
            Message {
                role: Role::Assistant,
                parts: vec![
                    Part::Thinking {
                        text: "I should ".into(),
                        signature: None,
                    },
                    Part::RedactedThinking {
                        data: "opaque".into(),
                    },
                    Part::Thinking {
                        text: "read.".into(),
                        signature: Some("sig".into()),
                    },
                    text("Reading."),
                    tool_call("call_0", "read_file", r#"{"path":"a.rs"}"#),
                    tool_call("call_1", "grep", r#"{"pattern":"#),
                ],
            },
            Message {
                role: Role::User,
                parts: vec![
                    text("and then?"),
                    tool_result("call_0", "fn main() {}", false),
                    tool_result("call_unknown", "no such call", true),
                ],
            },
        ]));
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "read it"},
                {
                    "role": "assistant",
                    "content": "Reading.",
                    "thinking": "I should read.",
                    "tool_calls": [
                        {"function": {"name": "read_file", "arguments": {"path": "a.rs"}}},
                        {"function": {"name": "grep", "arguments": {}}},
                    ],
                },
                {"role": "tool", "content": "fn main() {}", "tool_name": "read_file"},
                {"role": "tool", "content": "no such call"},
                {"role": "user", "content": "and then?"},
            ])
        );
    }

    #[test]
    fn tool_results_name_the_latest_call_with_their_id() {
        let turn = |name: &str| Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall {
                id: "call_0".into(),
                name: name.into(),
                arguments: "{}".into(),
            }],
        };
        let result = Message {
            role: Role::User,
            parts: vec![tool_result("call_0", "ok", false)],
        };
        let body = request_body(&request(vec![
            turn("first"),
            result.clone(),
            turn("second"),
            result,
        ]));
        assert_eq!(body["messages"][2]["tool_name"], "first");
        assert_eq!(body["messages"][4]["tool_name"], "second");
    }

    #[test]
    fn request_body_tools_follow_tool_choice() {
        let mut chat = request(vec![Message::user_text("hi")]);
        chat.tools = vec![ToolDefinition {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }];
        let body = request_body(&chat);
        assert_eq!(
            body["tools"],
            json!([{
                "type": "function",
                "function": {
                    "name": "read_file",
                    "description": "Read a file",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                }
            }])
        );
        assert!(body.get("tool_choice").is_none());
        chat.tool_choice = ToolChoice::Required;
        assert!(request_body(&chat).get("tools").is_some());
        chat.tool_choice = ToolChoice::None;
        assert!(request_body(&chat).get("tools").is_none());
    }

    #[test]
    fn show_prefers_num_ctx_parameter() {
        let body = json!({
            "parameters": "num_keep                       24\nnum_ctx                        4096\nstop                           \"<|eot_id|>\"",
            "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
        });
        assert_eq!(parse_show(&body), Some(4096));
    }

    #[test]
    fn show_caps_trained_context_length() {
        let big = json!({
            "parameters": "stop \"<|eot_id|>\"",
            "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
        });
        assert_eq!(parse_show(&big), Some(MAX_REPORTED_CONTEXT));
        let small = json!({"model_info": {"qwen2.context_length": 8192}});
        assert_eq!(parse_show(&small), Some(8192));
    }

    #[test]
    fn show_without_either_reports_nothing() {
        assert_eq!(parse_show(&json!({})), None);
        assert_eq!(
            parse_show(&json!({
                "parameters": "num_keep 24",
                "model_info": {"general.architecture": "llama"},
            })),
            None
        );
    }

    #[test]
    fn tags_list_models_by_name() {
        let body = json!({"models": [
            {"name": "llama3.2:latest", "model": "llama3.2:latest", "size": 2019393189,
             "details": {"family": "llama", "parameter_size": "3.2B"}},
            {"model": "qwen3:8b"},
            {"size": 1},
        ]});
        assert_eq!(
            parse_tags(&body).unwrap(),
            vec![
                ModelInfo {
                    id: "llama3.2:latest".into(),
                    context_window: None,
                },
                ModelInfo {
                    id: "qwen3:8b".into(),
                    context_window: None,
                },
            ]
        );
        assert!(parse_tags(&json!({"models": []})).unwrap().is_empty());
        assert!(parse_tags(&json!({"data": []})).is_err());
    }
}
