//! One entry of a provider's `fallback` chain, as the settings hold it;
//! the chain's checks are `providers::fallback`'s.

use std::fmt;

use super::ProviderSettings;

/// One entry of a chain: a provider, and the model to ask (its default
/// model when none is named).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FallbackTarget {
    pub provider: String,
    pub model: Option<String>,
}

impl FallbackTarget {
    /// `PROVIDER` or `PROVIDER/MODEL`; the model may hold slashes itself
    /// (`openrouter/anthropic/claude-sonnet-4`). None when no provider is named.
    pub fn parse(entry: &str) -> Option<Self> {
        let entry = entry.trim();
        let (provider, model) = match entry.split_once('/') {
            Some((provider, model)) => (provider, Some(model.trim())),
            None => (entry, None),
        };
        let provider = provider.trim();
        if provider.is_empty() || model.is_some_and(str::is_empty) {
            return None;
        }
        Some(Self {
            provider: provider.to_string(),
            model: model.map(str::to_string),
        })
    }

    /// The model asked of `settings` (the provider this target names).
    pub fn model_of(&self, settings: &ProviderSettings) -> String {
        self.model
            .clone()
            .unwrap_or_else(|| settings.default_model.clone())
    }
}

impl fmt::Display for FallbackTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.model {
            Some(model) => write!(f, "{}/{model}", self.provider),
            None => f.write_str(&self.provider),
        }
    }
}
