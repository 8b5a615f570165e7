//! How a model is given its tools: natively (the request's `tools` field)
//! or prompted (described in the system prompt, called in text the agent
//! parses). `tool_calling = "auto" | "native" | "prompted"` per provider and
//! per model; under `auto` a server that refuses tools switches that model
//! to prompted for the rest of the process.
//!
//! Prompted requests use one convention, Hermes' `<tool_call>{…}</tool_call>`
//! (what Qwen, Hermes and most small instruction-tuned models were trained
//! on, and the text tool-call decoder reads). Past calls and results go back
//! in that same text form: a server that refused tools may not render the
//! `tool` role either. The tool text is appended to the system prompt in
//! the registry's order, so it is the same on every request (prompt caches
//! keep the prefix).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::function_tools::function_tools;
use super::settings::ProviderSettings;
pub use super::settings::ToolCalling;
use super::{ChatRequest, Message, Part, ProviderError, ToolChoice, ToolDefinition};
use crate::events::{Notice, Severity};
use crate::util::lock;

/// The (provider, model) pairs switched to prompted by a refusal, for the
/// rest of the process.
static SWITCHED: Mutex<BTreeSet<(String, String)>> = Mutex::new(BTreeSet::new());

/// Whether requests for `model` of this provider are prompted now.
pub fn is_prompted(settings: &ProviderSettings, model: &str) -> bool {
    match settings.tool_calling_for(model) {
        ToolCalling::Prompted => true,
        ToolCalling::Native => false,
        ToolCalling::Auto => lock(&SWITCHED).contains(&(settings.name.clone(), model.to_string())),
    }
}

/// Whether `err` is the server refusing the request's tools: Ollama's 400
/// "… does not support tools", or an OpenAI-compatible 400/422 that names
/// tools (vLLM without a tool parser, llama-server without `--jinja`).
pub fn refuses_tools(err: &ProviderError) -> bool {
    let ProviderError::Http { status, detail, .. } = err else {
        return false;
    };
    let detail = detail.to_ascii_lowercase();
    matches!(status, 400 | 422 | 500)
        && (detail.contains("does not support tools")
            || detail.contains("tools")
            || detail.contains("tool_choice")
            || detail.contains("tool choice"))
        && (*status != 500 || detail.contains("--jinja"))
}

/// Whether the failed request carried tools (only then can it have been
/// refused for them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolsSent {
    Yes,
    No,
}

/// After a failed call: when the server refused the tools of a model under
/// `auto`, switch it to prompted (once per process) and return the notice
/// for the user; the caller sends the request again at once.
pub fn switch_on_refusal(
    settings: &ProviderSettings,
    model: &str,
    err: &ProviderError,
    sent: ToolsSent,
) -> Option<Notice> {
    if sent == ToolsSent::No
        || settings.tool_calling_for(model) != ToolCalling::Auto
        || !refuses_tools(err)
    {
        return None;
    }
    let newly = lock(&SWITCHED).insert((settings.name.clone(), model.to_string()));
    if !newly {
        return None;
    }
    let provider = &settings.name;
    let detail = format!(
        "The server refused the tools ({err}). Tools are now described in the system prompt and the model's calls are read from its text, for the rest of this run. To skip the refusal next time, set tool_calling = \"prompted\" in [llm.providers.{provider}] (or under [llm.providers.{provider}.models.\"{model}\"])."
    );
    Some(Notice {
        severity: Severity::Warning,
        title: format!("Model `{model}` does not take tools natively; using prompted tool calls"),
        thought: format!("{detail}\n"),
        detail: Some(detail),
    })
}

/// `request` as sent to a model that runs prompted: no `tools` field, the
/// tools described at the end of the system prompt, and past calls and
/// results written as text in the same convention.
pub fn prompted_request(mut request: ChatRequest) -> ChatRequest {
    let tools = std::mem::take(&mut request.tools);
    if !tools.is_empty() && request.tool_choice != ToolChoice::None {
        let described = describe_tools(&tools);
        request.system = Some(match request.system.take() {
            Some(system) => format!("{system}\n\n{described}"),
            None => described,
        });
    }
    request.tool_choice = ToolChoice::Auto;
    request.messages = request.messages.into_iter().map(as_text).collect();
    request
}

/// The system prompt's tool section.
pub fn describe_tools(tools: &[ToolDefinition]) -> String {
    let signatures: Vec<String> = function_tools(tools)
        .iter()
        .map(|entry| json!(entry).to_string())
        .collect();
    format!(
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call>\n\nThe results come back within <tool_response></tool_response> XML tags. Call a tool only when you need it, and only with the tools listed here.",
        signatures.join("\n")
    )
}

/// A call as the convention writes it.
pub fn call_text(name: &str, arguments: &str) -> String {
    let arguments = serde_json::from_str::<Value>(arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    // Name first, as the convention shows it.
    format!(
        "<tool_call>\n{{\"name\": {}, \"arguments\": {arguments}}}\n</tool_call>",
        Value::from(name)
    )
}

/// A message with its calls and results as text; others as they are.
fn as_text(message: Arc<Message>) -> Arc<Message> {
    let structured = message
        .parts
        .iter()
        .any(|part| matches!(part, Part::ToolCall { .. } | Part::ToolResult { .. }));
    if !structured {
        return message;
    }
    let mut parts: Vec<Part> = Vec::with_capacity(message.parts.len());
    for part in &message.parts {
        let text = match part {
            Part::ToolCall {
                name, arguments, ..
            } => call_text(name, arguments),
            Part::ToolResult { content, .. } => {
                format!("<tool_response>\n{content}\n</tool_response>")
            }
            other => {
                parts.push(other.clone());
                continue;
            }
        };
        // Calls and results join the text around them.
        match parts.last_mut() {
            Some(Part::Text { text: before }) => {
                if !before.is_empty() {
                    before.push('\n');
                }
                before.push_str(&text);
            }
            _ => parts.push(Part::Text { text }),
        }
    }
    Arc::new(Message {
        role: message.role,
        parts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Role;

    fn settings(mode: ToolCalling) -> ProviderSettings {
        let mut settings = ProviderSettings::local_ollama();
        settings.name = format!("tool-calling-test-{}", mode.as_str());
        settings.tool_calling = mode;
        settings
    }

    fn http(status: u16, detail: &str) -> ProviderError {
        ProviderError::Http {
            provider: "p".into(),
            status,
            detail: detail.into(),
            retry_after: None,
        }
    }

    fn tool() -> ToolDefinition {
        ToolDefinition {
            name: "read_file".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }
    }

    #[test]
    fn refusals_of_tools_are_told_from_other_errors() {
        for (status, detail, refusal) in [
            (
                400,
                "registry.ollama.ai/library/gemma:2b does not support tools",
                true,
            ),
            (
                400,
                "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
                true,
            ),
            (422, "Extra inputs are not permitted: body.tools", true),
            (500, "tools param requires --jinja flag", true),
            (500, "CUDA out of memory", false),
            (500, "tools went missing", false),
            (400, "messages: field required", false),
            (429, "too many tools requests", false),
        ] {
            assert_eq!(
                refuses_tools(&http(status, detail)),
                refusal,
                "{status} {detail}"
            );
        }
        let empty = ProviderError::EmptyStream {
            provider: "p".into(),
            window: None,
        };
        assert!(!refuses_tools(&empty));
    }

    #[test]
    fn a_refusal_switches_an_auto_model_once() {
        let auto = settings(ToolCalling::Auto);
        let refused = http(400, "m does not support tools");
        assert!(!is_prompted(&auto, "m"));
        // Not when no tools were sent, nor for another error.
        assert!(switch_on_refusal(&auto, "m", &refused, ToolsSent::No).is_none());
        assert!(switch_on_refusal(&auto, "m", &http(400, "bad"), ToolsSent::Yes).is_none());
        let notice = switch_on_refusal(&auto, "m", &refused, ToolsSent::Yes).expect("switched");
        assert!(notice.title.contains("prompted"), "{notice:?}");
        assert!(
            notice.thought.contains("tool_calling = \"prompted\""),
            "{notice:?}"
        );
        assert!(is_prompted(&auto, "m"));
        assert!(!is_prompted(&auto, "other-model"));
        // Once: a second refusal is an error like any other.
        assert!(switch_on_refusal(&auto, "m", &refused, ToolsSent::Yes).is_none());
        // A model set to native never switches.
        let native = settings(ToolCalling::Native);
        assert!(switch_on_refusal(&native, "m", &refused, ToolsSent::Yes).is_none());
        assert!(!is_prompted(&native, "m"));
        assert!(is_prompted(&settings(ToolCalling::Prompted), "m"));
    }

    #[test]
    fn a_prompted_request_has_no_tools_and_the_same_prefix_every_time() {
        let call = Arc::new(Message {
            role: Role::Assistant,
            parts: vec![
                Part::Text {
                    text: "Let me look.".into(),
                },
                Part::ToolCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a.txt"}"#.into(),
                },
            ],
        });
        let result = Arc::new(Message {
            role: Role::User,
            parts: vec![Part::ToolResult {
                call_id: "c1".into(),
                content: "hello".into(),
                is_error: false,
            }],
        });
        let user = Arc::new(Message::user_text("read a.txt"));
        let request = |messages: Vec<Arc<Message>>| ChatRequest {
            model: "m".into(),
            system: Some("You are helpful.".into()),
            messages,
            tools: vec![tool()],
            tool_choice: ToolChoice::Auto,
            max_output_tokens: None,
            context_window: None,
            reasoning: None,
            cache_key: None,
        };
        let first = prompted_request(request(vec![Arc::clone(&user)]));
        let later = prompted_request(request(vec![Arc::clone(&user), call, result]));
        assert!(first.tools.is_empty() && later.tools.is_empty());
        let system = first.system.clone().unwrap_or_default();
        assert!(
            system.starts_with("You are helpful.\n\n# Tools"),
            "{system}"
        );
        assert!(system.contains(r#""name":"read_file""#), "{system}");
        assert!(system.contains("<tool_call>"), "{system}");
        assert_eq!(first.system, later.system);
        // Plain messages are passed as they are.
        assert!(Arc::ptr_eq(&first.messages[0], &user));
        assert_eq!(
            later.messages[1].text(),
            "Let me look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\":\"a.txt\"}}\n</tool_call>"
        );
        assert_eq!(later.messages[2].role, Role::User);
        assert_eq!(
            later.messages[2].text(),
            "<tool_response>\nhello\n</tool_response>"
        );
    }

    #[test]
    fn the_convention_is_one_the_text_decoder_reads() {
        let tools = [tool()];
        let mut decoder = super::super::dialects::TextCallDecoder::new(&tools);
        let written = format!(
            "Let me read it.\n{}",
            call_text("read_file", r#"{"path":"a.txt"}"#)
        );
        let mut shown = decoder.push(&written);
        let finished = decoder.finish(super::super::dialects::AnswerEnd::Stopped);
        shown.push_str(&finished.text);
        assert_eq!(shown.trim(), "Let me read it.");
        assert_eq!(finished.calls.len(), 1, "{finished:?}");
        assert_eq!(finished.calls[0].name, "read_file");
        let arguments: Value = serde_json::from_str(&finished.calls[0].arguments).unwrap();
        assert_eq!(arguments, json!({"path": "a.txt"}));
    }

    #[test]
    fn modes_parse_by_name() {
        for mode in ToolCalling::ALL {
            assert_eq!(ToolCalling::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(ToolCalling::parse("text"), None);
    }
}
