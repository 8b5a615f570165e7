//! What Crucible's loader does to the file before reading it: `[include]
//! SECTION = "path"` merges a TOML file into a top-level section, and a
//! value `"{file:x.toml}"` or `"{dir:conf.d}"` becomes the table it names
//! (a directory's `.toml` files merged in name order). Tables merge key by
//! key, arrays append, anything else is replaced by the included value.
//!
//! Scalar references (`{env:VAR}`, `{file:key.txt}`) are resolved where the
//! agent uses the key, so an unset variable in a section only the TUI reads
//! stops nothing, and an API key keeps its source for error messages.
//! Crucible's `secrets.toml` is read here too ([`stored_keys`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::error::{ConfigError, invalid};
use crate::providers::settings::{Secret, StoredKeys, Surroundings};

/// The file each included value came from, by dotted key.
pub(super) type Origins = BTreeMap<String, PathBuf>;

/// Resolve `[include]` and the table references of `file`, in place.
/// Findings that stop nothing (an include file that is missing) go to
/// `warnings`.
pub(super) fn resolve(
    file: &mut toml::Table,
    around: &Surroundings<'_>,
    path: &Path,
    warnings: &mut Vec<String>,
) -> Result<Origins, ConfigError> {
    let mut origins = Origins::new();
    if let Some(include) = file.remove("include") {
        let toml::Value::Table(include) = include else {
            return Err(invalid(
                path,
                "include",
                "is not a table",
                "Write it as [include] with SECTION = \"file.toml\" lines, e.g. llm = \"secrets.toml\".",
            ));
        };
        for (section, target) in include {
            let key = format!("include.{section}");
            let Some(target) = target.as_str() else {
                return Err(invalid(
                    path,
                    key,
                    "is not a file name",
                    "Name a TOML file, e.g. llm = \"secrets.toml\".",
                ));
            };
            let included = around.path_of(target);
            if !included.exists() {
                warnings.push(format!(
                    "{}: key `{key}`: {} does not exist (ignored)",
                    path.display(),
                    included.display()
                ));
                continue;
            }
            let value = read_toml(&included, path, &key)?;
            record(&value, &section, &included, &mut origins);
            match file.get_mut(&section) {
                Some(existing) => merge(existing, value),
                None => {
                    file.insert(section, value);
                }
            }
        }
    }
    for (key, value) in file.iter_mut() {
        expand_tables(value, key, around, path, &mut origins)?;
    }
    Ok(origins)
}

/// Replace `{file:x.toml}` and `{dir:…}` strings below `value` (at `key`).
fn expand_tables(
    value: &mut toml::Value,
    key: &str,
    around: &Surroundings<'_>,
    path: &Path,
    origins: &mut Origins,
) -> Result<(), ConfigError> {
    match value {
        toml::Value::String(text) => {
            let target = if let Some(file) = reference(text, "{file:") {
                Some(around.path_of(file)).filter(|file| file.extension() == Some("toml".as_ref()))
            } else {
                reference(text, "{dir:").map(|dir| around.path_of(dir))
            };
            let Some(target) = target else {
                return Ok(());
            };
            let replacement = if target.is_dir() {
                read_dir(&target, path, key)?
            } else {
                read_toml(&target, path, key)?
            };
            record(&replacement, key, &target, origins);
            *value = replacement;
        }
        toml::Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                expand_tables(item, &format!("{key}[{index}]"), around, path, origins)?;
            }
        }
        toml::Value::Table(table) => {
            for (name, item) in table.iter_mut() {
                expand_tables(item, &format!("{key}.{name}"), around, path, origins)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn reference<'a>(text: &'a str, opener: &str) -> Option<&'a str> {
    text.strip_prefix(opener)?
        .strip_suffix('}')
        .filter(|inner| !inner.is_empty())
}

fn read_toml(file: &Path, path: &Path, key: &str) -> Result<toml::Value, ConfigError> {
    let text = std::fs::read_to_string(file).map_err(|err| {
        invalid(
            path,
            key,
            format!("cannot read {}: {err}", file.display()),
            "Point it at a readable TOML file, relative to the config file or starting with ~/.",
        )
    })?;
    let table: toml::Table = toml::from_str(&text).map_err(|err| {
        invalid(
            path,
            key,
            format!("{} is not valid TOML: {err}", file.display()),
            "Correct that file.",
        )
    })?;
    Ok(toml::Value::Table(table))
}

/// Every non-hidden `.toml` file of `dir`, merged in name order.
fn read_dir(dir: &Path, path: &Path, key: &str) -> Result<toml::Value, ConfigError> {
    let entries = std::fs::read_dir(dir).map_err(|err| {
        invalid(
            path,
            key,
            format!("cannot read the directory {}: {err}", dir.display()),
            "Point it at a readable directory of .toml files.",
        )
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|file| {
            file.is_file()
                && file.extension() == Some("toml".as_ref())
                && !file
                    .file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    let mut merged = toml::Value::Table(toml::Table::new());
    for file in files {
        merge(&mut merged, read_toml(&file, path, key)?);
    }
    Ok(merged)
}

/// `source` over `target`: tables key by key, arrays appended.
fn merge(target: &mut toml::Value, source: toml::Value) {
    match (target, source) {
        (toml::Value::Table(target), toml::Value::Table(source)) => {
            for (key, value) in source {
                match target.get_mut(&key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        target.insert(key, value);
                    }
                }
            }
        }
        (toml::Value::Array(target), toml::Value::Array(source)) => target.extend(source),
        (target, source) => *target = source,
    }
}

/// Note `file` as the origin of every value below `value`, at `key`.
fn record(value: &toml::Value, key: &str, file: &Path, origins: &mut Origins) {
    match value {
        toml::Value::Table(table) => {
            for (name, item) in table {
                record(item, &format!("{key}.{name}"), file, origins);
            }
        }
        _ => {
            origins.insert(key.to_string(), file.to_path_buf());
        }
    }
}

/// Where `secrets.toml` may be, first found first: beside the config
/// file, then in `$XDG_CONFIG_HOME/crucible/`.
fn secrets_candidates(
    config_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> impl Iterator<Item = PathBuf> {
    let standard = env("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|home| Path::new(&home).join(".config")))
        .map(|dir| dir.join("crucible").join("secrets.toml"));
    std::iter::once(config_dir.join("secrets.toml")).chain(standard)
}

/// The `secrets.toml` the config at `config` reads keys from: the one
/// found first, else the one beside it (where a new one goes).
pub fn secrets_file(config: &Path) -> PathBuf {
    let dir = config.parent().unwrap_or(Path::new(""));
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    secrets_candidates(dir, &env)
        .find(|file| file.is_file())
        .unwrap_or_else(|| dir.join("secrets.toml"))
}

/// `secrets.toml` as `cru auth` writes it.
#[derive(Deserialize)]
struct SecretsFile {
    #[serde(default)]
    providers: BTreeMap<String, StoredSecret>,
}

#[derive(Deserialize)]
struct StoredSecret {
    api_key: Option<String>,
}

/// Crucible's credential store: `secrets.toml` beside the config file, else
/// in `$XDG_CONFIG_HOME/crucible/` (`~/.config/crucible/`), where `cru auth`
/// writes it. An unreadable one is a warning, as in Crucible.
pub(super) fn stored_keys(
    config_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> StoredKeys {
    let Some(file) = secrets_candidates(config_dir, env).find(|file| file.is_file()) else {
        return StoredKeys::default();
    };
    let parsed = std::fs::read_to_string(&file)
        .map_err(|err| err.to_string())
        .and_then(|text| toml::from_str::<SecretsFile>(&text).map_err(|err| err.to_string()));
    match parsed {
        Ok(secrets) => StoredKeys {
            keys: secrets
                .providers
                .into_iter()
                .filter_map(|(name, stored)| Some((name, Secret::new(stored.api_key?))))
                .collect(),
            path: file,
        },
        Err(err) => {
            warnings.push(format!(
                "{}: cannot be read, so no key comes from it: {err}",
                file.display()
            ));
            StoredKeys::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn around<'a>(dir: &'a Path, stored: &'a StoredKeys) -> Surroundings<'a> {
        Surroundings {
            env: &|_| None,
            config_dir: dir,
            stored_keys: stored,
            included: &|_| None,
        }
    }

    #[test]
    fn include_and_table_references_merge_files_in() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("secrets.toml"),
            "[providers.cloud]\napi_key = \"sk-included\"\n",
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("mcp.d")).unwrap();
        std::fs::write(
            dir.path().join("mcp.d/10-a.toml"),
            "[[servers]]\nname = \"a\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("mcp.d/20-b.toml"),
            "[[servers]]\nname = \"b\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("mcp.d/.hidden.toml"), "x = 1").unwrap();
        let mut file: toml::Table = toml::from_str(
            "mcp = \"{dir:mcp.d}\"\n[include]\nllm = \"secrets.toml\"\ngone = \"nope.toml\"\n[llm.providers.cloud]\ntype = \"openai\"\n",
        )
        .unwrap();
        let stored = StoredKeys::default();
        let mut warnings = Vec::new();
        let config = dir.path().join("config.toml");
        let origins = resolve(
            &mut file,
            &around(dir.path(), &stored),
            &config,
            &mut warnings,
        )
        .unwrap();
        let cloud = &file["llm"]["providers"]["cloud"];
        assert_eq!(cloud["type"].as_str(), Some("openai"));
        assert_eq!(cloud["api_key"].as_str(), Some("sk-included"));
        assert_eq!(
            origins.get("llm.providers.cloud.api_key"),
            Some(&dir.path().join("secrets.toml"))
        );
        let servers = file["mcp"]["servers"].as_array().unwrap();
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[1]["name"].as_str(), Some("b"));
        assert!(!file.contains_key("include"));
        assert!(warnings[0].contains("include.gone"), "{warnings:?}");
    }

    #[test]
    fn secrets_toml_is_found_beside_the_config_or_in_the_standard_place() {
        let dir = tempfile::tempdir().unwrap();
        let standard = dir.path().join("xdg/crucible");
        std::fs::create_dir_all(&standard).unwrap();
        std::fs::write(
            standard.join("secrets.toml"),
            "[providers.openai]\napi_key = \"sk-stored\"\n",
        )
        .unwrap();
        let xdg = dir.path().join("xdg").display().to_string();
        let env = move |name: &str| (name == "XDG_CONFIG_HOME").then(|| xdg.clone());
        let mut warnings = Vec::new();
        let keys = stored_keys(&dir.path().join("elsewhere"), &env, &mut warnings);
        assert_eq!(keys.keys["openai"].expose(), "sk-stored");
        assert_eq!(keys.path, standard.join("secrets.toml"));
        assert!(!format!("{keys:?}").contains("sk-stored"));
    }
}
