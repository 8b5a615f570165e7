//! LLM providers behind one streaming interface. The agent loop and the ACP
//! translation see only [`ProviderEvent`]s. One HTTP provider (`http`)
//! serves every provider type; each wire format (`openai`, `anthropic`,
//! `ollama`) lives in its own module, and `settings` says what a
//! `[llm.providers.NAME]` table means.

pub mod anthropic;
pub mod dialects;
pub mod encoded;
pub mod fallback;
pub mod function_tools;
pub mod http;
pub mod known_models;
pub mod lenient;
pub mod ollama;
pub mod openai;
pub mod overflow;
pub mod pricing;
pub mod rate_limit;
pub mod reasoning;
pub mod retry;
pub mod settings;
pub mod slots;
pub mod stream;
#[cfg(test)]
pub(crate) mod testing;
pub mod tool_calling;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use crate::model::{Message, Part, Role, ToolDefinition};
use anthropic::AnthropicFormat;
use http::HttpProvider;
use ollama::OllamaFormat;
use openai::OpenAiFormat;
pub use reasoning::Reasoning;
use settings::{ProviderKind, ProviderSettings};

use crate::util::lock;

#[derive(Debug, Clone, PartialEq, Default)]
pub enum ToolChoice {
    #[default]
    Auto,
    Required,
    None,
    Specific(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    pub system: Option<String>,
    pub messages: Vec<Arc<Message>>,
    pub tools: Vec<ToolDefinition>,
    pub tool_choice: ToolChoice,
    pub max_output_tokens: Option<u32>,
    /// The window the session budgets for. Ollama must be told (`num_ctx`),
    /// or it silently cuts the prompt to its small default.
    pub context_window: Option<u64>,
    /// How hard to think; None sends no reasoning parameter (the model is
    /// not known to reason, or the call is the agent's own, e.g. compaction).
    pub reasoning: Option<Reasoning>,
    /// Groups requests that share a prefix for the provider's prompt cache
    /// (the session id; OpenAI's `prompt_cache_key`).
    pub cache_key: Option<String>,
}

/// Token counts the provider reported for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The part of `prompt_tokens` read from the provider's prompt cache
    /// (priced apart), where the provider says.
    #[serde(default)]
    pub cached_prompt_tokens: u64,
    /// The part of `prompt_tokens` written to the provider's prompt cache
    /// (Anthropic bills it apart), where the provider says.
    #[serde(default)]
    pub cache_written_prompt_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    /// Sums every count: a turn's calls, a parent's and its children's.
    fn add_assign(&mut self, other: Self) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_prompt_tokens += other.cached_prompt_tokens;
        self.cache_written_prompt_tokens += other.cache_written_prompt_tokens;
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
    ToolCalls,
    Refusal,
    Other(String),
}

/// What a provider stream yields, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    TextDelta(String),
    ThinkingDelta(String),
    /// Closes the thinking block so far; the signature goes back with it.
    ThinkingSignature(String),
    RedactedThinking(String),
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    ToolCallArgumentsDelta {
        index: usize,
        delta: String,
    },
    ToolCallEnd {
        index: usize,
    },
    Usage(Usage),
    Finish(FinishReason),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    pub id: String,
    /// The window a request really gets, when the server says.
    pub context_window: Option<u64>,
}

/// Errors say what failed and what to do about it; the text goes to the user.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProviderError {
    #[error("cannot reach provider `{provider}` at {endpoint}: {detail}. {fix}")]
    Unreachable {
        provider: String,
        endpoint: String,
        detail: String,
        fix: String,
    },
    #[error("provider `{provider}` needs an API key: {fix}")]
    MissingKey { provider: String, fix: String },
    #[error(
        "provider `{provider}` refused the API key (HTTP {status}){from}: {detail}. Check the key{hint}."
    )]
    Auth {
        provider: String,
        status: u16,
        from: String,
        hint: String,
        detail: String,
    },
    #[error(
        "model `{model}` is not available from provider `{provider}`{listing}. Pick another model in the session's model selector or change default_model in [llm.providers.{provider}]."
    )]
    ModelNotFound {
        provider: String,
        model: String,
        listing: String,
    },
    #[error("provider `{provider}` answered HTTP {status}: {detail}")]
    Http {
        provider: String,
        status: u16,
        detail: String,
        retry_after: Option<Duration>,
    },
    #[error(
        "the stream from provider `{provider}` ended before it was complete ({detail}); the answer above may be cut off. Try again."
    )]
    Truncated { provider: String, detail: String },
    #[error(
        "provider `{provider}` answered with an empty stream (no text, no tool call, no finish). Some servers (LM Studio) do this when the prompt does not fit the context the model was loaded with. {}Otherwise the server may not support streaming for this request; try another model or server.",
        overflow::fix(provider, *window)
    )]
    EmptyStream {
        provider: String,
        /// The window the request was budgeted for, where known.
        window: Option<u64>,
    },
    #[error(
        "provider `{provider}` sent no data for {seconds} s; gave up. Raise timeout_secs in [llm.providers.{provider}] if the model is just slow."
    )]
    IdleTimeout { provider: String, seconds: u64 },
    #[error(
        "provider `{provider}` said the request does not fit the model's context: {detail}. {}",
        overflow::fix(provider, *window)
    )]
    ServerContextOverflow {
        provider: String,
        detail: String,
        window: Option<u64>,
    },
    #[error("provider `{provider}` sent data this agent cannot read: {detail}")]
    Malformed { provider: String, detail: String },
    #[error("provider `{provider}` reported an error: {detail}")]
    Remote {
        provider: String,
        detail: String,
        /// The server says it is overloaded or failed internally: worth retrying.
        transient: bool,
    },
    #[error("provider `{provider}` could not be set up: {detail}")]
    Setup { provider: String, detail: String },
    #[error(
        "the request needs about {needed} tokens but only {limit} fit in the {window}-token window (the rest is reserved for the answer), even after compacting and dropping older turns. Shorten the message or attach less, or pick a model with a larger window."
    )]
    ContextOverflow {
        needed: u64,
        limit: u64,
        window: u64,
    },
    /// A transient failure that retrying did not cure.
    #[error("{last} ({why})")]
    GaveUp {
        last: Box<ProviderError>,
        why: String,
    },
}

/// What kind of failure an error is, which decides whether to retry (seed 004).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    RateLimit,
    ServerError,
    Network,
    Malformed,
    Fatal,
}

impl ProviderError {
    pub fn class(&self) -> ErrorClass {
        match self {
            ProviderError::Http { status: 429, .. } => ErrorClass::RateLimit,
            // 408 request timeout and 529 (Anthropic "overloaded") are transient too.
            ProviderError::Http { status, .. } if *status >= 500 || *status == 408 => {
                ErrorClass::ServerError
            }
            ProviderError::Remote {
                transient: true, ..
            } => ErrorClass::ServerError,
            ProviderError::Unreachable { .. } | ProviderError::Truncated { .. } => {
                ErrorClass::Network
            }
            ProviderError::Malformed { .. } | ProviderError::EmptyStream { .. } => {
                ErrorClass::Malformed
            }
            ProviderError::Http { .. }
            | ProviderError::Remote { .. }
            | ProviderError::MissingKey { .. }
            | ProviderError::Auth { .. }
            | ProviderError::ModelNotFound { .. }
            | ProviderError::IdleTimeout { .. }
            | ProviderError::Setup { .. }
            | ProviderError::ContextOverflow { .. }
            | ProviderError::ServerContextOverflow { .. }
            | ProviderError::GaveUp { .. } => ErrorClass::Fatal,
        }
    }

    /// How long the server asked us to wait, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

pub type EventStream = BoxStream<'static, Result<ProviderEvent, ProviderError>>;

/// A streaming chat-completion client (seed: TextGenerationProvider).
pub trait Provider: Send + Sync {
    fn config(&self) -> &ProviderSettings;
    fn name(&self) -> &str {
        &self.config().name
    }
    fn kind(&self) -> ProviderKind {
        self.config().kind
    }
    fn default_model(&self) -> &str {
        &self.config().default_model
    }
    /// Start a streamed completion. Resolves once the server has accepted the
    /// request (status checked), then the stream yields events.
    fn stream_chat(
        &self,
        request: ChatRequest,
    ) -> BoxFuture<'_, Result<EventStream, ProviderError>>;
    /// The models the server offers.
    fn list_models(&self) -> BoxFuture<'_, Result<Vec<ModelInfo>, ProviderError>>;
    /// The window the server reports for `model` beyond its model list
    /// (which [`Providers::context_window`] reads first, from its cache).
    /// Only Ollama has more to say, through `/api/show`.
    fn reported_context_window<'a>(
        &'a self,
        _model: &'a str,
    ) -> BoxFuture<'a, Result<Option<u64>, ProviderError>> {
        Box::pin(async { Ok(None) })
    }
    /// The session that sent `cache_key` ended: what the provider kept
    /// for it (a llama.cpp slot, see `slots`) may go.
    fn session_ended(&self, _cache_key: &str) {}
}

/// Window used when neither the config nor the server says.
pub const FALLBACK_CONTEXT_WINDOW: u64 = 8192;

/// The configured providers, built lazily: nothing here opens a connection
/// until a session first asks.
pub struct Providers {
    /// By name; None: disabled by the client (`providers/disable`).
    settings: std::sync::RwLock<BTreeMap<String, Option<Arc<ProviderSettings>>>>,
    /// As the config has them: what the client's changes start from.
    configured: BTreeMap<String, Arc<ProviderSettings>>,
    built: std::sync::Mutex<BTreeMap<String, Arc<dyn Provider>>>,
    models: tokio::sync::Mutex<BTreeMap<String, Arc<tokio::sync::OnceCell<Vec<ModelInfo>>>>>,
    windows: std::sync::Mutex<BTreeMap<(String, String), u64>>,
}

impl Providers {
    /// The providers of `settings`, by name.
    pub fn new(settings: BTreeMap<String, ProviderSettings>) -> Self {
        let configured: BTreeMap<String, Arc<ProviderSettings>> = settings
            .into_iter()
            .map(|(name, config)| (name, Arc::new(config)))
            .collect();
        let settings = configured
            .iter()
            .map(|(name, config)| (name.clone(), Some(Arc::clone(config))))
            .collect();
        Self {
            settings: std::sync::RwLock::new(settings),
            configured,
            built: std::sync::Mutex::default(),
            models: tokio::sync::Mutex::default(),
            windows: std::sync::Mutex::default(),
        }
    }

    fn read(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Option<Arc<ProviderSettings>>>> {
        self.settings
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The enabled providers' names.
    pub fn names(&self) -> Vec<String> {
        self.read()
            .iter()
            .filter(|(_, config)| config.is_some())
            .map(|(name, _)| name.clone())
            .collect()
    }

    pub fn config(&self, name: &str) -> Option<Arc<ProviderSettings>> {
        self.read().get(name).cloned().flatten()
    }

    /// A provider as the config has it, whatever the client changed since.
    pub fn configured(&self, name: &str) -> Option<Arc<ProviderSettings>> {
        self.configured.get(name).cloned()
    }

    /// Every provider the config named, with its settings (None: disabled).
    pub fn all(&self) -> Vec<(String, Option<Arc<ProviderSettings>>)> {
        self.read()
            .iter()
            .map(|(name, config)| (name.clone(), config.clone()))
            .collect()
    }

    /// Replace a provider's settings (the client's `providers/set`), or
    /// disable it with None. Only providers the config named: the client
    /// reroutes them, it does not invent new ones. Sessions pick the change
    /// up at their next model call.
    pub fn replace(
        &self,
        name: &str,
        config: Option<ProviderSettings>,
    ) -> Result<(), ProviderError> {
        {
            let mut settings = self
                .settings
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let Some(slot) = settings.get_mut(name) else {
                return Err(ProviderError::Setup {
                    provider: name.to_string(),
                    detail: "not configured; providers/list names the ones this agent has".into(),
                });
            };
            *slot = config.map(Arc::new);
        }
        lock(&self.built).remove(name);
        self.lock_windows()
            .retain(|(provider, _), _| provider != name);
        // The model list is cached per provider; a listing in flight right
        // now keeps the old one until the next start.
        if let Ok(mut models) = self.models.try_lock() {
            models.remove(name);
        }
        Ok(())
    }

    /// Serves `name` with `provider` (a scripted one, in tests).
    #[cfg(test)]
    pub fn serve_with(&self, name: &str, provider: Arc<dyn Provider>) {
        lock(&self.built).insert(name.to_string(), provider);
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Provider>> {
        let config = self.config(name)?;
        let mut built = lock(&self.built);
        let provider = built
            .entry(name.to_string())
            .or_insert_with(|| build_provider(&config));
        Some(Arc::clone(provider))
    }

    /// The provider's model list: its configured `available_models`, else
    /// the server's, fetched once and cached. Failures are not cached, so a
    /// server started later is picked up.
    pub async fn models(&self, name: &str) -> Result<Vec<ModelInfo>, ProviderError> {
        let provider = self.get(name).ok_or_else(|| ProviderError::Setup {
            provider: name.to_string(),
            detail: "not configured".into(),
        })?;
        let configured = &provider.config().available_models;
        if !configured.is_empty() {
            return Ok(configured
                .iter()
                .map(|id| ModelInfo {
                    id: id.clone(),
                    context_window: None,
                })
                .collect());
        }
        let cell = {
            let mut models = self.models.lock().await;
            Arc::clone(models.entry(name.to_string()).or_default())
        };
        cell.get_or_try_init(|| provider.list_models())
            .await
            .cloned()
    }

    /// The context window a session using `model` budgets for: the config's
    /// `context_window` > what the server reports > the table of well-known
    /// models > [`FALLBACK_CONTEXT_WINDOW`]. A server that cannot be asked
    /// now is asked again next time; an answer is kept.
    pub async fn context_window(&self, name: &str, model: &str) -> u64 {
        let Some(provider) = self.get(name) else {
            return FALLBACK_CONTEXT_WINDOW;
        };
        if let Some(configured) = provider.config().context_window {
            return configured;
        }
        let key = (name.to_string(), model.to_string());
        if let Some(known) = self.lock_windows().get(&key) {
            return *known;
        }
        // The model list is the one sessions already loaded (cached), so
        // this costs no request unless the server has more to say.
        let listed = self.models(name).await;
        let from_list = listed.as_ref().ok().and_then(|models| {
            models
                .iter()
                .find(|m| m.id == model)
                .and_then(|m| m.context_window)
        });
        let reported = match from_list {
            Some(window) => Ok(Some(window)),
            None => provider.reported_context_window(model).await,
        };
        for err in [listed.as_ref().err(), reported.as_ref().err()]
            .into_iter()
            .flatten()
        {
            tracing::debug!(provider = name, model, %err, "context window not reported");
        }
        let answered = listed.is_ok() && reported.is_ok();
        let window = reported
            .ok()
            .flatten()
            .or_else(|| known_models::context_window(model))
            .unwrap_or(FALLBACK_CONTEXT_WINDOW);
        // A server that could not be asked is asked again next time.
        if answered {
            self.lock_windows().insert(key, window);
        }
        window
    }

    /// The session that sent `cache_key` ended: every provider it may have
    /// used forgets it.
    pub fn session_ended(&self, cache_key: &str) {
        for provider in lock(&self.built).values() {
            provider.session_ended(cache_key);
        }
    }

    fn lock_windows(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), u64>> {
        crate::util::lock(&self.windows)
    }
}

fn build_provider(settings: &ProviderSettings) -> Arc<dyn Provider> {
    let settings = settings.clone();
    match settings.kind {
        ProviderKind::OpenAi => Arc::new(HttpProvider::<OpenAiFormat>::new(settings)),
        ProviderKind::Ollama => Arc::new(HttpProvider::<OllamaFormat>::new(settings)),
        ProviderKind::Anthropic => Arc::new(HttpProvider::<AnthropicFormat>::new(settings)),
    }
}
