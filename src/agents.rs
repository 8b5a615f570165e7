//! Agent cards (seed 001): Markdown with a small front matter naming the
//! agent and, optionally, its model, provider, mode and tools. The body
//! becomes a layer of the system prompt. Crucible's card fields are read
//! too: `mcps`, `max_turns`, `specialty` (a model through `[llm.models]`)
//! and `tools` as a map of policies. Cards come from, later ones replacing
//! earlier ones of the same name: the built-ins (`prompts/agents/`), the
//! user's `~/.config/crucible/agents/` (`$XDG_CONFIG_HOME`), the kiln's
//! `.crucible/agents/` and the project's `.crucible/agents/`.

pub mod front_matter;
mod subagents;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use thiserror::Error;

use front_matter::Value;
pub use subagents::SubagentSettings;

const BUILTIN: [(&str, &str); 3] = [
    ("coder.md", include_str!("../prompts/agents/coder.md")),
    ("explorer.md", include_str!("../prompts/agents/explorer.md")),
    ("reviewer.md", include_str!("../prompts/agents/reviewer.md")),
];

/// A card's word on one tool (Crucible's `tools:` map).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolPolicy {
    /// `true` or `allow`: runs without asking (the config's deny still applies).
    Allow,
    /// Asks every time, even for a read.
    Ask,
    /// `false` or `deny`: not offered to the model.
    Deny,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub mode: Option<String>,
    /// Only these tools are offered; `None` offers all.
    pub tools: Option<Vec<String>>,
    /// `tools:` written as a map: each tool's policy (Crucible's names).
    pub tool_policies: Vec<(String, ToolPolicy)>,
    /// Only these MCP servers' tools are offered; `None` offers all.
    pub mcps: Option<Vec<String>>,
    /// Model calls one turn may make while the card is active.
    pub max_turns: Option<u32>,
    /// Budgets while the card is active (they replace the config's).
    pub max_turn_tokens: Option<u64>,
    pub max_session_tokens: Option<u64>,
    pub max_session_cost: Option<f64>,
    /// The reasoning effort the card asks for (`off`, `low`, `medium`, `high`).
    pub thought_level: Option<String>,
    /// The kind of model wanted, looked up in `[llm.models]`.
    pub specialty: Option<String>,
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
    #[error("{file}: line `{line}` is not `key: value` (or a list or map under a key)")]
    BadLine { file: String, line: String },
    #[error(
        "{file}: unknown key `{key}`; known keys: name, description, model, provider, mode, tools, mcps, max_turns, max_turn_tokens, max_session_tokens, max_session_cost, specialty, thought_level (and Crucible's version, tags, temperature, max_tokens, which are not used)"
    )]
    UnknownKey { file: String, key: String },
    #[error("{file}: key `{key}`: {problem}")]
    BadValue {
        file: String,
        key: String,
        problem: String,
    },
    #[error("{file}: `name` is missing; add `name: my-agent` to the front matter")]
    NoName { file: String },
}

/// Crucible's keys this agent reads but does not use.
const UNUSED_KEYS: [&str; 4] = ["version", "tags", "temperature", "max_tokens"];

impl AgentCard {
    /// The card in `text`, read from `source` (a path: a card without
    /// `name` is named after the file, as in Crucible).
    pub fn parse(text: &str, source: &str) -> Result<Self, CardError> {
        let (pairs, body) = front_matter::split_document(text, source)?;
        let mut card = AgentCard {
            source: source.into(),
            ..AgentCard::default()
        };
        for (key, value) in pairs {
            card.set(&key, value)?;
        }
        if card.name.is_empty() {
            card.name = Path::new(source)
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        if card.name.is_empty() {
            return Err(CardError::NoName {
                file: source.into(),
            });
        }
        card.body = body;
        Ok(card)
    }

    fn set(&mut self, key: &str, value: Value) -> Result<(), CardError> {
        let bad = |problem: String| CardError::BadValue {
            file: self.source.clone(),
            key: key.into(),
            problem,
        };
        let text = |value: Value| match value {
            Value::Text(text) => Ok(text),
            _ => Err(bad("is a list or map; write one value".into())),
        };
        let optional = |text: String| (!text.is_empty()).then_some(text);
        match key {
            "name" => self.name = text(value)?,
            "description" => self.description = text(value)?,
            "model" => self.model = optional(text(value)?),
            "provider" => self.provider = optional(text(value)?),
            "mode" => self.mode = optional(text(value)?),
            "specialty" => self.specialty = optional(text(value)?),
            "thought_level" => self.thought_level = optional(text(value)?),
            "mcps" | "mcp_servers" => self.mcps = Some(value.into_list()),
            "max_turns" => {
                let written = text(value)?;
                match written.parse::<u32>() {
                    Ok(turns) if turns > 0 => self.max_turns = Some(turns),
                    _ => {
                        return Err(bad(format!("`{written}` is not a whole number above 0")));
                    }
                }
            }
            "max_turn_tokens" | "max_session_tokens" => {
                let written = text(value)?;
                let Some(tokens) = written.parse::<u64>().ok().filter(|n| *n > 0) else {
                    return Err(bad(format!("`{written}` is not a whole number above 0")));
                };
                if key == "max_turn_tokens" {
                    self.max_turn_tokens = Some(tokens);
                } else {
                    self.max_session_tokens = Some(tokens);
                }
            }
            "max_session_cost" => {
                let written = text(value)?;
                let cost = written.parse::<f64>().ok();
                let Some(cost) = cost.filter(|c| c.is_finite() && *c > 0.0) else {
                    return Err(bad(format!("`{written}` is not a number above 0")));
                };
                self.max_session_cost = Some(cost);
            }
            "tools" => match value {
                Value::Map(entries) => {
                    for (tool, policy) in entries {
                        let policy = match policy.as_str() {
                            "true" | "allow" => ToolPolicy::Allow,
                            "ask" => ToolPolicy::Ask,
                            "false" | "deny" => ToolPolicy::Deny,
                            other => {
                                return Err(bad(format!(
                                    "`{tool}: {other}` is not true, false, allow, ask or deny"
                                )));
                            }
                        };
                        self.tool_policies.push((tool, policy));
                    }
                }
                list => self.tools = Some(list.into_list()),
            },
            unused if UNUSED_KEYS.contains(&unused) => {
                tracing::debug!(file = %self.source, key = unused, "agent card key not used");
            }
            other => {
                return Err(CardError::UnknownKey {
                    file: self.source.clone(),
                    key: other.into(),
                });
            }
        }
        Ok(())
    }

    /// The tools the card denies.
    pub fn denied_tools(&self) -> impl Iterator<Item = &str> {
        self.tool_policies
            .iter()
            .filter(|(_, policy)| *policy == ToolPolicy::Deny)
            .map(|(tool, _)| tool.as_str())
    }

    /// Rename the tools the card names into ours (Crucible's `bash` is
    /// our `shell`), so they compare with the registry's names.
    pub fn rename_tools(&mut self, rename: &dyn Fn(&str) -> &str) {
        let names = self.tools.iter_mut().flatten();
        for tool in names.chain(self.tool_policies.iter_mut().map(|(tool, _)| tool)) {
            let renamed = rename(tool).to_string();
            *tool = renamed;
        }
    }

    /// Whether the model sees `tool` while the card is active: on its
    /// allow-list (if any), not denied, and for an MCP tool (named
    /// `server__tool`) from one of its `mcps` (if any).
    pub fn offers(&self, tool: &str) -> bool {
        let listed = (self.tools.as_ref()).is_none_or(|tools| tools.iter().any(|t| t == tool));
        let denied = self.denied_tools().any(|denied| denied == tool);
        let server_offered = match (&self.mcps, tool.split_once("__")) {
            (Some(mcps), Some((server, _))) => mcps.iter().any(|m| m == server),
            _ => true,
        };
        listed && !denied && server_offered
    }

    /// The card's `specialty` through `[llm.models]`, when it names neither
    /// provider nor model: `provider/model` switches both when `provider`
    /// is configured (`is_provider`), anything else is a model.
    fn resolve_specialty(
        &mut self,
        models: &BTreeMap<String, String>,
        is_provider: &dyn Fn(&str) -> bool,
    ) {
        if self.model.is_some() || self.provider.is_some() {
            return;
        }
        let Some(target) = self.specialty.as_ref().and_then(|s| models.get(s)) else {
            return;
        };
        match target.split_once('/') {
            Some((provider, model)) if is_provider(provider) => {
                self.provider = Some(provider.to_string());
                self.model = Some(model.to_string());
            }
            _ => self.model = Some(target.clone()),
        }
    }
}

/// Where cards come from besides the built-ins and the user's directory,
/// and how a `specialty` picks a model (from the config).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CardSettings {
    /// The kiln, whose `.crucible/agents/` holds cards.
    pub kiln: Option<PathBuf>,
    /// `[llm.models]`: specialty → `provider/model` or a model.
    pub specialty_models: BTreeMap<String, String>,
}

/// `$XDG_CONFIG_HOME/crucible/agents`, else `~/.config/crucible/agents`.
pub fn user_dir() -> Option<PathBuf> {
    Some(crate::util::crucible_config_dir()?.join("agents"))
}

/// Every card: built-in, then the user's, the kiln's and the project's
/// (the nearest directory at or above `project` with a `.crucible/`, below
/// the home directory), each replacing earlier cards of the same name.
/// Cards that do not parse are logged and skipped, so one bad file does not
/// hide the others. `is_provider` tells which names `[llm.models]` may use
/// as providers.
pub fn load_all(
    settings: &CardSettings,
    project: &Path,
    is_provider: &dyn Fn(&str) -> bool,
) -> Vec<AgentCard> {
    let mut cards: Vec<AgentCard> = BUILTIN
        .iter()
        .filter_map(|(file, text)| {
            AgentCard::parse(text, &format!("built-in {file}"))
                .map_err(|err| tracing::error!(%err, "built-in agent card"))
                .ok()
        })
        .collect();
    let crucible_dirs = [settings.kiln.clone(), crate::util::project_root(project)]
        .into_iter()
        .flatten()
        .map(|root| root.join(".crucible").join("agents"));
    for dir in user_dir().into_iter().chain(crucible_dirs) {
        for card in load_dir(&dir) {
            cards.retain(|c| c.name != card.name);
            cards.push(card);
        }
    }
    for card in &mut cards {
        card.resolve_specialty(&settings.specialty_models, is_provider);
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

    fn no_providers(_: &str) -> bool {
        false
    }

    #[test]
    fn builtin_cards_parse() {
        let cards = load_all(&CardSettings::default(), Path::new("/"), &no_providers);
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
            ("---\nmax_turns: none\n---\n", "key `max_turns`"),
            ("---\nmax_turn_tokens: 0\n---\n", "key `max_turn_tokens`"),
            (
                "---\nmax_session_cost: lots\n---\n",
                "key `max_session_cost`",
            ),
            ("---\ntools:\n  bash: maybe\n---\n", "`bash: maybe`"),
            ("---\nname: [a, b]\n---\n", "key `name`"),
        ] {
            let err = AgentCard::parse(text, "a.md").unwrap_err().to_string();
            assert!(err.contains(expected), "{text:?}: {err}");
            assert!(err.starts_with("a.md"), "{err}");
        }
        let err = AgentCard::parse("---\ndescription: d\n---\nbody", "")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`name` is missing"), "{err}");
        let card = AgentCard::parse(
            "---\nname: \"q\"\nmodel: 'big'\ntools: read_file, grep\n---\n\nBody.\n",
            "a.md",
        )
        .unwrap();
        assert_eq!(card.name, "q");
        assert_eq!(card.model.as_deref(), Some("big"));
        assert_eq!(card.tools.unwrap(), ["read_file", "grep"]);
        assert_eq!(card.body, "Body.");
        let card = AgentCard::parse(
            "---\nname: thrifty\nmax_turn_tokens: 2000\nmax_session_tokens: 50000\nmax_session_cost: 0.25\n---\n",
            "t.md",
        )
        .unwrap();
        assert_eq!(card.max_turn_tokens, Some(2000));
        assert_eq!(card.max_session_tokens, Some(50_000));
        assert_eq!(card.max_session_cost, Some(0.25));
    }

    /// Crucible's documented example card, as its docs write it.
    const RESEARCHER: &str = "---\ndescription: Explores and synthesizes knowledge\ntools:\n  semantic_search: true\n  read_note: true\n  create_note: ask\n  bash: deny\nmcps:\n  - context7\nmax_turns: 6\nspecialty: reasoning\nversion: 1.0.0\ntags: [research]\n---\n\nYou are a research assistant.\n";

    #[test]
    fn crucibles_card_fields_are_understood() {
        let card = AgentCard::parse(RESEARCHER, "/kiln/.crucible/agents/researcher.md").unwrap();
        assert_eq!(card.name, "researcher", "named after the file");
        assert_eq!(card.tools, None, "a policy map is not an allow-list");
        assert_eq!(
            card.tool_policies,
            [
                ("semantic_search".to_string(), ToolPolicy::Allow),
                ("read_note".to_string(), ToolPolicy::Allow),
                ("create_note".to_string(), ToolPolicy::Ask),
                ("bash".to_string(), ToolPolicy::Deny),
            ]
        );
        assert_eq!(card.denied_tools().collect::<Vec<_>>(), ["bash"]);
        let mut card = card;
        card.rename_tools(&|tool| if tool == "bash" { "shell" } else { tool });
        assert!(!card.offers("shell") && card.offers("read_file"));
        assert!(card.offers("context7__resolve") && !card.offers("github__search"));
        assert_eq!(card.mcps.as_deref(), Some(&["context7".to_string()][..]));
        assert_eq!(card.max_turns, Some(6));
        assert_eq!(card.body, "You are a research assistant.");
    }

    #[test]
    fn a_specialty_picks_a_model_through_llm_models() {
        let models = BTreeMap::from([
            ("reasoning".to_string(), "cloud/o1".to_string()),
            ("coder".to_string(), "qwen2.5-coder".to_string()),
            ("hub".to_string(), "hf.co/org/model".to_string()),
        ]);
        let is_provider = |name: &str| name == "cloud";
        let resolved = |specialty: &str, model: Option<&str>| {
            let mut card = AgentCard {
                specialty: Some(specialty.into()),
                model: model.map(str::to_string),
                ..AgentCard::default()
            };
            card.resolve_specialty(&models, &is_provider);
            (card.provider, card.model)
        };
        let some = |s: &str| Some(s.to_string());
        assert_eq!(resolved("reasoning", None), (some("cloud"), some("o1")));
        assert_eq!(resolved("coder", None), (None, some("qwen2.5-coder")));
        assert_eq!(resolved("hub", None), (None, some("hf.co/org/model")));
        assert_eq!(resolved("unmapped", None), (None, None), "inherits");
        assert_eq!(resolved("reasoning", Some("mine")), (None, some("mine")));
    }

    #[test]
    fn project_and_kiln_cards_replace_earlier_ones() {
        let root = tempfile::tempdir().unwrap();
        let write = |dir: &Path, file: &str, text: &str| {
            let agents = dir.join(".crucible").join("agents");
            std::fs::create_dir_all(&agents).unwrap();
            std::fs::write(agents.join(file), text).unwrap();
        };
        let kiln = root.path().join("kiln");
        let project = root.path().join("project");
        let nested = project.join("src").join("deep");
        std::fs::create_dir_all(&nested).unwrap();
        write(&kiln, "researcher.md", RESEARCHER);
        write(
            &kiln,
            "coder.md",
            "---\ndescription: kiln coder\n---\nKiln.",
        );
        write(
            &project,
            "coder.md",
            "---\ndescription: project coder\n---\nProject.",
        );
        write(&project, "broken.md", "no front matter");
        let settings = CardSettings {
            kiln: Some(kiln),
            specialty_models: BTreeMap::from([("reasoning".into(), "deep-model".into())]),
        };
        let cards = load_all(&settings, &nested, &no_providers);
        let named = |name: &str| cards.iter().filter(|c| c.name == name).collect::<Vec<_>>();
        assert_eq!(named("coder").len(), 1);
        assert_eq!(named("coder")[0].description, "project coder");
        assert_eq!(named("researcher")[0].model.as_deref(), Some("deep-model"));
        assert!(named("reviewer").len() == 1, "built-ins stay");
        assert!(named("broken").is_empty(), "a bad card is skipped");
    }
}
