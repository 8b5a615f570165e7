//! Tools that only read though they do not say so (`[permissions] reads`):
//! MCP tools without a trusted `readOnlyHint` run as reads, kind `read`:
//! offered in plan mode, run without a question in act, unless a rule or
//! a `[permissions]` list says otherwise. By default, the reads of
//! Crucible's kiln server (`crucible`, which declares no annotations), so
//! the agent reads notes as freely as Crucible's own agent does; its
//! writes, deletes and `delegate_session` ask as any other tool.

use std::sync::Arc;

use crate::events::{Location, ToolKind};
use crate::tools::{Tool, ToolContext, ToolFuture};

/// The name the Crucible TUI gives its kiln's MCP server.
pub const KILN_SERVER: &str = "crucible";

/// The kiln server's tools that only read.
pub const KILN_READS: [&str; 10] = [
    "read_note",
    "list_notes",
    "semantic_search",
    "grep_notes",
    "property_search",
    "read_metadata",
    "get_kiln_info",
    "skill_view",
    "list_jobs",
    "get_job_result",
];

/// The tools (by the name the model calls) that run as reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredReads {
    tools: Vec<String>,
    /// Written in the config, not the built-in default.
    configured: bool,
}

impl Default for DeclaredReads {
    /// The kiln server's reads.
    fn default() -> Self {
        Self {
            tools: KILN_READS
                .iter()
                .map(|tool| format!("{KILN_SERVER}__{tool}"))
                .collect(),
            configured: false,
        }
    }
}

impl DeclaredReads {
    /// `[permissions] reads`, which replaces the default.
    pub fn configured(tools: Vec<String>) -> Self {
        Self {
            tools,
            configured: true,
        }
    }

    pub fn tools(&self) -> &[String] {
        &self.tools
    }

    /// Whether these are the built-in default.
    pub fn is_default(&self) -> bool {
        !self.configured
    }

    /// `tool` as a read when it is declared one; otherwise as it is.
    pub fn apply(&self, tool: Arc<dyn Tool>) -> Arc<dyn Tool> {
        if tool.mutates() && self.tools.iter().any(|name| name == tool.name()) {
            Arc::new(AsRead(tool))
        } else {
            tool
        }
    }
}

/// A tool declared a read: everything as the tool says, but its kind and
/// that it changes nothing.
struct AsRead(Arc<dyn Tool>);

impl Tool for AsRead {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn description(&self) -> &str {
        self.0.description()
    }

    fn parameters(&self) -> serde_json::Value {
        self.0.parameters()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn title(&self, arguments: &serde_json::Value) -> String {
        self.0.title(arguments)
    }

    fn locations(&self, arguments: &serde_json::Value, ctx: &ToolContext) -> Vec<Location> {
        self.0.locations(arguments, ctx)
    }

    fn mutates(&self) -> bool {
        false
    }

    fn call<'a>(&'a self, arguments: serde_json::Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        self.0.call(arguments, ctx)
    }

    fn brief(&self) -> Option<&str> {
        self.0.brief()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolRegistry;

    #[test]
    fn declared_reads_become_reads_and_others_stay_as_they_are() {
        let builtin = ToolRegistry::builtin();
        let shell = builtin.get("shell").unwrap().clone();
        assert!(shell.mutates());
        let reads = DeclaredReads::configured(vec!["shell".into()]);
        let read = reads.apply(Arc::clone(&shell));
        assert_eq!((read.kind(), read.mutates()), (ToolKind::Read, false));
        assert_eq!(read.name(), "shell");
        assert_eq!(read.definition(), shell.definition());
        let untouched = DeclaredReads::default().apply(Arc::clone(&shell));
        assert_eq!(
            (untouched.kind(), untouched.mutates()),
            (ToolKind::Execute, true)
        );
        assert!(DeclaredReads::default().is_default());
        assert!((DeclaredReads::default().tools()).contains(&"crucible__read_note".to_string()));
        assert!(
            !(DeclaredReads::default().tools())
                .iter()
                .any(|tool| tool.contains("update_note") || tool.contains("delegate_session"))
        );
    }
}
