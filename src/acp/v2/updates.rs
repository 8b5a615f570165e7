//! The agent's session updates as ACP v2 `session/update` variants, beside
//! the v1 translation (`acp::translate`). Pure: no I/O, tested table-style.
//! v2 needs memory that v1 did not, so one session's translation is a
//! [`SessionUpdates`]: message ids derived from the user message a turn
//! answers (the same on a replay, which goes through a fresh one), the tool
//! calls already created (their later updates are patches), and the shell's
//! display terminals. What v2 has no update for comes out as nothing.

use agent_client_protocol_schema::v2;

use crate::client::{
    AgentMessage, CommandInfo, MARKDOWN_PLAN_ID, MessageKind, PlanContent, SessionState,
    SubagentState, TODO_PLAN_ID, Update,
};
use crate::events::{AgentEvent, StopReason, ToolCallInfo};
use crate::model::Part;

mod messages;
mod patch;
mod shell;
mod tools;

crate::acp::translate::same_shape::same_shape!(v2);

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
            Update::SessionInfo { title, updated_at } => session_info(title.as_ref(), updated_at),
            Update::Plan { plan_id, plan } => plan_update(plan_id, plan),
            Update::PlanRemoved { plan_id } => plan_removed(plan_id),
            Update::Subagent(info) => subagent_update(info, subagent_state),
            Update::SessionMessage(message) => session_message(message),
            Update::Cursor(cursor) => cursor_update(cursor),
            Update::PromptSuggestions(prompts) => prompt_suggestions(prompts),
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
            AgentEvent::Notice(event) => notice(event),
            AgentEvent::Compaction(step) => compaction(step, |id, status| {
                v2::CompactionUpdate::new(id.to_string()).status(status)
            }),
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

/// A user message's part as a content block: text and images (what a
/// prompt holds); no other part is the user's to be shown.
fn content_block(part: &Part) -> Option<v2::ContentBlock> {
    match part {
        Part::Image { mime_type, data } => Some(image_block(mime_type, data)),
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

/// A child's state as v2 has it (a failure is an `error` stop reason).
fn subagent_state(state: &SubagentState) -> v2::StateUpdate {
    match state {
        SubagentState::Running => state_update(SessionState::Running),
        SubagentState::WaitingForUser => state_update(SessionState::RequiresAction),
        SubagentState::Idle(reason) => state_update(SessionState::Idle(*reason)),
        SubagentState::Failed(why) => v2::StateUpdate::Idle(
            v2::IdleStateUpdate::new().stop_reason(v2::StopReason::Error(
                v2::ErrorStopReason::new().error(v2::Error::internal_error().data(why.clone())),
            )),
        ),
    }
}

#[cfg(test)]
mod tests;
