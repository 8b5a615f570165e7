//! Overrides from the command line, applied after the file.

use std::path::Path;

use super::Config;
use super::error::ConfigError;

#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub agent: Option<String>,
    /// The Crucible `[acp.agents.NAME]` profile the agent runs under.
    pub profile: Option<String>,
}

impl Config {
    pub(super) fn apply_overrides(
        &mut self,
        path: &Path,
        overrides: &Overrides,
    ) -> Result<(), ConfigError> {
        if let Some(provider) = &overrides.provider {
            if !self.providers.contains_key(provider) {
                return Err(ConfigError::Flag {
                    path: path.to_path_buf(),
                    flag: "--provider",
                    value: provider.clone(),
                    problem: format!("no provider named `{provider}` is configured"),
                    fix: format!(
                        "Name one of the configured providers ({}), or add [llm.providers.{provider}] to the file.",
                        self.provider_names()
                    ),
                });
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
        if let Some(profile) = &overrides.profile {
            self.apply_profile(path, profile);
        }
        Ok(())
    }

    /// The profile's `[acp.agents.NAME.permissions]` replace `[permissions]`'s
    /// lists (Crucible's rule); a profile without them keeps the global ones.
    fn apply_profile(&mut self, path: &Path, profile: &str) {
        match self.permission_profiles.get(profile) {
            Some(Some(lists)) => self.permission_lists = lists.clone(),
            Some(None) => {}
            None => self.warnings.push(format!(
                "{}: profile `{profile}` (--profile or CRUCIBLE_AGENT_PROFILE) has no [acp.agents.{profile}] table; the global [permissions] apply",
                path.display()
            )),
        }
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
            profile: None,
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
            err.starts_with("--provider nope: no provider named `nope`")
                && err.contains("openai-work")
                && !err.contains("key `"),
            "{err}"
        );
    }
}
