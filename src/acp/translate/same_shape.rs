//! The update builders whose ACP v1 and v2 shapes are the same, written
//! once. The schema crate's `v1` and `v2` are twin modules: separate types
//! with the same builders, so what builds one builds the other, spelled
//! with the version's module. `same_shape!(acp)` in `acp::translate` (v1)
//! and `same_shape!(v2)` in `acp::v2::updates` write these functions into
//! each, for the module named (an alias in scope there). What differs
//! between the versions stays with each version.

macro_rules! same_shape {
    ($acp:ident) => {
        /// The session's options as config options (the mode among them).
        pub fn config_options(
            options: &[$crate::client::SelectOption],
        ) -> Vec<$acp::SessionConfigOption> {
            use $crate::client::OptionCategory;
            options
                .iter()
                .map(|option| {
                    let values: Vec<$acp::SessionConfigSelectOption> = option
                        .values
                        .iter()
                        .map(|value| {
                            $acp::SessionConfigSelectOption::new(
                                value.id.clone(),
                                value.name.clone(),
                            )
                            .description(value.description.clone())
                        })
                        .collect();
                    $acp::SessionConfigOption::select(
                        option.id.clone(),
                        option.name.clone(),
                        option.current.clone(),
                        values,
                    )
                    .description(option.description.clone())
                    .category(match option.category {
                        OptionCategory::Model => $acp::SessionConfigOptionCategory::Model,
                        OptionCategory::Mode => $acp::SessionConfigOptionCategory::Mode,
                        OptionCategory::ThoughtLevel => {
                            $acp::SessionConfigOptionCategory::ThoughtLevel
                        }
                        // Not categories ACP defines; `_` names are free for extensions.
                        OptionCategory::Provider => {
                            $acp::SessionConfigOptionCategory::Other("_provider".into())
                        }
                        OptionCategory::Agent => {
                            $acp::SessionConfigOptionCategory::Other("_agent".into())
                        }
                        OptionCategory::Sandbox => {
                            $acp::SessionConfigOptionCategory::Other("_sandbox".into())
                        }
                    })
                })
                .collect()
        }

        fn plan_entries(todos: &[$crate::events::TodoItem]) -> Vec<$acp::PlanEntry> {
            use $crate::events::{TodoPriority, TodoStatus};
            todos
                .iter()
                .map(|todo| {
                    $acp::PlanEntry::new(
                        todo.content.clone(),
                        match todo.priority {
                            TodoPriority::High => $acp::PlanEntryPriority::High,
                            TodoPriority::Medium => $acp::PlanEntryPriority::Medium,
                            TodoPriority::Low => $acp::PlanEntryPriority::Low,
                        },
                        match todo.status {
                            TodoStatus::Pending => $acp::PlanEntryStatus::Pending,
                            TodoStatus::InProgress => $acp::PlanEntryStatus::InProgress,
                            TodoStatus::Completed => $acp::PlanEntryStatus::Completed,
                        },
                    )
                })
                .collect()
        }

        /// A delegated agent, announced or followed (unstable
        /// `subagent_update`): only what changed; its state as `state`
        /// says it in this version.
        fn subagent_update(
            info: &$crate::client::SubagentInfo,
            state: impl Fn(&$crate::client::SubagentState) -> $acp::StateUpdate,
        ) -> $acp::SessionUpdate {
            let mut update =
                $acp::SubagentUpdate::new($acp::SessionId::new(info.session_id.clone()));
            if let Some(title) = &info.title {
                update = update.title(title.clone());
            }
            if let Some(description) = &info.description {
                update = update.description(description.clone());
            }
            if let Some(cwd) = &info.cwd {
                update = update.cwd(cwd.clone());
            }
            if let Some(info_state) = &info.state {
                update = update.state(state(info_state));
            }
            $acp::SessionUpdate::SubagentUpdate(update)
        }

        /// A message between two sessions: a delegated task, its answer.
        fn session_message(message: &$crate::client::SessionMessage) -> $acp::SessionUpdate {
            $acp::SessionUpdate::SessionMessage(
                $acp::SessionMessage::new(message.message_id.clone())
                    .sender_session_id($acp::SessionId::new(message.sender.clone()))
                    .recipient_session_id($acp::SessionId::new(message.recipient.clone()))
                    .content(vec![text_block(&message.text)]),
            )
        }

        /// A point of the session the client may act at (unstable
        /// `cursor_update`), anchored on what it was shown.
        fn cursor_update(cursor: &$crate::client::Cursor) -> $acp::SessionUpdate {
            use $crate::client::Shown;
            let position = if cursor.after {
                $acp::CursorAnchorPosition::After
            } else {
                $acp::CursorAnchorPosition::Before
            };
            let message =
                |id: &str| $acp::CursorMessageAnchor::new(id.to_string(), position.clone());
            let anchor = match &cursor.at {
                Shown::AgentMessage(id) => $acp::CursorAnchor::AgentMessage(message(id)),
                Shown::AgentThought(id) => $acp::CursorAnchor::AgentThought(message(id)),
                Shown::ToolCall(id) => $acp::CursorAnchor::ToolCall(
                    $acp::CursorToolCallAnchor::new(id.clone(), position.clone()),
                ),
                Shown::Compaction(id) => $acp::CursorAnchor::Compaction(
                    $acp::CursorCompactionAnchor::new(id.clone(), position.clone()),
                ),
            };
            let mut capabilities = $acp::CursorCapabilities::new();
            if cursor.fork {
                capabilities = capabilities.fork($acp::CursorForkCapabilities::new());
            }
            $acp::SessionUpdate::CursorUpdate(
                $acp::CursorUpdate::new(cursor.id.clone())
                    .anchor(anchor)
                    .capabilities(capabilities),
            )
        }

        fn notice(notice: &$crate::events::Notice) -> $acp::SessionUpdate {
            use $crate::events::Severity;
            $acp::SessionUpdate::Notice(
                $acp::Notice::new(
                    match notice.severity {
                        Severity::Info => $acp::NoticeSeverity::Info,
                        Severity::Warning => $acp::NoticeSeverity::Warning,
                        Severity::Error => $acp::NoticeSeverity::Error,
                    },
                    notice.title.clone(),
                )
                .description(notice.detail.clone()),
            )
        }

        fn session_info(title: Option<&String>, updated_at: &str) -> $acp::SessionUpdate {
            let mut info = $acp::SessionInfoUpdate::new().updated_at(updated_at.to_string());
            if let Some(title) = title {
                info = info.title(title.clone());
            }
            $acp::SessionUpdate::SessionInfoUpdate(info)
        }

        /// Each suggestion as a prompt of one text block, as `session/prompt`
        /// takes it; an empty list withdraws them.
        fn prompt_suggestions(prompts: &[String]) -> $acp::SessionUpdate {
            $acp::SessionUpdate::PromptSuggestionsUpdate($acp::PromptSuggestionsUpdate::new(
                prompts
                    .iter()
                    .map(|prompt| $acp::PromptSuggestion::new(vec![text_block(prompt)]))
                    .collect(),
            ))
        }

        fn tool_kind(kind: $crate::events::ToolKind) -> $acp::ToolKind {
            use $crate::events::ToolKind;
            match kind {
                ToolKind::Read => $acp::ToolKind::Read,
                ToolKind::Edit => $acp::ToolKind::Edit,
                ToolKind::Delete => $acp::ToolKind::Delete,
                ToolKind::Move => $acp::ToolKind::Move,
                ToolKind::Search => $acp::ToolKind::Search,
                ToolKind::Execute => $acp::ToolKind::Execute,
                ToolKind::Fetch => $acp::ToolKind::Fetch,
                ToolKind::Think => $acp::ToolKind::Think,
                ToolKind::Other => $acp::ToolKind::Other,
            }
        }

        /// A compaction's steps; `update` makes a status update as this
        /// version does (v2's status is a field of its own).
        fn compaction(
            step: &$crate::events::Compaction,
            update: impl Fn(&str, $acp::CompactionStatus) -> $acp::CompactionUpdate,
        ) -> $acp::SessionUpdate {
            use $crate::events::{Compaction, CompactionOutcome};
            match step {
                Compaction::Started { id, .. } => $acp::SessionUpdate::CompactionUpdate(update(
                    id,
                    $acp::CompactionStatus::InProgress,
                )),
                Compaction::SummaryChunk { id, text } => {
                    $acp::SessionUpdate::CompactionSummaryChunk($acp::CompactionSummaryChunk::new(
                        id.to_string(),
                        text_block(text),
                    ))
                }
                Compaction::Ended { id, outcome, .. } => {
                    $acp::SessionUpdate::CompactionUpdate(match outcome {
                        CompactionOutcome::Completed => {
                            update(id, $acp::CompactionStatus::Completed)
                        }
                        CompactionOutcome::Cancelled => {
                            update(id, $acp::CompactionStatus::Cancelled)
                        }
                        CompactionOutcome::Failed(error) => {
                            update(id, $acp::CompactionStatus::Failed).error(error.clone())
                        }
                    })
                }
            }
        }

        fn location(location: &$crate::events::Location) -> $acp::ToolCallLocation {
            $acp::ToolCallLocation::new(location.path.clone()).line(location.line)
        }

        fn image_block(mime_type: &str, data: &str) -> $acp::ContentBlock {
            $acp::ContentBlock::Image($acp::ImageContent::new(data, mime_type))
        }

        fn text_block(text: &str) -> $acp::ContentBlock {
            $acp::ContentBlock::Text($acp::TextContent::new(text))
        }
    };
}

pub(crate) use same_shape;

/// The slash commands both versions' tests show: one plain, one with a hint
/// (their wire differs).
#[cfg(test)]
pub(in crate::acp) fn two_commands() -> Vec<crate::client::CommandInfo> {
    let command = |name: &str, description: &str, hint: Option<&str>| crate::client::CommandInfo {
        name: name.into(),
        description: description.into(),
        hint: hint.map(Into::into),
    };
    vec![
        command("help", "List", None),
        command("compact", "Sum", Some("focus")),
    ]
}
