//! Live events (notices, compaction steps) as this client can take them:
//! as they are when it said it shows them, else as the thoughts clients
//! were always shown (or, for a compaction's end, as a notice). The todo
//! list goes to clients that take plans by id as a plan of its own (and
//! the Markdown plan, to them only), and a delegated agent's call names its
//! session to clients that show them.
//! Prompt suggestions go only to clients that take them.

use crate::client::{ClientAbilities, MARKDOWN_PLAN_ID, PlanContent, TODO_PLAN_ID, Update};
use crate::events::{
    AgentEvent, Compaction, CompactionOutcome, Notice, Severity, ToolCallProgress, ToolContent,
};
use crate::model::SessionId;

/// `update` for a client with `abilities`; None when it has no equivalent.
pub(super) fn for_client(update: Update, abilities: ClientAbilities) -> Option<Update> {
    let update = plan_for_client(update, abilities);
    let event = match update {
        // A client on an older schema has no way to show it: the call's
        // own content (the Markdown) is what it reads.
        Update::Agent(AgentEvent::PlanDocument(_)) => return None,
        Update::Agent(AgentEvent::ToolCallUpdate(progress)) if abilities.subagents => {
            AgentEvent::ToolCallUpdate(with_child_session(progress))
        }
        Update::Agent(AgentEvent::Notice(notice)) if !abilities.notices => {
            AgentEvent::Thought(notice.thought)
        }
        Update::Agent(AgentEvent::Compaction(step)) if !abilities.compaction => match step {
            Compaction::Started { thought, .. } => AgentEvent::Thought(thought?),
            Compaction::SummaryChunk { .. } => return None,
            Compaction::Ended {
                outcome, thought, ..
            } => {
                let thought = thought?;
                if !abilities.notices {
                    AgentEvent::Thought(thought)
                } else {
                    let (severity, title) = match outcome {
                        CompactionOutcome::Completed => (Severity::Info, "Context compacted"),
                        CompactionOutcome::Failed(_) => (Severity::Warning, "Compaction failed"),
                        CompactionOutcome::Cancelled => (Severity::Info, "Compaction cancelled"),
                    };
                    AgentEvent::Notice(Notice {
                        severity,
                        title: title.into(),
                        detail: Some(thought.trim().to_string()),
                        thought,
                    })
                }
            }
        },
        // ACP: only to a client that declared `session.promptSuggestions`.
        Update::PromptSuggestions(_) if !abilities.prompt_suggestions => return None,
        other => return Some(other),
    };
    Some(Update::Agent(event))
}

/// The todo list as a plan by id (`plan_update`, or `plan_removed` once
/// empty) for a client that takes them; anything else as it is. Applied to
/// a load's replay too.
pub(super) fn plan_for_client(update: Update, abilities: ClientAbilities) -> Update {
    match update {
        Update::Agent(AgentEvent::Plan(items)) if abilities.plans => {
            let plan_id = TODO_PLAN_ID.to_string();
            if items.is_empty() {
                Update::PlanRemoved { plan_id }
            } else {
                Update::Plan {
                    plan_id,
                    plan: PlanContent::Items(items),
                }
            }
        }
        Update::Agent(AgentEvent::PlanDocument(document)) if abilities.plans => {
            let plan_id = MARKDOWN_PLAN_ID.to_string();
            match document {
                Some(document) => Update::Plan {
                    plan_id,
                    plan: PlanContent::Markdown {
                        content: document.markdown,
                        path: document.path,
                    },
                },
                None => Update::PlanRemoved { plan_id },
            }
        }
        other => other,
    }
}

/// A finished `delegate` call leads with the child's session (its raw
/// output names it), so the client links the call to the child's transcript.
fn with_child_session(mut progress: ToolCallProgress) -> ToolCallProgress {
    let child = (progress.name == crate::tools::delegate::NAME)
        .then(|| progress.raw_output.as_ref()?.get("sessionId")?.as_str())
        .flatten()
        .map(SessionId::from);
    let shown = (progress.content.iter()).any(|c| matches!(c, ToolContent::Session { .. }));
    if let Some(session_id) = child
        && !shown
    {
        progress
            .content
            .insert(0, ToolContent::Session { session_id });
    }
    progress
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice() -> Update {
        Update::Agent(AgentEvent::Notice(Notice {
            severity: Severity::Warning,
            title: "Retrying".into(),
            detail: None,
            thought: "retrying in 1 s\n".into(),
        }))
    }

    #[test]
    fn clients_without_notices_get_the_thought() {
        let plain = ClientAbilities::default();
        assert_eq!(
            for_client(notice(), plain),
            Some(Update::Agent(AgentEvent::Thought(
                "retrying in 1 s\n".into()
            )))
        );
        let opted = ClientAbilities {
            notices: true,
            ..plain
        };
        assert_eq!(for_client(notice(), opted), Some(notice()));
    }

    #[test]
    fn compaction_steps_fall_back_to_thoughts_or_a_notice() {
        let ended = || {
            Update::Agent(AgentEvent::Compaction(Compaction::Ended {
                id: "c1".into(),
                outcome: CompactionOutcome::Completed,
                thought: Some("Compacted 4 entries.\n".into()),
            }))
        };
        let chunk = Update::Agent(AgentEvent::Compaction(Compaction::SummaryChunk {
            id: "c1".into(),
            text: "so far".into(),
        }));
        let plain = ClientAbilities::default();
        assert_eq!(for_client(chunk.clone(), plain), None);
        assert_eq!(
            for_client(ended(), plain),
            Some(Update::Agent(AgentEvent::Thought(
                "Compacted 4 entries.\n".into()
            )))
        );
        let notices = ClientAbilities {
            notices: true,
            ..plain
        };
        assert!(matches!(
            for_client(ended(), notices),
            Some(Update::Agent(AgentEvent::Notice(Notice {
                severity: Severity::Info,
                ..
            })))
        ));
        let compaction = ClientAbilities {
            compaction: true,
            ..plain
        };
        assert_eq!(for_client(chunk.clone(), compaction), Some(chunk));
    }

    #[test]
    fn the_todo_list_is_a_plan_by_id_only_for_clients_that_take_them() {
        use crate::events::{TodoItem, TodoPriority, TodoStatus};
        let items = vec![TodoItem {
            content: "Fix".into(),
            status: TodoStatus::Pending,
            priority: TodoPriority::Medium,
        }];
        let todo = |items: Vec<TodoItem>| Update::Agent(AgentEvent::Plan(items));
        let plain = ClientAbilities::default();
        let plans = ClientAbilities {
            plans: true,
            ..plain
        };
        assert_eq!(
            for_client(todo(items.clone()), plain),
            Some(todo(items.clone()))
        );
        assert_eq!(
            for_client(todo(items.clone()), plans),
            Some(Update::Plan {
                plan_id: TODO_PLAN_ID.into(),
                plan: PlanContent::Items(items),
            })
        );
        assert_eq!(
            for_client(todo(Vec::new()), plans),
            Some(Update::PlanRemoved {
                plan_id: TODO_PLAN_ID.into()
            })
        );
    }

    #[test]
    fn prompt_suggestions_go_only_to_clients_that_take_them() {
        let suggested = || Update::PromptSuggestions(vec!["Continue".into()]);
        let plain = ClientAbilities::default();
        assert_eq!(for_client(suggested(), plain), None);
        assert_eq!(
            for_client(Update::PromptSuggestions(Vec::new()), plain),
            None
        );
        let takes = ClientAbilities {
            prompt_suggestions: true,
            ..plain
        };
        assert_eq!(for_client(suggested(), takes), Some(suggested()));
    }

    #[test]
    fn the_markdown_plan_is_a_plan_of_its_own_for_clients_that_take_plans_and_nothing_for_others() {
        use crate::events::PlanDocument;
        let written = Update::Agent(AgentEvent::PlanDocument(Some(PlanDocument {
            markdown: "# Plan\n".into(),
            path: Some("/data/sessions/s/plan.md".into()),
        })));
        let removed = Update::Agent(AgentEvent::PlanDocument(None));
        let plain = ClientAbilities::default();
        let plans = ClientAbilities {
            plans: true,
            ..plain
        };
        assert_eq!(for_client(written.clone(), plain), None);
        assert_eq!(for_client(removed.clone(), plain), None);
        assert_eq!(
            for_client(written, plans),
            Some(Update::Plan {
                plan_id: MARKDOWN_PLAN_ID.into(),
                plan: PlanContent::Markdown {
                    content: "# Plan\n".into(),
                    path: Some("/data/sessions/s/plan.md".into()),
                },
            })
        );
        assert_eq!(
            for_client(removed, plans),
            Some(Update::PlanRemoved {
                plan_id: MARKDOWN_PLAN_ID.into()
            })
        );
        assert_ne!(MARKDOWN_PLAN_ID, TODO_PLAN_ID);
    }

    #[test]
    fn a_finished_delegate_call_leads_with_its_childs_session_for_clients_that_show_it() {
        let done = |name: &str| {
            Update::Agent(AgentEvent::ToolCallUpdate(ToolCallProgress {
                id: "call-1".into(),
                name: name.into(),
                status: crate::events::ToolStatus::Completed,
                content: vec![ToolContent::Text("summary".into())],
                locations: Vec::new(),
                raw_output: Some(serde_json::json!({"sessionId": "child-1"})),
            }))
        };
        let content = |update: Option<Update>| match update {
            Some(Update::Agent(AgentEvent::ToolCallUpdate(progress))) => progress.content,
            other => panic!("{other:?}"),
        };
        let shows = ClientAbilities {
            subagents: true,
            ..ClientAbilities::default()
        };
        assert_eq!(
            content(for_client(done("delegate"), shows)),
            vec![
                ToolContent::Session {
                    session_id: "child-1".into()
                },
                ToolContent::Text("summary".into())
            ]
        );
        // Other tools, and clients that do not show children, are left alone.
        assert_eq!(content(for_client(done("shell"), shows)).len(), 1);
        let plain = ClientAbilities::default();
        assert_eq!(content(for_client(done("delegate"), plain)).len(), 1);
    }
}
