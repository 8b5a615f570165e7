//! The session's settings: provider, model, mode and agent card. They
//! change only through [`SessionActor::apply`], which validates the change,
//! tells the client, and saves the result once; `options` is the view the
//! client's selectors show.

use std::fmt::Write as _;
use std::sync::Arc;

use thiserror::Error;

use super::{SessionActor, SessionError, SessionMsg};

use crate::agents::AgentCard;
use crate::client::{
    AGENT_OPTION, MODE_OPTION, MODEL_OPTION, OptionCategory, OptionValue, PROVIDER_OPTION,
    SANDBOX_OPTION, SelectOption, THOUGHT_OPTION, Update,
};
use crate::providers::reasoning::known_to_reason;
use crate::providers::{ModelInfo, Reasoning};

/// The card name that means "no card".
pub(super) const NO_AGENT: &str = "none";

/// What the session runs with now; saved with it, so a load continues with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub provider: String,
    pub model: String,
    pub mode: String,
    /// The active agent card's name.
    pub agent: Option<String>,
    /// Reasoning effort; sent only to models that reason.
    pub thought_level: Reasoning,
}

impl Settings {
    /// The effort a model call asks for: None where the model is not known to reason.
    pub fn reasoning(&self) -> Option<Reasoning> {
        known_to_reason(&self.model).then_some(self.thought_level)
    }
}

/// The settings and what the client's selectors offer besides them.
pub(super) struct SettingsState {
    pub current: Settings,
    /// The provider's model list, once it has loaded.
    pub models: Option<Vec<ModelInfo>>,
}

/// One of a session request's initial `configOptions`: an option's id
/// and the id of the value it starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialOption {
    pub option: String,
    pub value: String,
}

/// Whether a change of a setting is told to the client as it is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Notify {
    /// The client has the session: it hears what changed.
    Client,
    /// Before the client has the session: the change is part of its
    /// first answer instead.
    Quietly,
}

/// Why a change of a setting was not made (or not all of it), worded for
/// the user: a slash command answers with it.
#[derive(Debug, Error)]
pub(super) enum SettingError {
    #[error("Its mode `{asked}` is unknown; kept `{kept}`.")]
    Mode { asked: String, kept: String },
    #[error("Its provider `{asked}` is not configured; kept `{kept}`.")]
    Provider { asked: String, kept: String },
    #[error("no agent card named `{asked}`; available: {available}")]
    Agent { asked: String, available: String },
    #[error("`{asked}` is not a sandbox mode; kept `{kept}`.")]
    Sandbox { asked: String, kept: String },
}

/// One change the client (a selector or a slash command) asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingChange {
    Model(String),
    Mode(String),
    Provider(String),
    Agent(String),
    Sandbox(String),
    ThoughtLevel(Reasoning),
}

impl SettingChange {
    /// The change a config option id and value ask for.
    fn from_option(id: &str, value: &str) -> Option<Self> {
        let value = value.to_string();
        match id {
            MODEL_OPTION => Some(Self::Model(value)),
            MODE_OPTION => Some(Self::Mode(value)),
            PROVIDER_OPTION => Some(Self::Provider(value)),
            AGENT_OPTION => Some(Self::Agent(value)),
            SANDBOX_OPTION => Some(Self::Sandbox(value)),
            THOUGHT_OPTION => Reasoning::parse(&value).map(Self::ThoughtLevel),
            _ => None,
        }
    }
}

impl SessionActor {
    pub(super) fn active_card(&self) -> Option<&AgentCard> {
        let name = self.settings.current.agent.as_deref()?;
        self.services.agents.iter().find(|card| card.name == name)
    }

    /// The selectors the client shows: model, mode, provider, agent.
    pub(super) fn options(&self) -> Vec<SelectOption> {
        let current = &self.settings.current;
        let providers = &self.services.providers;
        let mut values: Vec<OptionValue> = Vec::new();
        let mut add = |id: &str| {
            if !values.iter().any(|v| v.id == id) {
                values.push(OptionValue {
                    id: id.to_string(),
                    name: id.to_string(),
                    description: None,
                });
            }
        };
        add(&current.model);
        if let Some(config) = providers.config(&current.provider) {
            add(&config.default_model);
        }
        for model in self.settings.models.iter().flatten() {
            add(&model.id);
        }
        let model = SelectOption {
            id: MODEL_OPTION.into(),
            name: "Model".into(),
            description: format!("The model provider `{}` answers with", current.provider),
            category: OptionCategory::Model,
            current: current.model.clone(),
            values,
        };
        let provider = SelectOption {
            id: PROVIDER_OPTION.into(),
            name: "Provider".into(),
            description: "The configured LLM server this session talks to".into(),
            category: OptionCategory::Provider,
            current: current.provider.clone(),
            values: providers
                .all()
                .into_iter()
                .filter_map(|(name, config)| {
                    Some(OptionValue {
                        name: format!("{name} ({})", config?.kind.as_str()),
                        id: name,
                        description: None,
                    })
                })
                .collect(),
        };
        let mode = SelectOption {
            id: MODE_OPTION.into(),
            name: "Mode".into(),
            description: "How much the agent may do without asking".into(),
            category: OptionCategory::Mode,
            current: current.mode.clone(),
            values: self
                .services
                .defaults
                .modes
                .iter()
                .map(|mode| OptionValue {
                    id: mode.id.clone(),
                    name: mode.name.clone(),
                    description: Some(mode.description.clone()),
                })
                .collect(),
        };
        let mut options = vec![
            model,
            mode,
            provider,
            self.agent_option(),
            self.sandbox_option(),
        ];
        if current.reasoning().is_some() {
            options.push(thought_option(current.thought_level));
        }
        options
    }

    fn agent_option(&self) -> SelectOption {
        let mut values = vec![OptionValue {
            id: NO_AGENT.into(),
            name: "No agent card".into(),
            description: Some("The base prompt with every tool the mode allows".into()),
        }];
        values.extend(self.services.agents.iter().map(|card| OptionValue {
            id: card.name.clone(),
            name: card.name.clone(),
            description: Some(card.description.clone()),
        }));
        SelectOption {
            id: AGENT_OPTION.into(),
            name: "Agent".into(),
            description: "The agent card: its instructions, tools and defaults".into(),
            category: OptionCategory::Agent,
            current: self
                .settings
                .current
                .agent
                .clone()
                .unwrap_or_else(|| NO_AGENT.into()),
            values,
        }
    }

    /// A config option set by the client (`session/set_config_option`,
    /// `session/set_mode`): checked against the offered values, applied,
    /// answered with the options as they are now.
    pub(super) fn set_option(
        &mut self,
        id: &str,
        value: &str,
    ) -> Result<Vec<SelectOption>, SessionError> {
        self.set_option_as(id, value, Notify::Client)
    }

    /// The initial `configOptions` of a session request, in order, before
    /// the client has the answer: no update for them (the answer shows
    /// them), and an unknown option or value is skipped, as ACP asks.
    pub(super) fn initial_options(&mut self, options: Vec<InitialOption>) {
        for InitialOption { option, value } in options {
            if let Err(err) = self.set_option_as(&option, &value, Notify::Quietly) {
                tracing::debug!(session = %self.services.id, %err, "initial config option ignored");
            }
        }
    }

    fn set_option_as(
        &mut self,
        id: &str,
        value: &str,
        notify: Notify,
    ) -> Result<Vec<SelectOption>, SessionError> {
        let options = self.options();
        let option = options.iter().find(|o| o.id == id).ok_or_else(|| {
            SessionError::UnknownOption(id.to_string(), list(options.iter().map(|o| &o.id)))
        })?;
        if !option.values.iter().any(|v| v.id == value) {
            return Err(SessionError::UnknownValue {
                option: id.to_string(),
                value: value.to_string(),
                choices: list(option.values.iter().map(|v| &v.id)),
            });
        }
        if let Some(change) = SettingChange::from_option(id, value)
            && let Err(err) = self.apply(change, notify)
        {
            tracing::warn!(session = %self.services.id, %err, "setting not applied");
        }
        Ok(self.options())
    }

    /// `session/set_model`: the model by id, offered or not (a client may
    /// re-apply a model it remembers before the list has loaded).
    pub(super) fn set_model(&mut self, model: String) -> Result<(), SessionError> {
        if model.trim().is_empty() {
            return Err(SessionError::UnknownValue {
                option: MODEL_OPTION.to_string(),
                value: model,
                choices: "a model id the provider serves".to_string(),
            });
        }
        let before = self.options();
        if let Err(err) = self.apply(SettingChange::Model(model), Notify::Client) {
            tracing::warn!(session = %self.services.id, %err, "model not applied");
        }
        let after = self.options();
        if before != after {
            self.send(Update::ConfigOptions(after));
        }
        Ok(())
    }

    /// The one way settings change. Returns a report for the user.
    pub(super) fn apply(
        &mut self,
        change: SettingChange,
        notify: Notify,
    ) -> Result<String, SettingError> {
        let report = match change {
            SettingChange::Model(model) => {
                let report = format!("model is now `{model}`.");
                self.settings.current.model = model;
                report
            }
            SettingChange::Mode(mode) => {
                if self.switch_mode(&mode, notify)? && notify == Notify::Client {
                    self.send(Update::ConfigOptions(self.options()));
                }
                format!("mode is now `{mode}`.")
            }
            SettingChange::Provider(provider) => {
                self.switch_provider(&provider, notify)?;
                format!("provider is now `{provider}`.")
            }
            SettingChange::ThoughtLevel(level) => {
                self.settings.current.thought_level = level;
                format!("thought level is now `{}`.", level.as_str())
            }
            SettingChange::Agent(name) => {
                let report = self.switch_agent(&name, notify)?;
                if notify == Notify::Client {
                    self.send(Update::ConfigOptions(self.options()));
                }
                report
            }
            SettingChange::Sandbox(mode) => self.switch_sandbox(&mode, notify)?,
        };
        self.record_settings();
        Ok(report)
    }

    /// A new mode takes effect from the next model call; a running turn
    /// keeps its tools. Whether the mode changed.
    fn switch_mode(&mut self, mode: &str, notify: Notify) -> Result<bool, SettingError> {
        let Some((id, policy)) = self
            .services
            .defaults
            .modes
            .find(mode)
            .map(|found| (found.id.clone(), found.policy))
        else {
            return Err(SettingError::Mode {
                asked: mode.to_string(),
                kept: self.settings.current.mode.clone(),
            });
        };
        if self.settings.current.mode == id {
            return Ok(false);
        }
        self.settings.current.mode = id;
        self.services.permissions.set_policy(policy);
        if notify == Notify::Client {
            self.send(Update::CurrentMode(self.settings.current.mode.clone()));
        }
        Ok(true)
    }

    /// A new server: its own default model, and its model list replaces
    /// the old one once it loads.
    fn switch_provider(&mut self, provider: &str, notify: Notify) -> Result<(), SettingError> {
        let Some(config) = self.services.providers.config(provider) else {
            return Err(SettingError::Provider {
                asked: provider.to_string(),
                kept: self.settings.current.provider.clone(),
            });
        };
        if self.settings.current.provider != provider {
            self.settings.current.provider = provider.to_string();
            self.settings.current.model = config.default_model.clone();
            self.settings.models = None;
            if notify == Notify::Client {
                self.load_models();
            }
        }
        Ok(())
    }

    /// A loaded session's card: its prompt, tool allow-list and
    /// agent-scoped rules. Its model, provider and mode are not applied
    /// again: the session was saved with them (or with the user's later
    /// choices, which win).
    pub(super) fn restore_agent(&mut self, name: &str) {
        if self.services.agents.iter().any(|card| card.name == name) {
            self.services.permissions.set_agent(Some(name.to_string()));
            self.settings.current.agent = Some(name.to_string());
        } else {
            tracing::warn!(session = %self.services.id, agent = %name, "the session's agent card no longer exists; none is active");
        }
    }

    /// Make `name` the active card; its model, provider and mode apply if
    /// it names them.
    fn switch_agent(&mut self, name: &str, notify: Notify) -> Result<String, SettingError> {
        if name == NO_AGENT {
            self.settings.current.agent = None;
            self.services.permissions.set_agent(None);
            return Ok("No agent card: the base prompt and every tool the mode allows.".into());
        }
        let Some(card) = self
            .services
            .agents
            .iter()
            .find(|c| c.name == name)
            .cloned()
        else {
            return Err(SettingError::Agent {
                asked: name.to_string(),
                available: list(self.services.agents.iter().map(|c| &c.name)),
            });
        };
        let mut report = format!("Agent `{}`: {}.", card.name, card.description);
        if let Some(provider) = &card.provider {
            let before = self.settings.current.provider.clone();
            match self.switch_provider(provider, notify) {
                Ok(()) if before != *provider => {
                    let _ = write!(report, " Provider: {provider}.");
                }
                Ok(()) => {}
                Err(kept) => {
                    let _ = write!(report, " {kept}");
                }
            }
        }
        if let Some(model) = &card.model {
            self.settings.current.model = model.clone();
            let _ = write!(report, " Model: {model}.");
        }
        if let Some(mode) = &card.mode {
            match self.switch_mode(mode, notify) {
                Ok(_) => {
                    let _ = write!(report, " Mode: {mode}.");
                }
                Err(kept) => {
                    let _ = write!(report, " {kept}");
                }
            }
        }
        if let Some(level) = &card.thought_level {
            match Reasoning::parse(level) {
                Some(level) => {
                    self.settings.current.thought_level = level;
                    let _ = write!(report, " Thought level: {}.", level.as_str());
                }
                None => {
                    let _ = write!(
                        report,
                        " Its thought_level `{level}` is not off, low, medium or high; kept `{}`.",
                        self.settings.current.thought_level.as_str()
                    );
                }
            }
        }
        if let Some(tools) = &card.tools {
            let _ = write!(report, " Tools: {}.", tools.join(", "));
        }
        self.services.permissions.set_agent(Some(card.name.clone()));
        self.settings.current.agent = Some(card.name);
        Ok(report)
    }

    pub(super) fn agent_list(&self) -> String {
        let mut out = String::from("Agent cards (switch with `/agent NAME`):\n");
        for card in &self.services.agents {
            let active = if self.settings.current.agent.as_deref() == Some(card.name.as_str()) {
                " (active)"
            } else {
                ""
            };
            let _ = writeln!(out, "- `{}`{active}: {}", card.name, card.description);
        }
        if self.settings.current.agent.is_none() {
            out.push_str("No card is active.");
        }
        out
    }

    /// The provider's model list, loaded in the background; the client
    /// hears about it through a config-option update.
    pub(super) fn load_models(&self) {
        let providers = Arc::clone(&self.services.providers);
        let provider = self.settings.current.provider.clone();
        let mailbox = self.services.mailbox.clone();
        let session = self.services.id.clone();
        tokio::spawn(async move {
            match providers.models(&provider).await {
                Ok(models) => {
                    if let Some(mailbox) = mailbox.upgrade() {
                        let _ = mailbox.send(SessionMsg::ModelsLoaded { provider, models });
                    }
                }
                // Not fatal: the configured model still works; the error shows when a prompt fails.
                Err(err) => tracing::info!(%session, %err, "model list unavailable"),
            }
        });
    }

    pub(super) fn models_loaded(&mut self, provider: String, models: Vec<ModelInfo>) {
        if provider != self.settings.current.provider {
            return;
        }
        let before = self.options();
        self.settings.models = Some(models);
        let after = self.options();
        if before != after {
            self.send(Update::ConfigOptions(after));
        }
    }
}

/// The reasoning-effort selector, for models that reason.
fn thought_option(current: Reasoning) -> SelectOption {
    SelectOption {
        id: THOUGHT_OPTION.into(),
        name: "Thinking".into(),
        description: "How hard the model reasons before it answers".into(),
        category: OptionCategory::ThoughtLevel,
        current: current.as_str().into(),
        values: Reasoning::ALL
            .iter()
            .map(|level| OptionValue {
                id: level.as_str().into(),
                name: level.as_str().into(),
                description: None,
            })
            .collect(),
    }
}

fn list<'a>(names: impl Iterator<Item = &'a String>) -> String {
    names.map(String::as_str).collect::<Vec<_>>().join(", ")
}
