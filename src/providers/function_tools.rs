//! Tools as `function` entries: the form OpenAI-compatible servers and
//! Ollama take, and the one the prompted convention shows the model. One
//! encoder, below every format that uses it.

use serde::Serialize;

use super::ToolDefinition;

/// `{"type": "function", "function": {…}}`: how the chat-completions
/// format wraps a function, whether it describes a tool (`function` is a
/// [`Function`]), names the one tool the model must call, or is a past call.
/// Fields are in the order the text has always had them (prompt caches and
/// the prompted tool section see the same bytes).
#[derive(Debug, Serialize)]
pub struct FunctionEntry<F> {
    #[serde(rename = "type")]
    pub kind: FunctionKind,
    pub function: F,
}

impl<F> FunctionEntry<F> {
    pub fn of(function: F) -> Self {
        Self {
            kind: FunctionKind::Function,
            function,
        }
    }
}

/// A tool, as the `tools` list holds it.
pub type FunctionTool<'a> = FunctionEntry<Function<'a>>;

#[derive(Debug, Serialize)]
pub struct Function<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub parameters: &'a serde_json::Value,
}

/// The only tool type there is.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FunctionKind {
    Function,
}

impl<'a> FunctionTool<'a> {
    pub fn new(tool: &'a ToolDefinition) -> Self {
        Self::of(Function {
            name: &tool.name,
            description: &tool.description,
            parameters: &tool.parameters,
        })
    }
}

/// Every tool as a `function` entry, in the registry's order.
pub fn function_tools(tools: &[ToolDefinition]) -> Vec<FunctionTool<'_>> {
    tools.iter().map(FunctionTool::new).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_is_written_as_before() {
        let tool = ToolDefinition {
            name: "read_file".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        };
        let written = serde_json::to_string(&FunctionTool::new(&tool)).unwrap();
        let before = json!({
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            }
        });
        assert_eq!(written, before.to_string());
    }
}
