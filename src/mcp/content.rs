//! MCP content blocks (in tool results and prompts) read by serde into one
//! typed [`Block`]. Read from their JSON, as the spec writes them, rather
//! than through rmcp's Rust types, which change between its versions.

use serde::Deserialize;
use serde_json::Value;

/// A content block's members (and an embedded resource's), each read when
/// it holds a string and skipped otherwise: one odd member must not lose the
/// whole prompt.
#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Block {
    #[serde(rename = "type", deserialize_with = "string")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "string")]
    pub text: Option<String>,
    #[serde(deserialize_with = "string")]
    pub mime_type: Option<String>,
    #[serde(deserialize_with = "string")]
    pub data: Option<String>,
    #[serde(deserialize_with = "string")]
    pub blob: Option<String>,
    #[serde(deserialize_with = "string")]
    pub uri: Option<String>,
    #[serde(deserialize_with = "string")]
    pub name: Option<String>,
    #[serde(deserialize_with = "string")]
    pub description: Option<String>,
    pub resource: Option<Box<Block>>,
}

/// A string member, or none when it holds anything else.
fn string<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::String(text) => Some(text),
        _ => None,
    })
}

impl Block {
    /// `value` as a block; anything unreadable is a block with no members.
    pub(crate) fn read(value: &Value) -> Self {
        Self::deserialize(value).unwrap_or_default()
    }
}
