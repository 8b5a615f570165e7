//! Overrides from the command line, applied after the file.

use std::path::Path;

use super::Config;
use super::error::{ConfigError, invalid};

#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub agent: Option<String>,
}

impl Config {
    pub(super) fn apply_overrides(
        &mut self,
        path: &Path,
        overrides: &Overrides,
    ) -> Result<(), ConfigError> {
        if let Some(provider) = &overrides.provider {
            if !self.providers.contains_key(provider) {
                return Err(invalid(
                    path,
                    "--provider",
                    format!("no provider named `{provider}` is configured"),
                    format!("Configured providers: {}.", self.provider_names()),
                ));
            }
            self.default_provider = provider.clone();
        }
        if let Some(model) = &overrides.model
            && let Some(provider) = self.providers.get_mut(&self.default_provider)
        {
            provider.default_model = model.clone();
        }
        if let Some(agent) = &overrides.agent {
            self.default_agent = Some(agent.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::SEED_EXAMPLE;
    use super::*;

    #[test]
    fn overrides_pick_provider_and_model() {
        let overrides = Overrides {
            provider: Some("cloud".into()),
            model: Some("big".into()),
            agent: None,
        };
        let config =
            Config::from_toml(SEED_EXAMPLE, Path::new("c.toml"), &|_| None, &overrides).unwrap();
        assert_eq!(config.default_provider, "cloud");
        assert_eq!(config.default_provider().unwrap().default_model, "big");
        let bad = Overrides {
            provider: Some("nope".into()),
            ..Overrides::default()
        };
        let err = Config::from_toml(SEED_EXAMPLE, Path::new("c.toml"), &|_| None, &bad)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--provider") && err.contains("openai-work"),
            "{err}"
        );
    }
}
