//! `todo`: the model's plan for the task, kept in the session (and shown in
//! the editor as an ACP `plan`).

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::json;

use crate::tools::{Tool, ToolContext, ToolError, ToolOutput, deserialize_arguments};

use crate::events::{Location, TodoItem, TodoPriority, TodoStatus, ToolKind};

#[derive(Debug, Clone, Copy, Default)]
pub struct TodoTool;

#[derive(Debug, Deserialize)]
struct Arguments {
    todos: Vec<TodoItem>,
}

impl Tool for TodoTool {
    fn name(&self) -> &str {
        "todo"
    }

    fn description(&self) -> &str {
        "Keep a todo list for a task with several steps; the user sees it. Each call replaces the whole list: \
         send every item with its current status. Mark an item in_progress when you start it and completed as soon as it is done; \
         keep one item in_progress at a time."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "description": "The whole list, in order",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {
                                "type": "string",
                                "description": "What to do, briefly"
                            },
                            "status": {
                                "type": "string",
                                "enum": ["pending", "in_progress", "completed"],
                                "description": "Where the item stands"
                            },
                            "priority": {
                                "type": "string",
                                "enum": ["high", "medium", "low"],
                                "description": "How much it matters (default medium)"
                            }
                        },
                        "required": ["content", "status"]
                    }
                }
            },
            "required": ["todos"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    fn title(&self, _arguments: &serde_json::Value) -> String {
        "Update the todo list".into()
    }

    fn locations(&self, _arguments: &serde_json::Value, _ctx: &ToolContext) -> Vec<Location> {
        Vec::new()
    }

    fn mutates(&self) -> bool {
        false
    }

    fn call<'a>(
        &'a self,
        arguments: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let arguments: Arguments = deserialize_arguments(arguments)?;
            update(arguments.todos, ctx)
        })
    }
}

fn update(mut todos: Vec<TodoItem>, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    for (index, item) in todos.iter_mut().enumerate() {
        item.content = item.content.trim().to_string();
        if item.content.is_empty() {
            return Err(ToolError::InvalidArguments(format!(
                "`todos[{index}].content` is empty"
            )));
        }
    }
    let raw_output = serde_json::to_value(&todos)
        .map(|todos| json!({ "todos": todos }))
        .map_err(|err| ToolError::Failed(format!("could not record the todo list: {err}")))?;
    let for_model = describe(&todos);
    ctx.set_todos(todos);
    let mut output = ToolOutput::text(for_model);
    output.raw_output = raw_output;
    Ok(output)
}

fn describe(todos: &[TodoItem]) -> String {
    if todos.is_empty() {
        return "The todo list is now empty.".into();
    }
    let count = |status| todos.iter().filter(|item| item.status == status).count();
    let mut text = format!(
        "Todo list updated: {} completed, {} in progress, {} pending.\n",
        count(TodoStatus::Completed),
        count(TodoStatus::InProgress),
        count(TodoStatus::Pending)
    );
    for item in todos {
        let mark = match item.status {
            TodoStatus::Completed => "[x]",
            TodoStatus::InProgress => "[>]",
            TodoStatus::Pending => "[ ]",
        };
        let priority = match item.priority {
            TodoPriority::High => " (high priority)",
            TodoPriority::Medium => "",
            TodoPriority::Low => " (low priority)",
        };
        text.push_str(&format!("{mark} {}{priority}\n", item.content));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::workspace;

    #[tokio::test]
    async fn replaces_the_sessions_list() {
        let ws = workspace();
        ws.ctx.set_todos(vec![TodoItem {
            content: "old".into(),
            status: TodoStatus::Pending,
            priority: TodoPriority::Low,
        }]);
        let out = ws
            .call(
                &TodoTool,
                json!({"todos": [
                    {"content": "Read the code", "status": "completed"},
                    {"content": "Fix the bug", "status": "in_progress", "priority": "high"},
                    {"content": " Run the tests ", "status": "pending", "priority": "low"}
                ]}),
            )
            .await
            .unwrap();
        assert_eq!(
            out.for_model,
            "Todo list updated: 1 completed, 1 in progress, 1 pending.\n\
             [x] Read the code\n\
             [>] Fix the bug (high priority)\n\
             [ ] Run the tests (low priority)\n"
        );
        let todos = ws.ctx.todos();
        assert_eq!(todos.len(), 3);
        assert_eq!(todos[0].priority, TodoPriority::Medium);
        assert_eq!(todos[1].status, TodoStatus::InProgress);
        assert_eq!(todos[2].content, "Run the tests");
        assert_eq!(out.raw_output["todos"][1]["status"], "in_progress");
    }

    #[tokio::test]
    async fn an_empty_list_clears_it() {
        let ws = workspace();
        let out = ws.call(&TodoTool, json!({"todos": []})).await.unwrap();
        assert_eq!(out.for_model, "The todo list is now empty.");
        assert!(ws.ctx.todos().is_empty());
    }

    #[tokio::test]
    async fn bad_items_name_the_field_and_keep_the_old_list() {
        let ws = workspace();
        let status = ws
            .call(
                &TodoTool,
                json!({"todos": [{"content": "x", "status": "done"}]}),
            )
            .await
            .unwrap_err();
        let message = status.to_string();
        assert!(message.contains("`todos[0].status`"), "{message}");
        assert!(message.contains("in_progress"), "{message}");
        let empty = ws
            .call(
                &TodoTool,
                json!({"todos": [{"content": "a", "status": "pending"}, {"content": " ", "status": "pending"}]}),
            )
            .await
            .unwrap_err();
        assert_eq!(
            empty.to_string(),
            "invalid arguments: `todos[1].content` is empty"
        );
        assert!(ws.ctx.todos().is_empty());
    }
}
