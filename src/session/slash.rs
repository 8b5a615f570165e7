//! Slash commands run against the session: settings change at once in the
//! actor; the context work (and the model call of `/compact`) runs in a
//! task like a turn, so it can be cancelled and the session stays
//! responsive. Every command answers with a short report as agent text and
//! ends the turn.

use std::fmt::Write as _;

use tokio_util::sync::CancellationToken;

use super::settings::{Notify, SettingChange};
use super::shared::TurnKind;
use super::turn::Started;
use super::{SessionActor, SessionError};

use crate::agent_loop::{TurnOutcome, compaction_id};
use crate::client::{AGENT_OPTION, MODE_OPTION, MODEL_OPTION, Update};
use crate::commands::{self, Command, CommandError, ContextCommand};
use crate::context::compact::{self, CompactError};
use crate::context::{ContextOp, budget};
use crate::events::{AgentEvent, Compaction, CompactionOutcome, StopReason};

/// What the command's task does after the actor's part.
#[derive(Default)]
struct Job {
    text: String,
    op: Option<ContextOp>,
    /// A rewind's or a rollback's: applied in order, reported or not.
    rewind: super::rewind::RewindJob,
    show: bool,
    /// `/compact` and `/context summarize`, with the user's focus.
    summarize: Option<Option<String>>,
    /// `/agent` or `/model` without a name, asked in a form.
    pick: Option<super::pick::Pick>,
    /// `/context`'s spend against the budgets.
    budgets: String,
}

impl SessionActor {
    /// `/mode` and `/model` share the option machinery with the client's selectors.
    fn option_command(&mut self, id: &str, value: Option<String>) -> String {
        let Some(value) = value else {
            let options = self.options();
            let Some(option) = options.iter().find(|o| o.id == id) else {
                return format!("no `{id}` option");
            };
            let mut out = format!("{}: `{}`. Choices:", option.name, option.current);
            for value in &option.values {
                let _ = write!(out, " `{}`", value.id);
            }
            return out;
        };
        match self.set_option(id, &value) {
            Ok(options) => {
                if id == MODEL_OPTION {
                    // set_option answers the client's own request; a
                    // command must tell it.
                    self.send(Update::ConfigOptions(options));
                }
                format!("{id} is now `{value}`.")
            }
            Err(err) => err.to_string(),
        }
    }

    pub(super) fn start_command(
        &mut self,
        command: Result<Command, CommandError>,
        cancel: CancellationToken,
    ) -> Result<Started, SessionError> {
        let mut job = Job::default();
        match command {
            Err(err) => job.text = err.to_string(),
            Ok(Command::Help) => job.text = commands::help(&self.prompt_commands()),
            Ok(Command::Agent(None)) => match self.picker(AGENT_OPTION) {
                Some(pick) => job.pick = Some(pick),
                None => job.text = self.agent_list(),
            },
            Ok(Command::Agent(Some(name))) => {
                job.text = self
                    .apply(SettingChange::Agent(name), Notify::Client)
                    .unwrap_or_else(|err| err.to_string());
            }
            Ok(Command::Mode(value)) => job.text = self.option_command(MODE_OPTION, value),
            Ok(Command::Model(None)) if let Some(pick) = self.picker(MODEL_OPTION) => {
                job.pick = Some(pick);
            }
            Ok(Command::Model(value)) => job.text = self.option_command(MODEL_OPTION, value),
            Ok(Command::Clear) => {
                job.op = Some(ContextOp::Reset);
                self.remove_plan();
            }
            Ok(Command::Permissions(args)) => job.text = self.permissions_command(args.as_deref()),
            Ok(Command::Compact { focus }) => job.summarize = Some(focus),
            Ok(Command::Rewind(command)) => job.rewind = self.rewind_command(command),
            Ok(Command::Budget(args)) => job.text = self.budget_command(args.as_deref()),
            Ok(Command::Context(command)) => match command {
                ContextCommand::Show => {
                    job.show = true;
                    job.budgets = self.budgets().report(&self.spent());
                }
                ContextCommand::Checkpoint(name) => job.op = Some(ContextOp::Checkpoint { name }),
                ContextCommand::Rollback(name, flags) => {
                    job.rewind = self.rollback_command(&name, flags);
                }
                ContextCommand::Pop(count) => job.op = Some(ContextOp::Pop { count }),
                ContextCommand::Reset => {
                    job.op = Some(ContextOp::Reset);
                    self.remove_plan();
                }
                ContextCommand::Summarize => job.summarize = Some(None),
            },
        }
        let (turn, journaled) = self.turn_context(TurnKind::Command)?;
        let roots = self.services.roots();
        let mut context = self.conversation.context.clone();
        let task_cancel = cancel;
        let task = tokio::spawn(async move {
            let emit = turn.emitter();
            let ready = turn
                .input(Default::default(), task_cancel.clone(), &emit)
                .await;
            let keep = ready.context_settings.keep_recent_turns;
            let budget = ready.context_settings.budget(ready.context_window);
            let mut ops = Vec::new();
            let mut result = Ok(StopReason::EndTurn);
            let mut text = job.text;
            if let Some(pick) = job.pick {
                text = pick.run(&task_cancel).await;
            }
            text.push_str(&job.rewind.text);
            let rewind = job.rewind.silent.into_iter().map(|op| (op, false));
            let rollback = job.rewind.reported.into_iter().map(|op| (op, true));
            for (op, reported) in rewind.chain(rollback) {
                match context.apply(&op) {
                    Ok(report) => {
                        if reported {
                            if !text.is_empty() {
                                text.push('\n');
                            }
                            text.push_str(&report);
                        }
                        ops.push(op);
                    }
                    Err(err) => text.push_str(&err.to_string()),
                }
            }
            if let Some(op) = job.op {
                match context.apply(&op) {
                    Ok(report) => {
                        text.push_str(&report);
                        ops.push(op);
                    }
                    Err(err) => text.push_str(&err.to_string()),
                }
            }
            if let Some(focus) = job.summarize {
                match compact::compactable(&context, keep) {
                    None => text.push_str(
                        "Nothing to compact yet: only the latest turn (or an existing summary) is in the context.",
                    ),
                    Some(entries) => {
                        // The report is the command's answer; the steps go
                        // only to clients that show compactions.
                        let id = compaction_id();
                        let step = |step| emit(AgentEvent::Compaction(step));
                        step(Compaction::Started {
                            id: id.clone(),
                            thought: None,
                        });
                        let on_text = |text: &str| {
                            step(Compaction::SummaryChunk {
                                id: id.clone(),
                                text: text.to_string(),
                            })
                        };
                        let wanted = compact::SummaryWanted {
                            focus: focus.as_deref(),
                            on_text: &on_text,
                        };
                        let compacted = compact::compact(
                            &mut context,
                            entries,
                            &*ready.provider,
                            &ready.model,
                            wanted,
                            &budget,
                            &task_cancel,
                        )
                        .await;
                        let outcome = match compacted {
                            Ok(compact::Compacted { op, report }) => {
                                text.push_str(&report);
                                ops.push(op);
                                CompactionOutcome::Completed
                            }
                            Err(CompactError::Cancelled) => {
                                result = Ok(StopReason::Cancelled);
                                text.push_str(&CompactError::Cancelled.to_string());
                                CompactionOutcome::Cancelled
                            }
                            Err(err) => {
                                text.push_str(&err.to_string());
                                CompactionOutcome::Failed(err.to_string())
                            }
                        };
                        step(Compaction::Ended {
                            id,
                            outcome,
                            thought: None,
                        });
                    }
                }
            }
            let fixed = context.estimator.tokens(budget::fixed_chars(
                ready.system.as_deref(),
                &ready.tools.definitions(),
            ));
            if job.show {
                text = roots_report(&roots);
                text.push_str(&job.budgets);
                text.push_str("\n\n");
                text.push_str(&context.report(fixed, &budget));
                if budget.window <= crate::prompt::SMALL_WINDOW {
                    let _ = write!(
                        text,
                        "\nThe window is small (≤ {} tokens): the system prompt and the tool definitions are the brief ones.",
                        crate::prompt::SMALL_WINDOW
                    );
                }
            }
            emit(AgentEvent::AgentText(text));
            let cost = ready.cost.as_ref().map(|meter| {
                let (amount, currency) = meter.so_far();
                crate::events::Cost { amount, currency }
            });
            emit(AgentEvent::Usage {
                used: fixed + context.tokens(),
                size: budget.window,
                cost,
            });
            TurnOutcome {
                new_messages: Vec::new(),
                result,
                usage: None,
                context,
                context_ops: ops,
                switched: None,
            }
        });
        Ok(Started {
            task: tokio_util::task::AbortOnDropHandle::new(task),
            kind: TurnKind::Command,
            journaled,
        })
    }
}

/// The workspace roots, for `/context`: what the file tools may reach.
fn roots_report(roots: &[std::path::PathBuf]) -> String {
    let mut out = String::from("Workspace roots (the file tools stay inside these):\n");
    for root in roots {
        let _ = writeln!(out, "- {}", root.display());
    }
    out.push('\n');
    out
}
