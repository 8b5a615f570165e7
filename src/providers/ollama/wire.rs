//! Ollama's `/api/chat`, `/api/tags` and `/api/show` as serde types. Only
//! what the agent sends and reads is here; unknown fields are ignored, and
//! fields Ollama versions fill differently are optional or [`Lenient`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::providers::function_tools::FunctionTool;
use crate::providers::lenient::Lenient;

/// The body of a streamed `/api/chat` call. Fields are in the order the
/// body has always had them.
#[derive(Debug, Serialize)]
pub struct ChatBody<'a> {
    pub model: &'a str,
    pub stream: bool,
    pub messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Options::is_empty")]
    pub options: Options,
    /// `true`/`false`, or gpt-oss's level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think: Option<Think>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<FunctionTool<'a>>,
    /// How long the model stays loaded: a duration string or seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_alive: Option<&'a Value>,
}

/// Sampling and size settings, beside each other under `options`.
#[derive(Debug, Default, Serialize)]
pub struct Options {
    /// Without it Ollama uses its small default window and silently drops
    /// the start of a longer prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_ctx: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_predict: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
}

impl Options {
    fn is_empty(&self) -> bool {
        self.num_ctx.is_none() && self.num_predict.is_none() && self.temperature.is_none()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Think {
    On(bool),
    Level(&'static str),
}

/// One entry of `messages`.
#[derive(Debug, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: String,
        /// Bare base64, no data-URL prefix.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        images: Vec<&'a str>,
    },
    Assistant {
        content: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        thinking: String,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<SentCall<'a>>,
    },
    /// A tool's result; `tool_name` names the call it answers.
    Tool {
        content: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_name: Option<&'a str>,
    },
}

/// A past call: arguments as an object, not JSON text.
#[derive(Debug, Serialize)]
pub struct SentCall<'a> {
    pub function: SentFunction<'a>,
}

#[derive(Debug, Serialize)]
pub struct SentFunction<'a> {
    pub name: &'a str,
    pub arguments: Value,
}

/// One line of the `/api/chat` stream.
#[derive(Debug, Default, Deserialize)]
pub struct Line {
    /// An error line: a string, or an object with a `message`.
    #[serde(default)]
    pub error: Option<Value>,
    #[serde(default)]
    pub message: Lenient<LineMessage>,
    /// The last line: it carries the finish and the counts.
    #[serde(default)]
    pub done: Lenient<bool>,
    #[serde(default)]
    pub done_reason: Lenient<String>,
    #[serde(default)]
    pub prompt_eval_count: Lenient<u64>,
    #[serde(default)]
    pub eval_count: Lenient<u64>,
}

#[derive(Debug, Default, Deserialize)]
pub struct LineMessage {
    #[serde(default)]
    pub content: Lenient<String>,
    #[serde(default)]
    pub thinking: Lenient<String>,
    #[serde(default)]
    pub tool_calls: Lenient<Vec<Lenient<LineCall>>>,
}

/// A call, sent whole.
#[derive(Debug, Default, Deserialize)]
pub struct LineCall {
    /// Older Ollama sends none.
    #[serde(default)]
    pub id: Lenient<String>,
    #[serde(default)]
    pub function: Lenient<LineFunction>,
}

#[derive(Debug, Default, Deserialize)]
pub struct LineFunction {
    #[serde(default)]
    pub name: Lenient<String>,
    /// An object; some servers send JSON text.
    #[serde(default)]
    pub arguments: Option<Value>,
}

/// An error object: `{"message": "…"}`.
#[derive(Debug, Default, Deserialize)]
pub struct ErrorObject {
    #[serde(default)]
    pub message: Lenient<String>,
}

/// `GET /api/tags`: `{"models": [{"name": "llama3.2:latest", …}]}`.
#[derive(Debug, Default, Deserialize)]
pub struct Tags {
    #[serde(default)]
    pub models: Lenient<Vec<Lenient<Tag>>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Tag {
    #[serde(default)]
    pub name: Lenient<String>,
    #[serde(default)]
    pub model: Lenient<String>,
}

/// `POST /api/show`'s body.
#[derive(Debug, Serialize)]
pub struct ShowRequest<'a> {
    pub model: &'a str,
}

/// What `/api/show` says of a model's window.
#[derive(Debug, Default, Deserialize)]
pub struct Show {
    /// The Modelfile's parameters, one `name value` per line.
    #[serde(default)]
    pub parameters: Lenient<String>,
    /// Keyed by architecture: `llama.context_length` and the like.
    #[serde(default)]
    pub model_info: Lenient<Map<String, Value>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The body's text is what `json!` made before these types.
    #[test]
    fn a_full_request_is_written_as_before() {
        let keep_alive = json!("30m");
        let body = ChatBody {
            model: "m",
            stream: true,
            messages: vec![
                WireMessage::System { content: "s" },
                WireMessage::Tool {
                    content: "r",
                    tool_name: Some("n"),
                },
                WireMessage::User {
                    content: "u".into(),
                    images: vec!["AAAA"],
                },
                WireMessage::Assistant {
                    content: "a".into(),
                    thinking: "t".into(),
                    tool_calls: vec![SentCall {
                        function: SentFunction {
                            name: "n",
                            arguments: json!({"p": 1}),
                        },
                    }],
                },
            ],
            options: Options {
                num_ctx: Some(8192),
                num_predict: Some(100),
                temperature: Some(0.5),
            },
            think: Some(Think::On(true)),
            tools: Vec::new(),
            keep_alive: Some(&keep_alive),
        };
        let mut before = json!({
            "model": "m",
            "stream": true,
            "messages": [
                {"role": "system", "content": "s"},
                {"role": "tool", "content": "r", "tool_name": "n"},
                {"role": "user", "content": "u", "images": ["AAAA"]},
                {"role": "assistant", "content": "a", "thinking": "t",
                 "tool_calls": [{"function": {"name": "n", "arguments": {"p": 1}}}]},
            ],
        });
        before["options"] = json!({"num_ctx": 8192, "num_predict": 100});
        before["think"] = json!(true);
        before["options"]["temperature"] = json!(0.5);
        before["keep_alive"] = keep_alive.clone();
        assert_eq!(json!(body).to_string(), before.to_string());
    }

    /// Every recorded stream reads into lines.
    #[test]
    fn recorded_streams_read_as_lines() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ollama");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            for data in text.lines().filter(|line| !line.trim().is_empty()) {
                let line: Result<Line, _> = serde_json::from_str(data);
                assert!(line.is_ok(), "{}: {data}: {line:?}", path.display());
            }
        }
    }
}
