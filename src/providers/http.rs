//! What the three wire formats share: a lazily built HTTP client per
//! provider, the API-key check, error statuses turned into errors that say
//! what to do, and a response body pumped through a format's decoder under an
//! idle timeout.

use std::sync::OnceLock;
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use serde_json::Value;

use super::settings::{KeySource, ProviderKind, ProviderSettings};
use super::{EventStream, ModelInfo, ProviderError, ProviderEvent};

/// The Messages API version this client speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How long a model list or model lookup may take; it only fills a menu.
pub const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// Hosted APIs that cannot answer without a key.
const HOSTED: [&str; 2] = ["https://api.openai.com", "https://api.anthropic.com"];

pub struct HttpBase {
    pub config: ProviderSettings,
    client: OnceLock<reqwest::Client>,
}

impl HttpBase {
    pub fn new(config: ProviderSettings) -> Self {
        Self {
            config,
            client: OnceLock::new(),
        }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    pub fn client(&self) -> Result<&reqwest::Client, ProviderError> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        // Built on first use: TLS set-up costs milliseconds that `initialize` should not pay.
        let client = reqwest::Client::builder()
            .connect_timeout(self.config.connect_timeout)
            .build()
            .map_err(|err| ProviderError::Setup {
                provider: self.config.name.clone(),
                detail: error_chain(&err),
            })?;
        Ok(self.client.get_or_init(|| client))
    }

    pub fn key(&self) -> Option<&str> {
        self.config.api_key.as_ref().map(|key| key.secret.expose())
    }

    /// The key, the way the provider type expects it: Anthropic's own
    /// headers, a bearer token for everyone else (a hosted Ollama behind a
    /// proxy included).
    pub fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self.config.kind {
            ProviderKind::Anthropic => {
                let request = request.header("anthropic-version", ANTHROPIC_VERSION);
                match self.key() {
                    Some(key) => request.header("x-api-key", key),
                    None => request,
                }
            }
            ProviderKind::OpenAi | ProviderKind::Ollama => match self.key() {
                Some(key) => request.bearer_auth(key),
                None => request,
            },
        }
    }

    /// `POST` a chat request (`body`: JSON text) to `url` and stream the answer through
    /// `decoder`. An unknown model is reported with what `models` lists.
    pub async fn start_stream(
        &self,
        url: &str,
        body: String,
        model: &str,
        framing: Framing,
        decoder: impl WireDecoder,
        models: impl Future<Output = Result<Vec<ModelInfo>, ProviderError>>,
    ) -> Result<EventStream, ProviderError> {
        self.check_key()?;
        let client = self.client()?;
        tracing::debug!(%url, model, "chat request");
        let sent = self
            .send(
                self.authorized(client.post(url))
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body),
                model,
            )
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(err) => return Err(self.with_listing(err, models).await),
        };
        Ok(event_stream(
            response,
            framing,
            self.config.timeout,
            self.config.name.clone(),
            decoder,
        ))
    }

    /// `GET` a small JSON document (a model list), authorized.
    pub async fn get_json(&self, url: &str) -> Result<Value, ProviderError> {
        self.check_key()?;
        let client = self.client()?;
        self.fetch_json(self.authorized(client.get(url))).await
    }

    /// `POST` a small JSON request and read its JSON answer, authorized.
    pub async fn post_json(&self, url: &str, body: &Value) -> Result<Value, ProviderError> {
        self.check_key()?;
        let client = self.client()?;
        self.fetch_json(self.authorized(client.post(url)).json(body))
            .await
    }

    /// A hosted API with no key can only fail; say so before sending anything.
    pub fn check_key(&self) -> Result<(), ProviderError> {
        if self.config.api_key.is_some() {
            return Ok(());
        }
        if let Some(var) = &self.config.missing_key_variable {
            return Err(ProviderError::MissingKey {
                provider: self.config.name.clone(),
                fix: format!(
                    "the config asks for ${{{var}}}, which is not set. Export {var} in the environment the editor starts the agent from."
                ),
            });
        }
        let hosted = HOSTED
            .iter()
            .any(|host| self.config.endpoint.starts_with(host));
        if hosted && let Some(var) = self.config.kind.conventional_key_variable() {
            return Err(ProviderError::MissingKey {
                provider: self.config.name.clone(),
                fix: format!(
                    "{} requires one. Export {var}, or set api_key = \"${{VARIABLE}}\" in [llm.providers.{}].",
                    self.config.endpoint, self.config.name
                ),
            });
        }
        Ok(())
    }

    /// Send a request; a non-2xx status becomes the matching error.
    pub async fn send(
        &self,
        request: reqwest::RequestBuilder,
        model: &str,
    ) -> Result<reqwest::Response, ProviderError> {
        let response = request
            .send()
            .await
            .map_err(|err| connect_error(&self.config, &err))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let body = response.text().await.unwrap_or_default();
        Err(status_error(
            &self.config,
            status,
            retry_after,
            &body,
            model,
        ))
    }

    /// A small JSON document (model lists, model details), under a short timeout.
    pub async fn fetch_json(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, ProviderError> {
        let response = self.send(request.timeout(METADATA_TIMEOUT), "").await?;
        let body = response
            .text()
            .await
            .map_err(|err| ProviderError::Truncated {
                provider: self.config.name.clone(),
                detail: error_chain(&err),
            })?;
        serde_json::from_str(&body).map_err(|err| ProviderError::Malformed {
            provider: self.config.name.clone(),
            detail: format!("expected JSON ({err}): {}", truncate(&body, 200)),
        })
    }

    /// Fill in what the server offers when the model was not found, so the
    /// user can pick one without leaving the editor.
    pub async fn with_listing(
        &self,
        err: ProviderError,
        models: impl Future<Output = Result<Vec<ModelInfo>, ProviderError>>,
    ) -> ProviderError {
        let ProviderError::ModelNotFound {
            provider, model, ..
        } = err
        else {
            return err;
        };
        let listing = match models.await {
            Ok(models) if !models.is_empty() => format!(
                "; it offers: {}",
                models
                    .iter()
                    .map(|m| m.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => String::new(),
        };
        ProviderError::ModelNotFound {
            provider,
            model,
            listing,
        }
    }

    pub fn malformed(&self, detail: impl Into<String>) -> ProviderError {
        ProviderError::Malformed {
            provider: self.config.name.clone(),
            detail: detail.into(),
        }
    }
}

/// The error for an HTTP status the server answered instead of a stream.
pub fn status_error(
    config: &ProviderSettings,
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
    model: &str,
) -> ProviderError {
    let detail = error_message(body).unwrap_or_else(|| truncate(body, 300));
    let provider = config.name.clone();
    if status == 401 || status == 403 {
        let (from, hint) = key_hint(config);
        return ProviderError::Auth {
            provider,
            status,
            from,
            hint,
            detail,
        };
    }
    if !model.is_empty() && mentions_unknown_model(status, body) {
        return ProviderError::ModelNotFound {
            provider,
            model: model.to_string(),
            listing: String::new(),
        };
    }
    ProviderError::Http {
        provider,
        status,
        detail,
        retry_after,
    }
}

fn mentions_unknown_model(status: u16, body: &str) -> bool {
    if status == 404 {
        return true;
    }
    let lower = body.to_ascii_lowercase();
    (status == 400 || status == 422)
        && lower.contains("model")
        && (lower.contains("not found")
            || lower.contains("does not exist")
            || lower.contains("model_not_found")
            || lower.contains("unknown model"))
}

/// The message of an error body: OpenAI and Anthropic nest it in
/// `error.message`, Ollama sends `{"error": "…"}`.
pub fn error_message(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let error = value.get("error")?;
    match error {
        Value::String(text) => Some(text.clone()),
        _ => error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

/// Where to tell the user to put a key, in words: (where the key came from,
/// what to check).
pub fn key_hint(config: &ProviderSettings) -> (String, String) {
    match &config.api_key {
        Some(key) => (
            format!(" from {}", key.source),
            match &key.source {
                KeySource::EnvVar(var) => format!(" in {var}"),
                KeySource::ConfigLiteral => format!(" in [llm.providers.{}] api_key", config.name),
                KeySource::File(path) => format!(" in {}", path.display()),
            },
        ),
        None => (
            " (no key was sent)".into(),
            match config.kind.conventional_key_variable() {
                Some(var) => format!(
                    "; set api_key = \"${{{var}}}\" in [llm.providers.{}] and export {var}",
                    config.name
                ),
                None => format!("; set api_key in [llm.providers.{}]", config.name),
            },
        ),
    }
}

/// Map a transport failure from reqwest into a message that names the endpoint.
pub fn connect_error(config: &ProviderSettings, err: &reqwest::Error) -> ProviderError {
    let detail = if err.is_connect() {
        "connection refused or host not found".to_string()
    } else if err.is_timeout() {
        format!("no answer within {} s", config.connect_timeout.as_secs())
    } else {
        error_chain(err)
    };
    ProviderError::Unreachable {
        provider: config.name.clone(),
        endpoint: config.endpoint.clone(),
        detail,
    }
}

/// An error and its causes on one line (reqwest's top-level text alone is vague).
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// `Retry-After` (seconds) or OpenAI's `retry-after-ms`, when given.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
    let seconds = header("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| header("retry-after"))?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

pub fn truncate(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Turns one wire format's framed payloads into [`ProviderEvent`]s. Pure, so
/// every quirk is tested without a server.
pub trait WireDecoder: Send + 'static {
    /// One SSE event (its `event:` name, empty when absent, and its data), or
    /// one NDJSON line (empty name).
    fn on_event(&mut self, event: &str, data: &str) -> Vec<Result<ProviderEvent, ProviderError>>;
    /// The body ended. Anything incomplete is an error here.
    fn finish(&mut self) -> Vec<Result<ProviderEvent, ProviderError>>;
    /// The format's own end marker arrived; stop reading.
    fn done(&self) -> bool;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `text/event-stream` (OpenAI, Anthropic).
    Sse,
    /// One JSON document per line (Ollama).
    Ndjson,
}

/// Feed a streaming response through `decoder`. No bytes for `idle` ends
/// the stream with [`ProviderError::IdleTimeout`]; a slow but steady stream
/// is never cut. Dropping the stream closes the connection.
pub fn event_stream(
    response: reqwest::Response,
    framing: Framing,
    idle: Duration,
    provider: String,
    mut decoder: impl WireDecoder,
) -> EventStream {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let send_all = |items: Vec<Result<ProviderEvent, ProviderError>>| {
            for item in items {
                let failed = item.is_err();
                if tx.send(item).is_err() || failed {
                    return false;
                }
            }
            true
        };
        let idle_error = || ProviderError::IdleTimeout {
            provider: provider.clone(),
            seconds: idle.as_secs(),
        };
        let truncated = |detail: String| ProviderError::Truncated {
            provider: provider.clone(),
            detail,
        };
        match framing {
            Framing::Sse => {
                let mut events = response.bytes_stream().eventsource();
                loop {
                    let Ok(next) = tokio::time::timeout(idle, events.next()).await else {
                        send_all(vec![Err(idle_error())]);
                        return;
                    };
                    let items = match next {
                        Some(Ok(event)) => decoder.on_event(&event.event, &event.data),
                        Some(Err(EventStreamError::Transport(err))) => {
                            vec![Err(truncated(error_chain(&err)))]
                        }
                        Some(Err(err)) => vec![Err(ProviderError::Malformed {
                            provider: provider.clone(),
                            detail: format!("the event stream cannot be read: {err}"),
                        })],
                        None => {
                            send_all(decoder.finish());
                            return;
                        }
                    };
                    if !send_all(items) || decoder.done() {
                        return;
                    }
                }
            }
            Framing::Ndjson => {
                let mut bytes = response.bytes_stream();
                let mut buffer: Vec<u8> = Vec::new();
                loop {
                    let Ok(next) = tokio::time::timeout(idle, bytes.next()).await else {
                        send_all(vec![Err(idle_error())]);
                        return;
                    };
                    let ended = match next {
                        Some(Ok(chunk)) => {
                            buffer.extend_from_slice(&chunk);
                            false
                        }
                        Some(Err(err)) => {
                            send_all(vec![Err(truncated(error_chain(&err)))]);
                            return;
                        }
                        None => true,
                    };
                    // Whole lines only: a chunk may end inside a line or a character.
                    let mut lines: Vec<Vec<u8>> = Vec::new();
                    while let Some(end) = buffer.iter().position(|&b| b == b'\n') {
                        lines.push(buffer.drain(..=end).collect());
                    }
                    if ended && !buffer.is_empty() {
                        lines.push(std::mem::take(&mut buffer));
                    }
                    for line in lines {
                        let items = match std::str::from_utf8(&line) {
                            Ok(text) if text.trim().is_empty() => continue,
                            Ok(text) => decoder.on_event("", text.trim()),
                            Err(err) => vec![Err(ProviderError::Malformed {
                                provider: provider.clone(),
                                detail: format!("a stream line is not UTF-8: {err}"),
                            })],
                        };
                        if !send_all(items) || decoder.done() {
                            return;
                        }
                    }
                    if ended {
                        send_all(decoder.finish());
                        return;
                    }
                }
            }
        }
    });
    let abort = AbortOnDrop(task);
    futures::stream::unfold((rx, abort), |(mut rx, abort)| async move {
        rx.recv().await.map(|item| (item, (rx, abort)))
    })
    .boxed()
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    #[test]
    fn retry_after_reads_seconds_and_milliseconds() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(1500)));
        let mut dated = HeaderMap::new();
        dated.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&dated), None);
    }

    #[test]
    fn error_bodies_of_all_three_formats_are_read() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad model","type":"invalid_request_error"}}"#)
                .as_deref(),
            Some("bad model")
        );
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            )
            .as_deref(),
            Some("Overloaded")
        );
        assert_eq!(
            error_message(r#"{"error":"model \"x\" not found, try pulling it first"}"#).as_deref(),
            Some("model \"x\" not found, try pulling it first")
        );
        assert_eq!(error_message("<html>busy</html>"), None);
    }
}
