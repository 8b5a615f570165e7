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

use crate::agent_loop::{TurnInput, TurnOutcome, compaction_id};
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
    /// `/compact` and `/context summarize`, with the user's focus.
    summarize: Option<Option<String>>,
    /// `/agent` or `/model` without a name, asked in a form.
    pick: Option<super::pick::Pick>,
    /// `/context`: the report replaces the answer.
    report: Option<Report>,
}

/// What `/context` reports besides what its task measures.
struct Report {
    /// The spend against the budgets.
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

    /// Runs a slash command: its settings part here in the actor, its
    /// context part (and `/compact`'s model call) in a task like a turn's.
    pub(super) fn start_command(
        &mut self,
        command: Result<Command, CommandError>,
        cancel: CancellationToken,
    ) -> Result<Started, SessionError> {
        let job = self.command_job(command);
        let (turn, journaled) = self.turn_context(TurnKind::Command)?;
        let roots = self.services.roots();
        let inbox = std::sync::Arc::clone(&turn.inbox);
        let context = self.conversation.context.clone();
        let task = tokio::spawn(async move {
            let emit = turn.emitter();
            let ready = turn.input(Default::default(), cancel.clone(), &emit).await;
            let mut run = JobRun {
                text: job.text,
                ops: Vec::new(),
                result: Ok(StopReason::EndTurn),
                context,
            };
            if let Some(pick) = job.pick {
                run.text = pick.run(&cancel).await;
            }
            run.apply_rewind(job.rewind);
            if let Some(op) = job.op {
                run.apply(op);
            }
            if let Some(focus) = job.summarize {
                run.summarize(focus, &ready, &emit, &cancel).await;
            }
            run.finish(&ready, job.report, &roots, &emit)
        });
        Ok(Started {
            task: tokio_util::task::AbortOnDropHandle::new(task),
            kind: TurnKind::Command,
            journaled,
            inbox,
        })
    }

    /// The actor's part of a command: settings change now; the rest is
    /// what its task will do.
    fn command_job(&mut self, command: Result<Command, CommandError>) -> Job {
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
            Ok(Command::Context(command)) => self.context_job(command, &mut job),
        }
        job
    }

    /// `/context` and its subcommands.
    fn context_job(&mut self, command: ContextCommand, job: &mut Job) {
        match command {
            ContextCommand::Show => {
                job.report = Some(Report {
                    budgets: self.budgets().report(&self.spent()),
                });
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
        }
    }
}

/// A command's task as it goes: its answer so far, the context operations
/// it applied, and how it ends.
struct JobRun {
    text: String,
    ops: Vec<ContextOp>,
    result: Result<StopReason, crate::providers::ProviderError>,
    context: crate::context::ContextManager,
}

impl JobRun {
    /// A rewind's or a rollback's operations, in order: the rewind's
    /// silently, the rollback's reported.
    fn apply_rewind(&mut self, rewind: super::rewind::RewindJob) {
        self.text.push_str(&rewind.text);
        let silent = rewind.silent.into_iter().map(|op| (op, false));
        let reported = rewind.reported.into_iter().map(|op| (op, true));
        for (op, reported) in silent.chain(reported) {
            match self.context.apply(&op) {
                Ok(report) => {
                    if reported {
                        if !self.text.is_empty() {
                            self.text.push('\n');
                        }
                        self.text.push_str(&report);
                    }
                    self.ops.push(op);
                }
                Err(err) => self.text.push_str(&err.to_string()),
            }
        }
    }

    fn apply(&mut self, op: ContextOp) {
        match self.context.apply(&op) {
            Ok(report) => {
                self.text.push_str(&report);
                self.ops.push(op);
            }
            Err(err) => self.text.push_str(&err.to_string()),
        }
    }

    /// `/compact` and `/context summarize`: the report is the command's
    /// answer; the steps go only to clients that show compactions.
    async fn summarize(
        &mut self,
        focus: Option<String>,
        ready: &TurnInput,
        emit: &(dyn Fn(AgentEvent) + Send + Sync),
        cancel: &CancellationToken,
    ) {
        let keep = ready.session.limits.context_settings.keep_recent_turns;
        let budget = ready.budget();
        let Some(entries) = compact::compactable(&self.context, keep, budget.window) else {
            self.text.push_str(
                "Nothing to compact yet: only the latest turn (or an existing summary) is in the context.",
            );
            return;
        };
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
            });
        };
        let wanted = compact::SummaryWanted {
            focus: focus.as_deref(),
            on_text: &on_text,
        };
        // The request as a turn sends it, which the summary continues.
        let last = ready.request_prefix();
        let last = compact::LastRequest {
            provider: &*ready.session.model.provider,
            request: &last,
        };
        let compacted =
            compact::compact(&mut self.context, entries, last, wanted, &budget, cancel).await;
        let outcome = match compacted {
            Ok(compact::Compacted { op, report }) => {
                self.text.push_str(&report);
                self.ops.push(op);
                CompactionOutcome::Completed
            }
            Err(CompactError::Cancelled) => {
                self.result = Ok(StopReason::Cancelled);
                self.text.push_str(&CompactError::Cancelled.to_string());
                CompactionOutcome::Cancelled
            }
            Err(err) => {
                self.text.push_str(&err.to_string());
                CompactionOutcome::Failed(err.to_string())
            }
        };
        step(Compaction::Ended {
            id,
            outcome,
            thought: None,
        });
    }

    /// The answer (for `/context`, the report instead), the context's
    /// usage, and the command's outcome.
    fn finish(
        mut self,
        ready: &TurnInput,
        report: Option<Report>,
        roots: &[std::path::PathBuf],
        emit: &(dyn Fn(AgentEvent) + Send + Sync),
    ) -> TurnOutcome {
        let budget = ready.budget();
        let fixed = self.context.estimator.tokens(budget::fixed_chars(
            ready.system.as_deref(),
            &ready.tools.definitions(),
        ));
        if let Some(report) = report {
            self.text = roots_report(roots);
            self.text.push_str(&report.budgets);
            self.text.push_str("\n\n");
            self.text.push_str(&self.context.report(fixed, &budget));
            if budget.window <= crate::prompt::SMALL_WINDOW {
                let _ = write!(
                    self.text,
                    "\nThe window is small (≤ {} tokens): the system prompt and the tool definitions are the brief ones.",
                    crate::prompt::SMALL_WINDOW
                );
            }
        }
        emit(AgentEvent::AgentText(self.text));
        let cost = ready.session.model.cost.as_ref().map(|meter| {
            let (amount, currency) = meter.so_far();
            crate::events::Cost { amount, currency }
        });
        emit(AgentEvent::Usage {
            used: fixed + self.context.tokens(),
            size: budget.window,
            cost,
        });
        TurnOutcome {
            new_messages: Vec::new(),
            result: self.result,
            usage: None,
            context: self.context,
            context_ops: self.ops,
            switched: None,
        }
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
