//! `[permissions]`: our `[[permissions.rules]]`, Crucible's `default`,
//! `allow`, `deny` and `ask` lists, and each ACP profile's lists
//! (`[acp.agents.NAME.permissions]`), one of which replaces the global lists
//! when the agent runs under that profile (`--profile`).

use std::collections::BTreeMap;
use std::path::Path;

use super::error::{ConfigError, invalid};
use super::raw::{OneOrMany, RawAcp, RawPermissions, RawRule};
use crate::events::ToolKind;
use crate::permissions::patterns::{PatternLists, PatternRule};
use crate::permissions::{Decision, DeclaredReads, Rule, RuleScope};

/// Everything the permission tables say.
pub(super) struct PermissionTables {
    pub rules: Vec<Rule>,
    /// `[permissions]`'s lists.
    pub lists: PatternLists,
    /// Every `[acp.agents.NAME]` profile, with its own lists if it has any.
    pub profiles: BTreeMap<String, Option<PatternLists>>,
    /// `reads`: the tools that run as reads.
    pub reads: DeclaredReads,
    /// Patterns that can never match.
    pub warnings: Vec<String>,
}

pub(super) fn validate(
    raw: RawPermissions,
    acp: Option<RawAcp>,
    path: &Path,
) -> Result<PermissionTables, ConfigError> {
    let mut warnings = Vec::new();
    let lists = validate_lists(&raw, "permissions", path, &mut warnings)?;
    let reads = match raw.reads.clone() {
        None => DeclaredReads::default(),
        Some(tools) => DeclaredReads::configured(
            tools
                .into_iter()
                .map(|tool| tool.trim().to_string())
                .filter(|tool| !tool.is_empty())
                .collect(),
        ),
    };
    let rules = validate_rules(raw, path)?;
    let mut profiles = BTreeMap::new();
    for (name, agent) in acp.and_then(|acp| acp.agents).unwrap_or_default() {
        let key = format!("acp.agents.{name}.permissions");
        let lists = match agent.permissions {
            Some(raw) if !raw.rules.is_empty() => {
                return Err(invalid(
                    path,
                    format!("{key}.rules"),
                    "is not read per profile",
                    "A profile takes default, allow, deny and ask; put [[permissions.rules]] in [permissions] (they apply under every profile).",
                ));
            }
            Some(raw) if raw.reads.is_some() => {
                return Err(invalid(
                    path,
                    format!("{key}.reads"),
                    "is not read per profile",
                    "A profile takes default, allow, deny and ask; put `reads` in [permissions] (it applies under every profile).",
                ));
            }
            Some(raw) => Some(validate_lists(&raw, &key, path, &mut warnings)?),
            None => None,
        };
        profiles.insert(name, lists);
    }
    Ok(PermissionTables {
        rules,
        lists,
        profiles,
        reads,
        warnings,
    })
}

/// Crucible's `default`, `allow`, `deny` and `ask` of the table at `key`.
fn validate_lists(
    raw: &RawPermissions,
    key: &str,
    path: &Path,
    warnings: &mut Vec<String>,
) -> Result<PatternLists, ConfigError> {
    let default = match raw.default.as_deref() {
        None | Some("ask") => Decision::Ask,
        Some("allow") => Decision::Allow,
        Some("deny") => Decision::Deny,
        Some(other) => {
            return Err(invalid(
                path,
                format!("{key}.default"),
                format!("`{other}` is not a decision"),
                "Use \"allow\", \"deny\" or \"ask\" (what happens when no rule matches).",
            ));
        }
    };
    let mut list = |name: &str, texts: &Option<Vec<String>>| {
        let mut compiled = Vec::new();
        for (n, text) in texts.iter().flatten().enumerate() {
            let place = format!("{key}.{name}[{n}]");
            let rule = PatternRule::parse(text).map_err(|err| {
                invalid(
                    path,
                    &place,
                    format!("`{text}` {err}"),
                    "Write `tool:pattern`, e.g. \"bash:cargo *\", \"read_file:*\" or \"read:*\"; the pattern is a glob (* ? [abc] {a,b}).",
                )
            })?;
            if rule.matches_nothing() {
                warnings.push(format!(
                    "{}: key `{place}`: `{text}` matches no tool (as in Crucible); name the tool itself instead",
                    path.display()
                ));
            }
            compiled.push(rule);
        }
        Ok::<_, ConfigError>(compiled)
    };
    Ok(PatternLists {
        default,
        allow: list("allow", &raw.allow)?,
        deny: list("deny", &raw.deny)?,
        ask: list("ask", &raw.ask)?,
    })
}

/// A rules file (`PROJECT/.crucible/permissions.toml`, the user's
/// `permissions.toml`): `[[permissions.rules]]` only, its relative paths
/// under `base`; each rule ranks as the user's answer ([`RuleScope::Session`]).
/// Also the text the rules were read from, so a caller judges the very
/// bytes they came from. A missing file has no rules (and no text).
pub fn load_rules_file(
    path: &Path,
    base: Option<&Path>,
    origin: crate::permissions::RuleOrigin,
) -> Result<(Vec<Rule>, String), ConfigError> {
    #[derive(serde::Deserialize, Default)]
    #[serde(deny_unknown_fields)]
    struct RulesFile {
        #[serde(default)]
        permissions: RulesTable,
    }
    #[derive(serde::Deserialize, Default)]
    #[serde(deny_unknown_fields)]
    struct RulesTable {
        #[serde(default)]
        rules: Vec<RawRule>,
    }
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Vec::new(), String::new()));
        }
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let file: RulesFile = toml::from_str(&text).map_err(|err| ConfigError::Parse {
        path: path.to_path_buf(),
        message: format!("{err}It holds only [[permissions.rules]] entries."),
    })?;
    let rules = (file.permissions.rules.into_iter().enumerate())
        .map(|(n, raw)| {
            let place = RulePlace { n, path, base };
            let rule = place.rule(raw)?;
            if rule.scope != RuleScope::Global {
                return Err(place.invalid(
                    "scope",
                    "is set in a rules file",
                    "Its rules are the user's own answers; remove `scope` and `agent`.",
                ));
            }
            Ok(Rule {
                scope: RuleScope::Session,
                origin: origin.clone(),
                ..rule
            })
        })
        .collect::<Result<_, _>>()?;
    Ok((rules, text))
}

/// The rules in the order written (first match wins among equals).
fn validate_rules(raw: RawPermissions, path: &Path) -> Result<Vec<Rule>, ConfigError> {
    raw.rules
        .into_iter()
        .enumerate()
        .map(|(n, rule)| {
            let place = RulePlace {
                n,
                path,
                base: None,
            };
            place.rule(rule)
        })
        .collect()
}

/// Rule number `n` of the file at `path`, for naming its keys.
struct RulePlace<'a> {
    n: usize,
    path: &'a Path,
    /// What relative `path`s are relative to (a rules file's project).
    base: Option<&'a Path>,
}

impl RulePlace<'_> {
    fn invalid(&self, field: &str, problem: impl Into<String>, fix: &str) -> ConfigError {
        invalid(
            self.path,
            format!("permissions.rules[{}].{field}", self.n),
            problem,
            fix,
        )
    }

    fn rule(&self, rule: RawRule) -> Result<Rule, ConfigError> {
        let decision = self.decision(rule.decision.as_deref())?;
        let kind = match rule.kind.as_deref() {
            None => None,
            Some(text) => Some(ToolKind::parse(text).ok_or_else(|| {
                self.invalid(
                    "kind",
                    format!("`{text}` is not a tool kind"),
                    "Use one of read, edit, delete, move, search, execute, fetch, think, other.",
                )
            })?),
        };
        let pattern = match rule.pattern.as_deref() {
            None => None,
            Some(text) => Some(regex::Regex::new(text).map_err(|err| {
                self.invalid(
                    "pattern",
                    format!("is not a valid regular expression: {err}"),
                    "Fix the expression (Rust regex syntax), or use command_prefix.",
                )
            })?),
        };
        let command_prefixes = rule
            .command_prefix
            .map(OneOrMany::into_vec)
            .unwrap_or_default();
        if command_prefixes
            .iter()
            .any(|prefix| prefix.trim().is_empty())
        {
            return Err(self.invalid(
                "command_prefix",
                "contains an empty prefix, which would match every command",
                "Write the start of the command, e.g. \"cargo \", or use all = true.",
            ));
        }
        let tool = rule.tool.filter(|tool| tool != "*");
        let command = rule.command.filter(|command| !command.trim().is_empty());
        let paths: Vec<std::path::PathBuf> = (rule.path.map(OneOrMany::into_vec))
            .unwrap_or_default()
            .into_iter()
            .map(|path| {
                self.base
                    .map_or_else(|| path.clone().into(), |base| base.join(&path))
            })
            .collect();
        if rule.all == Some(true)
            && (tool.is_some()
                || kind.is_some()
                || !command_prefixes.is_empty()
                || pattern.is_some()
                || command.is_some()
                || !paths.is_empty())
        {
            return Err(self.invalid(
                "all",
                "is true beside other matchers",
                "all = true matches every call: remove it or the other matchers (tool, kind, command_prefix, pattern).",
            ));
        }
        Ok(Rule {
            scope: self.scope(rule.scope.as_deref(), rule.agent)?,
            priority: rule.priority.unwrap_or(0),
            tool,
            kind,
            command_prefixes,
            pattern,
            command,
            paths,
            decision,
            origin: crate::permissions::RuleOrigin::Config,
            untrusted: false,
        })
    }

    fn decision(&self, written: Option<&str>) -> Result<Decision, ConfigError> {
        match written {
            Some("allow") => Ok(Decision::Allow),
            Some("deny") => Ok(Decision::Deny),
            Some("ask") => Ok(Decision::Ask),
            Some(other) => Err(self.invalid(
                "decision",
                format!("`{other}` is not a decision"),
                "Use \"allow\", \"deny\" or \"ask\".",
            )),
            None => Err(self.invalid(
                "decision",
                "is missing",
                "Say what the rule decides: decision = \"allow\", \"deny\" or \"ask\".",
            )),
        }
    }

    fn scope(&self, scope: Option<&str>, agent: Option<String>) -> Result<RuleScope, ConfigError> {
        match (scope, agent) {
            (None | Some("global"), None) => Ok(RuleScope::Global),
            (Some("user"), None) => Ok(RuleScope::User),
            (None | Some("agent"), Some(agent)) if !agent.trim().is_empty() => {
                Ok(RuleScope::Agent(agent))
            }
            (Some("agent"), _) | (None, Some(_)) => Err(self.invalid(
                "agent",
                "is missing or empty for an agent-scoped rule",
                "Name the agent card the rule is for, e.g. agent = \"reviewer\".",
            )),
            (Some(scope @ ("global" | "user")), Some(_)) => Err(self.invalid(
                "agent",
                format!("is set on a rule with scope \"{scope}\""),
                "Remove `agent`, or set scope = \"agent\".",
            )),
            (Some(other), _) => Err(self.invalid(
                "scope",
                format!("`{other}` is not a rule scope"),
                "Use \"global\" (the default), \"user\" (checked before everything else) or \"agent\" (with agent = \"NAME\"). Session rules come from \"always\" answers.",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{load, refusal};

    /// A file with the one rule `rule` is refused, naming its `field`.
    fn assert_rule_refused(rule: &str, field: &str) {
        let err = refusal(&format!("[[permissions.rules]]\n{rule}"));
        assert!(
            err.contains(&format!("permissions.rules[0].{field}")),
            "{err}"
        );
    }

    #[test]
    fn permission_rules_are_read_in_order_and_checked() {
        let text = "[[permissions.rules]]\ntool = \"shell\"\ncommand_prefix = \"cargo \"\ndecision = \"allow\"\n[[permissions.rules]]\nkind = \"execute\"\npattern = \"rm\\\\s+-rf\"\ndecision = \"deny\"\n[[permissions.rules]]\ntool = \"*\"\ndecision = \"ask\"";
        let config = load(text, &[]).unwrap();
        let rules = &config.permission_rules;
        assert_eq!(rules.len(), 3);
        assert_eq!(rules[0].tool.as_deref(), Some("shell"));
        assert_eq!(rules[0].decision, crate::permissions::Decision::Allow);
        assert_eq!(rules[1].kind, Some(crate::events::ToolKind::Execute));
        assert!(rules[1].pattern.as_ref().unwrap().is_match("rm  -rf /"));
        assert_eq!(rules[2].tool, None, "\"*\" matches every tool");
        for (rule, key) in [
            ("tool = \"shell\"", "decision"),
            ("decision = \"maybe\"", "decision"),
            ("kind = \"writes\"\ndecision = \"deny\"", "kind"),
            ("pattern = \"(\"\ndecision = \"deny\"", "pattern"),
        ] {
            assert_rule_refused(rule, key);
        }
    }

    #[test]
    fn permission_rules_have_scopes_priorities_and_prefix_lists() {
        use crate::permissions::RuleScope;
        let text = "[[permissions.rules]]\ncommand_prefix = [\"cargo \", \"make\"]\npriority = 5\ndecision = \"allow\"\n[[permissions.rules]]\nscope = \"user\"\nall = true\ndecision = \"ask\"\n[[permissions.rules]]\nagent = \"reviewer\"\nkind = \"edit\"\ndecision = \"deny\"";
        let rules = load(text, &[]).unwrap().permission_rules;
        assert_eq!(rules[0].scope, RuleScope::Global);
        assert_eq!(rules[0].priority, 5);
        assert_eq!(rules[0].command_prefixes, ["cargo ", "make"]);
        assert_eq!(rules[1].scope, RuleScope::User);
        assert!(rules[1].tool.is_none() && rules[1].kind.is_none());
        assert_eq!(rules[2].scope, RuleScope::Agent("reviewer".into()));
        for (rule, key) in [
            ("scope = \"team\"\ndecision = \"ask\"", "scope"),
            ("scope = \"agent\"\ndecision = \"ask\"", "agent"),
            (
                "scope = \"user\"\nagent = \"x\"\ndecision = \"ask\"",
                "agent",
            ),
            ("all = true\ntool = \"shell\"\ndecision = \"ask\"", "all"),
            (
                "command_prefix = \"\"\ndecision = \"ask\"",
                "command_prefix",
            ),
        ] {
            assert_rule_refused(rule, key);
        }
        let err = refusal("[[permissions.rules]]\npriority = \"high\"\ndecision = \"ask\"");
        assert!(err.contains("priority"), "{err}");
    }

    /// The `[permissions]` example of Crucible's permissions page, and its
    /// per-agent profiles.
    const CRUCIBLE_PERMISSIONS: &str = r#"
[permissions]
default = "ask"
allow = ["bash:cargo *", "bash:git *", "read_file:*"]
deny = ["bash:rm -rf *", "bash:sudo *"]
ask = ["write_file:*", "edit_file:*", "bash:*"]

[acp.agents.claude]
extends = "claude"
env = { ANTHROPIC_BASE_URL = "http://localhost:4000" }

[acp.agents.gemini.permissions]
default = "deny"
allow = ["read:*", "search:*"]

[acp.agents.opencode.permissions]
default = "allow"
deny = ["bash:*"]
"#;

    fn with_profile(text: &str, profile: &str) -> crate::config::Config {
        let overrides = crate::config::Overrides {
            profile: Some(profile.into()),
            ..Default::default()
        };
        let env = |_: &str| None;
        crate::config::Config::from_toml(
            text,
            std::path::Path::new("/cfg/config.toml"),
            &env,
            &overrides,
        )
        .unwrap()
    }

    #[test]
    fn crucibles_lists_and_profiles_load() {
        use crate::permissions::Decision;
        let text = format!("{CRUCIBLE_PERMISSIONS}\n[llm.providers.local]\ntype = \"ollama\"\n");
        let config = load(&text, &[]).unwrap();
        let lists = &config.permission_lists;
        assert_eq!(lists.default, Decision::Ask);
        let texts = |rules: &[crate::permissions::patterns::PatternRule]| {
            rules.iter().map(|r| r.text.clone()).collect::<Vec<_>>()
        };
        assert_eq!(
            texts(&lists.allow),
            ["bash:cargo *", "bash:git *", "read_file:*"]
        );
        assert_eq!(texts(&lists.deny), ["bash:rm -rf *", "bash:sudo *"]);
        assert_eq!(lists.ask.len(), 3);
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
        // A profile's lists replace the global ones; one without keeps them.
        let gemini = with_profile(&text, "gemini");
        assert_eq!(gemini.permission_lists.default, Decision::Deny);
        assert_eq!(
            texts(&gemini.permission_lists.allow),
            ["read:*", "search:*"]
        );
        assert!(gemini.permission_lists.deny.is_empty());
        let claude = with_profile(&text, "claude");
        assert_eq!(claude.permission_lists.deny.len(), 2);
        assert!(claude.warnings.is_empty());
        let unknown = with_profile(&text, "nobody");
        assert_eq!(unknown.permission_lists.deny.len(), 2);
        assert!(
            unknown
                .warnings
                .iter()
                .any(|w| w.contains("profile `nobody`")),
            "{:?}",
            unknown.warnings
        );
    }

    #[test]
    fn bad_lists_are_refused_naming_the_entry() {
        for (text, key) in [
            ("[permissions]\ndefault = \"maybe\"", "permissions.default"),
            (
                "[permissions]\nallow = [\"read_file:*\", \"bash\"]",
                "permissions.allow[1]",
            ),
            ("[permissions]\ndeny = [\"bash:[x\"]", "permissions.deny[0]"),
            ("[permissions]\nask = [\":x\"]", "permissions.ask[0]"),
            ("[permissions]\nallows = []", "allows"),
            (
                "[acp.agents.a.permissions]\ndeny = [\"rm\"]",
                "acp.agents.a.permissions.deny[0]",
            ),
            (
                "[[acp.agents.a.permissions.rules]]\ntool = \"shell\"\ndecision = \"deny\"",
                "acp.agents.a.permissions.rules",
            ),
        ] {
            let err = refusal(text);
            assert!(
                err.contains("/cfg/config.toml") && err.contains(key),
                "{key}: {err}"
            );
        }
        let config = load("[permissions]\nallow = [\"plugin:srv:*\"]", &[]).unwrap();
        assert!(
            config
                .warnings
                .iter()
                .any(|w| w.contains("permissions.allow[0]")),
            "{:?}",
            config.warnings
        );
    }
}
