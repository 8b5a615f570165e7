//! The config file as written. Every key is optional; keys we do not know are
//! collected rather than rejected here, so validation can decide whether they
//! belong to the Crucible TUI (ignored) or are a typo (an error naming them).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::providers::settings::RawProvider;

#[derive(Debug, Default, Deserialize)]
pub struct RawConfig {
    pub chat: Option<RawChat>,
    pub llm: Option<RawLlm>,
    pub agent: Option<RawAgent>,
    pub permissions: Option<RawPermissions>,
    pub mcp: Option<RawMcp>,
    pub mcp_servers: Option<BTreeMap<String, RawMcpServer>>,
    pub modes: Option<BTreeMap<String, RawMode>>,
    pub context: Option<RawContext>,
    pub shell_environment: Option<RawShellEnvironment>,
    pub sensitive_files: Option<RawSensitiveFiles>,
    pub subagents: Option<RawSubagents>,
    pub sandbox: Option<RawSandbox>,
    /// `[serve]`: `crucible-agent serve`'s listener (validated by `config::serve`).
    pub serve: Option<super::serve::RawServe>,
    /// `[acp]`: how the Crucible TUI hosts ACP agents (this agent is one).
    pub acp: Option<RawAcp>,
    /// `[prices.MODEL]`: token prices, for the cost sessions report.
    pub prices: Option<BTreeMap<String, super::prices::RawPrice>>,
    /// Other top-level tables belong to the rest of Crucible.
    #[serde(flatten)]
    pub other: BTreeMap<String, toml::Value>,
}

#[derive(Debug, Default, Deserialize)]
pub struct RawChat {
    pub default_provider: Option<String>,
    pub default_agent: Option<String>,
    /// Added to the end of every session's system prompt.
    pub system_prompt: Option<String>,
    /// Crucible's chat settings; they apply to the default provider.
    pub model: Option<String>,
    pub endpoint: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    pub timeout_secs: Option<u64>,
    /// `enable_markdown`, `default_backend`… concern only the Crucible TUI.
    #[serde(flatten)]
    pub unknown: BTreeMap<String, toml::Value>,
}

#[derive(Debug, Default, Deserialize)]
pub struct RawLlm {
    pub default: Option<String>,
    /// The design document's spelling of `default`.
    pub default_provider: Option<String>,
    /// Validated by `providers::settings`, which owns their meaning.
    pub providers: Option<BTreeMap<String, RawProvider>>,
    /// `[llm.models]`: an agent card's `specialty` → `provider/model` or a model.
    pub models: Option<BTreeMap<String, String>>,
    /// The design document's `[llm.TYPE]` tables, and unknown keys.
    #[serde(flatten)]
    pub unknown: BTreeMap<String, toml::Value>,
}

/// How the agent works a turn.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgent {
    pub max_turn_requests: Option<u32>,
    /// Identical tool calls in a row that stop a turn (0: never).
    pub repeated_call_limit: Option<u32>,
    pub default_mode: Option<String>,
    /// Seconds without a first token before the client is told the turn
    /// is still alive (0: never).
    pub first_token_notice_secs: Option<u64>,
    /// Reasoning effort sessions start with: off, low, medium or high.
    pub thought_level: Option<String>,
    /// Budgets: tokens per turn, tokens and cost per session.
    pub max_turn_tokens: Option<u64>,
    pub max_session_tokens: Option<u64>,
    pub max_session_cost: Option<f64>,
}

/// `[context]`: how the conversation is kept within the model's window.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawContext {
    pub compaction_threshold: Option<f64>,
    pub reserve_tokens: Option<u64>,
    pub keep_recent_turns: Option<usize>,
    /// Share of the window past which a compaction starts between turns; 0 turns it off.
    pub compact_between_turns: Option<f64>,
    /// The project's rules files (Crucible's key), in the order read.
    pub rules_files: Option<Vec<String>>,
}

/// `[permissions]`: rules checked before a tool runs: ours (`rules`) and
/// Crucible's lists (`default`, `allow`, `deny`, `ask`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPermissions {
    #[serde(default)]
    pub rules: Vec<RawRule>,
    pub default: Option<String>,
    pub allow: Option<Vec<String>>,
    pub deny: Option<Vec<String>>,
    pub ask: Option<Vec<String>>,
    /// Tools that run as reads (ours); unset: the kiln server's reads.
    pub reads: Option<Vec<String>>,
}

/// `[acp]`: how the Crucible TUI runs ACP agents. Of it the agent reads
/// only each profile's `permissions`, for the profile it runs under.
#[derive(Debug, Default, Deserialize)]
pub struct RawAcp {
    pub agents: Option<BTreeMap<String, RawAcpAgent>>,
    /// Unstable ACP features to turn on (this agent's own key).
    pub unstable: Option<Vec<String>>,
    /// Whether clients asking for ACP v2 get it (this agent's own key).
    pub protocol_v2: Option<bool>,
    #[serde(flatten)]
    pub other: BTreeMap<String, toml::Value>,
}

/// `[acp.agents.NAME]`
#[derive(Debug, Default, Deserialize)]
pub struct RawAcpAgent {
    pub permissions: Option<RawPermissions>,
    #[serde(flatten)]
    pub other: BTreeMap<String, toml::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    pub tool: Option<String>,
    pub kind: Option<String>,
    pub command_prefix: Option<OneOrMany>,
    /// An exact command line (what "Always allow in this project" writes).
    pub command: Option<String>,
    /// Exact files (relative to the project in its rules file).
    pub path: Option<OneOrMany>,
    pub pattern: Option<String>,
    pub all: Option<bool>,
    pub decision: Option<String>,
    pub priority: Option<i32>,
    pub scope: Option<String>,
    pub agent: Option<String>,
}

/// A string, or a list of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(one) => vec![one],
            OneOrMany::Many(many) => many,
        }
    }
}

/// `[mcp]`: how MCP servers are run.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMcp {
    pub start_timeout_secs: Option<u64>,
    pub call_timeout_secs: Option<u64>,
    /// Crucible's `[[mcp.servers]]`.
    pub servers: Option<Vec<RawUpstreamServer>>,
}

/// `[[mcp.servers]]`: Crucible's upstream MCP server.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstreamServer {
    pub name: Option<String>,
    pub prefix: Option<String>,
    pub transport: Option<RawUpstreamTransport>,
    pub allowed_tools: Option<Vec<String>>,
    pub blocked_tools: Option<Vec<String>>,
    pub auto_reconnect: Option<bool>,
    pub timeout_secs: Option<u64>,
}

/// Declares the table of an MCP server the agent may start as a child:
/// first the keys that say how (`type`, `command`, `args`, `env`,
/// `inherit_env`), which our `[mcp_servers.NAME]` and Crucible's
/// `[mcp.servers.transport]` spell alike, then the table's own keys. Each
/// table stays a struct of its own (serde's `flatten` would lose
/// `deny_unknown_fields`), so a misspelled key is still named with the
/// keys that table takes.
macro_rules! launching_table {
    (
        $(#[$doc:meta])*
        pub struct $name:ident {
            $($(#[$key_doc:meta])* pub $key:ident: $type:ty,)*
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            #[serde(rename = "type")]
            pub kind: Option<String>,
            pub command: Option<String>,
            pub args: Option<Vec<String>>,
            pub env: Option<BTreeMap<String, String>>,
            pub inherit_env: Option<bool>,
            $($(#[$key_doc])* pub $key: $type,)*
        }
    };
}

launching_table! {
    /// `[mcp.servers.transport]`: `type = "stdio"` (command, args, env) or
    /// `"sse"` (url, auth_header).
    pub struct RawUpstreamTransport {
        pub url: Option<String>,
        pub auth_header: Option<String>,
    }
}

/// `[shell_environment]`: what commands get of the agent's environment.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawShellEnvironment {
    pub inherit: Option<String>,
    pub ignore_default_excludes: Option<bool>,
    pub exclude: Option<Vec<String>>,
    pub include_only: Option<Vec<String>>,
    pub set: Option<BTreeMap<String, String>>,
}

/// `[subagents]`: how far delegation may go.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSubagents {
    pub max_depth: Option<u32>,
    pub max_per_turn: Option<u32>,
    pub token_budget: Option<u64>,
}

/// `[sandbox]`: how commands are confined.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSandbox {
    pub mode: Option<String>,
    pub network: Option<bool>,
    pub writable: Option<Vec<String>>,
}

/// `[sensitive_files]`: files whose reads ask first.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSensitiveFiles {
    pub add: Option<Vec<String>>,
    pub remove: Option<Vec<String>>,
}

launching_table! {
    /// `[mcp_servers.NAME]`: a server every session starts with.
    pub struct RawMcpServer {
        pub cwd: Option<String>,
        pub url: Option<String>,
        pub headers: Option<BTreeMap<String, String>>,
        pub enabled: Option<bool>,
        pub trust_read_only_hints: Option<bool>,
        /// Run it in the command sandbox (`[sandbox]`).
        pub sandbox: Option<bool>,
    }
}

/// `[modes.ID]`: a mode besides the built-in plan, act and auto.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMode {
    pub name: Option<String>,
    pub description: Option<String>,
    pub policy: Option<String>,
}
