//! Crucible's `[permissions]` lists: `default`, and `allow`, `deny` and
//! `ask` lists of `tool:pattern` strings. The tool part names a tool (in
//! Crucible's words or ours: `bash` is `shell`), an ACP kind (`read:*`) or
//! `*`; the pattern is a glob over the shell command's statements, or over
//! the call's arguments as JSON for every other tool. Within the lists deny
//! wins, then ask, then allow (Crucible's order); how they sit beside the
//! other rules is in [`super::SessionPermissions`] and the README.

use globset::{GlobBuilder, GlobMatcher};
use serde_json::Value;
use thiserror::Error;

use super::Decision;
use super::command_line::{self, Unreadable};
use crate::events::ToolKind;

/// Our shell tool, which `bash:` patterns match statement by statement.
const SHELL: &str = "shell";

/// Our name for a tool Crucible names `crucible`. The file tools, `glob`
/// and `grep` share their names; only the shell differs.
pub fn our_tool_name(crucible: &str) -> &str {
    match crucible {
        "bash" => SHELL,
        other => other,
    }
}

/// The tool kind a rule's tool part names, in Crucible's vocabulary (ACP
/// kinds, where a move is `write` and an unknown kind is `acp_tool`) or ACP's.
fn kind_named(name: &str) -> Option<ToolKind> {
    match name {
        "write" => Some(ToolKind::Move),
        "acp_tool" => Some(ToolKind::Other),
        other => ToolKind::parse(other),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PatternError {
    #[error("has no `:` between the tool and the pattern")]
    NoColon,
    #[error("has no tool before the `:`")]
    NoTool,
    #[error("has no server name between its `:`s")]
    NoServer,
    #[error("has an invalid glob: {0}")]
    Glob(String),
}

/// What a rule's tool part selects.
#[derive(Debug, Clone)]
enum Target {
    /// `*`
    Any,
    /// A tool by name, or every tool of a kind the name stands for.
    Named {
        tool: String,
        kind: Option<ToolKind>,
    },
    /// `mcp:SERVER:PATTERN`: that server's tools, the glob over the tool's name.
    McpServer(String),
    /// `plugin:…`: Crucible parses it and it matches nothing; so here.
    Nothing,
}

/// One `tool:pattern` string, compiled.
#[derive(Debug, Clone)]
pub struct PatternRule {
    /// As written, for messages.
    pub text: String,
    target: Target,
    glob: GlobMatcher,
}

impl PatternRule {
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let mut parts = text.splitn(3, ':');
        let tool = parts.next().unwrap_or_default();
        let (second, third) = (parts.next(), parts.next());
        let Some(second) = second else {
            return Err(PatternError::NoColon);
        };
        if tool.is_empty() {
            return Err(PatternError::NoTool);
        }
        let (target, pattern) = match (tool, third) {
            ("mcp" | "plugin", Some(_)) if second.is_empty() => return Err(PatternError::NoServer),
            ("mcp", Some(pattern)) => (Target::McpServer(second.to_string()), pattern.to_string()),
            ("plugin", Some(pattern)) => (Target::Nothing, pattern.to_string()),
            (_, third) => {
                let target = match tool {
                    "*" => Target::Any,
                    _ => Target::Named {
                        tool: our_tool_name(tool).to_string(),
                        kind: kind_named(tool),
                    },
                };
                let pattern = match third {
                    Some(third) => format!("{second}:{third}"),
                    None => second.to_string(),
                };
                (target, pattern)
            }
        };
        // Crucible's glob settings: case-sensitive, and `*` crosses `/`
        // (a command or JSON text is not a path).
        let glob = GlobBuilder::new(&pattern)
            .literal_separator(false)
            .build()
            .map_err(|err| PatternError::Glob(err.to_string()))?
            .compile_matcher();
        Ok(Self {
            text: text.to_string(),
            target,
            glob,
        })
    }

    /// Whether Crucible would see nothing this rule could match (`plugin:`).
    pub fn matches_nothing(&self) -> bool {
        matches!(self.target, Target::Nothing)
    }

    fn matches(&self, tool: &str, kind: ToolKind, input: &str) -> bool {
        let glob = |text: &str| {
            self.glob.is_match(text)
                // `bash:cargo *` also covers a bare `cargo`.
                || (tool == SHELL && !text.ends_with(' ') && self.glob.is_match(format!("{text} ")))
        };
        match &self.target {
            Target::Any => glob(input),
            Target::Named {
                tool: name,
                kind: named_kind,
            } => (name == tool || *named_kind == Some(kind)) && glob(input),
            Target::McpServer(server) => tool
                .strip_prefix(server.as_str())
                .and_then(|rest| rest.strip_prefix("__"))
                .is_some_and(|rest| self.glob.is_match(rest)),
            Target::Nothing => false,
        }
    }
}

/// What the lists say about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A `deny` pattern matched (its text).
    Deny(String),
    /// An `ask` pattern matched, or a line the lists cannot read must not
    /// slip past their `deny` patterns under `default = "allow"`.
    Ask,
    /// `allow` patterns cover the whole call.
    Allow,
    /// Nothing matched (or the command line hides what it runs): `default`
    /// decides, after the other rules.
    NoMatch,
}

/// A `[permissions]` section's lists (or an ACP profile's).
#[derive(Debug, Clone, Default)]
pub struct PatternLists {
    /// When nothing else decides: allow and deny decide, ask leaves it to the mode.
    pub default: Decision,
    pub allow: Vec<PatternRule>,
    pub deny: Vec<PatternRule>,
    pub ask: Vec<PatternRule>,
}

impl PatternLists {
    pub fn is_empty(&self) -> bool {
        self.default == Decision::Ask
            && self.allow.is_empty()
            && self.deny.is_empty()
            && self.ask.is_empty()
    }

    /// The lists' verdict on a call of `tool` (of `kind`) with `input`.
    pub fn evaluate(&self, tool: &str, kind: ToolKind, input: &Value) -> Verdict {
        if tool == SHELL {
            let command = input["command"].as_str().unwrap_or_default();
            return self.evaluate_command(command);
        }
        self.evaluate_text(tool, kind, &input.to_string())
    }

    fn evaluate_text(&self, tool: &str, kind: ToolKind, input: &str) -> Verdict {
        let any = |rules: &[PatternRule]| rules.iter().any(|r| r.matches(tool, kind, input));
        if let Some(rule) = self.deny.iter().find(|r| r.matches(tool, kind, input)) {
            return Verdict::Deny(rule.text.clone());
        }
        if any(&self.ask) {
            return Verdict::Ask;
        }
        if any(&self.allow) {
            return Verdict::Allow;
        }
        Verdict::NoMatch
    }

    /// Statement by statement: one denied statement denies the line, one
    /// asked asks, and allow needs every statement allowed. Deny and ask
    /// also see each statement's resolved command (`sudo rm` is `rm`); allow
    /// sees only what was written, so resolution can only ever tighten.
    fn evaluate_command(&self, command: &str) -> Verdict {
        let split = command_line::split(command);
        if split.statements.is_empty() {
            return self.evaluate_text(SHELL, ToolKind::Execute, command);
        }
        let matching = |rules: &[PatternRule], text: &str| {
            rules
                .iter()
                .find(|rule| rule.matches(SHELL, ToolKind::Execute, text))
                .map(|rule| rule.text.clone())
        };
        let mut unreadable: Option<Unreadable> = split.unreadable;
        let mut asked = false;
        let mut all_allowed = true;
        for statement in &split.statements {
            let resolved = command_line::resolve(statement);
            unreadable = unreadable.or(resolved.unreadable);
            let restrictive = |rules: &[PatternRule]| {
                matching(rules, statement).or_else(|| matching(rules, &resolved.command))
            };
            if let Some(rule) = restrictive(&self.deny) {
                return Verdict::Deny(rule);
            }
            asked |= restrictive(&self.ask).is_some();
            all_allowed &= matching(&self.allow, statement).is_some();
        }
        if asked {
            return Verdict::Ask;
        }
        if let Some(construct) = unreadable {
            tracing::debug!(
                construct = construct.describe(),
                "command hides what it runs; the permission default decides"
            );
            // Allowing it would leave the deny list unenforced on exactly
            // the lines it cannot check (Crucible does the same).
            if self.default == Decision::Allow && !self.deny.is_empty() {
                return Verdict::Ask;
            }
            return Verdict::NoMatch;
        }
        if all_allowed {
            Verdict::Allow
        } else {
            Verdict::NoMatch
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(texts: &[&str]) -> Vec<PatternRule> {
        texts
            .iter()
            .map(|t| PatternRule::parse(t).unwrap())
            .collect()
    }

    fn lists(default: Decision, allow: &[&str], deny: &[&str], ask: &[&str]) -> PatternLists {
        PatternLists {
            default,
            allow: rules(allow),
            deny: rules(deny),
            ask: rules(ask),
        }
    }

    fn shell(lists: &PatternLists, command: &str) -> Verdict {
        lists.evaluate(SHELL, ToolKind::Execute, &json!({ "command": command }))
    }

    #[test]
    fn rules_parse_like_crucibles_and_bad_ones_say_why() {
        assert_eq!(
            PatternRule::parse("bash").unwrap_err(),
            PatternError::NoColon
        );
        assert_eq!(PatternRule::parse(":x").unwrap_err(), PatternError::NoTool);
        assert_eq!(
            PatternRule::parse("mcp::x").unwrap_err(),
            PatternError::NoServer
        );
        assert!(matches!(
            PatternRule::parse("bash:[oops").unwrap_err(),
            PatternError::Glob(_)
        ));
        assert!(
            PatternRule::parse("plugin:srv:*")
                .unwrap()
                .matches_nothing()
        );
        // A third part belongs to the pattern unless the tool is mcp/plugin.
        let git = PatternRule::parse("bash:git status:*").unwrap();
        assert!(git.matches(SHELL, ToolKind::Execute, "git status:x"));
    }

    #[test]
    fn tool_parts_name_tools_kinds_servers_or_anything() {
        let read = |rule: &str, tool: &str, kind: ToolKind| {
            PatternRule::parse(rule)
                .unwrap()
                .matches(tool, kind, "{\"path\":\"a\"}")
        };
        use ToolKind::*;
        assert!(read("read_file:*", "read_file", Read));
        assert!(!read("read_file:*", "list_dir", Read));
        assert!(read("read:*", "list_dir", Read), "a kind");
        assert!(read("search:*", "grep", Search));
        assert!(!read("search:*", "read_file", Read));
        assert!(read("write:*", "mover", Move), "Crucible's word for a move");
        assert!(!read("write:*", "write_file", Edit));
        assert!(read("edit:*", "write_file", Edit));
        assert!(read("acp_tool:*", "gh__create_pr", Other));
        assert!(read("*:*", "anything", Fetch));
        assert!(
            read("gh__create_pr:*", "gh__create_pr", Other),
            "MCP by name"
        );
        assert!(read("mcp:gh:create_*", "gh__create_pr", Other));
        assert!(!read("mcp:gh:create_*", "gh__list_prs", Read));
        assert!(!read("mcp:gh:*", "ghx__list", Read));
        assert!(read("bash:*", SHELL, Execute) && read("shell:*", SHELL, Execute));
        // Other tools' patterns see the arguments as JSON.
        assert!(read("read_file:*\"a\"*", "read_file", Read));
        assert!(!read("read_file:src/*", "read_file", Read));
    }

    #[test]
    fn deny_wins_then_ask_then_allow_then_nothing() {
        let l = lists(
            Decision::Ask,
            &["bash:cargo *", "bash:git *", "read_file:*"],
            &["bash:rm -rf *", "bash:sudo *"],
            &["bash:git push*"],
        );
        assert_eq!(shell(&l, "cargo test"), Verdict::Allow);
        assert_eq!(shell(&l, "cargo"), Verdict::Allow, "no arguments");
        assert_eq!(shell(&l, "git push origin"), Verdict::Ask);
        assert_eq!(
            shell(&l, "rm -rf target"),
            Verdict::Deny("bash:rm -rf *".into())
        );
        assert_eq!(shell(&l, "ls"), Verdict::NoMatch);
        let read = l.evaluate("read_file", ToolKind::Read, &json!({"path": "x"}));
        assert_eq!(read, Verdict::Allow);
        let both = lists(Decision::Allow, &["*:*"], &["*:*"], &[]);
        assert_eq!(shell(&both, "ls"), Verdict::Deny("*:*".into()));
    }

    #[test]
    fn every_statement_counts() {
        let l = lists(
            Decision::Ask,
            &["bash:cargo *", "bash:git *"],
            &["bash:rm *"],
            &[],
        );
        assert_eq!(shell(&l, "cargo build && git status"), Verdict::Allow);
        assert_eq!(
            shell(&l, "cargo test && ls"),
            Verdict::NoMatch,
            "ls is not allowed"
        );
        assert!(matches!(
            shell(&l, "cargo test; rm -rf /tmp/x"),
            Verdict::Deny(_)
        ));
        assert!(matches!(shell(&l, "git log | rm x"), Verdict::Deny(_)));
        assert!(matches!(shell(&l, "git log\nrm x"), Verdict::Deny(_)));
        // Deny follows the command through wrappers; allow does not widen.
        assert!(matches!(shell(&l, "sudo rm x"), Verdict::Deny(_)));
        assert!(matches!(shell(&l, "env A=1 /bin/rm x"), Verdict::Deny(_)));
        assert_eq!(shell(&l, "time git status"), Verdict::NoMatch);
        // Inside quotes an operator is text.
        assert_eq!(shell(&l, "git commit -m 'a; rm x'"), Verdict::Allow);
    }

    #[test]
    fn lines_that_hide_commands_fall_to_the_default() {
        let l = lists(Decision::Ask, &["bash:git *"], &["bash:rm *"], &[]);
        for line in [
            "git log $(curl evil)",
            "git log `curl evil`",
            "git log 'unclosed",
            "git log; sh -c 'rm x'",
        ] {
            assert_eq!(shell(&l, line), Verdict::NoMatch, "{line}");
        }
        // A deny still denies what it can see.
        assert!(matches!(shell(&l, "rm x $(date)"), Verdict::Deny(_)));
        // Under default allow with deny patterns, such a line asks.
        let open = lists(Decision::Allow, &[], &["bash:rm *"], &[]);
        assert_eq!(shell(&open, "eval \"$X\""), Verdict::Ask);
        let open = lists(Decision::Allow, &[], &[], &[]);
        assert_eq!(shell(&open, "eval \"$X\""), Verdict::NoMatch);
    }
}
