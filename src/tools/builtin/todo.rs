//! `todo`: the model's plan for the task, kept in the session (and shown in
//! the editor as an ACP `plan`).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::events::{TodoItem, TodoPriority, TodoStatus, ToolKind};
use crate::tools::{PlanChange, ToolContext, ToolError, ToolOutput, TypedTool};

#[derive(Debug, Clone, Copy, Default)]
pub struct TodoTool;

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Args {
    /// The whole list, in order
    todos: Vec<Entry>,
}

// One item as the model writes it (a doc comment would show in the schema).
#[derive(Debug, Deserialize, JsonSchema)]
struct Entry {
    /// What to do, briefly
    content: String,
    /// Where the item stands
    status: TodoStatus,
    /// How much it matters (default medium)
    priority: Option<TodoPriority>,
}

impl TypedTool for TodoTool {
    type Args = Args;
    const NAME: &'static str = "todo";
    const DESCRIPTION: &'static str = "Keep a todo list for a task with several steps; the user sees it. Each call replaces the whole list: \
         send every item with its current status. Mark an item in_progress when you start it and completed as soon as it is done; \
         keep one item in_progress at a time.";
    const BRIEF: Option<&'static str> = Some("Set your task list, shown to the user.");
    const KIND: ToolKind = ToolKind::Think;
    const MUTATES: bool = false;

    fn title_for(&self, _args: &Args) -> String {
        "Update the todo list".into()
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        update(args.todos, ctx)
    }
}

/// Replaces the session's list; the output carries it as the new plan.
fn update(entries: Vec<Entry>, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let mut todos = Vec::with_capacity(entries.len());
    for (index, entry) in entries.into_iter().enumerate() {
        let content = entry.content.trim().to_string();
        if content.is_empty() {
            return Err(ToolError::InvalidArguments(format!(
                "`todos[{index}].content` is empty"
            )));
        }
        todos.push(TodoItem {
            content,
            status: entry.status,
            priority: entry.priority.unwrap_or_default(),
        });
    }
    let raw_output = serde_json::to_value(&todos)
        .map(|todos| json!({ "todos": todos }))
        .map_err(|err| ToolError::Failed(format!("could not record the todo list: {err}")))?;
    ctx.set_todos(todos.clone());
    let mut output = ToolOutput::text(describe(&todos)).with_raw_output(raw_output);
    output.plan = Some(PlanChange::Todos(todos));
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
    use crate::tools::test_support::*;

    #[tokio::test]
    async fn replaces_the_sessions_list() {
        let ws = workspace();
        ws.ctx.set_todos(vec![TodoItem {
            content: "old".into(),
            status: TodoStatus::Pending,
            priority: TodoPriority::Low,
        }]);
        let out = ws
            .run(
                &TodoTool,
                json!({"todos": [
                    {"content": "Read the code", "status": "completed"},
                    {"content": "Fix the bug", "status": "in_progress", "priority": "high"},
                    {"content": " Run the tests ", "status": "pending", "priority": "low"}
                ]}),
            )
            .await;
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
        assert_eq!(out.plan, Some(PlanChange::Todos(todos)));
    }

    #[tokio::test]
    async fn an_empty_list_clears_it() {
        let (ws, out) = run_on(&[], &TodoTool, json!({"todos": []})).await;
        assert_eq!(out.for_model, "The todo list is now empty.");
        assert!(ws.ctx.todos().is_empty());
    }

    #[tokio::test]
    async fn bad_items_name_the_field_and_keep_the_old_list() {
        let ws = workspace();
        let unknown_status = json!({"todos": [{"content": "x", "status": "done"}]});
        let status = ws.fail(&TodoTool, unknown_status).await.to_string();
        assert_contains(&status, "`todos[0].status`");
        assert_contains(&status, "in_progress");
        let blank = json!({"todos": [
            {"content": "a", "status": "pending"},
            {"content": " ", "status": "pending"}
        ]});
        let empty = ws.fail(&TodoTool, blank).await;
        assert_eq!(
            empty.to_string(),
            "invalid arguments: `todos[1].content` is empty"
        );
        assert!(ws.ctx.todos().is_empty());
    }
}
