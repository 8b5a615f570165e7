//! Tools the model can call: the [`Tool`] trait, the [`ToolRegistry`] and the
//! built-ins. Each tool describes itself twice: for the model (name,
//! description, JSON Schema) and for the editor (kind, title, locations,
//! content). The built-ins are [`TypedTool`]s: their schema is derived from
//! their argument struct. File contents go through [`FileSystem`] and commands through
//! [`Shell`], so the editor can take both over (ACP `fs/*`, `terminal/*`).
//! A running call reports progress through [`Progress`]. Nothing here
//! speaks ACP events; `translate` maps them.

pub mod brief;
pub mod builtin;
mod client_fs;
mod context;
pub mod delegate;
mod delegation;
pub mod environment;
mod fs;
pub mod journal;
mod plan_keeper;
mod progress;
pub mod redact;
pub mod repeats;
pub mod sandbox;
pub mod sensitive;
mod shell;
mod terminal;
#[cfg(test)]
pub(crate) mod test_support;
mod typed;
pub mod write_watch;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use thiserror::Error;

pub use crate::events::{Location, PlanDocument, TodoItem, ToolContent, ToolKind};
use crate::model::ToolDefinition;

pub use client_fs::ClientFs;
pub use context::{Asker, ToolContext, ToolSettings};
pub use delegate::DelegateTool;
pub use delegation::{Delegation, Delegator, ParentCall};
pub use fs::{ConfinedPath, FileSystem, FsFuture, LineWindow, LocalFs};
pub use journal::FileJournal;
pub use plan_keeper::{PlanError, PlanKeeper};
pub use progress::Progress;
pub use shell::{LocalShell, Shell, ShellOutput, ShellRun};
pub use terminal::ClientTerminal;
pub use typed::TypedTool;

/// A finished call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// What the model reads back (plain text).
    pub for_model: String,
    /// What the editor shows.
    pub content: Vec<ToolContent>,
    /// Structured result for ACP `rawOutput`.
    pub raw_output: serde_json::Value,
    /// Where the call acted, now that it is known (e.g. the edited line).
    pub locations: Vec<Location>,
    /// The session's plan, when the call changed it (the agent loop shows it).
    pub plan: Option<PlanChange>,
}

/// What a call changed of the session's plans.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanChange {
    /// The todo list, whole.
    Todos(Vec<TodoItem>),
    /// The Markdown plan, or None: removed.
    Document(Option<PlanDocument>),
}

impl ToolOutput {
    /// The same text for the model and the editor.
    pub fn text(text: impl Into<String>) -> Self {
        let text = text.into();
        Self {
            content: vec![ToolContent::Text(text.clone())],
            for_model: text,
            raw_output: serde_json::Value::Null,
            locations: Vec::new(),
            plan: None,
        }
    }

    pub fn with_raw_output(mut self, raw_output: serde_json::Value) -> Self {
        self.raw_output = raw_output;
        self
    }

    pub fn with_locations(mut self, locations: Vec<Location>) -> Self {
        self.locations = locations;
        self
    }
}

/// Why a call failed. The messages are written for the model, so it can
/// correct the call and try again.
#[derive(Debug, Error)]
pub enum ToolError {
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    #[error("no tool named `{name}`; the available tools are: {}", .available.join(", "))]
    UnknownTool {
        name: String,
        available: Vec<String>,
    },
    #[error(
        "{path} is outside the workspace; only paths inside {} may be used",
        display_paths(.allowed)
    )]
    PathOutsideWorkspace { path: String, allowed: Vec<PathBuf> },
    #[error("{path} does not exist; check the path with list_dir or glob")]
    NotFound { path: String },
    #[error("{path} is not a text file (binary or not UTF-8); it cannot be read or edited as text")]
    NotText { path: String },
    #[error(
        "{path} is {size} bytes, more than the {limit} bytes one read may return; read a part with offset and limit, or search it with grep"
    )]
    TooLarge { path: String, size: u64, limit: u64 },
    #[error("cannot access {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "old_text was not found in {path}. It must match the file exactly, including whitespace and indentation{hint}; read the file again and copy the lines exactly"
    )]
    EditNoMatch { path: String, hint: String },
    #[error(
        "old_text matches {count} places in {path}; include more surrounding lines so it matches exactly once, or set replace_all to true to change every one"
    )]
    EditAmbiguous { path: String, count: usize },
    #[error(
        "the command timed out after {seconds} s and was killed. Run long tasks with a larger timeout_secs, or in the background with their output sent to a file. Output before the kill:\n{output}"
    )]
    Timeout { seconds: u64, output: String },
    #[error("cancelled by the user")]
    Cancelled,
    /// A command stopped before it ended (the reason says why).
    #[error("the command was killed: {0}")]
    Killed(String),
    #[error("{0}")]
    Failed(String),
    /// An MCP server stopped during the call or cannot be reached: the
    /// user is told too, not only the model.
    #[error("{message}")]
    ServerDown { server: String, message: String },
}

fn display_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|path| path.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A running call.
pub type ToolFuture<'a> = BoxFuture<'a, Result<ToolOutput, ToolError>>;

/// A tool the model may call.
pub trait Tool: Send + Sync {
    /// The name the model calls it by: `^[a-zA-Z0-9_-]{1,64}$`.
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// The arguments as a JSON Schema object.
    fn parameters(&self) -> serde_json::Value;
    fn kind(&self) -> ToolKind;
    /// "Read src/main.rs", "Run `cargo test`": from the (possibly invalid) arguments.
    fn title(&self, arguments: &serde_json::Value) -> String;
    /// Where the call will act, before it runs (for the `tool_call` notification).
    fn locations(&self, arguments: &serde_json::Value, ctx: &ToolContext) -> Vec<Location>;
    /// Whether the tool changes anything (plan mode hides such tools;
    /// permissions ask for them).
    fn mutates(&self) -> bool;
    fn call<'a>(&'a self, arguments: serde_json::Value, ctx: &'a ToolContext) -> ToolFuture<'a>;

    /// A one-line description for small windows (see [`brief`]); None
    /// takes the first sentence of the description.
    fn brief(&self) -> Option<&str> {
        None
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name().to_string(),
            description: self.description().to_string(),
            parameters: self.parameters(),
        }
    }
}

/// The tools a session offers, in registration order (a stable order keeps
/// provider prompt caches warm).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    descriptions: Descriptions,
}

/// How the tools describe themselves to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Descriptions {
    /// Each tool's whole description and schema.
    #[default]
    Full,
    /// One line each (see [`brief`]), for a model with a small window.
    Brief,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// All built-in tools.
    pub fn builtin() -> Self {
        let mut registry = Self::new();
        for tool in builtin::all() {
            registry.register(tool);
        }
        registry
    }

    /// Adds a tool; one with the same name is replaced (in its place) and returned.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Option<Arc<dyn Tool>> {
        match self.tools.iter_mut().find(|t| t.name() == tool.name()) {
            Some(slot) => Some(std::mem::replace(slot, tool)),
            None => {
                self.tools.push(tool);
                None
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|tool| tool.name() == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|tool| tool.name())
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tools `keep` accepts, e.g. `|t| !t.mutates()` for plan mode.
    pub fn filtered(&self, keep: impl Fn(&dyn Tool) -> bool) -> Self {
        Self {
            tools: self
                .tools
                .iter()
                .filter(|tool| keep(tool.as_ref()))
                .cloned()
                .collect(),
            descriptions: self.descriptions,
        }
    }

    /// From now on, offer every tool's definition in this form.
    pub fn set_descriptions(&mut self, descriptions: Descriptions) {
        self.descriptions = descriptions;
    }

    /// What the provider is told.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        let definitions = self.tools.iter().map(|tool| tool.definition());
        if self.descriptions == Descriptions::Full {
            return definitions.collect();
        }
        definitions
            .zip(&self.tools)
            .map(|(definition, tool)| brief::brief_definition(definition, tool.brief()))
            .collect()
    }

    /// Runs the named tool; an unknown name is an error the model can act on.
    pub async fn call(
        &self,
        name: &str,
        arguments: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(tool) = self.get(name) else {
            return Err(ToolError::UnknownTool {
                name: name.to_string(),
                available: self.names().map(str::to_string).collect(),
            });
        };
        tool.call(arguments, ctx).await
    }
}

/// The model's argument text as JSON. An empty text means no arguments
/// (some models send "" for tools without parameters).
pub fn parse_arguments(text: &str) -> Result<serde_json::Value, ToolError> {
    if text.trim().is_empty() {
        return Ok(serde_json::Value::Object(serde_json::Map::new()));
    }
    serde_json::from_str(text).map_err(|err| {
        ToolError::InvalidArguments(format!("the arguments are not valid JSON: {err}"))
    })
}

/// Cuts `text` to at most `max_chars` characters, marking the cut.
pub(crate) fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// A path as the model should see it: relative to `cwd` when inside it.
pub(crate) fn display_path(path: &Path, cwd: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(relative) if relative.as_os_str().is_empty() => ".".to_string(),
        Ok(relative) => relative.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_definitions_are_json_schema_objects_with_valid_unique_names() {
        let registry = ToolRegistry::builtin();
        let definitions = registry.definitions();
        assert_eq!(definitions.len(), 10);
        let name_pattern = regex::Regex::new("^[a-zA-Z0-9_-]{1,64}$").unwrap();
        let mut names = std::collections::BTreeSet::new();
        for definition in &definitions {
            assert!(
                name_pattern.is_match(&definition.name),
                "{}",
                definition.name
            );
            assert!(
                names.insert(definition.name.clone()),
                "duplicate {}",
                definition.name
            );
            assert!(!definition.description.is_empty(), "{}", definition.name);
            let schema = &definition.parameters;
            assert_eq!(schema["type"], "object", "{}", definition.name);
            let properties = schema["properties"].as_object().unwrap();
            for (field, property) in properties {
                assert!(
                    property["type"].is_string(),
                    "{}.{field} has no type",
                    definition.name
                );
                assert!(
                    property["description"].is_string(),
                    "{}.{field} has no description",
                    definition.name
                );
            }
            let required = schema["required"].as_array().unwrap();
            for field in required {
                assert!(
                    properties.contains_key(field.as_str().unwrap()),
                    "{} requires unknown {field}",
                    definition.name
                );
            }
        }
    }

    #[test]
    fn builtin_tools_describe_kind_and_mutation() {
        let registry = ToolRegistry::builtin();
        let mutating: Vec<&str> = registry
            .iter()
            .filter(|tool| tool.mutates())
            .map(|tool| tool.name())
            .collect();
        assert_eq!(mutating, ["write_file", "edit_file", "shell"]);
        let plan = registry.filtered(|tool| !tool.mutates());
        assert_eq!(
            plan.names().collect::<Vec<_>>(),
            [
                "read_file",
                "list_dir",
                "glob",
                "grep",
                "todo",
                "write_plan",
                "ask_user"
            ]
        );
        assert_eq!(registry.get("shell").unwrap().kind(), ToolKind::Execute);
        assert_eq!(registry.get("grep").unwrap().kind(), ToolKind::Search);
        assert_eq!(ToolKind::Think.as_str(), "think");
    }

    #[test]
    fn register_replaces_a_tool_of_the_same_name_in_place() {
        let mut registry = ToolRegistry::builtin();
        let before: Vec<String> = registry.names().map(str::to_string).collect();
        let previous = registry.register(Arc::new(builtin::grep::GrepTool));
        assert!(previous.is_some());
        let after: Vec<String> = registry.names().map(str::to_string).collect();
        assert_eq!(before, after);
    }

    #[tokio::test]
    async fn unknown_tool_names_the_available_ones() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::local(dir.path());
        let err = ToolRegistry::builtin()
            .call("rm_rf", serde_json::json!({}), &ctx)
            .await
            .unwrap_err();
        let message = err.to_string();
        assert!(message.contains("no tool named `rm_rf`"), "{message}");
        assert!(message.contains("read_file"), "{message}");
    }

    #[test]
    fn parse_arguments_accepts_empty_text_and_rejects_bad_json() {
        assert_eq!(parse_arguments("").unwrap(), serde_json::json!({}));
        assert_eq!(parse_arguments(r#"{"a":1}"#).unwrap()["a"], 1);
        assert!(matches!(
            parse_arguments("{oops"),
            Err(ToolError::InvalidArguments(_))
        ));
    }

    #[test]
    fn shorten_cuts_on_char_boundaries() {
        assert_eq!(shorten("héllo", 2), "hé…");
        assert_eq!(shorten("hi", 2), "hi");
    }
}
