//! Where agent cards come from beyond the built-ins and the user's
//! directory: the kiln (`$CRUCIBLE_KILN`, else Crucible's `default_kiln`
//! naming a `[kilns]` entry, else the legacy `kiln_path`), and `[llm.models]`
//! for a card's `specialty`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::agents::CardSettings;

/// The card settings of the file at `path`; `top` holds its top-level keys
/// this agent does not otherwise read (where `kilns` and `default_kiln` are).
pub(super) fn card_settings(
    top: &BTreeMap<String, toml::Value>,
    specialty_models: BTreeMap<String, String>,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> CardSettings {
    let config_dir = path.parent().unwrap_or(Path::new("."));
    let from_env = env("CRUCIBLE_KILN")
        .filter(|kiln| !kiln.is_empty())
        .map(PathBuf::from);
    let from_file = || {
        let named = top
            .get("default_kiln")
            .and_then(toml::Value::as_str)
            .and_then(|name| top.get("kilns")?.get(name));
        let written = match named {
            Some(toml::Value::String(kiln)) => Some(kiln.as_str()),
            Some(table) => table.get("path").and_then(toml::Value::as_str),
            None => top.get("kiln_path").and_then(toml::Value::as_str),
        }?;
        Some(resolve(written, config_dir, env))
    };
    CardSettings {
        kiln: from_env.or_else(from_file),
        specialty_models,
    }
}

/// `~/x` under the home directory; a relative path beside the config file.
fn resolve(written: &str, config_dir: &Path, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(rest) = written.strip_prefix("~/")
        && let Some(home) = env("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    config_dir.join(written)
}

#[cfg(test)]
mod tests {
    use super::super::tests::load;
    use std::path::PathBuf;

    #[test]
    fn the_kiln_comes_from_the_environment_then_the_registry() {
        let kiln = |text: &str, vars: &[(&str, &str)]| load(text, vars).unwrap().agent_cards.kiln;
        let registry = "default_kiln = \"docs\"\n[kilns]\ndocs = \"notes\"\nwork = \"~/work\"";
        assert_eq!(kiln(registry, &[]), Some(PathBuf::from("/cfg/notes")));
        assert_eq!(
            kiln(registry, &[("CRUCIBLE_KILN", "/elsewhere")]),
            Some(PathBuf::from("/elsewhere"))
        );
        let table = "default_kiln = \"work\"\n[kilns.work]\npath = \"~/work\"\nlazy = true";
        assert_eq!(
            kiln(table, &[("HOME", "/home/u")]),
            Some(PathBuf::from("/home/u/work"))
        );
        assert_eq!(
            kiln("kiln_path = \"/notes\"", &[]),
            Some(PathBuf::from("/notes"))
        );
        assert_eq!(kiln("", &[]), None);
    }

    #[test]
    fn llm_models_map_specialties() {
        let config = load(
            "[llm.models]\nreasoning = \"openai/o1\"\n[llm.providers.local]\ntype = \"ollama\"",
            &[],
        )
        .unwrap();
        assert_eq!(
            config.agent_cards.specialty_models["reasoning"],
            "openai/o1"
        );
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    }
}
