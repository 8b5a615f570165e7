//! Slash commands: what a session advertises (ACP
//! `available_commands_update`) and how a prompt's text becomes a command.
//! A prompt that starts with an unknown `/name` is not a command: it goes
//! to the model as text, as users expect. Built-ins may also be written
//! `/crucible:name` (seed 001's reserved namespace).
//!
//! MCP prompts are commands too, named by [`prompt_commands`]: a prompt
//! takes its own name unless a built-in has it or another server has a
//! prompt of that name; then it is offered as `/SERVER:NAME`, the server's
//! namespace as `crucible:` is ours. The built-in keeps its name.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};
use thiserror::Error;

use crate::client::CommandInfo;
use crate::mcp::McpPrompt;
use crate::model::Part;

/// The reserved namespace: `/crucible:context` is always the built-in.
pub const NAMESPACE: &str = "crucible:";

const BUILTIN: [(&str, &str, Option<&str>); 10] = [
    ("help", "List the commands", None),
    (
        "compact",
        "Summarize older turns to free context (optionally: what the summary should focus on)",
        Some("focus instructions"),
    ),
    (
        "context",
        "Show the context stack, or: checkpoint NAME, rollback NAME, pop [N], reset, summarize",
        Some("checkpoint NAME | rollback NAME [--dry-run] [--force] | pop [N] | reset | summarize"),
    ),
    (
        "rewind",
        "Take the conversation back to before the N-th last prompt (default 1) and put back the files the agent changed since; --dry-run shows the plan, --force overwrites files you changed, `undo` undoes the last rewind",
        Some("[N] [--dry-run] [--force] | undo"),
    ),
    (
        "budget",
        "Show the tokens and cost spent against the budgets, or set one for this session: turn_tokens, session_tokens or session_cost (`off` lifts it)",
        Some("LIMIT VALUE"),
    ),
    (
        "agent",
        "List agent cards, or switch to one",
        Some("agent name"),
    ),
    (
        "mode",
        "Show or switch the mode (plan, act, auto)",
        Some("mode"),
    ),
    ("model", "Show or switch the model", Some("model id")),
    (
        "clear",
        "Start the context over (the session, its mode and model stay)",
        None,
    ),
    (
        "permissions",
        "List the permission rules in force and where each comes from, or: revoke ID, trust (the project file)",
        Some("revoke ID | trust"),
    ),
];

pub fn builtin() -> Vec<CommandInfo> {
    BUILTIN
        .iter()
        .map(|(name, description, hint)| CommandInfo {
            name: name.to_string(),
            description: description.to_string(),
            hint: hint.map(str::to_string),
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help,
    Compact {
        focus: Option<String>,
    },
    Context(ContextCommand),
    Agent(Option<String>),
    Mode(Option<String>),
    Model(Option<String>),
    Clear,
    /// `/permissions`, `/permissions revoke ID` or `/permissions trust`
    /// (the argument as typed).
    Permissions(Option<String>),
    Rewind(RewindCommand),
    /// `/budget`, or `/budget LIMIT VALUE` (the arguments as typed).
    Budget(Option<String>),
}

/// How a rewind (or a rollback, which restores files the same way) runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RewindFlags {
    /// Show what would change, change nothing.
    pub dry_run: bool,
    /// Overwrite files the user changed since the agent wrote them.
    pub force: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewindCommand {
    /// `/rewind [N]`: back to before the N-th last user turn.
    Back { turns: usize, flags: RewindFlags },
    /// `/rewind undo`: the last rewind, undone.
    Undo(RewindFlags),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextCommand {
    Show,
    Checkpoint(String),
    Rollback(String, RewindFlags),
    Pop(usize),
    Reset,
    Summarize,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CommandError {
    #[error(
        "usage: /context [checkpoint NAME | rollback NAME | pop [N] | reset | summarize]; `{0}` is not one of them"
    )]
    ContextUsage(String),
    #[error("`/context {0}` needs a name, e.g. `/context {0} before-refactor`")]
    NeedsName(&'static str),
    #[error("`/context pop` takes a positive number of entries, not `{0}`")]
    BadCount(String),
    #[error("`/{command}` needs {missing}; usage: `/{command} {usage}`")]
    MissingArguments {
        command: String,
        missing: String,
        usage: String,
    },
    #[error(
        "usage: /rewind [N] [--dry-run] [--force], or /rewind undo [--dry-run] [--force]; `{0}` is not one of them"
    )]
    RewindUsage(String),
    #[error("unknown option `{0}`; the options are --dry-run and --force")]
    UnknownFlag(String),
    #[error("`/{0}` takes no arguments")]
    NoArguments(String),
    #[error("`/{command}` got more values than it has arguments; usage: `/{command} {usage}`")]
    TooManyValues { command: String, usage: String },
}

/// An MCP prompt offered as a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptCommand {
    /// Without the slash: the prompt's name, or `SERVER:NAME`.
    pub command: String,
    pub prompt: McpPrompt,
}

/// A name a client can show after `/`: one word.
fn command_word(name: &str) -> String {
    let word: String = name
        .chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect();
    if word.is_empty() { "_".into() } else { word }
}

/// The commands for `prompts` (in server order). A prompt is namespaced
/// when its name is a built-in's, when another server has a prompt of that
/// name (both are namespaced, so the names do not depend on which server
/// started first), or when it starts with `crucible:`. A prompt whose
/// namespaced name is still taken (a server named `crucible`, say) is left
/// out with a warning.
pub fn prompt_commands(prompts: &[McpPrompt]) -> Vec<PromptCommand> {
    let builtin: HashSet<&str> = BUILTIN.iter().map(|(name, _, _)| *name).collect();
    let mut counts: HashMap<String, usize> = HashMap::new();
    for prompt in prompts {
        *counts.entry(command_word(&prompt.name)).or_default() += 1;
    }
    let mut taken: HashSet<String> = HashSet::new();
    let mut out = Vec::new();
    for prompt in prompts {
        let word = command_word(&prompt.name);
        let bare = !builtin.contains(word.as_str())
            && counts.get(&word) == Some(&1)
            && !word.starts_with(NAMESPACE);
        let command = if bare {
            word
        } else {
            format!("{}:{word}", command_word(&prompt.server))
        };
        if command.starts_with(NAMESPACE) || !taken.insert(command.clone()) {
            tracing::warn!(
                server = %prompt.server,
                prompt = %prompt.name,
                "MCP prompt not offered as a command: its name is taken"
            );
            continue;
        }
        out.push(PromptCommand {
            command,
            prompt: prompt.clone(),
        });
    }
    out
}

impl PromptCommand {
    /// The arguments in declared order, optional ones in brackets.
    pub fn usage(&self) -> String {
        self.prompt
            .arguments
            .iter()
            .map(|arg| {
                if arg.required {
                    arg.name.clone()
                } else {
                    format!("[{}]", arg.name)
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    pub fn info(&self) -> CommandInfo {
        let from = format!("MCP prompt of `{}`", self.prompt.server);
        let description = match &self.prompt.description {
            Some(description) => format!("{} ({from})", description.trim()),
            None => format!("{from}: {}", self.prompt.name),
        };
        let usage = self.usage();
        CommandInfo {
            name: self.command.clone(),
            description,
            hint: (!usage.is_empty()).then_some(usage),
        }
    }

    /// The prompt's arguments from the text after the command. One
    /// argument takes the whole text (`name=` before it is allowed).
    /// Several: words (double quotes group words), each `name=value` for a
    /// declared name or else the next argument not given by name, in
    /// declared order; words beyond the last go to it. Empty values are
    /// left out; a required argument left out is an error naming it.
    pub fn arguments(&self, text: &str) -> Result<Map<String, Value>, CommandError> {
        let text = text.trim();
        let declared = &self.prompt.arguments;
        let mut values: Map<String, Value> = Map::new();
        match declared.as_slice() {
            [] if !text.is_empty() => {
                return Err(CommandError::NoArguments(self.command.clone()));
            }
            [] => {}
            [only] => {
                let value = text
                    .strip_prefix(only.name.as_str())
                    .and_then(|rest| rest.strip_prefix('='))
                    .unwrap_or(text)
                    .trim();
                if !value.is_empty() {
                    values.insert(only.name.clone(), Value::String(value.to_string()));
                }
            }
            _ => {
                let mut positional = Vec::new();
                for word in words(text) {
                    match word.split_once('=') {
                        Some((key, value)) if declared.iter().any(|a| a.name == key) => {
                            values.insert(key.to_string(), Value::String(value.to_string()));
                        }
                        _ => positional.push(word),
                    }
                }
                let open: Vec<&str> = declared
                    .iter()
                    .map(|a| a.name.as_str())
                    .filter(|name| !values.contains_key(*name))
                    .collect();
                if open.is_empty() && !positional.is_empty() {
                    return Err(CommandError::TooManyValues {
                        command: self.command.clone(),
                        usage: self.usage(),
                    });
                }
                let mut positional = positional.into_iter();
                for (index, name) in open.iter().enumerate() {
                    let value = if index + 1 == open.len() {
                        positional.by_ref().collect::<Vec<_>>().join(" ")
                    } else {
                        positional.next().unwrap_or_default()
                    };
                    values.insert((*name).to_string(), Value::String(value));
                }
                values.retain(|_, value| value.as_str().is_some_and(|v| !v.is_empty()));
            }
        }
        let missing: Vec<String> = declared
            .iter()
            .filter(|arg| arg.required && !values.contains_key(&arg.name))
            .map(|arg| format!("`{}`", arg.name))
            .collect();
        if !missing.is_empty() {
            return Err(CommandError::MissingArguments {
                command: self.command.clone(),
                missing: missing.join(", "),
                usage: self.usage(),
            });
        }
        Ok(values)
    }
}

/// Whitespace-separated words; double quotes group words and are dropped.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in text.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any || !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
                any = false;
            }
            c => current.push(c),
        }
    }
    if any || !current.is_empty() {
        out.push(current);
    }
    out
}

/// The MCP prompt command a prompt's text runs, with the text after the
/// name. Only for text-only prompts that no built-in takes.
pub fn find_prompt<'a>(
    commands: &'a [PromptCommand],
    parts: &[Part],
) -> Option<(&'a PromptCommand, String)> {
    let mut text = String::new();
    for part in parts {
        match part {
            Part::Text { text: piece } => text.push_str(piece),
            _ => return None,
        }
    }
    let rest = text.trim().strip_prefix('/')?;
    let (name, args) = match rest.split_once(char::is_whitespace) {
        Some((name, args)) => (name, args.trim()),
        None => (rest, ""),
    };
    let command = commands.iter().find(|c| c.command == name)?;
    Some((command, args.to_string()))
}

/// What a session advertises: the built-ins, then the prompts' commands.
pub fn advertised(prompts: &[PromptCommand]) -> Vec<CommandInfo> {
    let mut all = builtin();
    all.extend(prompts.iter().map(PromptCommand::info));
    all
}

/// The command a prompt's text names. `None`: not a built-in command, so
/// the text goes to the model.
pub fn parse(text: &str) -> Option<Result<Command, CommandError>> {
    let text = text.trim();
    let rest = text.strip_prefix('/')?;
    let rest = rest.strip_prefix(NAMESPACE).unwrap_or(rest);
    let (name, args) = match rest.split_once(char::is_whitespace) {
        Some((name, args)) => (name, args.trim()),
        None => (rest, ""),
    };
    let arg = (!args.is_empty()).then(|| args.to_string());
    let command = match name {
        "help" => Command::Help,
        "compact" => Command::Compact { focus: arg },
        "context" => return Some(parse_context(args).map(Command::Context)),
        "agent" => Command::Agent(arg),
        "mode" => Command::Mode(arg),
        "model" => Command::Model(arg),
        "clear" => Command::Clear,
        "permissions" => Command::Permissions(arg),
        "rewind" => return Some(parse_rewind(args).map(Command::Rewind)),
        "budget" => Command::Budget(arg),
        _ => return None,
    };
    Some(Ok(command))
}

/// The command a prompt names, when it is text only (an attachment makes
/// it a message for the model).
pub fn from_parts(parts: &[Part]) -> Option<Result<Command, CommandError>> {
    let mut text = String::new();
    for part in parts {
        match part {
            Part::Text { text: piece } => text.push_str(piece),
            _ => return None,
        }
    }
    parse(&text)
}

/// The flags among `words` (any order), and the other words.
fn rewind_flags<'a>(words: &[&'a str]) -> Result<(RewindFlags, Vec<&'a str>), CommandError> {
    let mut flags = RewindFlags::default();
    let mut rest = Vec::new();
    for word in words {
        match *word {
            "--dry-run" | "-n" => flags.dry_run = true,
            "--force" | "-f" => flags.force = true,
            // Applying is the default; `--yes` is accepted for scripts that say so.
            "--yes" | "-y" => {}
            flag if flag.starts_with("--") => {
                return Err(CommandError::UnknownFlag(flag.to_string()));
            }
            other => rest.push(other),
        }
    }
    Ok((flags, rest))
}

fn parse_rewind(args: &str) -> Result<RewindCommand, CommandError> {
    let words: Vec<&str> = args.split_whitespace().collect();
    let (flags, rest) = rewind_flags(&words)?;
    match rest.as_slice() {
        [] => Ok(RewindCommand::Back { turns: 1, flags }),
        ["undo"] => Ok(RewindCommand::Undo(flags)),
        [n] => match n.parse::<usize>() {
            Ok(turns) if turns > 0 => Ok(RewindCommand::Back { turns, flags }),
            _ => Err(CommandError::RewindUsage((*n).to_string())),
        },
        more => Err(CommandError::RewindUsage(more.join(" "))),
    }
}

fn parse_context(args: &str) -> Result<ContextCommand, CommandError> {
    let mut words = args.split_whitespace();
    let verb = words.next().unwrap_or("");
    let rest: Vec<&str> = words.collect();
    if verb == "rollback" {
        let (flags, name) = rewind_flags(&rest)?;
        if name.is_empty() {
            return Err(CommandError::NeedsName("rollback"));
        }
        return Ok(ContextCommand::Rollback(name.join(" "), flags));
    }
    let name = |what: &'static str| {
        if rest.is_empty() {
            Err(CommandError::NeedsName(what))
        } else {
            Ok(rest.join(" "))
        }
    };
    match verb {
        "" | "show" | "list" => Ok(ContextCommand::Show),
        "checkpoint" => name("checkpoint").map(ContextCommand::Checkpoint),
        "pop" => match rest.first() {
            None => Ok(ContextCommand::Pop(1)),
            Some(n) => match n.parse::<usize>() {
                Ok(n) if n > 0 => Ok(ContextCommand::Pop(n)),
                _ => Err(CommandError::BadCount((*n).to_string())),
            },
        },
        "reset" => Ok(ContextCommand::Reset),
        "summarize" | "compact" => Ok(ContextCommand::Summarize),
        other => Err(CommandError::ContextUsage(other.to_string())),
    }
}

/// `/help`'s text: the built-ins, then the MCP prompts (their arguments
/// shown as they are typed, optional ones in brackets).
pub fn help(prompts: &[PromptCommand]) -> String {
    let mut out = String::from("Commands:\n");
    for command in builtin() {
        match &command.hint {
            Some(hint) => out.push_str(&format!(
                "- `/{} [{hint}]`: {}\n",
                command.name, command.description
            )),
            None => out.push_str(&format!("- `/{}`: {}\n", command.name, command.description)),
        }
    }
    if !prompts.is_empty() {
        out.push_str("MCP prompts:\n");
        for prompt in prompts {
            let info = prompt.info();
            match &info.hint {
                Some(usage) => out.push_str(&format!(
                    "- `/{} {usage}`: {}\n",
                    info.name, info.description
                )),
                None => out.push_str(&format!("- `/{}`: {}\n", info.name, info.description)),
            }
        }
    }
    out.push_str("Built-ins can also be written `/crucible:NAME`. An MCP prompt whose name is taken is written `/SERVER:NAME`; with several arguments, give `name=value` or the values in the order shown. Any other text starting with `/` goes to the model.");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_parse_into_commands() {
        use Command as C;
        use ContextCommand as X;
        let cases: Vec<(&str, Option<Result<Command, CommandError>>)> = vec![
            ("/help", Some(Ok(C::Help))),
            ("  /compact  ", Some(Ok(C::Compact { focus: None }))),
            (
                "/compact keep the API decisions",
                Some(Ok(C::Compact {
                    focus: Some("keep the API decisions".into()),
                })),
            ),
            ("/context", Some(Ok(C::Context(X::Show)))),
            ("/crucible:context", Some(Ok(C::Context(X::Show)))),
            (
                "/context checkpoint a b",
                Some(Ok(C::Context(X::Checkpoint("a b".into())))),
            ),
            (
                "/context rollback a",
                Some(Ok(C::Context(X::Rollback("a".into(), Default::default())))),
            ),
            (
                "/context rollback a --dry-run",
                Some(Ok(C::Context(X::Rollback(
                    "a".into(),
                    RewindFlags {
                        dry_run: true,
                        force: false,
                    },
                )))),
            ),
            (
                "/rewind",
                Some(Ok(C::Rewind(RewindCommand::Back {
                    turns: 1,
                    flags: RewindFlags::default(),
                }))),
            ),
            (
                "/rewind 2 --force",
                Some(Ok(C::Rewind(RewindCommand::Back {
                    turns: 2,
                    flags: RewindFlags {
                        dry_run: false,
                        force: true,
                    },
                }))),
            ),
            (
                "/rewind undo --yes",
                Some(Ok(C::Rewind(RewindCommand::Undo(RewindFlags::default())))),
            ),
            (
                "/rewind 0",
                Some(Err(CommandError::RewindUsage("0".into()))),
            ),
            (
                "/rewind 2 --loud",
                Some(Err(CommandError::UnknownFlag("--loud".into()))),
            ),
            (
                "/context rollback",
                Some(Err(CommandError::NeedsName("rollback"))),
            ),
            ("/context pop", Some(Ok(C::Context(X::Pop(1))))),
            ("/context pop 3", Some(Ok(C::Context(X::Pop(3))))),
            (
                "/context pop 0",
                Some(Err(CommandError::BadCount("0".into()))),
            ),
            ("/context reset", Some(Ok(C::Context(X::Reset)))),
            ("/context summarize", Some(Ok(C::Context(X::Summarize)))),
            (
                "/context fly",
                Some(Err(CommandError::ContextUsage("fly".into()))),
            ),
            ("/agent", Some(Ok(C::Agent(None)))),
            (
                "/agent reviewer",
                Some(Ok(C::Agent(Some("reviewer".into())))),
            ),
            ("/mode plan", Some(Ok(C::Mode(Some("plan".into()))))),
            ("/model", Some(Ok(C::Model(None)))),
            ("/clear", Some(Ok(C::Clear))),
            ("/unknown thing", None),
            ("/usr/bin is where?", None),
            ("hello /help", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse(text), expected, "{text}");
        }
    }

    fn prompt(server: &str, name: &str, args: &[(&str, bool)]) -> McpPrompt {
        McpPrompt {
            server: server.into(),
            name: name.into(),
            description: Some(format!("{name} things")),
            arguments: args
                .iter()
                .map(|(name, required)| crate::mcp::McpPromptArgument {
                    name: (*name).into(),
                    description: None,
                    required: *required,
                })
                .collect(),
        }
    }

    #[test]
    fn prompt_names_give_way_to_builtins_and_to_each_other() {
        let prompts = vec![
            prompt("fx", "greet", &[("name", true)]),
            prompt("fx", "compact", &[]),
            prompt("fx", "review", &[]),
            prompt("other", "review", &[]),
            prompt("other", "two words", &[]),
            prompt("crucible", "help", &[]),
        ];
        let names: Vec<String> = prompt_commands(&prompts)
            .into_iter()
            .map(|c| c.command)
            .collect();
        assert_eq!(
            names,
            [
                "greet",
                "fx:compact",
                "fx:review",
                "other:review",
                "two_words"
            ]
        );
        let commands = prompt_commands(&prompts);
        let info = commands[0].info();
        assert_eq!(info.hint.as_deref(), Some("name"));
        assert_eq!(info.description, "greet things (MCP prompt of `fx`)");
        let all = advertised(&commands);
        assert_eq!(all.len(), BUILTIN.len() + 5);
        assert!(help(&commands).contains("- `/fx:compact`: compact things"));
        assert!(help(&commands).contains("- `/greet name`: greet things"));
        let found = find_prompt(
            &commands,
            &[Part::Text {
                text: "/fx:compact  now".into(),
            }],
        );
        assert_eq!(
            found.map(|(c, rest)| (c.command.as_str(), rest)),
            Some(("fx:compact", "now".to_string()))
        );
        assert!(
            find_prompt(
                &commands,
                &[Part::Text {
                    text: "/compact".into()
                }]
            )
            .is_none()
        );
    }

    #[test]
    fn prompt_arguments_map_from_the_text() {
        let command = |args: &[(&str, bool)]| PromptCommand {
            command: "p".into(),
            prompt: prompt("fx", "p", args),
        };
        let map = |pairs: &[(&str, &str)]| -> Map<String, Value> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_string(), Value::String((*v).to_string())))
                .collect()
        };
        let one = command(&[("text", true)]);
        assert_eq!(
            one.arguments(" hello  world "),
            Ok(map(&[("text", "hello  world")]))
        );
        assert_eq!(one.arguments("text=hi"), Ok(map(&[("text", "hi")])));
        assert_eq!(
            one.arguments(""),
            Err(CommandError::MissingArguments {
                command: "p".into(),
                missing: "`text`".into(),
                usage: "text".into()
            })
        );
        let none = command(&[]);
        assert_eq!(none.arguments(""), Ok(Map::new()));
        assert_eq!(
            none.arguments("x"),
            Err(CommandError::NoArguments("p".into()))
        );
        let several = command(&[("lang", true), ("style", false), ("text", true)]);
        assert_eq!(
            several.arguments("fr formal bonjour tout le monde"),
            Ok(map(&[
                ("lang", "fr"),
                ("style", "formal"),
                ("text", "bonjour tout le monde")
            ]))
        );
        assert_eq!(
            several.arguments("text=\"a b\" lang=de"),
            Ok(map(&[("text", "a b"), ("lang", "de")]))
        );
        assert_eq!(
            several.arguments("text=x de"),
            Ok(map(&[("text", "x"), ("lang", "de")]))
        );
        let err = several.arguments("style=plain").unwrap_err();
        assert_eq!(
            err.to_string(),
            "`/p` needs `lang`, `text`; usage: `/p lang [style] text`"
        );
        assert!(matches!(
            several.arguments("lang=a style=b text=c more"),
            Err(CommandError::TooManyValues { .. })
        ));
    }
}
