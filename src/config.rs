//! Configuration in two stages: [`raw`] is the TOML as written (every key
//! optional, unknown keys kept so they can be reported), [`Config`] is the
//! validated form the rest of the agent uses. Validation errors name the file,
//! the key and the fix.

pub mod raw;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;

/// Where the default endpoint of each provider type lives when `endpoint` is left out.
pub const OPENAI_DEFAULT_ENDPOINT: &str = "https://api.openai.com/v1";
pub const ANTHROPIC_DEFAULT_ENDPOINT: &str = "https://api.anthropic.com";
pub const OLLAMA_DEFAULT_ENDPOINT: &str = "http://localhost:11434";
/// The model used when no config exists at all (the seed's local-first default).
pub const OLLAMA_DEFAULT_MODEL: &str = "llama3.2";
const DEFAULT_TIMEOUT_SECS: u64 = 120;
const DEFAULT_CONNECT_TIMEOUT_SECS: u64 = 10;
const DEFAULT_MAX_RETRIES: u32 = 3;
const DEFAULT_RETRY_BASE_DELAY_MS: u64 = 1000;
const DEFAULT_RETRY_MAX_DELAY_SECS: u64 = 60;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is not valid TOML or has a wrong type:\n{message}")]
    Parse { path: PathBuf, message: String },
    #[error("config file {path}: key `{key}`: {problem}. {fix}")]
    Invalid {
        path: PathBuf,
        key: String,
        problem: String,
        fix: String,
    },
}

/// A secret that never shows in `Debug` or `Display` output.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    OpenAi,
    Ollama,
    Anthropic,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Ollama => "ollama",
            ProviderKind::Anthropic => "anthropic",
        }
    }

    pub fn default_endpoint(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => OPENAI_DEFAULT_ENDPOINT,
            ProviderKind::Ollama => OLLAMA_DEFAULT_ENDPOINT,
            ProviderKind::Anthropic => ANTHROPIC_DEFAULT_ENDPOINT,
        }
    }

    /// The environment variable users expect to hold this type's key.
    pub fn conventional_key_variable(self) -> Option<&'static str> {
        match self {
            ProviderKind::OpenAi => Some("OPENAI_API_KEY"),
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderKind::Ollama => None,
        }
    }

    fn parse(value: &str) -> Option<Self> {
        match value {
            "openai" => Some(ProviderKind::OpenAi),
            "ollama" => Some(ProviderKind::Ollama),
            "anthropic" => Some(ProviderKind::Anthropic),
            _ => None,
        }
    }
}

/// Where an API key came from, so errors can tell the user which knob to turn
/// without ever showing the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// `api_key = "${VAR}"` or the type's conventional variable.
    EnvVar(String),
    /// A literal key in the config file.
    ConfigLiteral,
    /// `api_key_file = "..."`.
    File(PathBuf),
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::EnvVar(var) => write!(f, "environment variable {var}"),
            KeySource::ConfigLiteral => f.write_str("the `api_key` in the config file"),
            KeySource::File(path) => write!(f, "the key file {}", path.display()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ApiKey {
    pub secret: Secret,
    pub source: KeySource,
}

#[derive(Debug, Clone)]
pub struct ProviderConfig {
    pub name: String,
    pub kind: ProviderKind,
    /// Base URL without a trailing slash.
    pub endpoint: String,
    pub default_model: String,
    pub api_key: Option<ApiKey>,
    /// Set when the config names a variable that is not set, so the error at
    /// request time can say which variable to export.
    pub missing_key_variable: Option<String>,
    pub context_window: Option<u64>,
    /// Idle-stream timeout: no bytes for this long ends the call.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Cap on the answer's length, sent as `max_tokens` (Anthropic requires one).
    pub max_output_tokens: Option<u32>,
    pub retry: RetryPolicy,
}

/// How transient provider failures are retried (seed 004's `RetryPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts after the first; 0 turns retrying off.
    pub max_retries: u32,
    /// The first wait; each later one doubles, with jitter.
    pub base_delay: Duration,
    /// No single wait is longer, and a `Retry-After` beyond it is not waited for.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: DEFAULT_MAX_RETRIES,
            base_delay: Duration::from_millis(DEFAULT_RETRY_BASE_DELAY_MS),
            max_delay: Duration::from_secs(DEFAULT_RETRY_MAX_DELAY_SECS),
        }
    }
}

/// Model calls per turn when the config does not say.
pub const DEFAULT_MAX_TURN_REQUESTS: u32 = 25;

#[derive(Debug, Clone)]
pub struct Config {
    /// The file this came from, if any.
    pub source: Option<PathBuf>,
    pub default_provider: String,
    pub default_agent: Option<String>,
    /// `[chat] system_prompt`: the user's addition to every system prompt.
    pub system_prompt: Option<String>,
    /// `[context]`: answer reserve, compaction threshold.
    pub context: crate::context::ContextSettings,
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Model calls one prompt turn may make before it stops (`[agent]`).
    pub max_turn_requests: u32,
    /// The mode sessions start in (`[agent] default_mode`).
    pub default_mode: String,
    /// The built-in modes and those of `[modes.ID]`.
    pub modes: crate::modes::ModeRegistry,
    /// `[[permissions.rules]]`, in the order written; checked by scope,
    /// then priority, then this order (first match wins).
    pub permission_rules: Vec<crate::permissions::Rule>,
    /// `[mcp_servers.NAME]`: started by every session (enabled ones only).
    pub mcp_servers: Vec<crate::mcp::McpServerSpec>,
    pub mcp_options: crate::mcp::McpOptions,
    /// Non-fatal findings (ignored keys, a plaintext key) to log once at start.
    pub warnings: Vec<String>,
}

/// Overrides from the command line, applied after the file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub agent: Option<String>,
}

impl Config {
    /// The configuration used when no file exists: a local Ollama.
    pub fn builtin_default() -> Self {
        let provider = ProviderConfig {
            name: "ollama".into(),
            kind: ProviderKind::Ollama,
            endpoint: OLLAMA_DEFAULT_ENDPOINT.into(),
            default_model: OLLAMA_DEFAULT_MODEL.into(),
            api_key: None,
            missing_key_variable: None,
            context_window: None,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
            connect_timeout: Duration::from_secs(DEFAULT_CONNECT_TIMEOUT_SECS),
            max_output_tokens: None,
            retry: RetryPolicy::default(),
        };
        Self {
            source: None,
            default_provider: provider.name.clone(),
            default_agent: None,
            system_prompt: None,
            context: crate::context::ContextSettings::default(),
            providers: BTreeMap::from([(provider.name.clone(), provider)]),
            max_turn_requests: DEFAULT_MAX_TURN_REQUESTS,
            default_mode: crate::modes::DEFAULT_MODE.to_string(),
            modes: crate::modes::ModeRegistry::default(),
            permission_rules: Vec::new(),
            mcp_servers: Vec::new(),
            mcp_options: crate::mcp::McpOptions::default(),
            warnings: Vec::new(),
        }
    }

    /// Load from `path`. A missing file gives the built-in default only when
    /// `must_exist` is false (the path was not named explicitly by the user).
    pub fn load(path: &Path, must_exist: bool, overrides: &Overrides) -> Result<Self, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound && !must_exist => {
                let mut config = Self::builtin_default();
                config.apply_overrides(path, overrides)?;
                return Ok(config);
            }
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        Self::from_toml(&text, path, &|name| std::env::var(name).ok(), overrides)
    }

    /// Parse and validate config text. `env` resolves `${VAR}` references.
    pub fn from_toml(
        text: &str,
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
        overrides: &Overrides,
    ) -> Result<Self, ConfigError> {
        let raw: raw::RawConfig = toml::from_str(text).map_err(|err| ConfigError::Parse {
            path: path.to_path_buf(),
            message: err.to_string(),
        })?;
        let mut config = validate(raw, path, env)?;
        config.apply_overrides(path, overrides)?;
        Ok(config)
    }

    fn apply_overrides(&mut self, path: &Path, overrides: &Overrides) -> Result<(), ConfigError> {
        if let Some(provider) = &overrides.provider {
            if !self.providers.contains_key(provider) {
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    key: "--provider".into(),
                    problem: format!("no provider named `{provider}` is configured"),
                    fix: format!("Configured providers: {}.", self.provider_names()),
                });
            }
            self.default_provider = provider.clone();
        }
        if let Some(model) = &overrides.model
            && let Some(provider) = self.providers.get_mut(&self.default_provider)
        {
            provider.default_model = model.clone();
        }
        if let Some(agent) = &overrides.agent {
            self.default_agent = Some(agent.clone());
        }
        Ok(())
    }

    pub fn provider_names(&self) -> String {
        self.providers
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn default_provider(&self) -> Option<&ProviderConfig> {
        self.providers.get(&self.default_provider)
    }
}

fn invalid(
    path: &Path,
    key: impl Into<String>,
    problem: impl Into<String>,
    fix: impl Into<String>,
) -> ConfigError {
    ConfigError::Invalid {
        path: path.to_path_buf(),
        key: key.into(),
        problem: problem.into(),
        fix: fix.into(),
    }
}

fn validate(
    raw: raw::RawConfig,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let mut warnings = Vec::new();
    let chat = raw.chat.unwrap_or_default();
    let llm = raw.llm.unwrap_or_default();
    let permission_rules = validate_rules(raw.permissions.unwrap_or_default(), path)?;
    let mcp_servers = validate_mcp_servers(raw.mcp_servers.unwrap_or_default(), path, env)?;
    let raw_mcp = raw.mcp.unwrap_or_default();
    let defaults = crate::mcp::McpOptions::default();
    let mcp_options = crate::mcp::McpOptions {
        start_timeout: positive_secs(
            raw_mcp.start_timeout_secs,
            defaults.start_timeout.as_secs(),
            path,
            "mcp.start_timeout_secs",
        )?,
        call_timeout: positive_secs(
            raw_mcp.call_timeout_secs,
            defaults.call_timeout.as_secs(),
            path,
            "mcp.call_timeout_secs",
        )?,
    };
    let modes = validate_modes(raw.modes.unwrap_or_default(), path)?;
    let context = validate_context(raw.context.unwrap_or_default(), path)?;
    let agent = raw.agent.unwrap_or_default();
    let default_mode = match agent.default_mode {
        Some(mode) if modes.find(&mode).is_none() => {
            return Err(invalid(
                path,
                "agent.default_mode",
                format!("`{mode}` is not a mode"),
                format!(
                    "Use one of: {} (or define it in a [modes.{mode}] table).",
                    modes.ids()
                ),
            ));
        }
        Some(mode) => mode,
        None => crate::modes::DEFAULT_MODE.to_string(),
    };
    let max_turn_requests = match agent.max_turn_requests {
        Some(0) => {
            return Err(invalid(
                path,
                "agent.max_turn_requests",
                "is 0",
                "Allow at least one model call per turn (default 25), or leave it out.",
            ));
        }
        Some(limit) => limit,
        None => DEFAULT_MAX_TURN_REQUESTS,
    };
    // Keys the Crucible TUI reads from the same file: accepted silently.
    const TUI_CHAT_KEYS: [&str; 2] = ["default_backend", "default_acp_agent"];
    for key in chat
        .unknown
        .keys()
        .filter(|key| !TUI_CHAT_KEYS.contains(&key.as_str()))
    {
        warnings.push(format!(
            "{}: key `chat.{key}` is not used by crucible-agent (ignored)",
            path.display()
        ));
    }
    for key in llm.unknown.keys() {
        warnings.push(format!(
            "{}: key `llm.{key}` is not used by crucible-agent (ignored)",
            path.display()
        ));
    }

    let mut providers = BTreeMap::new();
    for (name, raw_provider) in llm.providers.unwrap_or_default() {
        let provider = validate_provider(&name, raw_provider, path, env, &mut warnings)?;
        providers.insert(name, provider);
    }

    let default_provider = match (chat.default_provider, llm.default) {
        (Some(name), _) => Some(("chat.default_provider", name)),
        (None, Some(name)) => Some(("llm.default", name)),
        (None, None) => None,
    };
    let default_provider = match default_provider {
        Some((key, name)) => {
            if !providers.contains_key(&name) {
                let configured = if providers.is_empty() {
                    "none are configured; add a [llm.providers.NAME] table".to_string()
                } else {
                    format!(
                        "configured providers: {}",
                        providers.keys().cloned().collect::<Vec<_>>().join(", ")
                    )
                };
                return Err(invalid(
                    path,
                    key,
                    format!("names provider `{name}`, which has no [llm.providers.{name}] table"),
                    format!("Set it to one of the configured providers ({configured})."),
                ));
            }
            name
        }
        None => match providers.keys().next() {
            Some(first) => first.clone(),
            None => {
                // No providers at all: the local Ollama default.
                let builtin = Config::builtin_default();
                providers = builtin.providers;
                builtin.default_provider
            }
        },
    };

    Ok(Config {
        source: Some(path.to_path_buf()),
        default_provider,
        default_agent: chat.default_agent,
        system_prompt: chat.system_prompt,
        context,
        providers,
        max_turn_requests,
        default_mode,
        modes,
        permission_rules,
        mcp_servers,
        mcp_options,
        warnings,
    })
}

fn validate_context(
    raw: raw::RawContext,
    path: &Path,
) -> Result<crate::context::ContextSettings, ConfigError> {
    let mut settings = crate::context::ContextSettings::default();
    if let Some(threshold) = raw.compaction_threshold {
        if !(threshold > 0.0 && threshold <= 1.0) {
            return Err(invalid(
                path,
                "context.compaction_threshold",
                format!("is {threshold}, outside (0, 1]"),
                "Give the share of the window at which to compact, e.g. 0.8 for 80 % (the default).",
            ));
        }
        settings.compaction_threshold = threshold;
    }
    if let Some(reserve) = raw.reserve_tokens {
        if reserve == 0 {
            return Err(invalid(
                path,
                "context.reserve_tokens",
                "is 0, which leaves no room for the answer",
                "Reserve some tokens for the answer (default 4096), or leave it out.",
            ));
        }
        settings.reserve_tokens = reserve;
    }
    if let Some(keep) = raw.keep_recent_turns {
        if keep == 0 {
            return Err(invalid(
                path,
                "context.keep_recent_turns",
                "is 0",
                "Keep at least the latest turn verbatim (default 2), or leave it out.",
            ));
        }
        settings.keep_recent_turns = keep;
    }
    Ok(settings)
}

fn validate_mcp_servers(
    raw: BTreeMap<String, raw::RawMcpServer>,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<crate::mcp::McpServerSpec>, ConfigError> {
    use crate::mcp::McpServerSpec;
    let mut specs = Vec::new();
    for (name, server) in raw {
        if server.enabled == Some(false) {
            continue;
        }
        let key = |field: &str| format!("mcp_servers.{name}.{field}");
        // Secrets (tokens in headers or env) stay out of the file: ${VAR}.
        let expand = |field: String, value: &str| {
            expand_env(value, env).map_err(|var| {
                invalid(
                    path,
                    key(&field),
                    format!("refers to ${{{var}}}, which is not set"),
                    format!("Export {var} in the environment the editor starts the agent from."),
                )
            })
        };
        let kind = server.kind.as_deref().unwrap_or(if server.url.is_some() {
            "http"
        } else {
            "stdio"
        });
        let spec = match kind {
            "stdio" => {
                let Some(command) = server.command else {
                    return Err(invalid(
                        path,
                        key("command"),
                        "is missing",
                        "Name the program that runs the server, e.g. command = \"npx\", or set url for an HTTP server.",
                    ));
                };
                let mut spec =
                    McpServerSpec::stdio(&name, command).with_args(server.args.unwrap_or_default());
                for (variable, value) in server.env.unwrap_or_default() {
                    let value = expand(format!("env.{variable}"), &value)?;
                    spec = spec.with_env(variable, value);
                }
                if let Some(cwd) = server.cwd {
                    spec = spec.with_cwd(cwd);
                }
                spec
            }
            "http" | "sse" => {
                let Some(url) = server.url else {
                    return Err(invalid(
                        path,
                        key("url"),
                        "is missing",
                        "Give the server's URL, e.g. url = \"http://127.0.0.1:3001/mcp\".",
                    ));
                };
                let mut spec = if kind == "http" {
                    McpServerSpec::http(&name, url)
                } else {
                    McpServerSpec::sse(&name, url)
                };
                for (header, value) in server.headers.unwrap_or_default() {
                    let value = expand(format!("headers.{header}"), &value)?;
                    spec = spec.with_header(header, value);
                }
                spec
            }
            other => {
                return Err(invalid(
                    path,
                    key("type"),
                    format!("`{other}` is not an MCP transport"),
                    "Use \"stdio\" (with command), \"http\" or \"sse\" (with url).",
                ));
            }
        };
        let spec = spec.with_trust_read_only_hints(server.trust_read_only_hints.unwrap_or(true));
        spec.validate().map_err(|err| {
            invalid(
                path,
                format!("mcp_servers.{name}"),
                err.to_string(),
                "Fix the server's settings.",
            )
        })?;
        specs.push(spec);
    }
    Ok(specs)
}

fn validate_modes(
    raw: BTreeMap<String, raw::RawMode>,
    path: &Path,
) -> Result<crate::modes::ModeRegistry, ConfigError> {
    use crate::modes::{Mode, ModeError, ModePolicy, ModeRegistry};
    let mut modes = Vec::new();
    for (id, mode) in raw {
        let key = |field: &str| format!("modes.{id}.{field}");
        let policy = match mode.policy.as_deref() {
            Some(text) => ModePolicy::parse(text).ok_or_else(|| {
                invalid(
                    path,
                    key("policy"),
                    format!("`{text}` is not a mode policy"),
                    "Use \"read_only\" (nothing changed or run), \"ask\" (ask before changes) or \"auto\" (no questions).",
                )
            })?,
            None => {
                return Err(invalid(
                    path,
                    key("policy"),
                    "is missing",
                    "Say what the mode allows: policy = \"read_only\", \"ask\" or \"auto\".",
                ));
            }
        };
        let name = match mode.name {
            Some(name) if name.trim().is_empty() => {
                return Err(invalid(
                    path,
                    key("name"),
                    "is empty",
                    "Give the name the editor shows, or leave it out to use the id.",
                ));
            }
            Some(name) => name,
            None => id.clone(),
        };
        let description = mode.description.unwrap_or_else(|| {
            format!("Tools run as in the built-in `{}` policy", policy.as_str())
        });
        modes.push(Mode::new(id, name, description, policy));
    }
    ModeRegistry::with_modes(modes).map_err(|err| {
        let (id, fix) = match &err {
            ModeError::Builtin(id) => (
                id.clone(),
                "Pick another id; plan, act and auto are built in.",
            ),
            ModeError::Duplicate(id) => (id.clone(), "Define each mode once."),
            ModeError::BadId(id) => (id.clone(), "Rename the table, e.g. [modes.review]."),
        };
        invalid(path, format!("modes.{id}"), err.to_string(), fix)
    })
}

fn validate_rules(
    raw: raw::RawPermissions,
    path: &Path,
) -> Result<Vec<crate::permissions::Rule>, ConfigError> {
    use crate::permissions::{Decision, Rule, RuleScope};
    raw.rules
        .into_iter()
        .enumerate()
        .map(|(n, rule)| {
            let key = |field: &str| format!("permissions.rules[{n}].{field}");
            let decision = match rule.decision.as_deref() {
                Some("allow") => Decision::Allow,
                Some("deny") => Decision::Deny,
                Some("ask") => Decision::Ask,
                Some(other) => {
                    return Err(invalid(
                        path,
                        key("decision"),
                        format!("`{other}` is not a decision"),
                        "Use \"allow\", \"deny\" or \"ask\".",
                    ));
                }
                None => {
                    return Err(invalid(
                        path,
                        key("decision"),
                        "is missing",
                        "Say what the rule decides: decision = \"allow\", \"deny\" or \"ask\".",
                    ));
                }
            };
            let kind = match rule.kind.as_deref() {
                None => None,
                Some(text) => Some(crate::events::ToolKind::parse(text).ok_or_else(|| {
                    invalid(
                        path,
                        key("kind"),
                        format!("`{text}` is not a tool kind"),
                        "Use one of read, edit, delete, move, search, execute, fetch, think, other.",
                    )
                })?),
            };
            let pattern = match rule.pattern.as_deref() {
                None => None,
                Some(text) => Some(regex::Regex::new(text).map_err(|err| {
                    invalid(
                        path,
                        key("pattern"),
                        format!("is not a valid regular expression: {err}"),
                        "Fix the expression (Rust regex syntax), or use command_prefix.",
                    )
                })?),
            };
            let command_prefixes = rule
                .command_prefix
                .map(raw::OneOrMany::into_vec)
                .unwrap_or_default();
            if command_prefixes.iter().any(|prefix| prefix.trim().is_empty()) {
                return Err(invalid(
                    path,
                    key("command_prefix"),
                    "contains an empty prefix, which would match every command",
                    "Write the start of the command, e.g. \"cargo \", or use all = true.",
                ));
            }
            let tool = rule.tool.filter(|tool| tool != "*");
            if rule.all == Some(true)
                && (tool.is_some()
                    || kind.is_some()
                    || !command_prefixes.is_empty()
                    || pattern.is_some())
            {
                return Err(invalid(
                    path,
                    key("all"),
                    "is true beside other matchers",
                    "all = true matches every call: remove it or the other matchers (tool, kind, command_prefix, pattern).",
                ));
            }
            let scope = match (rule.scope.as_deref(), rule.agent) {
                (None | Some("global"), None) => RuleScope::Global,
                (Some("user"), None) => RuleScope::User,
                (None | Some("agent"), Some(agent)) if !agent.trim().is_empty() => {
                    RuleScope::Agent(agent)
                }
                (Some("agent"), _) | (None, Some(_)) => {
                    return Err(invalid(
                        path,
                        key("agent"),
                        "is missing or empty for an agent-scoped rule",
                        "Name the agent card the rule is for, e.g. agent = \"reviewer\".",
                    ));
                }
                (Some(scope @ ("global" | "user")), Some(_)) => {
                    return Err(invalid(
                        path,
                        key("agent"),
                        format!("is set on a rule with scope \"{scope}\""),
                        "Remove `agent`, or set scope = \"agent\".",
                    ));
                }
                (Some(other), _) => {
                    return Err(invalid(
                        path,
                        key("scope"),
                        format!("`{other}` is not a rule scope"),
                        "Use \"global\" (the default), \"user\" (checked before everything else) or \"agent\" (with agent = \"NAME\"). Session rules come from \"always\" answers.",
                    ));
                }
            };
            Ok(Rule {
                scope,
                priority: rule.priority.unwrap_or(0),
                tool,
                kind,
                command_prefixes,
                pattern,
                decision,
            })
        })
        .collect()
}

fn validate_provider(
    name: &str,
    raw: raw::RawProvider,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Result<ProviderConfig, ConfigError> {
    let key = |field: &str| format!("llm.providers.{name}.{field}");
    if let Some(unknown) = raw.unknown.keys().next() {
        return Err(invalid(
            path,
            key(unknown),
            "is not a provider setting",
            "Known settings: type, endpoint, default_model, api_key, api_key_file, context_window, max_output_tokens, timeout_secs, connect_timeout_secs, max_retries, retry_base_delay_ms, retry_max_delay_secs. Remove or rename it.",
        ));
    }
    if name.is_empty() {
        return Err(invalid(
            path,
            "llm.providers",
            "a provider has an empty name",
            "Give it a name, as in [llm.providers.local].",
        ));
    }
    let type_text = raw.kind.as_deref().unwrap_or("ollama");
    let kind = ProviderKind::parse(type_text).ok_or_else(|| {
        invalid(
            path,
            key("type"),
            format!("`{type_text}` is not a provider type"),
            "Use one of \"openai\" (any OpenAI-compatible server), \"ollama\" or \"anthropic\".",
        )
    })?;

    let endpoint = match raw.endpoint {
        Some(endpoint) => {
            let endpoint = expand_env(&endpoint, env).map_err(|var| {
                invalid(
                    path,
                    key("endpoint"),
                    format!("refers to ${{{var}}}, which is not set"),
                    format!("Export {var} or write the URL directly."),
                )
            })?;
            if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                return Err(invalid(
                    path,
                    key("endpoint"),
                    format!("`{endpoint}` is not an http:// or https:// URL"),
                    format!(
                        "Write the full base URL, for example \"{}\".",
                        kind.default_endpoint()
                    ),
                ));
            }
            let endpoint = endpoint.trim_end_matches('/');
            // The native APIs live under the host root; a copied `/v1` or
            // `/api` base would double up (`/v1/v1/messages`).
            let native_root = match kind {
                ProviderKind::Anthropic => endpoint.strip_suffix("/v1"),
                ProviderKind::Ollama => endpoint
                    .strip_suffix("/v1")
                    .or_else(|| endpoint.strip_suffix("/api")),
                ProviderKind::OpenAi => None,
            };
            match native_root {
                Some(root) => {
                    warnings.push(format!(
                        "{}: key `{}` ends in a path the {} API adds itself; using {root}",
                        path.display(),
                        key("endpoint"),
                        kind.as_str()
                    ));
                    root.to_string()
                }
                None => endpoint.to_string(),
            }
        }
        None => kind.default_endpoint().to_string(),
    };

    let default_model = match raw.default_model {
        Some(model) if model.trim().is_empty() => {
            return Err(invalid(
                path,
                key("default_model"),
                "is empty",
                "Name the model to use, e.g. \"llama3.2\" or \"gpt-4o-mini\".",
            ));
        }
        Some(model) => model,
        None => match kind {
            ProviderKind::Ollama => OLLAMA_DEFAULT_MODEL.to_string(),
            _ => {
                return Err(invalid(
                    path,
                    key("default_model"),
                    "is missing",
                    "Name the model this provider should use, e.g. default_model = \"gpt-4o-mini\".",
                ));
            }
        },
    };

    let mut missing_key_variable = None;
    let api_key = match (raw.api_key, raw.api_key_file) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                path,
                key("api_key_file"),
                "is set together with api_key",
                "Keep only one of api_key and api_key_file.",
            ));
        }
        (Some(value), None) => match env_reference(&value) {
            Some(var) => match env(var) {
                Some(secret) if !secret.is_empty() => Some(ApiKey {
                    secret: Secret::new(secret),
                    source: KeySource::EnvVar(var.to_string()),
                }),
                _ => {
                    missing_key_variable = Some(var.to_string());
                    None
                }
            },
            None => {
                warnings.push(format!(
                    "{}: key `{}` holds a plaintext API key; prefer api_key = \"${{VARIABLE}}\" or api_key_file",
                    path.display(),
                    key("api_key")
                ));
                Some(ApiKey {
                    secret: Secret::new(value),
                    source: KeySource::ConfigLiteral,
                })
            }
        },
        (None, Some(file)) => {
            let file_path = match (file.strip_prefix("~/"), env("HOME")) {
                (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
                _ => PathBuf::from(&file),
            };
            let file_path = if file_path.is_relative() {
                path.parent().unwrap_or(Path::new(".")).join(file_path)
            } else {
                file_path
            };
            let secret = std::fs::read_to_string(&file_path).map_err(|err| {
                invalid(
                    path,
                    key("api_key_file"),
                    format!("cannot read {}: {err}", file_path.display()),
                    "Point it at a readable file that holds only the key.",
                )
            })?;
            Some(ApiKey {
                secret: Secret::new(secret.trim()),
                source: KeySource::File(file_path),
            })
        }
        (None, None) => kind
            .conventional_key_variable()
            .and_then(|var| match env(var) {
                Some(secret) if !secret.is_empty() => Some(ApiKey {
                    secret: Secret::new(secret),
                    source: KeySource::EnvVar(var.to_string()),
                }),
                _ => None,
            }),
    };

    let context_window = match raw.context_window {
        Some(0) => {
            return Err(invalid(
                path,
                key("context_window"),
                "is 0",
                "Give the model's context window in tokens (e.g. 8192), or leave it out.",
            ));
        }
        other => other,
    };
    let timeout = positive_secs(
        raw.timeout_secs,
        DEFAULT_TIMEOUT_SECS,
        path,
        &key("timeout_secs"),
    )?;
    let connect_timeout = positive_secs(
        raw.connect_timeout_secs,
        DEFAULT_CONNECT_TIMEOUT_SECS,
        path,
        &key("connect_timeout_secs"),
    )?;

    let max_output_tokens = match raw.max_output_tokens {
        Some(0) => {
            return Err(invalid(
                path,
                key("max_output_tokens"),
                "is 0",
                "Give the longest answer in tokens (e.g. 8192), or leave it out.",
            ));
        }
        other => other,
    };
    let base_delay = Duration::from_millis(
        raw.retry_base_delay_ms
            .unwrap_or(DEFAULT_RETRY_BASE_DELAY_MS),
    );
    let max_delay = positive_secs(
        raw.retry_max_delay_secs,
        DEFAULT_RETRY_MAX_DELAY_SECS,
        path,
        &key("retry_max_delay_secs"),
    )?;
    if base_delay > max_delay {
        return Err(invalid(
            path,
            key("retry_base_delay_ms"),
            format!(
                "is longer than retry_max_delay_secs ({} s)",
                max_delay.as_secs()
            ),
            "Make the first wait shorter than the longest one.",
        ));
    }
    let retry = RetryPolicy {
        max_retries: raw.max_retries.unwrap_or(DEFAULT_MAX_RETRIES),
        base_delay,
        max_delay,
    };

    Ok(ProviderConfig {
        name: name.to_string(),
        kind,
        endpoint,
        default_model,
        api_key,
        missing_key_variable,
        context_window,
        timeout,
        connect_timeout,
        max_output_tokens,
        retry,
    })
}

fn positive_secs(
    value: Option<u64>,
    default: u64,
    path: &Path,
    key: &str,
) -> Result<Duration, ConfigError> {
    match value {
        Some(0) => Err(invalid(
            path,
            key,
            "is 0",
            "Use a number of seconds above 0, or leave it out.",
        )),
        Some(secs) => Ok(Duration::from_secs(secs)),
        None => Ok(Duration::from_secs(default)),
    }
}

/// `"${VAR}"` → `Some("VAR")`.
fn env_reference(value: &str) -> Option<&str> {
    value
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .filter(|var| !var.is_empty())
}

/// Expand every `${VAR}` in `value`; the error is the first unset variable.
fn expand_env(value: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let var = &after[..end];
        out.push_str(&env(var).ok_or_else(|| var.to_string())?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let env = move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        Config::from_toml(
            text,
            Path::new("/cfg/config.toml"),
            &env,
            &Overrides::default(),
        )
    }

    const SEED_EXAMPLE: &str = r#"
[chat]
default_backend = "internal"    # "internal" or "acp"
default_provider = "local"      # Which llm.providers.* to use
default_agent = "assistant"     # Agent card name (optional)
default_acp_agent = "claude"    # For ACP backend

[llm]
default = "local"               # Default provider name

[llm.providers.local]
type = "ollama"
endpoint = "http://localhost:11434"
default_model = "llama3.2"
timeout_secs = 120

[llm.providers.cloud]
type = "ollama"
endpoint = "https://llama.krohnos.io"
default_model = "qwen3-4b"

[llm.providers.openai-work]
type = "openai"
api_key = "${OPENAI_WORK_KEY}"
default_model = "gpt-4o"

[llm.providers.openai-personal]
type = "openai"
api_key = "${OPENAI_KEY}"
default_model = "gpt-4o-mini"
"#;

    #[test]
    fn the_seed_example_loads_as_written() {
        let config = load(SEED_EXAMPLE, &[("OPENAI_WORK_KEY", "sk-work")]).unwrap();
        assert_eq!(config.default_provider, "local");
        assert_eq!(config.default_agent.as_deref(), Some("assistant"));
        assert_eq!(config.providers.len(), 4);
        let work = &config.providers["openai-work"];
        assert_eq!(work.kind, ProviderKind::OpenAi);
        assert_eq!(work.endpoint, OPENAI_DEFAULT_ENDPOINT);
        assert_eq!(work.api_key.as_ref().unwrap().secret.expose(), "sk-work");
        let personal = &config.providers["openai-personal"];
        assert!(personal.api_key.is_none());
        assert_eq!(personal.missing_key_variable.as_deref(), Some("OPENAI_KEY"));
        assert_eq!(config.providers["local"].timeout, Duration::from_secs(120));
        // TUI-only keys are accepted silently.
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    }

    #[test]
    fn issue_example_with_env_key_and_window() {
        let text = r#"
[chat]
default_provider = "local"
[llm.providers.local]
type = "openai"
endpoint = "http://127.0.0.1:8080/v1/"
default_model = "smollm2-135m"
api_key = "${OPENAI_API_KEY}"
context_window = 8192
"#;
        let config = load(text, &[("OPENAI_API_KEY", "sk-test")]).unwrap();
        let local = config.default_provider().unwrap();
        assert_eq!(local.endpoint, "http://127.0.0.1:8080/v1");
        assert_eq!(local.context_window, Some(8192));
        assert_eq!(
            local.api_key.as_ref().unwrap().source,
            KeySource::EnvVar("OPENAI_API_KEY".into())
        );
    }

    #[test]
    fn errors_name_file_key_and_fix() {
        let cases: &[(&str, &str)] = &[
            (
                "[llm.providers.x]\ntype = \"gemini\"\ndefault_model = \"m\"",
                "llm.providers.x.type",
            ),
            (
                "[llm.providers.x]\ntype = \"openai\"",
                "llm.providers.x.default_model",
            ),
            (
                "[llm.providers.x]\ntype = \"openai\"\ndefault_model = \"m\"\nendpont = \"http://a\"",
                "llm.providers.x.endpont",
            ),
            (
                "[chat]\ndefault_provider = \"nope\"\n[llm.providers.x]\ndefault_model = \"m\"",
                "chat.default_provider",
            ),
            (
                "[llm.providers.x]\nendpoint = \"localhost:11434\"",
                "llm.providers.x.endpoint",
            ),
            (
                "[llm.providers.x]\ncontext_window = 0",
                "llm.providers.x.context_window",
            ),
        ];
        for (text, key) in cases {
            let err = load(text, &[]).unwrap_err().to_string();
            assert!(err.contains("/cfg/config.toml"), "{err}");
            assert!(err.contains(key), "expected {key} in: {err}");
        }
    }

    #[test]
    fn wrong_types_are_reported_with_the_key() {
        let err = load("[llm.providers.x]\ntimeout_secs = \"soon\"", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("/cfg/config.toml"), "{err}");
        assert!(err.contains("timeout_secs"), "{err}");
    }

    #[test]
    fn no_providers_means_local_ollama() {
        let config = load("[chat]\ndefault_agent = \"coder\"", &[]).unwrap();
        let provider = config.default_provider().unwrap();
        assert_eq!(provider.kind, ProviderKind::Ollama);
        assert_eq!(provider.endpoint, OLLAMA_DEFAULT_ENDPOINT);
    }

    #[test]
    fn missing_file_is_the_builtin_default_unless_named() {
        let missing = Path::new("/definitely/not/here/config.toml");
        let config = Config::load(missing, false, &Overrides::default()).unwrap();
        assert_eq!(
            config.default_provider().unwrap().kind,
            ProviderKind::Ollama
        );
        assert!(Config::load(missing, true, &Overrides::default()).is_err());
    }

    #[test]
    fn overrides_pick_provider_and_model() {
        let overrides = Overrides {
            provider: Some("cloud".into()),
            model: Some("big".into()),
            agent: None,
        };
        let config =
            Config::from_toml(SEED_EXAMPLE, Path::new("c.toml"), &|_| None, &overrides).unwrap();
        assert_eq!(config.default_provider, "cloud");
        assert_eq!(config.default_provider().unwrap().default_model, "big");
        let bad = Overrides {
            provider: Some("nope".into()),
            ..Overrides::default()
        };
        let err = Config::from_toml(SEED_EXAMPLE, Path::new("c.toml"), &|_| None, &bad)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--provider") && err.contains("openai-work"),
            "{err}"
        );
    }

    #[test]
    fn conventional_variable_is_used_when_no_key_is_configured() {
        let text = "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"gpt-4o\"";
        let config = load(text, &[("OPENAI_API_KEY", "sk-env")]).unwrap();
        let key = config.providers["o"].api_key.as_ref().unwrap();
        assert_eq!(key.source, KeySource::EnvVar("OPENAI_API_KEY".into()));
    }

    #[test]
    fn secrets_do_not_leak_through_debug() {
        let text = "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\napi_key = \"sk-very-secret\"";
        let config = load(text, &[]).unwrap();
        let debug = format!("{config:?}");
        assert!(!debug.contains("sk-very-secret"), "{debug}");
        assert!(config.warnings.iter().any(|w| w.contains("plaintext")));
        assert!(
            config
                .warnings
                .iter()
                .all(|w| !w.contains("sk-very-secret"))
        );
    }

    #[test]
    fn api_key_file_is_read_trimmed_relative_to_home_or_the_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("key"), "sk-from-file\n").unwrap();
        let home = dir.path().display().to_string();
        let text =
            "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\napi_key_file = \"~/key\"";
        let config = load(text, &[("HOME", &home)]).unwrap();
        let key = config.providers["o"].api_key.as_ref().unwrap();
        assert_eq!(key.secret.expose(), "sk-from-file");
        let text = "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\napi_key_file = \"missing\"";
        let err = load(text, &[]).unwrap_err().to_string();
        assert!(err.contains("api_key_file"), "{err}");
        // A relative path is read beside the config file, wherever the agent runs.
        let config_path = dir.path().join("config.toml");
        let text =
            "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\napi_key_file = \"key\"";
        let config =
            Config::from_toml(text, &config_path, &|_| None, &Overrides::default()).unwrap();
        let key = config.providers["o"].api_key.as_ref().unwrap();
        assert_eq!(key.secret.expose(), "sk-from-file");
        assert_eq!(key.source, KeySource::File(dir.path().join("key")));
    }

    #[test]
    fn native_endpoints_drop_a_copied_api_suffix() {
        let text = "[llm.providers.a]\ntype = \"anthropic\"\nendpoint = \"https://api.anthropic.com/v1/\"\ndefault_model = \"claude-sonnet-4-5\"\n[llm.providers.o]\ntype = \"ollama\"\nendpoint = \"http://box:11434/api\"\n[llm.providers.x]\ntype = \"openai\"\nendpoint = \"http://box:8080/v1\"\ndefault_model = \"m\"";
        let config = load(text, &[]).unwrap();
        assert_eq!(config.providers["a"].endpoint, "https://api.anthropic.com");
        assert_eq!(config.providers["o"].endpoint, "http://box:11434");
        assert_eq!(config.providers["x"].endpoint, "http://box:8080/v1");
        assert_eq!(config.warnings.len(), 2, "{:?}", config.warnings);
    }

    #[test]
    fn permission_rules_are_read_in_order_and_checked() {
        let text = "[[permissions.rules]]\ntool = \"shell\"\ncommand_prefix = \"cargo \"\ndecision = \"allow\"\n[[permissions.rules]]\nkind = \"execute\"\npattern = \"rm\\\\s+-rf\"\ndecision = \"deny\"\n[[permissions.rules]]\ntool = \"*\"\ndecision = \"ask\"";
        let config = load(text, &[]).unwrap();
        let rules = &config.permission_rules;
        assert_eq!(rules.len(), 3);
        assert_eq!(rules[0].tool.as_deref(), Some("shell"));
        assert_eq!(rules[0].decision, crate::permissions::Decision::Allow);
        assert_eq!(rules[1].kind, Some(crate::events::ToolKind::Execute));
        assert!(rules[1].pattern.as_ref().unwrap().is_match("rm  -rf /"));
        assert_eq!(rules[2].tool, None, "\"*\" matches every tool");
        for (rule, key) in [
            ("tool = \"shell\"", "decision"),
            ("decision = \"maybe\"", "decision"),
            ("kind = \"writes\"\ndecision = \"deny\"", "kind"),
            ("pattern = \"(\"\ndecision = \"deny\"", "pattern"),
        ] {
            let err = load(&format!("[[permissions.rules]]\n{rule}"), &[])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("permissions.rules[0].{key}")),
                "{err}"
            );
        }
    }

    #[test]
    fn config_modes_join_the_builtins_and_can_be_the_default() {
        let text = "[agent]\ndefault_mode = \"review\"\n[modes.review]\nname = \"Review\"\ndescription = \"Look, do not touch\"\npolicy = \"read_only\"\n[modes.yolo]\npolicy = \"auto\"";
        let config = load(text, &[]).unwrap();
        assert_eq!(config.default_mode, "review");
        assert_eq!(config.modes.ids(), "plan, act, auto, review, yolo");
        let review = config.modes.find("review").unwrap();
        assert_eq!(review.name, "Review");
        assert_eq!(review.policy, crate::modes::ModePolicy::ReadOnly);
        assert_eq!(config.modes.find("yolo").unwrap().name, "yolo");
        for (text, key) in [
            ("[modes.r]\nname = \"R\"", "modes.r.policy"),
            ("[modes.r]\npolicy = \"sometimes\"", "modes.r.policy"),
            ("[modes.plan]\npolicy = \"auto\"", "modes.plan"),
            ("[modes.\"Big Mode\"]\npolicy = \"auto\"", "modes.Big Mode"),
            ("[agent]\ndefault_mode = \"review\"", "agent.default_mode"),
        ] {
            let err = load(text, &[]).unwrap_err().to_string();
            assert!(err.contains(&format!("key `{key}`")), "{err}");
            assert!(err.contains("/cfg/config.toml"), "{err}");
        }
        // Unknown keys are named by the parser.
        let err = load("[modes.r]\npolicy = \"ask\"\ncolour = \"red\"", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("colour"), "{err}");
    }

    #[test]
    fn permission_rules_have_scopes_priorities_and_prefix_lists() {
        use crate::permissions::RuleScope;
        let text = "[[permissions.rules]]\ncommand_prefix = [\"cargo \", \"make\"]\npriority = 5\ndecision = \"allow\"\n[[permissions.rules]]\nscope = \"user\"\nall = true\ndecision = \"ask\"\n[[permissions.rules]]\nagent = \"reviewer\"\nkind = \"edit\"\ndecision = \"deny\"";
        let rules = load(text, &[]).unwrap().permission_rules;
        assert_eq!(rules[0].scope, RuleScope::Global);
        assert_eq!(rules[0].priority, 5);
        assert_eq!(rules[0].command_prefixes, ["cargo ", "make"]);
        assert_eq!(rules[1].scope, RuleScope::User);
        assert!(rules[1].tool.is_none() && rules[1].kind.is_none());
        assert_eq!(rules[2].scope, RuleScope::Agent("reviewer".into()));
        for (rule, key) in [
            ("scope = \"team\"\ndecision = \"ask\"", "scope"),
            ("scope = \"agent\"\ndecision = \"ask\"", "agent"),
            (
                "scope = \"user\"\nagent = \"x\"\ndecision = \"ask\"",
                "agent",
            ),
            ("all = true\ntool = \"shell\"\ndecision = \"ask\"", "all"),
            (
                "command_prefix = \"\"\ndecision = \"ask\"",
                "command_prefix",
            ),
        ] {
            let err = load(&format!("[[permissions.rules]]\n{rule}"), &[])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("permissions.rules[0].{key}")),
                "{err}"
            );
        }
        let err = load(
            "[[permissions.rules]]\npriority = \"high\"\ndecision = \"ask\"",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("priority"), "{err}");
    }

    #[test]
    fn mcp_servers_can_distrust_read_only_hints() {
        let text = "[mcp_servers.a]\ncommand = \"x\"\n[mcp_servers.b]\ncommand = \"y\"\ntrust_read_only_hints = false";
        let servers = load(text, &[]).unwrap().mcp_servers;
        assert!(servers[0].trust_read_only_hints);
        assert!(!servers[1].trust_read_only_hints);
    }

    #[test]
    fn mcp_servers_are_read_with_secrets_from_the_environment() {
        let text = "[mcp_servers.local]\ncommand = \"npx\"\nargs = [\"-y\", \"srv\"]\nenv = { TOKEN = \"${MY_TOKEN}\" }\n[mcp_servers.remote]\ntype = \"http\"\nurl = \"http://127.0.0.1:3001/mcp\"\nheaders = { Authorization = \"Bearer ${MY_TOKEN}\" }\n[mcp_servers.off]\ncommand = \"x\"\nenabled = false\n[mcp]\ncall_timeout_secs = 5";
        let config = load(text, &[("MY_TOKEN", "t0k")]).unwrap();
        let names: Vec<&str> = config.mcp_servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["local", "remote"]);
        assert_eq!(config.mcp_options.call_timeout, Duration::from_secs(5));
        let crate::mcp::McpTransport::Http { headers, .. } = &config.mcp_servers[1].transport
        else {
            panic!("{:?}", config.mcp_servers[1])
        };
        assert_eq!(headers[0], ("Authorization".into(), "Bearer t0k".into()));
        // Tokens never show in Debug output (and so never in logs).
        let debug = format!("{:?}", config.mcp_servers);
        assert!(!debug.contains("t0k"), "{debug}");
        assert!(debug.contains("Authorization=***"), "{debug}");
        let err = load(text, &[]).unwrap_err().to_string();
        assert!(err.contains("MY_TOKEN"), "{err}");
        let err = load("[mcp_servers.x]\ntype = \"http\"", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("mcp_servers.x.url"), "{err}");
        let err = load("[mcp_servers.x]\nargs = []", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("mcp_servers.x.command"), "{err}");
    }

    #[test]
    fn context_settings_are_read_and_checked() {
        let config = load(
            "[chat]\nsystem_prompt = \"Answer in French.\"\n[context]\ncompaction_threshold = 0.5\nreserve_tokens = 1000\nkeep_recent_turns = 3",
            &[],
        )
        .unwrap();
        assert_eq!(config.system_prompt.as_deref(), Some("Answer in French."));
        assert_eq!(config.context.compaction_threshold, 0.5);
        assert_eq!(config.context.reserve_tokens, 1000);
        assert_eq!(config.context.keep_recent_turns, 3);
        let defaults = load("", &[]).unwrap().context;
        assert_eq!(defaults, crate::context::ContextSettings::default());
        for (text, key) in [
            (
                "[context]\ncompaction_threshold = 1.5",
                "context.compaction_threshold",
            ),
            (
                "[context]\ncompaction_threshold = 0.0",
                "context.compaction_threshold",
            ),
            ("[context]\nreserve_tokens = 0", "context.reserve_tokens"),
            (
                "[context]\nkeep_recent_turns = 0",
                "context.keep_recent_turns",
            ),
            ("[context]\nthreshold = 0.5", "threshold"),
        ] {
            let err = load(text, &[]).unwrap_err().to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
    }

    #[test]
    fn retry_settings_are_read_and_checked() {
        let text = "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\nmax_retries = 0\nretry_base_delay_ms = 50\nretry_max_delay_secs = 2\nmax_output_tokens = 100";
        let provider = &load(text, &[]).unwrap().providers["o"];
        assert_eq!(provider.retry.max_retries, 0);
        assert_eq!(provider.retry.base_delay, Duration::from_millis(50));
        assert_eq!(provider.retry.max_delay, Duration::from_secs(2));
        assert_eq!(provider.max_output_tokens, Some(100));
        let text = "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\nretry_base_delay_ms = 5000\nretry_max_delay_secs = 2";
        let err = load(text, &[]).unwrap_err().to_string();
        assert!(err.contains("retry_base_delay_ms"), "{err}");
        let text = "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\nmax_retries = -1";
        let err = load(text, &[]).unwrap_err().to_string();
        assert!(err.contains("max_retries"), "{err}");
    }

    #[test]
    fn the_sample_config_loads() {
        let text = include_str!("../config.sample.toml");
        let config = load(text, &[]).unwrap();
        let local = config.default_provider().unwrap();
        assert_eq!(local.name, "local");
        assert_eq!(local.default_model, "smollm2-135m");
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    }

    #[test]
    fn unknown_chat_keys_are_warnings_not_errors() {
        let config = load(
            "[chat]
default_providr = \"x\"",
            &[],
        )
        .unwrap();
        assert!(
            config
                .warnings
                .iter()
                .any(|w| w.contains("chat.default_providr"))
        );
    }

    #[test]
    fn expand_env_replaces_every_reference() {
        let env = |name: &str| (name == "HOST").then(|| "example.org".to_string());
        assert_eq!(
            expand_env("https://${HOST}/v1", &env).unwrap(),
            "https://example.org/v1"
        );
        assert_eq!(expand_env("http://${NOPE}", &env).unwrap_err(), "NOPE");
    }
}
