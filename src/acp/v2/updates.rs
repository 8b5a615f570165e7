//! The agent's session updates as ACP v2 `session/update` variants, beside
//! the v1 translation (`acp::translate`). Pure: no I/O, tested table-style.
//! v2 needs memory that v1 did not, so one session's translation is a
//! [`SessionUpdates`]: message ids derived from the user message a turn
//! answers (the same on a replay, which goes through a fresh one), the tool
//! calls already created (their later updates are patches), and the shell's
//! display terminals. What v2 has no update for comes out as nothing.

use agent_client_protocol_schema::v2;

use crate::client::{
    AgentMessage, CommandInfo, Cursor, MARKDOWN_PLAN_ID, MessageKind, OptionCategory, PlanContent,
    SelectOption, SessionMessage, SessionState, Shown, SubagentInfo, SubagentState, TODO_PLAN_ID,
    Update,
};
use crate::events::{
    AgentEvent, Compaction, CompactionOutcome, Severity, StopReason, TodoItem, TodoPriority,
    TodoStatus, ToolCallInfo,
};
use crate::model::Part;

mod messages;
mod patch;
mod shell;
mod tools;

use messages::{MessageIds, Stream};

/// One session's translation into v2: feed it every update the session's
/// client is sent, in order.
#[derive(Debug)]
pub struct SessionUpdates {
    messages: MessageIds,
    tools: tools::ToolCalls,
    /// The last whole message sent (a replay's): its id and content. A
    /// message the replay gives in two parts (something the store keeps,
    /// but that starts no new message, came between) goes out whole again.
    whole: Option<(String, String)>,
}

impl Default for SessionUpdates {
    fn default() -> Self {
        Self::new()
    }
}

impl SessionUpdates {
    pub fn new() -> Self {
        Self {
            messages: MessageIds::new(),
            tools: tools::ToolCalls::default(),
            whole: None,
        }
    }

    /// What `update` is in v2: none, one, or several updates in order.
    pub fn translate(&mut self, update: &Update) -> Vec<v2::SessionUpdate> {
        let single = match update {
            Update::Agent(event) => return self.agent_event(event),
            Update::Tagged { message_id, event } => return self.tagged(message_id, event),
            Update::AgentMessage(message) => self.whole_message(message),
            Update::UserPrompt(prompt) => {
                self.messages.user_message(&prompt.message_id);
                v2::SessionUpdate::UserMessage(
                    v2::UserMessage::new(prompt.message_id.clone()).content(
                        prompt
                            .content
                            .iter()
                            .filter_map(content_block)
                            .collect::<Vec<_>>(),
                    ),
                )
            }
            Update::State(state) => v2::SessionUpdate::StateUpdate(state_update(*state)),
            Update::ReplayComplete => v2::SessionUpdate::ReplayComplete(v2::ReplayComplete::new()),
            Update::ConfigOptions(options) => v2::SessionUpdate::ConfigOptionUpdate(
                v2::ConfigOptionUpdate::new(config_options(options)),
            ),
            // v2 has no modes: the mode is a config option, and the session
            // sends the options again with it.
            Update::CurrentMode(_) => return Vec::new(),
            Update::AvailableCommands(commands) => v2::SessionUpdate::AvailableCommandsUpdate(
                v2::AvailableCommandsUpdate::new(available_commands(commands)),
            ),
            Update::SessionInfo { title, updated_at } => {
                let mut info = v2::SessionInfoUpdate::new().updated_at(updated_at.clone());
                if let Some(title) = title {
                    info = info.title(title.clone());
                }
                v2::SessionUpdate::SessionInfoUpdate(info)
            }
            Update::Plan { plan_id, plan } => plan_update(plan_id, plan),
            Update::PlanRemoved { plan_id } => plan_removed(plan_id),
            Update::Subagent(info) => subagent_update(info),
            Update::SessionMessage(message) => session_message(message),
            Update::Cursor(cursor) => cursor_update(cursor),
            Update::PromptSuggestions(prompts) => {
                v2::SessionUpdate::PromptSuggestionsUpdate(v2::PromptSuggestionsUpdate::new(
                    prompts
                        .iter()
                        .map(|prompt| v2::PromptSuggestion::new(vec![text_block(prompt)]))
                        .collect(),
                ))
            }
        };
        vec![single]
    }

    fn agent_event(&mut self, event: &AgentEvent) -> Vec<v2::SessionUpdate> {
        let single = match event {
            AgentEvent::AgentText(text) => v2::SessionUpdate::AgentMessageChunk(
                v2::ContentChunk::new(text_block(text), self.messages.chunk(Stream::Message)),
            ),
            AgentEvent::Thought(text) => v2::SessionUpdate::AgentThoughtChunk(
                v2::ContentChunk::new(text_block(text), self.messages.chunk(Stream::Thought)),
            ),
            AgentEvent::ToolCall(call) => {
                self.messages.boundary();
                return self.tools.call(call);
            }
            AgentEvent::ToolCallUpdate(progress) => {
                self.messages.boundary();
                return self.tools.progress(progress);
            }
            AgentEvent::Usage { used, size, cost } => {
                let mut usage = v2::UsageUpdate::new(*used, *size);
                if let Some(cost) = cost {
                    usage = usage.cost(v2::Cost::new(cost.amount, cost.currency.clone()));
                }
                v2::SessionUpdate::UsageUpdate(usage)
            }
            // The todo list is a plan by id; an empty one is no plan.
            AgentEvent::Plan(items) if items.is_empty() => plan_removed(TODO_PLAN_ID),
            AgentEvent::Plan(items) => {
                plan_update(TODO_PLAN_ID, &PlanContent::Items(items.clone()))
            }
            AgentEvent::PlanDocument(Some(document)) => plan_update(
                MARKDOWN_PLAN_ID,
                &PlanContent::Markdown {
                    content: document.markdown.clone(),
                    path: document.path.clone(),
                },
            ),
            AgentEvent::PlanDocument(None) => plan_removed(MARKDOWN_PLAN_ID),
            AgentEvent::Notice(notice) => v2::SessionUpdate::Notice(
                v2::Notice::new(
                    match notice.severity {
                        Severity::Info => v2::NoticeSeverity::Info,
                        Severity::Warning => v2::NoticeSeverity::Warning,
                        Severity::Error => v2::NoticeSeverity::Error,
                    },
                    notice.title.clone(),
                )
                .description(notice.detail.clone()),
            ),
            AgentEvent::Compaction(step) => compaction(step),
        };
        vec![single]
    }

    /// A replay's message whole, under the id its chunks had live: "use
    /// chunks for streaming, whole-message updates for replay" (v2's
    /// migration guide), so a replay never appends to a message it has not
    /// sent whole first.
    fn whole_message(&mut self, message: &AgentMessage) -> v2::SessionUpdate {
        let stream = match message.kind {
            MessageKind::Answer => Stream::Message,
            MessageKind::Thought => Stream::Thought,
        };
        let id = match &message.message_id {
            Some(id) => id.clone(),
            None => self.messages.chunk(stream),
        };
        let text = match self.whole.take() {
            Some((last, mut text)) if last == id => {
                text.push_str(&message.text);
                text
            }
            _ => message.text.clone(),
        };
        let content = vec![text_block(&text)];
        self.whole = Some((id.clone(), text));
        match stream {
            Stream::Message => {
                v2::SessionUpdate::AgentMessage(v2::AgentMessage::new(id).content(content))
            }
            Stream::Thought => {
                v2::SessionUpdate::AgentThought(v2::AgentThought::new(id).content(content))
            }
        }
    }

    /// A chunk under the id the session gave it (for clients that take
    /// cursors, which are anchored on it); anything else as it is.
    fn tagged(&mut self, message_id: &str, event: &AgentEvent) -> Vec<v2::SessionUpdate> {
        let chunk = |text: &str| v2::ContentChunk::new(text_block(text), message_id.to_string());
        match event {
            AgentEvent::AgentText(text) => vec![v2::SessionUpdate::AgentMessageChunk(chunk(text))],
            AgentEvent::Thought(text) => vec![v2::SessionUpdate::AgentThoughtChunk(chunk(text))],
            other => self.agent_event(other),
        }
    }
}

/// A tool call as v2 creates it (title, kind, `pending`, raw input,
/// locations): the first `tool_call_update`, and a permission request's
/// `tool_call` subject.
pub fn tool_call(call: &ToolCallInfo) -> v2::ToolCallUpdate {
    tools::created(call)
}

/// The session's options as v2 config options (the mode among them).
pub fn config_options(options: &[SelectOption]) -> Vec<v2::SessionConfigOption> {
    options
        .iter()
        .map(|option| {
            let values: Vec<v2::SessionConfigSelectOption> = option
                .values
                .iter()
                .map(|value| {
                    v2::SessionConfigSelectOption::new(value.id.clone(), value.name.clone())
                        .description(value.description.clone())
                })
                .collect();
            v2::SessionConfigOption::select(
                option.id.clone(),
                option.name.clone(),
                option.current.clone(),
                values,
            )
            .description(option.description.clone())
            .category(match option.category {
                OptionCategory::Model => v2::SessionConfigOptionCategory::Model,
                OptionCategory::Mode => v2::SessionConfigOptionCategory::Mode,
                OptionCategory::ThoughtLevel => v2::SessionConfigOptionCategory::ThoughtLevel,
                // Not categories ACP defines; `_` names are free for extensions.
                OptionCategory::Provider => {
                    v2::SessionConfigOptionCategory::Other("_provider".into())
                }
                OptionCategory::Agent => v2::SessionConfigOptionCategory::Other("_agent".into()),
                OptionCategory::Sandbox => {
                    v2::SessionConfigOptionCategory::Other("_sandbox".into())
                }
            })
        })
        .collect()
}

/// The slash commands as v2 commands; a hint is a typed `text` input.
pub fn available_commands(commands: &[CommandInfo]) -> Vec<v2::AvailableCommand> {
    commands
        .iter()
        .map(|command| {
            let input = command.hint.as_ref().map(|hint| {
                v2::AvailableCommandInput::Text(v2::TextCommandInput::new(hint.clone()))
            });
            v2::AvailableCommand::Command(
                v2::Command::new(command.name.clone(), command.description.clone()).input(input),
            )
        })
        .collect()
}

/// A stop reason as v2 has it (the idle state's, or a child's).
pub fn stop_reason(reason: StopReason) -> v2::StopReason {
    match reason {
        StopReason::EndTurn => v2::StopReason::EndTurn,
        StopReason::MaxTokens => v2::StopReason::MaxTokens,
        StopReason::MaxTurnRequests => v2::StopReason::MaxTurnRequests,
        StopReason::Refusal => v2::StopReason::Refusal,
        StopReason::Cancelled => v2::StopReason::Cancelled,
    }
}

fn state_update(state: SessionState) -> v2::StateUpdate {
    match state {
        SessionState::Running => v2::StateUpdate::Running(v2::RunningStateUpdate::new()),
        SessionState::RequiresAction => {
            v2::StateUpdate::RequiresAction(v2::RequiresActionStateUpdate::new())
        }
        SessionState::Idle(reason) => {
            v2::StateUpdate::Idle(v2::IdleStateUpdate::new().stop_reason(stop_reason(reason)))
        }
        SessionState::Ready => v2::StateUpdate::Idle(v2::IdleStateUpdate::new()),
    }
}

fn text_block(text: &str) -> v2::ContentBlock {
    v2::ContentBlock::Text(v2::TextContent::new(text))
}

/// A user message's part as a content block: text and images (what a
/// prompt holds); no other part is the user's to be shown.
fn content_block(part: &Part) -> Option<v2::ContentBlock> {
    match part {
        Part::Image { mime_type, data } => Some(v2::ContentBlock::Image(v2::ImageContent::new(
            data.clone(),
            mime_type.clone(),
        ))),
        Part::Text { text } => Some(text_block(text)),
        _ => None,
    }
}

fn plan_update(plan_id: &str, plan: &PlanContent) -> v2::SessionUpdate {
    v2::SessionUpdate::PlanUpdate(v2::PlanUpdate::new(match plan {
        PlanContent::Items(items) => v2::PlanUpdateContent::items(plan_id, plan_entries(items)),
        PlanContent::Markdown { content, path } => v2::PlanUpdateContent::Markdown(
            v2::PlanMarkdown::new(plan_id, content.clone())
                .path(path.clone().map(v2::AbsolutePath::new)),
        ),
    }))
}

fn plan_removed(plan_id: &str) -> v2::SessionUpdate {
    v2::SessionUpdate::PlanRemoved(v2::PlanRemoved::new(plan_id))
}

fn plan_entries(todos: &[TodoItem]) -> Vec<v2::PlanEntry> {
    todos
        .iter()
        .map(|todo| {
            v2::PlanEntry::new(
                todo.content.clone(),
                match todo.priority {
                    TodoPriority::High => v2::PlanEntryPriority::High,
                    TodoPriority::Medium => v2::PlanEntryPriority::Medium,
                    TodoPriority::Low => v2::PlanEntryPriority::Low,
                },
                match todo.status {
                    TodoStatus::Pending => v2::PlanEntryStatus::Pending,
                    TodoStatus::InProgress => v2::PlanEntryStatus::InProgress,
                    TodoStatus::Completed => v2::PlanEntryStatus::Completed,
                },
            )
        })
        .collect()
}

fn compaction(step: &Compaction) -> v2::SessionUpdate {
    let update = |id: &str, status| v2::CompactionUpdate::new(id.to_string()).status(status);
    match step {
        Compaction::Started { id, .. } => {
            v2::SessionUpdate::CompactionUpdate(update(id, v2::CompactionStatus::InProgress))
        }
        Compaction::SummaryChunk { id, text } => v2::SessionUpdate::CompactionSummaryChunk(
            v2::CompactionSummaryChunk::new(id.to_string(), text_block(text)),
        ),
        Compaction::Ended { id, outcome, .. } => {
            v2::SessionUpdate::CompactionUpdate(match outcome {
                CompactionOutcome::Completed => update(id, v2::CompactionStatus::Completed),
                CompactionOutcome::Cancelled => update(id, v2::CompactionStatus::Cancelled),
                CompactionOutcome::Failed(error) => {
                    update(id, v2::CompactionStatus::Failed).error(error.clone())
                }
            })
        }
    }
}

fn subagent_update(info: &SubagentInfo) -> v2::SessionUpdate {
    let mut update = v2::SubagentUpdate::new(info.session_id.clone());
    if let Some(title) = &info.title {
        update = update.title(title.clone());
    }
    if let Some(description) = &info.description {
        update = update.description(description.clone());
    }
    if let Some(cwd) = &info.cwd {
        update = update.cwd(cwd.clone());
    }
    if let Some(state) = &info.state {
        update = update.state(match state {
            SubagentState::Running => state_update(SessionState::Running),
            SubagentState::WaitingForUser => state_update(SessionState::RequiresAction),
            SubagentState::Idle(reason) => state_update(SessionState::Idle(*reason)),
            SubagentState::Failed(why) => v2::StateUpdate::Idle(
                v2::IdleStateUpdate::new().stop_reason(v2::StopReason::Error(
                    v2::ErrorStopReason::new().error(v2::Error::internal_error().data(why.clone())),
                )),
            ),
        });
    }
    v2::SessionUpdate::SubagentUpdate(update)
}

fn session_message(message: &SessionMessage) -> v2::SessionUpdate {
    v2::SessionUpdate::SessionMessage(
        v2::SessionMessage::new(message.message_id.clone())
            .sender_session_id(v2::SessionId::new(message.sender.clone()))
            .recipient_session_id(v2::SessionId::new(message.recipient.clone()))
            .content(vec![text_block(&message.text)]),
    )
}

fn cursor_update(cursor: &Cursor) -> v2::SessionUpdate {
    let position = if cursor.after {
        v2::CursorAnchorPosition::After
    } else {
        v2::CursorAnchorPosition::Before
    };
    let message = |id: &str| v2::CursorMessageAnchor::new(id.to_string(), position.clone());
    let anchor = match &cursor.at {
        Shown::AgentMessage(id) => v2::CursorAnchor::AgentMessage(message(id)),
        Shown::AgentThought(id) => v2::CursorAnchor::AgentThought(message(id)),
        Shown::ToolCall(id) => {
            v2::CursorAnchor::ToolCall(v2::CursorToolCallAnchor::new(id.clone(), position.clone()))
        }
        Shown::Compaction(id) => v2::CursorAnchor::Compaction(v2::CursorCompactionAnchor::new(
            id.clone(),
            position.clone(),
        )),
    };
    let mut capabilities = v2::CursorCapabilities::new();
    if cursor.fork {
        capabilities = capabilities.fork(v2::CursorForkCapabilities::new());
    }
    v2::SessionUpdate::CursorUpdate(
        v2::CursorUpdate::new(cursor.id.clone())
            .anchor(anchor)
            .capabilities(capabilities),
    )
}

#[cfg(test)]
mod tests;
