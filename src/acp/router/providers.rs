//! The unstable `providers/list`, `providers/set` and `providers/disable`:
//! the client sees the configured LLM providers and reroutes or turns
//! them off. Only providers the config names; the key a client sets comes
//! in its `Authorization` or `x-api-key` header and is never shown again.

use agent_client_protocol_schema::v1 as acp;
use thiserror::Error;

use super::Router;
use crate::providers::settings::{
    ApiKey, KeySource, ProviderKind, ProviderSettings, ProviderType, Secret,
};
use crate::transport::{Responder, RpcError};

/// The protocols any provider here can be switched to.
fn supported() -> Vec<acp::LlmProtocol> {
    vec![
        acp::LlmProtocol::OpenAi,
        acp::LlmProtocol::Anthropic,
        acp::LlmProtocol::Other("_ollama".into()),
    ]
}

fn protocol_of(kind: ProviderKind) -> acp::LlmProtocol {
    match kind {
        ProviderKind::OpenAi => acp::LlmProtocol::OpenAi,
        ProviderKind::Anthropic => acp::LlmProtocol::Anthropic,
        ProviderKind::Ollama => acp::LlmProtocol::Other("_ollama".into()),
    }
}

/// Why a `providers/set` is refused; a header's value is never echoed (it
/// may be a secret).
#[derive(Debug, Error)]
pub enum SetProviderError {
    #[error(
        "providers/set: field `apiType` is {0}, a protocol this agent does not speak; use openai, anthropic or _ollama"
    )]
    Protocol(String),
    #[error(
        "providers/set: field `baseUrl` is `{0}`, not an http(s) URL; send the server's base URL, e.g. http://127.0.0.1:8080/v1"
    )]
    BaseUrl(String),
    #[error(
        "providers/set: header `{0}` is not one this agent sends; it sends the provider's key only (`Authorization: Bearer …` or `x-api-key`)"
    )]
    Header(String),
}

fn kind_of(protocol: &acp::LlmProtocol) -> Result<(ProviderKind, ProviderType), SetProviderError> {
    match protocol {
        acp::LlmProtocol::OpenAi => Ok((ProviderKind::OpenAi, ProviderType::Custom)),
        acp::LlmProtocol::Anthropic => Ok((ProviderKind::Anthropic, ProviderType::Anthropic)),
        acp::LlmProtocol::Other(name) if name == "_ollama" || name == "ollama" => {
            Ok((ProviderKind::Ollama, ProviderType::Ollama))
        }
        other => Err(SetProviderError::Protocol(
            serde_json::to_string(other).unwrap_or_default(),
        )),
    }
}

/// One provider for `providers/list`: the default one cannot be disabled.
pub fn info(name: &str, config: Option<&ProviderSettings>, default: &str) -> acp::ProviderInfo {
    let current = config
        .map(|config| acp::ProviderCurrentConfig::new(protocol_of(config.kind), &config.endpoint));
    acp::ProviderInfo::new(name.to_string(), supported(), name == default, current)
}

/// The settings a `providers/set` asks for, from the configured ones.
pub fn settings_for<'a>(
    base: &ProviderSettings,
    api_type: &acp::LlmProtocol,
    base_url: &str,
    headers: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<ProviderSettings, SetProviderError> {
    let (kind, service) = kind_of(api_type)?;
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
    pub(in crate::acp) fn list_providers(
        &mut self,
        _: acp::ListProvidersRequest,
        responder: Responder,
    ) {
        let (providers, default) = self.sessions.providers();
        let listed = providers
            .all()
            .iter()
            .map(|(name, config)| info(name, config.as_deref(), &default))
            .collect();
        responder.respond_with(Ok(acp::ListProvidersResponse::new(listed)));
    }

    pub(in crate::acp) fn set_provider(
        &mut self,
        request: acp::SetProviderRequest,
        responder: Responder,
    ) {
        let (providers, _) = self.sessions.providers();
        let name = request.provider_id.0.to_string();
        let Some(base) = providers.configured(&name) else {
            return responder.respond(Err(unknown(&name)));
        };
        let answer = settings_for(
            &base,
            &request.api_type,
            &request.base_url,
            &request.headers,
        )
        .map_err(|err| RpcError::invalid_params(err.to_string()))
        .and_then(|settings| {
            providers
                .replace(&name, Some(settings))
                .map_err(|err| RpcError::invalid_params(err.to_string()))
        });
        tracing::info!(provider = %name, ok = answer.is_ok(), "providers/set");
        responder.respond_with(answer.map(|()| acp::SetProviderResponse::new()));
    }

    pub(in crate::acp) fn disable_provider(
        &mut self,
        request: acp::DisableProviderRequest,
        responder: Responder,
    ) {
        let (providers, default) = self.sessions.providers();
        let name = request.provider_id.0.to_string();
        if providers.configured(&name).is_none() {
            return responder.respond(Err(unknown(&name)));
        }
        if name == default {
            return responder.respond(Err(RpcError::invalid_params(format!(
                "providers/disable: `{name}` is the default provider ([chat] default_provider) and cannot be disabled; providers/list marks it required"
            ))));
        }
        let answer = providers
            .replace(&name, None)
            .map_err(|err| RpcError::invalid_params(err.to_string()));
        tracing::info!(provider = %name, "providers/disable");
        responder.respond_with(answer.map(|()| acp::DisableProviderResponse::new()));
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
    use std::collections::HashMap;

    fn base() -> ProviderSettings {
        ProviderSettings::local_ollama()
    }

    #[test]
    fn a_bearer_header_becomes_the_key_and_the_url_the_endpoint() {
        let headers = HashMap::from([("Authorization".to_string(), "Bearer sk-1".to_string())]);
        let set = settings_for(
            &base(),
            &acp::LlmProtocol::OpenAi,
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
        let headers = HashMap::from([("X-Route".to_string(), "secret-route".to_string())]);
        let err = settings_for(
            &base(),
            &acp::LlmProtocol::OpenAi,
            "https://x.test",
            &headers,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("`X-Route`") && !err.contains("secret-route"),
            "{err}"
        );
        let none = HashMap::new();
        let err = settings_for(&base(), &acp::LlmProtocol::Bedrock, "https://x.test", &none)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bedrock"), "{err}");
        let err = settings_for(&base(), &acp::LlmProtocol::OpenAi, "ftp://x", &none)
            .unwrap_err()
            .to_string();
        assert!(err.contains("baseUrl"), "{err}");
    }

    #[test]
    fn the_list_shows_protocol_url_and_which_is_required() {
        let config = base();
        let listed = serde_json::to_value(info("local", Some(&config), "local")).unwrap();
        assert_eq!(listed["providerId"], "local");
        assert_eq!(listed["required"], true);
        assert_eq!(listed["current"]["apiType"], "_ollama");
        assert_eq!(listed["current"]["baseUrl"], config.endpoint.as_str());
        let off = serde_json::to_value(info("spare", None, "local")).unwrap();
        assert_eq!(off["required"], false);
        assert!(
            off.get("current").is_none_or(serde_json::Value::is_null),
            "{off}"
        );
    }
}
