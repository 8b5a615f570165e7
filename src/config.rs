//! Configuration in two stages: [`raw`] is the TOML as written (every key
//! optional, unknown keys kept so they can be reported), [`Config`] is the
//! validated form the rest of the agent uses. Each domain validates its own
//! tables where it owns their meaning (providers: `providers::settings`);
//! this module composes them. Validation errors name the file, the key and
//! the fix.
//!
//! The file is the one the Crucible TUI reads, written in any of three
//! shapes: the seed architecture's, the design document's (`[llm.TYPE]`,
//! see [`llm`]) and Crucible's own (`{env:VAR}`, `[[mcp.servers]]`,
//! `[include]`, see [`references`] and [`upstream`]). Sections only
//! Crucible uses are read past; [`report`] says which keys were used,
//! ignored, and which won where shapes overlap.

mod agent;
mod agent_cards;
mod context;
#[cfg(test)]
mod crucible_examples;
mod error;
mod llm;
mod mcp;
mod modes;
mod overrides;
mod permissions;
mod prices;
pub mod raw;
mod references;
mod report;
mod sandbox;
pub mod serve;
mod server_table;
mod shell_environment;
mod subagents;
mod unstable;
mod upstream;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use error::ConfigError;
pub use overrides::Overrides;
pub use permissions::load_rules_file;
pub use references::secrets_file;
pub use report::{ConfigReport, Ignored};

use crate::agents::{CardSettings, SubagentSettings};
use crate::context::ContextSettings;
use crate::mcp::{McpOptions, McpServerSpec};
use crate::modes::ModeRegistry;
use crate::permissions::Rule;
use crate::permissions::patterns::PatternLists;
use crate::providers::Reasoning;
use crate::providers::settings::{ProviderSettings, Surroundings};
use crate::tools::environment::EnvironmentPolicy;
use crate::tools::repeats::LoopGuardSettings;
use crate::tools::sandbox::SandboxSettings;
use crate::tools::sensitive::SensitiveFiles;
use error::invalid;
pub use unstable::{ProtocolV2, Unstable};

/// Model calls per turn when the config does not say.
pub const DEFAULT_MAX_TURN_REQUESTS: u32 = 25;

/// Silence before the first token after which the client hears the turn is
/// alive: well under the 5 minutes some clients wait for a line.
pub const DEFAULT_FIRST_TOKEN_NOTICE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct Config {
    /// The file this came from, if any.
    pub source: Option<PathBuf>,
    pub default_provider: String,
    pub default_agent: Option<String>,
    /// `[chat] system_prompt`: the user's addition to every system prompt.
    pub system_prompt: Option<String>,
    /// `[context]`: answer reserve, compaction threshold.
    pub context: ContextSettings,
    /// `[context] rules_files`: the project's rules files.
    pub rules_files: crate::prompt::RulesFiles,
    pub providers: BTreeMap<String, ProviderSettings>,
    /// Model calls one prompt turn may make before it stops (`[agent]`).
    pub max_turn_requests: u32,
    /// `[agent] repeated_call_limit`: when a repeated call stops a turn.
    pub loop_guard: LoopGuardSettings,
    /// `[agent] first_token_notice_secs`: None when turned off (0).
    pub first_token_notice: Option<Duration>,
    /// `[agent] thought_level`: the reasoning effort sessions start with.
    pub thought_level: Reasoning,
    /// `[agent] max_turn_tokens`, `max_session_tokens`, `max_session_cost`.
    pub budgets: crate::context::spend::Budgets,
    /// `[prices.MODEL]`: token prices by model.
    pub prices: crate::providers::pricing::PriceTable,
    /// `[acp] unstable`: the unstable ACP features turned on.
    pub unstable: Unstable,
    /// The mode sessions start in (`[agent] default_mode`).
    pub default_mode: String,
    /// The built-in modes and those of `[modes.ID]`.
    pub modes: ModeRegistry,
    /// `[[permissions.rules]]`, in the order written; checked by scope,
    /// then priority, then this order (first match wins).
    pub permission_rules: Vec<Rule>,
    /// Crucible's `[permissions]` lists, or those of the ACP profile the
    /// agent runs under (`--profile`), which replace them.
    pub permission_lists: PatternLists,
    /// `[acp.agents.NAME]` profiles, with their own lists if they have any.
    pub permission_profiles: BTreeMap<String, Option<PatternLists>>,
    /// `[permissions] reads`: the tools that run as reads (by default the
    /// kiln server's reads).
    pub declared_reads: crate::permissions::DeclaredReads,
    /// The kiln and `[llm.models]`, for agent cards.
    pub agent_cards: CardSettings,
    /// `[mcp_servers.NAME]`: started by every session (enabled ones only).
    pub mcp_servers: Vec<McpServerSpec>,
    pub mcp_options: McpOptions,
    /// `[shell_environment]`: what commands get of the agent's environment.
    pub shell_environment: EnvironmentPolicy,
    /// `[sensitive_files]`: files whose reads ask first.
    pub sensitive_files: SensitiveFiles,
    /// `[subagents]`: how far delegation may go.
    pub subagents: SubagentSettings,
    /// `[sandbox]`: how commands are confined.
    pub sandbox: SandboxSettings,
    /// `[serve]`: how `crucible-agent serve` takes remote clients.
    pub serve: serve::ServeSettings,
    /// Non-fatal findings (a provider left out, a plaintext key) to log once at start.
    pub warnings: Vec<String>,
    /// Keys used and ignored, and which won where two set the same thing.
    pub report: ConfigReport,
}

impl Config {
    /// The configuration used when no file exists: a local Ollama.
    pub fn builtin_default() -> Self {
        let provider = ProviderSettings::local_ollama();
        Self {
            source: None,
            default_provider: provider.name.clone(),
            default_agent: None,
            system_prompt: None,
            context: ContextSettings::default(),
            rules_files: Default::default(),
            providers: BTreeMap::from([(provider.name.clone(), provider)]),
            max_turn_requests: DEFAULT_MAX_TURN_REQUESTS,
            loop_guard: LoopGuardSettings::default(),
            first_token_notice: Some(DEFAULT_FIRST_TOKEN_NOTICE),
            thought_level: Reasoning::default(),
            budgets: Default::default(),
            prices: Default::default(),
            unstable: Unstable::default(),
            default_mode: crate::modes::DEFAULT_MODE.to_string(),
            modes: ModeRegistry::default(),
            permission_rules: Vec::new(),
            permission_lists: PatternLists::default(),
            permission_profiles: BTreeMap::new(),
            declared_reads: Default::default(),
            agent_cards: CardSettings::default(),
            mcp_servers: Vec::new(),
            mcp_options: McpOptions::default(),
            shell_environment: EnvironmentPolicy::default(),
            sensitive_files: SensitiveFiles::default(),
            subagents: SubagentSettings::default(),
            sandbox: SandboxSettings::default(),
            serve: serve::ServeSettings::default(),
            warnings: Vec::new(),
            report: ConfigReport::default(),
        }
    }

    /// Whether the file at `path` may turn on an unstable ACP feature,
    /// judged from its text alone and erring towards yes (a file it pulls
    /// in, an escaped key). `initialize`, whose answer lists those
    /// features, is answered before the config is read only when it cannot.
    /// A file that cannot be read turns nothing on: the config's error says why.
    pub fn may_enable_unstable(path: &Path) -> bool {
        const MAY: [&[u8]; 7] = [
            b"unstable",
            b"protocol_v2",
            b"include",
            b"{file:",
            b"{dir:",
            b"\\u",
            b"\\U",
        ];
        std::fs::read(path).is_ok_and(|text| {
            MAY.iter()
                .any(|needle| text.windows(needle.len()).any(|window| window == *needle))
        })
    }

    /// Load from `path`. A missing file gives the built-in default only when
    /// the path is the default one (the user did not name it).
    pub fn load(
        path: &Path,
        chosen_by: ChosenBy,
        overrides: &Overrides,
    ) -> Result<Self, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err)
                if err.kind() == std::io::ErrorKind::NotFound && chosen_by == ChosenBy::Default =>
            {
                let mut config = Self::builtin_default();
                let env = |name: &str| std::env::var(name).ok();
                config.agent_cards =
                    agent_cards::card_settings(&BTreeMap::new(), BTreeMap::new(), path, &env);
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

    /// Parse and validate config text. `env` resolves `${VAR}` and
    /// `{env:VAR}` references; files named by `[include]`, `{file:…}` and
    /// `{dir:…}`, and Crucible's `secrets.toml`, are read beside `path`.
    pub fn from_toml(
        text: &str,
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
        overrides: &Overrides,
    ) -> Result<Self, ConfigError> {
        let parse_error = |message: String| ConfigError::Parse {
            path: path.to_path_buf(),
            message,
        };
        let mut file: toml::Table =
            toml::from_str(text).map_err(|err| parse_error(err.to_string()))?;
        let config_dir = path.parent().unwrap_or(Path::new("."));
        let mut warnings = Vec::new();
        let stored_keys = references::stored_keys(config_dir, env, &mut warnings);
        let mut around = Surroundings {
            env,
            config_dir,
            stored_keys: &stored_keys,
            included: &|_| None,
        };
        let origins = references::resolve(&mut file, &around, path, &mut warnings)?;
        let mut report = ConfigReport::default();
        report.classify(&file);
        let raw: raw::RawConfig = serde_path_to_error::deserialize(toml::Value::Table(file))
            .map_err(|err| wrong_value(text, path, err))?;
        let included = |key: &str| origins.get(key).cloned();
        around.included = &included;
        let mut config = compose(raw, path, around, warnings, report)?;
        config.apply_overrides(path, overrides)?;
        Ok(config)
    }

    pub fn provider_names(&self) -> String {
        self.providers
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn default_provider(&self) -> Option<&ProviderSettings> {
        self.providers.get(&self.default_provider)
    }
}

/// A value of the wrong type, or a key where none may be: the key's path,
/// the line when the file's own text has the fault (not a file it pulls in),
/// and a fix that keeps the rest of the file.
fn wrong_value(
    text: &str,
    path: &Path,
    err: serde_path_to_error::Error<toml::de::Error>,
) -> ConfigError {
    let key = err.path().to_string();
    let mut problem = err.into_inner().message().trim_end().to_string();
    let line = toml::from_str::<raw::RawConfig>(text)
        .err()
        .and_then(|err| err.span())
        .and_then(|span| text.get(..span.start))
        .map(|before| before.lines().count().max(1));
    if let Some(line) = line {
        problem.push_str(&format!(" (line {line})"));
    }
    invalid(
        path,
        key,
        problem,
        "Correct that value in the file; the manual's Configuration page lists every key with its type.",
    )
}

/// Who chose the config file's path, which says what a missing file means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChosenBy {
    /// The user named it: it must exist.
    User,
    /// It is the default path: when missing, the built-in default applies.
    Default,
}

/// Validate every section of the file at `path` and put them together.
fn compose(
    mut raw: raw::RawConfig,
    path: &Path,
    around: Surroundings<'_>,
    mut warnings: Vec<String>,
    mut report: ConfigReport,
) -> Result<Config, ConfigError> {
    let unstable =
        unstable::validate_unstable(raw.acp.as_mut().and_then(|acp| acp.unstable.take()), path)?
            .with_protocol_v2(raw.acp.as_mut().and_then(|acp| acp.protocol_v2.take()));
    let chat = raw.chat.unwrap_or_default();
    let mut raw_llm = raw.llm.unwrap_or_default();
    let permissions = permissions::validate(raw.permissions.unwrap_or_default(), raw.acp, path)?;
    warnings.extend(permissions.warnings);
    let specialty_models = raw_llm.models.take().unwrap_or_default();
    let agent_cards = agent_cards::card_settings(&raw.other, specialty_models, path, around.env);
    let mcp = mcp::validate(
        raw.mcp.unwrap_or_default(),
        raw.mcp_servers.unwrap_or_default(),
        path,
        around.env,
        &mut warnings,
        &mut report,
    )?;
    let modes = modes::validate_modes(raw.modes.unwrap_or_default(), path)?;
    let raw_context = raw.context.unwrap_or_default();
    let context = context::validate_context(&raw_context, path)?;
    let rules_files = context::rules_files(raw_context.rules_files, path, &mut warnings);
    let shell_environment =
        shell_environment::validate(raw.shell_environment.unwrap_or_default(), path)?;
    let sensitive_files =
        shell_environment::sensitive_files(raw.sensitive_files.unwrap_or_default(), path)?;
    let subagents = subagents::validate(raw.subagents.unwrap_or_default(), path)?;
    let home = (around.env)("HOME").map(PathBuf::from);
    let serve = serve::validate(raw.serve.unwrap_or_default(), path, home.as_deref())?;
    let sandbox = sandbox::validate(raw.sandbox.unwrap_or_default(), path, home)?;
    let agent = agent::validate(raw.agent.unwrap_or_default(), &modes, path)?;
    let prices = prices::validate_prices(raw.prices.unwrap_or_default(), path)?;
    warnings.extend(unknown_chat_keys(&chat, path));
    let llm = llm::validate_llm(raw_llm, &chat, path, around, &mut warnings, &mut report)?;
    Ok(Config {
        source: Some(path.to_path_buf()),
        default_provider: llm.default_provider,
        default_agent: chat.default_agent,
        system_prompt: chat.system_prompt,
        context,
        rules_files,
        providers: llm.providers,
        max_turn_requests: agent.max_turn_requests,
        loop_guard: agent.loop_guard,
        first_token_notice: agent.first_token_notice,
        thought_level: agent.thought_level,
        budgets: agent.budgets,
        prices,
        unstable,
        default_mode: agent.default_mode,
        modes,
        permission_rules: permissions.rules,
        permission_lists: permissions.lists,
        permission_profiles: permissions.profiles,
        declared_reads: permissions.reads,
        agent_cards,
        mcp_servers: mcp.servers,
        mcp_options: mcp.options,
        shell_environment,
        sensitive_files,
        subagents,
        sandbox,
        serve,
        warnings,
        report,
    })
}

/// `value`, unless it is 0: a count or a duration that must allow something.
fn non_zero<T: PartialEq + Default>(
    value: Option<T>,
    path: &Path,
    key: impl Into<String>,
    problem: &str,
    fix: &str,
) -> Result<Option<T>, ConfigError> {
    match value {
        Some(zero) if zero == T::default() => Err(invalid(path, key, problem, fix)),
        value => Ok(value),
    }
}

/// Warnings for `[chat]` keys neither this agent nor the Crucible TUI
/// reads (a typo, most likely).
fn unknown_chat_keys(chat: &raw::RawChat, path: &Path) -> Vec<String> {
    // Keys the Crucible TUI reads from the same file: accepted silently.
    const TUI_CHAT_KEYS: [&str; 6] = [
        "default_backend",
        "default_acp_agent",
        "enable_markdown",
        "show_thinking",
        "show_diffs",
        "agent_preference",
    ];
    chat.unknown
        .keys()
        .filter(|key| !TUI_CHAT_KEYS.contains(&key.as_str()))
        .map(|key| {
            format!(
                "{}: key `chat.{key}` is not used by crucible-agent (ignored)",
                path.display()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_config_that_may_turn_on_unstable_features_is_read_before_initialize() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        assert!(!Config::may_enable_unstable(&path), "no file");
        for (text, may) in [
            ("[llm.providers.local]\ntype = \"ollama\"\n", false),
            ("[acp]\nunstable = [\"status\"]\n", true),
            ("[acp]\nprotocol_v2 = false\n", true),
            ("[include]\nacp = \"acp.toml\"\n", true),
            ("acp = \"{file:acp.toml}\"\n", true),
            ("[acp]\n\"\\u0075nstable\" = [\"status\"]\n", true),
        ] {
            std::fs::write(&path, text).unwrap();
            assert_eq!(Config::may_enable_unstable(&path), may, "{text}");
        }
        let sample = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/crucible/reference.toml"
        ))
        .unwrap();
        std::fs::write(&path, sample).unwrap();
        assert!(
            !Config::may_enable_unstable(&path),
            "Crucible's reference config is answered early"
        );
    }
    use crate::providers::settings::{
        KeySource, OLLAMA_DEFAULT_ENDPOINT, OPENAI_DEFAULT_ENDPOINT, ProviderKind,
    };
    use std::time::Duration;

    /// `text` as the file `/cfg/config.toml`, with `vars` as the environment.
    pub(super) fn load(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
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

    /// Why `text` is refused, as the user reads it.
    pub(super) fn refusal(text: &str) -> String {
        load(text, &[]).unwrap_err().to_string()
    }

    #[test]
    fn budgets_are_read_from_agent_and_must_be_above_zero() {
        let base = "[llm.providers.local]\ntype = \"ollama\"\n[agent]\n";
        let config = load(
            &format!("{base}max_turn_tokens = 5000\nmax_session_cost = 1.5\n"),
            &[],
        )
        .unwrap();
        assert_eq!(config.budgets.max_turn_tokens, Some(5000));
        assert_eq!(config.budgets.max_session_tokens, None);
        assert_eq!(config.budgets.max_session_cost, Some(1.5));
        let zero = refusal(&format!("{base}max_session_tokens = 0\n"));
        assert!(zero.contains("agent.max_session_tokens"), "{zero}");
        let negative = refusal(&format!("{base}max_session_cost = -2.0\n"));
        assert!(negative.contains("agent.max_session_cost"), "{negative}");
    }

    #[test]
    fn tool_calling_and_the_loop_guard_are_read_and_checked() {
        let base = "[llm.providers.local]\ntype = \"ollama\"\n";
        let config = load(
            &format!(
                "{base}tool_calling = \"prompted\"\n[llm.providers.local.models.\"big:70b\"]\ntool_calling = \"native\"\n[agent]\nrepeated_call_limit = 5\n"
            ),
            &[],
        )
        .unwrap();
        let local = &config.providers["local"];
        use crate::providers::settings::ToolCalling;
        assert_eq!(local.tool_calling_for("small"), ToolCalling::Prompted);
        assert_eq!(local.tool_calling_for("big:70b"), ToolCalling::Native);
        assert_eq!(config.loop_guard.limit, Some(5));
        let defaults = load(base, &[]).unwrap();
        assert_eq!(
            defaults.providers["local"].tool_calling_for("m"),
            ToolCalling::Auto
        );
        assert_eq!(defaults.loop_guard.limit, Some(3));
        let bad = refusal(&format!("{base}tool_calling = \"text\"\n"));
        assert!(bad.contains("llm.providers.local.tool_calling"), "{bad}");
        assert!(bad.contains("prompted"), "{bad}");
        let bad = refusal(&format!(
            "{base}[llm.providers.local.models.m]\ntool_caling = \"native\"\n"
        ));
        assert!(bad.contains("models.\"m\".tool_caling"), "{bad}");
        let one = refusal(&format!("{base}[agent]\nrepeated_call_limit = 1\n"));
        assert!(one.contains("agent.repeated_call_limit"), "{one}");
    }

    pub(super) const SEED_EXAMPLE: &str = r#"
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
                // Another server than the type's own must name its model.
                "[llm.providers.x]\ntype = \"openai\"\nendpoint = \"http://box:8080/v1\"",
                "llm.providers.x.default_model",
            ),
            (
                "[llm.providers.x]\ntype = \"custom\"\ndefault_model = \"m\"",
                "llm.providers.x.endpoint",
            ),
            (
                "[llm.providers.x]\ntype = \"ollama\"\ntemperature = 3.0",
                "llm.providers.x.temperature",
            ),
            (
                "[llm.providers.x]\ntype = \"ollama\"\nmax_tokens = 10\nmax_output_tokens = 20",
                "llm.providers.x.max_tokens",
            ),
            ("[llm.ollama]\nurl = \"localhost\"", "llm.ollama.url"),
            (
                "[llm]\ndefault = \"copilot\"\n[llm.providers.copilot]\ntype = \"github-copilot\"",
                "llm.providers.copilot.type",
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
            let err = refusal(text);
            assert!(err.contains("/cfg/config.toml"), "{err}");
            assert!(err.contains(key), "expected {key} in: {err}");
        }
    }

    #[test]
    fn wrong_types_are_reported_with_the_key() {
        let err = refusal("[llm.providers.x]\ntimeout_secs = \"soon\"");
        assert!(err.contains("/cfg/config.toml"), "{err}");
        assert!(err.contains("timeout_secs"), "{err}");
        let text = "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\nmax_retries = -1";
        let err = refusal(text);
        assert!(err.contains("max_retries"), "{err}");
    }

    #[test]
    fn provider_findings_are_warnings_naming_the_file_never_the_secret() {
        let text = "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\napi_key = \"sk-very-secret\"";
        let config = load(text, &[]).unwrap();
        let debug = format!("{config:?}");
        assert!(!debug.contains("sk-very-secret"), "{debug}");
        assert!(
            config.warnings.iter().any(|w| w
                .starts_with("/cfg/config.toml: key `llm.providers.o.api_key` holds a plaintext")),
            "{:?}",
            config.warnings
        );
        assert!(
            config
                .warnings
                .iter()
                .all(|w| !w.contains("sk-very-secret"))
        );
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
        let config = Config::load(missing, ChosenBy::Default, &Overrides::default()).unwrap();
        assert_eq!(
            config.default_provider().unwrap().kind,
            ProviderKind::Ollama
        );
        assert!(Config::load(missing, ChosenBy::User, &Overrides::default()).is_err());
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
}
