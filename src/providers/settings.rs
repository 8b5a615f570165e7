//! A provider's settings: the `[llm.providers.NAME]` table as written
//! ([`RawProvider`]) and validated ([`ProviderSettings`]). The config module
//! parses the file and hands each table to [`validate`]; errors name the key
//! and the fix, and the config adds the file. The `type`s are in
//! [`service`], the key's sources in [`key`].

pub mod credentials;
mod fallback_target;
mod key;
pub mod locality;
pub mod service;
mod tool_calling;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use thiserror::Error;

pub use fallback_target::FallbackTarget;
pub use key::{ApiKey, KeySource, Secret, StoredKeys, env_reference, file_reference};
pub use service::{ProviderType, TypeName};
pub use tool_calling::ToolCalling;

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
const DEFAULT_MAX_WAIT_SECS: u64 = 300;

/// `[llm.providers.NAME]` as written. Every key is optional; unknown keys are
/// collected so the error can name them. `url` and `model` are the design
/// document's spellings (`[llm.ollama] url/model`).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct RawProvider {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    #[serde(alias = "url")]
    pub endpoint: Option<String>,
    #[serde(alias = "model")]
    pub default_model: Option<String>,
    pub api_key: Option<String>,
    pub api_key_file: Option<String>,
    pub context_window: Option<u64>,
    pub timeout_secs: Option<u64>,
    pub connect_timeout_secs: Option<u64>,
    pub max_output_tokens: Option<u32>,
    /// Crucible's spelling of `max_output_tokens`.
    pub max_tokens: Option<u32>,
    /// Sampling temperature, 0.0 to 2.0; sent only when set.
    pub temperature: Option<f64>,
    /// The models to offer; the server's list is not asked for when set.
    pub available_models: Option<Vec<String>>,
    /// Crucible's trust level and display name: not used by this agent.
    pub trust_level: Option<toml::Value>,
    pub name: Option<String>,
    pub max_retries: Option<u32>,
    pub retry_base_delay_ms: Option<u64>,
    pub retry_max_delay_secs: Option<u64>,
    /// The longest rate-limit wait sat out before retrying.
    pub max_wait_secs: Option<u64>,
    /// Where a turn goes on when this provider keeps failing: `PROVIDER` or
    /// `PROVIDER/MODEL`, in order.
    pub fallback: Option<Vec<String>>,
    /// Ollama: how long the model stays loaded after a call (`"30m"`, `"1h"`,
    /// seconds as a number, `-1` for ever, `0` to unload at once).
    pub keep_alive: Option<toml::Value>,
    /// Send a new session's fixed prompt ahead of its first prompt, so the
    /// server's prompt cache holds it (default: for local endpoints).
    pub prewarm: Option<bool>,
    /// OpenAI-compatible: send `prompt_cache_key` (the session id), for
    /// servers that accept it (default: api.openai.com only).
    pub prompt_cache_key: Option<bool>,
    /// llama.cpp: keep each session on one of the server's slots
    /// (`id_slot`), where the server reports them (default: on).
    pub pin_slots: Option<bool>,
    /// How the models get their tools: "auto", "native" or "prompted".
    pub tool_calling: Option<String>,
    /// `[llm.providers.NAME.models."MODEL"]`: settings of one model.
    pub models: Option<BTreeMap<String, RawModel>>,
    #[serde(flatten)]
    pub unknown: BTreeMap<String, toml::Value>,
}

/// `[llm.providers.NAME.models."MODEL"]` as written.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct RawModel {
    pub tool_calling: Option<String>,
    #[serde(flatten)]
    pub unknown: BTreeMap<String, toml::Value>,
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

    /// The endpoint without a path its native API adds itself: a copied
    /// `/v1` or `/api` base would double up (`/v1/v1/messages`).
    fn native_root(self, endpoint: &str) -> Option<&str> {
        match self {
            ProviderKind::Anthropic => endpoint.strip_suffix("/v1"),
            ProviderKind::Ollama => endpoint
                .strip_suffix("/v1")
                .or_else(|| endpoint.strip_suffix("/api")),
            ProviderKind::OpenAi => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ProviderSettings {
    pub name: String,
    pub kind: ProviderKind,
    /// The `type` as written (`openrouter`, `custom`…), which `kind` speaks for.
    pub service: ProviderType,
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
    /// Sent as `temperature` (Ollama: `options.temperature`) when set.
    pub temperature: Option<f64>,
    /// `available_models`: offered instead of the server's list when not empty.
    pub available_models: Vec<String>,
    pub retry: RetryPolicy,
    /// `fallback`: where a turn goes on when this provider keeps failing.
    pub fallback: Vec<FallbackTarget>,
    /// Ollama's `keep_alive`, as sent (a duration string or seconds).
    pub keep_alive: serde_json::Value,
    /// `prewarm` as written; see [`ProviderSettings::prewarms`].
    pub prewarm: Option<bool>,
    /// `prompt_cache_key` as written; see [`ProviderSettings::sends_cache_key`].
    pub prompt_cache_key: Option<bool>,
    /// `pin_slots` as written; see [`ProviderSettings::pins_slots`].
    pub pin_slots: Option<bool>,
    /// `tool_calling`: how the provider's models get their tools.
    pub tool_calling: ToolCalling,
    /// `models."MODEL".tool_calling`: where a model differs from the provider.
    pub model_tool_calling: BTreeMap<String, ToolCalling>,
}

/// How long Ollama keeps a model loaded after a call unless told: its own
/// default (5 minutes) unloads it between a user's pauses, and a cold load
/// is the slowest first token there is.
pub const DEFAULT_KEEP_ALIVE: &str = "30m";

impl ProviderSettings {
    /// The provider used when no config exists, or it names none: a local Ollama.
    pub fn local_ollama() -> Self {
        Self {
            name: "ollama".into(),
            kind: ProviderKind::Ollama,
            service: ProviderType::Ollama,
            endpoint: OLLAMA_DEFAULT_ENDPOINT.into(),
            default_model: OLLAMA_DEFAULT_MODEL.into(),
            api_key: None,
            missing_key_variable: None,
            context_window: None,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
            connect_timeout: Duration::from_secs(DEFAULT_CONNECT_TIMEOUT_SECS),
            max_output_tokens: None,
            temperature: None,
            available_models: Vec::new(),
            retry: RetryPolicy::default(),
            fallback: Vec::new(),
            keep_alive: serde_json::json!(DEFAULT_KEEP_ALIVE),
            prewarm: None,
            prompt_cache_key: None,
            pin_slots: None,
            tool_calling: ToolCalling::default(),
            model_tool_calling: BTreeMap::new(),
        }
    }

    /// How `model` gets its tools, as configured (a refusal under `auto`
    /// is `providers::tool_calling::is_prompted`'s business).
    pub fn tool_calling_for(&self, model: &str) -> ToolCalling {
        self.model_tool_calling
            .get(model)
            .copied()
            .unwrap_or(self.tool_calling)
    }

    /// Whether new sessions warm this provider's prompt cache: as written,
    /// else for local endpoints (a hosted one would bill the warm-up).
    pub fn prewarms(&self) -> bool {
        self.prewarm
            .unwrap_or_else(|| locality::is_local_endpoint(&self.endpoint))
    }

    /// Whether requests carry `prompt_cache_key`: as written, else only to
    /// OpenAI's own API (other servers may reject fields they do not know).
    pub fn sends_cache_key(&self) -> bool {
        self.prompt_cache_key.unwrap_or_else(|| {
            self.kind == ProviderKind::OpenAi
                && reqwest::Url::parse(&self.endpoint)
                    .is_ok_and(|url| url.host_str() == Some("api.openai.com"))
        })
    }

    /// Whether a session keeps one llama.cpp server slot: as written, else
    /// yes (only a server that names itself llama.cpp is ever asked).
    pub fn pins_slots(&self) -> bool {
        self.pin_slots.unwrap_or(true)
    }

    /// The environment variable its type's key lives in, if any.
    pub fn key_variable(&self) -> Option<&'static str> {
        self.service.key_variable()
    }
}

/// Where a table's endpoint comes from, which decides the defaults that
/// apply: a type's own service has a default model and key variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndpointSource {
    /// No `endpoint` written: the type's own service.
    TypeDefault,
    Written,
}

/// How transient provider failures are retried (seed 004's `RetryPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts after the first; 0 turns retrying off.
    pub max_retries: u32,
    /// The first wait; each later one doubles, with jitter.
    pub base_delay: Duration,
    /// No backoff wait is longer; a server's longer `Retry-After` (or reset
    /// time) is a rate-limit wait, told to the user.
    pub max_delay: Duration,
    /// The longest rate-limit wait sat out; a longer one gives up (and the
    /// turn goes on with the fallback, if any).
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: DEFAULT_MAX_RETRIES,
            base_delay: Duration::from_millis(DEFAULT_RETRY_BASE_DELAY_MS),
            max_delay: Duration::from_secs(DEFAULT_RETRY_MAX_DELAY_SECS),
            max_wait: Duration::from_secs(DEFAULT_MAX_WAIT_SECS),
        }
    }
}

/// A provider table that cannot be used: the key, what is wrong with it, and
/// the fix. The config module adds the file.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("key `{key}`: {problem}. {fix}")]
pub struct InvalidSetting {
    pub key: String,
    pub problem: String,
    pub fix: String,
}

/// A finding that does not stop the agent (a plaintext key, a dropped
/// endpoint path), to log once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingWarning {
    pub key: String,
    /// What follows the key, e.g. "holds a plaintext API key; …".
    pub text: String,
}

/// What validation looks up outside the table.
#[derive(Clone, Copy)]
pub struct Surroundings<'a> {
    /// Resolves `${VAR}` references, the conventional key variables and `HOME`.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The config file's directory: a relative `api_key_file` is read there.
    pub config_dir: &'a Path,
    /// Crucible's `secrets.toml`, when there is one.
    pub stored_keys: &'a StoredKeys,
    /// The file `[include]` merged a value from, by its dotted key.
    pub included: &'a dyn Fn(&str) -> Option<PathBuf>,
}

impl Surroundings<'_> {
    /// A path as written in the config: `~/` is the home directory, a
    /// relative path is beside the config file.
    pub fn path_of(&self, written: &str) -> PathBuf {
        let path = match (written.strip_prefix("~/"), (self.env)("HOME")) {
            (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
            _ => PathBuf::from(written),
        };
        if path.is_relative() {
            self.config_dir.join(path)
        } else {
            path
        }
    }
}

const KNOWN_SETTINGS_FIX: &str = "Known settings: type, endpoint, default_model, api_key, api_key_file, context_window, max_output_tokens (or max_tokens), temperature, available_models, timeout_secs, connect_timeout_secs, max_retries, retry_base_delay_ms, retry_max_delay_secs, max_wait_secs, fallback, keep_alive, prewarm, prompt_cache_key, pin_slots, tool_calling, models (and Crucible's trust_level, name). Remove or rename it.";

/// Validate the table `[llm.providers.NAME]`. Findings that do not stop the
/// agent go to `warnings`.
pub fn validate(
    name: &str,
    raw: RawProvider,
    around: Surroundings<'_>,
    warnings: &mut Vec<SettingWarning>,
) -> Result<ProviderSettings, InvalidSetting> {
    validate_at(
        &format!("llm.providers.{name}"),
        name,
        raw,
        around,
        warnings,
    )
}

/// [`validate`] for a table written at `section` (the design document's
/// `[llm.ollama]` is the provider `ollama`).
pub fn validate_at(
    section: &str,
    name: &str,
    raw: RawProvider,
    around: Surroundings<'_>,
    warnings: &mut Vec<SettingWarning>,
) -> Result<ProviderSettings, InvalidSetting> {
    let table = Table {
        section,
        name,
        around,
    };
    if let Some(unknown) = raw.unknown.keys().next() {
        return Err(table.invalid(unknown, "is not a provider setting", KNOWN_SETTINGS_FIX));
    }
    if name.is_empty() {
        return Err(InvalidSetting {
            key: section.into(),
            problem: "a provider has an empty name".into(),
            fix: "Give it a name, as in [llm.providers.local].".into(),
        });
    }
    let service = table.service(raw.kind.as_deref())?;
    let kind = service.kind();
    let endpoint_source = match raw.endpoint {
        None => EndpointSource::TypeDefault,
        Some(_) => EndpointSource::Written,
    };
    let endpoint = table.endpoint(raw.endpoint, service, warnings)?;
    let default_model = table.default_model(raw.default_model, service, endpoint_source)?;
    let (api_key, missing_key_variable) = table.api_key(
        raw.api_key,
        raw.api_key_file,
        service,
        endpoint_source,
        warnings,
    )?;
    Ok(ProviderSettings {
        name: name.to_string(),
        kind,
        service,
        endpoint,
        default_model,
        api_key,
        missing_key_variable,
        context_window: table.non_zero(
            raw.context_window,
            "context_window",
            "Give the model's context window in tokens (e.g. 8192), or leave it out.",
        )?,
        timeout: table.positive_secs(raw.timeout_secs, DEFAULT_TIMEOUT_SECS, "timeout_secs")?,
        connect_timeout: table.positive_secs(
            raw.connect_timeout_secs,
            DEFAULT_CONNECT_TIMEOUT_SECS,
            "connect_timeout_secs",
        )?,
        max_output_tokens: table.max_output_tokens(raw.max_output_tokens, raw.max_tokens)?,
        temperature: table.temperature(raw.temperature)?,
        available_models: table.available_models(raw.available_models)?,
        retry: table.retry(
            raw.max_retries,
            raw.retry_base_delay_ms,
            raw.retry_max_delay_secs,
            raw.max_wait_secs,
        )?,
        fallback: table.fallback(raw.fallback)?,
        keep_alive: table.keep_alive(raw.keep_alive)?,
        prewarm: raw.prewarm,
        prompt_cache_key: raw.prompt_cache_key,
        pin_slots: raw.pin_slots,
        tool_calling: table.tool_calling("tool_calling", raw.tool_calling.as_deref())?,
        model_tool_calling: table.model_tool_calling(raw.models)?,
    })
}

/// The table being validated: names its keys and reads its surroundings.
struct Table<'a> {
    /// Where it is written, e.g. `llm.providers.local`.
    section: &'a str,
    name: &'a str,
    around: Surroundings<'a>,
}

impl Table<'_> {
    /// `tool_calling` at `field` (the provider's, or a model's).
    fn tool_calling(
        &self,
        field: &str,
        written: Option<&str>,
    ) -> Result<ToolCalling, InvalidSetting> {
        let Some(written) = written else {
            return Ok(ToolCalling::default());
        };
        ToolCalling::parse(written).ok_or_else(|| {
            self.invalid(
                field,
                format!("`{written}` is not a way of calling tools"),
                "Use \"auto\" (native, switching to prompted if the server refuses tools), \"native\" or \"prompted\" (tools described in the system prompt).",
            )
        })
    }

    /// `models."MODEL"`: each model's own settings.
    fn model_tool_calling(
        &self,
        written: Option<BTreeMap<String, RawModel>>,
    ) -> Result<BTreeMap<String, ToolCalling>, InvalidSetting> {
        let mut out = BTreeMap::new();
        for (model, raw) in written.unwrap_or_default() {
            let field = |key: &str| format!("models.\"{model}\".{key}");
            if let Some(unknown) = raw.unknown.keys().next() {
                return Err(self.invalid(
                    &field(unknown),
                    "is not a model setting",
                    "A model's table takes tool_calling. Remove or rename it.",
                ));
            }
            if let Some(written) = raw.tool_calling.as_deref() {
                out.insert(
                    model.clone(),
                    self.tool_calling(&field("tool_calling"), Some(written))?,
                );
            }
        }
        Ok(out)
    }

    fn key(&self, field: &str) -> String {
        format!("{}.{field}", self.section)
    }

    fn invalid(
        &self,
        field: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> InvalidSetting {
        InvalidSetting {
            key: self.key(field),
            problem: problem.into(),
            fix: fix.into(),
        }
    }

    fn warn(&self, warnings: &mut Vec<SettingWarning>, field: &str, text: String) {
        warnings.push(SettingWarning {
            key: self.key(field),
            text,
        });
    }

    fn service(&self, written: Option<&str>) -> Result<ProviderType, InvalidSetting> {
        let text = written.unwrap_or("ollama");
        let fix = "Use one of \"openai\", \"ollama\", \"anthropic\", \"openrouter\", \"zai\", \"cohere\" or \"custom\" (any OpenAI-compatible server, with endpoint).";
        match ProviderType::parse(text) {
            TypeName::Usable(service) => Ok(service),
            TypeName::Unusable(why) => Err(self.invalid(
                "type",
                format!("`{text}` cannot be used by crucible-agent: {why}"),
                fix,
            )),
            TypeName::Unknown => {
                Err(self.invalid("type", format!("`{text}` is not a provider type"), fix))
            }
        }
    }

    fn endpoint(
        &self,
        written: Option<String>,
        service: ProviderType,
        warnings: &mut Vec<SettingWarning>,
    ) -> Result<String, InvalidSetting> {
        let example = service
            .default_endpoint()
            .unwrap_or("http://127.0.0.1:8080/v1");
        let Some(written) = written else {
            return service.default_endpoint().map(str::to_string).ok_or_else(|| {
                self.invalid(
                    "endpoint",
                    format!("is missing, and type `{}` has no default", service.as_str()),
                    format!("Give the OpenAI-compatible server's base URL, e.g. endpoint = \"{example}\"."),
                )
            });
        };
        let endpoint = expand_env(&written, self.around.env).map_err(|var| {
            self.invalid(
                "endpoint",
                format!("refers to the variable {var}, which is not set"),
                format!("Export {var} or write the URL directly."),
            )
        })?;
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(self.invalid(
                "endpoint",
                format!("`{endpoint}` is not an http:// or https:// URL"),
                format!("Write the full base URL, for example \"{example}\"."),
            ));
        }
        let endpoint = endpoint.trim_end_matches('/');
        let kind = service.kind();
        match kind.native_root(endpoint) {
            Some(root) => {
                self.warn(
                    warnings,
                    "endpoint",
                    format!(
                        "ends in a path the {} API adds itself; using {root}",
                        kind.as_str()
                    ),
                );
                Ok(root.to_string())
            }
            None => Ok(endpoint.to_string()),
        }
    }

    /// The written model; else the type's default when the table talks to
    /// the type's own service (or Ollama, which always has llama3.2).
    fn default_model(
        &self,
        written: Option<String>,
        service: ProviderType,
        endpoint: EndpointSource,
    ) -> Result<String, InvalidSetting> {
        let fallback = service
            .default_model()
            .filter(|_| endpoint == EndpointSource::TypeDefault || service == ProviderType::Ollama);
        match (written, fallback) {
            (Some(model), _) if model.trim().is_empty() => Err(self.invalid(
                "default_model",
                "is empty",
                "Name the model to use, e.g. \"llama3.2\" or \"gpt-4o-mini\".",
            )),
            (Some(model), _) => Ok(model),
            (None, Some(model)) => Ok(model.to_string()),
            (None, None) => Err(self.invalid(
                "default_model",
                "is missing",
                "Name the model this provider should use, e.g. default_model = \"gpt-4o-mini\".",
            )),
        }
    }

    /// `max_output_tokens`, or Crucible's `max_tokens`; both must agree.
    fn max_output_tokens(
        &self,
        ours: Option<u32>,
        crucible: Option<u32>,
    ) -> Result<Option<u32>, InvalidSetting> {
        let fix = "Give the longest answer in tokens (e.g. 8192), or leave it out.";
        let ours = self.non_zero(ours, "max_output_tokens", fix)?;
        let crucible = self.non_zero(crucible, "max_tokens", fix)?;
        match (ours, crucible) {
            (Some(a), Some(b)) if a != b => Err(self.invalid(
                "max_tokens",
                format!("is {b}, but max_output_tokens is {a}"),
                "They mean the same; keep one of them.",
            )),
            (ours, crucible) => Ok(ours.or(crucible)),
        }
    }

    fn keep_alive(
        &self,
        written: Option<toml::Value>,
    ) -> Result<serde_json::Value, InvalidSetting> {
        let fix = "Write a duration such as \"30m\" or \"2h\", seconds as a number, -1 to keep the model loaded, or 0 to unload it after each call.";
        match written {
            None => Ok(serde_json::json!(DEFAULT_KEEP_ALIVE)),
            Some(toml::Value::Integer(seconds)) => Ok(serde_json::json!(seconds)),
            Some(toml::Value::String(text))
                if text
                    .trim_start_matches('-')
                    .trim_end_matches(['s', 'm', 'h'])
                    .parse::<f64>()
                    .is_ok() =>
            {
                Ok(serde_json::json!(text))
            }
            Some(other) => {
                Err(self.invalid("keep_alive", format!("is {other}, not a duration"), fix))
            }
        }
    }

    fn temperature(&self, written: Option<f64>) -> Result<Option<f64>, InvalidSetting> {
        match written {
            Some(value) if !(0.0..=2.0).contains(&value) => Err(self.invalid(
                "temperature",
                format!("is {value}, outside 0.0 to 2.0"),
                "Use a value from 0.0 (focused) to 2.0 (varied), e.g. 0.7, or leave it out.",
            )),
            other => Ok(other),
        }
    }

    fn available_models(
        &self,
        written: Option<Vec<String>>,
    ) -> Result<Vec<String>, InvalidSetting> {
        let models = written.unwrap_or_default();
        if models.iter().any(|model| model.trim().is_empty()) {
            return Err(self.invalid(
                "available_models",
                "holds an empty name",
                "List model names, e.g. available_models = [\"llama3.2\", \"qwen2.5-coder\"].",
            ));
        }
        Ok(models)
    }

    /// A count where 0 makes no sense (a window, an answer's length).
    fn non_zero<T: Copy + Into<u64>>(
        &self,
        value: Option<T>,
        field: &str,
        fix: &str,
    ) -> Result<Option<T>, InvalidSetting> {
        match value {
            Some(zero) if zero.into() == 0 => Err(self.invalid(field, "is 0", fix)),
            other => Ok(other),
        }
    }

    fn positive_secs(
        &self,
        value: Option<u64>,
        default: u64,
        field: &str,
    ) -> Result<Duration, InvalidSetting> {
        let fix = "Use a number of seconds above 0, or leave it out.";
        let secs = self.non_zero(value, field, fix)?.unwrap_or(default);
        Ok(Duration::from_secs(secs))
    }

    fn retry(
        &self,
        max_retries: Option<u32>,
        base_delay_ms: Option<u64>,
        max_delay_secs: Option<u64>,
        max_wait_secs: Option<u64>,
    ) -> Result<RetryPolicy, InvalidSetting> {
        let base_delay =
            Duration::from_millis(base_delay_ms.unwrap_or(DEFAULT_RETRY_BASE_DELAY_MS));
        let max_delay = self.positive_secs(
            max_delay_secs,
            DEFAULT_RETRY_MAX_DELAY_SECS,
            "retry_max_delay_secs",
        )?;
        if base_delay > max_delay {
            return Err(self.invalid(
                "retry_base_delay_ms",
                format!(
                    "is longer than retry_max_delay_secs ({} s)",
                    max_delay.as_secs()
                ),
                "Make the first wait shorter than the longest one.",
            ));
        }
        Ok(RetryPolicy {
            max_retries: max_retries.unwrap_or(DEFAULT_MAX_RETRIES),
            base_delay,
            max_delay,
            max_wait: Duration::from_secs(max_wait_secs.unwrap_or(DEFAULT_MAX_WAIT_SECS)),
        })
    }

    /// The entries' form only; that they name providers is checked with
    /// all of them (`providers::fallback::check_chains`).
    fn fallback(
        &self,
        written: Option<Vec<String>>,
    ) -> Result<Vec<FallbackTarget>, InvalidSetting> {
        written
            .unwrap_or_default()
            .iter()
            .map(|entry| {
                FallbackTarget::parse(entry).ok_or_else(|| {
                    self.invalid(
                        "fallback",
                        format!("holds `{entry}`, which names no provider"),
                        "List provider names, optionally with a model: fallback = [\"backup\", \"other/model-name\"].",
                    )
                })
            })
            .collect()
    }
}

/// A `${VAR}` whose variable is not set; shown as the variable's name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{name}")]
pub struct UnsetVariable {
    pub name: String,
}

/// Expand every `${VAR}` and `{env:VAR}` in `value`; the error is the
/// first unset variable.
pub fn expand_env(
    value: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, UnsetVariable> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    loop {
        let dollar = rest.find("${").map(|at| (at, 2));
        let crucible = rest.find("{env:").map(|at| (at, 5));
        let next = match (dollar, crucible) {
            (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
            (one, other) => one.or(other),
        };
        let Some((start, opener)) = next else { break };
        out.push_str(&rest[..start]);
        let after = &rest[start + opener..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let var = &after[..end];
        out.push_str(&env(var).ok_or_else(|| UnsetVariable {
            name: var.to_string(),
        })?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Validated = (BTreeMap<String, ProviderSettings>, Vec<SettingWarning>);

    /// Every `[llm.providers.NAME]` table of `text`, validated as the config does.
    fn validate_all(
        text: &str,
        vars: &[(&str, &str)],
        config_dir: &Path,
    ) -> Result<Validated, InvalidSetting> {
        let env = |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        let stored_keys = StoredKeys::default();
        let around = Surroundings {
            env: &env,
            config_dir,
            stored_keys: &stored_keys,
            included: &|_| None,
        };
        let file: toml::Table = toml::from_str(text).unwrap();
        let tables = file["llm"]["providers"].as_table().unwrap().clone();
        let mut warnings = Vec::new();
        let mut providers = BTreeMap::new();
        for (name, table) in tables {
            let raw: RawProvider = table.try_into().unwrap();
            let settings = validate(&name, raw, around, &mut warnings)?;
            providers.insert(name, settings);
        }
        Ok((providers, warnings))
    }

    fn load(text: &str, vars: &[(&str, &str)]) -> Result<Validated, InvalidSetting> {
        validate_all(text, vars, Path::new("/cfg"))
    }

    #[test]
    fn local_endpoints_warm_and_only_openai_itself_gets_a_cache_key_unless_written() {
        let with = |table: &str| {
            let text = format!("[llm.providers.p]\ndefault_model = \"m\"\n{table}\n");
            load(&text, &[]).unwrap().0["p"].clone()
        };
        let local = with("type = \"openai\"\nendpoint = \"http://127.0.0.1:8080/v1\"");
        assert!(local.prewarms());
        assert!(!local.sends_cache_key());
        let hosted = with("type = \"openai\"\napi_key = \"k\"");
        assert!(!hosted.prewarms());
        assert!(hosted.sends_cache_key());
        let written = with(
            "type = \"openai\"\nendpoint = \"http://127.0.0.1:8080/v1\"\nprewarm = false\nprompt_cache_key = true",
        );
        assert!(!written.prewarms());
        assert!(written.sends_cache_key());
        assert!(local.pins_slots() && hosted.pins_slots());
        assert!(!with("type = \"openai\"\napi_key = \"k\"\npin_slots = false").pins_slots());
    }

    #[test]
    fn keep_alive_takes_durations_and_seconds_and_names_the_key_otherwise() {
        let with = |value: &str| {
            load(
                &format!("[llm.providers.o]\ntype = \"ollama\"\nkeep_alive = {value}\n"),
                &[],
            )
        };
        assert_eq!(
            with("\"1h\"").unwrap().0["o"].keep_alive,
            serde_json::json!("1h")
        );
        assert_eq!(with("-1").unwrap().0["o"].keep_alive, serde_json::json!(-1));
        let default = load("[llm.providers.o]\ntype = \"ollama\"\n", &[]).unwrap();
        assert_eq!(default.0["o"].keep_alive, serde_json::json!("30m"));
        let err = with("true").unwrap_err();
        assert!(format!("{err:?}").contains("keep_alive"), "{err:?}");
    }

    #[test]
    fn conventional_variable_is_used_when_no_key_is_configured() {
        let text = "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"gpt-4o\"";
        let (providers, _) = load(text, &[("OPENAI_API_KEY", "sk-env")]).unwrap();
        let key = providers["o"].api_key.as_ref().unwrap();
        assert_eq!(key.source, KeySource::EnvVar("OPENAI_API_KEY".into()));
    }

    #[test]
    fn secrets_do_not_leak_through_debug() {
        let text = "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\napi_key = \"sk-very-secret\"";
        let (providers, warnings) = load(text, &[]).unwrap();
        let debug = format!("{providers:?}");
        assert!(!debug.contains("sk-very-secret"), "{debug}");
        assert!(warnings.iter().any(|w| w.text.contains("plaintext")));
        assert!(
            warnings
                .iter()
                .all(|w| !format!("{w:?}").contains("sk-very-secret"))
        );
    }

    #[test]
    fn api_key_file_is_read_trimmed_relative_to_home_or_the_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("key"), "sk-from-file\n").unwrap();
        let home = dir.path().display().to_string();
        let text =
            "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\napi_key_file = \"~/key\"";
        let (providers, _) = load(text, &[("HOME", &home)]).unwrap();
        let key = providers["o"].api_key.as_ref().unwrap();
        assert_eq!(key.secret.expose(), "sk-from-file");
        let text = "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\napi_key_file = \"missing\"";
        let err = load(text, &[]).unwrap_err().to_string();
        assert!(err.contains("api_key_file"), "{err}");
        // A relative path is read beside the config file, wherever the agent runs.
        let text =
            "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\napi_key_file = \"key\"";
        let (providers, _) = validate_all(text, &[], dir.path()).unwrap();
        let key = providers["o"].api_key.as_ref().unwrap();
        assert_eq!(key.secret.expose(), "sk-from-file");
        assert_eq!(key.source, KeySource::File(dir.path().join("key")));
    }

    #[test]
    fn native_endpoints_drop_a_copied_api_suffix() {
        let text = "[llm.providers.a]\ntype = \"anthropic\"\nendpoint = \"https://api.anthropic.com/v1/\"\ndefault_model = \"claude-sonnet-4-5\"\n[llm.providers.o]\ntype = \"ollama\"\nendpoint = \"http://box:11434/api\"\n[llm.providers.x]\ntype = \"openai\"\nendpoint = \"http://box:8080/v1\"\ndefault_model = \"m\"";
        let (providers, warnings) = load(text, &[]).unwrap();
        assert_eq!(providers["a"].endpoint, "https://api.anthropic.com");
        assert_eq!(providers["o"].endpoint, "http://box:11434");
        assert_eq!(providers["x"].endpoint, "http://box:8080/v1");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert_eq!(warnings[0].key, "llm.providers.a.endpoint");
    }

    #[test]
    fn retry_settings_are_read_and_checked() {
        let text = "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\nmax_retries = 0\nretry_base_delay_ms = 50\nretry_max_delay_secs = 2\nmax_output_tokens = 100";
        let provider = &load(text, &[]).unwrap().0["o"];
        assert_eq!(provider.retry.max_retries, 0);
        assert_eq!(provider.retry.base_delay, Duration::from_millis(50));
        assert_eq!(provider.retry.max_delay, Duration::from_secs(2));
        assert_eq!(provider.max_output_tokens, Some(100));
        let text = "[llm.providers.o]\ntype = \"openai\"\ndefault_model = \"m\"\nretry_base_delay_ms = 5000\nretry_max_delay_secs = 2";
        let err = load(text, &[]).unwrap_err().to_string();
        assert!(err.contains("retry_base_delay_ms"), "{err}");
    }

    #[test]
    fn expand_env_replaces_every_reference() {
        let env = |name: &str| (name == "HOST").then(|| "example.org".to_string());
        assert_eq!(
            expand_env("https://${HOST}/v1", &env).unwrap(),
            "https://example.org/v1"
        );
        assert_eq!(expand_env("http://${NOPE}", &env).unwrap_err().name, "NOPE");
    }
}
