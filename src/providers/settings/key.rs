//! A provider's API key: where it may be written and which source wins.
//!
//! The order (Crucible's, `credentials.rs` `resolve_api_key`):
//! 1. a variable the table names (`"${VAR}"`, `"{env:VAR}"` or a bare
//!    `"VAR_NAME"`), which is the user's explicit choice;
//! 2. the type's own variable (`OPENAI_API_KEY`, `OPENROUTER_API_KEY`…):
//!    "the environment variable wins" over a key kept in a file — but only
//!    at the type's own service: a table pointed at another server (a local
//!    llama-server of type `openai`) keeps its written key, so an exported
//!    OpenAI key is never sent to it in place of the one written for it;
//! 3. Crucible's credential store, `secrets.toml` (`[providers.NAME]
//!    api_key`, by provider name, then by type);
//! 4. the key written in the config (`{file:path}`, `api_key_file`, a
//!    value `[include]` merged from another file, or a literal, which is
//!    warned about).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use super::service::ProviderType;
use super::{EndpointSource, InvalidSetting, SettingWarning, Table};

/// A secret that never shows in `Debug` or `Display` output.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Where an API key came from, so errors can tell the user which knob to turn
/// without ever showing the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A variable the config names, or the type's own variable.
    EnvVar(String),
    /// A literal key in the config file.
    ConfigLiteral,
    /// A key file, Crucible's `secrets.toml`, or a file `[include]` merged.
    File(PathBuf),
    /// The client's `providers/set` (its `Authorization` or `x-api-key` header).
    Client,
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::EnvVar(var) => write!(f, "environment variable {var}"),
            KeySource::ConfigLiteral => f.write_str("the `api_key` in the config file"),
            KeySource::File(path) => write!(f, "the key file {}", path.display()),
            KeySource::Client => f.write_str("the key the client set (providers/set)"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ApiKey {
    pub secret: Secret,
    pub source: KeySource,
}

/// Crucible's credential store: `secrets.toml`, `[providers.NAME] api_key`.
#[derive(Debug, Clone, Default)]
pub struct StoredKeys {
    pub path: PathBuf,
    /// By the name under `[providers.…]`: a provider's name or a type.
    pub keys: BTreeMap<String, Secret>,
}

impl StoredKeys {
    fn find(&self, name: &str, service: ProviderType) -> Option<ApiKey> {
        let secret = self
            .keys
            .get(name)
            .or_else(|| self.keys.get(service.as_str()))?;
        Some(ApiKey {
            secret: secret.clone(),
            source: KeySource::File(self.path.clone()),
        })
    }
}

/// How the table writes its key.
enum Written {
    Variable(String),
    File(String),
    Literal(String),
}

/// The key, and the variable the config names but the environment lacks.
pub(super) type Resolved = (Option<ApiKey>, Option<String>);

impl Table<'_> {
    pub(super) fn api_key(
        &self,
        literal: Option<String>,
        file: Option<String>,
        service: ProviderType,
        endpoint: EndpointSource,
        warnings: &mut Vec<SettingWarning>,
    ) -> Result<Resolved, InvalidSetting> {
        let written = match (literal, file) {
            (Some(_), Some(_)) => {
                return Err(self.invalid(
                    "api_key_file",
                    "is set together with api_key",
                    "Keep only one of api_key and api_key_file.",
                ));
            }
            (Some(value), None) => Some(classify(value)),
            (None, Some(file)) => Some(Written::File(file)),
            (None, None) => None,
        };
        if let Some(Written::Variable(var)) = &written {
            return Ok(match self.key_from_variable(var) {
                Some(key) => (Some(key), None),
                None => match self.stored(service) {
                    Some(key) => (Some(key), None),
                    None => (None, Some(var.clone())),
                },
            });
        }
        let from_environment = service
            .key_variable()
            .filter(|_| endpoint == EndpointSource::TypeDefault || written.is_none())
            .and_then(|var| self.key_from_variable(var));
        if let Some(key) = from_environment.or_else(|| self.stored(service)) {
            if written.is_some() {
                self.warn(
                    warnings,
                    "api_key",
                    format!("is not used: {} is set and wins", key.source),
                );
            }
            return Ok((Some(key), None));
        }
        match written {
            Some(Written::File(file)) => Ok((Some(self.key_from_file(&file)?), None)),
            Some(Written::Literal(value)) => {
                let source = match (self.around.included)(&self.key("api_key")) {
                    Some(file) => KeySource::File(file),
                    None => {
                        self.warn(
                            warnings,
                            "api_key",
                            "holds a plaintext API key; prefer api_key = \"{env:VARIABLE}\", secrets.toml or api_key_file"
                                .into(),
                        );
                        KeySource::ConfigLiteral
                    }
                };
                let secret = Secret::new(value);
                Ok((Some(ApiKey { secret, source }), None))
            }
            Some(Written::Variable(_)) | None => Ok((None, None)),
        }
    }

    fn stored(&self, service: ProviderType) -> Option<ApiKey> {
        self.around.stored_keys.find(self.name, service)
    }

    /// The key in `var`, unless it is unset or empty.
    fn key_from_variable(&self, var: &str) -> Option<ApiKey> {
        let secret = (self.around.env)(var).filter(|secret| !secret.is_empty())?;
        Some(ApiKey {
            secret: Secret::new(secret),
            source: KeySource::EnvVar(var.to_string()),
        })
    }

    /// `api_key_file` or `{file:…}`: `~/` is the home directory, a relative
    /// path is read beside the config file, wherever the agent runs.
    fn key_from_file(&self, file: &str) -> Result<ApiKey, InvalidSetting> {
        let file_path = self.around.path_of(file);
        let secret = std::fs::read_to_string(&file_path).map_err(|err| {
            self.invalid(
                "api_key_file",
                format!("cannot read {}: {err}", file_path.display()),
                "Point it at a readable file that holds only the key.",
            )
        })?;
        Ok(ApiKey {
            secret: Secret::new(secret.trim()),
            source: KeySource::File(file_path),
        })
    }
}

fn classify(value: String) -> Written {
    if let Some(var) = env_reference(&value) {
        return Written::Variable(var.to_string());
    }
    if let Some(path) = file_reference(&value) {
        return Written::File(path.to_string());
    }
    if is_variable_name(&value) {
        return Written::Variable(value);
    }
    Written::Literal(value)
}

/// `"${VAR}"` or `"{env:VAR}"` → `Some("VAR")`.
pub fn env_reference(value: &str) -> Option<&str> {
    value
        .strip_prefix("${")
        .or_else(|| value.strip_prefix("{env:"))
        .and_then(|rest| rest.strip_suffix('}'))
        .filter(|var| !var.is_empty())
}

/// `"{file:path}"` → `Some("path")`.
pub fn file_reference(value: &str) -> Option<&str> {
    value
        .strip_prefix("{file:")
        .and_then(|rest| rest.strip_suffix('}'))
        .filter(|path| !path.is_empty())
}

/// Crucible's docs write `api_key = "OPENAI_API_KEY"` for "read this
/// variable": upper case, digits and underscores, with an underscore. No
/// provider issues keys of that shape.
fn is_variable_name(value: &str) -> bool {
    value.contains('_')
        && value.starts_with(|c: char| c.is_ascii_uppercase())
        && value
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_recognised_in_both_spellings() {
        assert_eq!(env_reference("${A_KEY}"), Some("A_KEY"));
        assert_eq!(env_reference("{env:A_KEY}"), Some("A_KEY"));
        assert_eq!(env_reference("{env:}"), None);
        assert_eq!(file_reference("{file:~/k.txt}"), Some("~/k.txt"));
        assert!(is_variable_name("OPENAI_API_KEY"));
        assert!(!is_variable_name("sk-abc_DEF"));
        assert!(!is_variable_name("KEY"));
    }
}
