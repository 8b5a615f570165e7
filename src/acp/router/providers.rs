//! The unstable `providers/list`, `providers/set` and `providers/disable`:
//! the client sees the configured LLM providers and reroutes or turns
//! them off. Only providers the config names; the key a client sets comes
//! in its `Authorization` or `x-api-key` header and is never shown again.

use thiserror::Error;

use super::Router;
use crate::acp::request::{AskedProtocol, ProviderChange, ProviderListing, Reply};
use crate::providers::settings::{
    ApiKey, KeySource, ProviderKind, ProviderSettings, ProviderType, Secret,
};
use crate::transport::RpcError;

/// Why a `providers/set` is refused; a header's value is never echoed (it
/// may be a secret).
#[derive(Debug, Error)]
pub enum SetProviderError {
    #[error(
        "field `apiType` is {0}, a protocol this agent does not speak; use openai, anthropic or _ollama"
    )]
    Protocol(String),
    #[error(
        "field `baseUrl` is `{0}`, not an http(s) URL; send the server's base URL, e.g. http://127.0.0.1:8080/v1"
    )]
    BaseUrl(String),
    #[error(
        "header `{0}` is not one this agent sends; it sends the provider's key only (`Authorization: Bearer …` or `x-api-key`)"
    )]
    Header(String),
}

/// The service a provider of `kind` set by a client is.
fn service_of(kind: ProviderKind) -> ProviderType {
    match kind {
        ProviderKind::OpenAi => ProviderType::Custom,
        ProviderKind::Anthropic => ProviderType::Anthropic,
        ProviderKind::Ollama => ProviderType::Ollama,
    }
}

/// One configured provider for `providers/list`.
pub fn listing(name: &str, config: Option<&ProviderSettings>, default: &str) -> ProviderListing {
    ProviderListing {
        name: name.to_string(),
        current: config.map(|config| (config.kind, config.endpoint.clone())),
        required: name == default,
    }
}

/// The settings a `providers/set` asks for, from the configured ones.
pub fn settings_for<'a>(
    base: &ProviderSettings,
    protocol: &AskedProtocol,
    base_url: &str,
    headers: impl IntoIterator<Item = &'a (String, String)>,
) -> Result<ProviderSettings, SetProviderError> {
    let kind = match protocol {
        AskedProtocol::Spoken(kind) => *kind,
        AskedProtocol::Unknown(name) => return Err(SetProviderError::Protocol(name.clone())),
    };
    let service = service_of(kind);
    let url = base_url.trim().trim_end_matches('/');
    if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 10 {
        return Err(SetProviderError::BaseUrl(url.to_string()));
    }
    let mut api_key = None;
    for (header, value) in headers {
        let key = match header.to_ascii_lowercase().as_str() {
            "authorization" => value.strip_prefix("Bearer ").unwrap_or(value),
            "x-api-key" => value.as_str(),
            // The header's value may be a secret: never echoed.
            _ => {
                return Err(SetProviderError::Header(header.clone()));
            }
        };
        api_key = Some(ApiKey {
            secret: Secret::new(key.trim()),
            source: KeySource::Client,
        });
    }
    Ok(ProviderSettings {
        kind,
        service,
        endpoint: url.to_string(),
        api_key,
        missing_key_variable: None,
        ..base.clone()
    })
}

impl Router {
    pub(in crate::acp) fn list_providers(&mut self, reply: Reply<Vec<ProviderListing>>) {
        let (providers, default) = self.sessions.providers();
        let listed = providers
            .all()
            .iter()
            .map(|(name, config)| listing(name, config.as_deref(), &default))
            .collect();
        reply.send(Ok(listed));
    }

    pub(in crate::acp) fn set_provider(&mut self, change: ProviderChange, reply: Reply<()>) {
        let (providers, _) = self.sessions.providers();
        let name = change.provider;
        let Some(base) = providers.configured(&name) else {
            return reply.fail(unknown(&name));
        };
        let answer = settings_for(&base, &change.protocol, &change.base_url, &change.headers)
            .map_err(|err| RpcError::invalid_params(err.to_string()))
            .and_then(|settings| {
                providers
                    .replace(&name, Some(settings))
                    .map_err(|err| RpcError::invalid_params(err.to_string()))
            });
        tracing::info!(provider = %name, ok = answer.is_ok(), "provider set by the client");
        reply.send(answer);
    }

    pub(in crate::acp) fn disable_provider(&mut self, name: &str, reply: Reply<()>) {
        let (providers, default) = self.sessions.providers();
        if providers.configured(name).is_none() {
            return reply.fail(unknown(name));
        }
        if name == default {
            return reply.fail(RpcError::invalid_params(format!(
                "providers/disable: `{name}` is the default provider ([chat] default_provider) and cannot be disabled; providers/list marks it required"
            )));
        }
        let answer = providers
            .replace(name, None)
            .map_err(|err| RpcError::invalid_params(err.to_string()));
        tracing::info!(provider = %name, "providers/disable");
        reply.send(answer);
    }
}

fn unknown(name: &str) -> RpcError {
    RpcError::invalid_params(format!(
        "no provider `{name}` in this agent's config; providers/list names them"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> ProviderSettings {
        ProviderSettings::local_ollama()
    }

    #[test]
    fn a_bearer_header_becomes_the_key_and_the_url_the_endpoint() {
        let headers = [("Authorization".to_string(), "Bearer sk-1".to_string())];
        let set = settings_for(
            &base(),
            &AskedProtocol::Spoken(ProviderKind::OpenAi),
            "https://x.test/v1/",
            &headers,
        )
        .unwrap();
        assert_eq!(set.kind, ProviderKind::OpenAi);
        assert_eq!(set.endpoint, "https://x.test/v1");
        let key = set.api_key.unwrap();
        assert_eq!(key.secret.expose(), "sk-1");
        assert_eq!(key.source, KeySource::Client);
        assert_eq!(set.default_model, base().default_model);
    }

    #[test]
    fn unknown_headers_protocols_and_urls_are_refused_without_echoing_values() {
        let headers = [("X-Route".to_string(), "secret-route".to_string())];
        let err = settings_for(
            &base(),
            &AskedProtocol::Spoken(ProviderKind::OpenAi),
            "https://x.test",
            &headers,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("`X-Route`") && !err.contains("secret-route"),
            "{err}"
        );
        let none: [(String, String); 0] = [];
        let bedrock =
            crate::acp::v1::provider_kind(&agent_client_protocol_schema::v1::LlmProtocol::Bedrock);
        let err = settings_for(&base(), &bedrock, "https://x.test", &none)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bedrock"), "{err}");
        let err = settings_for(
            &base(),
            &AskedProtocol::Spoken(ProviderKind::OpenAi),
            "ftp://x",
            &none,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("baseUrl"), "{err}");
    }

    #[test]
    fn the_list_shows_protocol_url_and_which_is_required() {
        let config = base();
        let info = |name: &str, config: Option<&ProviderSettings>| {
            let infos = crate::acp::v1::provider_infos(vec![listing(name, config, "local")]);
            serde_json::to_value(&infos[0]).unwrap()
        };
        let listed = info("local", Some(&config));
        assert_eq!(listed["providerId"], "local");
        assert_eq!(listed["required"], true);
        assert_eq!(listed["current"]["apiType"], "_ollama");
        assert_eq!(listed["current"]["baseUrl"], config.endpoint.as_str());
        let off = info("spare", None);
        assert_eq!(off["required"], false);
        assert!(
            off.get("current").is_none_or(serde_json::Value::is_null),
            "{off}"
        );
    }
}
