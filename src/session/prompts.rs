//! MCP prompts as slash commands: advertised with the built-ins once the
//! servers are up and again whenever a server's prompts change; running one
//! fetches its messages (`prompts/get`) and makes them the user's turn.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::shared::TurnKind;
use super::turn::Started;
use super::{SessionActor, SessionError, SessionMsg};

use crate::agent_loop::{self, Journal, TurnOutcome};
use crate::client::{CommandInfo, Update};
use crate::commands::{self, PromptCommand};
use crate::events::{AgentEvent, StopReason};
use crate::mcp::McpCallError;
use crate::model::Part;

/// Why the commands are advertised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Advertise {
    /// The client has just got the session's answer: the first list goes out.
    Started,
    /// The list may have changed: sent only once the client has had one.
    Changed,
}

/// Tells the actor each time the servers' lists change, until the session
/// or its servers are gone.
pub(super) fn forward_changes(
    mut changes: watch::Receiver<u64>,
    mailbox: mpsc::WeakUnboundedSender<SessionMsg>,
) {
    tokio::spawn(async move {
        loop {
            let Some(tx) = mailbox.upgrade() else { break };
            if tx.send(SessionMsg::CommandsChanged).is_err() {
                break;
            }
            drop(tx);
            if changes.changed().await.is_err() {
                break;
            }
        }
    });
}

impl SessionActor {
    /// The MCP prompts' commands; none until the servers are up.
    pub(super) fn prompt_commands(&self) -> Vec<PromptCommand> {
        match &*self.services.mcp.borrow() {
            Some(manager) => commands::prompt_commands(&manager.prompts()),
            None => Vec::new(),
        }
    }

    /// Every command the session offers now.
    pub(super) fn commands(&self) -> Vec<CommandInfo> {
        let mut all = commands::advertised(&self.prompt_commands());
        all.extend(self.skill_commands(&all));
        all
    }

    /// Sends `available_commands_update` when the set differs from the last
    /// one sent; nothing before the client has the session.
    pub(super) fn advertise_commands(&mut self, when: Advertise) {
        if when == Advertise::Changed && self.conversation.commands_sent.is_none() {
            return;
        }
        let commands = self.commands();
        if self.conversation.commands_sent.as_ref() == Some(&commands) {
            return;
        }
        self.send(Update::AvailableCommands(commands.clone()));
        self.conversation.commands_sent = Some(commands);
    }

    /// The prompt command `content` runs, with the text after its name.
    pub(super) fn find_prompt_command(&self, content: &[Part]) -> Option<(PromptCommand, String)> {
        // Most prompts are not commands: skip listing the servers' prompts for them.
        let slash = matches!(content.first(), Some(Part::Text { text }) if text.trim_start().starts_with('/'));
        if !slash {
            return None;
        }
        let commands = self.prompt_commands();
        let (command, args) = commands::find_prompt(&commands, content)?;
        Some((command.clone(), args))
    }

    /// Runs an MCP prompt: its messages become the user's turn, then the
    /// turn goes on as any prompt. Arguments that do not fit end the turn
    /// with a report, without calling the model.
    pub(super) fn start_prompt_command(
        &mut self,
        command: PromptCommand,
        args: &str,
        cancel: CancellationToken,
    ) -> Result<Started, SessionError> {
        let arguments = match command.arguments(args) {
            Ok(arguments) => arguments,
            Err(err) => return self.start_command(Err(err), cancel),
        };
        let manager = self.services.mcp.borrow().clone().unwrap_or_default();
        let (turn, journaled) = self.turn_context(TurnKind::Prompt)?;
        let mut context = self.conversation.context.clone();
        let turn_cancel = cancel;
        let inbox = std::sync::Arc::clone(&turn.inbox);
        let files = std::sync::Arc::clone(&self.services.files);
        let task = tokio::spawn(async move {
            let emit = turn.emitter();
            let prompt = &command.prompt;
            let fetched = manager
                .get_prompt(&prompt.server, &prompt.name, arguments, &turn_cancel)
                .await;
            let ended = |context, result| TurnOutcome {
                new_messages: Vec::new(),
                result,
                usage: None,
                context,
                context_ops: Vec::new(),
                switched: None,
            };
            let messages = match fetched {
                Ok(messages) if !messages.is_empty() => messages,
                Ok(_) => {
                    emit(AgentEvent::AgentText(format!(
                        "`/{}`: the prompt has no messages; nothing was sent to the model.",
                        command.command
                    )));
                    return ended(context, Ok(StopReason::EndTurn));
                }
                Err(McpCallError::Cancelled) => return ended(context, Ok(StopReason::Cancelled)),
                Err(err) => {
                    emit(AgentEvent::AgentText(format!(
                        "`/{}` failed: {err}",
                        command.command
                    )));
                    return ended(context, Ok(StopReason::EndTurn));
                }
            };
            for message in &messages {
                context.push(Arc::clone(message));
            }
            // The files its tools write are filed under this turn.
            files.set_turn(context.last_turn());
            // Saved before the model answers, so a load has the prompt's text.
            (turn.journal)(Journal::Round(messages.clone()));
            let input = turn.input(context, turn_cancel, &emit).await;
            let mut outcome = agent_loop::run_turn(input, &emit).await;
            // Saved with the answer, so a loaded session has the prompt's text.
            let mut new_messages = messages;
            new_messages.append(&mut outcome.new_messages);
            outcome.new_messages = new_messages;
            outcome
        });
        Ok(Started {
            task: tokio_util::task::AbortOnDropHandle::new(task),
            kind: TurnKind::Prompt,
            journaled,
            inbox,
        })
    }
}
