//! Agent cards (seed 001): Markdown with a small front matter naming the
//! agent and, optionally, its model, provider, mode and allowed tools. The
//! body becomes a layer of the system prompt. Built-in cards come from
//! `prompts/agents/`; the user's from `~/.config/crucible/agents/`
//! (`$XDG_CONFIG_HOME`), which win on a name clash.

use std::path::{Path, PathBuf};

use thiserror::Error;

const BUILTIN: [(&str, &str); 2] = [
    ("coder.md", include_str!("../prompts/agents/coder.md")),
    ("reviewer.md", include_str!("../prompts/agents/reviewer.md")),
];

#[derive(Debug, Clone, PartialEq)]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub mode: Option<String>,
    /// Only these tools are offered; `None` offers all.
    pub tools: Option<Vec<String>>,
    pub body: String,
    /// Where the card came from, for messages.
    pub source: String,
}

#[derive(Debug, Error, PartialEq)]
pub enum CardError {
    #[error(
        "{file}: no front matter; start the file with a `---` line, `name: …`, `description: …` and a closing `---`"
    )]
    NoFrontMatter { file: String },
    #[error("{file}: front matter is not closed; add a `---` line after it")]
    Unclosed { file: String },
    #[error("{file}: line `{line}` is not `key: value`")]
    BadLine { file: String, line: String },
    #[error(
        "{file}: unknown key `{key}`; known keys: name, description, model, provider, mode, tools"
    )]
    UnknownKey { file: String, key: String },
    #[error("{file}: `name` is missing; add `name: my-agent` to the front matter")]
    NoName { file: String },
}

impl AgentCard {
    pub fn parse(text: &str, source: &str) -> Result<Self, CardError> {
        let text = text.trim_start_matches('\u{feff}');
        let mut lines = text.lines();
        if lines.next().map(str::trim) != Some("---") {
            return Err(CardError::NoFrontMatter {
                file: source.into(),
            });
        }
        let mut card = AgentCard {
            name: String::new(),
            description: String::new(),
            model: None,
            provider: None,
            mode: None,
            tools: None,
            body: String::new(),
            source: source.into(),
        };
        let mut closed = false;
        for line in lines.by_ref() {
            let line = line.trim();
            if line == "---" {
                closed = true;
                break;
            }
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once(':') else {
                return Err(CardError::BadLine {
                    file: source.into(),
                    line: line.into(),
                });
            };
            let value = unquote(value.trim());
            let text = || (!value.is_empty()).then(|| value.to_string());
            match key.trim() {
                "name" => card.name = value.to_string(),
                "description" => card.description = value.to_string(),
                "model" => card.model = text(),
                "provider" => card.provider = text(),
                "mode" => card.mode = text(),
                "tools" => {
                    let list = value.trim_start_matches('[').trim_end_matches(']');
                    card.tools = Some(
                        list.split(',')
                            .map(|tool| unquote(tool.trim()).to_string())
                            .filter(|tool| !tool.is_empty())
                            .collect(),
                    );
                }
                other => {
                    return Err(CardError::UnknownKey {
                        file: source.into(),
                        key: other.into(),
                    });
                }
            }
        }
        if !closed {
            return Err(CardError::Unclosed {
                file: source.into(),
            });
        }
        if card.name.is_empty() {
            return Err(CardError::NoName {
                file: source.into(),
            });
        }
        card.body = lines.collect::<Vec<_>>().join("\n").trim().to_string();
        Ok(card)
    }
}

fn unquote(value: &str) -> &str {
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(value)
}

/// `$XDG_CONFIG_HOME/crucible/agents`, else `~/.config/crucible/agents`.
pub fn user_dir() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(config.join("crucible").join("agents"))
}

/// Every card: built-in, then the user's (replacing built-ins of the same
/// name). Cards that do not parse are logged and skipped, so one bad file
/// does not hide the others.
pub fn load_all() -> Vec<AgentCard> {
    let mut cards: Vec<AgentCard> = BUILTIN
        .iter()
        .filter_map(|(file, text)| {
            AgentCard::parse(text, &format!("built-in {file}"))
                .map_err(|err| tracing::error!(%err, "built-in agent card"))
                .ok()
        })
        .collect();
    if let Some(dir) = user_dir() {
        for card in load_dir(&dir) {
            cards.retain(|c| c.name != card.name);
            cards.push(card);
        }
    }
    cards
}

fn load_dir(dir: &Path) -> Vec<AgentCard> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = read
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let source = path.display().to_string();
            let text = std::fs::read_to_string(&path)
                .map_err(|err| tracing::warn!(%source, %err, "agent card unreadable"))
                .ok()?;
            AgentCard::parse(&text, &source)
                .map_err(|err| tracing::warn!(%err, "agent card skipped"))
                .ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_cards_parse() {
        let cards = load_all();
        let reviewer = cards.iter().find(|c| c.name == "reviewer").unwrap();
        assert_eq!(reviewer.mode.as_deref(), Some("plan"));
        assert_eq!(
            reviewer.tools.as_deref().unwrap(),
            ["read_file", "list_dir", "glob", "grep", "todo"]
        );
        assert!(
            reviewer
                .body
                .starts_with("You are acting as a careful code reviewer")
        );
        assert!(cards.iter().any(|c| c.name == "coder" && c.tools.is_none()));
    }

    #[test]
    fn card_errors_say_what_to_fix() {
        for (text, expected) in [
            ("no front matter", "no front matter"),
            ("---\nname: x\n", "not closed"),
            ("---\nname x\n---\n", "is not `key: value`"),
            ("---\nname: x\ncolour: red\n---\n", "unknown key `colour`"),
            ("---\ndescription: d\n---\nbody", "`name` is missing"),
        ] {
            let err = AgentCard::parse(text, "a.md").unwrap_err().to_string();
            assert!(err.contains(expected), "{text:?}: {err}");
            assert!(err.starts_with("a.md"), "{err}");
        }
        let card = AgentCard::parse(
            "---\nname: \"q\"\nmodel: 'big'\ntools: read_file, grep\n---\n\nBody.\n",
            "a.md",
        )
        .unwrap();
        assert_eq!(card.name, "q");
        assert_eq!(card.model.as_deref(), Some("big"));
        assert_eq!(card.tools.unwrap(), ["read_file", "grep"]);
        assert_eq!(card.body, "Body.");
    }
}
