//! Slash commands run against the session: settings change at once in the
//! actor; the context work (and the model call of `/compact`) runs in a
//! task like a turn, so it can be cancelled and the session stays
//! responsive. Every command answers with a short report as agent text and
//! ends the turn.

use std::fmt::Write as _;

use tokio_util::sync::CancellationToken;

use super::{PromptReply, RunningTurn, SessionActor};

use crate::agent_loop::TurnOutcome;
use crate::agents::AgentCard;
use crate::client::{
    AGENT_OPTION, MODE_OPTION, MODEL_OPTION, OptionCategory, OptionValue, SelectOption, Update,
};
use crate::commands::{self, Command, CommandError, ContextCommand};
use crate::context::compact::{self, CompactError};
use crate::context::{ContextOp, budget};
use crate::events::{AgentEvent, StopReason};

/// What the command's task does after the actor's part.
#[derive(Default)]
struct Job {
    text: String,
    op: Option<ContextOp>,
    show: bool,
    /// `/compact` and `/context summarize`, with the user's focus.
    summarize: Option<Option<String>>,
}

/// The card name that means "no card".
pub(super) const NO_AGENT: &str = "none";

impl SessionActor {
    pub(super) fn active_card(&self) -> Option<&AgentCard> {
        let name = self.agent.as_deref()?;
        self.agents.iter().find(|card| card.name == name)
    }

    pub(super) fn agent_option(&self) -> SelectOption {
        let mut values = vec![OptionValue {
            id: NO_AGENT.into(),
            name: "No agent card".into(),
            description: Some("The base prompt with every tool the mode allows".into()),
        }];
        values.extend(self.agents.iter().map(|card| OptionValue {
            id: card.name.clone(),
            name: card.name.clone(),
            description: Some(card.description.clone()),
        }));
        SelectOption {
            id: AGENT_OPTION.into(),
            name: "Agent".into(),
            description: "The agent card: its instructions, tools and defaults".into(),
            category: OptionCategory::Agent,
            current: self.agent.clone().unwrap_or_else(|| NO_AGENT.into()),
            values,
        }
    }

    /// A loaded session's card: its prompt, tool allow-list and
    /// agent-scoped rules. Its model, provider and mode are not applied
    /// again: the session was saved with them (or with the user's later
    /// choices, which win).
    pub(super) fn restore_agent(&mut self, name: &str) {
        if self.agents.iter().any(|card| card.name == name) {
            self.permissions.set_agent(Some(name.to_string()));
            self.agent = Some(name.to_string());
        } else {
            tracing::warn!(session = %self.id, agent = %name, "the session's agent card no longer exists; none is active");
        }
    }

    /// Make `name` the active card; its model, provider and mode apply if
    /// it names them. `notify`: tell the client what changed.
    pub(super) fn switch_agent(&mut self, name: &str, notify: bool) -> Result<String, String> {
        if name == NO_AGENT {
            self.agent = None;
            self.permissions.set_agent(None);
            if notify {
                self.sink
                    .send(&self.id, Update::ConfigOptions(self.options()));
                self.record_settings();
            }
            return Ok("No agent card: the base prompt and every tool the mode allows.".into());
        }
        let Some(card) = self.agents.iter().find(|c| c.name == name).cloned() else {
            return Err(format!(
                "no agent card named `{name}`; available: {}",
                self.agents
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        let mut report = format!("Agent `{}`: {}.", card.name, card.description);
        if let Some(provider) = &card.provider {
            match self.providers.config(provider) {
                Some(config) if *provider != self.provider => {
                    self.provider = provider.clone();
                    self.model = config.default_model.clone();
                    self.models = None;
                    if notify {
                        self.load_models();
                    }
                    let _ = write!(report, " Provider: {provider}.");
                }
                Some(_) => {}
                None => {
                    let _ = write!(
                        report,
                        " Its provider `{provider}` is not configured; kept `{}`.",
                        self.provider
                    );
                }
            }
        }
        if let Some(model) = &card.model {
            self.model = model.clone();
            let _ = write!(report, " Model: {model}.");
        }
        if let Some(mode) = &card.mode {
            match self
                .modes
                .find(mode)
                .map(|found| (found.id.clone(), found.policy))
            {
                Some((id, policy)) => {
                    if self.mode != id {
                        self.mode = id;
                        self.permissions.set_policy(policy);
                        if notify {
                            self.sink
                                .send(&self.id, Update::CurrentMode(self.mode.clone()));
                        }
                    }
                    let _ = write!(report, " Mode: {mode}.");
                }
                None => {
                    let _ = write!(
                        report,
                        " Its mode `{mode}` is unknown; kept `{}`.",
                        self.mode
                    );
                }
            }
        }
        if let Some(tools) = &card.tools {
            let _ = write!(report, " Tools: {}.", tools.join(", "));
        }
        self.permissions.set_agent(Some(card.name.clone()));
        self.agent = Some(card.name);
        if notify {
            self.sink
                .send(&self.id, Update::ConfigOptions(self.options()));
            // A saved session comes back with the card's model and mode.
            self.record_settings();
        }
        Ok(report)
    }

    fn agent_list(&self) -> String {
        let mut out = String::from("Agent cards (switch with `/agent NAME`):\n");
        for card in &self.agents {
            let active = if self.agent.as_deref() == Some(card.name.as_str()) {
                " (active)"
            } else {
                ""
            };
            let _ = writeln!(out, "- `{}`{active}: {}", card.name, card.description);
        }
        if self.agent.is_none() {
            out.push_str("No card is active.");
        }
        out
    }

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
                    self.sink.send(&self.id, Update::ConfigOptions(options));
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
        reply: PromptReply,
    ) -> Option<RunningTurn> {
        let mut job = Job::default();
        match command {
            Err(err) => job.text = err.to_string(),
            Ok(Command::Help) => job.text = commands::help(&self.prompt_commands()),
            Ok(Command::Agent(None)) => job.text = self.agent_list(),
            Ok(Command::Agent(Some(name))) => {
                job.text = self.switch_agent(&name, true).unwrap_or_else(|err| err);
            }
            Ok(Command::Mode(value)) => job.text = self.option_command(MODE_OPTION, value),
            Ok(Command::Model(value)) => job.text = self.option_command(MODEL_OPTION, value),
            Ok(Command::Clear) => job.op = Some(ContextOp::Reset),
            Ok(Command::Compact { focus }) => job.summarize = Some(focus),
            Ok(Command::Context(command)) => match command {
                ContextCommand::Show => job.show = true,
                ContextCommand::Checkpoint(name) => job.op = Some(ContextOp::Checkpoint { name }),
                ContextCommand::Rollback(name) => job.op = Some(ContextOp::Rollback { name }),
                ContextCommand::Pop(count) => job.op = Some(ContextOp::Pop { count }),
                ContextCommand::Reset => job.op = Some(ContextOp::Reset),
                ContextCommand::Summarize => job.summarize = Some(None),
            },
        }
        let prep = match self.prepare(false) {
            Ok(prep) => prep,
            Err(err) => {
                let _ = reply.send(Err(err));
                return None;
            }
        };
        let mut context = self.context.clone();
        let keep = self.context_settings.keep_recent_turns;
        let settings = self.context_settings;
        let sink = std::sync::Arc::clone(&self.sink);
        let session_id = self.id.clone();
        let task_cancel = cancel.clone();
        let task = tokio::spawn(async move {
            let emit = move |event: AgentEvent| sink.send(&session_id, Update::Agent(event));
            let ready = prep.resolve(&task_cancel, &emit).await;
            let budget = settings.budget(ready.window);
            let mut ops = Vec::new();
            let mut result = Ok(StopReason::EndTurn);
            let mut text = job.text;
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
                match context.compactable(keep).or_else(|| context.compactable(1)) {
                    None => text.push_str(
                        "Nothing to compact yet: only the latest turn (or an existing summary) is in the context.",
                    ),
                    Some(entries) => {
                        let request = compact::request(
                            &ready.model,
                            &context.entries()[..entries],
                            focus.as_deref(),
                            &budget,
                            &context.estimator,
                        );
                        match compact::summarize(&*ready.provider, request, &task_cancel).await {
                            Ok(summary) => {
                                let op = ContextOp::Compact { entries, summary };
                                match context.apply(&op) {
                                    Ok(report) => {
                                        text.push_str(&report);
                                        ops.push(op);
                                    }
                                    Err(err) => text.push_str(&err.to_string()),
                                }
                            }
                            Err(CompactError::Cancelled) => {
                                result = Ok(StopReason::Cancelled);
                                text.push_str(&CompactError::Cancelled.to_string());
                            }
                            Err(err) => text.push_str(&err.to_string()),
                        }
                    }
                }
            }
            let fixed = context.estimator.tokens(budget::fixed_chars(
                Some(&ready.system),
                &ready.tools.definitions(),
            ));
            if job.show {
                text = context.report(fixed, &budget);
            }
            emit(AgentEvent::AgentText(text));
            emit(AgentEvent::Usage {
                used: fixed + context.tokens(),
                size: budget.window,
            });
            TurnOutcome {
                new_messages: Vec::new(),
                result,
                last_usage: None,
                context,
                context_ops: ops,
            }
        });
        Some(RunningTurn {
            cancel,
            reply,
            task,
            command: true,
            journaled: Default::default(),
        })
    }
}
