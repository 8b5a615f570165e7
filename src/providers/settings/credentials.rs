//! Whether the configured providers can be used without signing in: a
//! local server or a keyless endpoint needs nothing, a hosted service
//! needs its key. Read from the settings alone (no request is made), so
//! "has a key" never means "the key works".

use super::ProviderSettings;
use super::key::KeySource;
use super::locality::is_local_endpoint;

/// What one provider needs before it can be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// On this machine or its network: no sign-in.
    Local,
    /// Hosted, but of a type that takes no key (a custom endpoint without one).
    Keyless,
    /// Hosted, and its key is configured (from where, never the key).
    Key(KeySource),
    /// Hosted, and its key is missing: the variable that would hold it.
    Missing { variable: Option<String> },
}

impl Credential {
    pub fn of(settings: &ProviderSettings) -> Self {
        if let Some(key) = &settings.api_key {
            return if is_local_endpoint(&settings.endpoint) {
                Credential::Local
            } else {
                Credential::Key(key.source.clone())
            };
        }
        if is_local_endpoint(&settings.endpoint) {
            return Credential::Local;
        }
        let variable = (settings.missing_key_variable.clone())
            .or_else(|| settings.key_variable().map(str::to_string));
        match variable {
            Some(variable) => Credential::Missing {
                variable: Some(variable),
            },
            None => Credential::Keyless,
        }
    }
}

/// The agent's sign-in state over every enabled provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignIn {
    /// Every provider is local or keyless.
    NotRequired,
    /// Every hosted provider that takes a key has one.
    Ready,
    /// These providers (by name) have no key.
    Missing(Vec<(String, Option<String>)>),
}

/// The state of `providers` (name, settings), enabled ones only.
pub fn sign_in<'a>(providers: impl IntoIterator<Item = (&'a str, &'a ProviderSettings)>) -> SignIn {
    let mut keyed = false;
    let mut missing = Vec::new();
    for (name, settings) in providers {
        match Credential::of(settings) {
            Credential::Local | Credential::Keyless => {}
            Credential::Key(_) => keyed = true,
            Credential::Missing { variable } => missing.push((name.to_string(), variable)),
        }
    }
    match (missing.is_empty(), keyed) {
        (false, _) => SignIn::Missing(missing),
        (true, true) => SignIn::Ready,
        (true, false) => SignIn::NotRequired,
    }
}

#[cfg(test)]
mod tests {
    use super::super::key::{ApiKey, Secret};
    use super::super::service::ProviderType;
    use super::*;

    fn provider(service: ProviderType, endpoint: &str, key: bool) -> ProviderSettings {
        ProviderSettings {
            service,
            endpoint: endpoint.into(),
            api_key: key.then(|| ApiKey {
                secret: Secret::new("sk-test"),
                source: KeySource::EnvVar("OPENAI_API_KEY".into()),
            }),
            ..ProviderSettings::local_ollama()
        }
    }

    #[test]
    fn local_and_keyless_need_nothing_hosted_ones_need_their_key() {
        let local = provider(ProviderType::OpenAi, "http://127.0.0.1:8080/v1", false);
        let keyless = provider(ProviderType::Custom, "https://llm.example.com/v1", false);
        let keyed = provider(ProviderType::OpenAi, "https://api.openai.com/v1", true);
        let unkeyed = provider(ProviderType::Anthropic, "https://api.anthropic.com", false);
        assert_eq!(Credential::of(&local), Credential::Local);
        assert_eq!(Credential::of(&keyless), Credential::Keyless);
        assert!(matches!(Credential::of(&keyed), Credential::Key(_)));
        assert_eq!(
            Credential::of(&unkeyed),
            Credential::Missing {
                variable: Some("ANTHROPIC_API_KEY".into())
            }
        );
        assert_eq!(
            sign_in([("a", &local), ("b", &keyless)]),
            SignIn::NotRequired
        );
        assert_eq!(sign_in([("a", &local), ("c", &keyed)]), SignIn::Ready);
        assert_eq!(
            sign_in([("c", &keyed), ("d", &unkeyed)]),
            SignIn::Missing(vec![("d".into(), Some("ANTHROPIC_API_KEY".into()))])
        );
        assert_eq!(sign_in([]), SignIn::NotRequired);
    }
}
