//! A provider's fallback chain (`fallback = ["PROVIDER", "PROVIDER/MODEL"]`):
//! where a turn goes on when the provider keeps failing. The chain is the
//! list of the provider the turn started on, tried in order; chains are not
//! followed into each other, so `a → b` and `b → a` is fine and nothing
//! loops.

use std::collections::BTreeMap;

pub use super::settings::FallbackTarget;
use super::settings::{InvalidSetting, ProviderSettings};

/// Every chain names configured providers, and none falls back to the very
/// provider and model it starts from (the retry already did that).
pub fn check_chains(providers: &BTreeMap<String, ProviderSettings>) -> Result<(), InvalidSetting> {
    for (name, settings) in providers {
        let key = format!("llm.providers.{name}.fallback");
        for target in &settings.fallback {
            let Some(next) = providers.get(&target.provider) else {
                return Err(InvalidSetting {
                    key,
                    problem: format!(
                        "names the provider `{}`, which is not configured",
                        target.provider
                    ),
                    fix: format!(
                        "Name one of the configured providers ({}) or add [llm.providers.{}].",
                        providers.keys().cloned().collect::<Vec<_>>().join(", "),
                        target.provider
                    ),
                });
            };
            if target.provider == *name && target.model_of(next) == settings.default_model {
                return Err(InvalidSetting {
                    key,
                    problem: format!(
                        "falls back to `{target}`, the provider and model it starts from"
                    ),
                    fix: format!(
                        "Name another provider, or another model of this one (\"{name}/OTHER-MODEL\")."
                    ),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(name: &str, fallback: &[&str]) -> (String, ProviderSettings) {
        let mut settings = ProviderSettings::local_ollama();
        settings.name = name.into();
        settings.default_model = "m".into();
        settings.fallback = fallback
            .iter()
            .map(|entry| FallbackTarget::parse(entry).unwrap())
            .collect();
        (name.to_string(), settings)
    }

    #[test]
    fn entries_name_a_provider_and_maybe_a_model_with_slashes() {
        assert_eq!(
            FallbackTarget::parse("or/anthropic/claude"),
            Some(FallbackTarget {
                provider: "or".into(),
                model: Some("anthropic/claude".into())
            })
        );
        assert_eq!(FallbackTarget::parse(" b ").unwrap().to_string(), "b");
        assert_eq!(FallbackTarget::parse("/m"), None);
        assert_eq!(FallbackTarget::parse("b/"), None);
        assert_eq!(FallbackTarget::parse(""), None);
    }

    #[test]
    fn chains_must_name_configured_providers_and_not_themselves() {
        let ok = BTreeMap::from([provider("a", &["b", "a/other"]), provider("b", &["a"])]);
        assert_eq!(check_chains(&ok), Ok(()));
        let unknown = BTreeMap::from([provider("a", &["nope"])]);
        let err = check_chains(&unknown).unwrap_err();
        assert_eq!(err.key, "llm.providers.a.fallback");
        assert!(
            err.to_string().contains("`nope`") && err.fix.contains("(a)"),
            "{err}"
        );
        let itself = BTreeMap::from([provider("a", &["a/m"])]);
        assert!(
            check_chains(&itself)
                .unwrap_err()
                .problem
                .contains("starts from")
        );
    }
}
