// STUB: replaced by v2translate's file at merge
//! The session's updates as ACP v2 `session/update`s (a stub: message
//! chunks with a message id and `state_update`; the real translation is
//! engineer v2translate's).

use agent_client_protocol_schema::v2;

use crate::client::{CommandInfo, OptionCategory, SelectOption, SessionState, Update};
use crate::events::{AgentEvent, StopReason};

/// What one session's translation remembers between updates.
#[derive(Debug, Default)]
pub struct SessionUpdates {
    /// The agent message being written, and how many there were.
    agent_message: Option<String>,
    /// The replayed user message being written (replays carry no id yet).
    user_message: Option<String>,
    messages: u64,
}

impl SessionUpdates {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn translate(&mut self, update: &Update) -> Vec<v2::SessionUpdate> {
        match update {
            Update::UserMessage(crate::model::Part::Text { text }) => {
                self.agent_message = None;
                let id = self
                    .user_message
                    .get_or_insert_with(|| uuid::Uuid::new_v4().to_string())
                    .clone();
                vec![v2::SessionUpdate::UserMessageChunk(v2::ContentChunk::new(
                    v2::ContentBlock::from(text.clone()),
                    id,
                ))]
            }
            Update::Agent(AgentEvent::AgentText(text)) => {
                self.user_message = None;
                let id = self.agent_message_id();
                vec![v2::SessionUpdate::AgentMessageChunk(v2::ContentChunk::new(
                    v2::ContentBlock::from(text.clone()),
                    id,
                ))]
            }
            Update::UserPrompt(prompt) => {
                self.agent_message = None;
                prompt
                    .content
                    .iter()
                    .filter_map(|part| match part {
                        crate::model::Part::Text { text } => {
                            Some(v2::SessionUpdate::UserMessageChunk(v2::ContentChunk::new(
                                v2::ContentBlock::from(text.clone()),
                                prompt.message_id.clone(),
                            )))
                        }
                        _ => None,
                    })
                    .collect()
            }
            Update::State(state) => {
                self.agent_message = None;
                vec![v2::SessionUpdate::StateUpdate(state_update(state))]
            }
            _ => Vec::new(),
        }
    }

    fn agent_message_id(&mut self) -> String {
        if let Some(id) = &self.agent_message {
            return id.clone();
        }
        self.messages += 1;
        let id = uuid::Uuid::new_v4().to_string();
        self.agent_message = Some(id.clone());
        id
    }
}

fn state_update(state: &SessionState) -> v2::StateUpdate {
    match state {
        SessionState::Running => v2::StateUpdate::Running(v2::RunningStateUpdate::new()),
        SessionState::RequiresAction => {
            v2::StateUpdate::RequiresAction(v2::RequiresActionStateUpdate::new())
        }
        SessionState::Idle(stop) => {
            v2::StateUpdate::Idle(v2::IdleStateUpdate::new().stop_reason(match stop {
                StopReason::EndTurn => v2::StopReason::EndTurn,
                StopReason::MaxTokens => v2::StopReason::MaxTokens,
                StopReason::MaxTurnRequests => v2::StopReason::MaxTurnRequests,
                StopReason::Refusal => v2::StopReason::Refusal,
                StopReason::Cancelled => v2::StopReason::Cancelled,
            }))
        }
    }
}

pub fn config_options(options: &[SelectOption]) -> Vec<v2::SessionConfigOption> {
    options
        .iter()
        .map(|option| {
            let values: Vec<v2::SessionConfigSelectOption> = (option.values.iter())
                .map(|value| {
                    v2::SessionConfigSelectOption::new(value.id.clone(), value.name.clone())
                })
                .collect();
            v2::SessionConfigOption::select(
                option.id.clone(),
                option.name.clone(),
                option.current.clone(),
                values,
            )
            .category(match option.category {
                OptionCategory::Model => v2::SessionConfigOptionCategory::Model,
                OptionCategory::Mode => v2::SessionConfigOptionCategory::Mode,
                OptionCategory::ThoughtLevel => v2::SessionConfigOptionCategory::ThoughtLevel,
                _ => v2::SessionConfigOptionCategory::Other("_other".into()),
            })
        })
        .collect()
}

pub fn available_commands(commands: &[CommandInfo]) -> Vec<v2::AvailableCommand> {
    commands
        .iter()
        .map(|command| {
            v2::AvailableCommand::Command(v2::Command::new(
                command.name.clone(),
                command.description.clone(),
            ))
        })
        .collect()
}
