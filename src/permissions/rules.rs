//! Permission rules and how one is chosen: a [`Rule`]'s matchers, its
//! [`RuleScope`] (which also orders rules), and [`first_match`], which
//! picks the rule that decides a call.

use std::path::PathBuf;

use crate::events::{ToolCallInfo, ToolKind};
use crate::tools::Tool;

/// Where a rule comes from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RuleOrigin {
    /// The config file's `[[permissions.rules]]` (or an agent card).
    #[default]
    Config,
    /// An "Always allow/reject" answer in this session.
    Session,
    /// `PROJECT/.crucible/permissions.toml`.
    ProjectFile(PathBuf),
    /// The user's `permissions.toml`.
    UserFile(PathBuf),
}

/// What a rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Decision {
    Allow,
    Deny,
    #[default]
    Ask,
}

/// Where a rule comes from, which also orders rules: earlier scopes first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RuleScope {
    /// The user's own overrides (`scope = "user"` in the config).
    User,
    /// Made during the session by an "always" answer.
    Session,
    /// Only for sessions run by this agent (card) name.
    Agent(String),
    /// The config's rules for everything.
    #[default]
    Global,
}

impl RuleScope {
    fn rank(&self) -> u8 {
        match self {
            RuleScope::User => 0,
            RuleScope::Session => 1,
            RuleScope::Agent(_) => 2,
            RuleScope::Global => 3,
        }
    }
}

/// A permission rule. Every matcher given must match; a rule without
/// matchers (or with `all = true` in the config) matches every call.
#[derive(Debug, Clone, Default)]
pub struct Rule {
    pub scope: RuleScope,
    /// Higher is checked first within a scope (default 0).
    pub priority: i32,
    /// The tool's name.
    pub tool: Option<String>,
    /// The tool's kind (its category: read, edit, execute…).
    pub kind: Option<ToolKind>,
    /// For `shell`: the command starts with one of these.
    pub command_prefixes: Vec<String>,
    /// Searched in the call's arguments as JSON text.
    pub pattern: Option<regex::Regex>,
    /// For `shell`: the command is exactly this (what a remembered answer
    /// approved, and nothing more).
    pub command: Option<String>,
    /// Every place the call touches is one of these (and it touches one).
    pub paths: Vec<PathBuf>,
    pub decision: Decision,
    /// Where the rule was written, for `/permissions`.
    pub origin: RuleOrigin,
    /// An allow rule of a project file that is not trusted
    /// ([`TrustedRules`]): listed, never matched.
    pub untrusted: bool,
}

impl Rule {
    /// A rule for every call of one tool.
    pub fn for_tool(scope: RuleScope, tool: impl Into<String>, decision: Decision) -> Self {
        Self {
            scope,
            tool: Some(tool.into()),
            decision,
            ..Self::default()
        }
    }

    /// Whether the rule decides `call`. An untrusted rule decides nothing.
    pub fn matches(&self, call: &ToolCallInfo, tool: &dyn Tool) -> bool {
        !self.untrusted
            && self.tool.as_deref().is_none_or(|name| name == tool.name())
            && self.kind.is_none_or(|kind| kind == tool.kind())
            && (self.command_prefixes.is_empty()
                || call.raw_input["command"].as_str().is_some_and(|command| {
                    let command = command.trim_start();
                    self.command_prefixes
                        .iter()
                        .any(|prefix| command.starts_with(prefix.as_str()))
                }))
            && self
                .pattern
                .as_ref()
                .is_none_or(|pattern| pattern.is_match(&call.raw_input.to_string()))
            && self.command.as_deref().is_none_or(|exact| {
                call.raw_input["command"]
                    .as_str()
                    .is_some_and(|command| command.trim() == exact.trim())
            })
            && (self.paths.is_empty()
                || (!call.locations.is_empty()
                    && call
                        .locations
                        .iter()
                        .all(|location| self.paths.contains(&location.path))))
    }

    /// Whether the rule applies to a session run by `agent`.
    fn applies_to(&self, agent: Option<&str>) -> bool {
        match &self.scope {
            RuleScope::Agent(name) => agent == Some(name.as_str()),
            _ => true,
        }
    }
}

/// The rule that decides `call`, if any: `rules` in evaluation order
/// (scope, then priority, then the order given), first match wins.
pub fn first_match<'r>(
    rules: impl IntoIterator<Item = &'r Rule>,
    agent: Option<&str>,
    call: &ToolCallInfo,
    tool: &dyn Tool,
) -> Option<&'r Rule> {
    let mut ordered: Vec<&Rule> = rules
        .into_iter()
        .filter(|rule| rule.applies_to(agent))
        .collect();
    // Stable: equal keys keep the order given.
    ordered.sort_by_key(|rule| (rule.scope.rank(), std::cmp::Reverse(rule.priority)));
    ordered.into_iter().find(|rule| rule.matches(call, tool))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permissions::tests::{call_of, rule};
    use crate::tools::ToolRegistry;
    use serde_json::json;

    #[test]
    fn scope_then_priority_then_order_decides_which_rule_wins() {
        let registry = ToolRegistry::builtin();
        let shell = registry.get("shell").unwrap();
        let call = call_of(&**shell, json!({"command": "cargo test"}));
        let with = |scope: RuleScope, priority: i32, decision: Decision| Rule {
            scope,
            priority,
            decision,
            ..Rule::default()
        };
        let winner = |rules: &[Rule], agent: Option<&str>| {
            first_match(rules, agent, &call, &**shell).map(|rule| rule.decision)
        };
        use Decision::{Allow, Ask, Deny};
        // Higher priority first within a scope; equal priority: the order written.
        let rules = [
            with(RuleScope::Global, 0, Deny),
            with(RuleScope::Global, 5, Allow),
        ];
        assert_eq!(winner(&rules, None), Some(Allow));
        let rules = [
            with(RuleScope::Global, 1, Ask),
            with(RuleScope::Global, 1, Deny),
        ];
        assert_eq!(winner(&rules, None), Some(Ask));
        // User and session rules come before any global one, whatever its priority.
        let rules = [
            with(RuleScope::Global, 100, Deny),
            with(RuleScope::Session, -5, Allow),
        ];
        assert_eq!(winner(&rules, None), Some(Allow));
        let rules = [
            with(RuleScope::Session, 100, Allow),
            with(RuleScope::User, 0, Deny),
        ];
        assert_eq!(winner(&rules, None), Some(Deny));
        // Agent rules apply to their agent only, before global ones.
        let rules = [
            with(RuleScope::Global, 9, Ask),
            with(RuleScope::Agent("reviewer".into()), 0, Deny),
        ];
        assert_eq!(winner(&rules, Some("reviewer")), Some(Deny));
        assert_eq!(winner(&rules, Some("coder")), Some(Ask));
        assert_eq!(winner(&rules, None), Some(Ask));
        // A rule that does not match is passed over.
        let rules = [
            Rule {
                priority: 10,
                ..rule(Some("shell"), Some("rm "), Deny)
            },
            rule(Some("shell"), None, Allow),
        ];
        assert_eq!(winner(&rules, None), Some(Allow));
        assert_eq!(winner(&[], None), None);
    }

    #[test]
    fn matchers_cover_name_kind_prefixes_pattern_and_all() {
        let registry = ToolRegistry::builtin();
        let shell = registry.get("shell").unwrap();
        let read = registry.get("read_file").unwrap();
        let cargo = call_of(&**shell, json!({"command": "  cargo build"}));
        let git = call_of(&**shell, json!({"command": "git status"}));
        let file = call_of(&**read, json!({"path": "secret.env"}));
        let prefixes = Rule {
            command_prefixes: vec!["cargo ".into(), "make".into()],
            ..Rule::default()
        };
        assert!(prefixes.matches(&cargo, &**shell));
        assert!(!prefixes.matches(&git, &**shell));
        assert!(!prefixes.matches(&file, &**read), "no command, no match");
        let kind = Rule {
            kind: Some(ToolKind::Execute),
            ..Rule::default()
        };
        assert!(kind.matches(&git, &**shell));
        assert!(!kind.matches(&file, &**read));
        let pattern = Rule {
            pattern: Some(regex::Regex::new(r"\.env\b").unwrap()),
            ..Rule::default()
        };
        assert!(pattern.matches(&file, &**read));
        assert!(!pattern.matches(&git, &**shell));
        let all = Rule::default();
        assert!(all.matches(&cargo, &**shell) && all.matches(&file, &**read));
    }
}
