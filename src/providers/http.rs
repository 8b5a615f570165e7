//! The one HTTP provider: a lazily built client, the API-key check, and
//! error statuses turned into errors that say what to do; the answer is read
//! by `stream`. What differs between the three provider types (paths, body,
//! headers, stream events, model lists) is their [`WireFormat`].

use std::sync::OnceLock;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::Value;

use super::overflow::in_window;
use super::settings::{KeySource, ProviderSettings};
use super::slots::{Props, ServerSlots, SlotId, SlotList, server_root};
use super::stream::{WireDecoder, event_stream};
use super::{ChatRequest, EventStream, ModelInfo, Provider, ProviderError};
use crate::util::{error_chain, truncate};

/// How long a model list or model lookup may take; it only fills a menu.
pub const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// Hosted APIs that cannot answer without a key.
const HOSTED: [&str; 2] = ["https://api.openai.com", "https://api.anthropic.com"];

/// One provider type's API: where to send what, and how to read the answer.
pub trait WireFormat: Send + Sync + 'static {
    type Decoder: WireDecoder;
    /// The streamed chat call, after the endpoint.
    const CHAT_PATH: &'static str;
    /// The model list, after the endpoint.
    const MODELS_PATH: &'static str;

    /// Whether the body can name a llama.cpp server slot (`id_slot`).
    const CHOOSES_SLOT: bool = false;

    /// The JSON text of a streamed chat request, on server slot `slot`
    /// where the format can say so.
    fn request_text(
        &self,
        request: &ChatRequest,
        settings: &ProviderSettings,
        slot: Option<SlotId>,
    ) -> String;

    /// The server's model list.
    fn parse_models(&self, body: &Value) -> Result<Vec<ModelInfo>, ModelListError>;

    /// The key, the way this API expects it: a bearer token unless the API
    /// says otherwise (a hosted Ollama behind a proxy included).
    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        key: Option<&str>,
    ) -> reqwest::RequestBuilder {
        match key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// Where to ask for a model's window beyond the model list, if the API
    /// has such a call: its path and JSON body.
    fn window_query(&self, _model: &str) -> Option<(&'static str, Value)> {
        None
    }

    /// The window in the answer to [`WireFormat::window_query`].
    fn parse_window(&self, _body: &Value) -> Option<u64> {
        None
    }
}

/// A provider that speaks `W` over HTTP.
pub struct HttpProvider<W> {
    settings: ProviderSettings,
    client: OnceLock<reqwest::Client>,
    wire: W,
    /// llama.cpp's slots, and which session asks for which.
    slots: ServerSlots,
}

impl<W: WireFormat + Default> HttpProvider<W> {
    pub fn new(settings: ProviderSettings) -> Self {
        Self {
            settings,
            client: OnceLock::new(),
            wire: W::default(),
            slots: ServerSlots::default(),
        }
    }
}

impl<W: WireFormat> Provider for HttpProvider<W> {
    fn config(&self) -> &ProviderSettings {
        &self.settings
    }

    fn stream_chat(
        &self,
        request: ChatRequest,
    ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
        Box::pin(self.start(request))
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<ModelInfo>, ProviderError>> {
        Box::pin(self.models())
    }

    fn reported_context_window<'a>(
        &'a self,
        model: &'a str,
    ) -> BoxFuture<'a, Result<Option<u64>, ProviderError>> {
        Box::pin(self.window(model))
    }

    fn session_ended(&self, cache_key: &str) {
        self.slots.release(cache_key);
    }
}

impl<W: WireFormat> HttpProvider<W> {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.settings.endpoint)
    }

    /// `POST` the chat request and stream the answer through the format's
    /// decoder. An unknown model is reported with what the server lists.
    async fn start(&self, request: ChatRequest) -> Result<EventStream, ProviderError> {
        self.check_key()?;
        let client = self.client()?;
        let url = self.url(W::CHAT_PATH);
        tracing::debug!(%url, model = %request.model, "chat request");
        let request = if super::tool_calling::is_prompted(&self.settings, &request.model) {
            super::tool_calling::prompted_request(request)
        } else {
            request
        };
        let slot = self.slot_for(&request).await;
        let body = self.wire.request_text(&request, &self.settings, slot);
        let sent = self
            .send(
                self.authorized(client.post(&url))
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body),
                &request.model,
            )
            .await;
        let window = request.context_window;
        let response = match sent {
            Ok(response) => response,
            Err(err) => {
                if slot.is_some() {
                    // Perhaps no such slot any more: a restarted server.
                    self.slots.recount();
                }
                return Err(in_window(self.with_listing(err).await, window));
            }
        };
        let events = event_stream(
            response,
            self.settings.timeout,
            self.settings.name.clone(),
            W::Decoder::default(),
        );
        Ok(events
            .map(move |item| item.map_err(|err| in_window(err, window)))
            .boxed())
    }

    /// The llama.cpp slot `request`'s session keeps, where the server is
    /// llama.cpp (its slots asked once, here) and the settings allow it.
    async fn slot_for(&self, request: &ChatRequest) -> Option<SlotId> {
        if !W::CHOOSES_SLOT || !self.settings.pins_slots() {
            return None;
        }
        let key = request.cache_key.as_deref()?;
        if self.slots.needs_count() {
            match self.slot_count().await {
                Ok(total) => self.slots.counted(total),
                // Not reached: asked again with the next request.
                Err(err) => tracing::debug!(%err, "llama.cpp slots not asked"),
            }
        }
        self.slots.slot_for(key)
    }

    /// `total_slots` of llama-server's `/props`, else the length of its
    /// `/slots` (older servers, or `/props` turned off); None when neither
    /// says. Err only when the server could not be reached.
    async fn slot_count(&self) -> Result<Option<u32>, ProviderError> {
        let client = self.client()?;
        let root = server_root(&self.settings.endpoint);
        let props = self
            .fetch_json(self.authorized(client.get(format!("{root}/props"))))
            .await;
        if let Err(err @ ProviderError::Unreachable { .. }) = props {
            return Err(err);
        }
        let total = (props.ok())
            .and_then(|body| Props::deserialize(body).ok())
            .and_then(|props| props.total_slots.into_option());
        if total.is_some() {
            return Ok(total);
        }
        let list = self
            .fetch_json(self.authorized(client.get(format!("{root}/slots"))))
            .await;
        Ok((list.ok())
            .and_then(|body| SlotList::deserialize(body).ok())
            .and_then(|list| u32::try_from(list.0.len()).ok()))
    }

    async fn models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        self.check_key()?;
        let client = self.client()?;
        let request = self.authorized(client.get(self.url(W::MODELS_PATH)));
        let body = self.fetch_json(request).await?;
        self.wire
            .parse_models(&body)
            .map_err(|err| ProviderError::Malformed {
                provider: self.settings.name.clone(),
                detail: err.to_string(),
            })
    }

    async fn window(&self, model: &str) -> Result<Option<u64>, ProviderError> {
        let Some((path, query)) = self.wire.window_query(model) else {
            return Ok(None);
        };
        self.check_key()?;
        let client = self.client()?;
        let request = self.authorized(client.post(self.url(path))).json(&query);
        Ok(self.wire.parse_window(&self.fetch_json(request).await?))
    }

    fn client(&self) -> Result<&reqwest::Client, ProviderError> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        // Built on first use: TLS set-up costs milliseconds that `initialize` should not pay.
        let client = reqwest::Client::builder()
            .connect_timeout(self.settings.connect_timeout)
            .build()
            .map_err(|err| ProviderError::Setup {
                provider: self.settings.name.clone(),
                detail: error_chain(&err),
            })?;
        Ok(self.client.get_or_init(|| client))
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let key = self
            .settings
            .api_key
            .as_ref()
            .map(|key| key.secret.expose());
        self.wire.authorize(request, key)
    }

    /// A hosted API with no key can only fail; say so before sending anything.
    fn check_key(&self) -> Result<(), ProviderError> {
        let settings = &self.settings;
        if settings.api_key.is_some() {
            return Ok(());
        }
        if let Some(var) = &settings.missing_key_variable {
            return Err(ProviderError::MissingKey {
                provider: settings.name.clone(),
                fix: format!(
                    "the config asks for ${{{var}}}, which is not set. Export {var} in the environment the editor starts the agent from."
                ),
            });
        }
        let hosted = HOSTED
            .iter()
            .any(|host| settings.endpoint.starts_with(host));
        if hosted && let Some(var) = settings.key_variable() {
            return Err(ProviderError::MissingKey {
                provider: settings.name.clone(),
                fix: format!(
                    "{} requires one. Export {var}, or set api_key = \"${{VARIABLE}}\" in [llm.providers.{}].",
                    settings.endpoint, settings.name
                ),
            });
        }
        Ok(())
    }

    /// Send a request; a non-2xx status becomes the matching error.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        model: &str,
    ) -> Result<reqwest::Response, ProviderError> {
        let response = request
            .send()
            .await
            .map_err(|err| connect_error(&self.settings, &err))?;
        self.slots.observe(response.headers());
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.text().await.unwrap_or_default();
        let retry_after =
            super::rate_limit::wait_hint(status, &headers, &body, jiff::Timestamp::now());
        Err(status_error(
            &self.settings,
            status,
            retry_after,
            &body,
            model,
        ))
    }

    /// A small JSON document (model lists, model details), under a short timeout.
    async fn fetch_json(&self, request: reqwest::RequestBuilder) -> Result<Value, ProviderError> {
        let response = self.send(request.timeout(METADATA_TIMEOUT), "").await?;
        let body = response
            .text()
            .await
            .map_err(|err| ProviderError::Truncated {
                provider: self.settings.name.clone(),
                detail: error_chain(&err),
            })?;
        serde_json::from_str(&body).map_err(|err| ProviderError::Malformed {
            provider: self.settings.name.clone(),
            detail: format!("expected JSON ({err}): {}", truncate(&body, 200)),
        })
    }

    /// Fill in what the server offers when the model was not found, so the
    /// user can pick one without leaving the editor.
    async fn with_listing(&self, err: ProviderError) -> ProviderError {
        let ProviderError::ModelNotFound {
            provider, model, ..
        } = err
        else {
            return err;
        };
        let listing = match self.models().await {
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
}

/// A model list the agent cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelListError {
    #[error("the model list has no `{0}` array")]
    NoArray(&'static str),
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
                KeySource::Client => " the client set with providers/set".to_string(),
            },
        ),
        None => (
            " (no key was sent)".into(),
            match config.key_variable() {
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
    // The built-in default is what runs when there is no config file: the
    // user may never have written a provider table to check.
    let builtin = ProviderSettings::local_ollama();
    let fix = if config.name == builtin.name && config.endpoint == builtin.endpoint {
        "Is Ollama running? With no config file this is the built-in default: \
         `crucible-agent setup` writes a config for the provider and model you choose \
         (with a config file, check `endpoint` in [llm.providers.ollama])."
            .to_string()
    } else {
        format!(
            "Is the server running? Check `endpoint` in [llm.providers.{}].",
            config.name
        )
    };
    ProviderError::Unreachable {
        provider: config.name.clone(),
        endpoint: config.endpoint.clone(),
        detail,
        fix,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unreachable_built_in_default_points_to_setup_not_to_a_table() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let refused = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{port}/"))
            .send()
            .await
            .unwrap_err();
        let builtin = connect_error(&ProviderSettings::local_ollama(), &refused).to_string();
        assert!(builtin.contains("`crucible-agent setup`"), "{builtin}");
        let mut configured = ProviderSettings::local_ollama();
        configured.name = "local".into();
        let text = connect_error(&configured, &refused).to_string();
        assert!(
            text.contains("Check `endpoint` in [llm.providers.local]") && !text.contains("setup"),
            "{text}"
        );
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
