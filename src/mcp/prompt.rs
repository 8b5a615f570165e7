//! MCP prompts: what a server's `prompts/list` offers, and a `prompts/get`
//! result as the messages of a user turn.

use std::sync::Arc;

use serde_json::Value;

use super::content::Block;
use crate::model::{Message, Part, Role};

/// One prompt of one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPrompt {
    pub server: String,
    /// The name the server knows it by.
    pub name: String,
    pub description: Option<String>,
    /// In the order the server declares them.
    pub arguments: Vec<McpPromptArgument>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPromptArgument {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
}

impl McpPrompt {
    pub(crate) fn new(server: &str, prompt: &rmcp::model::Prompt) -> Self {
        let description = prompt
            .description
            .clone()
            .or_else(|| prompt.title.clone())
            .filter(|d| !d.trim().is_empty());
        Self {
            server: server.to_string(),
            name: prompt.name.clone(),
            description,
            arguments: prompt
                .arguments
                .iter()
                .flatten()
                .map(|arg| McpPromptArgument {
                    name: arg.name.clone(),
                    description: arg.description.clone(),
                    required: arg.required.unwrap_or(false),
                })
                .collect(),
        }
    }
}

/// The prompt's messages as the crate's, consecutive messages of one role
/// joined (providers that want alternating roles get them).
pub(crate) fn messages(result: &rmcp::model::GetPromptResult) -> Vec<Arc<Message>> {
    let mut out: Vec<Message> = Vec::new();
    for message in &result.messages {
        let role = match message.role {
            rmcp::model::Role::Assistant => Role::Assistant,
            rmcp::model::Role::User => Role::User,
        };
        // Through JSON, as tool results are: the block's shape is the spec's,
        // whatever rmcp's Rust types look like in a later version.
        let block = serde_json::to_value(&message.content).unwrap_or(Value::Null);
        let part = part(&block);
        match out.last_mut() {
            Some(last) if last.role == role => last.parts.push(part),
            _ => out.push(Message {
                role,
                parts: vec![part],
            }),
        }
    }
    out.into_iter().map(Arc::new).collect()
}

/// One content block: text, images and embedded text resources as the model
/// sees them in a user's prompt; what it cannot read becomes a note.
fn part(block: &Value) -> Part {
    let block = Block::read(block);
    let text = |text: String| Part::Text { text };
    match block.kind.as_deref() {
        Some("text") => text(block.text.unwrap_or_default()),
        Some("image") => match (block.mime_type, block.data) {
            (Some(mime_type), Some(data)) => Part::Image { mime_type, data },
            _ => text("[image without data]".into()),
        },
        Some("resource") => {
            let resource = block.resource.map(|resource| *resource).unwrap_or_default();
            let uri = resource.uri.unwrap_or_default();
            match (resource.text, resource.blob, resource.mime_type) {
                // The same shape as an ACP client's embedded resource.
                (Some(body), _, _) => text(format!("<context uri=\"{uri}\">\n{body}\n</context>")),
                (None, Some(data), Some(mime_type)) if mime_type.starts_with("image/") => {
                    Part::Image { mime_type, data }
                }
                (_, _, mime) => text(format!(
                    "[binary resource {uri}{}]",
                    mime.map(|m| format!(" ({m})")).unwrap_or_default()
                )),
            }
        }
        Some("resource_link") => text(format!(
            "[{}]({})",
            block.name.unwrap_or_default(),
            block.uri.unwrap_or_default()
        )),
        Some(other) => text(format!("[{other} content]")),
        None => text("[unknown content]".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_messages_become_turn_messages() {
        let result: rmcp::model::GetPromptResult = serde_json::from_value(serde_json::json!({
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Review this:"}},
                {"role": "user", "content": {"type": "resource", "resource":
                    {"uri": "file:///a.rs", "mimeType": "text/x-rust", "text": "fn main() {}"}}},
                {"role": "assistant", "content": {"type": "text", "text": "Sure."}},
                {"role": "user", "content": {"type": "image", "data": "AAAA", "mimeType": "image/png"}},
                {"role": "user", "content": {"type": "resource", "resource":
                    {"uri": "file:///b.bin", "mimeType": "application/zip", "blob": "AAAA"}}}
            ]
        }))
        .unwrap();
        let messages = messages(&result);
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[0].role, Role::User);
        assert_eq!(
            messages[0].parts,
            vec![
                Part::Text {
                    text: "Review this:".into()
                },
                Part::Text {
                    text: "<context uri=\"file:///a.rs\">\nfn main() {}\n</context>".into()
                },
            ]
        );
        assert_eq!(messages[1].text(), "Sure.");
        assert_eq!(
            messages[2].parts[0],
            Part::Image {
                mime_type: "image/png".into(),
                data: "AAAA".into()
            }
        );
        assert_eq!(
            messages[2].parts[1],
            Part::Text {
                text: "[binary resource file:///b.bin (application/zip)]".into()
            }
        );
    }
}
