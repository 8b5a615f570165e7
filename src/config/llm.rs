//! `[llm]` in its three shapes, and the provider sessions start with.
//!
//! - seed and Crucible: `[llm.providers.NAME]`, `[llm] default`, and the
//!   seed's `[chat] default_provider`;
//! - the design document: `[llm] default_provider` and `[llm.TYPE]` tables
//!   with `url` and `model` (the table's name is its type unless it says
//!   `type`).
//!
//! Where they overlap: the default provider is `--provider` >
//! `[chat] default_provider` > `[llm] default` > `[llm] default_provider` >
//! the first provider by name; a `[llm.providers.NAME]` table wins over a
//! `[llm.NAME]` table of the same name. Crucible's `[chat]` `model`,
//! `endpoint`, `temperature`, `max_tokens` and `timeout_secs` apply to the
//! default provider and win over its own keys. Each choice is recorded for
//! `doctor`.

use std::collections::BTreeMap;
use std::path::Path;

use super::error::{ConfigError, in_file, invalid};
use super::raw::{RawChat, RawLlm};
use super::report::ConfigReport;
use crate::providers::settings::{
    self, ProviderSettings, ProviderType, RawProvider, SettingWarning, Surroundings, TypeName,
};

/// The validated providers and the name of the default one.
pub(super) struct Llm {
    pub providers: BTreeMap<String, ProviderSettings>,
    pub default_provider: String,
}

/// One provider table as written, and where.
struct Written {
    section: String,
    raw: RawProvider,
    /// The design document's spellings used (`url`, `model`), by the field
    /// they stand for, so errors name the key as written.
    spelled: Vec<(&'static str, &'static str)>,
}

pub(super) fn validate_llm(
    llm: RawLlm,
    chat: &RawChat,
    path: &Path,
    around: Surroundings<'_>,
    warnings: &mut Vec<String>,
    report: &mut ConfigReport,
) -> Result<Llm, ConfigError> {
    let mut tables = design_tables(llm.unknown, path, warnings)?;
    for (name, raw) in llm.providers.unwrap_or_default() {
        let section = format!("llm.providers.{name}");
        let table = Written {
            section,
            raw,
            spelled: Vec::new(),
        };
        if let Some(lost) = tables.insert(name.clone(), table) {
            report.decide(format!(
                "provider `{name}`: [llm.providers.{name}] wins over [{}]",
                lost.section
            ));
        }
    }
    let named = default_name(chat, llm.default, llm.default_provider, report);
    let default_provider = match named {
        Some((key, name)) if !tables.contains_key(&name) => {
            return Err(no_such_provider(key, &name, &tables, path));
        }
        Some((_, name)) => name,
        None => match first_usable(&tables) {
            Some(first) => first,
            None if tables.is_empty() => {
                warnings.push(format!(
                    "{}: no provider is configured ([llm.providers.NAME]); using the built-in local Ollama at http://localhost:11434",
                    path.display()
                ));
                let ollama = ProviderSettings::local_ollama().name;
                let raw = RawProvider {
                    kind: Some("ollama".into()),
                    ..RawProvider::default()
                };
                let section = format!("llm.providers.{ollama}");
                let spelled = Vec::new();
                tables.insert(
                    ollama.clone(),
                    Written {
                        section,
                        raw,
                        spelled,
                    },
                );
                ollama
            }
            None => return Err(nothing_usable(&tables, path)),
        },
    };
    if let Some(table) = tables.get_mut(&default_provider) {
        apply_chat(chat, table, report);
    }
    let mut findings: Vec<SettingWarning> = Vec::new();
    let mut providers = BTreeMap::new();
    for (name, table) in tables {
        if name != default_provider
            && let Some(why) = unusable(&table.raw)
        {
            warnings.push(format!(
                "{}: key `{}.type`: crucible-agent cannot use this provider ({why}); it is left out",
                path.display(),
                table.section
            ));
            continue;
        }
        let provider =
            settings::validate_at(&table.section, &name, table.raw, around, &mut findings)
                .map_err(|mut err| {
                    for (field, written) in &table.spelled {
                        let ours = format!("{}.{field}", table.section);
                        if err.key == ours {
                            err.key = format!("{}.{written}", table.section);
                        }
                    }
                    in_file(path)(err)
                })?;
        providers.insert(name, provider);
    }
    crate::providers::fallback::check_chains(&providers).map_err(in_file(path))?;
    warnings.extend(
        findings
            .into_iter()
            .map(|finding| format!("{}: key `{}` {}", path.display(), finding.key, finding.text)),
    );
    Ok(Llm {
        providers,
        default_provider,
    })
}

/// The design document's `[llm.TYPE]` tables; other unknown `[llm]` keys
/// are warned about.
fn design_tables(
    unknown: BTreeMap<String, toml::Value>,
    path: &Path,
    warnings: &mut Vec<String>,
) -> Result<BTreeMap<String, Written>, ConfigError> {
    let mut tables = BTreeMap::new();
    for (name, value) in unknown {
        let section = format!("llm.{name}");
        if !value.is_table() {
            warnings.push(format!(
                "{}: key `{section}` is not used by crucible-agent (ignored)",
                path.display()
            ));
            continue;
        }
        let spelled = [("endpoint", "url"), ("default_model", "model")]
            .into_iter()
            .filter(|(_, written)| value.get(written).is_some())
            .collect();
        let mut raw: RawProvider = value.try_into().map_err(|err: toml::de::Error| {
            invalid(
                path,
                &section,
                err.message().to_string(),
                "Write it as a provider: url, model, api_key or api_key_file (or as [llm.providers.NAME]).",
            )
        })?;
        // `[llm.ollama]`: the table's name is its type.
        raw.kind.get_or_insert_with(|| name.clone());
        let table = Written {
            section,
            raw,
            spelled,
        };
        tables.insert(name, table);
    }
    Ok(tables)
}

/// The key that names the default provider, and the name; losers recorded.
fn default_name(
    chat: &RawChat,
    default: Option<String>,
    design: Option<String>,
    report: &mut ConfigReport,
) -> Option<(&'static str, String)> {
    let written: Vec<(&'static str, String)> = [
        ("chat.default_provider", chat.default_provider.clone()),
        ("llm.default", default),
        ("llm.default_provider", design),
    ]
    .into_iter()
    .filter_map(|(key, name)| Some((key, name?)))
    .collect();
    let (winner, rest) = written.split_first()?;
    for (key, name) in rest {
        report.decide(format!(
            "default provider: `{}` = \"{}\" wins over `{key}` = \"{name}\"",
            winner.0, winner.1
        ));
    }
    Some(winner.clone())
}

/// Why the table's type cannot be used, if so.
fn unusable(raw: &RawProvider) -> Option<&'static str> {
    match ProviderType::parse(raw.kind.as_deref().unwrap_or("ollama")) {
        TypeName::Unusable(why) => Some(why),
        TypeName::Usable(_) | TypeName::Unknown => None,
    }
}

/// The first provider by name whose type can be used (an unknown type
/// counts: validating it reports the typo).
fn first_usable(tables: &BTreeMap<String, Written>) -> Option<String> {
    tables
        .iter()
        .find(|(_, table)| unusable(&table.raw).is_none())
        .map(|(name, _)| name.clone())
}

/// `[chat]`'s model settings, over the default provider's own.
fn apply_chat(chat: &RawChat, table: &mut Written, report: &mut ConfigReport) {
    let raw = &mut table.raw;
    let section = table.section.as_str();
    let mut over = |chat_key: &str, field: &str, had: bool| {
        if had {
            report.decide(format!(
                "`chat.{chat_key}` wins over `{section}.{field}` (the default provider's)"
            ));
        }
    };
    if let Some(model) = &chat.model {
        over("model", "default_model", raw.default_model.is_some());
        raw.default_model = Some(model.clone());
    }
    if let Some(endpoint) = &chat.endpoint {
        over("endpoint", "endpoint", raw.endpoint.is_some());
        raw.endpoint = Some(endpoint.clone());
    }
    if let Some(temperature) = chat.temperature {
        over("temperature", "temperature", raw.temperature.is_some());
        raw.temperature = Some(temperature);
    }
    if let Some(max_tokens) = chat.max_tokens {
        let had = raw.max_tokens.is_some() || raw.max_output_tokens.is_some();
        over("max_tokens", "max_tokens", had);
        raw.max_tokens = Some(max_tokens);
        raw.max_output_tokens = None;
    }
    if let Some(timeout) = chat.timeout_secs {
        over("timeout_secs", "timeout_secs", raw.timeout_secs.is_some());
        raw.timeout_secs = Some(timeout);
    }
}

fn no_such_provider(
    key: &str,
    name: &str,
    tables: &BTreeMap<String, Written>,
    path: &Path,
) -> ConfigError {
    let configured = if tables.is_empty() {
        "none are configured; add a [llm.providers.NAME] table".to_string()
    } else {
        format!(
            "configured providers: {}",
            tables.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    };
    invalid(
        path,
        key,
        format!("names provider `{name}`, which has no [llm.providers.{name}] table"),
        format!("Set it to one of the configured providers ({configured})."),
    )
}

fn nothing_usable(tables: &BTreeMap<String, Written>, path: &Path) -> ConfigError {
    let why: Vec<String> = tables
        .iter()
        .filter_map(|(name, table)| Some(format!("{name}: {}", unusable(&table.raw)?)))
        .collect();
    invalid(
        path,
        "llm.providers",
        format!(
            "has no provider crucible-agent can use ({})",
            why.join("; ")
        ),
        "Add one it can use, e.g. [llm.providers.local] with type = \"ollama\", \"openai\", \"anthropic\", \"openrouter\" or \"custom\", and name it in [llm] default.",
    )
}
