//! What `setup` writes: the provider's table and `[chat] default_provider`
//! into the config (a new one starts as the commented sample, an existing
//! one keeps its comments and everything else), and a hosted provider's
//! key into Crucible's `secrets.toml` (`[providers.NAME] api_key`, mode
//! 600). The config is loaded again before setup says it is done; if it
//! does not load, the old file is put back.

use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item, Table, value};

use crate::cli::CliError;
use crate::config::{Config, Overrides};
use crate::providers::settings::Secret;

/// What the user chose.
#[derive(Debug, Clone)]
pub struct Choice {
    /// The provider's name in the config.
    pub name: String,
    /// The config's `type`.
    pub kind: &'static str,
    pub endpoint: String,
    pub model: String,
    /// A key to keep in `secrets.toml`; never printed.
    pub key: Option<Secret>,
}

/// Where the files went.
#[derive(Debug)]
pub struct Written {
    pub config: PathBuf,
    pub secrets: Option<PathBuf>,
}

/// Write `choice` into the config at `config` (and its key into
/// `secrets`), then check the config loads with it as the default.
pub fn apply(config: &Path, secrets: &Path, choice: &Choice) -> Result<Written, CliError> {
    let before = match std::fs::read_to_string(config) {
        Ok(text) => Some(text),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => return Err(refused(config, "read", err)),
    };
    let text = before
        .clone()
        .unwrap_or_else(|| crate::cli::init::SAMPLE_CONFIG.to_string());
    let mut doc: DocumentMut = text.parse().map_err(|err| {
        CliError::Refused(format!(
            "{} is not valid TOML, so setup leaves it alone: {err}. Fix it (or move it away) and run setup again",
            config.display()
        ))
    })?;
    let start = match before {
        Some(_) => Start::Existing,
        None => Start::Sample,
    };
    set_provider(&mut doc, choice, start);
    if let Some(dir) = config.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|err| refused(dir, "create", err))?;
    }
    let previous_secrets = match &choice.key {
        Some(key) => Some(store_key(secrets, &choice.name, key)?),
        None => None,
    };
    write_replacing(config, doc.to_string().as_bytes(), Readers::Usual)?;
    if let Err(err) = check(config, choice) {
        // Put back what was there: a half-made config must not stop the agent.
        match &before {
            Some(text) => write_replacing(config, text.as_bytes(), Readers::Usual)?,
            None => std::fs::remove_file(config).map_err(|e| refused(config, "remove", e))?,
        }
        if let Some(previous) = previous_secrets {
            match previous {
                Some(text) => write_replacing(secrets, text.as_bytes(), Readers::OwnerOnly)?,
                None => std::fs::remove_file(secrets).map_err(|e| refused(secrets, "remove", e))?,
            }
        }
        return Err(err);
    }
    Ok(Written {
        config: config.to_path_buf(),
        secrets: choice.key.as_ref().map(|_| secrets.to_path_buf()),
    })
}

/// What the config setup edits began as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// The user's own file.
    Existing,
    /// A fresh copy of the sample.
    Sample,
}

/// `[chat] default_provider` and `[llm.providers.NAME]`. In a fresh copy
/// of the sample, its documented `local` table becomes the provider's.
fn set_provider(doc: &mut DocumentMut, choice: &Choice, start: Start) {
    let chat = table(doc.as_table_mut(), "chat");
    chat["default_provider"] = value(&choice.name);
    // `[chat] model` wins over the provider's own default_model.
    if chat.contains_key("model") {
        chat["model"] = value(&choice.model);
    }
    let llm = table(doc.as_table_mut(), "llm");
    let providers = table(llm, "providers");
    providers.set_implicit(true);
    if start == Start::Sample
        && choice.name != "local"
        && let Some(Item::Table(sample)) = providers.remove("local")
    {
        providers.insert(&choice.name, Item::Table(sample));
    }
    let provider = table(providers, &choice.name);
    provider["type"] = value(choice.kind);
    provider["endpoint"] = value(&choice.endpoint);
    provider["default_model"] = value(&choice.model);
}

/// The table at `key` of `parent`, made if missing (or not a table).
fn table<'a>(parent: &'a mut Table, key: &str) -> &'a mut Table {
    if !parent.get(key).is_some_and(Item::is_table) {
        parent.insert(key, Item::Table(Table::new()));
    }
    match parent.get_mut(key) {
        Some(Item::Table(table)) => table,
        // Just made a table there.
        _ => unreachable!("a table was just inserted at `{key}`"),
    }
}

/// Keep `key` as `[providers.NAME] api_key` in `secrets`, the rest of the
/// file as it was; returns what the file held before (None: no file).
fn store_key(secrets: &Path, name: &str, key: &Secret) -> Result<Option<String>, CliError> {
    let before = match std::fs::read_to_string(secrets) {
        Ok(text) => Some(text),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => return Err(refused(secrets, "read", err)),
    };
    let mut doc: DocumentMut = before.as_deref().unwrap_or("").parse().map_err(|err| {
        CliError::Refused(format!(
            "{} is not valid TOML, so setup leaves it alone: {err}. Fix it and run setup again",
            secrets.display()
        ))
    })?;
    let providers = table(doc.as_table_mut(), "providers");
    providers.set_implicit(true);
    table(providers, name)["api_key"] = value(key.expose());
    if let Some(dir) = secrets.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|err| refused(dir, "create", err))?;
    }
    write_replacing(secrets, doc.to_string().as_bytes(), Readers::OwnerOnly)?;
    Ok(before)
}

/// Who may read a file setup writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Readers {
    /// As the user's umask has it.
    Usual,
    /// The owner only (the file holds secrets).
    OwnerOnly,
}

/// Replace `path` with `bytes` through a file beside it, so a reader sees
/// the old file or the new one.
fn write_replacing(path: &Path, bytes: &[u8], readers: Readers) -> Result<(), CliError> {
    use std::io::Write;
    let mut part = path.as_os_str().to_owned();
    part.push(".part");
    let part = PathBuf::from(part);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if readers == Readers::OwnerOnly {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = readers;
    let mut file = options
        .open(&part)
        .map_err(|err| refused(&part, "write", err))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|err| refused(&part, "write", err))?;
    std::fs::rename(&part, path).map_err(|err| refused(path, "write", err))
}

/// The config loads, and starts sessions with the chosen provider and model.
fn check(config: &Path, choice: &Choice) -> Result<(), CliError> {
    let loaded = Config::load(config, crate::config::ChosenBy::User, &Overrides::default())
        .map_err(|err| {
            CliError::Refused(format!(
                "the config would not load after setup, so it was put back as it was: {err}"
            ))
        })?;
    match loaded.default_provider() {
        Some(provider)
            if provider.name == choice.name && provider.default_model == choice.model =>
        {
            Ok(())
        }
        _ => Err(CliError::Refused(format!(
            "{} still starts sessions with another provider or model (`--provider`, `CRUCIBLE_CONFIG` or an [include] may decide), so it was put back as it was",
            config.display()
        ))),
    }
}

fn refused(path: &Path, what: &str, err: std::io::Error) -> CliError {
    CliError::Refused(format!("cannot {what} {}: {err}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::settings::{KeySource, ProviderSettings};

    /// The provider sessions start with under the config at `config`.
    fn default_provider(config: &Path) -> ProviderSettings {
        let loaded =
            Config::load(config, crate::config::ChosenBy::User, &Overrides::default()).unwrap();
        loaded.default_provider().unwrap().clone()
    }

    fn local(name: &str, model: &str) -> Choice {
        Choice {
            name: name.into(),
            kind: "ollama",
            endpoint: "http://127.0.0.1:11434".into(),
            model: model.into(),
            key: None,
        }
    }

    #[test]
    fn a_new_config_is_the_sample_with_the_chosen_provider() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("crucible/config.toml");
        let secrets = dir.path().join("crucible/secrets.toml");
        let written = apply(&config, &secrets, &local("ollama", "qwen3:4b")).unwrap();
        assert!(written.secrets.is_none() && !secrets.exists());
        let text = std::fs::read_to_string(&config).unwrap();
        // The sample's documentation stays.
        assert!(text.contains("# Wire format:"), "{text}");
        assert!(!text.contains("[llm.providers.local]"), "{text}");
        let provider = default_provider(&config);
        assert_eq!(
            (provider.name.as_str(), provider.default_model.as_str()),
            ("ollama", "qwen3:4b")
        );
        assert_eq!(provider.endpoint, "http://127.0.0.1:11434");
    }

    #[test]
    fn an_existing_config_keeps_the_rest_and_a_key_goes_to_secrets_only() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        let secrets = dir.path().join("secrets.toml");
        std::fs::write(
            &config,
            "# my notes\n[chat]\ndefault_provider = \"mine\"\n\n[llm.providers.mine]\ntype = \"ollama\"\ndefault_model = \"llama3.2\"\n",
        )
        .unwrap();
        std::fs::write(&secrets, "[providers.other]\napi_key = \"keep-me\"\n").unwrap();
        // An endpoint of its own: an exported OPENAI_API_KEY does not win here.
        let choice = Choice {
            name: "hosted".into(),
            kind: "openai",
            endpoint: "https://llm.example.com/v1".into(),
            model: "gpt-4o-mini".into(),
            key: Some(Secret::new("sk-SETUP-SECRET")),
        };
        apply(&config, &secrets, &choice).unwrap();
        let text = std::fs::read_to_string(&config).unwrap();
        assert!(text.starts_with("# my notes\n"), "{text}");
        assert!(text.contains("[llm.providers.mine]"), "{text}");
        assert!(!text.contains("sk-SETUP-SECRET"), "{text}");
        let stored = std::fs::read_to_string(&secrets).unwrap();
        assert!(stored.contains("keep-me") && stored.contains("sk-SETUP-SECRET"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&secrets).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let provider = default_provider(&config);
        assert_eq!(provider.name, "hosted");
        let key = provider.api_key.as_ref().unwrap();
        assert_eq!(key.secret.expose(), "sk-SETUP-SECRET");
        assert_eq!(key.source, KeySource::File(secrets));
    }

    #[test]
    fn a_config_that_would_not_load_is_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        // Valid TOML the agent refuses: setup's change cannot make it load.
        let original = "[context]\nreserve_tokens = 0\n";
        std::fs::write(&config, original).unwrap();
        let err = apply(
            &config,
            &dir.path().join("secrets.toml"),
            &local("ollama", "m"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("put back"), "{err}");
        assert_eq!(std::fs::read_to_string(&config).unwrap(), original);
    }
}
