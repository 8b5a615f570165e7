//! Prompt suggestions (ACP unstable `prompt_suggestions_update`), for
//! clients that take them. Only what costs no model call and is true when
//! the turn ends: "Continue" after a turn a limit stopped (the model's
//! output limit, the turn's model calls or its token budget), and the todo
//! list's next step while one is left. A prompt that starts withdraws them
//! (whatever it does may make them untrue: it can change the list, clear
//! or rewind the context); a prompt turn's end (not a built-in command's)
//! offers them again if they still hold. They are no part of the history:
//! never recorded or replayed.

use super::SessionActor;
use crate::client::Update;
use crate::events::{StopReason, TodoItem, TodoStatus};

/// Go on where a limit stopped the turn.
pub(super) const CONTINUE: &str = "Continue";

/// What the user may send next after a turn that ended for `stop` with
/// `todos` as the session's todo list, most likely first. None after a
/// cancel (the user stopped it: what next is theirs) or a refusal.
pub(super) fn after_turn(stop: StopReason, todos: &[TodoItem]) -> Vec<String> {
    let mut prompts = Vec::new();
    match stop {
        StopReason::MaxTokens | StopReason::MaxTurnRequests => prompts.push(CONTINUE.to_string()),
        StopReason::EndTurn => {}
        StopReason::Refusal | StopReason::Cancelled => return prompts,
    }
    if let Some(step) = next_step(todos) {
        prompts.push(format!("Continue with the plan: {step}"));
    }
    prompts
}

/// The step being worked on, else the first one not started.
fn next_step(todos: &[TodoItem]) -> Option<&str> {
    let first = |status| todos.iter().find(|item| item.status == status);
    first(TodoStatus::InProgress)
        .or_else(|| first(TodoStatus::Pending))
        .map(|item| item.content.trim())
        // ACP: no prompt whose only content is blank text.
        .filter(|content| !content.is_empty())
}

impl SessionActor {
    /// A prompt starts: what was suggested is withdrawn.
    pub(super) fn withdraw_suggestions(&mut self) {
        if std::mem::take(&mut self.conversation.suggested) {
            self.send(Update::PromptSuggestions(Vec::new()));
        }
    }

    /// A prompt turn (not a built-in command's) ended for `stop`: offer
    /// what holds now. Delegated agents' sessions offer none (the user does
    /// not prompt them), and a session past its budget none (its next
    /// prompt stops before calling the model, or asks first).
    pub(super) fn suggest(&mut self, stop: StopReason) {
        if !self.services.abilities.prompt_suggestions
            || self.services.depth > 0
            || self.over_budget().is_some()
        {
            return;
        }
        let prompts = after_turn(stop, &self.services.tool_context.todos());
        if !prompts.is_empty() {
            self.conversation.suggested = true;
            self.send(Update::PromptSuggestions(prompts));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::TodoPriority;

    fn item(content: &str, status: TodoStatus) -> TodoItem {
        TodoItem {
            content: content.into(),
            status,
            priority: TodoPriority::Medium,
        }
    }

    #[test]
    fn what_holds_at_a_turns_end() {
        use StopReason::*;
        use TodoStatus::*;
        let started = vec![
            item("Read the code", Completed),
            item("Fix the bug", InProgress),
            item("Run the tests", Pending),
        ];
        let waiting = vec![
            item("Read the code", Completed),
            item("Run the tests", Pending),
        ];
        let done = vec![item("Read the code", Completed)];
        let blank = vec![item("  ", Pending)];
        let plan = |step: &str| format!("Continue with the plan: {step}");
        let table: Vec<(StopReason, &[TodoItem], Vec<String>)> = vec![
            (EndTurn, &[], vec![]),
            (EndTurn, &done, vec![]),
            (EndTurn, &blank, vec![]),
            (EndTurn, &started, vec![plan("Fix the bug")]),
            (EndTurn, &waiting, vec![plan("Run the tests")]),
            (MaxTurnRequests, &[], vec![CONTINUE.into()]),
            (MaxTokens, &done, vec![CONTINUE.into()]),
            (
                MaxTurnRequests,
                &started,
                vec![CONTINUE.into(), plan("Fix the bug")],
            ),
            (Cancelled, &started, vec![]),
            (Refusal, &waiting, vec![]),
        ];
        for (stop, todos, expected) in table {
            assert_eq!(after_turn(stop, todos), expected, "{stop:?} {todos:?}");
        }
    }
}
