//! The conversation model every layer shares: messages, their parts, the
//! tools a model may call, and the id a session is known by. Plain data; no
//! I/O and no protocol.

use serde::{Deserialize, Serialize};

mod session_id;

pub use session_id::SessionId;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
    },
    Image {
        mime_type: String,
        /// Base64, as ACP carries it.
        data: String,
    },
    /// The model's reasoning. Kept so providers that need it back (Anthropic
    /// thinking signatures) can round-trip it; others drop it from requests.
    Thinking {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Anthropic's encrypted reasoning; only Anthropic can read it back.
    RedactedThinking {
        data: String,
    },
    ToolCall {
        id: String,
        name: String,
        /// The arguments as the model wrote them (JSON text).
        arguments: String,
    },
    ToolResult {
        call_id: String,
        content: String,
        #[serde(default)]
        is_error: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

impl Message {
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            parts: vec![Part::Text { text: text.into() }],
        }
    }

    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            parts: vec![Part::Text { text: text.into() }],
        }
    }

    /// All text parts joined, for providers that take plain strings.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            if let Part::Text { text } = part {
                out.push_str(text);
            }
        }
        out
    }
}

/// A tool the model may call, described by JSON Schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// System-level instructions a client gave a session (ACP's unstable
/// `systemPrompt`), kept with it so a load or resume applies them again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientPrompt {
    /// True replaces the agent's built-in base prompt; false adds the text
    /// as the last layer.
    #[serde(default)]
    pub replaces_base: bool,
    pub text: String,
}
