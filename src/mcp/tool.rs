//! An MCP server's tool as a [`Tool`]: described to the model by the
//! server's own schema, run through the server, its result turned into text.

use super::content::Block;
use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

use super::error::McpCallError;
use super::server_handle::ServerHandle;
use super::spec::ReadOnlyHints;
use crate::events::{Location, ToolContent, ToolKind};
use crate::tools::{Tool, ToolContext, ToolError, ToolOutput};

/// One tool of one MCP server.
pub struct McpTool {
    name: String,
    server_name: String,
    tool_name: String,
    description: String,
    parameters: Value,
    read_only: bool,
    /// Not read-only and not marked `destructiveHint: false` (MCP's
    /// default is destructive): the files its arguments name are kept for
    /// rewinds.
    destructive: bool,
    server: ServerHandle,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("server", &self.server_name)
            .field("tool", &self.tool_name)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    pub(crate) fn new(
        name: String,
        server_name: &str,
        tool: &rmcp::model::Tool,
        hints: ReadOnlyHints,
        server: ServerHandle,
    ) -> Self {
        let description = match tool.description.as_deref().map(str::trim) {
            Some(text) if !text.is_empty() => format!("[MCP server `{server_name}`] {text}"),
            _ => match &tool.title {
                Some(title) => format!("[MCP server `{server_name}`] {title}"),
                None => format!("[MCP server `{server_name}`] the tool `{}`", tool.name),
            },
        };
        // A hint is the server's claim: it counts only from a trusted server.
        let read_only = hints == ReadOnlyHints::Trusted
            && tool
                .annotations
                .as_ref()
                .and_then(|annotations| annotations.read_only_hint)
                == Some(true);
        let destructive = !read_only
            && tool
                .annotations
                .as_ref()
                .and_then(|annotations| annotations.destructive_hint)
                != Some(false);
        Self {
            name,
            server_name: server_name.to_string(),
            tool_name: tool.name.to_string(),
            description,
            parameters: object_schema(&tool.input_schema),
            read_only,
            destructive,
            server,
        }
    }

    /// The server's name, as configured.
    pub fn server_name(&self) -> &str {
        &self.server_name
    }

    /// The tool's name on its server (what is called).
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn kind(&self) -> ToolKind {
        if self.read_only {
            ToolKind::Read
        } else {
            ToolKind::Other
        }
    }

    fn title(&self, _arguments: &Value) -> String {
        format!("{}: {}", self.server_name, self.tool_name)
    }

    fn locations(&self, _arguments: &Value, _ctx: &ToolContext) -> Vec<Location> {
        Vec::new()
    }

    /// Only a trusted server's own `readOnlyHint` spares the user the question.
    fn mutates(&self) -> bool {
        !self.read_only
    }

    fn call<'a>(
        &'a self,
        arguments: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let arguments = match arguments {
                Value::Null => None,
                Value::Object(map) => Some(map),
                other => {
                    return Err(ToolError::InvalidArguments(format!(
                        "the arguments must be a JSON object, not {}",
                        json_type(&other)
                    )));
                }
            };
            let Some(server) = self.server.upgrade() else {
                return Err(ToolError::Failed(format!(
                    "MCP server `{}` has been shut down",
                    self.server_name
                )));
            };
            let watch = match (&arguments, self.destructive) {
                (Some(arguments), true) => Some(crate::tools::write_watch::Watch::before_call(
                    &Value::Object(arguments.clone()),
                    ctx,
                )),
                _ => None,
            };
            let result = server
                .call(&self.tool_name, arguments, &ctx.cancel, &ctx.progress)
                .await;
            if let Some(watch) = watch {
                watch.after_call(ctx);
            }
            let result = result.map_err(|err| match err {
                McpCallError::Cancelled => ToolError::Cancelled,
                McpCallError::InvalidParams { message, .. } => ToolError::InvalidArguments(message),
                McpCallError::Died { ref server, .. }
                | McpCallError::Unavailable { ref server, .. } => ToolError::ServerDown {
                    server: server.clone(),
                    message: err.to_string(),
                },
                other => ToolError::Failed(other.to_string()),
            })?;
            convert_result(result, ctx.settings.output_cap)
        })
    }
}

/// The tool's input schema as a JSON Schema object (what providers require).
fn object_schema(schema: &Arc<Map<String, Value>>) -> Value {
    let mut schema = schema.as_ref().clone();
    match schema.get("type") {
        None => {
            schema.insert("type".into(), json!("object"));
        }
        Some(Value::String(kind)) if kind == "object" => {}
        // Not an object schema: providers would reject the whole request.
        Some(_) => return json!({"type": "object", "properties": {}}),
    }
    if !schema.get("properties").is_some_and(Value::is_object) {
        schema.insert("properties".into(), json!({}));
    }
    Value::Object(schema)
}

/// A result as text for the model and the editor. `isError` results are
/// errors the model reads; the result itself becomes `rawOutput` (clients
/// such as Crucible's show a tool's result only from there).
fn convert_result(result: CallToolResult, output_cap: usize) -> Result<ToolOutput, ToolError> {
    // Read through JSON: the wire shapes are stable, rmcp's types less so.
    let blocks = match serde_json::to_value(&result.content) {
        Ok(Value::Array(blocks)) => blocks,
        _ => Vec::new(),
    };
    let parts: Vec<String> = blocks.iter().map(describe_block).collect();
    let text = parts.join("\n");
    if result.is_error == Some(true) {
        let message = if text.trim().is_empty() {
            "the tool reported an error without a message".to_string()
        } else {
            cap_text(&text, output_cap)
        };
        return Err(ToolError::Failed(message));
    }
    let raw_output = raw_result(&blocks, result.structured_content.as_ref(), output_cap);
    let structured = result.structured_content.unwrap_or(Value::Null);
    let for_model = if !text.trim().is_empty() {
        text
    } else if !structured.is_null() {
        structured.to_string()
    } else {
        "(no output)".to_string()
    };
    let content = if parts.is_empty() {
        vec![ToolContent::Text(for_model.clone())]
    } else {
        // The editor can show images; the model reads the note about them.
        blocks
            .iter()
            .zip(parts)
            .map(|(block, part)| {
                let block = Block::read(block);
                match (block.kind.as_deref(), block.mime_type, block.data) {
                    (Some("image"), Some(mime_type), Some(data)) => {
                        ToolContent::Image { mime_type, data }
                    }
                    _ => ToolContent::Text(part),
                }
            })
            .collect()
    };
    Ok(ToolOutput {
        for_model: cap_text(&for_model, output_cap),
        content,
        raw_output,
        locations: Vec::new(),
        plan: None,
    })
}

/// The MCP result as the client's `rawOutput`: its content blocks (text cut
/// at `output_cap`, media without their data, which `content` carries) and
/// its structured content.
fn raw_result(blocks: &[Value], structured: Option<&Value>, output_cap: usize) -> Value {
    let content: Vec<Value> = blocks
        .iter()
        .map(|block| {
            let mut block = block.clone();
            if let Some(fields) = block.as_object_mut() {
                if let Some(Value::String(text)) = fields.get_mut("text") {
                    *text = cap_text(text, output_cap);
                }
                fields.remove("data");
            }
            block
        })
        .collect();
    let mut raw = json!({ "content": content });
    if let Some(structured) = structured {
        raw["structuredContent"] = structured.clone();
    }
    raw
}

/// One content block as text for the model: media become a note.
fn describe_block(block: &Value) -> String {
    let block = Block::read(block);
    let field = |value: &Option<String>| value.clone().unwrap_or_default();
    match block.kind.as_deref().unwrap_or("") {
        "text" => field(&block.text),
        kind @ ("image" | "audio") => format!(
            "[{kind}: {}, {} bytes]",
            or_unknown(&field(&block.mime_type)),
            base64_len(&field(&block.data))
        ),
        "resource_link" => {
            let mut text = format!("[resource: {}", field(&block.uri));
            for extra in [&block.name, &block.description] {
                if !field(extra).is_empty() {
                    text.push_str(&format!(" ({})", field(extra)));
                }
            }
            text.push(']');
            text
        }
        "resource" => {
            let resource = block.resource.map(|resource| *resource).unwrap_or_default();
            let uri = field(&resource.uri);
            match (resource.text, resource.blob) {
                (Some(text), _) => format!("[resource: {uri}]\n{text}"),
                (None, Some(blob)) => format!(
                    "[resource: {uri}, {}, {} bytes]",
                    or_unknown(&field(&resource.mime_type)),
                    base64_len(&blob)
                ),
                (None, None) => format!("[resource: {uri}]"),
            }
        }
        other => format!("[{} content]", or_unknown(other)),
    }
}

fn or_unknown(text: &str) -> &str {
    if text.is_empty() {
        "unknown type"
    } else {
        text
    }
}

/// The decoded size of base64 text.
fn base64_len(data: &str) -> usize {
    let digits = data.bytes().filter(|b| !b.is_ascii_whitespace()).count();
    let padding = data.bytes().rev().take_while(|&b| b == b'=').count();
    (digits * 3 / 4).saturating_sub(padding)
}

fn cap_text(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_string();
    }
    let mut cut = cap;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n[output cut: {} of {} bytes shown]",
        &text[..cut],
        cut,
        text.len()
    )
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(json: Value) -> CallToolResult {
        serde_json::from_value(json).unwrap()
    }

    fn tool(json: Value) -> McpTool {
        let tool: rmcp::model::Tool = serde_json::from_value(json).unwrap();
        McpTool::new(
            "srv__t".into(),
            "srv",
            &tool,
            ReadOnlyHints::Trusted,
            ServerHandle::gone(),
        )
    }

    #[test]
    fn read_only_hints_count_only_from_trusted_servers() {
        let hinted: rmcp::model::Tool = serde_json::from_value(json!({
            "name": "look", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true}
        }))
        .unwrap();
        let trusted = McpTool::new(
            "s__look".into(),
            "s",
            &hinted,
            ReadOnlyHints::Trusted,
            ServerHandle::gone(),
        );
        assert!(!trusted.mutates());
        assert_eq!(trusted.kind(), ToolKind::Read);
        let untrusted = McpTool::new(
            "s__look".into(),
            "s",
            &hinted,
            ReadOnlyHints::Ignored,
            ServerHandle::gone(),
        );
        assert!(untrusted.mutates());
        assert_eq!(untrusted.kind(), ToolKind::Other);
    }

    #[test]
    fn text_blocks_become_the_output() {
        let output = convert_result(
            result(
                json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
            ),
            1000,
        )
        .unwrap();
        assert_eq!(output.for_model, "a\nb");
        assert_eq!(
            output.content,
            vec![ToolContent::Text("a".into()), ToolContent::Text("b".into())]
        );
        assert_eq!(
            output.raw_output,
            json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
        );
    }

    #[test]
    fn is_error_results_are_errors_the_model_reads() {
        let err = convert_result(
            result(json!({"content": [{"type": "text", "text": "no such file"}], "isError": true})),
            1000,
        )
        .unwrap_err();
        assert!(
            matches!(&err, ToolError::Failed(m) if m == "no such file"),
            "{err}"
        );
        let err =
            convert_result(result(json!({"content": [], "isError": true})), 1000).unwrap_err();
        assert!(err.to_string().contains("without a message"), "{err}");
    }

    #[test]
    fn media_and_resources_become_notes_for_the_model_and_images_for_the_editor() {
        let output = convert_result(
            result(json!({"content": [
                {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
                {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"},
                {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt"},
                {"type": "resource", "resource": {"uri": "test://r/1", "text": "hello"}},
                {"type": "resource", "resource": {"uri": "test://r/2", "mimeType": "application/zip", "blob": "AAAAAA=="}}
            ]})),
            1000,
        )
        .unwrap();
        assert_eq!(
            output.for_model,
            "[image: image/png, 8 bytes]\n[audio: audio/wav, 3 bytes]\n[resource: file:///a.txt (a.txt)]\n[resource: test://r/1]\nhello\n[resource: test://r/2, application/zip, 4 bytes]"
        );
        assert_eq!(output.content.len(), 5);
        // The editor gets the image itself.
        assert_eq!(
            output.content[0],
            ToolContent::Image {
                mime_type: "image/png".into(),
                data: "iVBORw0KGgo=".into()
            }
        );
        assert!(matches!(&output.content[1], ToolContent::Text(t) if t.starts_with("[audio")));
    }

    #[test]
    fn structured_content_is_the_raw_output() {
        let output = convert_result(
            result(json!({"content": [], "structuredContent": {"sum": 3}})),
            1000,
        )
        .unwrap();
        assert_eq!(output.raw_output["structuredContent"], json!({"sum": 3}));
        assert_eq!(output.for_model, r#"{"sum":3}"#);
        let empty = convert_result(result(json!({"content": []})), 1000).unwrap();
        assert_eq!(empty.for_model, "(no output)");
    }

    #[test]
    fn long_output_is_capped_for_the_model() {
        let output = convert_result(
            result(json!({"content": [{"type": "text", "text": "é".repeat(100)}]})),
            51,
        )
        .unwrap();
        assert!(
            output.for_model.starts_with(&"é".repeat(25)),
            "{}",
            output.for_model
        );
        assert!(
            output
                .for_model
                .contains("[output cut: 50 of 200 bytes shown]")
        );
    }

    #[test]
    fn schemas_are_made_object_schemas() {
        assert_eq!(
            tool(json!({"name": "t", "inputSchema": {}})).parameters(),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            tool(json!({"name": "t", "inputSchema": {"type": "string"}})).parameters(),
            json!({"type": "object", "properties": {}})
        );
        let schema =
            json!({"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]});
        assert_eq!(
            tool(json!({"name": "t", "inputSchema": schema.clone()})).parameters(),
            schema
        );
    }

    #[test]
    fn read_only_hint_decides_kind_and_mutation() {
        let read =
            tool(json!({"name": "t", "inputSchema": {}, "annotations": {"readOnlyHint": true}}));
        assert_eq!(read.kind(), ToolKind::Read);
        assert!(!read.mutates());
        for annotations in [json!({"readOnlyHint": false}), json!({}), Value::Null] {
            let other = tool(json!({"name": "t", "inputSchema": {}, "annotations": annotations}));
            assert_eq!(other.kind(), ToolKind::Other);
            assert!(other.mutates());
        }
    }

    #[test]
    fn description_and_title_name_the_server() {
        let t = tool(json!({"name": "echo", "description": "Echoes.", "inputSchema": {}}));
        assert_eq!(t.description(), "[MCP server `srv`] Echoes.");
        assert_eq!(t.title(&json!({})), "srv: echo");
        assert_eq!(t.name(), "srv__t");
        assert_eq!(t.tool_name(), "echo");
        assert!(
            t.locations(&json!({}), &ToolContext::local("/tmp"))
                .is_empty()
        );
    }

    #[tokio::test]
    async fn calls_check_arguments_and_a_gone_server() {
        let t = tool(json!({"name": "echo", "inputSchema": {}}));
        let ctx = ToolContext::local("/tmp");
        let err = t.call(json!([1]), &ctx).await.unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments(_)), "{err}");
        let err = t.call(json!({}), &ctx).await.unwrap_err();
        assert!(err.to_string().contains("has been shut down"), "{err}");
    }
}
