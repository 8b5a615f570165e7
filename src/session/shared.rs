//! What every part of a session reads and no part owns: the config's
//! defaults and the handles every session of the process shares, and the
//! journal a turn keeps. A leaf: it imports no other file of `session/`
//! but the process-wide agent registry, so any file may use it.

use std::sync::Arc;

use crate::agent_loop::Journal;
use crate::client::ClientSink;
use crate::config::Config;
use crate::mcp::{McpOptions, McpServerSpec};
use crate::providers::Providers;

use super::runtime::AgentRuntime;

/// What every session shares for the life of the process: the manager
/// hands each one a clone.
#[derive(Clone)]
pub struct Shared {
    pub defaults: Arc<Defaults>,
    pub providers: Arc<Providers>,
    pub client: Arc<dyn ClientSink>,
    /// The delegated agents running now, and where they are saved.
    pub runtime: Arc<AgentRuntime>,
    /// With several connections (`serve`): each session's client is that
    /// of the connection it is attached to now, not `client`. None on
    /// stdio, and for delegated agents (they speak through their parent).
    pub attachments: Option<Arc<super::attachments::Attachments>>,
}

/// What a turn journaled, kept for when its task dies without an outcome.
pub(super) type Journaled = Arc<std::sync::Mutex<Vec<Journal>>>;

/// What a turn's task runs, which decides what it tells the client and
/// how it is saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TurnKind {
    /// A prompt for the model (typed, a skill's or an MCP prompt's): it
    /// tells what is told once, saves its rounds as they happen, counts
    /// its tokens and may suggest what to ask next.
    Prompt,
    /// A built-in slash command: its context operations are saved when it ends.
    Command,
    /// A prompt-cache warm-up: it tells the client nothing.
    Warmup,
}

/// The config's session defaults, read once for the process.
pub struct Defaults {
    pub provider: String,
    pub model: String,
    pub max_turn_requests: u32,
    /// `[agent] repeated_call_limit`.
    pub loop_guard: crate::tools::repeats::LoopGuardSettings,
    pub first_token_notice: Option<std::time::Duration>,
    pub mode: String,
    pub modes: crate::modes::ModeRegistry,
    pub rules: Arc<Vec<crate::permissions::Rule>>,
    /// Crucible's `[permissions]` lists (or the profile's).
    pub permission_lists: Arc<crate::permissions::patterns::PatternLists>,
    /// `[permissions] reads`: MCP tools that run as reads.
    pub declared_reads: crate::permissions::DeclaredReads,
    /// The kiln and `[llm.models]`, for agent cards.
    pub agent_cards: crate::agents::CardSettings,
    /// `[mcp_servers]` from the config, started by every session.
    pub mcp_servers: Vec<McpServerSpec>,
    pub mcp_options: McpOptions,
    /// `[shell_environment]`: what commands get of the agent's environment.
    pub shell_environment: Arc<crate::tools::environment::EnvironmentPolicy>,
    /// `[sensitive_files]`: files whose reads ask first.
    pub sensitive_files: Arc<crate::tools::sensitive::SensitiveFiles>,
    /// `[sandbox]`: how commands are confined.
    pub sandbox: crate::tools::sandbox::SandboxSettings,
    pub context: crate::context::ContextSettings,
    /// `[context] rules_files`: the project's rules files.
    pub rules_files: crate::prompt::RulesFiles,
    /// `--agent` or `[chat] default_agent`.
    pub agent: Option<String>,
    /// `[chat] system_prompt`.
    pub system_prompt: Option<String>,
    /// `[subagents]`: how far delegation may go.
    pub subagents: crate::agents::SubagentSettings,
    /// `[agent] thought_level`.
    pub thought_level: crate::providers::Reasoning,
    /// `[agent]`'s budgets.
    pub budgets: crate::context::spend::Budgets,
    /// `[prices.MODEL]`.
    pub prices: crate::providers::pricing::PriceTable,
    /// `[acp] unstable`.
    pub unstable: crate::config::Unstable,
}

impl Defaults {
    /// What new sessions start with under `config`; None when it names no
    /// default provider.
    pub fn from_config(config: &Config) -> Option<Self> {
        let provider = config.default_provider()?;
        Some(Self {
            provider: provider.name.clone(),
            model: provider.default_model.clone(),
            max_turn_requests: config.max_turn_requests,
            loop_guard: config.loop_guard,
            budgets: config.budgets,
            first_token_notice: config.first_token_notice,
            mode: config.default_mode.clone(),
            modes: config.modes.clone(),
            rules: Arc::new(config.permission_rules.clone()),
            permission_lists: Arc::new(config.permission_lists.clone()),
            declared_reads: config.declared_reads.clone(),
            agent_cards: config.agent_cards.clone(),
            mcp_servers: config.mcp_servers.clone(),
            mcp_options: config.mcp_options.clone(),
            shell_environment: Arc::new(config.shell_environment.clone()),
            sensitive_files: Arc::new(config.sensitive_files.clone()),
            sandbox: config.sandbox.clone(),
            context: config.context,
            rules_files: config.rules_files.clone(),
            agent: config.default_agent.clone(),
            system_prompt: config.system_prompt.clone(),
            subagents: config.subagents,
            thought_level: config.thought_level,
            prices: config.prices.clone(),
            unstable: config.unstable,
        })
    }
}
