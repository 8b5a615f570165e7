//! The `delegate` tool: the model hands a focused task to another agent
//! card, which runs it in a child session of its own and answers with its
//! final text. The tool only describes the call; who runs the child is a
//! port ([`Delegator`], in `delegation`) the session layer implements, so
//! tools never know sessions.
//!
//! Named `delegate`, not `task` (Claude Code's and opencode's word): next
//! to the `todo` tool, whose entries are tasks, a small local model picks
//! the wrong one less often when the name says what the call does.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::delegation::{Delegation, ParentCall};
use super::typed::{deserialize_arguments, schema_for};
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolKind};
use crate::events::Location;

pub const NAME: &str = "delegate";

/// The arguments the model gives.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct DelegateArgs {
    /// The agent card to run the task, by name (one of those listed in this tool's description).
    pub agent: String,
    /// The task, complete in itself: the agent sees nothing of this conversation. Say what to find or do and what to report back.
    #[schemars(length(min = 1))]
    pub task: String,
}

/// The tool, listing the cards it can hand work to.
pub struct DelegateTool {
    description: String,
    /// The card names, an `enum` in the schema: a model whose calls are
    /// held to the schema (llama.cpp's grammar, strict modes) cannot name
    /// a card that does not exist.
    names: Vec<String>,
}

impl DelegateTool {
    /// `cards`: (name, description) of every card a task can go to.
    pub fn new<'a>(cards: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut names = Vec::new();
        let mut description = String::from(
            "Hand a focused task to another agent, which works in a fresh context with its own instructions and tools and answers with a concise result. Use it for self-contained work (survey code, review a change, research how something works); several calls in one answer run at once. The agents:",
        );
        for (name, about) in cards {
            description.push_str(&format!("\n- {name}: {about}"));
            names.push(name.to_string());
        }
        Self { description, names }
    }
}

impl Tool for DelegateTool {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn brief(&self) -> Option<&str> {
        Some("Hand a task to another agent; it answers with the result.")
    }

    fn parameters(&self) -> Value {
        let mut schema = schema_for::<DelegateArgs>();
        if !self.names.is_empty() {
            schema["properties"]["agent"]["enum"] = Value::from(self.names.clone());
        }
        schema
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Other
    }

    fn title(&self, arguments: &Value) -> String {
        let args = DelegateArgs::deserialize(arguments).unwrap_or_default();
        let agent = if args.agent.is_empty() {
            "an agent"
        } else {
            args.agent.as_str()
        };
        let task = super::shorten(args.task.lines().next().unwrap_or_default(), 60);
        format!("Delegate to {agent}: {task}")
    }

    fn locations(&self, _: &Value, _: &ToolContext) -> Vec<Location> {
        Vec::new()
    }

    /// Delegating changes nothing by itself: the child's own calls are
    /// checked by the permissions it inherits.
    fn mutates(&self) -> bool {
        false
    }

    fn call<'a>(&'a self, arguments: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: DelegateArgs = deserialize_arguments(arguments)?;
            if args.task.trim().is_empty() {
                return Err(ToolError::InvalidArguments(
                    "`task` is empty; say what the agent should do".into(),
                ));
            }
            let Some(delegator) = ctx.delegator.clone() else {
                return Err(ToolError::Failed(
                    "delegation is not available in this session".into(),
                ));
            };
            let delegation = Delegation {
                agent: args.agent,
                task: args.task,
                call_id: ctx.call_id.clone().unwrap_or_default(),
            };
            let parent = ParentCall {
                cancel: &ctx.cancel,
                progress: &ctx.progress,
                roots: &ctx.roots,
                sandbox: &ctx.sandbox,
            };
            delegator.delegate(delegation, parent).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_lists_the_cards_and_the_schema_is_typed() {
        let tool = DelegateTool::new([("explorer", "Searches"), ("reviewer", "Reviews")]);
        assert!(tool.description().contains("- explorer: Searches"));
        assert!(tool.description().contains("- reviewer: Reviews"));
        let schema = tool.parameters();
        assert_eq!(schema["required"], serde_json::json!(["agent", "task"]));
        assert_eq!(
            schema["properties"]["agent"]["enum"],
            serde_json::json!(["explorer", "reviewer"])
        );
        assert_eq!(schema["properties"]["task"]["minLength"], 1);
        assert_eq!(
            tool.title(&serde_json::json!({"agent": "explorer", "task": "find the parser\nmore"})),
            "Delegate to explorer: find the parser"
        );
    }

    #[tokio::test]
    async fn without_a_delegator_the_call_fails_for_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::local(dir.path());
        let tool = DelegateTool::new([]);
        let err = tool
            .call(serde_json::json!({"agent": "explorer", "task": "x"}), &ctx)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not available"), "{err}");
        let err = tool
            .call(serde_json::json!({"agent": "explorer", "task": " "}), &ctx)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("`task` is empty"), "{err}");
    }
}
